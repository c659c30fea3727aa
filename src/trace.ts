// CLAPPER_TRACE_START=1: one line on stderr for each step of a command's start, with the time since
// the process began (performance.now(), from Node's own time origin), to see where the time before
// the first create goes (npm run bench:startup reads them). Each step is written once, the first
// time it is reached; nothing is written without the variable.
//
// The code traced only publishes, on node:diagnostics_channel, and pays nothing while no one listens:
// the run says when a stage ended (RUN_STAGE), undici says when a request is created and when its
// answer's headers arrive (its own `undici:request:*` channels), and a step no event marks is
// published on START_STEP. This module listens only when the variable is set (src/metrics listens to
// undici's channels too, for its request counts, only when metrics are asked for).
import { channel, subscribe } from "node:diagnostics_channel";

/** A step of a command's start that no event of its own marks: its name, as written. */
const START_STEP = "clapper:start-step";
/** A stage of the run that ended (src/run/run.ts), as `{ stage }`. */
export const RUN_STAGE = "clapper:run-stage";

const steps = channel(START_STEP);

/** Publishes a step of a command's start; free while no one listens. */
export function startStep(step: string): void {
  if (steps.hasSubscribers) steps.publish(step);
}

/** The steps the run's stages end with, named as the trace has always named them. */
const STAGE_STEPS: Record<string, string> = {
  open: "lock taken",
  admission: "admitted",
  prepare: "prepared (skills, voices, cleanup)",
};

const on = ["1", "true", "yes", "on"].includes((process.env.CLAPPER_TRACE_START ?? "").trim().toLowerCase());
const seen = new Set<string>();

function write(step: string): void {
  if (seen.has(step)) return;
  seen.add(step);
  process.stderr.write(`clapper start: ${performance.now().toFixed(1)} ms ${step}\n`);
}

/** The headers undici was given for a request: a flat [name, value, ...] list, or raw lines. */
function hasHeader(request: { headers?: unknown }, name: string): boolean {
  const headers = request.headers;
  if (Array.isArray(headers)) return headers.some((h, i) => i % 2 === 0 && String(h).toLowerCase() === name);
  return typeof headers === "string" && headers.toLowerCase().includes(`${name}:`);
}

// An API request carries the key; a create, and only a create, carries an idempotency key
// (src/api/http.ts): uploads and result downloads, signed URLs, carry neither. "first create
// answered" is the first answer's headers to a create, whatever its status.
const isApi = (request: { headers?: unknown }) => hasHeader(request, "authorization");
const isCreate = (request: { headers?: unknown }) => isApi(request) && hasHeader(request, "idempotency-key");

if (on) {
  subscribe(START_STEP, (step) => write(step as string));
  subscribe(RUN_STAGE, (message) => {
    const step = STAGE_STEPS[(message as { stage: string }).stage];
    if (step) write(step);
  });
  subscribe("undici:request:create", (message) => {
    const { request } = message as { request: { headers?: unknown } };
    if (isCreate(request)) write("first create sent");
    else if (isApi(request)) write("first request sent");
  });
  subscribe("undici:request:headers", (message) => {
    const { request } = message as { request: { headers?: unknown } };
    if (isCreate(request)) write("first create answered");
  });
}

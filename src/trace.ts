// CLAPPER_TRACE_START=1: one line on stderr for each step of a command's start, with the time since
// the process began (performance.now(), from Node's own time origin), to see where the time before
// the first create goes (npm run bench:startup reads them). Each step is written once, the first
// time it is reached; nothing is written without the variable.
const on = ["1", "true", "yes", "on"].includes((process.env.CLAPPER_TRACE_START ?? "").trim().toLowerCase());
const seen = new Set<string>();

export function traceStart(step: string): void {
  if (!on || seen.has(step)) return;
  seen.add(step);
  process.stderr.write(`clapper start: ${performance.now().toFixed(1)} ms ${step}\n`);
}

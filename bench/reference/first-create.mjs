// The floor for bench:startup: the "30-line script" of issue 12. It reads the YAML manifest and
// POSTs its first shot's create, with no validation, state, lock, budget or pricing: what Node, the
// `yaml` parser and one request cost on this machine, before anything clapper adds.
// Usage: node first-create.mjs MANIFEST (CLAPPER_BASE_URL and CLAPPER_API_KEY from the environment).
import { readFileSync } from "node:fs";
import { parse } from "yaml";

const manifest = parse(readFileSync(process.argv[2], "utf8"));
const shot = { ...manifest.defaults?.shot, ...manifest.shots[0] };
const body = {
  model: shot.model,
  content: [{ type: "text", text: shot.prompt }],
  resolution: shot.resolution,
  duration: shot.duration,
  ...(shot.ratio ? { ratio: shot.ratio } : {}),
};
const res = await fetch(`${process.env.CLAPPER_BASE_URL}/vid/v2/video_generation`, {
  method: "POST",
  headers: { authorization: `Bearer ${process.env.CLAPPER_API_KEY}`, "content-type": "application/json" },
  body: JSON.stringify(body),
  signal: AbortSignal.timeout(10_000),
});
const text = await res.text();
if (!res.ok) {
  console.error(`first-create: HTTP ${res.status}: ${text.slice(0, 300)}`);
  process.exit(1);
}

// What bench:throughput and bench:startup share: the seeded mixed manifest of their scenarios, and
// the forwarding proxy that notes the moment of every request.
import http from "node:http";

const SEED = 20240611;

// ---------------------------------------------------------------- the manifest

/** The same manifest for every run: the sandbox's seeded generator (dist/, built by npm run build). */
const { seeded: rng } = await import(new URL("../dist/sandbox/random.js", import.meta.url).href);

const SUBJECTS = [
  "a lighthouse on a cliff at dusk",
  "the keeper climbing the spiral stairs",
  "a fishing boat lost in fog",
  "the great lens turning in the lamp room",
  "waves breaking over black rocks",
  "a storm rolling in from the west",
  "gulls circling the gallery rail",
  "an old logbook open on a desk",
];
const CAMERAS = [
  "slow aerial push-in",
  "handheld follow",
  "locked-off wide",
  "low-angle tilt up",
  "dolly out",
];
const LIGHTS = [
  "golden hour",
  "blue moonlight",
  "flat overcast light",
  "the beam sweeping past",
  "lamplight",
];
const WORDS = (
  "every night the light came on at seven and every night someone was watching from the water " +
  "old maren climbed the stairs she had climbed ten thousand times counting each step under her breath " +
  "the fog rolled in thick and grey the horn called out across the bay and no ship answered it"
).split(" ");

function pick(r, list) {
  return list[Math.floor(r() * list.length)];
}

/** Weighted pick: [[value, weight], ...]. */
function weighted(r, pairs) {
  const total = pairs.reduce((s, [, w]) => s + w, 0);
  let x = r() * total;
  for (const [v, w] of pairs) {
    x -= w;
    if (x < 0) return v;
  }
  return pairs.at(-1)[0];
}

/** A narration text of 20..300 characters, words from WORDS, sentence-cased, ending with a full stop. */
function narration(r) {
  const target = 20 + Math.floor(r() * 281);
  let text = "";
  while (text.length < target) {
    const word = pick(r, WORDS);
    const next = text ? `${text} ${word}` : word;
    if (next.length + 1 > target && text.length + 1 >= 20) break;
    text = next;
  }
  text = `${text.slice(0, 299)}.`;
  return text[0].toUpperCase() + text.slice(1);
}

/** The jobs of a scenario: about half shots, half lines, the same for the same count. */
export function makeJobs(count) {
  const r = rng(SEED);
  const shots = [];
  const lines = [];
  const nShots = Math.ceil(count / 2);
  for (let i = 0; i < nShots; i++) {
    const shot = {
      id: `s${String(i + 1).padStart(3, "0")}`,
      prompt: `${pick(r, SUBJECTS)}, ${pick(r, CAMERAS)}, ${pick(r, LIGHTS)} (shot ${i + 1})`,
      model: weighted(r, [
        ["Vid-H3", 7],
        ["vid-h3-lite", 3],
      ]),
      resolution: weighted(r, [
        ["480P", 35],
        ["768P", 40],
        ["1080P", 25],
      ]),
      duration: 4 + Math.floor(r() * 7),
      ratio: pick(r, ["16:9", "9:16", "1:1", "4:3", "3:4", "21:9"]),
    };
    if (r() < 0.15) shot.use_context_ir = true;
    shots.push(shot);
  }
  for (let i = 0; i < count - nShots; i++) {
    const line = {
      id: `n${String(i + 1).padStart(3, "0")}`,
      shot: shots[i % shots.length].id,
      text: narration(r),
      voice: pick(r, ["preset:en_female_bright", "preset:en_male_deep"]),
      speed: pick(r, [0.9, 1, 1.1, 1.2]),
    };
    if (r() < 0.3) line.emotion_description = pick(r, ["wistful", "uneasy", "calm", "urgent"]);
    lines.push(line);
  }
  return { shots, lines };
}

/** The manifest as YAML (JSON flow collections are YAML). */
export function manifestText(name, { shots, lines }) {
  return [
    `name: ${name}`,
    "output: ./output",
    // With a points cap each line's create is priced by a pricing read of its own (the cap holds
    // exactly against a price change: issue 9), one request more per line; BENCH_CAP=1 measures it.
    ...(process.env.BENCH_CAP === "1" ? ["budget: { max_points: 100000000 }"] : []),
    "defaults:",
    '  shot: { model: Vid-H3, resolution: 768P, duration: 5, ratio: "16:9" }',
    '  line: { language: EN, voice: "preset:en_female_bright" }',
    "shots:",
    ...shots.map((s) => `  - ${JSON.stringify(s)}`),
    "lines:",
    ...lines.map((l) => `  - ${JSON.stringify(l)}`),
    "",
  ].join("\n");
}

// ---------------------------------------------------------------- the proxy

/** A forwarding proxy that records every request: {at (performance.now()), method, path, status}. */
export async function startProxy() {
  const log = [];
  let target;
  const agent = new http.Agent({ keepAlive: true, maxSockets: 512 });
  const server = http.createServer((req, res) => {
    const rec = {
      at: performance.now(),
      method: req.method,
      path: (req.url ?? "/").split("?")[0],
      status: 0,
    };
    log.push(rec);
    const up = http.request(
      {
        host: target.hostname,
        port: target.port,
        method: req.method,
        path: req.url,
        headers: req.headers,
        agent,
      },
      (ur) => {
        rec.status = ur.statusCode ?? 0;
        ur.once("end", () => {
          rec.done = performance.now();
        });
        res.writeHead(ur.statusCode ?? 502, ur.rawHeaders);
        ur.pipe(res);
        ur.on("error", () => res.destroy());
      },
    );
    up.on("error", () => res.destroy());
    res.on("close", () => {
      if (!res.writableFinished) up.destroy();
    });
    req.pipe(up);
  });
  server.keepAliveTimeout = 10_000;
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${server.address().port}`;
  return {
    url,
    log,
    setTarget(t) {
      target = new URL(t);
    },
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      agent.destroy();
    },
  };
}

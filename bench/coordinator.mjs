// npm run bench:coordinator — what sharing one account through Redis (`--coordinator`) costs.
//
// Needs redis-server (Debian's package) and dist/ (npm run build). Two parts, each against its own
// sandbox process on loopback and a redis-server started here on a free port:
//
// 1. Cost per request. In this process, the same HTTP client and request gate a run uses send
//    BENCH_REQUESTS (6000) GET /audio/v1/pricing with 64 at a time, the rate ceiling out of reach
//    (`fixed:100000`), first alone, then with the rate and the in-flight caps shared through the
//    coordinator (every request then takes its moment from Redis: one script call). Alternated
//    BENCH_ROUNDS (3) times; the medians are compared: cost per request = 1/rate(shared) -
//    1/rate(alone), on one loopback connection (the client's work is the same in both).
//    Target: under 1 ms per request.
//
// 2. Makespan. A manifest of BENCH_JOBS (600) jobs (half 480P-768P shots of 4-6 s, half narration
//    lines) against a sandbox at time scale 0.02 limited to BENCH_RATE (40) requests/s per key:
//    `clapper run` once over all of it, then three `clapper run --coordinator` processes at once,
//    each over a third (three manifests: one run cannot be split before shards). Each makespan is
//    spawn to the last exit; every run must exit 0. The API requests and 429s each side met are
//    printed. Alternated BENCH_MAKESPAN_ROUNDS (3) times, each on a fresh sandbox; the medians are
//    compared. Target: three coordinated processes within 10% of the one process.
//
// Exits 1 when a target is missed or a run fails. BENCH_KEEP=1 keeps the temporary folders.
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { BIN, ROOT, scratch, startSandbox as start, startRedis } from "./lib.mjs";

const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 6000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const JOBS = Number(process.env.BENCH_JOBS ?? 600);
const RATE = Number(process.env.BENCH_RATE ?? 40);
const MAKESPAN_ROUNDS = Number(process.env.BENCH_MAKESPAN_ROUNDS ?? 3);
const KEY = "sk-ml-bench";

if (spawnSync("redis-server", ["--version"]).status !== 0) {
  console.error("bench:coordinator needs redis-server (apt-get install redis-server)");
  process.exit(2);
}
if (!existsSync(join(ROOT, "dist", "coord", "index.js"))) {
  console.error("dist/ is missing or old: npm run build first");
  process.exit(2);
}

const { HttpClient } = await import(join(ROOT, "dist/api/http.js"));
const { SpeechClient } = await import(join(ROOT, "dist/api/speech-client.js"));
const { ServiceGate } = await import(join(ROOT, "dist/rate/limiter.js"));
const { connectCoordinator } = await import(join(ROOT, "dist/coord/index.js"));
const { sharing } = await import(join(ROOT, "dist/run/coordinated.js"));

const { dir, children } = scratch("clapper-bench-coord-");
const startSandbox = (args) => start(children, KEY, args);

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

// ---------------------------------------------------------------- 1: cost per request

async function requestsPerSecond(sandbox, redisUrl) {
  const limits = { rps: 100_000, inFlight: 64, fixed: true };
  const gate = new ServiceGate({ video: limits, speech: limits });
  let coordinator;
  if (redisUrl) {
    coordinator = await connectCoordinator(redisUrl, { account: `bench-${process.pid}-${Date.now()}` });
    gate.share(sharing(coordinator, (e) => console.error("coordinator lost", e)));
  }
  const http = new HttpClient({ baseUrl: sandbox.url, apiKey: KEY, gate });
  const speech = new SpeechClient(http);
  let next = 0;
  const t0 = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: 64 }, async () => {
      while (next++ < REQUESTS) await speech.pricing();
    }),
  );
  const s = Number(process.hrtime.bigint() - t0) / 1e9;
  await http.close();
  await gate.stop();
  await coordinator?.close();
  return REQUESTS / s;
}

// ---------------------------------------------------------------- 2: makespan

function manifest(name, from, to) {
  const lines = [
    `name: ${name}`,
    "output: ./output",
    "defaults:",
    '  line: { language: EN, voice: "preset:en_female_bright" }',
    "shots:",
  ];
  const shots = [];
  const speech = [];
  for (let i = from; i < to; i++) {
    if (i % 2 === 0) {
      const res = i % 4 === 0 ? "480P" : "768P";
      shots.push(
        `  - { id: s${i}, model: Vid-H3, resolution: ${res}, duration: ${4 + (i % 3)}, prompt: "shot ${i} of ${name}" }`,
      );
    } else {
      speech.push(
        `  - { id: n${i}, text: "Line ${i}: every night the light came on at seven, and someone watched." }`,
      );
    }
  }
  return [...lines, ...shots, "lines:", ...speech, ""].join("\n");
}

function runCli(args, cwd) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [BIN, ...args], {
      cwd,
      env: { ...process.env, CLAPPER_BASE_URL: sandboxUrl, CLAPPER_API_KEY: KEY },
      stdio: ["ignore", "ignore", "pipe"],
    });
    children.push(child);
    let limited = 0;
    createInterface({ input: child.stderr }).on("line", (line) => {
      try {
        const e = JSON.parse(line);
        if (e.event === "rate") limited += Number(e.limited ?? 0);
      } catch {
        // not a JSON line
      }
    });
    child.on("exit", (code) => resolve({ code, limited }));
  });
}

let sandboxUrl = "";

async function makespan(round, parts, redisUrl) {
  const sb = await startSandbox(["--time-scale", "0.02", "--rate-limit", String(RATE)]);
  sandboxUrl = sb.url;
  const runs = [];
  const per = Math.ceil(JOBS / parts);
  for (let p = 0; p < parts; p++) {
    const name = `bench-r${round}-${parts}-${p}`;
    const d = join(dir, name);
    mkdirSync(d, { recursive: true });
    writeFileSync(join(d, "m.yaml"), manifest(name, p * per, Math.min(JOBS, (p + 1) * per)));
    runs.push(d);
  }
  const t0 = Date.now();
  const results = await Promise.all(
    runs.map((d) =>
      runCli(["run", "m.yaml", "--log-format", "json", ...(redisUrl ? ["--coordinator", redisUrl] : [])], d),
    ),
  );
  const ms = Date.now() - t0;
  const stats = await (await fetch(`${sb.url}/_sandbox/stats`)).json();
  const requests = Object.entries(stats.requests)
    .filter(([k]) => !k.includes("/_sandbox/") && !k.includes("/_media/"))
    .reduce((n, [, v]) => n + v, 0);
  sb.close();
  return {
    ms,
    requests,
    codes: results.map((r) => r.code),
    limited: results.reduce((n, r) => n + r.limited, 0),
  };
}

// ---------------------------------------------------------------- main

const redisUrl = await startRedis(children);
const sandbox = await startSandbox([]);
let ok = true;

console.log(`part 1: ${REQUESTS} GET /audio/v1/pricing, 64 at a time, ${ROUNDS} rounds alternated`);
const alone = [];
const shared = [];
for (let r = 0; r < ROUNDS; r++) {
  alone.push(await requestsPerSecond(sandbox));
  shared.push(await requestsPerSecond(sandbox, redisUrl));
  console.log(
    `  round ${r + 1}: alone ${alone.at(-1).toFixed(0)}/s, coordinated ${shared.at(-1).toFixed(0)}/s`,
  );
}
sandbox.close();
const a = median(alone);
const s = median(shared);
const cost = 1000 / s - 1000 / a;
const costOk = cost < 1;
if (!costOk) ok = false;
console.log(`  medians: alone ${a.toFixed(0)} requests/s, coordinated ${s.toFixed(0)} requests/s`);
console.log(
  `  coordinator cost per request: ${cost.toFixed(3)} ms (target < 1 ms: ${costOk ? "met" : "MISSED"})`,
);

console.log(
  `part 2: ${JOBS} jobs, sandbox at time scale 0.02 limited to ${RATE} requests/s, ${MAKESPAN_ROUNDS} rounds alternated`,
);
const ones = [];
const threes = [];
for (let r = 0; r < MAKESPAN_ROUNDS; r++) {
  for (const [label, list, m] of [
    ["one process", ones, await makespan(r, 1)],
    ["three coordinated", threes, await makespan(r, 3, redisUrl)],
  ]) {
    list.push(m);
    console.log(
      `  round ${r + 1}, ${label}: makespan ${(m.ms / 1000).toFixed(2)} s, ${m.requests} API requests (${(m.requests / JOBS).toFixed(2)} per job), exits ${m.codes.join(",")}, 429s ${m.limited}`,
    );
    if (m.codes.some((c) => c !== 0)) ok = false;
  }
}
const one = median(ones.map((m) => m.ms));
const three = median(threes.map((m) => m.ms));
const ratio = three / one;
const ratioOk = ratio <= 1.1;
if (!ratioOk) ok = false;
console.log(
  `  medians: one process ${(one / 1000).toFixed(2)} s, three coordinated ${(three / 1000).toFixed(2)} s`,
);
console.log(`  three coordinated / one: ${ratio.toFixed(3)} (target <= 1.10: ${ratioOk ? "met" : "MISSED"})`);
console.log(ok ? "bench:coordinator: every target met" : "bench:coordinator: a target was missed");
process.exit(ok ? 0 : 1);

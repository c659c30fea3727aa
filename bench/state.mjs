// npm run bench:state — what keeping the run's state in S3 (`--state s3://...`) costs.
//
// Needs redis-server (Debian's package) and dist/ (npm run build). A manifest of BENCH_JOBS (200)
// jobs (half shots, half narration lines) against a sandbox process at time scale 0.02, outputs
// to s3rver on loopback, every run with `--coordinator` (an S3 state needs it): `clapper run` with
// its state in a local file, then with its state in s3rver under the same coordinator and output,
// alternated BENCH_ROUNDS (3) times, each on a fresh sandbox. s3rver answers in about a millisecond;
// BENCH_S3_LATENCY_MS (default 20, roughly S3 in one region) delays every request to it, the
// output's included. Printed per side: the median makespan (spawn to exit), and for the S3 state
// its requests under the state's prefix: PutObjects of journal segments (group commits), per job,
// and the rest (claims, snapshots, rates, lists, reads).
//
// Exits 1 when a run fails. BENCH_KEEP=1 keeps the temporary folders.
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import S3rver from "s3rver";
import { BIN, ROOT, scratch, startSandbox as start, startRedis } from "./lib.mjs";

const JOBS = Number(process.env.BENCH_JOBS ?? 200);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const LATENCY_MS = Number(process.env.BENCH_S3_LATENCY_MS ?? 20);
const KEY = "sk-ml-bench";
const BUCKET = "clapper-bench";

if (spawnSync("redis-server", ["--version"]).status !== 0) {
  console.error("bench:state needs redis-server (apt-get install redis-server)");
  process.exit(2);
}
if (!existsSync(join(ROOT, "dist", "sinks", "s3-journal.js"))) {
  console.error("dist/ is missing or old: npm run build first");
  process.exit(2);
}

const { dir, children } = scratch("clapper-bench-state-");
const startSandbox = () => start(children, KEY, ["--time-scale", "0.02", "--allow-private-urls"]);

/** s3rver with every request delayed by LATENCY_MS and logged. */
async function startStore() {
  const requests = [];
  const server = new S3rver({
    port: 0,
    address: "127.0.0.1",
    silent: true,
    directory: join(dir, "s3"),
    configureBuckets: [{ name: BUCKET }],
  });
  server.middleware.unshift(async (ctx, next) => {
    if (LATENCY_MS > 0) await new Promise((r) => setTimeout(r, LATENCY_MS));
    await next();
    requests.push({ method: ctx.method, path: decodeURIComponent(ctx.path), query: ctx.querystring });
  });
  const { port } = await server.run();
  return { endpoint: `http://127.0.0.1:${port}`, requests, close: () => server.close() };
}

function manifest(name) {
  const shots = [];
  const lines = [];
  for (let i = 0; i < JOBS; i++) {
    if (i % 2 === 0) {
      shots.push(
        `  - { id: s${i}, model: Vid-H3, resolution: 480P, duration: ${4 + (i % 3)}, prompt: "shot ${i} of ${name}" }`,
      );
    } else {
      lines.push(`  - { id: n${i}, text: "Line ${i} of ${name}: the light came on at seven." }`);
    }
  }
  return [
    `name: ${name}`,
    "defaults:",
    '  line: { language: EN, voice: "preset:en_female_bright" }',
    "shots:",
    ...shots,
    "lines:",
    ...lines,
    "",
  ].join("\n");
}

function runCli(args, cwd, env) {
  return new Promise((resolve) => {
    const t0 = process.hrtime.bigint();
    const child = spawn(process.execPath, [BIN, ...args], { cwd, env, stdio: ["ignore", "ignore", "pipe"] });
    children.push(child);
    let tail = "";
    child.stderr.on("data", (b) => {
      tail = (tail + b.toString()).slice(-2000);
    });
    child.on("exit", (code) => resolve({ code, ms: Number(process.hrtime.bigint() - t0) / 1e6, tail }));
  });
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

const redis = await startRedis(children);
const store = await startStore();
const results = { local: [], s3: [] };
const counts = [];
for (let round = 1; round <= ROUNDS; round++) {
  const sb = await startSandbox();
  for (const side of ["local", "s3"]) {
    const name = `bench-${side}-${round}`;
    const cwd = mkdtempSync(join(dir, `${name}-`));
    const file = join(cwd, `${name}.yaml`);
    writeFileSync(file, manifest(name));
    const statePrefix = `states/${name}`;
    const args = [
      "run",
      file,
      "--log-format",
      "json",
      "--poll-interval",
      "0.05",
      "--coordinator",
      redis,
      "--output",
      `s3://${BUCKET}/out`,
      ...(side === "s3" ? ["--state", `s3://${BUCKET}/${statePrefix}`] : []),
    ];
    const from = store.requests.length;
    const r = await runCli(args, cwd, {
      ...process.env,
      CLAPPER_BASE_URL: sb.url,
      CLAPPER_API_KEY: KEY,
      AWS_ACCESS_KEY_ID: "S3RVER",
      AWS_SECRET_ACCESS_KEY: "S3RVER",
      AWS_REGION: "us-east-1",
      AWS_ENDPOINT_URL_S3: store.endpoint,
    });
    if (r.code !== 0) {
      console.error(`${name}: exit ${r.code}\n${r.tail}`);
      process.exit(1);
    }
    results[side].push(r.ms);
    if (side === "s3") {
      const mine = store.requests
        .slice(from)
        .filter(
          (q) => q.path.includes(`/${statePrefix}/`) || q.query.includes(encodeURIComponent(statePrefix)),
        );
      const segments = mine.filter((q) => q.method === "PUT" && q.path.includes("/journal/seg-")).length;
      counts.push({ segments, other: mine.length - segments });
    }
    console.log(`round ${round} ${side}: ${(r.ms / 1000).toFixed(2)} s`);
  }
  sb.close();
}
await store.close();
const segs = median(counts.map((c) => c.segments));
console.log(
  `\n${JOBS} jobs, S3 latency ${LATENCY_MS} ms: local state ${(median(results.local) / 1000).toFixed(2)} s, S3 state ${(median(results.s3) / 1000).toFixed(2)} s (medians of ${ROUNDS});` +
    ` S3 state: ${segs} segment PutObjects (${(segs / JOBS).toFixed(2)} per job), ${median(counts.map((c) => c.other))} other requests to the state`,
);

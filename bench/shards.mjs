// npm run bench:shards — one manifest of BENCH_JOBS (2000) jobs run whole by one process, then
// split in BENCH_SHARDS (4) shards that run at once through one coordinator, each from a folder
// of its own holding only the manifest (a machine of its own), all writing to one output folder.
//
// Needs redis-server (Debian's package) and dist/ (npm run build). Each round starts a fresh
// sandbox at time scale 0.02 limited to BENCH_RATE (40) requests/s per key, so the account's rate
// is what binds, as it does for a studio's big nightly run. Half the jobs are 480P-768P shots of
// 4-6 s, half narration lines (a third of them narrating a shot). Rounds alternate the two sides,
// BENCH_ROUNDS (2) times; the medians are compared.
//
// For each side it prints the makespan (spawn to the last exit), the API requests the sandbox
// answered and the 429s the runs met, and it checks the merged report the last shard wrote: every
// job succeeded, once (the sandbox created exactly BENCH_JOBS tasks). Targets: the shards not
// slower in total than one process (within 10%), and 429s under 3% of the requests.
// Exits 1 when a target is missed or a run fails. BENCH_KEEP=1 keeps the temporary folders.
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { BIN, ROOT, scratch, startSandbox as start, startRedis } from "./lib.mjs";

const JOBS = Number(process.env.BENCH_JOBS ?? 2000);
const SHARDS = Number(process.env.BENCH_SHARDS ?? 4);
const RATE = Number(process.env.BENCH_RATE ?? 40);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2);
const KEY = "sk-ml-bench";

if (spawnSync("redis-server", ["--version"]).status !== 0) {
  console.error("bench:shards needs redis-server (apt-get install redis-server)");
  process.exit(2);
}
if (!existsSync(join(ROOT, "dist", "pipeline", "shard.js"))) {
  console.error("dist/ is missing or old: npm run build first");
  process.exit(2);
}

const { dir, children } = scratch("clapper-bench-shards-");
const startSandbox = () => start(children, KEY, ["--time-scale", "0.02", "--rate-limit", String(RATE)]);

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** BENCH_JOBS jobs: half shots, half lines (every third line narrates a shot). */
function manifest(name) {
  const shots = [];
  const lines = [];
  for (let i = 0; i < JOBS; i++) {
    if (i % 2 === 0) {
      const res = i % 4 === 0 ? "480P" : "768P";
      shots.push(
        `  - { id: s${i}, model: Vid-H3, resolution: ${res}, duration: ${4 + (i % 3)}, prompt: "shot ${i} of ${name}" }`,
      );
    } else {
      const shot = i % 3 === 0 ? `, shot: s${i - 1}` : "";
      lines.push(
        `  - { id: n${i}${shot}, text: "Line ${i} of ${name}: every night the light came on at seven, and someone watched." }`,
      );
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

function runCli(args, cwd, url) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [BIN, ...args], {
      cwd,
      env: { ...process.env, CLAPPER_BASE_URL: url, CLAPPER_API_KEY: KEY },
      stdio: ["ignore", "ignore", "pipe"],
    });
    children.push(child);
    let limited = 0;
    let merged = false;
    createInterface({ input: child.stderr }).on("line", (line) => {
      try {
        const e = JSON.parse(line);
        if (e.event === "rate") limited += Number(e.limited ?? 0);
        if (e.event === "merged") merged = true;
      } catch {
        // not a JSON line
      }
    });
    child.on("exit", (code) => resolve({ code, limited, merged }));
  });
}

async function side(round, shards, redisUrl) {
  const sb = await startSandbox();
  const name = `bench-r${round}-${shards}`;
  const output = join(dir, `${name}-output`);
  const machines = [];
  for (let i = 1; i <= shards; i++) {
    const d = join(dir, `${name}-machine-${i}`);
    mkdirSync(d, { recursive: true });
    writeFileSync(join(d, "m.yaml"), manifest(name));
    machines.push(d);
  }
  const t0 = Date.now();
  const results = await Promise.all(
    machines.map((d, i) =>
      runCli(
        [
          "run",
          "m.yaml",
          "--log-format",
          "json",
          "--output",
          output,
          ...(shards > 1 ? ["--shard", `${i + 1}/${shards}`, "--coordinator", redisUrl] : []),
        ],
        d,
        sb.url,
      ),
    ),
  );
  const ms = Date.now() - t0;
  const stats = await (await fetch(`${sb.url}/_sandbox/stats`)).json();
  sb.close();
  const api = Object.entries(stats.requests).filter(
    ([k]) => !k.includes("/_sandbox/") && !k.includes("/_media/"),
  );
  const requests = api.reduce((n, [, v]) => n + v, 0);
  const byEndpoint = Object.fromEntries(api.sort((a, b) => b[1] - a[1]));
  const report = JSON.parse(readFileSync(join(output, name, "reports", "report.json"), "utf8"));
  return {
    ms,
    requests,
    created: stats.tasks_created.video + stats.tasks_created.speech,
    codes: results.map((r) => r.code),
    limited: results.reduce((n, r) => n + r.limited, 0),
    merges: results.filter((r) => r.merged).length,
    byEndpoint,
    report,
  };
}

const redisUrl = await startRedis(children);
console.log(
  `bench:shards: ${JOBS} jobs, sandbox at time scale 0.02 limited to ${RATE} requests/s, 1 process vs ${SHARDS} shards with --coordinator, ${ROUNDS} rounds alternated`,
);
let ok = true;
const ones = [];
const manys = [];
for (let r = 0; r < ROUNDS; r++) {
  for (const [label, list, shards] of [
    ["one process", ones, 1],
    [`${SHARDS} shards`, manys, SHARDS],
  ]) {
    const m = await side(r, shards, redisUrl);
    list.push(m);
    const c = m.report.counts;
    const whole = c.total === JOBS && c.succeeded === JOBS && m.created === JOBS;
    if (!whole || m.codes.some((code) => code !== 0)) ok = false;
    console.log(
      `  round ${r + 1}, ${label}: makespan ${(m.ms / 1000).toFixed(2)} s, ${m.requests} API requests (${(m.requests / JOBS).toFixed(2)} per job), 429s ${m.limited} (${((100 * m.limited) / m.requests).toFixed(1)}%), exits ${m.codes.join(",")}; report: ${c.succeeded}/${c.total} succeeded, ${m.report.points.spent} points; tasks created ${m.created}${shards > 1 ? `; merged by ${m.merges} shard(s)` : ""}${whole ? "" : " — NOT WHOLE"}`,
    );
    const endpoints = Object.entries(m.byEndpoint).map(([k, v]) => `${k} ${v}`);
    console.log(`    requests: ${endpoints.join(", ")}`);
  }
}
const one = median(ones.map((m) => m.ms));
const many = median(manys.map((m) => m.ms));
const ratio = many / one;
const ratioOk = ratio <= 1.1;
const limitedShare = Math.max(...manys.map((m) => m.limited / m.requests));
const limitedOk = limitedShare < 0.03;
if (!ratioOk || !limitedOk) ok = false;
console.log(
  `  medians: one process ${(one / 1000).toFixed(2)} s, ${SHARDS} shards ${(many / 1000).toFixed(2)} s`,
);
console.log(`  ${SHARDS} shards / one: ${ratio.toFixed(3)} (target <= 1.10: ${ratioOk ? "met" : "MISSED"})`);
console.log(
  `  429s of the shards: at most ${(100 * limitedShare).toFixed(1)}% of requests (target < 3%: ${limitedOk ? "met" : "MISSED"})`,
);
console.log(ok ? "bench:shards: every target met" : "bench:shards: a target was missed");
process.exit(ok ? 0 : 1);

// npm run bench:throughput — how close `clapper run`, with its DEFAULT limits, comes to the fastest
// makespan the sandbox allows, and how many requests it spends on the way.
//
// Three scenarios, each against its own fresh sandbox process (time scale BENCH_TIME_SCALE, 0.02):
//   1. 100 jobs, no rate limit;  2. 400 jobs, no rate limit;
//   3. 100 jobs, sandbox started with --rate-limit 5 (token bucket per key: 5 requests/s, burst 5).
// Jobs: a seeded (always the same) mixed manifest, half shots (Vid-H3 / vid-h3-lite, 480P/768P/1080P,
// 4..10 s, six ratios, some with use_context_ir), half narration lines (20..300 characters, two
// English preset voices, speeds 0.9..1.2), local output, no points cap (BENCH_CAP=1 adds one far
// above the cost: each line then costs a pricing read more, by design).
// clapper runs as a child process with no --rps/--in-flight/--poll-interval (BENCH_EXTRA_ARGS may
// add flags), `--log-format json`, through a small HTTP proxy in this process that forwards
// everything to the sandbox and notes the time, method, path and status of each request. The
// sandbox is started with --public-url set to the proxy, so result downloads pass through it too
// (and so on a port picked here rather than --port 0: with --public-url it prints that URL).
//
// Measured per scenario:
// - makespan: spawn of `clapper run` to its exit; the exit code must be 0 and reports/report.json
//   must list every job succeeded, else the scenario fails.
// - first create: spawn to the first POST /vid/v2/video_generation or POST /audio/v1/speech/jobs
//   arriving at the proxy.
// - API requests per job (everything but /_sandbox/ and /_media/), 429 answers, polls (GETs of the
//   task endpoints, single and list). The proxy's API count is checked against /_sandbox/stats.
//
// The bound, the makespan no client can beat, from the sandbox's own stage plans (deterministic:
// the sandbox draws no random numbers for timings; src/sandbox/video.ts stagePlan, speech.ts plan),
// all in simulated ms times the time scale s:
//   video  d = s * (5000 [queue, not shortened by lite]
//                   + f * ( 8000 [prompt optimization, use_context_ir only]
//                         + 30000 + 5000 * D [generation]
//                         + 2000 + 100 * D [upload]
//                         + 10000 + 2000 * D [upscale, 1080P/2K/4K only] ))
//          D = duration in s, f = 0.6 for vid-h3-lite, else 1.
//   speech d = s * (1000 [queue] + 2000 + 15 * C [one successful attempt]),
//          C = letters and digits of the text (/[\p{L}\p{Nd}]/u); speed does not change it.
// A job cannot end before (its create) + d; its download takes ~0 here.
// - No rate limit: every create can leave at 0, so bound = max over jobs of d.
// - Rate limit R/s, burst B (the sandbox's bucket: capacity max(1, R), full at the start; every
//   API request takes a token; media downloads and /_sandbox/ take none). The unavoidable requests:
//     P = 1 read before the first create (GET /audio/v1/pricing: the speech price, which is not a
//       constant of the spec, and the balance in the same answer; a video-only run needs a balance
//       read instead). clapper may read more (packages, summary); only one is counted.
//     N creates.
//     V = one GET /vid/v2/query/video_generation/{id} per video after it succeeded: list items never
//       carry content.url, only the single-task query does (video.ts list/json). Status callbacks
//       carry it too, but this sandbox (no --allow-private-urls) refuses a loopback callback_url,
//       so a client on this machine cannot use them.
//     L = ceil(S / 100) speech list pages after the last line ended (limit 1..100; items carry
//       output_url), S = number of lines.
//   The i-th token (0-based) cannot be taken before max(0, (i - B + 1) / R) s. Two lower bounds:
//   (a) creates only, longest job first (that order minimises the max): the k-th create is at
//       least the (P + k)-th token, so end_k >= max(0, (P + k - B + 1) / R) + d_k; a = max_k end_k.
//       (The video GETs that must interleave with later creates are ignored: that only lowers it.)
//   (b) all P + N + V + L requests: the last one leaves at >= (P + N + V + L - B) / R.
//   bound = max(a, b). For scenario 3 (R = B = 5, 50 videos, 50 lines) b = (1+100+50+1-5)/5 = 29.4 s
//   dominates, and it is reachable: videos created first, their GETs and the line creates share the
//   tokens that follow, one speech list last.
// ratio = makespan / bound. Startup of a client (Node, planning) counts in the makespan and not in
// the bound: it is part of what a user waits for.
//
// Targets: ratio <= 2 in scenarios 1 and 2, <= 1.15 in scenario 3; <= 1.6 API requests per job in
// every scenario. The first create is printed without a target here: bench:startup judges it
// against the floor (bench/reference/first-create.mjs). Exits 1 when one is missed
// (or a run fails, or the proxy's count disagrees with the sandbox's stats).
//
// Settings: BENCH_TIME_SCALE (0.02), BENCH_REPEAT (1: each scenario N times, medians reported),
// BENCH_SCENARIOS ("1,2,3"), BENCH_TIMEOUT (seconds before a hanging run is killed, 180),
// BENCH_TMP (temp folder; default the OS's), BENCH_EXTRA_ARGS (extra flags for `clapper run`),
// BENCH_KEEP (1: keep the temp folders; a failed run's folder is always kept), BENCH_CAP (1: a
// points cap in the manifest), BENCH_BIN (the runner's bin/clapper.js: a copy of another build's
// bin/, dist/ and package.json, to compare builds).
import { spawn, spawnSync } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import http from "node:http";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { makeJobs, manifestText, startProxy } from "./workload.mjs";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const TIME_SCALE = Number(process.env.BENCH_TIME_SCALE ?? 0.02);
const REPEAT = Math.max(1, Math.floor(Number(process.env.BENCH_REPEAT ?? 1)));
const TIMEOUT_S = Number(process.env.BENCH_TIMEOUT ?? 180);
const EXTRA_ARGS = (process.env.BENCH_EXTRA_ARGS ?? "").split(/\s+/).filter(Boolean);
const KEEP = process.env.BENCH_KEEP === "1";
const BASE = process.env.BENCH_TMP ?? tmpdir();
const KEY = "sk-ml-bench";
// BENCH_TRACE=DIR writes each run's timeline there (requests, clapper's log, each job's planned time) for study.
const TRACE = process.env.BENCH_TRACE ?? "";
/** The clapper that runs (BENCH_BIN: a copy of another build's bin/, dist/ and package.json); the sandbox is this one's. */
const RUNNER_BIN = process.env.BENCH_BIN ?? join(ROOT, "bin", "clapper.js");
// BENCH_NODE_ARGS: Node's own flags for the clapper child (--cpu-prof --cpu-prof-dir=DIR, say).
const NODE_ARGS = (process.env.BENCH_NODE_ARGS ?? "").split(/\s+/).filter(Boolean);
const SANDBOX_NODE_ARGS = (process.env.BENCH_SANDBOX_NODE_ARGS ?? "").split(/\s+/).filter(Boolean);

const SCENARIOS = [
  { id: 1, jobs: 100, rateLimit: null, maxRatio: 2 },
  { id: 2, jobs: 400, rateLimit: null, maxRatio: 2 },
  { id: 3, jobs: 100, rateLimit: 5, maxRatio: 1.15 },
];
const MAX_REQUESTS_PER_JOB = 1.6;
const wanted = new Set(
  (process.env.BENCH_SCENARIOS ?? "1,2,3")
    .split(",")
    .map((s) => Number(s.trim()))
    .filter((n) => n > 0),
);
const selected = SCENARIOS.filter((s) => wanted.has(s.id));
if (selected.length === 0) {
  console.error(`BENCH_SCENARIOS names none of ${SCENARIOS.map((s) => s.id).join(",")}`);
  process.exit(2);
}

mkdirSync(BASE, { recursive: true });
if (!existsSync(join(ROOT, "dist", "cli", "main.js"))) {
  console.log("dist/ is missing: building first (npm run build)");
  const built = spawnSync("npm", ["run", "build"], { cwd: ROOT, stdio: "inherit" });
  if (built.status !== 0 && !existsSync(join(ROOT, "dist", "cli", "main.js"))) process.exit(1);
}
{
  // What is measured is dist/: say so when src/ changed after it was built.
  const newest = (dir) =>
    readdirSync(dir, { withFileTypes: true }).reduce((m, e) => {
      const p = join(dir, e.name);
      return Math.max(m, e.isDirectory() ? newest(p) : statSync(p).mtimeMs);
    }, 0);
  const built = newest(join(ROOT, "dist"));
  if (newest(join(ROOT, "src")) > built) {
    console.log("note: src/ has changes newer than dist/: this measures dist/ (npm run build to refresh it)");
  }
}

const VIDEO_CREATE = "POST /vid/v2/video_generation";
const SPEECH_CREATE = "POST /audio/v1/speech/jobs";
const isApi = (path) => !path.startsWith("/_sandbox/") && !path.startsWith("/_media/");
const isPoll = (method, path) =>
  method === "GET" &&
  (path.startsWith("/vid/v2/query/video_generation") || path.startsWith("/audio/v1/speech/jobs"));

// ---------------------------------------------------------------- the bound

const UPSCALE = new Set(["1080P", "2K", "4K"]);
const COUNTED = /[\p{L}\p{Nd}]/gu;

/** Seconds from create to end of a shot, as src/sandbox/video.ts stagePlan plans it. */
function videoSeconds(shot) {
  const d = shot.duration;
  const f = shot.model === "vid-h3-lite" ? 0.6 : 1;
  let ms = 5000;
  if (shot.use_context_ir) ms += f * 8000;
  ms += f * (30_000 + 5000 * d);
  ms += f * (2000 + 100 * d);
  if (UPSCALE.has(shot.resolution)) ms += f * (10_000 + 2000 * d);
  return (ms * TIME_SCALE) / 1000;
}

/** Seconds from create to end of a line (one successful attempt), as src/sandbox/speech.ts plans it. */
function speechSeconds(line) {
  const chars = line.text.match(COUNTED)?.length ?? 0;
  return ((1000 + 2000 + 15 * chars) * TIME_SCALE) / 1000;
}

function bound({ shots, lines }, rateLimit) {
  const durations = [...shots.map(videoSeconds), ...lines.map(speechSeconds)].sort((a, b) => b - a);
  if (rateLimit === null) return { seconds: durations[0], detail: "max job time" };
  const R = rateLimit;
  const B = Math.max(1, R);
  const P = 1;
  const earliest = (token) => Math.max(0, (token - B + 1) / R);
  const a = Math.max(...durations.map((d, k) => earliest(P + k) + d));
  const total = P + durations.length + shots.length + Math.ceil(lines.length / 100);
  const b = earliest(total - 1);
  return {
    seconds: Math.max(a, b),
    detail: `creates longest first ${a.toFixed(2)} s; ${total} unavoidable requests ${b.toFixed(2)} s`,
  };
}

// ---------------------------------------------------------------- sandbox and proxy

/** A port free right now on 127.0.0.1 (the sandbox must listen on a known port: with --public-url it prints that URL). */
async function freePort() {
  const probe = http.createServer();
  await new Promise((resolve) => probe.listen(0, "127.0.0.1", resolve));
  const { port } = probe.address();
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

/**
 * A sandbox process on its own port, naming the proxy in its result URLs (--public-url), so
 * downloads pass through the proxy too. Tried again on another port if that one was taken meanwhile.
 */
async function startSandbox(publicUrl, rateLimit) {
  for (let attempt = 1; ; attempt++) {
    const port = await freePort();
    const args = [
      ...SANDBOX_NODE_ARGS,
      join(ROOT, "bin", "clapper.js"),
      "sandbox",
      "--port",
      String(port),
      "--time-scale",
      String(TIME_SCALE),
      "--points",
      "1000000000",
      "--key",
      KEY,
      "--public-url",
      publicUrl,
    ];
    if (rateLimit !== null) args.push("--rate-limit", String(rateLimit));
    const child = spawn(process.execPath, args, { stdio: ["ignore", "pipe", "inherit"] });
    try {
      await new Promise((resolve, reject) => {
        child.once("exit", (code) => reject(new Error(`sandbox exited with ${code}`)));
        createInterface({ input: child.stdout }).once("line", (line) => {
          if (line === `clapper sandbox listening on ${publicUrl}`) resolve();
          else reject(new Error(`unexpected first line from the sandbox: ${line}`));
        });
      });
    } catch (error) {
      await stop(child);
      if (attempt >= 3) throw error;
      continue;
    }
    child.stdout.resume();
    child.removeAllListeners("exit");
    return { child, url: `http://127.0.0.1:${port}` };
  }
}

async function sandboxStats(url) {
  const res = await fetch(`${url}/_sandbox/stats`);
  if (!res.ok) throw new Error(`GET /_sandbox/stats: ${res.status}`);
  return res.json();
}

async function stop(child) {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once("exit", resolve));
  child.kill("SIGTERM");
  await exited;
}

// ---------------------------------------------------------------- one run

async function runOnce(scenario, jobs) {
  const dir = mkdtempSync(join(BASE, `clapper-bench-throughput-${scenario.id}-`));
  const name = `throughput-${scenario.id}`;
  const manifest = join(dir, "bench.yaml");
  writeFileSync(manifest, manifestText(name, jobs));
  const proxy = await startProxy();
  const sandbox = await startSandbox(proxy.url, scenario.rateLimit);
  const problems = [];
  try {
    const realUrl = sandbox.url;
    proxy.setTarget(realUrl);
    const statsBefore = await sandboxStats(realUrl);

    const args = [...NODE_ARGS, RUNNER_BIN, "run", manifest, "--log-format", "json", ...EXTRA_ARGS];
    const spawnAt = performance.now();
    const child = spawn(process.execPath, args, {
      cwd: dir,
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, CLAPPER_BASE_URL: proxy.url, CLAPPER_API_KEY: KEY },
    });
    let timedOut = false;
    const guard = setTimeout(() => {
      timedOut = true;
      child.kill("SIGKILL");
    }, TIMEOUT_S * 1000);
    const logLines = [];
    createInterface({ input: child.stderr }).on("line", (line) => {
      if (TRACE) logLines.push(line);
      let entry;
      try {
        entry = JSON.parse(line);
      } catch {
        if (problems.length < 10) problems.push(line);
        return;
      }
      if (entry.level >= 50 && problems.length < 10) problems.push(line);
    });
    const stdout = [];
    child.stdout.on("data", (c) => stdout.push(c));
    const code = await new Promise((resolve) => child.on("exit", (c, sig) => resolve(c ?? sig)));
    const makespan = (performance.now() - spawnAt) / 1000;
    clearTimeout(guard);
    if (timedOut) problems.unshift(`killed after ${TIMEOUT_S} s (BENCH_TIMEOUT)`);

    const statsAfter = await sandboxStats(realUrl);
    const log = proxy.log.filter((r) => r.at >= spawnAt);
    if (TRACE) {
      mkdirSync(TRACE, { recursive: true });
      const base = join(TRACE, `s${scenario.id}-${Date.now()}`);
      const rel = (r) => ({ ...r, at: r.at - spawnAt, done: r.done === undefined ? null : r.done - spawnAt });
      writeFileSync(`${base}.requests.json`, JSON.stringify(log.map(rel)));
      writeFileSync(`${base}.log.jsonl`, logLines.join("\n"));
      const planned = {};
      for (const [i, s] of jobs.shots.entries()) planned[`shot/${s.id ?? i}`] = videoSeconds(s);
      for (const [i, l] of jobs.lines.entries()) planned[`line/${l.id ?? i}`] = speechSeconds(l);
      writeFileSync(
        `${base}.planned.json`,
        JSON.stringify({ spawnWall: Date.now() - (performance.now() - spawnAt), planned }),
      );
    }
    const api = log.filter((r) => isApi(r.path));
    const creates = api.filter((r) => {
      const k = `${r.method} ${r.path}`;
      return k === VIDEO_CREATE || k === SPEECH_CREATE;
    });
    const firstCreateMs = creates.length > 0 ? creates[0].at - spawnAt : Number.NaN;
    const polls = api.filter((r) => isPoll(r.method, r.path));
    const pollsList = polls.filter(
      (r) => r.path === "/vid/v2/query/video_generation" || r.path === "/audio/v1/speech/jobs",
    ).length;
    const byEndpoint = {};
    for (const r of api) {
      const k = `${r.method} ${templated(r.path)}`;
      byEndpoint[k] = (byEndpoint[k] ?? 0) + 1;
    }
    const statsApi = apiCount(statsAfter) - apiCount(statsBefore);

    const total = jobs.shots.length + jobs.lines.length;
    const reportFile = join(dir, "output", name, "reports", "report.json");
    let succeeded = 0;
    if (existsSync(reportFile)) {
      const report = JSON.parse(readFileSync(reportFile, "utf8"));
      succeeded = (report.jobs ?? []).filter((j) => j.status === "succeeded").length;
      if (report.counts?.succeeded !== succeeded)
        problems.push("report.json: counts.succeeded disagrees with jobs");
    } else problems.push(`no ${reportFile}`);
    const ok = code === 0 && succeeded === total && !timedOut;
    if (!ok) {
      problems.unshift(`clapper run exited with ${code}, ${succeeded}/${total} jobs succeeded`);
      const out = Buffer.concat(stdout).toString("utf8").trim();
      if (out) problems.push(out.slice(0, 2000));
    }
    if (statsApi !== api.length) {
      problems.push(`proxy counted ${api.length} API requests, /_sandbox/stats ${statsApi}`);
    }
    return {
      ok: ok && statsApi === api.length,
      dir,
      problems,
      makespan,
      firstCreateMs,
      requests: api.length,
      statsRequests: statsApi,
      perJob: api.length / total,
      creates: creates.length,
      tooMany: api.filter((r) => r.status === 429).length,
      polls: polls.length,
      pollsList,
      downloads: log.filter((r) => r.path.startsWith("/_media/")).length,
      byEndpoint,
      lastCreateS: creates.length > 0 ? (creates.at(-1).at - spawnAt) / 1000 : Number.NaN,
    };
  } finally {
    await stop(sandbox.child);
    await proxy.close();
  }
}

/** Paths with ids replaced, to group requests by endpoint as /_sandbox/stats does. */
function templated(path) {
  return path
    .replace(/^(\/vid\/v2\/query\/video_generation\/)[^/]+$/, "$1:task_id")
    .replace(/^(\/audio\/v1\/speech\/jobs\/)[^/]+$/, "$1:task_id");
}

function apiCount(stats) {
  let n = 0;
  for (const [endpoint, count] of Object.entries(stats.requests ?? {})) {
    const path = endpoint.split(" ")[1] ?? "";
    if (isApi(path)) n += count;
  }
  return n;
}

// ---------------------------------------------------------------- main

const median = (xs) => {
  const v = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (v.length === 0) return Number.NaN;
  const m = Math.floor(v.length / 2);
  return v.length % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
};
const verdict = (good) => (good ? "PASS" : "MISS");
/** A figure with `digits` decimals, or n/a when there is none (no complete run, no create seen). */
const fmt = (n, digits, unit = "") => (Number.isFinite(n) ? `${n.toFixed(digits)}${unit}` : "n/a");
const count = (n) => (Number.isFinite(n) ? String(n) : "n/a");

console.log(
  `bench:throughput: time scale ${TIME_SCALE}, ${REPEAT} run(s) per scenario, clapper defaults${EXTRA_ARGS.length ? ` + ${EXTRA_ARGS.join(" ")}` : ""}`,
);
let allOk = true;
const rows = [];
for (const scenario of selected) {
  const jobs = makeJobs(scenario.jobs);
  const b = bound(jobs, scenario.rateLimit);
  const limitText = scenario.rateLimit === null ? "no rate limit" : `--rate-limit ${scenario.rateLimit}`;
  console.log(
    `\n## scenario ${scenario.id}: ${scenario.jobs} jobs (${jobs.shots.length} shots, ${jobs.lines.length} lines), ${limitText}`,
  );
  console.log(`bound:          ${b.seconds.toFixed(2)} s (${b.detail})`);
  const runs = [];
  for (let i = 0; i < REPEAT; i++) {
    const r = await runOnce(scenario, jobs);
    runs.push(r);
    console.log(
      `  run ${i + 1}: makespan ${fmt(r.makespan, 2, " s")}, first create ${fmt(r.firstCreateMs, 0, " ms")}, last create ${fmt(r.lastCreateS, 2, " s")}, ` +
        `${r.requests} API requests (sandbox stats ${r.statsRequests}; ${r.creates} creates, ${r.polls} polls of which ${r.pollsList} lists), ` +
        `${r.tooMany} x 429, ${r.downloads} downloads`,
    );
    console.log(
      `         by endpoint: ${Object.entries(r.byEndpoint)
        .sort((x, y) => y[1] - x[1])
        .map(([k, n]) => `${k} ${n}`)
        .join(", ")}`,
    );
    if (!r.ok) {
      allOk = false;
      for (const p of r.problems) console.log(`  problem: ${p}`);
      console.log(`  kept: ${r.dir}`);
    } else if (!KEEP) rmSync(r.dir, { recursive: true, force: true });
  }
  // Figures come from the complete runs only: a killed or failed run has no makespan to judge.
  const good = runs.filter((r) => r.ok);
  const makespan = median(good.map((r) => r.makespan));
  const ratio = makespan / b.seconds;
  const perJob = median(good.map((r) => r.perJob));
  const tooMany = median(good.map((r) => r.tooMany));
  const polls = median(good.map((r) => r.polls));
  const firstCreate = median(good.map((r) => r.firstCreateMs));
  const runsOk = good.length === runs.length;
  // NaN (no complete run) compares false: MISS.
  const ratioOk = ratio <= scenario.maxRatio;
  const perJobOk = perJob <= MAX_REQUESTS_PER_JOB;
  const firstOk =
    scenario.maxFirstCreateMs === undefined ? good.length > 0 : firstCreate <= scenario.maxFirstCreateMs;
  const med = good.length > 1 ? ` (median of ${good.length})` : "";
  console.log(`runs:           ${good.length}/${REPEAT} complete and consistent: ${verdict(runsOk)}`);
  console.log(`makespan:       ${fmt(makespan, 2, " s")}${med}`);
  console.log(
    `ratio:          ${fmt(ratio, 2, "x")} the bound (target <= ${scenario.maxRatio}x: ${verdict(ratioOk)})`,
  );
  console.log(`requests/job:   ${fmt(perJob, 2)} (target <= ${MAX_REQUESTS_PER_JOB}: ${verdict(perJobOk)})`);
  console.log(`429 answers:    ${count(tooMany)}`);
  console.log(`polls:          ${count(polls)} (for information)`);
  console.log(
    `first create:   ${fmt(firstCreate, 0, " ms")} after spawn${
      scenario.maxFirstCreateMs === undefined
        ? " (no target)"
        : ` (target <= ${scenario.maxFirstCreateMs} ms: ${verdict(firstOk)})`
    }`,
  );
  if (!(runsOk && ratioOk && perJobOk && firstOk)) allOk = false;
  rows.push(
    `| ${scenario.id}: ${scenario.jobs} jobs, ${limitText} | ${fmt(makespan, 2, " s")} | ${b.seconds.toFixed(2)} s | ` +
      `${fmt(ratio, 2, "x")} (<= ${scenario.maxRatio}x ${verdict(ratioOk)}) | ${fmt(perJob, 2)} (<= ${MAX_REQUESTS_PER_JOB} ${verdict(perJobOk)}) | ` +
      `${count(tooMany)} | ${fmt(firstCreate, 0, " ms")}${scenario.maxFirstCreateMs === undefined ? "" : ` (<= ${scenario.maxFirstCreateMs} ms ${verdict(firstOk)})`} |`,
  );
}

console.log(
  `\nTime scale ${TIME_SCALE}, clapper's default limits${REPEAT > 1 ? `, medians of ${REPEAT} runs` : ""}:\n`,
);
console.log("| scenario | makespan | bound | ratio | req/job | 429s | first create |");
console.log("| --- | --- | --- | --- | --- | --- | --- |");
for (const row of rows) console.log(row);
console.log(allOk ? "\nall targets met" : "\nsome targets missed");
process.exit(allOk ? 0 : 1);

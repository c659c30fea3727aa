// npm run bench:run — `clapper run` end to end against a fast sandbox (its own process, loopback).
//
// 1. A 2,000-job manifest (1,000 shots at 480P/4 s from shots.csv, 1,000 lines from lines.csv) run
//    with --in-flight 200 --rps 500 --poll-interval 0.2 against a sandbox at time scale 0.001 (a
//    4 s 480P video takes ~57 ms, a line ~4 ms, so every task is still looked at while it runs).
//    Measured: API requests per job (sandbox stats, /_media/ downloads and /_sandbox/ control
//    excluded), the runner's CPU time per job (user + sys), and its peak memory (VmHWM).
// 2. A 1-shot manifest whose result is 1 GiB larger (POST /_sandbox/media {video_pad_bytes}):
//    the runner's peak memory while that result streams to disk, above the peak of the same
//    1-shot run with a normal-sized result (the idle baseline), and the stored file's size.
//
// Targets: <= 3 requests per job, < 5 ms CPU per job, < 300 MB peak for 2,000 jobs,
// < 64 MB above the baseline while streaming 1 GiB. Exits 1 when one is missed.
//
// CPU and peak memory come from the runner itself: a module preloaded with --import writes
// process.cpuUsage() and resourceUsage().maxRSS when it exits, and notes the CPU time spent when the
// first create request leaves (undici's diagnostics channel), which separates planning and
// pre-flight from orchestration. /proc/<pid>/status (VmHWM) is sampled while it runs too.
// Linux only (/proc); no tool beyond Node. CPU time grows on a busy machine (the sandbox shares it):
// run it on an otherwise idle one.
//
// Settings: BENCH_JOBS (2000), BENCH_TIME_SCALE (0.001), BENCH_IN_FLIGHT (200), BENCH_RPS (500),
// BENCH_POLL_INTERVAL (0.2), BENCH_STREAM_BYTES (1 GiB), BENCH_TMP (temp folder for the outputs),
// BENCH_RUNNER_NODE_ARGS (extra Node flags for the runner, e.g. "--cpu-prof --cpu-prof-dir=DIR"),
// BENCH_TIMEOUT (seconds before a hanging run is killed, 300).
import { spawn, spawnSync } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statfsSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const JOBS = Number(process.env.BENCH_JOBS ?? 2000);
const TIME_SCALE = Number(process.env.BENCH_TIME_SCALE ?? 0.001);
const IN_FLIGHT = Number(process.env.BENCH_IN_FLIGHT ?? 200);
const RPS = Number(process.env.BENCH_RPS ?? 500);
const POLL_INTERVAL = Number(process.env.BENCH_POLL_INTERVAL ?? 0.2);
const STREAM_BYTES = Number(process.env.BENCH_STREAM_BYTES ?? 1024 ** 3);
const TIMEOUT_S = Number(process.env.BENCH_TIMEOUT ?? 300);
const KEY = "sk-ml-bench";
/** Extra Node flags for the runner only, e.g. BENCH_RUNNER_NODE_ARGS="--cpu-prof --cpu-prof-dir=/tmp/prof". */
const RUNNER_NODE_ARGS = (process.env.BENCH_RUNNER_NODE_ARGS ?? "").split(/\s+/).filter(Boolean);
const MB = 1024 * 1024;
const TARGET = { requests: 3, cpuMs: 5, peakMb: 300, streamMb: 64 };

if (!existsSync("/proc/self/status")) {
  console.error("bench:run reads /proc: it runs on Linux only");
  process.exit(2);
}
if (!existsSync(join(ROOT, "dist", "cli", "main.js"))) {
  console.log("dist/ is missing: building first (npm run build)");
  const built = spawnSync("npm", ["run", "build"], { cwd: ROOT, stdio: "inherit" });
  if (built.status !== 0 && !existsSync(join(ROOT, "dist", "cli", "main.js"))) process.exit(1);
}

// ---------------------------------------------------------------- helpers

async function startSandbox() {
  const child = spawn(
    process.execPath,
    [
      join(ROOT, "bin", "clapper.js"),
      "sandbox",
      "--port",
      "0",
      "--time-scale",
      String(TIME_SCALE),
      "--points",
      "1000000000",
      "--key",
      KEY,
    ],
    { stdio: ["ignore", "pipe", "inherit"] },
  );
  const url = await new Promise((resolve, reject) => {
    child.once("exit", (code) => reject(new Error(`sandbox exited with ${code}`)));
    createInterface({ input: child.stdout }).once("line", (line) => {
      const match = line.match(/listening on (\S+)/);
      if (match) resolve(match[1]);
      else reject(new Error(`unexpected first line from the sandbox: ${line}`));
    });
  });
  child.stdout.resume();
  child.removeAllListeners("exit");
  const control = async (method, path, body) => {
    const res = await fetch(`${url}${path}`, {
      method,
      headers: { "content-type": "application/json" },
      ...(body ? { body: JSON.stringify(body) } : {}),
    });
    if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
    return res.json();
  };
  const stop = async () => {
    if (child.exitCode !== null) return;
    const exited = new Promise((resolve) => child.once("exit", resolve));
    child.kill("SIGTERM");
    await exited;
  };
  return { url, control, stop };
}

/** API requests in a stats snapshot: everything but media downloads/uploads and control. */
function apiRequests(stats) {
  const byEndpoint = {};
  let total = 0;
  for (const [endpoint, n] of Object.entries(stats.requests ?? {})) {
    const path = endpoint.split(" ")[1] ?? "";
    if (path.startsWith("/_media/") || path.startsWith("/_sandbox/") || path.startsWith("/_uploads/"))
      continue;
    byEndpoint[endpoint] = n;
    total += n;
  }
  return { total, byEndpoint };
}

function procStatus(pid) {
  try {
    const text = readFileSync(`/proc/${pid}/status`, "utf8");
    const kb = (name) => Number(new RegExp(`${name}:\\s+(\\d+)\\s+kB`).exec(text)?.[1] ?? 0) * 1024;
    return { hwm: kb("VmHWM") };
  } catch {
    return undefined; // exited between two samples
  }
}

/**
 * Runs `clapper run MANIFEST` as a child process as a user would, with a preloaded probe.
 * Resolves with its exit code, CPU (total, and spent before the first create), peak memory and
 * the events of its JSON log.
 */
async function runClapper(dir, manifest, env, { sampleMs = 10 } = {}) {
  const probe = join(dir, "probe.mjs");
  const probeOut = join(dir, "probe.json");
  writeFileSync(
    probe,
    `import { subscribe } from "node:diagnostics_channel";
import { writeFileSync } from "node:fs";
let firstCreate;
const onRequest = ({ request }) => {
  if (firstCreate === undefined && request.method === "POST" && /\\/(video_generation|speech\\/jobs)$/.test(request.path)) {
    firstCreate = process.cpuUsage();
  }
};
subscribe("undici:request:create", onRequest);
process.on("exit", () => {
  const cpu = process.cpuUsage();
  writeFileSync(${JSON.stringify(probeOut)}, JSON.stringify({ cpu, firstCreate, maxRSS: process.resourceUsage().maxRSS * 1024 }));
});
`,
  );
  const started = performance.now();
  const child = spawn(
    process.execPath,
    [
      ...RUNNER_NODE_ARGS,
      "--import",
      probe,
      join(ROOT, "bin", "clapper.js"),
      "run",
      manifest,
      "--log-format",
      "json",
      "--poll-interval",
      String(POLL_INTERVAL),
      "--rps",
      String(RPS),
      "--in-flight",
      String(IN_FLIGHT),
      // The streaming case sends a 1 GiB result, far over the limit derived from a 5 s shot.
      "--max-result-mb",
      "2048",
    ],
    { cwd: dir, stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, ...env } },
  );
  let hwm = 0;
  const sample = () => {
    const s = procStatus(child.pid);
    if (s) hwm = Math.max(hwm, s.hwm);
  };
  const timer = setInterval(sample, sampleMs);
  // A run that hangs is killed, so the benchmark ends and reports it.
  let timedOut = false;
  const guard = setTimeout(() => {
    timedOut = true;
    child.kill("SIGKILL");
  }, TIMEOUT_S * 1000);
  const events = {};
  const problems = [];
  createInterface({ input: child.stderr }).on("line", (line) => {
    let entry;
    try {
      entry = JSON.parse(line);
    } catch {
      if (problems.length < 10) problems.push(line);
      return;
    }
    if (entry.event) events[entry.event] = (events[entry.event] ?? 0) + 1;
    if (entry.level >= 40 && problems.length < 10) problems.push(line);
  });
  const stdout = [];
  child.stdout.on("data", (c) => stdout.push(c));
  const code = await new Promise((resolve) => child.on("exit", (c, sig) => resolve(c ?? sig)));
  clearInterval(timer);
  clearTimeout(guard);
  if (timedOut) problems.unshift(`killed after ${TIMEOUT_S} s (BENCH_TIMEOUT)`);
  const seconds = (performance.now() - started) / 1000;
  const p = existsSync(probeOut) ? JSON.parse(readFileSync(probeOut, "utf8")) : undefined;
  const cpuMs = (u) => (u ? (u.user + u.system) / 1000 : Number.NaN);
  return {
    code,
    seconds,
    cpuMs: cpuMs(p?.cpu),
    userMs: (p?.cpu?.user ?? Number.NaN) / 1000,
    sysMs: (p?.cpu?.system ?? Number.NaN) / 1000,
    preflightCpuMs: cpuMs(p?.firstCreate),
    peak: Math.max(hwm, p?.maxRSS ?? 0),
    events,
    problems,
    stdout: Buffer.concat(stdout).toString("utf8"),
  };
}

function failRun(what, r) {
  console.error(`${what}: clapper run exited with ${r.code}`);
  if (r.stdout.trim()) console.error(r.stdout.trim());
  for (const line of r.problems) console.error(`  ${line}`);
  return false;
}

const fmt = (n, digits = 1) => n.toFixed(digits);
const verdict = (good) => (good ? "ok" : "MISSED");

// ---------------------------------------------------------------- 1. 2,000 jobs

const base = process.env.BENCH_TMP ?? tmpdir();
const results = [];
let allOk = true;
const benchStarted = performance.now();

{
  const dir = mkdtempSync(join(base, "clapper-bench-run-"));
  const sandbox = await startSandbox();
  try {
    const shots = Math.ceil(JOBS / 2);
    const lines = JOBS - shots;
    const shotRows = ["id,prompt,duration,resolution"];
    for (let i = 0; i < shots; i++) {
      shotRows.push(`s${String(i).padStart(4, "0")},Shot ${i}: a lighthouse at dusk; waves below,4,480P`);
    }
    const lineRows = ["id,text"];
    for (let i = 0; i < lines; i++) {
      lineRows.push(`n${String(i).padStart(4, "0")},Line ${i}: the light came on at seven.`);
    }
    writeFileSync(join(dir, "shots.csv"), `${shotRows.join("\n")}\n`);
    writeFileSync(join(dir, "lines.csv"), `${lineRows.join("\n")}\n`);
    writeFileSync(
      join(dir, "bench.yaml"),
      [
        "name: bench",
        "output: ./output",
        "defaults:",
        '  shot: { model: Vid-H3, resolution: 480P, duration: 4, ratio: "16:9" }',
        '  line: { language: EN, voice: "preset:en_female_bright" }',
        "shots: shots.csv",
        "lines: lines.csv",
        "",
      ].join("\n"),
    );
    const before = apiRequests(await sandbox.control("GET", "/_sandbox/stats"));
    const r = await runClapper(dir, join(dir, "bench.yaml"), {
      CLAPPER_BASE_URL: sandbox.url,
      CLAPPER_API_KEY: KEY,
    });
    const after = apiRequests(await sandbox.control("GET", "/_sandbox/stats"));
    const stored = r.events.stored ?? 0;
    if (r.code !== 0 || stored !== JOBS) {
      allOk = failRun(`2,000-job run (${stored}/${JOBS} stored)`, r);
    }
    const requests = after.total - before.total;
    const perJob = requests / JOBS;
    const orchestrationMs = r.cpuMs - r.preflightCpuMs;
    const cpuPerJob = r.cpuMs / JOBS;
    const peakMb = r.peak / MB;
    results.push(
      [
        `jobs:                      ${JOBS} (${shots} shots 480P 4 s, ${lines} lines), ${stored} stored, exit ${r.code}`,
        true,
      ],
      [
        `settings:                  --in-flight ${IN_FLIGHT} --rps ${RPS} --poll-interval ${POLL_INTERVAL}, sandbox time scale ${TIME_SCALE}`,
        true,
      ],
      [`wall time:                 ${fmt(r.seconds)} s`, true],
      [
        `API requests per job:      ${fmt(perJob, 2)} (${requests} requests; target <= ${TARGET.requests}: ${verdict(perJob <= TARGET.requests)})`,
        perJob <= TARGET.requests,
      ],
      [
        `  by endpoint:             ${Object.entries(after.byEndpoint)
          .map(([k, n]) => [k, n - (before.byEndpoint[k] ?? 0)])
          .filter(([, n]) => n > 0)
          .sort((a, b) => b[1] - a[1])
          .map(([k, n]) => `${k} ${n}`)
          .join(", ")}`,
        true,
      ],
      [
        `CPU per job:               ${fmt(cpuPerJob, 2)} ms (${fmt(r.cpuMs / 1000, 2)} s in all: ${fmt(r.userMs / 1000, 2)} s user + ${fmt(r.sysMs / 1000, 2)} s sys; target < ${TARGET.cpuMs}: ${verdict(cpuPerJob < TARGET.cpuMs)})`,
        cpuPerJob < TARGET.cpuMs,
      ],
      [
        Number.isFinite(orchestrationMs)
          ? `  after planning:          ${fmt(orchestrationMs / JOBS, 2)} ms per job (${fmt(orchestrationMs / 1000, 2)} s from the first create on; ${fmt(r.preflightCpuMs / 1000, 2)} s to load, plan and pre-flight)`
          : "  after planning:          n/a (no create request was seen)",
        true,
      ],
      [
        `peak memory, all jobs:     ${fmt(peakMb, 0)} MB (VmHWM; target < ${TARGET.peakMb}: ${verdict(peakMb < TARGET.peakMb)})`,
        peakMb < TARGET.peakMb,
      ],
    );
    if (r.code !== 0 || stored !== JOBS) results.push(["  the run did not store every job", false]);
  } finally {
    await sandbox.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

// ---------------------------------------------------------------- 2. streaming 1 GiB

{
  const dir = mkdtempSync(join(base, "clapper-bench-stream-"));
  const fs = statfsSync(dir);
  const free = fs.bavail * fs.bsize;
  if (free < STREAM_BYTES + 256 * MB) {
    console.error(
      `not enough room in ${dir} for a ${fmt(STREAM_BYTES / MB, 0)} MB result (${fmt(free / MB, 0)} MB free): set BENCH_TMP`,
    );
    rmSync(dir, { recursive: true, force: true });
    process.exit(2);
  }
  const sandbox = await startSandbox();
  try {
    const oneShot = (name) => {
      const sub = join(dir, name);
      mkdirSync(sub);
      writeFileSync(
        join(sub, "shots.csv"),
        "id,prompt,duration,resolution\ns0001,A lighthouse at dusk; waves below,4,480P\n",
      );
      writeFileSync(
        join(sub, "one.yaml"),
        `name: ${name}\noutput: ./output\ndefaults:\n  shot: { model: Vid-H3, ratio: "16:9" }\nshots: shots.csv\n`,
      );
      return { sub, manifest: join(sub, "one.yaml"), file: join(sub, "output", name, "shots", "s0001.mp4") };
    };
    const env = { CLAPPER_BASE_URL: sandbox.url, CLAPPER_API_KEY: KEY };

    // The baseline: the same one-shot run with a result of normal size.
    const small = oneShot("baseline");
    await sandbox.control("POST", "/_sandbox/media", { video_pad_bytes: 0 });
    const b = await runClapper(small.sub, small.manifest, env, { sampleMs: 5 });
    if (b.code !== 0 || !existsSync(small.file)) allOk = failRun("baseline one-shot run", b);
    const mp4Bytes = existsSync(small.file) ? statSync(small.file).size : 0;

    const big = oneShot("stream");
    await sandbox.control("POST", "/_sandbox/media", { video_pad_bytes: STREAM_BYTES });
    const s = await runClapper(big.sub, big.manifest, env, { sampleMs: 5 });
    if (s.code !== 0) allOk = failRun("1 GiB streaming run", s);
    const bytes = existsSync(big.file) ? statSync(big.file).size : 0;
    rmSync(big.file, { force: true });
    const sizeOk = s.code === 0 && mp4Bytes > 0 && bytes === STREAM_BYTES + mp4Bytes;
    const overMb = (s.peak - b.peak) / MB;
    // Only a run that streamed the whole result (and a baseline that ran) says anything about memory.
    const streamOk = sizeOk && b.code === 0 && overMb < TARGET.streamMb;
    results.push(
      [
        `idle baseline (1 shot):    ${fmt(b.peak / MB, 0)} MB (peak of the same one-shot run with a ${mp4Bytes}-byte result)`,
        true,
      ],
      [
        `stored file:               ${bytes} bytes = ${STREAM_BYTES} padding + ${mp4Bytes} MP4 (${verdict(sizeOk)}), streamed in ${fmt(s.seconds, 1)} s`,
        sizeOk,
      ],
      [
        `peak memory, ${STREAM_BYTES === 1024 ** 3 ? "1 GiB" : `${fmt(STREAM_BYTES / MB, 0)} MiB`} result: ${fmt(s.peak / MB, 0)} MB, peak minus baseline ${fmt(overMb, 1)} MB (target < ${TARGET.streamMb}: ${verdict(streamOk)})`,
        streamOk,
      ],
    );
  } finally {
    await sandbox.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

for (const [line, ok] of results) {
  console.log(line);
  if (!ok) allOk = false;
}
console.log(`benchmark took ${fmt((performance.now() - benchStarted) / 1000, 0)} s`);
process.exitCode = allOk ? 0 : 1;

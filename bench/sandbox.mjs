// npm run bench:sandbox — single-task query throughput of the sandbox with 10,000 tasks stored,
// and the sandbox process's peak memory. Targets: >= 1,500 requests/s, < 300 MB peak.
// The sandbox runs as its own process (the CLI), loaded from this process over loopback.
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { Pool } from "undici";

const TASKS = Number(process.env.BENCH_TASKS ?? 10_000);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32);
const KEY = "sk-ml-bench";

const child = spawn(
  process.execPath,
  [
    "bin/clapper.js",
    "sandbox",
    "--port",
    "0",
    "--time-scale",
    "0.01",
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
    else reject(new Error(`unexpected first line: ${line}`));
  });
});

const pool = new Pool(url, { connections: CONNECTIONS, pipelining: 1 });
const headers = { authorization: `Bearer ${KEY}`, "content-type": "application/json" };

async function json(method, path, body) {
  const res = await pool.request({ method, path, headers, body: body && JSON.stringify(body) });
  const data = await res.body.json();
  if (res.statusCode !== 200) throw new Error(`${method} ${path}: ${res.statusCode} ${JSON.stringify(data)}`);
  return data;
}

const ids = [];
let next = 0;
const t0 = performance.now();
await Promise.all(
  Array.from({ length: CONNECTIONS }, async () => {
    while (next < TASKS) {
      const i = next++;
      const { task_id } = await json("POST", "/vid/v2/video_generation", {
        model: "Vid-H3",
        content: [{ type: "text", text: `bench shot ${i}: a lighthouse at dusk, waves below` }],
        duration: 4 + (i % 27),
        resolution: ["480P", "768P", "1080P"][i % 3],
      });
      ids.push(task_id);
    }
  }),
);
const createMs = performance.now() - t0;

let done = 0;
let errors = 0;
const latencies = [];
const deadline = performance.now() + SECONDS * 1000;
await Promise.all(
  Array.from({ length: CONNECTIONS }, async (_, worker) => {
    let i = worker;
    while (performance.now() < deadline) {
      i += CONNECTIONS;
      const id = ids[i % ids.length];
      const start = performance.now();
      const res = await pool.request({
        method: "GET",
        path: `/vid/v2/query/video_generation/${id}`,
        headers,
      });
      await res.body.text();
      latencies.push(performance.now() - start);
      if (res.statusCode === 200) done++;
      else errors++;
    }
  }),
);
latencies.sort((a, b) => a - b);
const pct = (p) =>
  latencies[Math.min(latencies.length - 1, Math.floor((p / 100) * latencies.length))].toFixed(2);

const status = readFileSync(`/proc/${child.pid}/status`, "utf8");
const peakKb = Number(status.match(/VmHWM:\s+(\d+)/)?.[1] ?? 0);
await pool.close();
child.kill("SIGTERM");

const rps = done / SECONDS;
console.log(
  `tasks stored:              ${ids.length} (created in ${(createMs / 1000).toFixed(1)} s, ${(ids.length / (createMs / 1000)).toFixed(0)}/s)`,
);
console.log(
  `single-task queries:       ${rps.toFixed(0)} requests/s over ${SECONDS} s, ${CONNECTIONS} connections (target >= 1500)`,
);
console.log(`query latency:             p50 ${pct(50)} ms, p99 ${pct(99)} ms, errors ${errors}`);
console.log(`sandbox peak memory:       ${(peakKb / 1024).toFixed(0)} MB (VmHWM; target < 300)`);
process.exitCode = rps >= 1500 && peakKb / 1024 < 300 && errors === 0 ? 0 : 1;

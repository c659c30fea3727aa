// npm run demo — a small storyboard rendered against the built-in sandbox into ./output/demo/.
// Interim: until `clapper run --sandbox jobs/demo.yaml` exists (issue 5), this drives the two
// services directly, so a fresh clone shows real files with no key and no cloud.
import { createWriteStream } from "node:fs";
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { pipeline } from "node:stream/promises";
import { request } from "undici";
import { startSandbox } from "../dist/sandbox/index.js";

const KEY = "sk-ml-demo";
const out = join(import.meta.dirname, "..", "output", "demo");
const sandbox = await startSandbox({ port: 0, timeScale: 0.01, keys: [KEY] });
const headers = { authorization: `Bearer ${KEY}`, "content-type": "application/json" };

async function api(method, path, body, extra = {}) {
  const res = await request(`${sandbox.url}${path}`, {
    method,
    headers: { ...headers, ...extra },
    body: body && JSON.stringify(body),
  });
  const data = await res.body.json();
  if (res.statusCode !== 200 || data.RetCode) throw new Error(`${method} ${path}: ${JSON.stringify(data)}`);
  return data;
}

const shots = [
  { id: "s01", text: "Wide shot: a lighthouse on a cliff at dusk, waves breaking below", duration: 5 },
  {
    id: "s02",
    text: "Close-up: the lamp room, the great lens starts to turn",
    duration: 4,
    resolution: "480P",
  },
];
const lines = [
  { id: "n01", text: "Every night, the light came on at seven.", voice: "en_female_bright" },
  { id: "n02", text: "And every night, someone was watching.", voice: "en_male_deep" },
];

try {
  await mkdir(out, { recursive: true });
  const before = await api("GET", "/vid/v2/query/point_usage_summary");
  const jobs = [];
  for (const s of shots) {
    const { task_id } = await api(
      "POST",
      "/vid/v2/video_generation",
      {
        model: "Vid-H3",
        content: [{ type: "text", text: s.text }],
        duration: s.duration,
        resolution: s.resolution,
      },
      { "idempotency-key": `demo-${s.id}` },
    );
    jobs.push({
      id: `shot/${s.id}`,
      file: `${s.id}.mp4`,
      get: () => api("GET", `/vid/v2/query/video_generation/${task_id}`),
    });
  }
  for (const l of lines) {
    const { task_id } = await api(
      "POST",
      "/audio/v1/speech/jobs",
      { text: l.text, language: "EN", voice: { source: "preset", voice_id: l.voice } },
      { "idempotency-key": `demo-${l.id}` },
    );
    jobs.push({
      id: `line/${l.id}`,
      file: `${l.id}.wav`,
      get: () => api("GET", `/audio/v1/speech/jobs/${task_id}`),
    });
  }
  for (const job of jobs) {
    let task;
    for (;;) {
      ({ task } = await job.get());
      if (["succeeded", "failed", "cancelled"].includes(task.status)) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    if (task.status !== "succeeded") throw new Error(`${job.id} ended ${task.status}`);
    const res = await request(task.content?.url ?? task.output_url);
    const target = join(out, job.file);
    await pipeline(res.body, createWriteStream(target));
    console.log(`${job.id.padEnd(10)} ${task.status}  ${target}`);
  }
  const after = await api("GET", "/vid/v2/query/point_usage_summary");
  console.log(`points spent: ${before.available_points - after.available_points}`);
} finally {
  await sandbox.close();
}

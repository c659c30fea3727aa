// The floor for bench:run's CPU per job: a bare client doing the work `clapper run` does for the
// same manifest, and nothing more. It creates every shot and line (at most IN_FLIGHT tasks of each
// service at a time), lists the tasks of each service every POLL_MS (the video list gives no result
// URL: one look at each task that left its unfinished lists), streams each result to a temporary file,
// flushes it (fdatasync) and renames it into place. No validation, state, journal, lock, budget,
// pricing, retries or report: what Node, HTTP and the disk cost on this machine for this work.
// Usage: node batch.mjs FOLDER (bench.yaml's shots.csv and lines.csv inside; results go to
// FOLDER/reference/); CLAPPER_BASE_URL and CLAPPER_API_KEY from the environment. Prints one JSON
// line: {stored, failed, requests}.
import { randomUUID } from "node:crypto";
import { mkdirSync, readFileSync } from "node:fs";
import { open, rename } from "node:fs/promises";
import { join } from "node:path";
import { parse } from "csv-parse/sync";

const IN_FLIGHT = Number(process.env.REFERENCE_IN_FLIGHT ?? 200);
const POLL_MS = Number(process.env.REFERENCE_POLL_MS ?? 200);
const BASE = process.env.CLAPPER_BASE_URL;
const AUTH = { authorization: `Bearer ${process.env.CLAPPER_API_KEY}` };
const folder = process.argv[2];
const out = join(folder, "reference");
mkdirSync(out, { recursive: true });
const rows = (file) => parse(readFileSync(join(folder, file), "utf8"), { columns: true });
let requests = 0;

async function api(method, path, body) {
  requests += 1;
  const res = await fetch(`${BASE}${path}`, {
    method,
    // A create carries a key of its own, as the speech service requires.
    headers: body ? { ...AUTH, "content-type": "application/json", "idempotency-key": randomUUID() } : AUTH,
    ...(body ? { body: JSON.stringify(body) } : {}),
    signal: AbortSignal.timeout(30_000),
  });
  const json = await res.json();
  if (!res.ok) throw new Error(`${method} ${path}: HTTP ${res.status} ${JSON.stringify(json)}`);
  return json;
}

async function store(url, file) {
  const res = await fetch(url, { signal: AbortSignal.timeout(60_000) });
  if (!res.ok) throw new Error(`GET ${url}: HTTP ${res.status}`);
  const tmp = `${file}.part`;
  const fh = await open(tmp, "w");
  try {
    for await (const chunk of res.body) await fh.write(chunk);
    await fh.datasync();
  } finally {
    await fh.close();
  }
  await rename(tmp, file);
}

/** One service: create in turn while fewer than IN_FLIGHT are unfinished, list, look, store. */
async function service({ jobs, create, unfinished, look, ext }) {
  const waiting = [...jobs];
  const live = new Map(); // task id -> { id, createdAt }
  let stored = 0;
  let failed = 0;
  const work = new Set();
  const track = (p) => {
    work.add(p);
    p.finally(() => work.delete(p));
  };
  const fill = () => {
    while (waiting.length > 0 && live.size + work.size < IN_FLIGHT) {
      const job = waiting.shift();
      const pending = create(job).then((taskId) => {
        live.set(taskId, { id: job.id, createdAt: Date.now() });
      });
      track(pending);
    }
  };
  fill();
  while (waiting.length > 0 || live.size > 0 || work.size > 0) {
    await new Promise((r) => setTimeout(r, POLL_MS));
    const asked = Date.now();
    // What the lists said: the tasks not ended yet, and the ended ones whose result they gave.
    const { open, ended } = await unfinished(live);
    for (const [taskId, job] of live) {
      // Created after the list was asked for: not in it yet, and not ended.
      if (!ended.has(taskId) && (job.createdAt >= asked || open.has(taskId))) continue;
      live.delete(taskId);
      const url = ended.has(taskId) ? Promise.resolve(ended.get(taskId)) : look(taskId);
      track(
        url.then(async (url) => {
          if (url === undefined) failed += 1;
          else {
            await store(url, join(out, `${job.id}.${ext}`));
            stored += 1;
          }
          fill();
        }),
      );
    }
    fill();
  }
  return { stored, failed };
}

const shots = rows("shots.csv");
const lines = rows("lines.csv");

const video = service({
  jobs: shots,
  ext: "mp4",
  create: async (s) =>
    (
      await api("POST", "/vid/v2/video_generation", {
        model: s.model,
        content: [{ type: "text", text: s.prompt }],
        resolution: s.resolution,
        duration: Number(s.duration),
        ratio: s.ratio,
      })
    ).task_id,
  // Its list gives no result URL: the unfinished ones, and one look at each task that left them.
  unfinished: async () => {
    const open = new Set();
    for (const status of ["queued", "running"]) {
      for (let page = 1; ; page++) {
        const r = await api(
          "GET",
          `/vid/v2/query/video_generation?page_size=100&page_num=${page}&filter.status=${status}`,
        );
        for (const t of r.items) open.add(t.id);
        if (r.items.length < 100 || page * 100 >= r.total) break;
      }
    }
    return { open, ended: new Map() };
  },
  look: async (id) => {
    const { task } = await api("GET", `/vid/v2/query/video_generation/${id}`);
    return task.status === "succeeded" ? task.content.url : undefined;
  },
});

const speech = service({
  jobs: lines,
  ext: "mp3",
  create: async (l) =>
    (
      await api("POST", "/audio/v1/speech/jobs", {
        text: l.text,
        language: "EN",
        voice: { source: "preset", voice_id: "en_female_bright" },
        speed: Number(l.speed),
      })
    ).task_id,
  // Its list (newest first) gives each ended task's result URL: pages until every live task was seen.
  unfinished: async (live) => {
    const open = new Set();
    const ended = new Map();
    let seen = 0;
    for (let offset = 0; seen < live.size; ) {
      const r = await api("GET", `/audio/v1/speech/jobs?limit=100&offset=${offset}`);
      for (const t of r.items) {
        if (live.has(t.task_id)) seen += 1;
        if (t.status === "succeeded") ended.set(t.task_id, t.output_url);
        else if (t.status === "failed" || t.status === "cancelled") ended.set(t.task_id, undefined);
        else open.add(t.task_id);
      }
      offset += r.items.length;
      if (r.items.length === 0 || offset >= r.total) break;
    }
    return { open, ended };
  },
  look: async (id) => {
    const { task } = await api("GET", `/audio/v1/speech/jobs/${id}`);
    return task.status === "succeeded" ? task.output_url : undefined;
  },
});

const [v, s] = await Promise.all([video, speech]);
console.log(JSON.stringify({ stored: v.stored + s.stored, failed: v.failed + s.failed, requests }));

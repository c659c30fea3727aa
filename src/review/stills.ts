// Stills for the review page's grid: one small JPEG per stored video (the current output and every
// kept version), a frame at min(1 s, middle), kept beside the outputs in `stills/` so that the
// next report reuses it. A still is remade only when its video's sha256 changes (stills/index.json
// says which video each still was made from). A still that cannot be made is a warning and a
// placeholder on the page, never a failed run or report.
import { readFile, rm } from "node:fs/promises";
import { join } from "node:path";
import { Readable } from "node:stream";
import { findFfmpeg } from "../episode/ffmpeg-binary.js";
import { FfmpegError, type Launch, runFfmpeg } from "../episode/ffmpeg-run.js";
import { Spawner } from "../episode/spawner.js";
import { makeWorkFolder } from "../episode/work-folder.js";
import { KINDS } from "../report/kinds.js";
import type { Report } from "../report/model.js";
import type { Sink } from "../sinks/sink.js";

/** The grid shows stills 320 px wide (about 2x its 150 px tiles, sharp on a dense screen). */
const WIDTH = 320;
/** A 320 px JPEG is a few tens of kB; anything far larger is not one of ours. */
const MAX_STILL_BYTES = 512 * 1024;
const MAX_INDEX_BYTES = 4 * 1024 * 1024;
/** One frame from a local file takes well under a second; an S3 read over a slow link takes longer. */
const STILL_TIMEOUT_MS = 30_000;
/**
 * Presigned input links for ffmpeg live about as long as the still takes to make (its timeout): the
 * link is on ffmpeg's command line, where others on the machine could read it while it runs.
 */
const INPUT_LINK_SECONDS = 120;
/** Two ffmpegs at a time: the machine also runs the rest of the run. */
const PARALLEL = 2;
/** Videos per ffmpeg: enough that starting processes costs little, few enough that one slow input holds back few. */
const BATCH = 24;
/** How long stills made during a run wait for more videos before a batch starts. */
const GATHER_MS = 300;
const INDEX_KEY = "stills/index.json";

/** A stored video the page shows: its address, and what it holds. */
interface VideoFile {
  uri: string;
  sha256: string;
}

export interface StillsOptions {
  signal?: AbortSignal | undefined;
  /** ffmpeg's nice value: stills made beside a run give way to it. */
  nice?: number;
  timeoutMs?: number;
  /**
   * Where ffmpeg is. By default the one `assemble` would run: CLAPPER_FFMPEG, then ffmpeg on PATH,
   * then the packaged binary (src/episode/ffmpeg-binary.ts).
   */
  binary?: () => string | Promise<string>;
  /** Where each ffmpeg is started from: this process by default. */
  launch?: Launch | undefined;
}

interface Stills {
  /** Video uri -> the still as a `data:image/jpeg;base64,...` URI. */
  images: Map<string, string>;
  /** Video uri -> why it has no still. */
  missing: Map<string, string>;
  /** What people should know: stills that could not be made. */
  warnings: string[];
  made: number;
  reused: number;
}

type Index = Record<string, { sha256: string; video: string }>;

/** The videos of a report that get a still: each stored output, and each kept version. */
function videosOf(report: Report): VideoFile[] {
  const seen = new Set<string>();
  const out: VideoFile[] = [];
  const add = (f: VideoFile) => {
    if (seen.has(f.uri)) return;
    seen.add(f.uri);
    out.push(f);
  };
  for (const job of report.jobs) {
    if (!KINDS[job.kind].still) continue;
    if (job.output) add(job.output);
    for (const v of job.versions ?? []) add(v);
  }
  return out;
}

/** The key of `uri` in the sink, or undefined when it is stored elsewhere. */
export function keyIn(sink: Sink, uri: string): string | undefined {
  const root = sink.uri("").replace(/\/+$/, "");
  if (!uri.startsWith(`${root}/`)) return undefined;
  return uri.slice(root.length + 1);
}

/** `shots/s03-take-2.mp4` -> `stills/s03-take-2.jpg`; a version keeps its `.v1`. */
export function stillKey(videoKey: string): string {
  const base = videoKey.split("/").pop() ?? videoKey;
  const stem = base.replace(/\.[^.]*$/, "");
  // Outputs are unique by key, not by file name: a name seen in two folders keeps its folder.
  const folder = videoKey.includes("/") ? videoKey.slice(0, videoKey.lastIndexOf("/")) : "";
  const prefix = folder === "" || folder === "shots" ? "" : `${folder.replaceAll("/", "_")}_`;
  return `stills/${prefix}${stem}.jpg`;
}

async function readIndex(sink: Sink): Promise<Index> {
  try {
    const text = await sink.readText(INDEX_KEY, MAX_INDEX_BYTES);
    const parsed: unknown = text ? JSON.parse(text) : {};
    if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) return {};
    const index: Index = {};
    for (const [key, value] of Object.entries(parsed as Record<string, unknown>)) {
      const v = value as { sha256?: unknown; video?: unknown } | null;
      if (typeof v?.sha256 === "string" && typeof v.video === "string")
        index[key] = { sha256: v.sha256, video: v.video };
    }
    return index;
  } catch {
    // A broken index only costs the stills being made again.
    return {};
  }
}

/** What ffmpeg reads the video from: a local path, or a presigned link to the object. */
async function inputOf(sink: Sink, key: string): Promise<string> {
  if (sink.localPath) return sink.localPath(key);
  if (sink.presignMany) return (await sink.presignMany([key], INPUT_LINK_SECONDS)).urls[0] ?? "";
  throw new Error("the output can be neither read locally nor linked");
}

/** One frame as a 320 px JPEG on stdout: at 1 s, or the first frame for a video shorter than 2 s. */
async function frame(input: string, at: number, binary: string, o: StillsOptions): Promise<Buffer> {
  const args = ["-nostdin", "-v", "error", "-ss", String(at), "-i", input, "-frames:v", "1"];
  args.push("-vf", `scale=${WIDTH}:-2`, "-f", "image2pipe", "-c:v", "mjpeg", "-q:v", "5", "pipe:1");
  const result = await runFfmpeg(args, {
    binary,
    launch: o.launch,
    timeoutMs: o.timeoutMs ?? STILL_TIMEOUT_MS,
    signal: o.signal,
    ...(o.nice ? { nice: o.nice } : {}),
    maxStdout: MAX_STILL_BYTES,
  });
  return result.stdout;
}

async function makeStill(input: string, binary: string, o: StillsOptions): Promise<Buffer> {
  // Seeking past the end yields no frame (and exit 0): a video under 2 s has its middle before 1 s.
  const at1 = await frame(input, 1, binary, o);
  if (at1.length > 0) return at1;
  const first = await frame(input, 0, binary, o);
  if (first.length > 0) return first;
  throw new Error("ffmpeg found no frame in it");
}

/**
 * The frame at 1 s of each input, by one ffmpeg: a process per still cost a large run more than the
 * stills (a fork of the whole run each time). An input that gives no frame here (shorter than 2 s,
 * or broken, or the whole batch refused) is left undefined, for makeStill to try on its own.
 */
async function batchFrames(
  inputs: readonly string[],
  binary: string,
  o: StillsOptions,
): Promise<Array<Buffer | undefined>> {
  const dir = await makeWorkFolder("stills");
  try {
    const args = ["-nostdin", "-v", "error"];
    for (const input of inputs) args.push("-ss", "1", "-i", input);
    inputs.forEach((_, i) => {
      args.push("-map", `${i}:v:0`, "-frames:v", "1", "-vf", `scale=${WIDTH}:-2`, "-q:v", "5");
      args.push("-f", "image2", "-update", "1", join(dir, `${i}.jpg`));
    });
    const ran = await runFfmpeg(args, {
      binary,
      launch: o.launch,
      timeoutMs: (o.timeoutMs ?? STILL_TIMEOUT_MS) + inputs.length * 2000,
      signal: o.signal,
      ...(o.nice ? { nice: o.nice } : {}),
    }).then(
      () => true,
      (error: unknown) => {
        // Stopped: nothing more is to be made. Any other failure: each input is tried alone.
        if (o.signal?.aborted) throw error;
        return false;
      },
    );
    if (!ran) return inputs.map(() => undefined);
    return await Promise.all(
      inputs.map(async (_, i) => {
        const jpeg = await readFile(join(dir, `${i}.jpg`)).catch(() => undefined);
        return jpeg && jpeg.length > 0 && jpeg.length <= MAX_STILL_BYTES ? jpeg : undefined;
      }),
    );
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

function reason(error: unknown): string {
  if (error instanceof FfmpegError) return error.message;
  return error instanceof Error ? error.message : String(error);
}

type Queued = { video: VideoFile; key: string };

/** Where a batch's stills go: the index of stills, the images made, and the videos that have none. */
interface Book {
  index: Index;
  made?: Pick<Stills, "images" | "made">;
  fail: (video: VideoFile, why: string) => void;
}

/** One batch of stills made and written beside the outputs, each recorded in the book. */
async function makeBatch(
  sink: Sink,
  items: readonly Queued[],
  findBinary: () => Promise<string>,
  o: StillsOptions,
  book: Book,
): Promise<void> {
  const kept = new Set<string>();
  try {
    const ffmpeg = await findBinary();
    const inputs = await Promise.all(items.map((item) => inputOf(sink, item.key)));
    const frames = await batchFrames(inputs, ffmpeg, o);
    for (const [i, { video, key }] of items.entries()) {
      try {
        const jpeg = frames[i] ?? (await makeStill(inputs[i] ?? "", ffmpeg, o));
        await sink.write(stillKey(key), Readable.from([jpeg]), { contentType: "image/jpeg" });
        book.index[stillKey(key)] = { sha256: video.sha256, video: key };
        kept.add(video.uri);
        book.made?.images.set(video.uri, dataUri(jpeg));
        if (book.made) book.made.made++;
      } catch (error) {
        book.fail(video, reason(error));
      }
    }
  } catch (error) {
    // Stopped (an interrupted run), or no ffmpeg: the page is still written, with what stills there are.
    for (const item of items) if (!kept.has(item.video.uri)) book.fail(item.video, reason(error));
  }
}

async function writeIndex(sink: Sink, index: Index): Promise<void> {
  await sink.writeText(INDEX_KEY, `${JSON.stringify(index, null, 1)}\n`, "application/json");
}

/**
 * Stills made while the run goes on, each video's as soon as it is stored, so that the page at the
 * end reuses them instead of making them all then (a 1,000-shot run's stills took 20 s at its end).
 * One ffmpeg at a time, in batches of what was stored meanwhile. What it could not make, the page's
 * own pass (makeStills) makes or reports.
 */
export class StillsAsStored {
  private readonly queue: Queued[] = [];
  private running: Promise<void> | undefined;
  private index: Index | undefined;
  private readonly findBinary: () => Promise<string>;
  private settled = false;
  /** The run is large: its ffmpegs are started by a small helper instead (spawner.ts says why). */
  private readonly spawner = new Spawner();
  /** Starts an ffmpeg through this run's helper: for the page's own pass, until close. */
  readonly launch = this.spawner.launch;
  private readonly o: StillsOptions;

  constructor(
    private readonly sink: Sink,
    o: StillsOptions = {},
  ) {
    this.o = { launch: this.spawner.launch, ...o };
    this.findBinary = ffmpegOnce(this.o);
  }

  /** A video stored: its still is made soon. */
  add(video: VideoFile): void {
    const key = keyIn(this.sink, video.uri);
    if (this.settled || key === undefined) return;
    this.queue.push({ video, key });
    this.running ??= this.drain()
      .catch(() => undefined)
      .finally(() => {
        this.running = undefined;
      });
  }

  /** Stops taking videos and waits for the batch under way; the index is written. */
  async settle(): Promise<void> {
    this.settled = true;
    await this.running;
  }

  /** Settles, and ends the helper (after the page's own pass, which starts its ffmpegs through it). */
  async close(): Promise<void> {
    await this.settle();
    this.spawner.close();
  }

  private async drain(): Promise<void> {
    this.index ??= await readIndex(this.sink);
    const index = this.index;
    const findBinary = this.findBinary;
    while (!this.settled && this.queue.length > 0 && !this.o.signal?.aborted) {
      // A moment for more to be stored: a batch of one would cost a process per still again.
      await new Promise((resolve) => setTimeout(resolve, GATHER_MS));
      if (this.settled) break;
      const items = this.queue.splice(0, BATCH);
      await makeBatch(this.sink, items, findBinary, this.o, { index, fail: () => {} });
      await writeIndex(this.sink, index).catch(() => undefined);
    }
  }
}

/**
 * The ffmpeg to run, found once, when the first still is to be made (a page of reused stills runs
 * none): the one `assemble` would run, unless the options name one.
 */
function ffmpegOnce(o: StillsOptions): () => Promise<string> {
  let found: Promise<string> | undefined;
  return () => {
    found ??= Promise.resolve().then(
      o.binary ?? (async () => (await findFfmpeg({ signal: o.signal, launch: o.launch })).path),
    );
    return found;
  };
}

/** `work` over `items`, at most `parallel` at a time; a failure of one is its own to report. */
async function inTurn<T>(
  items: readonly T[],
  parallel: number,
  work: (item: T) => Promise<unknown>,
): Promise<void> {
  const queue = [...items];
  const worker = async () => {
    for (let item = queue.shift(); item !== undefined; item = queue.shift()) await work(item);
  };
  await Promise.all(Array.from({ length: Math.min(parallel, queue.length) }, worker));
}

const dataUri = (jpeg: Buffer) => `data:image/jpeg;base64,${jpeg.toString("base64")}`;

/**
 * The stills of every video of the report, made where missing or out of date and written beside
 * the outputs; each returned as a data: URI so the page stays one file.
 */
export async function makeStills(sink: Sink, report: Report, options: StillsOptions = {}): Promise<Stills> {
  // Started on the first ffmpeg only: a page of reused stills runs none.
  const spawner = options.launch ? undefined : new Spawner();
  try {
    return await stillsOf(sink, report, { ...options, launch: options.launch ?? spawner?.launch });
  } finally {
    spawner?.close();
  }
}

async function stillsOf(sink: Sink, report: Report, o: StillsOptions): Promise<Stills> {
  const result: Stills = { images: new Map(), missing: new Map(), warnings: [], made: 0, reused: 0 };
  const videos = videosOf(report);
  if (videos.length === 0) return result;
  const index = await readIndex(sink);
  const before = JSON.stringify(index);
  const fail = (video: VideoFile, why: string) => {
    result.missing.set(video.uri, why);
  };
  const todo: Queued[] = [];
  const reuse = async (video: VideoFile) => {
    const key = keyIn(sink, video.uri);
    if (key === undefined) return fail(video, "it is stored outside this output");
    const known = index[stillKey(key)];
    if (known?.sha256 === video.sha256 && known.video === key) {
      const kept = await sink.readHead(stillKey(key), MAX_STILL_BYTES).catch(() => undefined);
      if (kept && kept.length > 0) {
        result.images.set(video.uri, dataUri(kept));
        result.reused++;
        return;
      }
    }
    todo.push({ video, key });
  };
  // Whatever goes wrong with one still (a store that cannot read it back), the page is written.
  await inTurn(videos, PARALLEL * 4, (video) =>
    reuse(video).catch((error: unknown) => fail(video, reason(error))),
  );
  const findBinary = ffmpegOnce(o);
  const book: Book = { index, made: result, fail };
  const batches: Queued[][] = [];
  for (let i = 0; i < todo.length; i += BATCH) batches.push(todo.slice(i, i + BATCH));
  await inTurn(batches, PARALLEL, (items) => makeBatch(sink, items, findBinary, o, book));
  // One warning per reason: a missing ffmpeg is one problem, not one per video.
  const byReason = new Map<string, string[]>();
  for (const [uri, why] of result.missing) byReason.set(why, [...(byReason.get(why) ?? []), uri]);
  for (const [why, uris] of byReason) {
    const what = uris.length === 1 ? uris[0] : `${uris.length} videos (${uris[0]}, ...)`;
    result.warnings.push(`no still of ${what}: ${why}`);
  }
  if (JSON.stringify(index) !== before) {
    await writeIndex(sink, index).catch((e) => {
      result.warnings.push(`the stills' index could not be written: ${reason(e)}`);
    });
  }
  return result;
}

// What a person sees in a sandbox video, checked with the tools a person would use: Debian's ffmpeg
// and ffprobe decode the files the sandbox serves over HTTP, and headless Chromium plays one. Two
// tasks (even two takes of one request) must look different, a video's frames must differ only where
// its timecode runs, and every decode must be free of errors (a conforming stream).
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { printable } from "../../src/sandbox/font.js";
import type { Sandbox } from "../../src/sandbox/index.js";
import { makeMp4 } from "../../src/sandbox/media.js";
import { browserTest, launch, watch } from "../helpers/browser.js";
import { call, download, sandbox, until } from "../helpers/sandbox.js";

const FFMPEG = "/usr/bin/ffmpeg";
const FFPROBE = "/usr/bin/ffprobe";
const missing = !existsSync(FFMPEG) || !existsSync(FFPROBE);
const SKIP = missing && !process.env.CI;
const toolTest = (name: string, fn: () => Promise<void>, timeout = 60_000) =>
  it.skipIf(SKIP)(
    SKIP ? `${name} (skipped: no ${FFMPEG} or ${FFPROBE}; apt-get install ffmpeg)` : name,
    async () => {
      if (missing)
        throw new Error(`CI is set and ${FFMPEG} or ${FFPROBE} is missing: apt-get install -y ffmpeg`);
      await fn();
    },
    timeout,
  );

interface Run {
  stdout: Buffer;
  stderr: string;
}

/** Runs a tool with a timeout and bounded output; a non-zero exit rejects with its stderr. */
function run(file: string, args: readonly string[], maxBuffer = 256 * 1024 * 1024): Promise<Run> {
  return new Promise((resolve, reject) => {
    execFile(
      file,
      args,
      { encoding: "buffer", maxBuffer, timeout: 60_000, signal: AbortSignal.timeout(60_000) },
      (error, stdout, stderr) => {
        if (error) reject(new Error(`${file} ${args.join(" ")}: ${error.message} ${stderr.toString()}`));
        else resolve({ stdout, stderr: stderr.toString() });
      },
    );
  });
}

let dir: string;
let sb: Sandbox;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "clapper-frames-"));
  sb = await sandbox({ timeScale: 0.0001, points: 1_000_000 });
});
afterAll(async () => {
  await sb?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

let files = 0;
async function save(mp4: Buffer): Promise<string> {
  const file = join(dir, `v${files++}.mp4`);
  await writeFile(file, mp4);
  return file;
}

/** Makes a video task over HTTP, waits for it and downloads its result. */
async function take(body: Record<string, unknown>, on: Sandbox = sb): Promise<{ id: string; mp4: Buffer }> {
  const created = await call(on.url, "POST", "/vid/v2/video_generation", { body });
  expect(created.status, JSON.stringify(created.body)).toBe(200);
  const id = created.body.task_id as string;
  const task = await until(
    async () => (await call(on.url, "GET", `/vid/v2/query/video_generation/${id}`)).body.task,
    (t) => t.status !== "queued" && t.status !== "running",
    30_000,
  );
  expect(task.status).toBe("succeeded");
  const got = await download(task.content.url as string);
  expect(got.status).toBe(200);
  return { id, mp4: got.data };
}

/** The luma plane of the frame shown at `seconds`, decoded by ffmpeg, which must say nothing. */
async function grayFrame(file: string, seconds: number, width: number, height: number): Promise<Buffer> {
  const { stdout, stderr } = await run(FFMPEG, [
    ...["-v", "error", "-nostdin", "-ss", String(seconds), "-i", file],
    ...["-frames:v", "1", "-f", "rawvideo", "-pix_fmt", "gray", "pipe:1"],
  ]);
  expect(stderr).toBe("");
  expect(stdout.length).toBe(width * height);
  return stdout;
}

function meanAbsDiff(a: Buffer, b: Buffer): number {
  let sum = 0;
  for (let i = 0; i < a.length; i++) sum += Math.abs((a[i] ?? 0) - (b[i] ?? 0));
  return sum / a.length;
}

/** The bounding box of the pixels that differ, and how many do. */
function changed(a: Buffer, b: Buffer, width: number) {
  let count = 0;
  let [x0, y0, x1, y1] = [Number.POSITIVE_INFINITY, Number.POSITIVE_INFINITY, -1, -1];
  for (let i = 0; i < a.length; i++) {
    if (a[i] === b[i]) continue;
    count++;
    const x = i % width;
    const y = Math.floor(i / width);
    [x0, y0, x1, y1] = [Math.min(x0, x), Math.min(y0, y), Math.max(x1, x), Math.max(y1, y)];
  }
  return { count, x0, y0, x1, y1 };
}

describe("sandbox videos a person can tell apart", () => {
  toolTest(
    "ffprobe reads each size as H.264 of the asked size and duration, and ffmpeg decodes every frame silently",
    async () => {
      const cases: readonly [number, number, number][] = [
        [5, 1280, 720],
        [4, 1120, 480], // 21:9
        [7, 480, 864], // portrait
        [2, 64, 36], // too small for text: bands and what fits
        [3, 5040, 2160], // 4K at 21:9, level 6
        [1, 8192, 4320], // the largest frame level 6 holds
      ];
      for (const [seconds, width, height] of cases) {
        const file = await save(
          await makeMp4(seconds, width, height, { id: `vtask_${width}`, prompt: "sizes" }),
        );
        const probe = await run(FFPROBE, [
          ...["-v", "error", "-select_streams", "v:0", "-count_packets"],
          ...[
            "-show_entries",
            "stream=codec_name,width,height,nb_read_packets:format=duration",
            "-of",
            "json",
            file,
          ],
        ]);
        expect(probe.stderr).toBe("");
        const info = JSON.parse(probe.stdout.toString());
        expect(info.streams[0]).toMatchObject({ codec_name: "h264", width, height });
        expect(Number(info.streams[0].nb_read_packets)).toBe(seconds * 24);
        expect(Math.abs(Number(info.format.duration) - seconds)).toBeLessThanOrEqual(1 / 24);
        const decode = await run(FFMPEG, ["-v", "error", "-nostdin", "-i", file, "-f", "null", "-"]);
        expect(decode.stderr, `${width}x${height}`).toBe("");
      }
    },
  );

  toolTest("two takes of one request look different, and so do two shots", async () => {
    const request = {
      model: "Vid-H3",
      content: [{ type: "text", text: "a lighthouse at dusk, waves crashing below" }],
      resolution: "480P",
      ratio: "16:9",
      duration: 4,
    };
    const [first, second, other] = await Promise.all([
      take(request),
      take(request),
      take({ ...request, content: [{ type: "text", text: "a fox in the snow" }] }),
    ]);
    expect(first.id).not.toBe(second.id);
    const frames = await Promise.all(
      [first, second, other].map(async (t) => grayFrame(await save(t.mp4), 1, 864, 480)),
    );
    const [a, b, c] = frames as [Buffer, Buffer, Buffer];
    // Mid-grey against black would be 128; bands of other hues and brightness land far above 10.
    expect(meanAbsDiff(a, b)).toBeGreaterThan(10);
    expect(meanAbsDiff(a, c)).toBeGreaterThan(10);
    expect(meanAbsDiff(b, c)).toBeGreaterThan(10);
    // A take downloaded again is the same file.
    const again = await download(
      (await call(sb.url, "GET", `/vid/v2/query/video_generation/${first.id}`)).body.task.content.url,
    );
    expect(again.data.equals(first.mp4)).toBe(true);
  });

  toolTest("a video's frames differ where its timecode runs and nowhere else", async () => {
    const [width, height] = [1280, 720];
    const file = await save(await makeMp4(4, width, height, { id: "vtask_timecode", prompt: "timecode" }));
    const early = await grayFrame(file, 0.5, width, height);
    const late = await grayFrame(file, 2.5, width, height);
    const diff = changed(early, late, width);
    // "00:00.5" against "00:02.5": two digits' worth of pixels, bottom left.
    expect(diff.count).toBeGreaterThan(20);
    expect(diff.x1 - diff.x0).toBeLessThan(width / 4);
    expect(diff.y1 - diff.y0).toBeLessThan(height / 10);
    expect(diff.y0).toBeGreaterThan(height * 0.75);
    expect(diff.x1).toBeLessThan(width / 2);
    // And the picture is not flat: bands, boxes and text give several levels of grey.
    expect(new Set(early).size).toBeGreaterThan(4);
  });

  toolTest("a hostile prompt is drawn as printable ASCII and the stream stays conforming", async () => {
    const prompt = "\u0000\u001b[31mred\n\t<script>alert(1)</script> ünï 🎬 \u202e";
    const file = await save(await makeMp4(1, 640, 360, { id: "vtask_hostile", prompt }));
    await grayFrame(file, 0.2, 640, 360);
    // NUL and ESC become one "?" each; the newline and tab are whitespace, one space.
    expect(printable(prompt, 24)).toBe("??[31mred <script>alert(");
    expect(printable("a  b\u00e9\u{1f3ac}", 24)).toBe("a b??");
  });
});

browserTest("Chromium plays a sandbox video: it advances and shows more than one colour", async () => {
  const { mp4 } = await take({
    model: "vid-h3-lite",
    content: [{ type: "text", text: "played in a browser" }],
    resolution: "480P",
    ratio: "16:9",
    duration: 4,
  });
  // Served from a page on the same origin as the video, so the canvas may read its pixels.
  const { createServer } = await import("node:http");
  const server = createServer((req, res) => {
    if (req.url === "/v.mp4") {
      res.writeHead(200, { "content-type": "video/mp4", "content-length": mp4.length });
      res.end(mp4);
    } else {
      res.writeHead(200, { "content-type": "text/html" });
      res.end('<!doctype html><video id="v" src="/v.mp4" muted playsinline></video>');
    }
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  try {
    const address = server.address();
    if (address === null || typeof address === "string") throw new Error("no port");
    const context = await launch();
    const page = await context.newPage();
    const seen = watch(page);
    await page.goto(`http://127.0.0.1:${address.port}/`);
    await page.evaluate(() => (globalThis as any).document.getElementById("v").play());
    await page.waitForFunction(
      () => {
        const v = (globalThis as any).document.getElementById("v");
        return v.readyState >= 2 && v.currentTime > 0.5;
      },
      undefined,
      { timeout: 30_000 },
    );
    const colours = await page.evaluate(() => {
      const doc = (globalThis as any).document;
      const v = doc.getElementById("v");
      const canvas = doc.createElement("canvas");
      canvas.width = v.videoWidth;
      canvas.height = v.videoHeight;
      const g = canvas.getContext("2d");
      g.drawImage(v, 0, 0);
      const data: Uint8ClampedArray = g.getImageData(0, 0, canvas.width, canvas.height).data;
      const seen = new Set<number>();
      for (let i = 0; i < data.length; i += 4 * 97)
        seen.add((data[i]! << 16) | (data[i + 1]! << 8) | data[i + 2]!);
      return { size: [canvas.width, canvas.height], count: seen.size };
    });
    expect(colours.size).toEqual([864, 480]);
    // Not one flat picture: at least three bands (the fewest a task draws), whatever the task's style
    // (flat bands give a handful of colours, gradients hundreds).
    expect(colours.count).toBeGreaterThanOrEqual(3);
    expect(seen.problems).toEqual([]);
  } finally {
    // The browser keeps its connections open; close waits for them otherwise.
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

it("--plain-videos: two tasks of one size and length get the same plain picture, made once", async () => {
  const plain = await sandbox({ timeScale: 0.0001, points: 1_000_000, plainVideos: true });
  try {
    const request = (text: string) => ({
      model: "vid-h3-lite",
      content: [{ type: "text", text }],
      resolution: "480P",
      ratio: "16:9",
      duration: 4,
    });
    const a = await take(request("a lighthouse"), plain);
    const b = await take(request("the lamp room"), plain);
    expect(a.id).not.toBe(b.id);
    expect(b.mp4.equals(a.mp4)).toBe(true);
    // The sandbox's own default still tells the two apart.
    const c = await take(request("a lighthouse"));
    expect(c.mp4.equals(a.mp4)).toBe(false);
  } finally {
    await plain.close();
  }
});

// Temporary (.partial) files in a local output folder: which ones a writer removes as leftovers of a
// dead writer when it first writes into the folder, and which it must keep. Containers make the
// pid useless on its own: every run is pid 1 again, with a new host name or the same one.
import { spawn } from "node:child_process";
import { existsSync, statSync } from "node:fs";
import { mkdir, mkdtemp, readdir, rm, stat, utimes, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { Readable } from "node:stream";
import { fileURLToPath } from "node:url";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { LocalSink } from "../../src/sinks/local.js";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const CHILD = fileURLToPath(new URL("./child.mjs", import.meta.url));
const NAME = /^\.s01\.mp4\.(\d+)\.([0-9a-f]{6})([0-9a-f]{10})\.([0-9a-f]{12})\.partial$/;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

let root: string;
beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), "clapper-partials-"));
  await mkdir(join(root, "shots"));
});
afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

const partials = async () => (await readdir(join(root, "shots"))).filter((n) => n.endsWith(".partial"));

/** Starts a write whose body waits for `finish`, and returns the name of its temporary file. */
async function writing(sink: LocalSink, key: string) {
  let finish = () => {};
  const gate = new Promise<void>((resolve) => {
    finish = resolve;
  });
  const body = Readable.from(
    (async function* () {
      yield Buffer.from("first ");
      await gate;
      yield Buffer.from("last");
    })(),
  );
  const before = new Set(await partials());
  const done = sink.write(key, body);
  let name: string | undefined;
  while (!name) {
    name = (await partials()).find((n) => !before.has(n));
    if (!name) await sleep(5);
  }
  return { name, finish, done };
}

/** The fields of this process's own temporary names: pid, host tag, instance. */
async function ours() {
  const w = await writing(new LocalSink(root), "shots/s01.mp4");
  w.finish();
  await w.done;
  await rm(join(root, "shots/s01.mp4"));
  const m = NAME.exec(w.name);
  if (!m) throw new Error(`unexpected temporary name ${w.name}`);
  return { pid: Number(m[1]), host: m[2] as string, instance: m[3] as string };
}

/** Plants a temporary file as another writer would have left it, last written `ageMs` ago. */
async function plant(name: string, ageMs = 0) {
  const path = join(root, "shots", name);
  await writeFile(path, "half a video");
  const at = new Date(Date.now() - ageMs);
  await utimes(path, at, at);
  return name;
}

/** Writes one more file into the folder through a fresh sink, which sweeps it first. */
async function writeOther() {
  await new LocalSink(root).write("shots/s02.mp4", Readable.from([Buffer.from("x")]));
}

const OTHER_INSTANCE = "0123456789";
const OTHER_HOST = "abcdef";
const RANDOM = "00112233aabb";

describe("the temporary files of a local output folder", () => {
  it("carry the writer's pid, a tag of its host and a token of its process", async () => {
    const me = await ours();
    expect(me.pid).toBe(process.pid);
    expect(me.host).toMatch(/^[0-9a-f]{6}$/);
    // The same for every write of this process, so a process never takes its own for leftovers.
    expect(await ours()).toEqual(me);
  });

  it("keep the file another sink of this process is writing", async () => {
    const first = await writing(new LocalSink(root), "shots/s01.mp4");
    await writeOther();
    expect(await partials()).toEqual([first.name]);
    first.finish();
    expect((await first.done).bytes).toBe(10);
    expect(await partials()).toEqual([]);
  });

  it("remove a file of a dead container restarted with the same host name (pid 1 again: our pid)", async () => {
    const me = await ours();
    const left = await plant(`.s01.mp4.${process.pid}.${me.host}${OTHER_INSTANCE}.${RANDOM}.partial`);
    await writeOther();
    expect(await partials()).not.toContain(left);
  });

  it("remove a file of a dead process of this host", async () => {
    const me = await ours();
    const left = await plant(`.s01.mp4.999999999.${me.host}${OTHER_INSTANCE}.${RANDOM}.partial`);
    await writeOther();
    expect(await partials()).not.toContain(left);
  });

  it("keep a fresh file of another host (its pid means nothing here), and remove it once not written for 60 s", async () => {
    // pid 1 exists on this host too: only the age can tell.
    const fresh = await plant(`.s01.mp4.1.${OTHER_HOST}${OTHER_INSTANCE}.${RANDOM}.partial`, 30_000);
    await writeOther();
    expect(await partials()).toEqual([fresh]);
    await plant(fresh, 61_000);
    await writeOther();
    expect(await partials()).toEqual([]);
  });

  it("keep a fresh file of a live process of this host, and remove it once not written for 60 s", async () => {
    const me = await ours();
    const live = await plant(`.s01.mp4.1.${me.host}${OTHER_INSTANCE}.${RANDOM}.partial`);
    await writeOther();
    expect(await partials()).toEqual([live]);
    await plant(live, 61_000);
    await writeOther();
    expect(await partials()).toEqual([]);
  });

  it("treat files named by earlier versions (no host, no instance) by their pid and age", async () => {
    await plant(`.s01.mp4.999999999.${RANDOM}.partial`); // dead
    await plant(`.s02.mp4.${process.pid}.${RANDOM}.partial`); // ours, so an earlier process's
    const live = await plant(`.s03.mp4.1.${RANDOM}.partial`);
    await writeOther();
    expect(await partials()).toEqual([live]);
  });

  it("leave other hidden files alone", async () => {
    await plant(".notes.partial", 3_600_000);
    await plant(".s01.mp4.txt", 3_600_000);
    await writeOther();
    expect((await readdir(join(root, "shots"))).sort()).toEqual([
      ".notes.partial",
      ".s01.mp4.txt",
      "s02.mp4",
    ]);
  });

  it("are swept at the start of a run in every folder of it, written into or not (a row removed since the kill)", async () => {
    // Found by the kill loop (kill-edited-4-r4, seed 164788089): n03 killed mid-download, then removed
    // from the manifest; no later run wrote into lines/ again, and its temporary file stayed.
    const me = await ours();
    const dead = `.n03.wav.999999999.${me.host}${OTHER_INSTANCE}.${RANDOM}.partial`;
    const live = `.n04.wav.1.${me.host}${OTHER_INSTANCE}.${RANDOM}.partial`;
    await mkdir(join(root, "lines"));
    await mkdir(join(root, "reports", "shards", "1-of-2"), { recursive: true });
    await writeFile(join(root, "lines", dead), "half a line");
    await writeFile(join(root, "lines", live), "a line being written");
    await writeFile(
      join(
        root,
        "reports",
        "shards",
        "1-of-2",
        `.report.json.999999999.${me.host}${OTHER_INSTANCE}.${RANDOM}.partial`,
      ),
      "{",
    );
    await plant(`.s01.mp4.999999999.${me.host}${OTHER_INSTANCE}.${RANDOM}.partial`);
    expect(await new LocalSink(root).cleanup(new Date())).toEqual({ aborted: 0, removed: 3 });
    expect(await readdir(join(root, "lines"))).toEqual([live]);
    expect(await readdir(join(root, "reports", "shards", "1-of-2"))).toEqual([]);
    expect(await partials()).toEqual([]);
  });

  it("keep the file of another process writing into the same folder right now", {
    timeout: 20_000,
  }, async () => {
    const built = join(ROOT, "dist/sinks/local.js");
    expect(
      existsSync(built) && statSync(built).mtimeMs >= statSync(join(ROOT, "src/sinks/local.ts")).mtimeMs,
      "dist/ is older than src/: run `npm run build` first",
    ).toBe(true);
    const child = spawn(process.execPath, [CHILD, "sink", root, "shots/s01.mp4"], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    const exited = new Promise<NodeJS.Signals | null>((resolve) =>
      child.once("close", (_c, s) => resolve(s)),
    );
    try {
      await new Promise<void>((resolve) =>
        createInterface({ input: child.stdout }).once("line", () => resolve()),
      );
      const [theirs] = await partials();
      expect(theirs).toMatch(NAME);
      expect(Number(NAME.exec(theirs as string)?.[1])).toBe(child.pid);

      await writeOther();
      expect(await partials()).toEqual([theirs]);
      // ...and it goes on writing into it.
      const size = (await stat(join(root, "shots", theirs as string))).size;
      await sleep(100);
      expect((await stat(join(root, "shots", theirs as string))).size).toBeGreaterThan(size);

      child.kill("SIGKILL");
      expect(await exited).toBe("SIGKILL");
      await writeOther();
      expect(await partials()).toEqual([]);
    } finally {
      child.kill("SIGKILL");
    }
  });
});

describe("a write the folder cannot take", () => {
  it("lets go of the body at once (a download is not left open on its connection)", async () => {
    const root = await mkdtemp(join(tmpdir(), "clapper-blocked-"));
    try {
      // A file where the `shots` folder should be: the folder cannot be made.
      await writeFile(join(root, "shots"), "in the way");
      const body = new Readable({ read() {} });
      body.push(Buffer.alloc(1024));
      const sink = new LocalSink(root);
      await expect(sink.write("shots/s01.mp4", body)).rejects.toThrow();
      expect(body.destroyed).toBe(true);
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });
});

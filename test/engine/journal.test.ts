import { spawnSync } from "node:child_process";
import { existsSync, statSync } from "node:fs";
import { appendFile, type FileHandle, open, readdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";
import { Journal } from "../../src/state/journal.js";
import { tempDir } from "../helpers/temp.js";

type Rec = { t: "add"; n: number } | { t: "name"; name: string };
interface State {
  sum: number;
  names: string[];
}

const options = (path: string, compactEvery?: number) => ({
  path,
  initial: (): State => ({ sum: 0, names: [] }),
  apply: (s: State, r: Rec) => {
    if (r.t === "add") s.sum += r.n;
    else s.names.push(r.name);
  },
  ...(compactEvery ? { compactEvery } : {}),
});

async function tmp() {
  return join(await tempDir("clapper-journal-"), "state.jsonl");
}

describe("Journal", () => {
  it("replays what was appended", async () => {
    const path = await tmp();
    const j = await Journal.open<State, Rec>(options(path));
    await j.append({ t: "add", n: 2 });
    await j.append({ t: "name", name: "a" }, { durable: true });
    await j.append({ t: "add", n: 5 });
    await j.close();
    const again = await Journal.open<State, Rec>(options(path));
    expect(again.state).toEqual({ sum: 7, names: ["a"] });
    await again.close();
  });

  it("drops a torn last line and cuts it off, so later appends start on a clean line", async () => {
    const path = await tmp();
    const j = await Journal.open<State, Rec>(options(path));
    await j.append({ t: "add", n: 1 });
    await j.close();
    // A crash in the middle of a write: half a record, no newline.
    await appendFile(path, '{"t":"add","n":10');
    const again = await Journal.open<State, Rec>(options(path));
    expect(again.state.sum).toBe(1);
    await again.append({ t: "add", n: 3 });
    await again.close();
    expect((await readFile(path, "utf8")).trim().split("\n")).toEqual([
      '{"t":"add","n":1}',
      '{"t":"add","n":3}',
    ]);
    const third = await Journal.open<State, Rec>(options(path));
    expect(third.state.sum).toBe(4);
    await third.close();
  });

  it("ignores a complete-looking last record without its newline (the write never finished)", async () => {
    const path = await tmp();
    await writeFile(path, '{"t":"add","n":1}\n{"t":"add","n":2}');
    const j = await Journal.open<State, Rec>(options(path));
    expect(j.state.sum).toBe(1);
    await j.close();
  });

  it("keeps the order of appends on disk even when they are not awaited one by one", async () => {
    const path = await tmp();
    const j = await Journal.open<State, Rec>(options(path));
    await Promise.all(Array.from({ length: 200 }, (_, i) => j.append({ t: "name", name: String(i) })));
    await j.close();
    const again = await Journal.open<State, Rec>(options(path));
    expect(again.state.names).toEqual(Array.from({ length: 200 }, (_, i) => String(i)));
    await again.close();
  });

  it("compacts into one snapshot when large, with the same state after reopening", async () => {
    const path = await tmp();
    const j = await Journal.open<State, Rec>(options(path, 50));
    for (let i = 1; i <= 120; i++) await j.append({ t: "add", n: i });
    await j.close();
    const lines = (await readFile(path, "utf8")).trim().split("\n");
    expect(lines.length).toBeLessThan(60);
    expect(lines[0]).toContain('"t":"snapshot"');
    const again = await Journal.open<State, Rec>(options(path, 50));
    expect(again.state.sum).toBe((120 * 121) / 2);
    await again.close();
  });

  it("refuses a file damaged in the middle instead of replaying around the damage", async () => {
    const path = await tmp();
    await writeFile(path, '{"t":"add","n":1}\nnot json\n{"t":"add","n":2}\n');
    await expect(Journal.open<State, Rec>(options(path))).rejects.toThrow(":2: the state file is damaged");
  });

  it("reads without writing: a torn last line stays for the writer that is still writing it", async () => {
    const path = await tmp();
    await writeFile(path, '{"t":"add","n":1}\n{"t":"add","n":');
    const state = await Journal.read<State, Rec>(options(path));
    expect(state.sum).toBe(1);
    expect(await readFile(path, "utf8")).toBe('{"t":"add","n":1}\n{"t":"add","n":');
  });

  // /dev/full refuses every write (ENOSPC): a disk that fills up, then has room again.
  it.skipIf(!existsSync("/dev/full"))(
    "after a write fails, nothing more is written: no line reaches the disk without the ones before it",
    async () => {
      const path = await tmp();
      const j = await Journal.open<State, Rec>(options(path));
      await j.append({ t: "add", n: 1 }, { durable: true });
      const inner = j as unknown as { handle: FileHandle };
      const good = inner.handle;
      inner.handle = await open("/dev/full", "a");
      const lost = j.append({ t: "add", n: 10 });
      const behind = j.append({ t: "add", n: 100 }, { durable: true });
      await expect(lost).rejects.toThrow(/ENOSPC/);
      await expect(behind).rejects.toThrow(/ENOSPC/);
      await inner.handle.close();
      // Room again: the journal still refuses, with the first error, rather than write past the gap.
      inner.handle = good;
      await expect(j.append({ t: "add", n: 1000 }, { durable: true })).rejects.toThrow(/ENOSPC/);
      await expect(j.compact()).rejects.toThrow(/ENOSPC/);
      await j.close();
      expect(await readFile(path, "utf8")).toBe('{"t":"add","n":1}\n');
    },
  );

  // A disk that takes part of a write: the system reports the bytes it took as a success, and only
  // the next write meets the error. A file-size limit (ulimit -f, in 1 KiB blocks) makes one; the
  // journal runs in a child process under it, as built (dist/).
  describe("a write the disk cuts short", () => {
    const ROOT = fileURLToPath(new URL("../..", import.meta.url));
    const BUILT = join(ROOT, "dist/state/journal.js");
    const CHILD = `
const [url, path, mode] = process.argv.slice(1);
const { Journal } = await import(url);
const j = await Journal.open({
  path,
  initial: () => ({ sum: 0, names: [] }),
  // A name counts ten times: a snapshot far larger than the lines that made it.
  apply: (s, r) => { if (r.t === "add") s.sum += r.n; else for (let i = 0; i < 10; i++) s.names.push(r.name); },
});
const say = (what, p) => p.then(() => console.log(what + " ok"), (e) => console.log(what + " " + (e.code ?? e.message)));
await say("first", j.append({ t: "add", n: 1 }, { durable: true }));
if (mode === "line") await say("big", j.append({ t: "name", name: "x".repeat(4000) }, { durable: true }));
else {
  await say("name", j.append({ t: "name", name: "y".repeat(300) }, { durable: true }));
  await say("compact", j.compact());
}
await say("after", j.append({ t: "add", n: 2 }, { durable: true }));
await j.close().catch(() => undefined);
`;
    /** The child's lines, with files limited to 2 KiB. */
    function underLimit(path: string, mode: "line" | "compact"): string[] {
      expect(
        existsSync(BUILT) && statSync(BUILT).mtimeMs >= statSync(join(ROOT, "src/state/journal.ts")).mtimeMs,
        "dist/ is older than src/: run `npm run build` first",
      ).toBe(true);
      const child = spawnSync(
        "bash",
        [
          "-c",
          'ulimit -f 2 && exec "$0" --input-type=module -e "$1" "$2" "$3" "$4"',
          process.execPath,
          CHILD,
          pathToFileURL(BUILT).href,
          path,
          mode,
        ],
        { encoding: "utf8", timeout: 30_000 },
      );
      expect(child.status, child.stderr).toBe(0);
      return child.stdout.trim().split("\n");
    }

    it("a durable line is refused, not reported written, and nothing is written after it", async () => {
      const path = await tmp();
      expect(underLimit(path, "line")).toEqual(["first ok", "big EFBIG", "after EFBIG"]);
      // What the disk holds: the first line, then the cut one, which the next open reads as a torn end.
      const text = await readFile(path, "utf8");
      expect(text.startsWith('{"t":"add","n":1}\n{"t":"name","name":"xxx')).toBe(true);
      expect(text.includes('"n":2')).toBe(false);
      const reopened = await Journal.open<State, Rec>(options(path));
      expect(reopened.state.sum).toBe(1);
      await reopened.close();
    });

    it("a compaction is refused and the journal it would have replaced is kept whole", async () => {
      const path = await tmp();
      expect(underLimit(path, "compact")).toEqual(["first ok", "name ok", "compact EFBIG", "after ok"]);
      const text = await readFile(path, "utf8");
      expect(
        text
          .split("\n")
          .filter(Boolean)
          .map((l) => JSON.parse(l).t),
      ).toEqual(["add", "name", "add"]);
      // The snapshot's cut copy is not left beside it.
      expect(await readdir(join(path, ".."))).toEqual(["state.jsonl"]);
    });
  });
});

// The work folders of stills and assembly: named after their maker, and removed by the next one made
// once their maker is gone (a SIGKILL runs no `finally`), never while it runs, never another user's
// or a link, and another host's only once it has been still for a day.
import { spawn, spawnSync } from "node:child_process";
import { mkdir, mkdtemp, readdir, rm, symlink, utimes, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { makeWorkFolder, removeLeftFolders, WORK_FOLDER_STALE_MS } from "../../src/episode/work-folder.js";
import { HOST_TAG, INSTANCE } from "../../src/locks/process-alive.js";
import { ROOT, staleBuild } from "../run/harness.js";

const roots: string[] = [];
afterEach(async () => {
  for (const r of roots.splice(0)) await rm(r, { recursive: true, force: true });
});
async function root(): Promise<string> {
  const r = await mkdtemp(join(tmpdir(), "clapper-work-folder-test-"));
  roots.push(r);
  return r;
}

/** A pid no process has now: one of a process that ran and ended. */
function deadPid(): number {
  const child = spawnSync(process.execPath, ["-e", "process.stdout.write(String(process.pid))"], {
    encoding: "utf8",
  });
  return Number(child.stdout);
}

/** A folder as a maker with these marks would have left it, with a file in it. */
async function left(r: string, name: string): Promise<string> {
  const path = join(r, name);
  await mkdir(path);
  await writeFile(join(path, "shot.mp4"), "x".repeat(1000));
  return name;
}

describe("work folders", () => {
  it("are named after their maker, and a second one keeps the first (same process)", async () => {
    const r = await root();
    const a = await makeWorkFolder("stills", r);
    const b = await makeWorkFolder("assemble", r);
    expect(a).toMatch(new RegExp(`/clapper-stills-${process.pid}\\.${HOST_TAG}${INSTANCE}-[A-Za-z0-9]{6}$`));
    expect(b).toMatch(
      new RegExp(`/clapper-assemble-${process.pid}\\.${HOST_TAG}${INSTANCE}-[A-Za-z0-9]{6}$`),
    );
    // A sweep keeps this process's own folders.
    expect(await removeLeftFolders(r)).toBe(0);
    expect((await readdir(r)).sort()).toEqual([a, b].map((p) => p.slice(r.length + 1)).sort());
  });

  it("tidies a temporary folder once per process: the second folder made there does not sweep again", async () => {
    const r = await root();
    await makeWorkFolder("stills", r);
    const dead = await left(r, `clapper-stills-${deadPid()}.${HOST_TAG}0123456789-aaaaaa`);
    await makeWorkFolder("stills", r);
    expect(await readdir(r)).toContain(dead);
    expect(await removeLeftFolders(r)).toBe(1);
  });

  it("removes what a gone maker of this host left, keeps a live one's, another host's and all else", async () => {
    const r = await root();
    const other = "0123456789";
    const sleeper = spawn("sleep", ["30"], { stdio: "ignore" });
    try {
      expect(sleeper.pid).toBeGreaterThan(0);
      const dead = await left(r, `clapper-assemble-${deadPid()}.${HOST_TAG}${other}-aaaaaa`);
      // Our pid, another token: a process before this one with the same pid (a container's pid 1).
      const earlier = await left(r, `clapper-stills-${process.pid}.${HOST_TAG}${other}-bbbbbb`);
      const live = await left(r, `clapper-stills-${sleeper.pid}.${HOST_TAG}${other}-cccccc`);
      const foreign = await left(r, `clapper-assemble-${deadPid()}.abcdef${other}-dddddd`);
      const foreignOld = await left(r, `clapper-assemble-${deadPid()}.abcdef${other}-eeeeee`);
      const day = (Date.now() - WORK_FOLDER_STALE_MS - 60_000) / 1000;
      await utimes(join(r, foreignOld), day, day);
      const unrelated = await left(r, `clapper-stills-${deadPid()}`);
      const notOurs = await left(r, "clapper-bench-startup-abcdef");
      // A file and a link named like a work folder: neither is one.
      const file = `clapper-stills-${deadPid()}.${HOST_TAG}${other}-ffffff`;
      await writeFile(join(r, file), "");
      const target = await root();
      await writeFile(join(target, "keep.txt"), "keep");
      const link = `clapper-stills-${deadPid()}.${HOST_TAG}${other}-gggggg`;
      await symlink(target, join(r, link));

      expect(await removeLeftFolders(r)).toBe(3);
      const names = await readdir(r);
      expect(names).not.toContain(dead);
      expect(names).not.toContain(earlier);
      expect(names).not.toContain(foreignOld);
      expect(names.sort()).toEqual([live, foreign, unrelated, notOurs, file, link].sort());
      expect(await readdir(target)).toEqual(["keep.txt"]);
    } finally {
      sleeper.kill("SIGKILL");
    }
  });

  it("never fails for a temporary folder it cannot read", async () => {
    expect(await removeLeftFolders(join(await root(), "missing"))).toBe(0);
  });

  it.each(["SIGKILL", "SIGTERM"] as const)(
    "a process killed with %s while its folder holds files: the next folder made removes it",
    async (signal) => {
      expect(staleBuild(), "dist/ is older than src/: run `npm run build` first").toEqual([]);
      const r = await root();
      const url = pathToFileURL(join(ROOT, "dist/episode/work-folder.js")).href;
      const script = `import { writeFileSync } from "node:fs";
        import { makeWorkFolder } from ${JSON.stringify(url)};
        const dir = await makeWorkFolder("assemble", ${JSON.stringify(r)});
        writeFileSync(dir + "/s01.mp4", Buffer.alloc(100_000));
        process.stdout.write(dir + "\\n");
        setInterval(() => {}, 1000);`;
      const child = spawn(process.execPath, ["--input-type=module", "-e", script], {
        stdio: ["ignore", "pipe", "inherit"],
      });
      const dir = await new Promise<string>((resolve) => {
        let out = "";
        child.stdout.on("data", (b: Buffer) => {
          out += b.toString();
          if (out.endsWith("\n")) resolve(out.trim());
        });
      });
      expect(await readdir(dir)).toEqual(["s01.mp4"]);
      // While it runs, its folder is its own.
      expect(await removeLeftFolders(r)).toBe(0);
      const exited = new Promise((resolve) => child.once("exit", resolve));
      child.kill(signal);
      await exited;
      const next = await makeWorkFolder("stills", r);
      expect(await readdir(r)).toEqual([next.slice(r.length + 1)]);
    },
  );
});

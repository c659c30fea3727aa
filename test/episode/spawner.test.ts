// The Spawner starts processes from a small helper instead of the large run: the same results,
// failures, timeouts, aborts and nice value as a process started here, ffmpeg's parent is the helper,
// the key is not passed on, and a run killed with SIGKILL leaves neither helper nor ffmpeg behind.
import { spawn } from "node:child_process";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { findFfmpeg } from "../../src/episode/ffmpeg-binary.js";
import { FfmpegError, type Launch, launchHere, runFfmpeg } from "../../src/episode/ffmpeg-run.js";
import { Spawner } from "../../src/episode/spawner.js";
import { ROOT, staleBuild } from "../run/harness.js";

const spawners: Spawner[] = [];
afterEach(() => {
  for (const s of spawners.splice(0)) s.close();
});
function helper(): Spawner {
  const s = new Spawner();
  spawners.push(s);
  return s;
}

/** A process as /proc tells it: its state letter and its start time (a reused pid has another). */
async function procOf(pid: number): Promise<{ state: string; started: string } | undefined> {
  const stat = await readFile(`/proc/${pid}/stat`, "utf8").catch(() => "");
  if (stat === "") return undefined;
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return { state: fields[0] ?? "", started: fields[19] ?? "" };
}

/** A process seen once, to ask later whether it still runs. */
interface Seen {
  pid: number;
  started: string;
}

async function seen(pid: number): Promise<Seen> {
  return { pid, started: (await procOf(pid))?.started ?? "" };
}

/**
 * Still running: not a zombie (ended, not yet reaped by whoever inherited it), and not another
 * process under the same pid (this machine's pids wrap at 32768, and the suite starts thousands).
 */
async function alive(p: Seen): Promise<boolean> {
  const now = await procOf(p.pid);
  return now !== undefined && now.state !== "Z" && now.started === p.started;
}

/** Field 19 of /proc/PID/stat, after the command (which may hold spaces) in parentheses. */
const niceOf = (stat: string) => Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[16]);

async function failureOf(p: Promise<unknown>): Promise<FfmpegError> {
  const error = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(FfmpegError);
  return error as FfmpegError;
}

describe("a Spawner", () => {
  it("gives what a process started here gives: stdout, exit, stderr's tail on a failure", async () => {
    const ffmpeg = (await findFfmpeg()).path;
    const launches: Array<[string, Launch]> = [
      ["here", launchHere],
      ["spawner", helper().launch],
    ];
    const seen: Record<string, unknown> = {};
    for (const [name, launch] of launches) {
      const version = await runFfmpeg(["-version"], {
        binary: ffmpeg,
        launch,
        timeoutMs: 10_000,
        maxStdout: 1 << 20,
      });
      const failed = await failureOf(
        runFfmpeg(["-v", "error", "-i", "/nonexistent/in put.mp4", "-f", "null", "-"], {
          binary: ffmpeg,
          launch,
          timeoutMs: 10_000,
        }),
      );
      const missing = await failureOf(
        runFfmpeg(["-version"], { binary: "/nonexistent/ffmpeg", launch, timeoutMs: 10_000 }),
      );
      seen[name] = {
        code: version.code,
        stdout: version.stdout.toString("utf8"),
        failed: [failed.kind, failed.message, failed.tail],
        missing: [missing.kind, missing.message],
      };
    }
    expect(String((seen.here as { stdout: string }).stdout)).toMatch(/^ffmpeg version /);
    expect((seen.here as { failed: unknown[] }).failed[1]).toMatch(/in put\.mp4/);
    expect((seen.here as { missing: unknown[] }).missing[1]).toMatch(/ENOENT/);
    expect(seen.spawner).toEqual(seen.here);
  });

  it("keeps only maxStdout bytes of a long output", async () => {
    const r = await runFfmpeg(["-c", "head -c 100000 /dev/zero"], {
      binary: "/bin/sh",
      launch: helper().launch,
      timeoutMs: 10_000,
      maxStdout: 4096,
    });
    expect(r.stdout.length).toBe(4096);
  });

  it("ends a process at its timeout and on an abort, through the helper", async () => {
    const launch = helper().launch;
    const started = Date.now();
    const timedOut = await failureOf(runFfmpeg(["30"], { binary: "/bin/sleep", launch, timeoutMs: 200 }));
    expect(timedOut.kind).toBe("timeout");
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 200);
    const aborted = await failureOf(
      runFfmpeg(["30"], { binary: "/bin/sleep", launch, timeoutMs: 30_000, signal: ac.signal }),
    );
    expect(aborted.kind).toBe("aborted");
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it("a helper killed under way fails what it ran at once, and its process is killed from here", async () => {
    const spawner = helper();
    let out = "";
    const running = runFfmpeg(["-c", "echo $PPID $$; exec sleep 30"], {
      binary: "/bin/sh",
      // Its stdout as it comes: the pids are known before the process ends.
      launch: (binary, args, o, on) =>
        spawner.launch(binary, args, o, {
          ...on,
          stdout: (chunk) => {
            out += chunk.toString();
            on.stdout(chunk);
          },
        }),
      timeoutMs: 60_000,
      maxStdout: 100,
    });
    const [helperPid, sleeperPid] = (await until(async () => (out.includes("\n") ? out : undefined)))
      .trim()
      .split(" ")
      .map(Number) as [number, number];
    const sleeper = await seen(sleeperPid);
    const started = Date.now();
    process.kill(helperPid, "SIGKILL");
    const failed = await failureOf(running);
    expect(failed.kind).toBe("failed");
    expect(failed.tail.join("\n")).toMatch(/the process that starts ffmpeg ended \(SIGKILL\)/);
    expect(Date.now() - started).toBeLessThan(5_000);
    await until(async () => ((await alive(sleeper)) ? undefined : true));
    // The next process starts a new helper.
    const again = await runFfmpeg(["ok"], {
      binary: "/bin/echo",
      launch: spawner.launch,
      timeoutMs: 10_000,
      maxStdout: 10,
    });
    expect(again.stdout.toString()).toBe("ok\n");
  });

  it("starts ffmpeg from the helper, at the nice value asked, without the API key", async () => {
    const previous = process.env.CLAPPER_API_KEY;
    process.env.CLAPPER_API_KEY = "sk-ml-not-for-children";
    try {
      const r = await runFfmpeg(
        // biome-ignore lint/suspicious/noTemplateCurlyInString: a shell's expansion, not a template
        ["-c", 'sleep 0.3; echo "$PPID ${CLAPPER_API_KEY-unset}"; cat /proc/$$/stat'],
        {
          binary: "/bin/sh",
          launch: helper().launch,
          timeoutMs: 10_000,
          maxStdout: 1 << 16,
          nice: 10,
        },
      );
      const [first, stat] = r.stdout.toString("utf8").split("\n");
      const [ppid, key] = (first ?? "").split(" ");
      expect(Number(ppid)).not.toBe(process.pid);
      expect(Number(ppid)).toBeGreaterThan(0);
      expect(key).toBe("unset");
      expect(niceOf(stat ?? "")).toBe(10);
    } finally {
      if (previous === undefined) delete process.env.CLAPPER_API_KEY;
      else process.env.CLAPPER_API_KEY = previous;
    }
  });

  it("does not keep a finished process alive, and closes with nothing left running", async () => {
    expect(staleBuild(), "dist/ is older than src/: run `npm run build` first").toEqual([]);
    const url = pathToFileURL(join(ROOT, "dist/episode/spawner.js")).href;
    // Runs a process through a Spawner it never closes: the script must still end by itself.
    const script = `import { Spawner } from ${JSON.stringify(url)};
      import { runFfmpeg } from ${JSON.stringify(url.replace("spawner.js", "ffmpeg-run.js"))};
      const r = await runFfmpeg(["ok"], { binary: "/bin/echo", launch: new Spawner().launch, timeoutMs: 10000, maxStdout: 100 });
      process.stdout.write(r.stdout);`;
    const child = spawn(process.execPath, ["--input-type=module", "-e", script], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    let out = "";
    child.stdout.on("data", (b: Buffer) => {
      out += b.toString();
    });
    const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
    expect(code).toBe(0);
    expect(out).toBe("ok\n");
  });

  it.each(["SIGKILL", "SIGTERM"] as const)(
    "a run killed with %s leaves neither the helper nor its process",
    async (signal) => {
      const url = pathToFileURL(join(ROOT, "dist/episode/spawner.js")).href;
      const script = `import { Spawner } from ${JSON.stringify(url)};
      import { runFfmpeg } from ${JSON.stringify(url.replace("spawner.js", "ffmpeg-run.js"))};
      runFfmpeg(["-c", "echo $PPID $$; exec sleep 30"], { binary: "/bin/sh", launch: new Spawner().launch, timeoutMs: 60000, maxStdout: 100 });
      setInterval(() => {}, 1000);`;
      const child = spawn(process.execPath, ["--input-type=module", "-e", script], {
        stdio: ["ignore", "ignore", "inherit"],
      });
      // The sleeping process's parent is the helper; both are found through /proc.
      const found = await until(async () => {
        for (const pid of await childrenOf(child.pid ?? 0)) {
          const grandchildren = await childrenOf(pid);
          if (grandchildren.length > 0)
            return { helper: await seen(pid), sleeper: await seen(grandchildren[0] as number) };
        }
        return undefined;
      });
      child.kill(signal);
      await new Promise((resolve) => child.once("exit", resolve));
      await until(async () =>
        !(await alive(found.helper)) && !(await alive(found.sleeper)) ? true : undefined,
      );
      expect(await alive(found.helper)).toBe(false);
      expect(await alive(found.sleeper)).toBe(false);
    },
  );
});

async function childrenOf(pid: number): Promise<number[]> {
  const text = await readFile(`/proc/${pid}/task/${pid}/children`, "utf8").catch(() => "");
  return text.split(" ").filter(Boolean).map(Number);
}

async function until<T>(probe: () => Promise<T | undefined>, ms = 10_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const got = await probe();
    if (got !== undefined) return got;
    if (Date.now() > end) throw new Error("not seen in time");
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

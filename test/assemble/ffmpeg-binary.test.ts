// Which ffmpeg assemble runs: --ffmpeg, then CLAPPER_FFMPEG, then ffmpeg on PATH, then the packaged
// one. Each candidate is a small shell script that notes it was run and execs a real ffmpeg, so the
// test sees which one was chosen and that it really made the episode; one that does not answer like
// ffmpeg is refused, naming where it came from.
import { existsSync } from "node:fs";
import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { findFfmpeg } from "../../src/episode/ffmpeg-binary.js";
import { ffmpegBinary } from "../../src/episode/ffmpeg-run.js";
import { cli, runIn, setup } from "../run/helpers.js";

const SYSTEM_FFMPEG = "/usr/bin/ffmpeg";
let dir: string;
const log = () => join(dir, "calls.log");

/** A script at `path` that notes its name and arguments, then runs the packaged ffmpeg (or prints `version`). */
async function wrapper(path: string, o: { version?: string; real?: string } = {}): Promise<string> {
  const real = o.real ?? ffmpegBinary();
  const fakeVersion = o.version
    ? `if [ "$2" = "-version" ]; then echo "ffmpeg version ${o.version} Copyright (c) the test"; exit 0; fi\n`
    : "";
  await mkdir(join(path, ".."), { recursive: true });
  await writeFile(
    path,
    `#!/bin/sh\necho "${path} $*" >> "${log()}"\n${fakeVersion}exec "${real}" "$@"\n`,
    "utf8",
  );
  await chmod(path, 0o755);
  return path;
}

async function calls(): Promise<string[]> {
  const text = await readFile(log(), "utf8").catch(() => "");
  return text.split("\n").filter((l) => l !== "");
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "clapper-ffmpeg-pick-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe("findFfmpeg", () => {
  it("--ffmpeg beats CLAPPER_FFMPEG beats PATH beats the packaged binary", async () => {
    const flag = await wrapper(join(dir, "flag", "ffmpeg-flag"), { version: "7.0-flag" });
    const env = await wrapper(join(dir, "env", "ffmpeg-env"), { version: "6.0-env" });
    const onPath = await wrapper(join(dir, "bin", "ffmpeg"), { version: "5.0-path" });
    // A PATH of several folders: the first holding an executable `ffmpeg` counts.
    await mkdir(join(dir, "empty"), { recursive: true });
    await writeFile(join(dir, "empty", "ffmpeg"), "not executable\n", { mode: 0o644 });
    const PATH = [join(dir, "nowhere"), join(dir, "empty"), join(dir, "bin")].join(":");

    expect(await findFfmpeg({ flag, env: { CLAPPER_FFMPEG: env, PATH } })).toEqual({
      path: flag,
      source: "flag",
      version: "7.0-flag",
    });
    expect(await findFfmpeg({ env: { CLAPPER_FFMPEG: env, PATH } })).toEqual({
      path: env,
      source: "env",
      version: "6.0-env",
    });
    expect(await findFfmpeg({ env: { PATH } })).toEqual({
      path: onPath,
      source: "path",
      version: "5.0-path",
    });
    const packaged = await findFfmpeg({ env: { PATH: join(dir, "empty") } });
    expect(packaged).toMatchObject({ path: ffmpegBinary(), source: "packaged" });
    expect(packaged.version).toMatch(/^\S+$/);
    // A bare name is looked up on PATH; a relative path is relative to cwd.
    expect(await findFfmpeg({ flag: "ffmpeg", env: { PATH } })).toMatchObject({
      path: onPath,
      source: "flag",
    });
    expect(await findFfmpeg({ env: { CLAPPER_FFMPEG: "env/ffmpeg-env" }, cwd: dir })).toMatchObject({
      path: env,
      source: "env",
    });
  });

  it("refuses, naming where it came from, a binary that does not answer like ffmpeg, a missing one and one that fails", async () => {
    const liar = join(dir, "liar");
    await writeFile(liar, "#!/bin/sh\necho 'Hello, I am not ffmpeg'\n", { mode: 0o755 });
    await expect(findFfmpeg({ flag: liar, env: {} })).rejects.toThrow(
      `the ffmpeg from --ffmpeg (${liar}) does not answer like ffmpeg: its -version began "Hello, I am not ffmpeg", not "ffmpeg version ..."`,
    );
    await expect(findFfmpeg({ env: { CLAPPER_FFMPEG: "/bin/false" } })).rejects.toThrow(
      /^the ffmpeg from CLAPPER_FFMPEG \(\/bin\/false\) does not answer -version: ffmpeg exited with code 1/,
    );
    await expect(findFfmpeg({ flag: join(dir, "absent"), env: {} })).rejects.toThrow(
      `--ffmpeg names ${join(dir, "absent")}, which is not an executable file`,
    );
    await expect(findFfmpeg({ flag: "no-such-ffmpeg", env: { PATH: dir } })).rejects.toThrow(
      "--ffmpeg names no-such-ffmpeg, which is not on PATH",
    );
    // PATH's ffmpeg, when it is not one, is an error too: never silently another.
    await mkdir(join(dir, "liarbin"), { recursive: true });
    await writeFile(join(dir, "liarbin", "ffmpeg"), "#!/bin/sh\necho nope\n", { mode: 0o755 });
    await expect(findFfmpeg({ env: { PATH: join(dir, "liarbin") } })).rejects.toThrow(
      /^the ffmpeg from PATH \(.*\/liarbin\/ffmpeg\) does not answer like ffmpeg/,
    );
  });
});

describe("assemble --ffmpeg", () => {
  it("makes the episode with the chosen ffmpeg, says which in --json, and a new version assembles again; a bad one exits 2", async () => {
    const { s, w } = await setup();
    const file = await w.manifest(
      {
        name: "ep01",
        shots: [{ id: "s01", prompt: "A lighthouse at dusk" }],
        lines: [{ id: "n01", shot: "s01", text: "One two three." }],
      },
      "ep01.yaml",
    );
    expect((await runIn(s, file)).outcome.exitCode).toBe(0);
    await rm(log(), { force: true });
    const flag = await wrapper(join(dir, "cli", "ffmpeg-a"));
    const env = await wrapper(join(dir, "cli", "ffmpeg-b"));
    const PATH = join(dir, "bin");
    await wrapper(join(PATH, "ffmpeg"));

    const first = await cli(
      undefined,
      ["assemble", file, "--json", "--ffmpeg", flag],
      { CLAPPER_FFMPEG: env, PATH },
      "silent",
    );
    expect(first.code, first.err).toBe(0);
    const a = JSON.parse(first.out);
    expect(a.status).toBe("assembled");
    expect(a.ffmpeg).toEqual({ path: flag, source: "flag", version: expect.stringMatching(/^\S+$/) });
    // The flag's ffmpeg read the inputs and wrote the episode; the others were never run.
    const ran = await calls();
    expect(ran.some((l) => l.startsWith(`${flag} `) && l.includes("-filter_complex"))).toBe(true);
    expect(ran.filter((l) => !l.startsWith(`${flag} `))).toEqual([]);
    expect(JSON.parse(await readFile(join(w.out(), "reports", "assemble.json"), "utf8")).ffmpeg).toEqual(
      a.ffmpeg,
    );

    // Another binary of the same version: the episode stands, and the answer names the one chosen now.
    const byEnv = await cli(undefined, ["assemble", file, "--json"], { CLAPPER_FFMPEG: env, PATH }, "silent");
    expect(JSON.parse(byEnv.out)).toMatchObject({
      status: "up-to-date",
      ffmpeg: { path: env, source: "env" },
    });

    // Another version: made again (the version is part of the episode's fingerprint).
    const newer = await wrapper(join(dir, "cli", "ffmpeg-newer"), { version: "99.1-test" });
    const remade = JSON.parse(
      (await cli(undefined, ["assemble", file, "--json"], { CLAPPER_FFMPEG: newer, PATH }, "silent")).out,
    );
    expect(remade).toMatchObject({ status: "assembled", ffmpeg: { source: "env", version: "99.1-test" } });
    expect(remade.fingerprint).not.toBe(a.fingerprint);

    const liar = join(dir, "cli", "liar");
    await writeFile(liar, "#!/bin/sh\necho 'usage: something else'\n", { mode: 0o755 });
    const bad = await cli(undefined, ["assemble", file, "--ffmpeg", liar], {}, "silent");
    expect(bad.code).toBe(2);
    expect(bad.err).toContain(`the ffmpeg from --ffmpeg (${liar}) does not answer like ffmpeg`);
  }, 120_000);

  it("with Debian's ffmpeg on PATH: source path, its version, and a checked episode", async (ctx) => {
    if (!existsSync(SYSTEM_FFMPEG)) {
      if (process.env.CI) throw new Error(`${SYSTEM_FFMPEG} is missing (apt-get install ffmpeg)`);
      ctx.skip(`${SYSTEM_FFMPEG} is missing: install Debian's ffmpeg to run this test`);
    }
    const { s, w } = await setup();
    const file = await w.manifest(
      {
        name: "ep01",
        shots: [
          { id: "s01", prompt: "A lighthouse at dusk" },
          { id: "s02", prompt: "Waves" },
        ],
        lines: [{ id: "n01", shot: "s01", text: "One two three." }],
      },
      "ep01.yaml",
    );
    expect((await runIn(s, file)).outcome.exitCode).toBe(0);
    const r = await cli(
      undefined,
      ["assemble", file, "--json"],
      { PATH: "/usr/local/bin:/usr/bin:/bin" },
      "silent",
    );
    expect(r.code, r.err).toBe(0);
    const a = JSON.parse(r.out);
    expect(a.ffmpeg.source).toBe("path");
    expect(a.ffmpeg.path).toMatch(/\/ffmpeg$/);
    expect(a.ffmpeg.version).not.toBe((await findFfmpeg({ env: {} })).version);
    expect(a.episode).toMatchObject({ streams: { video: 1, audio: 1 } });
    expect(Math.abs(a.episode.duration_seconds - 8)).toBeLessThanOrEqual(1 / 24);
  }, 120_000);
});

// Issue 9, items 16 and 19: every file the manifest side reads is a regular file, outside /proc,
// /dev and /sys, read up to a limit, and opened without blocking (a FIFO never hangs a plan).
// Errors quote at most a short snippet of a file that is not a manifest, with anything like an
// API key masked.
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { symlink, truncate, writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:net";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FILE_LIMITS, FileError, readTextFile } from "../../src/manifest/files.js";
import { redactKeys, snippet } from "../../src/manifest/problems.js";
import { png } from "../helpers/png.js";
import { type Workspace, workspace, yaml } from "./workspace.js";

const SECRET = "sk-ml-SECRETabcdefghijklmnopqrstuvwxyz0123456789";
/** Some of the key that must never be printed (the prefix alone is fine). */
const leaks = (text: string) => [SECRET, "SECRETabcdef", "uvwxyz0123456789"].filter((k) => text.includes(k));

let ws: Workspace;
beforeAll(async () => {
  ws = await workspace("clapper-files-");
});
afterAll(() => ws.remove());

const fifo = (path: string) => execFileSync("mkfifo", [path]);
/** Special files fail fast: a FIFO that blocked would hold the test until its timeout. */
const FAST = 5_000;

async function refusal(path: string, maxBytes = 1024): Promise<FileError> {
  const error = await readTextFile(path, { maxBytes, what: "a test file" }).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(FileError);
  return error as FileError;
}

describe("readTextFile", () => {
  it("reads a regular file up to its limit, and refuses one byte more, naming the limit", async () => {
    const dir = await ws.folder({ "ok.txt": "x".repeat(1024), "big.txt": "x".repeat(1025) });
    expect(await readTextFile(join(dir, "ok.txt"), { maxBytes: 1024, what: "a test file" })).toHaveLength(
      1024,
    );
    expect((await refusal(join(dir, "big.txt"))).message).toBe(
      "over the 1 KiB limit for a test file (got 1025 bytes)",
    );
    await writeFile(join(dir, "huge.txt"), "");
    await truncate(join(dir, "huge.txt"), 200 * 1024 * 1024);
    expect((await refusal(join(dir, "huge.txt"), 8 * 1024 * 1024)).message).toBe(
      "over the 8 MiB limit for a test file (got 209715200 bytes)",
    );
  });

  it(
    "refuses a FIFO at once, without waiting for a writer",
    async () => {
      const dir = await ws.folder();
      fifo(join(dir, "pipe"));
      const error = await refusal(join(dir, "pipe"));
      expect(error.message).toBe("a named pipe (FIFO), not a regular file");
    },
    FAST,
  );

  it("refuses a folder, a socket and a missing file, and a path with a NUL", async () => {
    const dir = await ws.folder();
    expect((await refusal(dir)).message).toBe("a folder, not a file");
    const server: Server = createServer();
    await new Promise<void>((done) => server.listen(join(dir, "sock"), done));
    try {
      expect((await refusal(join(dir, "sock"))).message).toBe("a socket, not a regular file");
    } finally {
      server.close();
    }
    expect((await refusal(join(dir, "absent"))).message).toBe("file not found");
    expect((await refusal(`${dir}/a\0b`)).message).toBe("the path contains a NUL character");
  });

  it(
    "refuses devices and everything under /proc, /dev and /sys, also through a symbolic link",
    async () => {
      const dir = await ws.folder();
      expect((await refusal("/dev/zero")).message).toBe("a device, not a regular file");
      expect((await refusal("/dev/null")).message).toBe("a device, not a regular file");
      // /proc files claim to be regular files of size 0.
      expect((await refusal("/proc/self/environ")).message).toBe(
        "under /proc (a special file system): not read",
      );
      expect((await refusal("/proc/self/status")).message).toBe(
        "under /proc (a special file system): not read",
      );
      await symlink("/proc/self/environ", join(dir, "env.csv"));
      expect((await refusal(join(dir, "env.csv"))).message).toBe(
        "under /proc (a special file system): not read",
      );
      await symlink("/dev/zero", join(dir, "zero.csv"));
      expect((await refusal(join(dir, "zero.csv"))).message).toBe("a device, not a regular file");
      const sys = ["/sys/kernel/address_bits", "/sys/kernel/profiling", "/sys/power/state"].find((p) =>
        existsSync(p),
      );
      if (sys) expect((await refusal(sys)).message).toBe("under /sys (a special file system): not read");
    },
    FAST,
  );

  it("has the limits of the brief: manifest 8 MiB, CSV 128 MiB, template and skill 1 MiB, key 4 KiB", () => {
    expect(FILE_LIMITS).toEqual({
      manifest: 8 * 1024 * 1024,
      csv: 128 * 1024 * 1024,
      template: 1024 * 1024,
      skill: 1024 * 1024,
      apiKey: 4 * 1024,
    });
  });
});

describe("snippet", () => {
  it("keeps short text, cuts long text at 40 characters with an ellipsis, and masks API keys", () => {
    expect(snippet("duration")).toBe("duration");
    expect(snippet("x".repeat(40))).toBe("x".repeat(40));
    expect(snippet("y".repeat(41))).toBe(`${"y".repeat(39)}…`);
    expect(snippet(SECRET)).toBe("sk-ml-…[redacted]");
    expect(snippet(`key=${SECRET} and more text after it, a lot more`)).toBe(
      "key=sk-ml-…[redacted] and more text aft…",
    );
    expect(redactKeys(`a "${SECRET}" b Bearer ${SECRET}`)).toBe(
      'a "sk-ml-…[redacted]" b Bearer sk-ml-…[redacted]',
    );
    // The prefix alone names no key.
    expect(redactKeys("expected the prefix sk-ml-")).toBe("expected the prefix sk-ml-");
  });
});

describe("the manifest and the files it names", () => {
  it(
    "refuses a FIFO as the manifest, as a CSV file, a template, a skill, a material and a voice",
    async () => {
      const dir = await ws.folder({
        "m.yaml": yaml(
          "name: pipes",
          "skills: { noir: noir.md }",
          "shots: shots.csv",
          "lines:",
          "  - { id: n1, text: hello, voice: voice.wav }",
        ),
        "y.yaml": yaml(
          "name: pipes",
          "skills: { noir: noir.md }",
          "shots:",
          "  - { id: s1, template: t, use_context_ir: true, skill: noir }",
          "  - { id: s2, prompt: x, first_frame: frame.png }",
          "lines:",
          "  - { id: n1, text: hello, voice: voice.wav }",
        ),
      });
      for (const name of ["pipe.yaml", "shots.csv", "noir.md", "templates/t.txt", "frame.png", "voice.wav"]) {
        if (name.includes("/")) execFileSync("mkdir", ["-p", join(dir, "templates")]);
        fifo(join(dir, name));
      }
      expect((await ws.loadFrom(dir, "pipe.yaml")).formatted).toEqual([
        "pipe.yaml: a named pipe (FIFO), not a regular file",
      ]);
      expect((await ws.loadFrom(dir, "m.yaml")).formatted).toEqual([
        "m.yaml:2: skills.noir: noir.md: a named pipe (FIFO), not a regular file",
        "m.yaml:3: shots: shots.csv: a named pipe (FIFO), not a regular file",
        "m.yaml:5: voice: voice.wav is a named pipe (FIFO), not a regular file",
      ]);
      expect((await ws.loadFrom(dir, "y.yaml")).formatted).toEqual([
        "y.yaml:2: skills.noir: noir.md: a named pipe (FIFO), not a regular file",
        'y.yaml:4: template: template "t": templates/t.txt: a named pipe (FIFO), not a regular file',
        "y.yaml:5: first_frame: frame.png is a named pipe (FIFO), not a regular file",
        "y.yaml:7: voice: voice.wav is a named pipe (FIFO), not a regular file",
      ]);
    },
    FAST,
  );

  it("requires CSV files of rows to end in .csv, so a key file is never read as one", async () => {
    const r = await ws.load({
      "m.yaml": yaml("name: keys", "shots: shots.CSV", "lines: key.txt"),
      "shots.CSV": "id,prompt\ns1,fine\n",
      "key.txt": `${SECRET}\n`,
    });
    expect(r.formatted).toEqual(['m.yaml:3: lines: expected a .csv file of lines, got "key.txt"']);
    expect(r.jobs.map((j) => j.id)).toEqual(["shot/s1"]);
    expect(leaks(JSON.stringify(r))).toEqual([]);
  });

  it(
    "refuses /proc, /dev and /sys as CSV files of rows, directly or through a link named .csv",
    async () => {
      const dir = await ws.folder({
        "m.yaml": yaml("name: special", "shots: /proc/self/environ", "lines: /dev/zero"),
        "n.yaml": yaml("name: special", "shots: env.csv", "lines: zero.csv"),
      });
      await symlink("/proc/self/environ", join(dir, "env.csv"));
      await symlink("/dev/zero", join(dir, "zero.csv"));
      expect((await ws.loadFrom(dir, "m.yaml")).formatted).toEqual([
        'm.yaml:2: shots: expected a .csv file of shots, got "/proc/self/environ"',
        'm.yaml:3: lines: expected a .csv file of lines, got "/dev/zero"',
      ]);
      const r = await ws.loadFrom(dir, "n.yaml");
      expect(r.formatted).toEqual([
        "n.yaml:2: shots: env.csv: under /proc (a special file system): not read",
        "n.yaml:3: lines: zero.csv: a device, not a regular file",
      ]);
      // Nothing of the environment is quoted.
      expect(JSON.stringify(r)).not.toContain(process.env.PATH ?? "PATH=");
    },
    FAST,
  );

  it("quotes at most a short, masked snippet of a CSV file: column names, cells and kinds", async () => {
    const long = `column_${"z".repeat(80)}`;
    const dir = await ws.folder({
      "m.csv": `kind,id,prompt,${SECRET},${long}\nshot,s1,fine,,\n${SECRET},s2,x,,\nshot,s3,x,,\n`,
      "n.yaml": yaml("name: n", "shots: rows.csv"),
      "rows.csv": `id,prompt,duration\ns1,x,${SECRET}\ns2,x,${"x".repeat(100)}\n`,
    });
    const bare = await ws.loadFrom(dir, "m.csv");
    expect(bare.formatted).toEqual([
      "m.csv:1: sk-ml-…[redacted]: unknown column: no such field",
      `m.csv:1: column_${"z".repeat(32)}…: unknown column: no such field`,
      'm.csv:3: kind: expected "shot" or "line", got "sk-ml-…[redacted]"',
    ]);
    const rows = await ws.loadFrom(dir, "n.yaml");
    expect(rows.formatted).toEqual([
      'rows.csv:2: duration: expected an integer or auto, got "sk-ml-…[redacted]"',
      `rows.csv:3: duration: expected an integer or auto, got "${"x".repeat(39)}…"`,
    ]);
    expect(leaks(JSON.stringify([bare, rows]))).toEqual([]);
  });

  it("says a CSV syntax error in words, naming the column, never quoting the cell it stops in", async () => {
    const r = await ws.load({
      "m.csv": `kind,id,prompt\nshot,s1,${SECRET} and a long text that runs on "quoted"\n`,
    });
    expect(r.formatted).toEqual([
      'm.csv:2: prompt: CSV: a " inside a cell that does not start with one: quote the whole cell and double each " inside it (for example "A ""lighthouse"" at dusk")',
    ]);
  });

  it("refuses a templates folder under /proc, and a template or a skill over 1 MiB", async () => {
    const r = await ws.load({
      "m.yaml": yaml("name: t", "templates: /proc/self", "shots:", "  - { id: s1, template: environ }"),
    });
    expect(r.formatted).toEqual([
      "m.yaml:2: templates: /proc/self is under /proc (a special file system): not read",
      'm.yaml:4: template: no template "environ" in the templates folder',
    ]);
    expect(JSON.stringify(r)).not.toContain(process.env.PATH ?? "PATH=");
    const big = await ws.load({
      "m.yaml": yaml("name: t", "skills: { huge: huge.md }", "shots:", "  - { id: s1, template: huge }"),
      "huge.md": "x".repeat(1024 * 1024 + 1),
      "templates/huge.txt": "x".repeat(1024 * 1024 + 1),
    });
    expect(big.formatted).toEqual([
      "m.yaml:2: skills.huge: huge.md: over the 1 MiB limit for a skill (got 1048577 bytes)",
      'm.yaml:4: template: template "huge": templates/huge.txt: over the 1 MiB limit for a template (got 1048577 bytes)',
    ]);
  });

  it(
    "refuses materials and voices that are devices, or under /proc, /dev and /sys",
    async () => {
      const dir = await ws.folder({
        "m.yaml": yaml(
          "name: m",
          "shots:",
          "  - id: s1",
          "    prompt: x <Picture 1>",
          "    reference_images: [/dev/zero, env.png, ok.png]",
          "    reference_audios: [/dev/urandom]",
          "lines:",
          "  - { id: n1, text: hello, voice: /proc/self/environ.wav }",
          "  - { id: n2, text: hello, voice: env.wav }",
        ),
        "ok.png": png(64, 64),
      });
      await symlink("/proc/self/environ", join(dir, "env.png"));
      await symlink("/proc/self/environ", join(dir, "env.wav"));
      const r = await ws.loadFrom(dir, "m.yaml");
      expect(r.formatted).toEqual([
        "m.yaml:5: reference_images[0]: /dev/zero is a device, not a regular file",
        "m.yaml:5: reference_images[1]: env.png is under /proc (a special file system): not read",
        "m.yaml:6: reference_audios[0]: /dev/urandom is a device, not a regular file",
        "m.yaml:8: voice: /proc/self/environ.wav: file not found",
        "m.yaml:9: voice: env.wav is under /proc (a special file system): not read",
      ]);
    },
    FAST,
  );
});

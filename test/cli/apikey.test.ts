// Issue 9, item 24: --api-key-file. A wrong path is not echoed (it may be the key itself, pasted by
// mistake), the file is read through the manifest side's safe reader (a FIFO does not hang, a
// device or a huge file is refused), and a key file readable by others gets a warning.
import { execFileSync } from "node:child_process";
import { chmod, mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, readApiKeyFile } from "../../src/cli/config.js";
import { ExitError } from "../../src/cli/errors.js";
import { type TempDir, tempDir } from "../fixtures/audio.js";

const KEY = "sk-ml-apikeytestABCDEFGHIJKLMNOPQRSTUVWXYZ012345";

let dir: TempDir;
beforeAll(async () => {
  dir = await tempDir("clapper-apikey-");
});
afterAll(() => dir.remove());

async function refusal(path: string): Promise<string> {
  const error = await readApiKeyFile(path).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ExitError);
  expect((error as ExitError).code).toBe(2);
  return (error as ExitError).message;
}

describe("readApiKeyFile", () => {
  it("reads the key of a private file, trimmed, with no warning", async () => {
    const file = await dir.file("private.key", `\n  ${KEY}\n`);
    await chmod(file, 0o600);
    expect(await readApiKeyFile(file)).toEqual({ key: KEY });
  });

  it("warns about a key file that group or others can read, without naming the file or the key", async () => {
    const file = await dir.file("shared.key", `${KEY}\n`);
    await chmod(file, 0o644);
    const read = await readApiKeyFile(file);
    expect(read.key).toBe(KEY);
    expect(read.warning).toBe(
      "the file given to --api-key-file can be read by other users (mode 644): chmod 600 it",
    );
    await chmod(file, 0o640);
    expect((await readApiKeyFile(file)).warning).toContain("(mode 640)");
  });

  it("does not echo a wrong path, which may be the key pasted by mistake", async () => {
    const message = await refusal(KEY);
    expect(message).toBe(
      "cannot read --api-key-file: file not found (the path is not shown: it may be a key pasted by mistake)",
    );
    expect(message).not.toContain("apikeytest");
    expect(await refusal(join(dir.path, `${KEY}.txt`))).not.toContain("apikeytest");
  });

  it("refuses a FIFO at once, a folder, a device and a file over 4 KiB, naming the limit", async () => {
    const fifo = join(dir.path, "key.fifo");
    execFileSync("mkfifo", [fifo]);
    expect(await refusal(fifo)).toContain(
      "cannot read --api-key-file: a named pipe (FIFO), not a regular file",
    );
    await mkdir(join(dir.path, "folder"));
    expect(await refusal(join(dir.path, "folder"))).toContain(
      "cannot read --api-key-file: a folder, not a file",
    );
    expect(await refusal("/dev/zero")).toContain("cannot read --api-key-file: a device, not a regular file");
    expect(await refusal("/proc/self/environ")).toContain("under /proc");
    const big = await dir.file("big.key", `${KEY}\n${"x".repeat(5000)}`);
    expect(await refusal(big)).toContain("over the 4 KiB limit for an API key file (got 5049 bytes)");
  }, 5_000);

  it("says an empty file is empty, without its path", async () => {
    const file = await dir.file("empty.key", " \n");
    expect(await refusal(file)).toBe("--api-key-file: the file is empty");
  });
});

describe("connect", () => {
  it("logs the warning about a shared key file through the logger", async () => {
    const file = join(dir.path, "connect.key");
    await writeFile(file, `${KEY}\n`, { mode: 0o644 });
    await chmod(file, 0o644);
    const warnings: Array<[object, string | undefined]> = [];
    const logger = { debug() {}, warn: (obj: object, msg?: string) => warnings.push([obj, msg]) };
    const conn = await connect({ "api-key-file": file }, { CLAPPER_BASE_URL: "http://127.0.0.1:9" }, logger);
    await conn.close();
    expect(warnings).toEqual([
      [{}, "the file given to --api-key-file can be read by other users (mode 644): chmod 600 it"],
    ]);
    expect(JSON.stringify(warnings)).not.toContain("apikeytest");
  });
});

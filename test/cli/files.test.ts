// Issue 10: file system errors become messages that name the path and what to do (exit 2), never
// a raw EACCES or a crash. Permission is tested for real: the tests run as root, which no mode
// stops, so the CLI runs as the unprivileged user `nobody` (uid 65534) on folders root owns (as
// root can switch users); run by another user, the folders are made read-only for it instead.
import { spawnSync } from "node:child_process";
import { chmod, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BIN, staleBuild } from "../run/harness.js";
import { clapper, type Folder, folder, oneJson, smallManifest } from "./cli-process.js";

const ROOT = process.getuid?.() === 0;
const NOBODY = { uid: 65534, gid: 65534 };

/** As root: whether `nobody` can run the built CLI from here (it must read the repository). */
function nobodyCanRun(): boolean {
  if (!ROOT) return true;
  const r = spawnSync(process.execPath, [BIN, "--version"], { ...NOBODY, encoding: "utf8" });
  if (r.status === 0) return true;
  // A checkout under a folder only root may enter (mktemp -d makes one): nobody cannot run the CLI.
  console.warn(
    `permission tests skipped: user nobody cannot run ${BIN} (a parent folder closed to others?): ${/^\w*Error\b.*$/m.exec(r.stderr)?.[0] ?? `exit ${r.status}`}`,
  );
  return false;
}

const user = ROOT ? NOBODY : {};
let dir: Folder;
let manifest: string;

beforeAll(async () => {
  expect(staleBuild(), "dist/ is older than src/: run `npm run build` first").toEqual([]);
  dir = await folder("clapper-files-");
  manifest = await dir.file("ep.yaml", smallManifest("ep"));
  // A finished run, made by the owner: state and outputs exist.
  const done = await clapper(["run", manifest, "--sandbox"], { cwd: dir.path });
  expect(done.code, done.stderr).toBe(0);
  if (!ROOT) {
    // Not root: the folders themselves refuse this user.
    await chmod(dir.path, 0o555);
    await chmod(join(dir.path, "output", "ep", "reports"), 0o555);
  } else {
    // The run's own folder is open (its lock can be taken), its reports folder is not.
    await chmod(join(dir.path, ".clapper", "ep"), 0o777);
    await chmod(join(dir.path, ".clapper", "ep", "state.jsonl"), 0o666);
  }
});
afterAll(async () => {
  await chmod(dir.path, 0o755).catch(() => undefined);
  await dir?.remove();
});

describe.skipIf(!nobodyCanRun())("permission denied (EACCES), for real", () => {
  it("a state folder that cannot be created: the path, the reason, --state", async () => {
    const fresh = await dir.file("fresh.yaml", smallManifest("fresh"));
    const r = await clapper(["run", fresh, "--sandbox", "--json"], { cwd: dir.path, ...user });
    expect(r.code, r.stderr).toBe(2);
    expect(oneJson(r).error.message).toBe(
      `cannot create the state folder ${join(dir.path, ".clapper", "fresh")}: permission denied (EACCES); pass --state FILE in a writable place, or run from a writable folder`,
    );
    expect(r.stderr).not.toMatch(/^\s+at /m);
  });

  it("reports that cannot be written again: the folder, the reason, --output", async () => {
    const r = await clapper(["report", manifest, "--json"], { cwd: dir.path, ...user });
    expect(r.code, r.stderr).toBe(2);
    expect(oneJson(r).error.message).toBe(
      `cannot write the reports in ${join(dir.path, "output", "ep", "reports")}: permission denied (EACCES); give this user write access there, or pass --output DIR to write them elsewhere`,
    );
  });

  it("a sandbox state folder that cannot be created", async () => {
    const r = await clapper(
      ["tasks", "list", "--sandbox", "--sandbox-state", join(dir.path, "nope", "sandbox.json"), "--json"],
      { cwd: dir.path, ...user },
    );
    expect(r.code, r.stderr).toBe(2);
    expect(oneJson(r).error.message).toBe(
      `cannot create the folder of the sandbox state ${join(dir.path, "nope")}: permission denied (EACCES); pass --sandbox-state FILE in a writable place`,
    );
  });

  it.skipIf(!ROOT)("an unreadable manifest and an unreadable key file", async () => {
    const secret = join(dir.path, ".clapper", "ep", "private.yaml");
    await writeFile(secret, smallManifest("private"), { mode: 0o600 });
    const key = join(dir.path, ".clapper", "ep", "key");
    await writeFile(key, "sk-ml-abc\n", { mode: 0o600 });
    const [plan, balance] = await Promise.all([
      clapper(["plan", secret, "--json"], { cwd: dir.path, ...user }),
      clapper(["balance", "--api-key-file", key, "--base-url", "http://127.0.0.1:1", "--json"], {
        cwd: dir.path,
        ...user,
      }),
    ]);
    expect(plan.code).toBe(2);
    expect(oneJson(plan).error.problems[0].message).toContain("permission denied");
    expect(balance.code).toBe(2);
    expect(oneJson(balance).error.message).toContain("cannot read --api-key-file");
  });
});

describe("paths that cannot be folders (ENOTDIR), and missing files (ENOENT)", () => {
  it("name the path and the reason", async () => {
    const r = await clapper(["status", manifest, "--state", join(manifest, "s", "state.jsonl"), "--json"], {
      cwd: dir.path,
    });
    expect(r.code).toBe(2);
    expect(oneJson(r).error.message).toBe(
      `cannot read the run's state ${join(manifest, "s", "state.jsonl")}: a part of the path is a file, not a folder (ENOTDIR); pass --state FILE`,
    );
    const push = await clapper(["skills", "push", join(dir.path, "absent"), "--sandbox", "--json"], {
      cwd: dir.path,
      env: { CLAPPER_LOG_LEVEL: "silent" },
    });
    expect(push.code).toBe(2);
    expect(oneJson(push).error.message).toBe(
      `cannot read the skills folder ${join(dir.path, "absent")}: no such file or folder (ENOENT)`,
    );
  });
});

/**
 * A read-only tmpfs mounted for the test (root, where mounting is allowed); undefined where it is
 * not: there is no other way to make a file system read-only for real.
 */
function readOnlyMount(): { path: string; unmount(): void } | undefined {
  if (!ROOT) return undefined;
  const path = join(dir.path, "ro");
  spawnSync("mkdir", ["-p", path]);
  const r = spawnSync("mount", ["-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", path], { encoding: "utf8" });
  if (r.status !== 0) {
    console.warn(`read-only file system test skipped: mount -o ro refused here (${r.stderr.trim()})`);
    return undefined;
  }
  return { path, unmount: () => void spawnSync("umount", [path]) };
}

describe("a read-only file system (EROFS), for real", () => {
  it("an output folder on it is refused saying so, with the system's code, before anything is spent", async (ctx) => {
    const ro = readOnlyMount();
    if (!ro) return ctx.skip();
    try {
      const fresh = await dir.file("ro.yaml", smallManifest("ro"));
      const out = join(ro.path, "renders", "tonight");
      const r = await clapper(["run", fresh, "--sandbox", "--json", "--output", out], { cwd: dir.path });
      expect(r.code, r.stderr).toBe(2);
      expect(oneJson(r).error.message).toContain(
        `the output folder ${join(out, "ro")} is not writable (read-only file system, EROFS: choose another folder with --output)`,
      );
      expect(oneJson(r).error.message).not.toContain("ENOENT");
    } finally {
      ro.unmount();
    }
  });
});

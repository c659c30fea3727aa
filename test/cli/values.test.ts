// Issue 10 (CLI): the parsers of flag values (--max-failures, --deadline, numbers that quote what
// was typed), parseCommandLine (clapper's own parser, run without running anything), CLAPPER_*
// variables as flags, GitHub workflow-command escaping, and the translation of errors into exit
// codes and messages (file system errors included).
import { describe, expect, it } from "vitest";
import { ConnectionError, ServiceError } from "../../src/api/errors.js";
import { classify, fsExit, fsReason } from "../../src/cli/errors.js";
import { bugsUrl, parseCommandLine } from "../../src/cli/main.js";
import { envName } from "../../src/cli/options.js";
import { escapeData, escapeProperty, workflowCommand } from "../../src/cli/output.js";
import {
  parseDeadline,
  parseDuration,
  parseMaxFailures,
  parseNumber,
  parseRps,
} from "../../src/cli/values.js";

const NOW = new Date("2026-11-24T22:00:00Z");

function refusal(fn: () => unknown): string {
  try {
    fn();
  } catch (error) {
    expect((error as { code?: number }).code).toBe(2);
    return (error as Error).message;
  }
  throw new Error("expected a refusal");
}

describe("--max-failures N|P%", () => {
  it("takes a whole number of jobs, or a percentage above 0 and up to 100", () => {
    expect(parseMaxFailures("0")).toEqual({ count: 0 });
    expect(parseMaxFailures("12")).toEqual({ count: 12 });
    expect(parseMaxFailures("10%")).toEqual({ percent: 10 });
    expect(parseMaxFailures("2.5%")).toEqual({ percent: 2.5 });
    expect(parseMaxFailures("100%")).toEqual({ percent: 100 });
  });

  it("refuses anything else, quoting what it got", () => {
    expect(refusal(() => parseMaxFailures("abc"))).toBe(
      '--max-failures: expected a whole number of failed jobs >= 0 (like 3) or a percentage above 0 and up to 100 (like 10%), got "abc"',
    );
    expect(refusal(() => parseMaxFailures("1.5"))).toContain('got "1.5"');
    expect(refusal(() => parseMaxFailures("-1"))).toContain('got "-1"');
    expect(refusal(() => parseMaxFailures("0%"))).toBe(
      '--max-failures: a percentage must be above 0 and up to 100, got "0%"',
    );
    expect(refusal(() => parseMaxFailures("150%"))).toContain('got "150%"');
    expect(refusal(() => parseMaxFailures("x", "CLAPPER_MAX_FAILURES"))).toMatch(/^CLAPPER_MAX_FAILURES: /);
  });
});

describe("--deadline DURATION|ISO-TIME", () => {
  it("reads durations: 90s, 45m, 2h, 1h30m, 1d, plain seconds, decimals", () => {
    expect(parseDuration("90s")).toBe(90);
    expect(parseDuration("45m")).toBe(2700);
    expect(parseDuration("2h")).toBe(7200);
    expect(parseDuration("1h30m")).toBe(5400);
    expect(parseDuration("1d2h")).toBe(93_600);
    expect(parseDuration("600")).toBe(600);
    expect(parseDuration("1.5h")).toBe(5400);
    expect(parseDuration("2x")).toBeUndefined();
    expect(parseDuration("")).toBeUndefined();
    expect(parseDeadline("1h30m", NOW).toISOString()).toBe("2026-11-24T23:30:00.000Z");
    expect(parseDeadline("600", NOW).toISOString()).toBe("2026-11-24T22:10:00.000Z");
  });

  it("reads a time with its zone, Z or an offset", () => {
    expect(parseDeadline("2026-11-25T06:00:00Z", NOW).toISOString()).toBe("2026-11-25T06:00:00.000Z");
    expect(parseDeadline("2026-11-25T07:00:00+01:00", NOW).toISOString()).toBe("2026-11-25T06:00:00.000Z");
    expect(parseDeadline("2026-11-25T01:00-0500", NOW).toISOString()).toBe("2026-11-25T06:00:00.000Z");
  });

  it("refuses a time in the past, a time without a zone, an impossible date, a zero duration, words", () => {
    expect(refusal(() => parseDeadline("2026-11-24T21:00:00Z", NOW))).toBe(
      "--deadline: 2026-11-24T21:00:00Z is in the past (it is 2026-11-24T22:00:00Z now); give a later time or a duration like 2h",
    );
    expect(refusal(() => parseDeadline("2026-11-25T06:00:00", NOW))).toContain("a time needs its zone");
    expect(refusal(() => parseDeadline("2026-02-30T06:00:00Z", NOW))).toBe(
      '--deadline: not a real date and time, got "2026-02-30T06:00:00Z"',
    );
    expect(refusal(() => parseDeadline("0s", NOW))).toBe('--deadline: a duration must be above 0, got "0s"');
    expect(refusal(() => parseDeadline("tomorrow", NOW))).toBe(
      '--deadline: expected a duration (90s, 45m, 2h, 1h30m, or seconds: 600) or a time with its zone (2026-11-25T06:00:00Z), got "tomorrow"',
    );
  });
});

describe("numbers", () => {
  it("quote the text typed, never NaN", () => {
    expect(parseNumber("--rps", "2.5", { min: 0.1 })).toBe(2.5);
    expect(parseNumber("--rps", 3, { min: 0.1 })).toBe(3);
    expect(refusal(() => parseNumber("--max-points", "abc", { min: 0, integer: true, unit: "points" }))).toBe(
      '--max-points: expected a whole number of points >= 0, got "abc"',
    );
    expect(refusal(() => parseNumber("--max-points", "1.5", { min: 0, integer: true }))).toContain(
      'got "1.5"',
    );
    expect(refusal(() => parseNumber("--timeout", "0", { min: 0, above: true }))).toBe(
      '--timeout: expected a number > 0, got "0"',
    );
    expect(refusal(() => parseNumber("--rps", "", { min: 0.1 }))).toContain('got ""');
    expect(refusal(() => parseNumber("--rps", "0x10", {}))).toContain('got "0x10"');
  });
});

describe("parseCommandLine", () => {
  it("accepts a valid command line and gives its command and parsed values", async () => {
    const r = await parseCommandLine([
      "run",
      "jobs/demo.yaml",
      "--sandbox",
      "--max-points",
      "3000",
      "--max-failures",
      "10%",
      "--deadline",
      "2h",
      "--json",
    ]);
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.command).toBe("run");
    expect(r.args).toMatchObject({
      manifest: "jobs/demo.yaml",
      sandbox: true,
      "max-points": 3000,
      json: true,
    });
    expect(r.args["max-failures"]).toEqual({ percent: 10 });
    const deadline = r.args.deadline as Date;
    expect(Math.abs(deadline.getTime() - (Date.now() + 7200_000))).toBeLessThan(60_000);
    expect(await parseCommandLine(["tasks", "list", "--kind", "video", "--limit", "5"])).toMatchObject({
      ok: true,
      command: "tasks list",
      args: { kind: "video", limit: 5 },
    });
    expect(await parseCommandLine(["--help"])).toMatchObject({ ok: true, command: "help" });
    expect(await parseCommandLine(["completion"])).toMatchObject({ ok: true, command: "completion" });
  });

  it("applies the same strict checks and value checks as a real invocation", async () => {
    const bad = async (argv: string[], env: NodeJS.ProcessEnv = {}) => {
      const r = await parseCommandLine(argv, env);
      expect(r.ok, JSON.stringify(argv)).toBe(false);
      return r.ok ? "" : r.message;
    };
    expect(await bad(["run", "m.yaml", "--max-pionts", "5"])).toBe(
      "unknown argument: --max-pionts (did you mean --max-points?) (see clapper --help)",
    );
    expect(await bad(["run"])).toBe("missing an argument: see clapper run --help");
    expect(await bad(["runn", "m.yaml"])).toBe(
      'unknown command "runn": did you mean run? (see clapper --help)',
    );
    expect(await bad(["run", "m.yaml", "--max-points", "abc"])).toBe(
      '--max-points: expected a whole number of points >= 0, got "abc"',
    );
    expect(await bad(["run", "m.yaml", "--max-failures", "200%"])).toContain("200%");
    expect(await bad(["run", "m.yaml", "--deadline", "2001-01-01T00:00:00Z"])).toContain("is in the past");
    expect(await bad(["run", "m.yaml", "--log-format", "fancy"])).toBe(
      '--log-format: expected one of json, pretty, got "fancy"',
    );
    expect(await bad(["tasks", "list", "--status", "bogus"])).toContain('got "bogus"');
    expect(await bad(["run", "m.yaml", "--callback-url", "not a url"])).toContain("--callback-url");
    expect(await bad(["run", "m.yaml", "--callback-listen", "8080"])).toContain("only with --callback-url");
    // The video service posts only to public addresses: a URL it would refuse is refused first.
    for (const url of [
      "http://127.0.0.1:8080/hooks",
      "http://10.1.2.3/hooks",
      "http://[::1]:80/",
      "http://localhost/h",
    ]) {
      const said = await bad(["run", "m.yaml", "--callback-url", url]);
      expect(said).toMatch(
        /^--callback-url expected a public host, got .+, which is a (loopback|private-network) address/,
      );
      expect(said).toContain("pass --allow-private-urls");
    }
    expect(await bad(["run", "m.yaml", "--callback-url", "https://user:pw@hooks.example.com/x"])).toContain(
      "must not contain user information",
    );
    expect(await bad(["sandbox", "--port", "99999"])).toBe(
      '--port: expected a whole number >= 0 and <= 65535, got "99999"',
    );
    expect(await bad(["balance", "--timeout", "soon"])).toContain('got "soon"');
    // There is no --api-key flag: a key never goes on a command line.
    expect(await bad(["balance", "--api-key", "sk-ml-x"])).toContain("unknown argument: --api-key");
  });

  it("reads every flag from its CLAPPER_* variable, the flag winning; other CLAPPER_* variables are not flags", async () => {
    expect(envName("max-points")).toBe("CLAPPER_MAX_POINTS");
    const env = {
      CLAPPER_MAX_POINTS: "500",
      CLAPPER_SANDBOX: "1",
      CLAPPER_JSON: "true",
      CLAPPER_MAX_FAILURES: "3",
      CLAPPER_LOG_FORMAT: "pretty",
      CLAPPER_LOG_LEVEL: "debug",
      // Read by the code that uses them, never parsed as flags (strict mode would refuse them).
      CLAPPER_API_KEY: "sk-ml-secret",
      CLAPPER_RETRY_BASE_MS: "5",
      CLAPPER_TEST_FAULT: "internal",
      CLAPPER_BASE_URL: "http://127.0.0.1:9",
    };
    const r = await parseCommandLine(["run", "m.yaml"], env);
    expect(r).toMatchObject({
      ok: true,
      args: {
        "max-points": 500,
        sandbox: true,
        json: true,
        "max-failures": { count: 3 },
        "log-format": "pretty",
        "log-level": "debug",
      },
    });
    if (r.ok) expect(JSON.stringify(r.args)).not.toContain("sk-ml-secret");
    expect(await parseCommandLine(["run", "m.yaml", "--max-points", "7"], env)).toMatchObject({
      ok: true,
      args: { "max-points": 7 },
    });
    expect(await parseCommandLine(["run", "m.yaml", "--no-sandbox"], env)).toMatchObject({
      ok: true,
      args: { sandbox: false },
    });
    expect(await parseCommandLine(["run", "m.yaml"], { CLAPPER_MAX_POINTS: "lots" })).toEqual({
      ok: false,
      message: 'CLAPPER_MAX_POINTS: expected a whole number of points >= 0, got "lots"',
    });
    expect(await parseCommandLine(["balance"], { CLAPPER_SANDBOX: "maybe" })).toEqual({
      ok: false,
      message: 'CLAPPER_SANDBOX: expected true or false (1/0, yes/no), got "maybe"',
    });
  });
});

describe("GitHub workflow commands", () => {
  it("escape data and properties as the runner expects", () => {
    expect(escapeData("100% done\r\nnext")).toBe("100%25 done%0D%0Anext");
    expect(escapeProperty("a:b,c%\n")).toBe("a%3Ab%2Cc%25%0A");
    expect(
      workflowCommand({
        severity: "error",
        file: "jobs/shots,v2.csv",
        line: 14,
        field: "duration",
        message: "expected an integer from 4 to 30, got 31\nsee: docs",
      }),
    ).toBe(
      "::error file=jobs/shots%2Cv2.csv,line=14,title=clapper%3A duration::expected an integer from 4 to 30, got 31%0Asee: docs",
    );
    expect(workflowCommand({ severity: "warning", file: "m.yaml", line: 0, field: "", message: "m" })).toBe(
      "::warning file=m.yaml,title=clapper::m",
    );
  });
});

describe("errors to exit codes", () => {
  const errno = (code: string, syscall: string, path: string) =>
    Object.assign(new Error(`${code}: ${syscall} '${path}'`), { code, syscall, path, errno: -1 });

  it("translates file system errors into the path, the reason and what to do", () => {
    const eacces = fsExit(errno("EACCES", "mkdir", "/app/jobs/.clapper"), {
      action: "create the state folder",
      path: "/app/jobs/.clapper",
      hint: "pass --state FILE in a writable place",
    });
    expect(eacces.code).toBe(2);
    expect(eacces.message).toBe(
      "cannot create the state folder /app/jobs/.clapper: permission denied (EACCES); pass --state FILE in a writable place",
    );
    expect(fsReason(errno("EROFS", "open", "/x"))).toBe("read-only file system (EROFS)");
    expect(fsReason(errno("ENOTDIR", "mkdir", "/x"))).toBe(
      "a part of the path is a file, not a folder (ENOTDIR)",
    );
    // One that escaped every command's own translation still names its path, exit 2, not a bug.
    expect(classify(errno("EROFS", "open", "/mnt/ro/report.json"), { bugs: "B" })).toEqual({
      code: 2,
      message:
        "cannot open /mnt/ro/report.json: read-only file system (EROFS); choose a place on a writable file system",
    });
    expect(classify(errno("ENOENT", "scandir", "/nope"), { bugs: "B" }).message).toBe(
      "cannot read the folder /nope: no such file or folder (ENOENT)",
    );
  });

  it("unreachable services are exit 6, naming the service and where; a bug is 70 with where to report it", () => {
    const refused = new ConnectionError(
      "get points balance: connection to http://127.0.0.1:1 failed (ECONNREFUSED)",
      {
        cause: Object.assign(new Error("connect"), { code: "ECONNREFUSED" }),
      },
    );
    expect(classify(refused, { bugs: "B", baseUrl: "http://127.0.0.1:1" })).toEqual({
      code: 6,
      message:
        "the service at http://127.0.0.1:1 is unreachable (ECONNREFUSED): get points balance: connection to http://127.0.0.1:1 failed (ECONNREFUSED); check the address and the network, then run again",
    });
    const down = new ServiceError("list skills: service error (HTTP 503)", 503, undefined, undefined);
    expect(classify(down, { bugs: "B" }).code).toBe(6);
    const odd = new ServiceError(
      "list skills: the answer did not have the documented shape",
      200,
      undefined,
      undefined,
    );
    // An answer its specification does not allow: the service's fault, like one that refuses service.
    expect(classify(odd, { bugs: "B" })).toEqual({
      code: 6,
      message:
        "the service gave an answer its specification does not allow: list skills: the answer did not have the documented shape; run again once it answers as documented",
    });
    const bug = classify(new TypeError("x is undefined"), { bugs: "https://example.test/issues" });
    expect(bug.code).toBe(70);
    expect(bug.message).toBe(
      "internal error (a bug in clapper): x is undefined; please report it at https://example.test/issues with the command and this message (--log-level debug shows the stack)",
    );
    expect(bug.stack).toContain("TypeError");
  });

  it("names where bugs are reported from package.json", () => {
    expect(bugsUrl({ bugs: { url: "https://github.com/o/clapper/issues" } })).toBe(
      "https://github.com/o/clapper/issues",
    );
    expect(bugsUrl({ repository: { url: "git+https://github.com/o/clapper.git" } })).toBe(
      "https://github.com/o/clapper/issues",
    );
    expect(bugsUrl({})).toBe("the issue tracker of the clapper repository");
  });
});

describe("--rps N|fixed:N", () => {
  it("takes a ceiling, or fixed:N for a rate that never moves", () => {
    expect(parseRps("20")).toEqual({ rps: 20, fixed: false });
    expect(parseRps("0.5")).toEqual({ rps: 0.5, fixed: false });
    expect(parseRps("fixed:5")).toEqual({ rps: 5, fixed: true });
    expect(parseRps(" FIXED:2.5 ")).toEqual({ rps: 2.5, fixed: true });
  });

  it("refuses anything else, quoting what it got", () => {
    expect(() => parseRps("fast")).toThrow(
      '--rps: expected a number of requests per second >= 0.1 (a ceiling, like 20) or fixed:N (a rate that never moves, like fixed:5), got "fast"',
    );
    expect(() => parseRps("fixed:")).toThrow(/got "fixed:"/);
    expect(() => parseRps("0")).toThrow('--rps: expected a number >= 0.1, got "0"');
    expect(() => parseRps("fixed:0.01", "CLAPPER_RPS")).toThrow(
      'CLAPPER_RPS: expected a number >= 0.1, got "0.01"',
    );
    expect(() => parseRps("max:5")).toThrow(/got "max:5"/);
  });
});

describe("--callback-url", () => {
  it("takes a private address with --allow-private-urls (a local emulator)", async () => {
    const r = await parseCommandLine(
      ["run", "m.yaml", "--callback-url", "http://127.0.0.1:8080/hooks", "--allow-private-urls"],
      {},
    );
    expect(r.ok).toBe(true);
  });

  it("refuses a host name that resolves only to private addresses, and leaves an unresolved one to the service", async () => {
    const { checkCallbackHost } = await import("../../src/cli/commands/run/callback.js");
    const to =
      (...addresses: string[]) =>
      async () =>
        addresses.map((address) => ({ address }));
    const refused = await checkCallbackHost(
      "https://hooks.internal/x",
      false,
      to("10.0.0.7", "fd00::7"),
    ).catch((e: Error & { code?: number }) => e);
    expect((refused as { code?: number }).code).toBe(2);
    expect((refused as Error).message).toBe(
      "--callback-url hooks.internal resolves to 10.0.0.7, fd00::7, no public address: the video service posts callbacks only to a public address (it refuses loopback and private addresses and URLs with user information, so every create would be refused); pass --allow-private-urls for a local emulator",
    );
    await expect(
      checkCallbackHost("https://hooks.example.com/x", false, to("93.184.215.14", "10.0.0.1")),
    ).resolves.toBeUndefined();
    await expect(
      checkCallbackHost("https://hooks.internal/x", true, to("10.0.0.7")),
    ).resolves.toBeUndefined();
    const unresolved = async (): Promise<Array<{ address: string }>> => {
      throw Object.assign(new Error("getaddrinfo ENOTFOUND"), { code: "ENOTFOUND" });
    };
    await expect(checkCallbackHost("https://nowhere.example/x", false, unresolved)).resolves.toBeUndefined();
  });
});

// picks.yaml in `clapper assemble`: a pick chooses the take that goes into the episode (over the
// manifest's assemble.takes), is part of what the episode is made from, and a bad one is refused with
// picks.yaml's line and field. Real runs against the sandbox over HTTP, real ffmpeg.
import { appendFile, readFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { cli, runIn, setup, sha256, type Workspace } from "../run/helpers.js";

function manifest(s02Prompt = "Waves on the rocks"): string {
  return stringify({
    name: "ep01",
    output: "./out",
    defaults: {
      shot: { model: "Vid-H3", resolution: "480P", duration: 4, ratio: "16:9" },
      line: { language: "EN", voice: "preset:en_female_bright" },
    },
    shots: [
      { id: "s01", prompt: "A lighthouse at dusk" },
      { id: "s02", prompt: s02Prompt, takes: 2 },
      { id: "s03", prompt: "The lamp room", takes: 3 },
    ],
    lines: [{ id: "n01", shot: "s01", text: "One two three." }],
    assemble: { takes: { s02: 2, s03: 2 } },
  });
}

async function assembleJson(file: string) {
  const r = await cli(undefined, ["assemble", file, "--json"], {}, "silent");
  return { code: r.code, out: JSON.parse(r.out) as Record<string, any>, err: r.err };
}

const jobsOf = (a: Record<string, any>) => a.shots.map((s: any) => s.job);

async function writePicksText(w: Workspace, text: string): Promise<string> {
  return w.write("picks.yaml", text);
}

describe("assemble with picks.yaml", () => {
  it("a pick overrides assemble.takes; --json says where each take came from; a changed pick assembles again, an unchanged one reuses", async () => {
    const { s, w } = await setup();
    const file = await w.write("ep01.yaml", manifest());
    expect((await runIn(s, file)).outcome.exitCode).toBe(0);

    const plain = await assembleJson(file);
    expect(plain.code, plain.err).toBe(0);
    expect(plain.out.takes).toEqual([
      { shot: "s01", take: 1, source: "default" },
      { shot: "s02", take: 2, source: "manifest" },
      { shot: "s03", take: 2, source: "manifest" },
    ]);
    expect(jobsOf(plain.out)).toEqual(["shot/s01", "shot/s02/take-2", "shot/s03/take-2"]);

    await writePicksText(w, "shots:\n  s02: 1\n  s03: 3\n");
    const picked = await assembleJson(file);
    expect(picked.code, picked.err).toBe(0);
    expect(picked.out.status).toBe("assembled");
    expect(picked.out.takes).toEqual([
      { shot: "s01", take: 1, source: "default" },
      { shot: "s02", take: 1, source: "pick" },
      { shot: "s03", take: 3, source: "pick" },
    ]);
    expect(jobsOf(picked.out)).toEqual(["shot/s01", "shot/s02/take-1", "shot/s03/take-3"]);
    // The inputs named are the picked takes' own files, with their bytes as the run stored them.
    const s03 = picked.out.shots[2];
    expect(s03.uri).not.toBe(plain.out.shots[2].uri);
    expect(s03.sha256).toBe(await sha256(s03.uri));
    expect(picked.out.fingerprint).not.toBe(plain.out.fingerprint);
    // The manifest's own choice is still recorded as written.
    expect(picked.out.settings.takes).toEqual({ s02: 2, s03: 2 });

    // The same picks, written otherwise (a comment, another order): nothing to do.
    await writePicksText(w, "# chosen in review\nshots:\n  s03: 3\n  s02: 1\n");
    const same = await assembleJson(file);
    expect(same.out.status).toBe("up-to-date");
    expect(same.out.takes).toEqual(picked.out.takes);

    // One pick changed: assembled again, with that take.
    await writePicksText(w, "shots:\n  s02: 1\n  s03: 1\n");
    const changed = await assembleJson(file);
    expect(changed.out.status).toBe("assembled");
    expect(jobsOf(changed.out)).toEqual(["shot/s01", "shot/s02/take-1", "shot/s03/take-1"]);

    // A pick equal to the manifest's choice makes the same episode as the manifest alone.
    await writePicksText(w, "shots:\n  s02: 2\n  s03: 2\n");
    const asManifest = await assembleJson(file);
    expect(asManifest.out.status).toBe("assembled");
    expect(asManifest.out.fingerprint).toBe(plain.out.fingerprint);
    expect(asManifest.out.episode.sha256).toBe(plain.out.episode.sha256);
    expect(asManifest.out.takes.map((t: any) => t.source)).toEqual(["default", "pick", "pick"]);
  }, 120_000);

  it.each([
    ["shots:\n  s01: 1\n  s09: 2\n", 3, "shots.s09", /no shot "s09" \(did you mean "s0[123]"\?\)/],
    ["shots:\n  s03: 4\n", 2, "shots.s03", /shot s03 has 3 takes, so take 4 does not exist/],
    ["shots:\n  s01: 2\n", 2, "shots.s01", /shot s01 has 1 take, so take 2 does not exist/],
    ["shots:\n  s02: two\n", 2, "shots.s02", /expected a take number \(1, 2, \.\.\.\), got "two"/],
    ["shot:\n  s02: 1\n", 1, "shot", /unknown field/],
  ])(
    "a bad picks.yaml (%j) exits 2 naming its line and field, before anything is read or made",
    async (text, line, field, message) => {
      const { w } = await setup();
      const file = await w.write("ep01.yaml", manifest());
      const picks = await writePicksText(w, text);
      const r = await assembleJson(file);
      expect(r.code).toBe(2);
      expect(r.out.error.problems).toEqual([
        { severity: "error", file: picks, line, field, message: expect.stringMatching(message) },
      ]);
      const plain = await cli(undefined, ["assemble", file], {}, "silent");
      expect(plain.code).toBe(2);
      expect(plain.err).toContain(`${picks}:${line}: ${field}: `);
      expect(plain.err).toMatch(message);
    },
  );

  it("a pick of a kept version assembles that earlier file, checked by its sha256; a version not kept is refused at its line", async () => {
    const { s, w } = await setup();
    const file = await w.write("ep01.yaml", manifest());
    expect((await runIn(s, file)).outcome.exitCode).toBe(0);
    // The shot's prompt edited: both its takes are made again, and their first outputs kept as v1.
    await w.write("ep01.yaml", manifest("Waves on the rocks, at night"));
    expect((await runIn(s, file)).outcome.exitCode).toBe(0);
    const report = JSON.parse(await readFile(join(w.out(), "reports", "report.json"), "utf8"));
    const take1 = report.jobs.find((j: any) => j.id === "shot/s02/take-1");
    const kept = take1.versions?.[0];
    expect(kept?.uri).toMatch(/\.v1\.mp4$/);
    expect(kept.sha256).toBe(await sha256(kept.uri));

    await writePicksText(w, "shots:\n  s02: 1\n");
    const current = await assembleJson(file);
    expect(current.code, current.err).toBe(0);
    expect(current.out.shots[1].uri).toBe(take1.output.uri);

    await writePicksText(w, "shots:\n  s02: { take: 1, version: 1 }\n");
    const picked = await assembleJson(file);
    expect(picked.code, picked.err).toBe(0);
    expect(picked.out.status).toBe("assembled");
    expect(picked.out.takes[1]).toEqual({ shot: "s02", take: 1, version: 1, source: "pick" });
    expect(picked.out.shots[1].job).toBe("shot/s02/take-1");
    expect(picked.out.shots[1].uri).toBe(kept.uri);
    expect(picked.out.shots[1].sha256).toBe(kept.sha256);
    expect(picked.out.fingerprint).not.toBe(current.out.fingerprint);

    // The same take without its version: the current output again, the episode made of it before.
    await writePicksText(w, "shots:\n  s02: 1\n");
    const back = await assembleJson(file);
    expect(back.out.status).toBe("assembled");
    expect(back.out.fingerprint).toBe(current.out.fingerprint);
    expect(back.out.shots[1].uri).toBe(take1.output.uri);
    expect(back.out.takes[1]).toEqual({ shot: "s02", take: 1, source: "pick" });

    // A kept file changed by hand is not the one the run stored: refused, as a changed output is.
    await writePicksText(w, "shots:\n  s02: { take: 1, version: 1 }\n");
    await appendFile(kept.uri, "x");
    const tampered = await assembleJson(file);
    expect(tampered.code).not.toBe(0);
    expect(JSON.stringify(tampered.out)).toContain("sha256 differs");

    const picks = await writePicksText(w, "shots:\n  s01: 1\n  s02:\n    take: 1\n    version: 2\n");
    const missing = await assembleJson(file);
    expect(missing.code).toBe(2);
    expect(missing.out.error.problems).toEqual([
      {
        severity: "error",
        file: picks,
        line: 5,
        field: "shots.s02.version",
        message: expect.stringMatching(/version 2 of take 1 of shot s02 does not exist \(kept: 1\)/),
      },
    ]);
  }, 120_000);
});

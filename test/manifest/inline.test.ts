// Issue 9, item 23: `{{ name }}` in an inline prompt or text is filled the same strict way as a
// template file (the manifest's vars, the row's vars, the row's fields), never sent as braces and
// paid for: a missing variable or a malformed placeholder is an error at the field.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SpeechJob, VideoJob } from "../../src/manifest/index.js";
import { type Workspace, workspace, yaml } from "./workspace.js";

let ws: Workspace;
beforeAll(async () => {
  ws = await workspace("clapper-inline-");
});
afterAll(() => ws.remove());

const promptOf = (job: unknown) => (job as VideoJob).request.content[0];

describe("inline text with placeholders", () => {
  it("fills an inline prompt and text from vars, the row's vars and its fields", async () => {
    const r = await ws.load({
      "m.yaml": yaml(
        "name: inline",
        'vars: { show: "The Lighthouse", mood: calm }',
        "defaults:",
        "  line: { voice: preset:en_male_deep, language: EN }",
        "shots:",
        '  - { id: s1, duration: 6, prompt: "{{ show }}, shot {{id}}, {{duration}} s, {{ mood }}", vars: { mood: stormy } }',
        "lines:",
        '  - { id: n1, text: "{{show}}: the light is on ({{ mood }})." }',
      ),
    });
    expect(r.formatted).toEqual([]);
    expect(promptOf(r.jobs[0])).toEqual({ type: "text", text: "The Lighthouse, shot s1, 6 s, stormy" });
    expect((r.jobs[1] as SpeechJob).request.text).toBe("The Lighthouse: the light is on (calm).");
  });

  it("fills CSV cells from vars.NAME columns", async () => {
    const r = await ws.load({
      "m.yaml": yaml("name: inline", "vars: { show: The Lighthouse }", "shots: shots.csv"),
      "shots.csv": "id,prompt,vars.subject\ns1,{{show}}: {{subject}},the keeper\n",
    });
    expect(r.formatted).toEqual([]);
    expect(promptOf(r.jobs[0])).toEqual({ type: "text", text: "The Lighthouse: the keeper" });
  });

  it("reports a missing variable at the prompt or text, and makes no job of the row", async () => {
    const r = await ws.load({
      "m.yaml": yaml(
        "name: inline",
        "vars: { show: x }",
        "shots:",
        '  - { id: s1, prompt: "{{ show }} by {{ who }} and {{ whom }}" }',
        '  - { id: s2, prompt: "{{ prompt }}" }',
        "  - { id: s3, prompt: fine }",
        "lines:",
        '  - { id: n1, voice: preset:en_male_deep, text: "{{ speaker }} says hello" }',
      ),
    });
    expect(r.formatted).toEqual([
      `m.yaml:4: prompt: uses "who", "whom", which are not defined (vars, the row's vars.* or its fields)`,
      // The text does not fill itself.
      `m.yaml:5: prompt: uses "prompt", which is not defined (vars, the row's vars.* or its fields)`,
      `m.yaml:8: text: uses "speaker", which is not defined (vars, the row's vars.* or its fields)`,
    ]);
    expect(r.jobs.map((j) => j.id)).toEqual(["shot/s3"]);
  });

  it("refuses braces that are no placeholder, inline and in template files, rather than send them", async () => {
    const r = await ws.load({
      "m.yaml": yaml(
        "name: inline",
        "shots:",
        '  - { id: s1, prompt: "a {{ two words }} b" }',
        '  - { id: s2, prompt: "a {{ open" }',
        '  - { id: s3, prompt: "closed }} b" }',
        "  - { id: s4, template: t }",
        '  - { id: s5, prompt: "single { braces } pass" }',
      ),
      "templates/t.txt": "{{ id }} and {{ 5 }}\n",
    });
    const hint = 'is not a placeholder: write {{ name }} with a name of letters, digits, "_", "." or "-"';
    expect(r.formatted).toEqual([
      expect.stringContaining(`m.yaml:3: prompt: "{{ two words }}" ${hint}`),
      expect.stringContaining(`m.yaml:4: prompt: "{{ open" ${hint}`),
      expect.stringContaining(`m.yaml:5: prompt: "}}" ${hint}`),
      expect.stringContaining(`m.yaml:6: template: template "t": "{{ 5 }}" ${hint}`),
    ]);
    expect(r.jobs.map((j) => j.id)).toEqual(["shot/s5"]);
  });

  it("gives a job a new fingerprint when a variable its inline text uses changes", async () => {
    const manifest = (show: string, unused: string) => ({
      "m.yaml": yaml(
        "name: inline",
        `vars: { show: "${show}", unused: "${unused}" }`,
        "shots:",
        '  - { id: s1, prompt: "{{ show }} at dusk" }',
        "  - { id: s2, prompt: plain }",
      ),
    });
    const a = await ws.load(manifest("Lighthouse", "a"));
    const b = await ws.load(manifest("Harbour", "a"));
    const c = await ws.load(manifest("Lighthouse", "b"));
    expect(promptOf(b.jobs[0])).toEqual({ type: "text", text: "Harbour at dusk" });
    expect(a.jobs[0]?.fingerprint).not.toBe(b.jobs[0]?.fingerprint);
    // The fingerprint follows the filled text, not the vars: an unused var changes nothing.
    expect(a.jobs.map((j) => j.fingerprint)).toEqual(c.jobs.map((j) => j.fingerprint));
    expect(a.jobs[1]?.fingerprint).toBe(b.jobs[1]?.fingerprint);
  });
});

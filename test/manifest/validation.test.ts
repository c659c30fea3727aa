// Issue 9, item 22: what the plan let through and the service refused later, at a price: Data URL
// materials over the size limits, reference voice file names the upload refuses, blank skill
// names; and an unclosed CSV quote reported where it opens, not at the end of the file.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MATERIAL_BYTES } from "../../src/api/video.js";
import { dataUrlBytes, MaterialResolver } from "../../src/manifest/materials.js";
import { formatProblem, Problems } from "../../src/manifest/problems.js";
import { csvRows } from "../../src/manifest/source.js";
import { makeWav } from "../../src/sandbox/media.js";
import { type Workspace, workspace, yaml } from "./workspace.js";

let ws: Workspace;
beforeAll(async () => {
  ws = await workspace("clapper-validation-");
});
afterAll(() => ws.remove());

const MIME = { image: "image/png", video: "video/mp4", audio: "audio/wav" } as const;
/** A base64 Data URL of exactly `bytes` bytes (what they are does not matter to a size check). */
const dataUrl = (kind: keyof typeof MIME, bytes: number) =>
  `data:${MIME[kind]};base64,${Buffer.alloc(bytes, 1).toString("base64")}`;

describe("Data URL materials", () => {
  it("measures the bytes a Data URL holds from its payload, padding and line breaks aside", () => {
    for (const n of [0, 1, 2, 3, 4, 5, 1000]) expect(dataUrlBytes(dataUrl("image", n))).toBe(n);
    expect(dataUrlBytes("data:image/png;base64,AAAA\nAAAA\n")).toBe(6);
    expect(dataUrlBytes("data:text/plain,a%20b")).toBe(3);
  });

  it("accepts each kind at its limit and refuses one byte more (image 30 MiB, video 50 MiB, audio 15 MiB)", async () => {
    const resolver = new MaterialResolver(ws.root);
    for (const kind of ["image", "video", "audio"] as const) {
      const limit = MATERIAL_BYTES[kind];
      expect(await resolver.resolve(dataUrl(kind, limit), kind)).toMatchObject({ source: "url", kind });
      expect(await resolver.resolve(dataUrl(kind, limit + 1), kind)).toEqual({
        error: `the Data URL is ${limit + 1} bytes, over the ${kind} limit of ${limit / 1024 / 1024} MiB`,
      });
    }
  }, 30_000);

  it("refuses an audio Data URL over 15 MiB written in a CSV file, at its row and field", async () => {
    const small = dataUrl("image", 64);
    const r = await ws.load({
      "m.yaml": yaml("name: data", "shots: shots.csv"),
      // Quoted: a Data URL holds a comma.
      "shots.csv": `id,prompt,reference_images,reference_audios\ns1,x,"${small}","${dataUrl("audio", 15 * 1024 * 1024 + 1)}"\ns2,x,"${small}",\n`,
    });
    expect(r.formatted).toEqual([
      "shots.csv:2: reference_audios[0]: the Data URL is 15728641 bytes, over the audio limit of 15 MiB",
    ]);
    expect(r.jobs.map((j) => j.id)).toEqual(["shot/s2"]);
  }, 30_000);
});

describe("reference voice file names", () => {
  it("refuses at plan a file name the upload would refuse: control characters, backslashes", async () => {
    const r = await ws.load({
      "m.yaml": yaml(
        "name: voices",
        "lines:",
        '  - { id: n1, text: hello, voice: "voi\\x01ce.wav" }',
        "  - { id: n2, text: hello, voice: 'back\\slash.wav' }",
        "  - { id: n3, text: hello, voice: fine.wav }",
      ),
      "voi\x01ce.wav": makeWav(1200),
      "back\\slash.wav": makeWav(1200),
      "fine.wav": makeWav(1200),
    });
    expect(r.formatted).toEqual([
      'm.yaml:3: voice: expected a file name the service accepts at upload: must not contain directory separators or control characters, got "voi\\u0001ce.wav" (contains control character U+0001)',
      'm.yaml:4: voice: expected a file name the service accepts at upload: must not contain directory separators or control characters, got "back\\\\slash.wav" (contains "\\\\")',
    ]);
    expect(r.jobs.map((j) => j.id)).toEqual(["line/n3"]);
  });
});

describe("skill names", () => {
  it("refuses an empty or blank skill on a shot, and a blank name in skills:", async () => {
    const r = await ws.load({
      "m.yaml": yaml(
        "name: skills",
        "skills:",
        "  noir: noir.md",
        '  "  ": blank.md',
        "shots:",
        '  - { id: s1, prompt: x, use_context_ir: true, skill: "" }',
        '  - { id: s2, prompt: x, use_context_ir: true, skill: "  " }',
        "  - { id: s3, prompt: x, use_context_ir: true, skill: noir }",
      ),
      "noir.md": "# Noir\n- hard light\n",
      "blank.md": "# Blank\n",
    });
    expect(r.formatted).toEqual([
      'm.yaml:4: skills: expected a skill name, got "  "',
      'm.yaml:6: skill: expected the name of a skill, got ""',
      'm.yaml:7: skill: expected the name of a skill, got "  "',
    ]);
    expect(r.manifest?.skills.map((s) => s.name)).toEqual(["noir"]);
    expect(r.jobs.map((j) => j.id)).toEqual(["shot/s3"]);
  });
});

describe("an unclosed CSV quote", () => {
  const problems = (text: string) => {
    const p = new Problems();
    csvRows(text, "x.csv", "shot", p);
    return p.errors.map(formatProblem);
  };
  const message = "CSV: a quoted cell opens on this line and is never closed";

  it("is reported on the line where the quote opens, after several rows", () => {
    expect(problems('id,prompt,duration\na,x,5\nb,y,"5\nc,y,6\nd,z,7\n')).toEqual([
      expect.stringMatching(/^x\.csv:3: CSV: a quoted cell opens on this line and is never closed/),
    ]);
    expect(problems('id,prompt\na,x\nb,"ok",\nc,"never\n\n\n')).toEqual([
      expect.stringContaining(`x.csv:4: ${message}`),
    ]);
  });

  it("is reported on the line of the quote, not of its row, when an earlier cell of the row spans lines", () => {
    expect(problems('id,prompt,duration\na,x,5\nb,"two\nlines","5\nc,y,6\n')).toEqual([
      expect.stringContaining(`x.csv:4: ${message}`),
    ]);
    // CRLF line ends and a byte-order mark count as usual.
    expect(problems('\ufeffid,prompt\r\na,"x ""quoted"" y"\r\nb,"open\r\nc,y\r\n')).toEqual([
      expect.stringContaining(`x.csv:3: ${message}`),
    ]);
  });

  it("is reported where it opened, in words, when a later quote seems to close it", () => {
    // The parser stops on line 3 ("Invalid Closing Quote"): the quote left open is on line 2.
    expect(problems('id,prompt,duration\ns01,"A lighthouse,5\ns02,"Waves",5\n')).toEqual([
      'x.csv:2: CSV: a quoted cell opens on this line and is not closed before line 3 (its closing " is missing; a " inside a cell is written "")',
    ]);
    expect(problems('id,prompt,duration\ns01,"A "light" house",5\n')).toEqual([
      'x.csv:2: CSV: a quoted cell on this line has a " inside it that is not doubled: write it as "" (for example "A ""lighthouse"" at dusk")',
    ]);
    expect(problems('id,prompt\ns01,A "light" house\n')).toEqual([
      'x.csv:2: prompt: CSV: a " inside a cell that does not start with one: quote the whole cell and double each " inside it (for example "A ""lighthouse"" at dusk")',
    ]);
  });

  it("is reported in the CSV file a YAML manifest names", async () => {
    const r = await ws.load({
      "m.yaml": yaml("name: q", "shots: rows.csv"),
      "rows.csv": 'id,prompt\ns1,fine\ns2,"broken\ns3,fine\ns4,fine\n',
    });
    expect(r.formatted).toEqual([expect.stringContaining(`rows.csv:3: ${message}`)]);
  });
});

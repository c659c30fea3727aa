import { describe, expect, it } from "vitest";
import { formatIssue, type Issue, issuesFromZod } from "../../src/api/common.js";
import {
  basePoints,
  POINTS_PER_SECOND,
  RESOLUTIONS,
  resolutionTier,
  Skill,
  SkillDeleteResponse,
  SkillList,
  SkillResponse,
  SkillWriteRequest,
  UPSCALE_TIERS,
  VIDEO_MODELS,
  VIDEO_RATIOS,
  VIDEO_STATUSES,
  VideoCancelResponse,
  VideoCreateResponse,
  VideoStatus,
  VideoTask,
  VideoTaskList,
  VideoTaskResponse,
  videoPoints,
} from "../../src/api/video.js";
import {
  adaptiveImageIndex,
  ContentElement,
  contentIssues,
  labelIssues,
  materialUrlProblem,
  VideoCreateRequest,
  videoMode,
} from "../../src/api/video-request.js";
import {
  inputImageCount,
  outputSize,
  parseSkillListQuery,
  parseVideoListQuery,
  requestUrlIssues,
} from "../../src/sandbox/protocol/video.js";

// ---------- helpers ----------

const text = (t: string): ContentElement => ({ type: "text", text: t });
const image = (
  role?: "first_frame" | "last_frame" | "reference_image",
  url = "https://cdn.example.com/a.png",
) =>
  (role
    ? { type: "image_url", image_url: { url }, role }
    : { type: "image_url", image_url: { url } }) as ContentElement;
const video = (url = "https://cdn.example.com/v.mp4"): ContentElement => ({
  type: "video_url",
  video_url: { url },
  role: "reference_video",
});
const audio = (url = "https://cdn.example.com/a.mp3"): ContentElement => ({
  type: "audio_url",
  audio_url: { url },
  role: "reference_audio",
});
const refImage = () => image("reference_image");
const times = <T>(n: number, make: () => T): T[] => Array.from({ length: n }, make);

function createIssues(body: unknown): Issue[] {
  const result = VideoCreateRequest.safeParse(body);
  return result.success ? [] : issuesFromZod(result.error);
}

const body = (extra: Record<string, unknown> = {}) => ({
  model: "Vid-H3",
  content: [text("a red fox runs through snow")],
  ...extra,
});

/** The issues at exactly `path`; fails unless exactly one is found and it contains `fragment`. */
function expectOne(issues: Issue[], path: ReadonlyArray<string | number>, fragment: string): void {
  const here = issues.filter((i) => JSON.stringify(i.path) === JSON.stringify(path));
  expect(here, `issues: ${issues.map(formatIssue).join(" | ")}`).toHaveLength(1);
  expect(here[0]?.message).toContain(fragment);
}

// ---------- enumerations ----------

describe("enumerations", () => {
  it("lists the spec's values", () => {
    expect(VIDEO_MODELS).toEqual(["Vid-H3", "vid-h3-lite"]);
    expect(VIDEO_RATIOS).toEqual(["adaptive", "21:9", "16:9", "4:3", "1:1", "3:4", "9:16"]);
    expect(VIDEO_STATUSES).toEqual(["queued", "running", "succeeded", "failed", "cancelled"]);
    expect(RESOLUTIONS).toEqual(["480P", "768P", "1080P", "2K", "4K"]);
    expect(VideoStatus.safeParse("done").success).toBe(false);
  });
});

// ---------- content elements ----------

describe("ContentElement", () => {
  it("accepts every type with its material object and fitting roles", () => {
    for (const element of [
      text("hello"),
      image(),
      image("first_frame"),
      image("last_frame"),
      refImage(),
      video(),
      audio(),
      { type: "video_url", video_url: { url: "https://cdn.example.com/v.mp4" } },
      { type: "audio_url", audio_url: { url: "data:audio/mpeg;base64,SUQz" } },
      { type: "image_url", image_url: { url: "data:image/png;base64,iVBORw0KGgo=" } },
    ]) {
      expect(ContentElement.safeParse(element).success, JSON.stringify(element)).toBe(true);
    }
  });

  it("requires text on text elements", () => {
    expectOne(
      createIssues(body({ content: [{ type: "text" }] })),
      ["content", 0, "text"],
      'is required when type is "text"',
    );
    expectOne(
      createIssues(body({ content: [{ type: "text", text: 7 }] })),
      ["content", 0, "text"],
      "expected a string, got 7",
    );
  });

  it("rejects an unknown or missing type", () => {
    expectOne(
      createIssues(body({ content: [{ type: "picture", image_url: { url: "https://x.example/a.png" } }] })),
      ["content", 0, "type"],
      'expected one of "text", "image_url", "video_url", "audio_url", got "picture"',
    );
    expectOne(createIssues(body({ content: [{ text: "hi" }] })), ["content", 0, "type"], "is required");
    expectOne(createIssues(body({ content: [5] })), ["content", 0], "expected an object, got 5");
  });

  it("requires the material object matching the type", () => {
    expectOne(
      createIssues(body({ content: [{ type: "image_url", video_url: { url: "https://x.example/v.mp4" } }] })),
      ["content", 0, "image_url"],
      'is required when type is "image_url"',
    );
    expectOne(
      createIssues(
        body({
          content: [{ type: "video_url", video_url: "https://x.example/v.mp4", role: "reference_video" }],
        }),
      ),
      ["content", 0, "video_url"],
      'expected an object like {"url": "https://..."}, got "https://x.example/v.mp4"',
    );
    expectOne(
      createIssues(body({ content: [{ type: "audio_url", audio_url: {} }] })),
      ["content", 0, "audio_url", "url"],
      "is required",
    );
  });

  it("checks the material url shape", () => {
    const at = ["content", 0, "image_url", "url"];
    const withUrl = (url: unknown) =>
      createIssues(body({ content: [{ type: "image_url", image_url: { url } }] }));
    expectOne(withUrl(42), at, "expected a URL string, got 42");
    expectOne(
      withUrl("cdn.example.com/a.png"),
      at,
      'expected an absolute http or https URL like "https://example.com/path"',
    );
    expectOne(withUrl("ftp://cdn.example.com/a.png"), at, 'got scheme "ftp"');
    expectOne(
      withUrl("data:image/png,rawbytes"),
      at,
      'expected a base64 data URL "data:<mime>;base64,<data>"',
    );
    expectOne(withUrl("data:;base64,aGVsbG8="), at, "expected a media type in the data URL");
    expectOne(withUrl("data:image/png;base64,***"), at, "expected a valid media type and base64 data");
    expectOne(withUrl("data:image/png;base64,"), at, 'expected data after "base64,"');
    expect(withUrl("data:image/png;base64,iVBORw0KGgo=")).toEqual([]);
    expect(withUrl("http://cdn.example.com/a.png")).toEqual([]);
    expect(materialUrlProblem("https://cdn.example.com/a.png")).toBeNull();
  });

  it("rejects a role that does not fit the type", () => {
    expectOne(
      createIssues(
        body({
          content: [
            text("x"),
            { type: "image_url", image_url: { url: "https://x.example/a.png" }, role: "reference_video" },
          ],
        }),
      ),
      ["content", 1, "role"],
      'expected one of "first_frame", "last_frame", "reference_image" for an image_url element, got "reference_video" ("reference_video" is for video_url elements)',
    );
    expectOne(
      createIssues(
        body({
          content: [
            { type: "video_url", video_url: { url: "https://x.example/v.mp4" }, role: "first_frame" },
          ],
        }),
      ),
      ["content", 0, "role"],
      'expected one of "reference_video" for a video_url element, got "first_frame"',
    );
    expectOne(
      createIssues(
        body({
          content: [
            refImage(),
            { type: "audio_url", audio_url: { url: "https://x.example/a.mp3" }, role: "reference_image" },
          ],
        }),
      ),
      ["content", 1, "role"],
      'for an audio_url element, got "reference_image"',
    );
    expectOne(
      createIssues(
        body({
          content: [{ type: "image_url", image_url: { url: "https://x.example/a.png" }, role: "cover" }],
        }),
      ),
      ["content", 0, "role"],
      'got "cover"',
    );
    expectOne(
      createIssues(body({ content: [{ type: "text", text: "hi", role: "first_frame" }] })),
      ["content", 0, "role"],
      'a text element takes no role, got "first_frame"',
    );
  });
});

// ---------- create request fields ----------

describe("VideoCreateRequest fields", () => {
  it("accepts a full valid body and strips unknown top-level fields", () => {
    const result = VideoCreateRequest.safeParse({
      model: "vid-h3-lite",
      content: [image("first_frame"), image("last_frame"), text("morph")],
      resolution: "1080P",
      duration: 30,
      ratio: "adaptive",
      callback_url: "https://hooks.example.com/video",
      callback_token: "t".repeat(512),
      use_context_ir: true,
      skill_id: "skill-1",
      mute_audio: true,
      aigc_watermark: false,
      seed: 42,
    });
    expect(result.success).toBe(true);
    expect(result.data).not.toHaveProperty("seed");
    expect(result.data?.duration).toBe(30);
  });

  it("requires a known model", () => {
    expectOne(createIssues({ content: [text("x")] }), ["model"], "is required");
    expectOne(
      createIssues(body({ model: "vid-h3" })),
      ["model"],
      'expected one of "Vid-H3", "vid-h3-lite", got "vid-h3"',
    );
  });

  it("requires content with at least one element", () => {
    expectOne(createIssues({ model: "Vid-H3" }), ["content"], "is required");
    expectOne(createIssues(body({ content: [] })), ["content"], "expected at least 1 element, got 0");
    expectOne(createIssues(body({ content: "a fox" })), ["content"], 'got "a fox"');
  });

  it("accepts any resolution string but not other types", () => {
    for (const resolution of ["480P", "4K", "1080p", "1K", "720P", "whatever"]) {
      expect(createIssues(body({ resolution })), resolution).toEqual([]);
    }
    expectOne(
      createIssues(body({ resolution: 1080 })),
      ["resolution"],
      'expected a string such as "768P" or "1080P", got 1080',
    );
  });

  it("checks duration is an integer from 4 to 30", () => {
    expect(createIssues(body({ duration: 4 }))).toEqual([]);
    expect(createIssues(body({ duration: 30 }))).toEqual([]);
    expectOne(createIssues(body({ duration: 31 })), ["duration"], "expected an integer from 4 to 30, got 31");
    expectOne(createIssues(body({ duration: 3 })), ["duration"], "expected an integer from 4 to 30, got 3");
    expectOne(
      createIssues(body({ duration: 4.5 })),
      ["duration"],
      "expected an integer from 4 to 30, got 4.5",
    );
    expectOne(
      createIssues(body({ duration: "5" })),
      ["duration"],
      'expected an integer from 4 to 30, got "5"',
    );
  });

  it("checks ratio", () => {
    expect(createIssues(body({ ratio: "9:16" }))).toEqual([]);
    expectOne(createIssues(body({ ratio: "2:1" })), ["ratio"], 'got "2:1"');
    expectOne(createIssues(body({ ratio: "2:1" })), ["ratio"], '"adaptive", "21:9", "16:9"');
  });

  it("checks callback_url: absolute http(s), no user information, at most 1024 characters", () => {
    const base = "https://hooks.example.com/";
    expect(createIssues(body({ callback_url: base + "x".repeat(1024 - base.length) }))).toEqual([]);
    expectOne(
      createIssues(body({ callback_url: base + "x".repeat(1025 - base.length) })),
      ["callback_url"],
      "expected at most 1024 characters, got 1025",
    );
    expectOne(
      createIssues(body({ callback_url: "/hook" })),
      ["callback_url"],
      "expected an absolute http or https URL",
    );
    expectOne(
      createIssues(body({ callback_url: "ftp://hooks.example.com/" })),
      ["callback_url"],
      'got scheme "ftp"',
    );
    expectOne(
      createIssues(body({ callback_url: "https://me:pw@hooks.example.com/" })),
      ["callback_url"],
      "must not contain user information",
    );
    // Address checks are the caller's (requestUrlIssues), so a local emulator can allow them.
    expect(createIssues(body({ callback_url: "http://127.0.0.1:9000/hook" }))).toEqual([]);
  });

  it("checks callback_token: at most 512 characters and only with callback_url", () => {
    const url = "https://hooks.example.com/v";
    expect(createIssues(body({ callback_url: url, callback_token: "s".repeat(512) }))).toEqual([]);
    expectOne(
      createIssues(body({ callback_url: url, callback_token: "😀".repeat(513) })),
      ["callback_token"],
      "expected at most 512 characters, got 513",
    );
    expectOne(
      createIssues(body({ callback_token: "secret" })),
      ["callback_token"],
      "requires callback_url, got no callback_url",
    );
    expectOne(
      createIssues(body({ callback_url: url, callback_token: 5 })),
      ["callback_token"],
      "expected a string, got 5",
    );
  });

  it("checks the booleans", () => {
    expect(createIssues(body({ use_context_ir: false, mute_audio: false, aigc_watermark: true }))).toEqual(
      [],
    );
    expectOne(
      createIssues(body({ use_context_ir: "true" })),
      ["use_context_ir"],
      'expected a boolean, got "true"',
    );
    expectOne(createIssues(body({ mute_audio: 1 })), ["mute_audio"], "expected a boolean, got 1");
    expectOne(
      createIssues(body({ aigc_watermark: null })),
      ["aigc_watermark"],
      "expected a boolean, got null",
    );
  });

  it("requires use_context_ir=true for skill_id", () => {
    expect(createIssues(body({ skill_id: "s1", use_context_ir: true }))).toEqual([]);
    expectOne(
      createIssues(body({ skill_id: "s1" })),
      ["skill_id"],
      "requires use_context_ir=true, got use_context_ir not set",
    );
    expectOne(
      createIssues(body({ skill_id: "s1", use_context_ir: false })),
      ["skill_id"],
      "requires use_context_ir=true, got use_context_ir=false",
    );
    expectOne(
      createIssues(body({ skill_id: 3, use_context_ir: true })),
      ["skill_id"],
      "expected a string, got 3",
    );
    // an invalid use_context_ir is reported once, not again through skill_id
    const issues = createIssues(body({ skill_id: "s1", use_context_ir: "yes" }));
    expect(issues.map((i) => i.path)).toEqual([["use_context_ir"]]);
  });

  it("reports content rules and field errors in one pass", () => {
    const issues = createIssues(
      body({ duration: "99", callback_token: "t", content: [text(""), text("  ")] }),
    );
    expectOne(issues, ["duration"], 'got "99"');
    expectOne(issues, ["callback_token"], "requires callback_url");
    expectOne(issues, ["content", 0, "text"], "expected a non-empty text for text-to-video");
  });

  it("runs content rules only when every element is well-formed", () => {
    const issues = createIssues(body({ content: [{ type: "image_url" }, audio()] }));
    expect(issues.map((i) => i.path)).toEqual([["content", 0, "image_url"]]);
  });
});

// ---------- content rules ----------

describe("contentIssues", () => {
  it("rule 1: text-to-video needs a non-empty text", () => {
    expect(contentIssues([text("a fox")])).toEqual([]);
    expect(contentIssues([image()])).toEqual([]);
    expect(contentIssues([refImage(), text("")])).toEqual([]);
    expectOne(
      contentIssues([]),
      ["content"],
      "expected at least one non-empty text element for text-to-video",
    );
    expectOne(
      contentIssues([text(""), text(" \n ")]),
      ["content", 0, "text"],
      'got "" and 1 more empty text element(s)',
    );
    expectOne(
      contentIssues([text("   ")]),
      ["content", 0, "text"],
      "expected a non-empty text for text-to-video",
    );
    // via the schema, as the emulator sees it
    expectOne(createIssues(body({ content: [text("")] })), ["content", 0, "text"], "non-empty text");
  });

  it("rule 2: joined text at most 7000 code points", () => {
    expect(contentIssues([text("a".repeat(7000))])).toEqual([]);
    expect(contentIssues([text("a".repeat(3500)), text("a".repeat(3499))])).toEqual([]);
    expect(contentIssues([text("😀".repeat(7000))])).toEqual([]);
    expectOne(
      contentIssues([text("a".repeat(3500)), image(), text("a".repeat(3500))]),
      ["content", 2, "text"],
      "expected at most 7000 characters in all text elements joined with line feeds, got 7001",
    );
    expectOne(contentIssues([text("é".repeat(7001))]), ["content", 0, "text"], "got 7001");
  });

  it("rule 3: at most one first frame and one last frame", () => {
    expect(contentIssues([image("first_frame"), image("last_frame")])).toEqual([]);
    expect(contentIssues([image("last_frame"), text("x")])).toEqual([]);
    expectOne(
      contentIssues([image(), text("x"), image("first_frame")]),
      ["content", 2, "role"],
      "expected at most 1 first frame, got 2: content[0] is already the first frame",
    );
    expectOne(
      contentIssues([image("first_frame"), image()]),
      ["content", 1, "role"],
      "(an omitted image role means first_frame)",
    );
    expectOne(
      contentIssues([image("last_frame"), image("last_frame")]),
      ["content", 1, "role"],
      "expected at most 1 last frame, got 2: content[0] is already the last frame",
    );
  });

  it("rule 4: at most 9 reference images", () => {
    expect(contentIssues(times(9, refImage))).toEqual([]);
    const issues = contentIssues(times(10, refImage));
    expect(issues).toHaveLength(1);
    expectOne(issues, ["content", 9], "expected at most 9 reference images, got 10");
  });

  it("rule 4: at most 3 reference videos and 3 reference audios", () => {
    expect(contentIssues([...times(3, video), ...times(3, audio)])).toEqual([]);
    expectOne(
      contentIssues([text("x"), ...times(4, video)]),
      ["content", 4],
      "expected at most 3 reference videos, got 4",
    );
    expectOne(
      contentIssues([video(), ...times(4, audio)]),
      ["content", 4],
      "expected at most 3 reference audios, got 4",
    );
  });

  it("rule 4: at most 12 reference items in total", () => {
    expect(contentIssues([...times(9, refImage), ...times(3, video)])).toEqual([]);
    const issues = contentIssues([...times(9, refImage), ...times(3, video), audio()]);
    expect(issues).toHaveLength(1);
    expectOne(
      issues,
      ["content", 12],
      "expected at most 12 reference items in total, got 13 (9 images, 3 videos, 1 audios)",
    );
  });

  it("rule 5: a reference audio cannot be used alone", () => {
    expect(contentIssues([audio(), video()])).toEqual([]);
    expect(contentIssues([audio(), refImage()])).toEqual([]);
    expectOne(
      contentIssues([text("sing"), audio(), audio()]),
      ["content", 1],
      "a reference audio cannot be used alone",
    );
    expect(contentIssues([text("sing"), audio()])).toHaveLength(1);
  });

  it("rules 6 and 7: frames cannot be mixed with references; an omitted image role is a first frame", () => {
    expect(contentIssues([refImage(), video(), audio()])).toEqual([]);
    const issues = contentIssues([image(), video(), text("x")]);
    expect(issues).toHaveLength(1);
    expectOne(issues, ["content", 0, "role"], "an omitted image role means first_frame");
    expectOne(issues, ["content", 0, "role"], "all-reference mode needs role=reference_image");
    expectOne(issues, ["content", 0, "role"], "content[1] is a reference video");
    expectOne(
      contentIssues([refImage(), image("last_frame")]),
      ["content", 1, "role"],
      "a last frame cannot be mixed with reference images, videos or audios (content[0] is a reference image)",
    );
    const both = contentIssues([image("first_frame"), audio(), image("last_frame")]);
    expect(both.map((i) => i.path)).toEqual([
      ["content", 1],
      ["content", 0, "role"],
      ["content", 2, "role"],
    ]);
  });
});

describe("mode and counts", () => {
  it("derives the generation mode", () => {
    expect(videoMode([text("x")])).toBe("text");
    expect(videoMode([image(), text("x")])).toBe("frames");
    expect(videoMode([image("last_frame")])).toBe("frames");
    expect(videoMode([refImage()])).toBe("reference");
    expect(videoMode([video(), text("x")])).toBe("reference");
    expect(videoMode([image(), audio()])).toBe("reference");
  });

  it("counts input images", () => {
    expect(inputImageCount([text("x")])).toBe(0);
    expect(inputImageCount([image(), text("x"), image("last_frame")])).toBe(2);
    expect(inputImageCount([refImage(), video(), refImage(), audio(), refImage()])).toBe(3);
  });

  it("finds the image adaptive follows: first frame, last frame, first reference image", () => {
    expect(adaptiveImageIndex([text("x")])).toBeUndefined();
    expect(adaptiveImageIndex([text("x"), image("last_frame"), image()])).toBe(2);
    expect(adaptiveImageIndex([image("last_frame"), text("x")])).toBe(0);
    expect(adaptiveImageIndex([video(), refImage(), refImage()])).toBe(1);
  });
});

// ---------- labels ----------

describe("labelIssues", () => {
  it("accepts labels that refer to materials sent", () => {
    expect(
      labelIssues([
        refImage(),
        refImage(),
        video(),
        audio(),
        text("<Picture 1> wears the hat of <Picture 2>, moving like <Video 1> to <Audio 1>"),
      ]),
    ).toEqual([]);
    expect(labelIssues([text("no labels here < 3 > 2")])).toEqual([]);
  });

  it("flags labels past the materials sent", () => {
    const content = [
      refImage(),
      video(),
      text("<Picture 2> and <Video 1>"),
      text("with <Video 2> and <Audio 1>"),
    ];
    const issues = labelIssues(content);
    expect(issues).toHaveLength(3);
    expect(issues[0]).toEqual({
      path: ["content", 2, "text"],
      message:
        "<Picture 2> refers to reference image 2, but the request sends 1 reference images (image_url with role=reference_image); the label loads nothing",
    });
    expect(issues[1]?.path).toEqual(["content", 3, "text"]);
    expect(issues[1]?.message).toContain(
      "<Video 2> refers to video 2, but the request sends 1 video_url elements",
    );
    expect(issues[2]?.message).toContain(
      "<Audio 1> refers to audio 1, but the request sends 0 audio_url elements",
    );
  });

  it("counts only role=reference_image images for <Picture N>", () => {
    expectOne(
      labelIssues([image(), text("<Picture 1> smiles")]),
      ["content", 1, "text"],
      "the request sends 0 reference images",
    );
  });

  it("flags <X 0>", () => {
    expectOne(
      labelIssues([refImage(), text("<Picture 0>")]),
      ["content", 1, "text"],
      "labels are numbered from 1",
    );
  });

  it.each([
    ["<picture 1>", "<Picture 1>"],
    ["<Picture1>", "<Picture 1>"],
    ["＜Picture 1＞", "<Picture 1>"],
    ["<PICTURE  2>", "<Picture 2>"],
    ["<Image 1>", "<Picture 1>"],
    ["<video 1>", "<Video 1>"],
    ["<Audio１>", "<Audio 1>"],
  ])("flags the near miss %s", (written, exact) => {
    expectOne(
      labelIssues([refImage(), refImage(), video(), audio(), text(`look at ${written} here`)]),
      ["content", 4, "text"],
      `${JSON.stringify(written)} is not converted to a label: expected exactly "${exact}"`,
    );
  });

  it("is not applied by the create schema (the service accepts such labels)", () => {
    expect(createIssues(body({ content: [text("<Picture 5> and <picture 1>")] }))).toEqual([]);
  });
});

// ---------- resolution, points, sizes ----------

describe("resolution and points", () => {
  it("maps only the five exact values to their tier", () => {
    for (const r of RESOLUTIONS) expect(resolutionTier(r)).toBe(r);
    for (const r of ["1080p", "2k", "4k", "480p", "1K", "720P", " 1080P", ""])
      expect(resolutionTier(r), r).toBe("768P");
    expect(resolutionTier(undefined)).toBe("768P");
  });

  it("has the spec's cost table", () => {
    expect(POINTS_PER_SECOND).toEqual({ "480P": 5, "768P": 10, "1080P": 19, "2K": 20, "4K": 22 });
    expect(UPSCALE_TIERS).toEqual(["1080P", "2K", "4K"]);
  });

  it("computes task points", () => {
    expect(videoPoints(undefined)).toBe(50);
    expect(videoPoints("480P", 4)).toBe(20);
    expect(videoPoints("768P", 10)).toBe(100);
    expect(videoPoints("1080P", 5)).toBe(95);
    expect(videoPoints("2K", 30)).toBe(600);
    expect(videoPoints("4K", 10)).toBe(220);
    expect(videoPoints("4k", 10)).toBe(100);
    expect(basePoints(10)).toBe(100);
    expect(basePoints()).toBe(50);
  });
});

describe("outputSize", () => {
  it.each([
    ["21:9", 1120, 480],
    ["16:9", 864, 480],
    ["4:3", 640, 480],
    ["1:1", 480, 480],
    ["3:4", 480, 640],
    ["9:16", 480, 864],
  ] as const)("480P %s is %dx%d", (ratio, width, height) => {
    expect(outputSize("480P", ratio)).toEqual({ width, height });
  });

  it("has the native 768P sizes", () => {
    expect(outputSize("768P", "21:9")).toEqual({ width: 1792, height: 768 });
    expect(outputSize("768P", "16:9")).toEqual({ width: 1360, height: 768 });
    expect(outputSize("768P", "4:3")).toEqual({ width: 1024, height: 768 });
    expect(outputSize("768P", "1:1")).toEqual({ width: 768, height: 768 });
    expect(outputSize("768P", "3:4")).toEqual({ width: 768, height: 1024 });
    expect(outputSize("768P", "9:16")).toEqual({ width: 768, height: 1360 });
  });

  it("upscales to a short side of 1080, 1440 and 2160", () => {
    expect(outputSize("1080P", "16:9")).toEqual({ width: 1920, height: 1080 });
    expect(outputSize("2K", "16:9")).toEqual({ width: 2560, height: 1440 });
    expect(outputSize("4K", "16:9")).toEqual({ width: 3840, height: 2160 });
    expect(outputSize("1080P", "9:16")).toEqual({ width: 1080, height: 1920 });
    expect(outputSize("1080P", "21:9")).toEqual({ width: 2520, height: 1080 });
    expect(outputSize("2K", "4:3")).toEqual({ width: 1920, height: 1440 });
    expect(outputSize("4K", "3:4")).toEqual({ width: 2160, height: 2880 });
    expect(outputSize("4K", "1:1")).toEqual({ width: 2160, height: 2160 });
    for (const tier of RESOLUTIONS) {
      for (const ratio of VIDEO_RATIOS) {
        const { width, height } = outputSize(tier, ratio);
        expect(width % 2, `${tier} ${ratio}`).toBe(0);
        expect(height % 2, `${tier} ${ratio}`).toBe(0);
      }
    }
  });

  it("adaptive without a usable image is 16:9", () => {
    expect(outputSize("480P", "adaptive")).toEqual({ width: 864, height: 480 });
    expect(outputSize("480P", "adaptive", { width: 0, height: 0 })).toEqual({ width: 864, height: 480 });
    expect(outputSize("768P", "adaptive")).toEqual({ width: 1360, height: 768 });
    expect(outputSize("4K", "adaptive")).toEqual({ width: 3840, height: 2160 });
  });

  it.each([
    [1000, 1000, 480, 480],
    [1920, 1080, 864, 480],
    [1080, 1920, 480, 864],
    [2560, 1080, 1120, 480],
    [1200, 900, 640, 480],
    [900, 1200, 480, 640],
    // 1.55 is nearer 4:3 (1.333) than 16:9 (1.8) by difference, but nearer 16:9 by log-ratio
    [1550, 1000, 864, 480],
    [1000, 1550, 480, 864],
  ])("adaptive at 480P follows a %dx%d image: %dx%d", (w, h, width, height) => {
    expect(outputSize("480P", "adaptive", { width: w, height: h })).toEqual({ width, height });
  });

  it("adaptive applies to upscaled tiers and is ignored for fixed ratios", () => {
    expect(outputSize("1080P", "adaptive", { width: 600, height: 800 })).toEqual({
      width: 1080,
      height: 1440,
    });
    expect(outputSize("768P", "adaptive", { width: 3000, height: 1280 })).toEqual({
      width: 1792,
      height: 768,
    });
    expect(outputSize("480P", "1:1", { width: 1920, height: 1080 })).toEqual({ width: 480, height: 480 });
  });
});

// ---------- public addresses ----------

describe("requestUrlIssues", () => {
  it("flags non-public material and callback addresses", () => {
    const request = {
      content: [
        text("x"),
        refImage(),
        video("http://10.0.0.5/v.mp4"),
        {
          type: "image_url",
          image_url: { url: "data:image/png;base64,iVBORw0KGgo=" },
          role: "reference_image",
        } as const,
      ] satisfies ContentElement[],
      callback_url: "http://localhost:9000/hook",
    };
    const issues = requestUrlIssues(request);
    expect(issues).toHaveLength(2);
    expectOne(issues, ["content", 2, "video_url", "url"], "got 10.0.0.5, which is a private-network address");
    expectOne(issues, ["callback_url"], "got localhost, which is a loopback address");
    expect(requestUrlIssues(request, { allowPrivate: true })).toEqual([]);
  });
});

// ---------- responses ----------

const succeededTask = {
  id: "task-1",
  model: "Vid-H3",
  status: "succeeded",
  error: { code: "", message: "" },
  created_at: 1_700_000_000,
  updated_at: 1_700_000_090,
  content: { url: "https://cdn.example.com/out.mp4" },
  resolution: "768P",
  duration: 5,
  ratio: "16:9",
  task_type: "generation",
  modality: "video",
  estimated_remaining_seconds: 0,
  usage: {
    input_seconds: 0,
    input_image_count: 1,
    use_context_ir: false,
    total_seconds: 5,
    output_seconds: 5,
  },
  trace_id: "added-later",
};
const queuedTask = {
  id: "task-2",
  model: "vid-h3-lite",
  status: "queued",
  created_at: 1_700_000_000,
  updated_at: 1_700_000_000,
  resolution: "1080P",
  duration: 10,
  ratio: "9:16",
  task_type: "generation",
  modality: "video",
  estimated_remaining_seconds: 75,
  usage: { input_seconds: 3, input_image_count: 0, use_context_ir: true },
};

describe("response schemas", () => {
  it("accepts tasks with added and omitted optional fields", () => {
    const parsed = VideoTask.parse(succeededTask);
    expect(parsed.content?.url).toBe("https://cdn.example.com/out.mp4");
    expect(parsed).toHaveProperty("trace_id", "added-later");
    expect(VideoTask.parse(queuedTask).content).toBeUndefined();
    expect(VideoTask.safeParse({ ...queuedTask, usage: {} }).success).toBe(true);
    expect(
      VideoTask.safeParse({ ...queuedTask, status: "failed", error: { code: 1001, message: "nsfw" } })
        .success,
    ).toBe(true);
    expect(VideoTaskResponse.safeParse({ task: succeededTask }).success).toBe(true);
    expect(VideoTaskList.safeParse({ items: [succeededTask, queuedTask], total: 2 }).success).toBe(true);
  });

  it("rejects tasks with wrong or missing fields, naming the path", () => {
    expectOne(
      issuesFromZod(VideoTask.safeParse({ ...queuedTask, status: undefined }).error as never),
      ["status"],
      "is required",
    );
    const bad = VideoTask.safeParse({ ...queuedTask, status: "done" });
    expect(bad.error && issuesFromZod(bad.error)).toEqual([
      {
        path: ["status"],
        message: 'expected one of "queued", "running", "succeeded", "failed", "cancelled", got "done"',
      },
    ]);
    const { id: _, ...noId } = queuedTask;
    expectOne(issuesFromZod(VideoTask.safeParse(noId).error as never), ["id"], "is required");
    const wrapped = VideoTaskResponse.safeParse({ task: { ...queuedTask, duration: 5.5 } });
    expectOne(issuesFromZod(wrapped.error as never), ["task", "duration"], "expected an integer, got 5.5");
    const list = VideoTaskList.safeParse({ items: [queuedTask] });
    expectOne(issuesFromZod(list.error as never), ["total"], "is required");
  });

  it("checks create and cancel responses", () => {
    expect(VideoCreateResponse.parse({ task_id: "t1", extra: 1 })).toEqual({ task_id: "t1", extra: 1 });
    expect(VideoCreateResponse.safeParse({ id: "t1" }).success).toBe(false);
    expect(
      VideoCancelResponse.safeParse({ task_id: "t1", action: "delete", status: "running" }).success,
    ).toBe(true);
    expect(
      VideoCancelResponse.safeParse({ task_id: "t1", action: "delete", status: "cancelled" }).success,
    ).toBe(true);
    const bad = VideoCancelResponse.safeParse({ task_id: "t1", action: "cancel", status: "cancelled" });
    expectOne(issuesFromZod(bad.error as never), ["action"], 'got "cancel"');
  });

  it("checks skills", () => {
    const official = { id: "s1", name: "Camera", content: "Use slow dolly shots.", official: true };
    expect(Skill.safeParse(official).success).toBe(true);
    const custom = {
      ...official,
      id: "s2",
      official: false,
      description: "mine",
      created_at: 1,
      updated_at: 2,
    };
    expect(SkillResponse.safeParse({ skill: custom }).success).toBe(true);
    expect(SkillList.safeParse({ items: [official, custom], total: 2 }).success).toBe(true);
    expect(SkillDeleteResponse.safeParse({ skill_id: "s2" }).success).toBe(true);
    expectOne(
      issuesFromZod(Skill.safeParse({ ...official, official: "yes" }).error as never),
      ["official"],
      'expected a boolean, got "yes"',
    );
    expect(SkillDeleteResponse.safeParse({}).success).toBe(false);
  });
});

describe("SkillWriteRequest", () => {
  const issues = (value: unknown) => {
    const r = SkillWriteRequest.safeParse(value);
    return r.success ? [] : issuesFromZod(r.error);
  };

  it("accepts name and content, with optional description; strips unknown fields", () => {
    const parsed = SkillWriteRequest.parse({
      name: "Noir",
      content: "# Rules\nHigh contrast.",
      official: true,
    });
    expect(parsed).toEqual({ name: "Noir", content: "# Rules\nHigh contrast." });
    expect(issues({ name: "Noir", description: "dark", content: "x" })).toEqual([]);
  });

  it("rejects empty or missing name and content", () => {
    expectOne(issues({ name: "   ", content: "x" }), ["name"], 'expected a non-empty name, got "   "');
    expectOne(issues({ content: "x" }), ["name"], "is required");
    expectOne(issues({ name: "Noir", content: "" }), ["content"], 'expected non-empty content, got ""');
    expectOne(issues({ name: "Noir" }), ["content"], "is required");
    expectOne(
      issues({ name: "Noir", content: "x", description: 5 }),
      ["description"],
      "expected a string, got 5",
    );
  });
});

// ---------- list queries ----------

describe("parseVideoListQuery", () => {
  const parse = (q: string) => parseVideoListQuery(new URLSearchParams(q));
  const issuesOf = (q: string) => {
    const r = parse(q);
    return r.ok ? [] : r.issues;
  };

  it("defaults page_num 1 and page_size 20", () => {
    expect(parse("")).toEqual({ ok: true, value: { page_num: 1, page_size: 20 } });
  });

  it("accepts valid pages and filters", () => {
    expect(
      parse(
        "page_num=3&page_size=100&filter.status=running&filter.model=vid-h3-lite&filter.task_type=generation",
      ),
    ).toEqual({
      ok: true,
      value: {
        page_num: 3,
        page_size: 100,
        status: "running",
        model: "vid-h3-lite",
        task_type: "generation",
      },
    });
  });

  it.each([
    ["page_num=0", "page_num", 'expected an integer >= 1, got "0"'],
    ["page_num=2.5", "page_num", 'expected an integer >= 1, got "2.5"'],
    ["page_num=abc", "page_num", 'got "abc"'],
    ["page_num=-1", "page_num", 'got "-1"'],
    ["page_size=101", "page_size", 'expected an integer from 1 to 100, got "101"'],
    ["page_size=0", "page_size", 'got "0"'],
    ["page_size=1e2", "page_size", 'got "1e2"'],
    [
      "filter.status=done",
      "filter.status",
      'expected one of "queued", "running", "succeeded", "failed", "cancelled", got "done"',
    ],
    ["filter.model=Vid-H4", "filter.model", 'got "Vid-H4"'],
    ["filter.task_type=edit", "filter.task_type", 'expected one of "generation", got "edit"'],
    ["filter.task_ids=a,b", "filter.task_ids", "is not supported; query tasks one by one"],
    ["filter.task_ids=", "filter.task_ids", "is not supported"],
    ["filter.task_ids[]=a&filter.task_ids[]=b", "filter.task_ids", "is not supported"],
    ["filter[task_ids]=a", "filter.task_ids", "is not supported"],
  ])("rejects %s", (q, name, fragment) => {
    const issues = issuesOf(q);
    expectOne(issues, [name], fragment);
    expect(issues).toHaveLength(1);
  });

  it("formats the task_ids issue as the spec names it", () => {
    expect(issuesOf("filter.task_ids=x").map(formatIssue)).toEqual([
      "filter.task_ids: is not supported; query tasks one by one",
    ]);
  });

  it("reports every bad parameter", () => {
    expect(issuesOf("page_num=x&page_size=500&filter.status=nope").map((i) => i.path)).toEqual([
      ["page_num"],
      ["page_size"],
      ["filter.status"],
    ]);
  });
});

describe("parseSkillListQuery", () => {
  const parse = (q: string) => parseSkillListQuery(new URLSearchParams(q));

  it("defaults and caps page_size at 100", () => {
    expect(parse("")).toEqual({ ok: true, value: { page_num: 1, page_size: 20 } });
    expect(parse("page_size=500&page_num=2")).toEqual({ ok: true, value: { page_num: 2, page_size: 100 } });
    expect(parse("page_size=100")).toEqual({ ok: true, value: { page_num: 1, page_size: 100 } });
  });

  it("trims keyword and drops an empty one", () => {
    expect(parse("keyword=%20%20noir%20")).toEqual({
      ok: true,
      value: { page_num: 1, page_size: 20, keyword: "noir" },
    });
    expect(parse("keyword=%20%20")).toEqual({ ok: true, value: { page_num: 1, page_size: 20 } });
  });

  it.each([
    ["page_size=0", "page_size", 'expected an integer >= 1, got "0"'],
    ["page_size=ten", "page_size", 'got "ten"'],
    ["page_num=0", "page_num", 'expected an integer >= 1, got "0"'],
    ["page_num=1.5", "page_num", 'got "1.5"'],
  ])("rejects %s", (q, name, fragment) => {
    const r = parse(q);
    expect(r.ok).toBe(false);
    expectOne(r.ok ? [] : r.issues, [name], fragment);
  });
});

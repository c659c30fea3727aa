// `clapper init [DIR]`: a starter project. A storyboard that teaches the manifest by its comments
// and runs as it is (plan offline, run with --sandbox), the manifest's JSON Schema beside it for
// editors, and a .gitignore for the run's state and results. Nothing a person wrote is lost:
// an existing storyboard or a different schema file is refused unless --force, and a .gitignore
// is only added to.
import { lstat, mkdir, readFile, writeFile } from "node:fs/promises";
import { basename, join, relative, resolve } from "node:path";
import { nameProblem } from "../../../manifest/index.js";
import { manifestSchemaText } from "../../../manifest/schema.js";
import { ExitError, fsReason } from "../../errors.js";
import { ExitCode } from "../../exit-code.js";

export const MANIFEST_FILE = "storyboard.yaml";
export const SCHEMA_FILE = "manifest.schema.json";
const GITIGNORE = ".gitignore";
/** What git should not hold: the run's state (.clapper/) and its results (output/). */
const IGNORED = [".clapper/", "output/"] as const;

export interface InitOptions {
  /** The project folder, relative to `cwd`; created when missing. */
  dir: string;
  cwd: string;
  force: boolean;
}

export type FileAction = "created" | "overwritten" | "appended" | "unchanged";

export interface InitFile {
  /** As the user would type it: relative to the working directory. */
  path: string;
  action: FileAction;
  /** What the file is for. */
  about: string;
}

export interface NextStep {
  command: string;
  purpose: string;
}

export interface InitAnswer {
  dir: string;
  /** The run name written into the storyboard. */
  name: string;
  files: InitFile[];
  next: NextStep[];
}

/**
 * The run's name, from the folder's: a slug clapper accepts (it names folders and keys), else
 * "storyboard".
 */
export function runName(folder: string): string {
  const slug = basename(folder)
    .replace(/[^A-Za-z0-9._-]+/g, "-")
    .replace(/^[^A-Za-z0-9]+/, "")
    .slice(0, 64)
    .replace(/[.-]+$/, "");
  return slug && nameProblem(slug) === undefined ? slug : "storyboard";
}

/** The starter storyboard: valid as it is, every field a producer changes explained on its line. */
export function starterManifest(name: string): string {
  return `# yaml-language-server: $schema=./${SCHEMA_FILE}
# A clapper storyboard: each shot becomes a video, each line a narration.
# Check it and its cost offline:  clapper plan ${MANIFEST_FILE}
# Try the whole run for free:     clapper run ${MANIFEST_FILE} --sandbox
${`name: ${name}`.padEnd(32)} # the run's name: its output folder, its state, its keys
output: ./output                 # results go to output/NAME/ here, or to s3://bucket/prefix
budget: { max_points: 500 }      # the run stops before spending when its jobs cost more
defaults:                        # every shot and line starts from these; its own fields win
  shot:
    model: Vid-H3                # Vid-H3 or vid-h3-lite
    resolution: 480P             # 480P, 768P, 1080P, 2K, 4K: 5, 10, 19, 20, 22 points a second
    duration: 4                  # seconds, 4 to 30; or auto: as long as the shot's lines
    ratio: "16:9"                # 16:9, 9:16, 1:1, 4:3, 3:4, 21:9 or adaptive (quoted)
  line:
    language: EN                 # EN, ZH, JA, ES or AR
    voice: preset:en_female_bright # preset:ID or custom:ID (clapper voices list), or a .wav file
    speed: 1.0                   # 0.5 to 2.0
vars:
  place: a lighthouse on a cliff # {{ place }} in a prompt or a text is filled from here
shots:                           # a list, or a CSV file with one column per field: shots.csv
  - id: s01                      # names the job and its file: shots/s01.mp4
    # what the video shows: camera, subject, light, motion
    prompt: "Wide shot: {{ place }} at dusk, waves breaking below, the first stars out"
  - id: s02
    prompt: "Close-up: the lamp room, the great lens starts to turn and throws its beam"
    takes: 2                     # two variants to choose from, each paid for
lines:                           # a list, or a CSV file: lines.csv
  - id: n01
    shot: s01                    # the shot it narrates
    text: "Every night, the light came on at seven."   # what is said
    emotion_description: wistful # how it is said, in a few words
  - id: n02
    shot: s02
    text: "And every night, someone was watching."
    voice: preset:en_male_deep   # a field of its own wins over the defaults
`;
}

/** A path as typed in a shell: quoted when it holds anything but plain characters. */
function shellWord(path: string): string {
  return /^[A-Za-z0-9._/+-]+$/.test(path) ? path : `'${path.replace(/'/g, "'\\''")}'`;
}

/** The command that opens a file in the browser or viewer, by platform. */
function opener(): string {
  if (process.platform === "darwin") return "open";
  if (process.platform === "win32") return "start";
  return "xdg-open";
}

async function exists(path: string): Promise<boolean> {
  try {
    await lstat(path);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return false;
    throw new ExitError(ExitCode.Usage, `${path}: ${fsReason(error)}`);
  }
}

async function readIfThere(path: string): Promise<string | undefined> {
  try {
    return await readFile(path, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw new ExitError(ExitCode.Usage, `${path}: ${fsReason(error)}`);
  }
}

/** The lines of IGNORED a .gitignore lacks (`/output`, `output` and `output/` all keep output/ out). */
export function missingIgnores(text: string): string[] {
  const have = new Set(
    text
      .split(/\r?\n/)
      .map((line) => line.trim().replace(/^\//, "").replace(/\/$/, ""))
      .filter((line) => line !== "" && !line.startsWith("#")),
  );
  return IGNORED.filter((entry) => !have.has(entry.replace(/\/$/, "")));
}

/** The .gitignore's new text, or undefined when it has every line already. */
function withIgnores(current: string | undefined): string | undefined {
  const missing = missingIgnores(current ?? "");
  if (missing.length === 0) return undefined;
  const block = `# clapper: the runs' state and their results\n${missing.join("\n")}\n`;
  if (current === undefined || current === "") return block;
  return `${current}${current.endsWith("\n") ? "" : "\n"}\n${block}`;
}

/** Refuses (exit 2) before anything is written when a file would be lost or the folder is no folder. */
async function checkFolder(dir: string, shown: (p: string) => string, force: boolean, schema: string) {
  const stat = await lstat(dir).catch((error: NodeJS.ErrnoException) => {
    if (error.code === "ENOENT") return undefined;
    throw new ExitError(ExitCode.Usage, `${shown(dir)}: ${fsReason(error)}`);
  });
  if (stat && !stat.isDirectory()) {
    throw new ExitError(
      ExitCode.Usage,
      `${shown(dir)} is not a folder: name a folder for the project (clapper init DIR)`,
    );
  }
  if (force) return;
  const manifest = join(dir, MANIFEST_FILE);
  const kept: string[] = [];
  if (await exists(manifest)) kept.push(shown(manifest));
  const schemaPath = join(dir, SCHEMA_FILE);
  const current = await readIfThere(schemaPath);
  if (current !== undefined && current !== schema) kept.push(shown(schemaPath));
  if (kept.length === 0) return;
  const target = shown(dir) === "." ? "" : ` ${shellWord(shown(dir))}`;
  throw new ExitError(
    ExitCode.Usage,
    `${kept.join(" and ")} already exist${kept.length === 1 ? "s" : ""}: init never overwrites ${kept.length === 1 ? "it" : "them"} and wrote nothing. Run \`clapper init${target} --force\` to replace ${kept.length === 1 ? "it" : "them"} with the starter's, or \`clapper init NEW_FOLDER\` for a new project.`,
  );
}

export async function init(o: InitOptions): Promise<InitAnswer> {
  const dir = resolve(o.cwd, o.dir);
  const shown = (path: string) => relative(o.cwd, path) || ".";
  const schema = manifestSchemaText();
  await checkFolder(dir, shown, o.force, schema);
  const name = runName(dir);
  const files: InitFile[] = [];
  const put = async (file: string, text: string, about: string) => {
    const path = join(dir, file);
    const before = await readIfThere(path);
    if (before === text) {
      files.push({ path: shown(path), action: "unchanged", about });
      return;
    }
    // "wx" when it was not there: a file made meanwhile is refused, not overwritten.
    await writeFile(path, text, { flag: before === undefined && !o.force ? "wx" : "w" });
    files.push({ path: shown(path), action: before === undefined ? "created" : "overwritten", about });
  };
  try {
    await mkdir(dir, { recursive: true });
    await put(MANIFEST_FILE, starterManifest(name), "2 shots and 2 lines, each field explained");
    await put(SCHEMA_FILE, schema, "the manifest's JSON Schema: checks and explains it in editors");
    const ignorePath = join(dir, GITIGNORE);
    const before = await readIfThere(ignorePath);
    const after = withIgnores(before);
    const about = "keeps .clapper/ (the runs' state) and output/ (results) out of git";
    if (after === undefined) files.push({ path: shown(ignorePath), action: "unchanged", about });
    else {
      await writeFile(ignorePath, after);
      files.push({ path: shown(ignorePath), action: before === undefined ? "created" : "appended", about });
    }
  } catch (error) {
    if (error instanceof ExitError) throw error;
    throw new ExitError(ExitCode.Usage, `cannot write the project in ${shown(dir)}: ${fsReason(error)}`);
  }
  return { dir: shown(dir), name, files, next: nextSteps(shown(join(dir, MANIFEST_FILE)), shown(dir), name) };
}

function nextSteps(manifest: string, dir: string, name: string): NextStep[] {
  const m = shellWord(manifest);
  const report = shellWord(join(dir, "output", name, "reports", "report.html"));
  return [
    { command: `clapper plan ${m}`, purpose: "checks it and says what it costs, offline: nothing is spent" },
    {
      command: `clapper run ${m} --sandbox`,
      purpose: "the whole run against the built-in sandbox: free, no key needed",
    },
    { command: `${opener()} ${report}`, purpose: "the run's report: every shot and line, in a browser" },
    {
      command: `clapper run ${m}`,
      purpose:
        "for real, with CLAPPER_BASE_URL and CLAPPER_API_KEY set in the environment (or --api-key-file FILE); it spends at most budget.max_points",
    },
  ];
}

export function renderInit(a: InitAnswer): string {
  const width = Math.max(...a.files.map((f) => f.path.length));
  const files = a.files.map((f) => `  ${f.action.padEnd(11)} ${f.path.padEnd(width)}  ${f.about}`);
  const steps = a.next.flatMap((s, i) => [`  ${i + 1}. ${s.command}`, `     ${s.purpose}`]);
  const schema = join(a.dir, SCHEMA_FILE);
  return [
    `A clapper project in ${a.dir === "." ? "this folder" : a.dir} (run name ${a.name}):`,
    ...files,
    "",
    "Next:",
    ...steps,
    "",
    `Editors with the YAML language server (VS Code's YAML extension) check ${MANIFEST_FILE} against ${SCHEMA_FILE} as you type; after upgrading clapper, \`clapper schema > ${shellWord(schema)}\` refreshes it.`,
  ].join("\n");
}

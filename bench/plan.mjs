// npm run bench:plan — `clapper plan` on a generated 10,000-row bare CSV manifest: shots and lines
// mixed, some filled from a template with vars, a few local materials and reference voices shared by
// many rows. Prints the wall time and the peak memory of the plan process. Targets: < 3 s, < 250 MB.
//
// The plan runs as a child process exactly as a user runs it. Peak memory is the larger of the
// child's own max RSS (reported at exit through a preloaded hook) and the VmHWM read from
// /proc/<pid>/status while it runs (Linux); both are the high-water mark of the resident set.
// BENCH_ROWS=N changes the size; BENCH_PROFILE=DIR adds a CPU profile of the plan process.
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const ROWS = Number(process.env.BENCH_ROWS ?? 10_000);
const TARGET_SECONDS = 3;
const TARGET_MB = 250;

if (!existsSync(join(ROOT, "dist", "cli", "main.js"))) {
  console.log("dist/ is missing: building first (npm run build)");
  const built = spawnSync("npm", ["run", "build"], { cwd: ROOT, stdio: "inherit" });
  if (built.status !== 0 && !existsSync(join(ROOT, "dist", "cli", "main.js"))) process.exit(1);
}

/** A silent 16-bit mono WAV of `ms` milliseconds (reference voices must last 0.5 to 15 s). */
function wav(ms, rate = 16_000) {
  const samples = Math.round((rate * ms) / 1000);
  const data = samples * 2;
  const out = Buffer.alloc(44 + data);
  out.write("RIFF", 0);
  out.writeUInt32LE(36 + data, 4);
  out.write("WAVEfmt ", 8);
  out.writeUInt32LE(16, 16);
  out.writeUInt16LE(1, 20);
  out.writeUInt16LE(1, 22);
  out.writeUInt32LE(rate, 24);
  out.writeUInt32LE(rate * 2, 28);
  out.writeUInt16LE(2, 32);
  out.writeUInt16LE(16, 34);
  out.write("data", 36);
  out.writeUInt32LE(data, 40);
  return out;
}

const dir = mkdtempSync(join(tmpdir(), "clapper-bench-plan-"));
try {
  // Shared materials: a few frames, a reference clip and two voices, each named by many rows.
  for (let i = 0; i < 4; i++) writeFileSync(join(dir, `frame-${i}.png`), Buffer.alloc(64 * 1024, i + 1));
  writeFileSync(join(dir, "clip.mp4"), Buffer.alloc(256 * 1024, 7));
  writeFileSync(join(dir, "voice-a.wav"), wav(2000));
  writeFileSync(join(dir, "voice-b.wav"), wav(3000));
  const templates = join(dir, "templates");
  mkdirSync(templates);
  writeFileSync(join(templates, "shot.txt"), "Shot {{id}} of {{show}}: {{subject}}. Camera: {{camera}}.\n");
  writeFileSync(join(templates, "line.txt"), "{{speaker}} says: {{words}}\n");

  const header = [
    "kind",
    "id",
    "shot",
    "prompt",
    "template",
    "vars.show",
    "vars.subject",
    "vars.camera",
    "vars.speaker",
    "vars.words",
    "duration",
    "resolution",
    "ratio",
    "first_frame",
    "reference_images",
    "reference_videos",
    "takes",
    "text",
    "voice",
    "language",
    "speed",
    "emotion_description",
    "pronunciations",
  ];
  const quote = (cell) => (/[",\n]/.test(cell) ? `"${cell.replaceAll('"', '""')}"` : cell);
  const lines = [header.join(",")];
  const resolutions = ["480P", "768P", "1080P", "2K", "4K"];
  const ratios = ["16:9", "9:16", "1:1", "4:3", "21:9"];
  let shots = 0;
  for (let i = 0; i < ROWS; i++) {
    const row = Object.fromEntries(header.map((h) => [h, ""]));
    if (i % 2 === 0) {
      // A shot: every third from the template, some with a first frame or references.
      const id = `s${String(shots++).padStart(5, "0")}`;
      Object.assign(row, {
        kind: "shot",
        id,
        duration: String(4 + (i % 27)),
        resolution: resolutions[i % 5],
        ratio: ratios[i % 5],
      });
      if (i % 3 === 0) {
        Object.assign(row, {
          template: "shot",
          "vars.show": "The Lighthouse",
          "vars.subject": `the keeper, scene ${i}, climbing the stairs`,
          "vars.camera": i % 4 === 0 ? "slow push-in" : "handheld, low angle",
        });
      } else {
        row.prompt = `Wide shot ${i}: a lighthouse on a cliff at dusk, waves breaking, gulls, <Picture 1>`;
      }
      if (i % 10 === 2) row.first_frame = `frame-${i % 4}.png`;
      else if (i % 10 === 4) {
        row.reference_images = `frame-${i % 4}.png|frame-${(i + 1) % 4}.png`;
        row.reference_videos = "clip.mp4";
      } else if (row.template === "") row.prompt = row.prompt.replace(", <Picture 1>", "");
      if (i % 50 === 0) row.takes = "3";
    } else {
      // A line: most with preset voices, some with a shared reference voice, some templated.
      const id = `n${String(i).padStart(5, "0")}`;
      Object.assign(row, {
        kind: "line",
        id,
        shot: `s${String(Math.max(0, shots - 1)).padStart(5, "0")}`,
        voice: i % 7 === 0 ? `voice-${i % 2 === 0 ? "a" : "b"}.wav` : "preset:en_male_deep",
        language: i % 5 === 0 ? "ZH" : "EN",
        speed: i % 3 === 0 ? "0.9" : "",
      });
      if (row.language === "ZH") {
        row.text = `灯塔第${i}夜亮了，风很大。`;
        row.pronunciations = "灯塔=pinyin:deng1 ta3";
      } else if (i % 3 === 0) {
        Object.assign(row, {
          template: "line",
          "vars.speaker": "Maren",
          "vars.words": `every night, ${i} nights in a row, the light came on at seven.`,
        });
      } else {
        row.text = `Line ${i}: every night, the light came on at seven, and someone was watching.`;
        row.emotion_description = i % 2 ? "wistful" : "";
      }
    }
    lines.push(header.map((h) => quote(row[h])).join(","));
  }
  const manifest = join(dir, "bench.csv");
  writeFileSync(manifest, `${lines.join("\n")}\n`);

  // The child reports its own peak RSS at exit, on a file descriptor of its own.
  const hook = join(dir, "peak.mjs");
  const peakFile = join(dir, "peak.txt");
  writeFileSync(
    hook,
    `import { writeFileSync } from "node:fs";\nprocess.on("exit", () => writeFileSync(${JSON.stringify(peakFile)}, String(process.resourceUsage().maxRSS * 1024)));\n`,
  );

  const started = performance.now();
  // BENCH_PROFILE=DIR writes a CPU profile of the plan there (open it in Chrome DevTools).
  const profile = process.env.BENCH_PROFILE
    ? ["--cpu-prof", "--cpu-prof-dir", process.env.BENCH_PROFILE]
    : [];
  const child = spawn(
    process.execPath,
    [
      ...profile,
      "--import",
      hook,
      join(ROOT, "bin", "clapper.js"),
      "plan",
      manifest,
      "--json",
      "--speech-price",
      "2",
    ],
    { cwd: dir, stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, CLAPPER_API_KEY: "" } },
  );
  let hwm = 0;
  const readHwm = () => {
    try {
      const status = readFileSync(`/proc/${child.pid}/status`, "utf8");
      const kb = Number(/VmHWM:\s+(\d+)\s+kB/.exec(status)?.[1] ?? 0);
      hwm = Math.max(hwm, kb * 1024);
    } catch {
      // not Linux, or the process has just exited
    }
  };
  const poll = setInterval(readHwm, 5);
  const chunks = [];
  const errors = [];
  child.stdout.on("data", (c) => chunks.push(c));
  child.stderr.on("data", (c) => errors.push(c));
  const code = await new Promise((resolve) => child.on("exit", (c) => resolve(c)));
  const seconds = (performance.now() - started) / 1000;
  clearInterval(poll);

  const stdout = Buffer.concat(chunks).toString("utf8");
  let plan;
  try {
    plan = JSON.parse(stdout);
  } catch {
    console.error(`plan printed no JSON (exit ${code}):\n${Buffer.concat(errors).toString("utf8")}`);
    process.exit(1);
  }
  if (code !== 0 || plan.errors.length > 0) {
    console.error(`plan exited with ${code} and ${plan.errors.length} errors, e.g.:`);
    for (const e of plan.errors.slice(0, 5)) console.error(`  ${e}`);
    process.exit(1);
  }
  const selfReported = existsSync(peakFile) ? Number(readFileSync(peakFile, "utf8")) : 0;
  const peak = Math.max(hwm, selfReported);
  const mb = peak / (1024 * 1024);
  const ok = (good) => (good ? "ok" : "MISSED");
  console.log(`manifest: ${ROWS} rows (${plan.counts.video} video jobs, ${plan.counts.speech} speech jobs)`);
  console.log(`points:   ${plan.points.video} video + ${plan.points.speech} speech = ${plan.points.total}`);
  console.log(
    `wall:     ${seconds.toFixed(2)} s (target < ${TARGET_SECONDS} s: ${ok(seconds < TARGET_SECONDS)})`,
  );
  console.log(
    `peak:     ${mb.toFixed(1)} MB (target < ${TARGET_MB} MB: ${ok(mb < TARGET_MB)}; ${hwm ? "VmHWM" : "maxRSS"} ${hwm ? (hwm / 1048576).toFixed(1) : mb.toFixed(1)} MB)`,
  );
  if (seconds >= TARGET_SECONDS || mb >= TARGET_MB) process.exitCode = 1;
} finally {
  rmSync(dir, { recursive: true, force: true });
}

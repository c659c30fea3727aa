// A run's stills, made as its videos are stored, and `--no-stills`: the same run without them, its
// page written all the same, and `clapper report` making them afterwards.
import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { expect, it } from "vitest";
import { cli, runIn, setup } from "../run/helpers.js";

it("a run makes a still per video; with stills off it makes none, and clapper report makes them later", async () => {
  const { s, w } = await setup();
  const shots = [
    { id: "s01", prompt: "Wide shot: a lighthouse at dusk" },
    { id: "s02", prompt: "The lamp room", takes: 2 },
  ];
  const on = await w.manifest({ name: "on", shots });
  const ran = await runIn(s, on);
  expect(ran.outcome.exitCode).toBe(0);
  const onDir = w.out("on");
  const index = JSON.parse(await readFile(join(onDir, "stills", "index.json"), "utf8")) as object;
  expect(Object.keys(index).sort()).toEqual([
    "stills/s01.jpg",
    "stills/s02-take-1.jpg",
    "stills/s02-take-2.jpg",
  ]);

  const off = await w.manifest({ name: "off", shots });
  const bare = await runIn(s, off, { stills: false });
  expect(bare.outcome.exitCode).toBe(0);
  const offDir = w.out("off");
  expect(existsSync(join(offDir, "stills"))).toBe(false);
  const page = await readFile(join(offDir, "reports", "report.html"), "utf8");
  expect(page).not.toContain("data:image/jpeg");

  const report = await cli(undefined, ["report", off], {}, "silent");
  expect(report.code, report.err).toBe(0);
  expect(existsSync(join(offDir, "stills", "s02-take-2.jpg"))).toBe(true);
  expect(await readFile(join(offDir, "reports", "report.html"), "utf8")).toContain("data:image/jpeg");
});

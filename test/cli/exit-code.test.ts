import { describe, expect, it } from "vitest";
import { ExitCode, exitCodeOf } from "../../src/cli/exit-code.js";

describe("exitCodeOf", () => {
  it("says each way a run ends with the documented exit code", () => {
    expect(exitCodeOf("succeeded")).toBe(0);
    expect(exitCodeOf("jobs-failed")).toBe(1);
    expect(exitCodeOf("state-unwritable")).toBe(1);
    expect(exitCodeOf("manifest-invalid")).toBe(2);
    expect(exitCodeOf("refused")).toBe(2);
    expect(exitCodeOf("over-budget")).toBe(3);
    expect(exitCodeOf("interrupted")).toBe(4);
    expect(exitCodeOf("locked")).toBe(5);
    expect(exitCodeOf("unreachable")).toBe(6);
    expect(exitCodeOf("bug")).toBe(ExitCode.Internal);
  });
});

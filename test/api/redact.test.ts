// Redaction by value: a key echoed by a service, in any text, never reaches output.
import { afterEach, describe, expect, it } from "vitest";
import { addSecret, clearSecrets, REDACTED, redact, redactDeep } from "../../src/api/redact.js";

afterEach(() => clearSecrets());

describe("redact", () => {
  it("replaces a registered key and its Bearer form wherever it stands", () => {
    addSecret("sk-ml-abcdef123456");
    expect(redact("bad header: Bearer sk-ml-abcdef123456, again sk-ml-abcdef123456!")).toBe(
      `bad header: Bearer ${REDACTED}, again ${REDACTED}!`,
    );
  });

  it("replaces a registered secret of another shape too", () => {
    addSecret("hunter2-is-a-secret");
    expect(redact("x=hunter2-is-a-secret&y=1")).toBe(`x=${REDACTED}&y=1`);
  });

  it("masks anything shaped like a model key, registered or not", () => {
    expect(redact("their key sk-ml-zzzzzz999 leaked")).toBe(`their key sk-ml-${REDACTED} leaked`);
    // Too short to be a key: the words "sk-ml-" in a message stay readable.
    expect(redact("keys start with sk-ml-")).toBe("keys start with sk-ml-");
  });

  it("does not register values too short to be secrets", () => {
    addSecret("abc");
    expect(redact("abc abc")).toBe("abc abc");
  });

  it("walks objects and arrays without changing the input", () => {
    addSecret("sk-ml-deepsecret99");
    const input = { a: ["sk-ml-deepsecret99", 1, null], b: { c: "x sk-ml-deepsecret99" }, d: true };
    const out = redactDeep(input);
    expect(out).toEqual({ a: [REDACTED, 1, null], b: { c: `x ${REDACTED}` }, d: true });
    expect(input.a[0]).toBe("sk-ml-deepsecret99");
  });

  it("leaves the sandbox's public demo key readable, unless it is registered as this run's secret", () => {
    expect(redact("default sk-ml-sandbox=default")).toBe("default sk-ml-sandbox=default");
    expect(redact("sk-ml-sandboxed1")).toBe(`sk-ml-${REDACTED}`);
    // Nothing glued to it passes with it.
    expect(redact("Bearer sk-ml-sandbox=sk-ml-LIVEKEY12345678")).toBe(`Bearer sk-ml-${REDACTED}`);
    expect(redact("sk-ml-sandbox=acme/sk-ml-LIVEKEY12345678")).toBe(`sk-ml-${REDACTED}`);
    expect(redact("sk-ml-sandbox=acme")).toBe("sk-ml-sandbox=acme");
    addSecret("sk-ml-sandbox");
    expect(redact("key sk-ml-sandbox")).toBe(`key ${REDACTED}`);
  });
});

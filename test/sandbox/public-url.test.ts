// A sandbox reached at another address than the one it listens on (a container on a Docker network,
// a published port): `publicUrl` is what its result and upload URLs name, so clients can fetch them.
import { randomUUID } from "node:crypto";
import { describe, expect, it, onTestFinished } from "vitest";
import { SpeechCreateResponse, SpeechTaskResponse } from "../../src/api/speech.js";
import { startSandbox } from "../../src/sandbox/index.js";
import { call, KEY, sandbox } from "../helpers/sandbox.js";

async function resultUrl(url: string): Promise<string> {
  const body = { text: "Hello.", language: "EN", voice: { source: "preset", voice_id: "en_female_bright" } };
  const created = await call(url, "POST", "/audio/v1/speech/jobs", { body, idem: randomUUID() });
  const id = SpeechCreateResponse.parse(created.body).task_id;
  for (;;) {
    const task = SpeechTaskResponse.parse((await call(url, "GET", `/audio/v1/speech/jobs/${id}`)).body).task;
    if (task.status === "succeeded") return task.output_url as string;
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe("publicUrl", () => {
  it("names the public address in result URLs; without it, the address listened on", async () => {
    const s = await sandbox({ publicUrl: "http://clapper-sandbox:8787/" });
    onTestFinished(() => s.close());
    expect(s.url).toBe("http://clapper-sandbox:8787");
    const listened = `http://127.0.0.1:${s.port}`;
    expect(await resultUrl(listened)).toMatch(/^http:\/\/clapper-sandbox:8787\/_media\//);

    const plain = await sandbox();
    onTestFinished(() => plain.close());
    expect(await resultUrl(plain.url)).toMatch(new RegExp(`^${plain.url}/_media/`));
  });

  it("refuses a public URL that is not http(s)://HOST[:PORT]", async () => {
    await expect(startSandbox({ port: 0, keys: [KEY], publicUrl: "ftp://x" })).rejects.toThrow(/publicUrl/);
    await expect(startSandbox({ port: 0, keys: [KEY], publicUrl: "http://x/path" })).rejects.toThrow(
      /expected http\(s\):\/\/HOST\[:PORT\]/,
    );
  });
});

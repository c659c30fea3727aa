// A small helper process that starts ffmpegs for a large one. On Linux libuv starts a process by
// fork(): the kernel copies the page tables of the whole run and write-protects its memory, and the
// run then takes a page fault on each page it writes. From a run of 250 MB that cost about 87 ms of
// system CPU per ffmpeg (bench:run, 42 batches of stills: 3.6 s). The helper is forked once; its own
// forks copy a few MB.
//
// The helper is a few lines of plain Node given with -e, so it runs the same from src/, dist/ and
// the bundle. It ends when its channel closes, so a run killed with SIGKILL leaves no ffmpeg behind:
// the helper kills what it started and exits.
import { type ChildProcess, spawn } from "node:child_process";
import type { Launch, ProcessEvents } from "./ffmpeg-run.js";

const HELPER = `"use strict";
const { spawn } = require("node:child_process");
const { setPriority } = require("node:os");
const children = new Map();
// With a callback, a send on a closed channel is that callback's error, not a crash.
const send = (m) => { try { process.send(m, undefined, {}, () => {}); } catch {} };
const end = () => process.exit(0);
process.on("message", (m) => {
  if (m.kill) { children.get(m.id)?.kill(m.kill); return; }
  let child;
  try {
    child = spawn(m.binary, m.args, { stdio: ["ignore", m.stdout ? "pipe" : "ignore", "pipe"] });
  } catch (e) {
    send({ id: m.id, error: { code: e.code, message: e.message } });
    send({ id: m.id, close: [null, null] });
    return;
  }
  children.set(m.id, child);
  send({ id: m.id, pid: child.pid });
  if (m.nice && child.pid !== undefined) { try { setPriority(child.pid, m.nice); } catch {} }
  child.stderr.setEncoding("utf8").on("data", (s) => send({ id: m.id, stderr: s }));
  child.stdout?.on("data", (b) => send({ id: m.id, stdout: b.toString("base64") }));
  child.once("error", (e) => send({ id: m.id, error: { code: e.code, message: e.message } }));
  child.once("close", (code, signal) => { children.delete(m.id); send({ id: m.id, close: [code, signal] }); });
});
process.on("disconnect", end);
// However this process ends, what it started ends with it.
process.on("exit", () => { for (const c of children.values()) c.kill("SIGKILL"); });
// Its parent gone without a disconnect being seen: it is another's child now.
const parent = process.ppid;
setInterval(() => { if (process.ppid !== parent) end(); }, 500).unref();
`;

/** What the helper says of one process. */
interface Said {
  id: number;
  /** The process's pid, once started: for killing it directly if the helper itself dies. */
  pid?: number;
  stdout?: string;
  stderr?: string;
  error?: { code?: string; message: string };
  close?: [number | null, NodeJS.Signals | null];
}

/** Variables the helper (and so ffmpeg) does not need: the key, and Node options meant for the run. */
const NOT_PASSED = ["CLAPPER_API_KEY", "NODE_OPTIONS"];

export class Spawner {
  private helper: ChildProcess | undefined;
  private next = 0;
  /** Processes started and not yet closed, by id: each hears its close exactly once. */
  private readonly running = new Map<number, ProcessEvents>();
  private readonly pids = new Map<number, number>();

  /** Starts a process through the helper, which is started on first use. */
  readonly launch: Launch = (binary, args, o, on) => {
    const helper = this.helper ?? this.start();
    const id = ++this.next;
    let exited = false;
    this.running.set(id, {
      ...on,
      close: (code, signal) => {
        exited = true;
        this.running.delete(id);
        this.pids.delete(id);
        on.close(code, signal);
      },
    });
    helper.send({ id, binary, args, stdout: o.stdout, nice: o.nice ?? 0 }, (error) => {
      if (error) this.lost(id, error);
    });
    return {
      kill: (signal) => {
        if (exited) return;
        if (this.helper?.connected) this.helper.send({ id, kill: signal }, () => {});
        else this.killDirectly(id, signal);
      },
      exited: () => exited,
    };
  };

  /** Ends the helper; what it still runs is killed (callers wait for their processes first). */
  close(): void {
    const helper = this.helper;
    this.helper = undefined;
    if (helper?.connected) helper.disconnect();
  }

  private start(): ChildProcess {
    const env = { ...process.env };
    for (const name of NOT_PASSED) delete env[name];
    const helper = spawn(process.execPath, ["-e", HELPER], {
      stdio: ["ignore", "ignore", "ignore", "ipc"],
      env,
      windowsHide: true,
    });
    // The helper must not keep a finished run alive; a process under way keeps it by its timeout.
    helper.unref();
    helper.channel?.unref();
    helper.on("message", (m: Said) => this.heard(m));
    // A helper that could not start, or ended: what it was running can no longer be told about.
    // Its processes are killed from here (a helper killed by SIGKILL could not), and fail.
    const gone = (why: string) => {
      if (this.helper === helper) this.helper = undefined;
      for (const id of [...this.running.keys()]) {
        this.killDirectly(id, "SIGKILL");
        this.lost(id, new Error(`the process that starts ffmpeg ${why}`));
      }
    };
    helper.on("error", (error) => gone(`failed: ${error.message}`));
    helper.once("exit", (code, signal) => gone(`ended (${signal ?? `code ${code}`})`));
    this.helper = helper;
    return helper;
  }

  private killDirectly(id: number, signal: NodeJS.Signals): void {
    const pid = this.pids.get(id);
    if (pid === undefined) return;
    try {
      process.kill(pid, signal);
    } catch {
      // Already gone.
    }
  }

  private heard(m: Said): void {
    const on = this.running.get(m.id);
    if (!on) return;
    if (m.pid !== undefined) this.pids.set(m.id, m.pid);
    if (m.stdout !== undefined) on.stdout(Buffer.from(m.stdout, "base64"));
    if (m.stderr !== undefined) on.stderr(m.stderr);
    if (m.error) on.error(Object.assign(new Error(m.error.message), { code: m.error.code }));
    if (m.close) on.close(m.close[0], m.close[1]);
  }

  /** A process the helper can no longer tell about: failed, and closed. */
  private lost(id: number, error: Error): void {
    const on = this.running.get(id);
    if (!on) return;
    on.stderr(`${error.message}\n`);
    on.close(null, null);
  }
}

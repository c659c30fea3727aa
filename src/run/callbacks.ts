// Receives the video service's status callbacks during a run. Each run makes a random token and
// sends it as callback_token; a push without it is refused. Duplicates (the spec warns of them)
// are dropped by (task id, status, updated_at). Polling stays on as a slow safety net.
import { randomBytes, timingSafeEqual } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { type VideoTask, VideoTaskResponse } from "../api/video.js";

export interface CallbackListenerOptions {
  /** Address to listen on; port 0 picks a free one. */
  host: string;
  port: number;
  onTask: (task: VideoTask) => void;
  /** Largest body accepted (a task object is small). */
  maxBodyBytes?: number;
}

export interface CallbackStats {
  received: number;
  accepted: number;
  duplicates: number;
  refused: number;
}

export class CallbackListener {
  readonly token = randomBytes(24).toString("hex");
  readonly stats: CallbackStats = { received: 0, accepted: 0, duplicates: 0, refused: 0 };
  private readonly seen = new Set<string>();
  private server: Server | undefined;

  constructor(private readonly options: CallbackListenerOptions) {}

  private tokenOk(header: string | string[] | undefined): boolean {
    const given = Buffer.from(Array.isArray(header) ? (header[0] ?? "") : (header ?? ""));
    const expected = Buffer.from(this.token);
    return given.length === expected.length && timingSafeEqual(given, expected);
  }

  async start(): Promise<{ port: number }> {
    const limit = this.options.maxBodyBytes ?? 256 * 1024;
    this.server = createServer((req, res) => {
      this.stats.received += 1;
      if (req.method !== "POST" || !this.tokenOk(req.headers["x-callback-token"])) {
        this.stats.refused += 1;
        req.resume();
        res.writeHead(req.method === "POST" ? 401 : 405).end();
        return;
      }
      const chunks: Buffer[] = [];
      let size = 0;
      req.on("data", (chunk: Buffer) => {
        size += chunk.length;
        if (size > limit) {
          this.stats.refused += 1;
          res.writeHead(413).end();
          req.destroy();
          return;
        }
        chunks.push(chunk);
      });
      req.on("end", () => {
        if (res.writableEnded) return;
        let body: unknown;
        try {
          body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
        } catch {
          this.stats.refused += 1;
          res.writeHead(400).end();
          return;
        }
        const parsed = VideoTaskResponse.safeParse(body);
        if (!parsed.success) {
          this.stats.refused += 1;
          res.writeHead(400).end();
          return;
        }
        // Answer first: the service waits at most 10 s and retries on anything else.
        res.writeHead(204).end();
        const task = parsed.data.task;
        const key = `${task.id}\n${task.status}\n${task.updated_at}`;
        if (this.seen.has(key)) {
          this.stats.duplicates += 1;
          return;
        }
        this.seen.add(key);
        this.stats.accepted += 1;
        this.options.onTask(task);
      });
    });
    await new Promise<void>((resolve, reject) => {
      this.server?.once("error", reject);
      this.server?.listen(this.options.port, this.options.host, () => resolve());
    });
    return { port: (this.server.address() as AddressInfo).port };
  }

  async close(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    if (!server) return;
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  }
}

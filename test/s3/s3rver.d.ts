// s3rver 3 ships no types: the part of its API the S3 suites use. It is a Koa application, so its
// middleware list and HTTP server are reachable (the suites record requests and cut connections).
declare module "s3rver" {
  import type { Server } from "node:http";

  interface S3rverOptions {
    address?: string;
    port?: number;
    silent?: boolean;
    directory?: string;
    resetOnClose?: boolean;
    allowMismatchedSignatures?: boolean;
    vhostBuckets?: boolean;
    configureBuckets?: Array<{ name: string; configs?: Array<string | Buffer> }>;
  }

  interface KoaContext {
    method: string;
    path: string;
    querystring: string;
    /** The parsed query string. */
    query: Record<string, string | string[] | undefined>;
    status: number;
    /** What the answer is: set by a middleware that answers in s3rver's place. */
    type: string;
    body: unknown;
    headers: Record<string, string | string[] | undefined>;
  }

  type Middleware = (ctx: KoaContext, next: () => Promise<void>) => Promise<void>;

  export default class S3rver {
    constructor(options?: S3rverOptions);
    run(): Promise<{ address: string; port: number; family: string }>;
    close(): Promise<void>;
    /** Koa's middleware stack, composed when the server starts listening. */
    middleware: Middleware[];
    httpServer?: Server;
  }
}

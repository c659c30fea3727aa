// How the media URLs answer: a file whole or by byte range, a padded video streamed without memory,
// and the 403 and 404 bodies.
import { sendJson } from "../http.js";
import type { Ctx } from "./route.js";

export function denied(c: Ctx, message: string): undefined {
  sendJson(c.res, 403, { type: "error", error: { type: "permission_error", message, http_code: "403" } });
  return undefined;
}

export function missing(c: Ctx): undefined {
  sendJson(c.res, 404, {
    type: "error",
    error: { type: "not_found_error", message: "no such file", http_code: "404" },
  });
  return undefined;
}

/** Serves a whole file or one byte range of it, so interrupted downloads can resume. */
export function sendMedia(c: Ctx, data: Buffer, contentType: string): undefined {
  const range = c.req.headers.range?.match(/^bytes=(\d*)-(\d*)$/);
  if (range && (range[1] || range[2])) {
    const size = data.length;
    let start = range[1] ? Number(range[1]) : size - Number(range[2]);
    let end = range[1] && range[2] ? Number(range[2]) : size - 1;
    start = Math.max(0, start);
    end = Math.min(size - 1, end);
    if (start > end || start >= size) {
      c.res.writeHead(416, { "content-range": `bytes */${size}` });
      c.res.end();
      return undefined;
    }
    c.res.writeHead(206, {
      "content-type": contentType,
      "content-length": end - start + 1,
      "content-range": `bytes ${start}-${end}/${size}`,
      "accept-ranges": "bytes",
    });
    c.res.end(c.req.method === "HEAD" ? undefined : data.subarray(start, end + 1));
    return undefined;
  }
  c.res.writeHead(200, {
    "content-type": contentType,
    "content-length": data.length,
    "accept-ranges": "bytes",
  });
  c.res.end(data);
  return undefined;
}

/**
 * A video followed by a `free` box of `pad` bytes (a valid MP4 still), streamed from one reused
 * zero-filled chunk with backpressure: gigabytes cost the sandbox no memory.
 */
export function sendPadded(c: Ctx, mp4: Buffer, pad: number): undefined {
  const size = mp4.length + pad;
  c.res.writeHead(200, { "content-type": "video/mp4", "content-length": size });
  if (c.req.method === "HEAD") {
    c.res.end();
    return undefined;
  }
  const header = Buffer.alloc(8);
  const big = pad > 0xffffffff;
  header.writeUInt32BE(big ? 1 : pad, 0);
  header.write("free", 4, "latin1");
  c.res.write(mp4);
  c.res.write(header);
  let left = pad - 8;
  if (big) {
    const large = Buffer.alloc(8);
    large.writeBigUInt64BE(BigInt(pad), 0);
    c.res.write(large);
    left -= 8;
  }
  const zeros = Buffer.alloc(Math.min(1024 * 1024, Math.max(0, left)));
  const pump = () => {
    while (left > 0) {
      const chunk = left >= zeros.length ? zeros : zeros.subarray(0, left);
      left -= chunk.length;
      if (!c.res.write(chunk)) {
        c.res.once("drain", pump);
        return;
      }
    }
    c.res.end();
  };
  c.res.on("close", () => {
    left = 0;
  });
  pump();
  return undefined;
}

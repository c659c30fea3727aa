// Duration from an ISO BMFF movie header (`moov/mvhd`). music-metadata reports durations of MP4
// files only when they carry audio; generated and reference videos are often silent.
import { open } from "node:fs/promises";

function mvhdSeconds(data: Buffer): number | undefined {
  if (data.length < 20) return undefined;
  const version = data[0];
  if (version === 1) {
    if (data.length < 32) return undefined;
    const timescale = data.readUInt32BE(20);
    const duration = Number(data.readBigUInt64BE(24));
    return timescale > 0 ? duration / timescale : undefined;
  }
  const timescale = data.readUInt32BE(12);
  const duration = data.readUInt32BE(16);
  return timescale > 0 ? duration / timescale : undefined;
}

/** The payload range of the first box of `type` among the boxes in [from, to). */
function findBox(
  data: Buffer,
  from: number,
  to: number,
  type: string,
): { start: number; end: number } | undefined {
  let at = from;
  while (at + 8 <= to) {
    let size = data.readUInt32BE(at);
    let header = 8;
    if (size === 1 && at + 16 <= to) {
      size = Number(data.readBigUInt64BE(at + 8));
      header = 16;
    } else if (size === 0) {
      size = to - at;
    }
    if (size < header || at + size > to) return undefined;
    if (data.toString("latin1", at + 4, at + 8) === type) return { start: at + header, end: at + size };
    at += size;
  }
  return undefined;
}

export function mp4Seconds(data: Buffer): number | undefined {
  const moov = findBox(data, 0, data.length, "moov");
  if (!moov) return undefined;
  const mvhd = findBox(data, moov.start, moov.end, "mvhd");
  return mvhd ? mvhdSeconds(data.subarray(mvhd.start, mvhd.end)) : undefined;
}

/** Reads only the box headers and the moov box, so a 1 GiB file costs a few small reads. */
export async function mp4FileSeconds(path: string): Promise<number | undefined> {
  const file = await open(path, "r");
  try {
    const { size } = await file.stat();
    const head = Buffer.alloc(16);
    let at = 0;
    while (at + 8 <= size) {
      await file.read(head, 0, 16, at);
      let box = head.readUInt32BE(0);
      const type = head.toString("latin1", 4, 8);
      if (box === 1) box = Number(head.readBigUInt64BE(8));
      else if (box === 0) box = size - at;
      if (box < 8) return undefined;
      if (type === "moov") {
        if (box > 64 * 1024 * 1024) return undefined;
        const moov = Buffer.alloc(box);
        await file.read(moov, 0, box, at);
        return mp4Seconds(moov);
      }
      at += box;
    }
    return undefined;
  } finally {
    await file.close();
  }
}

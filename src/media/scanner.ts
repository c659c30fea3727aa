// What a container scanner gives the stream check, and the four-character header ids both read.

/** Reads one container as its bytes stream past; throws a MediaCheckError at the first defect. */
export interface Scanner {
  push(chunk: Buffer): void;
  /** Called once with the total received; returns the duration in seconds. */
  finish(total: number): number;
}

export const printable = (buf: Buffer, at: number): boolean => {
  for (let i = at; i < at + 4; i++) {
    const c = buf[i] ?? 0;
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
};

/** A box type or chunk id as a refusal quotes it: in quotes when printable, else in hex. */
export const showType = (buf: Buffer, at: number): string =>
  printable(buf, at)
    ? `'${buf.toString("latin1", at, at + 4)}'`
    : `${buf
        .subarray(at, at + 4)
        .toString("hex")
        .replace(/(..)(?!$)/g, "$1 ")} (hex)`;

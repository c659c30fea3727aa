// Duration from a RIFF/WAVE header: the data chunk's declared size over the fmt chunk's byte rate.
// Needs only the first bytes of the file, so a result can be checked while it streams elsewhere.

export function wavSeconds(head: Buffer): number | undefined {
  if (
    head.length < 12 ||
    head.toString("latin1", 0, 4) !== "RIFF" ||
    head.toString("latin1", 8, 12) !== "WAVE"
  ) {
    return undefined;
  }
  let byteRate: number | undefined;
  let at = 12;
  while (at + 8 <= head.length) {
    const id = head.toString("latin1", at, at + 4);
    const size = head.readUInt32LE(at + 4);
    if (id === "fmt " && at + 20 <= head.length) byteRate = head.readUInt32LE(at + 16);
    if (id === "data") return byteRate ? size / byteRate : undefined;
    // Chunks are padded to an even size.
    at += 8 + size + (size % 2);
  }
  return undefined;
}

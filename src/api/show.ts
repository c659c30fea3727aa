// A value as a message quotes it, in a module of its own: the URL checks use it, and the command
// line loads them (--callback-url) without the schemas and zod.

/** Renders a received value for a message: strings quoted, long values cut. */
export function show(value: unknown): string {
  if (value === undefined) return "nothing";
  let text: string;
  try {
    text = typeof value === "string" ? JSON.stringify(value) : (JSON.stringify(value) ?? String(value));
  } catch {
    text = String(value);
  }
  return text.length > 60 ? `${text.slice(0, 57)}...` : text;
}

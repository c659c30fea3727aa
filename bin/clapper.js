#!/usr/bin/env node
// The compiled CLI lives in dist/ (built by `npm install` through the prepare script).

// Installed before main() and kept to the end: a stop signal that comes after the work is over
// (while the process winds down: sockets closing, logs flushing) exits at once with the run's own
// code, instead of killing the process by the signal and losing the code scripts rely on. While
// main() runs, its own handlers decide (the first signal stops gracefully, a second exits 4).
let over = false;
const late = () => {
  if (over) process.exit(process.exitCode ?? 0);
};
process.on("SIGINT", late);
process.on("SIGTERM", late);

/**
 * main() classifies every error itself (exit 70 for a bug, with the place to report it); this is
 * the last net for what escapes it, or for a build that cannot be loaded: still 70, never 1.
 */
function internal(error) {
  const message = error instanceof Error ? error.message : String(error);
  const argv = process.argv.slice(2);
  const at = argv.findIndex((a) => a === "--log-level" || a.startsWith("--log-level="));
  const level =
    at < 0 ? process.env.CLAPPER_LOG_LEVEL : argv[at].includes("=") ? argv[at].split("=")[1] : argv[at + 1];
  const debug = level === "debug" || level === "trace";
  process.stderr.write(
    `clapper: internal error (a bug in clapper): ${message}; please report it to the clapper repository's issues\n`,
  );
  if (debug && error instanceof Error && error.stack) process.stderr.write(`${error.stack}\n`);
  const json = process.argv.includes("--json");
  if (json)
    process.stdout.write(
      `${JSON.stringify({ error: { code: 70, message: `internal error: ${message}` } })}\n`,
    );
  process.exitCode = 70;
  over = true;
}

import("../dist/cli/main.js").then(
  ({ main }) =>
    main(process.argv.slice(2)).then((code) => {
      process.exitCode = code;
      over = true;
    }, internal),
  (error) =>
    internal(
      new Error(`cannot load the compiled CLI (dist/): ${error?.message ?? error}; run npm run build`),
    ),
);

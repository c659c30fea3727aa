#!/usr/bin/env node
// The compiled CLI lives in dist/ (built by `npm install` through the prepare script): its bundle
// with V8's code cache when they are there and current, else its ES modules (bin/load.js).

// CLAPPER_TRACE_START=1: the moments of a command's start on stderr, as src/trace.ts writes them (the
// first names the process's time origin, so that a bench can place them after its spawn).
const traceStart = ["1", "true", "yes", "on"].includes(
  (process.env.CLAPPER_TRACE_START ?? "").trim().toLowerCase(),
)
  ? (step) => process.stderr.write(`clapper start: ${performance.now().toFixed(1)} ms ${step}\n`)
  : () => {};
traceStart(`bin/clapper.js evaluated (time origin ${performance.timeOrigin})`);

// Installed before main() and kept to the end: a stop signal that comes after the work is over
// (while the process winds down: sockets closing, logs flushing) exits at once with the run's own
// code, instead of killing the process by the signal and losing the code scripts rely on. While
// main() runs, its own handlers decide (the first signal stops gracefully, a second exits 4).
// A signal that comes before main() listens (while the CLI loads) is kept, and main() starts stopped:
// a `docker stop` in the first moments must not be lost while the run goes on to spend.
let over = false;
let handedOver = false;
const early = new AbortController();
const late = (name) => {
  if (over) process.exit(process.exitCode ?? 0);
  if (!handedOver) early.abort(new Error(`received ${name}`));
};
process.on("SIGINT", late);
process.on("SIGTERM", late);

// A reader of stderr that went away (`2>&1 | head -1`, a log shipper that died) must not crash the
// run with EPIPE: its work and its state matter more than the lines nobody reads.
process.stderr.on("error", () => {});
process.stdout.on("error", () => {});

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
  const env = (process.env.CLAPPER_JSON ?? "").trim().toLowerCase();
  const json = process.argv.includes("--json") || ["1", "true", "yes", "on"].includes(env);
  if (json)
    process.stdout.write(
      `${JSON.stringify({ error: { code: 70, message: `internal error: ${message}` } })}\n`,
    );
  process.exitCode = 70;
  over = true;
}

// What escapes every await (a bug in a callback or a timer) is still exit 70, never Node's 1.
let crashed = false;
const crash = (error) => {
  if (crashed) return;
  crashed = true;
  internal(error);
  process.exit(70);
};
process.on("uncaughtException", crash);
process.on("unhandledRejection", crash);

import("./load.js")
  .then(({ loadCli }) => loadCli())
  .then(
    ({ main }) => {
      traceStart("CLI loaded (bin/load.js)");
      // From here main() listens itself (it installs its handlers before its first await).
      handedOver = true;
      // Invariant: a command ends with its answer and its exit code. Node leaves when nothing is
      // left to wait for, even while main() waits on a promise nothing will settle (a bug): that
      // is exit 70 with a message, never a silent 0 with no report.
      const stalled = () => {
        if (over) return;
        internal(new Error("the command stopped with nothing left to wait for before it had finished"));
        process.exit(70);
      };
      process.on("beforeExit", stalled);
      return main(process.argv.slice(2), { earlySignal: early.signal }).then(
        (code) => leave(code),
        (error) => {
          internal(error);
          leave(70);
        },
      );
    },
    (error) => {
      internal(
        new Error(`cannot load the compiled CLI (dist/): ${error?.message ?? error}; run npm run build`),
      );
      leave(70);
    },
  );

/**
 * Everything is done (main() awaited its work, its state and its writes; stdout and stderr are
 * synchronous on pipes and files): leave now. A natural exit closes Node's signal watchers one by
 * one while it tears down, for 5 to 20 ms, and a SIGTERM in that window killed the process by the
 * signal, losing the exit code a script or `docker stop` relies on.
 */
function leave(code) {
  process.exitCode = code;
  over = true;
  // Pipes are asynchronous on some systems (macOS): the last lines go out first (an empty write
  // calls back once what was queued before it is flushed), for at most 5 s.
  let pending = 2;
  const done = () => {
    if (--pending === 0) process.exit(code);
  };
  setTimeout(() => process.exit(code), 5000);
  process.stdout.write("", done);
  process.stderr.write("", done);
}

#!/usr/bin/env node
// The compiled CLI lives in dist/ (built by `npm install` through the prepare script).
import { main } from "../dist/cli/main.js";

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

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
    over = true;
  },
  (error) => {
    console.error(error instanceof Error ? error.message : String(error));
    process.exitCode = 1;
    over = true;
  },
);

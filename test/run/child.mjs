// Child processes for the crash tests, killed with SIGKILL by the parent at a moment of its choice.
//   node child.mjs journal PATH   appends numbered records as fast as it can, some durable, with
//                                 frequent compactions; prints "durable N" once record N is on disk
//   node child.mjs sink ROOT KEY  streams an endless body into the local sink; prints "writing"
//                                 once the temporary file is on disk
import { readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { Readable } from "node:stream";
import { LocalSink } from "../../dist/sinks/local.js";
import { Journal } from "../../dist/state/journal.js";

const [mode, path, key] = process.argv.slice(2);

if (mode === "journal") {
  // State: the last number seen and how many records came out of order (duplicates or gaps).
  const journal = await Journal.open({
    path,
    initial: () => ({ last: 0, bad: 0 }),
    apply: (state, record) => {
      if (record.i !== state.last + 1) state.bad += 1;
      state.last = record.i;
    },
    compactEvery: 40,
  });
  let i = journal.state.last;
  let last = Promise.resolve();
  for (;;) {
    // Appends are not awaited one by one (the runner's jobs append concurrently), so appends keep
    // arriving while earlier writes and compactions are still queued; every 7th is durable.
    i += 1;
    const n = i;
    const durable = n % 7 === 0;
    const done = journal.append({ t: "n", i: n, pad: "x".repeat((n * 37) % 300) }, { durable });
    last = durable ? done.then(() => void process.stdout.write(`durable ${n}\n`)) : done;
    if (n % 100 === 0) await last;
    else await new Promise((resolve) => setImmediate(resolve));
  }
} else if (mode === "sink") {
  const sink = new LocalSink(path);
  const chunk = Buffer.alloc(64 * 1024, 7);
  let announced = false;
  const body = new Readable({
    read() {
      setTimeout(() => {
        this.push(chunk);
        if (!announced) {
          const dir = dirname(join(path, key));
          if (readdirSync(dir).some((name) => name.endsWith(".partial"))) {
            announced = true;
            process.stdout.write("writing\n");
          }
        }
      }, 2);
    },
  });
  await sink.write(key, body);
} else {
  process.stderr.write(`unknown mode ${mode}\n`);
  process.exit(2);
}

// Preloaded (node --import) into a runner the version tests kill: it kills its own process with
// SIGKILL at one exact moment of a result's replacement, which a signal sent from outside on a log
// line can only land near. VERSIONS_KILL_AT=before-link:n02.v1.wav dies just before the link that
// keeps the old file under that name; after-link, before-rename and after-rename likewise (the
// name is the target's last part); term-before-link sends SIGTERM there instead. The runner reaches these through node:fs/promises, patched here.
import fsp from "node:fs/promises";
import { syncBuiltinESMExports } from "node:module";

const [when, name] = (process.env.VERSIONS_KILL_AT ?? "").split(":");

if (when && name) {
  const die = () => {
    process.kill(process.pid, "SIGKILL");
    // Nothing more of this thread runs while the signal lands.
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 10_000);
  };
  const wrap = (fn, op) =>
    async function patched(...args) {
      const hit = String(args[1]).endsWith(`/${name}`);
      if (hit && when === `before-${op}`) die();
      // A stop asked for at that moment: the runner goes on to its graceful end.
      if (hit && when === `term-before-${op}`) process.kill(process.pid, "SIGTERM");
      const result = await fn.apply(this, args);
      if (hit && when === `after-${op}`) die();
      return result;
    };
  fsp.link = wrap(fsp.link, "link");
  fsp.rename = wrap(fsp.rename, "rename");
  syncBuiltinESMExports();
}

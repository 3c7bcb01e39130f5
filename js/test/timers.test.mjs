// The default timers of all calls share one setTimeout: it keeps the process alive exactly while
// some call waits on it (a backoff, an attempt's timeout), not after the calls are over.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { test } from "node:test";

const entry = new URL("../dist/esm/entry.esm.js", import.meta.url).href;

/** Runs `body` as an ES module in a child Node; its exit code and output. Killed (with its
 * process group gone with it) after `limit` ms, which the test then reports. */
function child(body, limit) {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, ["--input-type=module", "-e", `import { reliable } from ${JSON.stringify(entry)};\n${body}`], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    let out = "";
    p.stdout.on("data", (d) => (out += d));
    const kill = setTimeout(() => p.kill("SIGKILL"), limit);
    p.on("error", reject);
    p.on("exit", (code, signal) => {
      clearTimeout(kill);
      resolve({ code, signal, out });
    });
  });
}

test("calls that end before their 60 s timeout leave no timer holding the process", async () => {
  const r = await child(
    `const f = reliable(async (x) => x + 1, { timeout: 60_000 });
     let sum = 0;
     for (let i = 0; i < 1000; i++) sum += await f(i);
     console.log(sum);`,
    20_000,
  );
  // Killed at 20 s (a timer of 60 s held it): signal SIGKILL, no exit code.
  assert.equal(r.signal, null, "the process was still alive after its calls ended");
  assert.equal(r.code, 0);
  assert.equal(r.out.trim(), String(500_500));
});

test("a backoff on the default timer keeps the process alive until the retry", async () => {
  const r = await child(
    `let n = 0;
     const f = reliable(async () => { if (++n < 3) throw new Error("not yet"); return "done after " + n; }, { baseDelay: 50, jitter: 0, timeout: 60_000 });
     console.log(await f());`,
    20_000,
  );
  // Exited with the call unsettled (an ES module's top-level await left pending: code 13) if the
  // wait did not hold the process.
  assert.equal(r.code, 0);
  assert.equal(r.out.trim(), "done after 3");
});

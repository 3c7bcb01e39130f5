// The TypeScript face of the conformance suite: the package's own sequences (js/conformance) and,
// when the repository has them, the suite's shared ones (conformance/sequences).
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { trace } from "../conformance/run.mjs";

const runner = fileURLToPath(new URL("../conformance/run.mjs", import.meta.url));
const shared = fileURLToPath(new URL("../../conformance/sequences", import.meta.url));

test("the package's sequences give their expected traces, byte for byte", () => {
  const out = execFileSync(process.execPath, [runner], { encoding: "utf8" });
  assert.match(out, /2 sequences run, 2 same, 0 different/);
});

test("a trace that differs fails the runner and names the first differing line", async () => {
  const seq = JSON.parse(readFileSync(new URL("../conformance/sequences/503-retry-after-honoured.json", import.meta.url)));
  seq.calls[0].answers[0].headers["retry-after"] = "3";
  const lines = await trace(seq);
  assert.equal(lines[2], '{"t":10,"call":0,"ev":"retry","delay_ms":3000}');
});

// In the repository the shared suite is there and must pass; only a copy of the package on its own
// (an unpacked tarball, which has no tests anyway) lacks it, and then this says so by name.
test("the suite's shared sequences give their expected traces, byte for byte", { skip: !existsSync(shared) && "no conformance/sequences beside this package" }, () => {
  const run = spawnSync(process.execPath, [runner, shared], { encoding: "utf8" });
  const out = run.stdout;
  process.stdout.write(out + run.stderr);
  assert.equal(run.status, 0, "the runner failed: see its output above");
  const summary = out.match(/(\d+) sequences run, (\d+) same, (\d+) different, (\d+) pending/);
  assert.ok(summary, "the runner printed no summary");
  const [, ran, same, different, pending] = summary.map(Number);
  // Every sequence of the suite runs: none is skipped, whatever its policy holds.
  const files = readdirSync(shared).filter((f) => f.endsWith(".json"));
  assert.equal(ran, files.length);
  assert.equal(pending, 0);
  assert.equal(different, 0);
  // A pending sequence (conformance/pending.json) is one this face still decides with its own
  // loop, not the core's engine: the runner has checked that it still differs.
  assert.equal(same + pending, ran);
});

// Every nesting the policy format accepts for a small set of layers (conformance/generated): the
// sequence's `nesting` becomes the stack's order of layers, and the trace is the engine's.
const generated = fileURLToPath(new URL("../../conformance/generated", import.meta.url));
test("the suite's generated nestings give their expected traces, byte for byte", { skip: !existsSync(generated) && "no conformance/generated beside this package" }, () => {
  const run = spawnSync(process.execPath, [runner, generated, generated], { encoding: "utf8" });
  const out = run.stdout;
  process.stdout.write(out + run.stderr);
  assert.equal(run.status, 0, "the runner failed: see its output above");
  const summary = out.match(/(\d+) sequences run, (\d+) same, (\d+) different, (\d+) pending/);
  assert.ok(summary, "the runner printed no summary");
  const [, ran, same, different, pending] = summary.map(Number);
  const files = readdirSync(generated).filter((f) => f.endsWith(".json"));
  assert.ok(files.length > 0);
  assert.deepEqual({ ran, same, different, pending }, { ran: files.length, same: files.length, different: 0, pending: 0 });
});

// The chaos sequences (conformance/chaos): scripts whose answers the package's chaos layer
// injects, decided by the core in the module; a negative control with other seeds must fail.
const chaosDir = fileURLToPath(new URL("../../conformance/chaos", import.meta.url));
test("the suite's chaos sequences give their expected traces, and not with another seed", { skip: !existsSync(chaosDir) && "no conformance/chaos beside this package" }, async () => {
  const run = spawnSync(process.execPath, [runner, chaosDir, chaosDir], { encoding: "utf8" });
  process.stdout.write(run.stdout + run.stderr);
  assert.equal(run.status, 0, "the runner failed: see its output above");
  const files = readdirSync(chaosDir).filter((f) => f.endsWith(".json"));
  assert.ok(files.length >= 4);
  assert.match(run.stdout, new RegExp(`${files.length} sequences run, ${files.length} same, 0 different`));
  let seeded = 0;
  for (const f of files) {
    const seq = JSON.parse(readFileSync(`${chaosDir}/${f}`, "utf8"));
    const want = readFileSync(`${chaosDir}/${f.replace(/\.json$/, ".jsonl")}`, "utf8");
    const blocks = Object.values(seq.policy.chaos);
    if (!blocks.some((b) => b.rate > 0 && b.rate < 1)) continue;
    seeded++;
    for (const b of blocks) b.seed += 1;
    let got;
    try {
      got = (await trace(seq)).map((l) => l + "\n").join("");
    } catch {
      got = undefined; // ran out of script: a difference too
    }
    assert.notEqual(got, want, `${seq.name} passes with another seed`);
  }
  assert.ok(seeded >= 1);
});

// The page's simulator against `sim run`: every shipped scenario the page accepts runs in the
// built module (dist/sim.wasm, in Node: the same bytes the browser loads) and in the native `sim`
// binary, and the two `summary.json` must be byte-identical. Scenarios the page refuses (over its
// limits, sweeps, maps, files of several) are listed with the reason. Then the page's own limits:
// a scenario over them is refused naming the limit, though `sim check` accepts it.
// (browser-test.mjs checks the default storm's table and plots, and a bad value's position.)
//   node scripts/determinism.mjs [SIM_BINARY]   (default: ../target/release/sim)
import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { instantiate } from "../web/engine.js";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const repo = join(root, "..");
const simBin = resolve(process.argv[2] ?? join(repo, "target", "release", "sim"));
const engine = await instantiate(readFileSync(join(root, "dist", "sim.wasm")));

function findSummary(dir) {
  for (const e of readdirSync(dir)) {
    const p = join(dir, e);
    if (statSync(p).isDirectory()) {
      const found = findSummary(p);
      if (found) return found;
    } else if (e === "summary.json") return p;
  }
  return null;
}

const tmp = mkdtempSync(join(tmpdir(), "playground-determinism-"));
let compared = 0;
let failed = 0;
try {
  for (const file of readdirSync(join(repo, "scenarios")).filter((f) => f.endsWith(".ron")).sort()) {
    const path = join(repo, "scenarios", file);
    const info = engine.check(readFileSync(path, "utf8"));
    if (!info.ok) {
      console.log(`${file}: not in the page: ${info.message.split("\n")[0]}`);
      continue;
    }
    const t0 = performance.now();
    while (engine.runNext()) {}
    const page = engine.report().summary_json;
    const ms = performance.now() - t0;
    const out = join(tmp, file);
    execFileSync(simBin, ["run", path, "--out", out], { stdio: ["ignore", "ignore", "inherit"] });
    const native = readFileSync(findSummary(out), "utf8");
    compared++;
    if (page === native) {
      console.log(`${file}: summary.json identical (${page.length} bytes; ${info.runs} runs, ${(ms / 1000).toFixed(1)} s in wasm)`);
    } else {
      failed++;
      const at = [...page].findIndex((c, i) => c !== native[i]);
      console.log(`${file}: summary.json DIFFERS from sim run's at byte ${at}: ${JSON.stringify(page.slice(at, at + 60))} vs ${JSON.stringify(native.slice(at, at + 60))}`);
    }
  }

  // The page's limits, on the default scenario made too long, and given too many seeds.
  const base = readFileSync(join(repo, "scenarios", "default.ron"), "utf8");
  const edits = [
    ['horizon: "120s"', 'horizon: "4000s"', "playground's limit"],
    ["seed: 1,", "seed: 1,\n    seeds: 21,", "the playground accepts (20)"],
  ];
  for (const [from, to, named] of edits) {
    if (!base.includes(from)) throw new Error(`scenarios/default.ron no longer holds ${from}`);
    const text = base.replace(from, to);
    const info = engine.check(text);
    const file = join(tmp, "over-the-limit.ron");
    writeFileSync(file, text);
    let native = "accepted";
    try {
      execFileSync(simBin, ["check", file], { stdio: ["ignore", "ignore", "pipe"] });
    } catch (e) {
      native = `refused: ${String(e.stderr).split("\n")[0]}`;
    }
    if (!info.ok && info.message.includes(named) && native === "accepted") {
      console.log(`${to.replace("\n    ", " ")}: refused by the page naming "${named}"; sim check accepts it`);
    } else {
      failed++;
      console.log(`${to.replace("\n    ", " ")}: expected the page to refuse it naming "${named}" and sim check to accept it; page: ${info.ok ? "accepted" : info.message}; sim check: ${native}`);
    }
  }
} finally {
  rmSync(tmp, { recursive: true, force: true });
}
console.log(`${compared} scenarios compared, ${failed} checks failed`);
process.exit(failed === 0 && compared > 0 ? 0 : 1);

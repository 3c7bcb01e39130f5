// The page's simulator against `sim run`: every shipped scenario the page accepts runs in the
// built module (dist/sim.wasm, in Node: the same bytes the browser loads) and in the native `sim`
// binary, and the two `summary.json` must be byte-identical. Scenarios the page refuses (over its
// limits, sweeps, maps, files of several) are listed with the reason.
//   node scripts/determinism.mjs [SIM_BINARY]   (default: ../target/release/sim)
import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
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
} finally {
  rmSync(tmp, { recursive: true, force: true });
}
console.log(`${compared} scenarios compared, ${failed} different`);
process.exit(failed === 0 && compared > 0 ? 0 : 1);

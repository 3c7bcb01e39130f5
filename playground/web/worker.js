// The simulator off the main thread: loads sim.wasm once, then answers the page's messages.
// {check, text, seed} → {type: "checked", info}; {run, text, seed} → "progress" and "pair"
// messages as it goes, then {type: "done", report} or {type: "refused"/"error"}.
import { instantiate } from "./engine.js";

let progress = () => {};
const engine = fetch(new URL("./sim.wasm", import.meta.url))
  .then((r) => r.arrayBuffer())
  .then((b) => instantiate(b, (s) => progress(s)));

self.onmessage = async ({ data }) => {
  const e = await engine;
  const { id, text, seed } = data;
  try {
    const info = e.check(text, seed);
    if (data.kind === "check" || !info.ok) {
      self.postMessage({ id, type: info.ok ? "checked" : "refused", info });
      return;
    }
    const started = performance.now();
    let index = 0;
    progress = (s) => self.postMessage({ id, type: "progress", done: (index + s / info.horizon_s) / info.runs });
    for (let pair; (pair = e.runNext()); index++) {
      self.postMessage({ id, type: "pair", pair, done: (index + 1) / info.runs });
    }
    const report = e.report();
    self.postMessage({ id, type: "done", info, report, ms: performance.now() - started });
  } catch (err) {
    self.postMessage({ id, type: "error", message: String(err?.message ?? err) });
  }
};

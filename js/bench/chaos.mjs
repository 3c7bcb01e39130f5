// What chaos costs a call when it injects nothing: the same wrapped function with no chaos, with
// a Chaos whose every strategy is switched off (one comparison, no call into the module), and
// with a fault switched on at rate 0 (the core draws for every copy and hits none).
//   node bench/chaos.mjs [ROUNDS] [CALLS]
// Each round times CALLS sequential awaited calls per variant, variants interleaved; the table
// gives the median over ROUNDS rounds. Figures are for this machine and are asserted nowhere.
import { Chaos, reliable } from "../dist/esm/entry.esm.js";

const ROUNDS = Number(process.argv[2] ?? 15);
const CALLS = Number(process.argv[3] ?? 20_000);
const work = async (x) => x + 1;
const opts = { maxAttempts: 3, timeout: Infinity };
const variants = {
  "no chaos": reliable(work, opts),
  "chaos, every strategy off": reliable(work, {
    ...opts,
    chaos: new Chaos({ fault: { rate: 0.1, status: 503, enabled: false }, latency: { rate: 0.1, delay: 100, enabled: false } }),
  }),
  "chaos, fault on at rate 0": reliable(work, { ...opts, chaos: new Chaos({ fault: { rate: 0, status: 503 } }) }),
};
const times = Object.fromEntries(Object.keys(variants).map((k) => [k, []]));
for (let r = 0; r < ROUNDS; r++) {
  for (const [name, f] of Object.entries(variants)) {
    const start = performance.now();
    for (let i = 0; i < CALLS; i++) await f(i);
    times[name].push(((performance.now() - start) * 1e6) / CALLS);
  }
}
const median = (a) => [...a].sort((x, y) => x - y)[a.length >> 1];
const base = median(times["no chaos"]);
console.log(`node ${process.version}, ${CALLS} calls x ${ROUNDS} rounds, median per call:`);
for (const [name, t] of Object.entries(times)) {
  const m = median(t);
  console.log(`  ${name.padEnd(28)} ${m.toFixed(0).padStart(6)} ns  (${m - base >= 0 ? "+" : ""}${(m - base).toFixed(0)} ns)`);
}

// The chaos layer's own step, alone (whole calls above vary by more than it on a loaded machine).
for (const [name, c] of [
  ["every strategy off", new Chaos({ fault: { rate: 0.1, status: 503, enabled: false } })],
  ["fault on at rate 0", new Chaos({ fault: { rate: 0, status: 503 } })],
]) {
  let best = Infinity;
  for (let r = 0; r < ROUNDS; r++) {
    const start = performance.now();
    for (let i = 0; i < CALLS * 10; i++) c.decide();
    best = Math.min(best, ((performance.now() - start) * 1e6) / (CALLS * 10));
  }
  console.log(`  Chaos.decide(), ${name.padEnd(20)} ${best.toFixed(1).padStart(6)} ns`);
}

// The overhead of one successful wrapped call: this package, cockatiel 4.0 (wrap(retry,
// circuitBreaker)) and opossum 10, against a bare call of the same async function, in one run.
// Each round times CALLS sequential awaited calls per candidate, candidates interleaved so that
// machine noise falls on all of them alike; the table gives the median over ROUNDS rounds.
//   node bench/overhead.mjs [ROUNDS] [CALLS]
import {
  circuitBreaker,
  CountBreaker,
  ExponentialBackoff,
  handleAll,
  retry,
  wrap,
} from "cockatiel";
import Opossum from "opossum";
import { CircuitBreaker, reliable } from "../dist/esm/entry.esm.js";

const ROUNDS = Number(process.argv[2] ?? 21);
const CALLS = Number(process.argv[3] ?? 20_000);

const work = async (x) => x + 1;

// Comparable policies: a 50% failure-rate breaker over the last 20 calls, 30 s open, retries
// with exponential backoff (never taken: every call succeeds).
const ours = reliable((x) => work(x), {
  breaker: new CircuitBreaker({ failureRate: 0.5, window: 20, cooldown: 30_000, probe: 3 }),
  maxAttempts: 5,
  timeout: Infinity,
});
const oursTimeout = reliable((x) => work(x), {
  breaker: new CircuitBreaker({ failureRate: 0.5, window: 20, cooldown: 30_000, probe: 3 }),
  maxAttempts: 5,
  timeout: 8000,
});
const cockatiel = wrap(
  retry(handleAll, { maxAttempts: 4, backoff: new ExponentialBackoff() }),
  circuitBreaker(handleAll, { halfOpenAfter: 30_000, breaker: new CountBreaker({ threshold: 0.5, size: 20 }) }),
);
const opossum = new Opossum(work, { timeout: false, errorThresholdPercentage: 50, resetTimeout: 30_000 });
const opossumTimeout = new Opossum(work, { timeout: 10_000, errorThresholdPercentage: 50, resetTimeout: 30_000 });

const candidates = {
  bare: (x) => work(x),
  // Not a peer: what two reads of the default clock cost here (the wrapper reads it when a call
  // starts and when it ends, as the breaker needs both times).
  "bare + 2 performance.now() (reference)": (x) => (performance.now(), performance.now(), work(x)),
  "reliablekit (no timeout)": (x) => ours(x),
  "reliablekit (8 s timeout)": (x) => oursTimeout(x),
  "cockatiel 4.0.0 wrap(retry, circuitBreaker)": (x) => cockatiel.execute(() => work(x)),
  "opossum 10.0.0 (timeout off)": (x) => opossum.fire(x),
  "opossum 10.0.0 (default 10 s timeout)": (x) => opossumTimeout.fire(x),
};

async function timeOne(fn, calls) {
  let sink = 0;
  const start = process.hrtime.bigint();
  for (let i = 0; i < calls; i++) sink += await fn(i);
  const ns = Number(process.hrtime.bigint() - start) / calls;
  if (sink === 0) throw new Error("nothing ran");
  return ns;
}

const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
const samples = Object.fromEntries(Object.keys(candidates).map((k) => [k, []]));
for (const fn of Object.values(candidates)) await timeOne(fn, CALLS); // warm-up
for (let r = 0; r < ROUNDS; r++) {
  for (const [name, fn] of Object.entries(candidates)) samples[name].push(await timeOne(fn, CALLS));
}
const bare = median(samples.bare);
console.log(`node ${process.version}, ${ROUNDS} rounds x ${CALLS} sequential calls, median ns per call`);
console.log("| candidate | ns per call | overhead over bare (ns) |");
console.log("|---|---:|---:|");
for (const [name, xs] of Object.entries(samples)) {
  const m = median(xs);
  console.log(`| ${name} | ${m.toFixed(0)} | ${name === "bare" ? "-" : (m - bare).toFixed(0)} |`);
}
opossum.shutdown();
opossumTimeout.shutdown();

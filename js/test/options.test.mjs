// Bad options: a TypeError or RangeError naming the option, never a WebAssembly trap.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { ABI_FUNCTIONS } from "../dist/esm/abi.js";
import { CircuitBreaker, expBackoff, reliable } from "../dist/esm/entry.esm.js";

const BREAKER = [
  [{ failureRate: 0 }, RangeError, "failureRate"],
  [{ failureRate: 1.5 }, RangeError, "failureRate"],
  [{ failureRate: NaN }, TypeError, "failureRate"],
  [{ failureRate: "0.5" }, TypeError, "failureRate"],
  [{ window: 0 }, RangeError, "window"],
  [{ window: 257 }, RangeError, "window"],
  [{ window: 2 ** 32 }, RangeError, "window"],
  [{ window: -1 }, RangeError, "window"],
  [{ window: 2.5 }, RangeError, "window"],
  [{ cooldown: -5 }, RangeError, "cooldown"],
  [{ cooldown: 0 }, RangeError, "cooldown"],
  [{ cooldown: {} }, TypeError, "cooldown"],
  [{ probe: 0 }, RangeError, "probe"],
  [{ probe: 1e10 }, RangeError, "probe"],
  [{ clock: 5 }, TypeError, "clock"],
  [{ rng: "x" }, TypeError, "rng"],
];

const RELIABLE = [
  [{ breaker: {} }, TypeError, "breaker"],
  [{ timeout: 0 }, RangeError, "timeout"],
  [{ timeout: -1 }, RangeError, "timeout"],
  [{ timeout: "8s" }, TypeError, "timeout"],
  [{ maxAttempts: 0 }, RangeError, "maxAttempts"],
  [{ maxAttempts: 1.5 }, RangeError, "maxAttempts"],
  [{ baseDelay: 0 }, RangeError, "baseDelay"],
  [{ baseDelay: -3 }, RangeError, "baseDelay"],
  [{ factor: 0.5 }, RangeError, "factor"],
  [{ factor: Infinity }, RangeError, "factor"],
  [{ jitter: 2 }, RangeError, "jitter"],
  [{ jitter: -0.1 }, RangeError, "jitter"],
  [{ sleep: 1 }, TypeError, "sleep"],
  [{ rng: null }, TypeError, "rng"],
  [{ onOpen: "fallback" }, TypeError, "onOpen"],
  [{ onEvent: 3 }, TypeError, "onEvent"],
  [{ maxServerDelay: -1 }, RangeError, "maxServerDelay"],
  [{ maxDelay: -1 }, RangeError, "maxDelay"],
  [{ maxDelay: 100, baseDelay: 200 }, RangeError, "maxDelay"],
];

function assertNamed(make, kind, option) {
  assert.throws(make, (e) => {
    assert.ok(!(e instanceof WebAssembly.RuntimeError), "a WebAssembly trap");
    assert.equal(e.constructor, kind, `${option}: ${e}`);
    assert.match(e.message, new RegExp(`^${option}\\b`), e.message);
    return true;
  });
}

for (const [opts, kind, option] of BREAKER) {
  test(`new CircuitBreaker(${JSON.stringify(opts) ?? String(opts)}): ${kind.name} naming ${option}`, () =>
    assertNamed(() => new CircuitBreaker(opts), kind, option));
}

for (const [opts, kind, option] of RELIABLE) {
  test(`reliable(fn, ${JSON.stringify(opts)}): ${kind.name} naming ${option}`, () =>
    assertNamed(() => reliable(async () => 1, opts), kind, option));
}

test("not a function, not an object", () => {
  assertNamed(() => reliable(42), TypeError, "fn");
  assertNamed(() => reliable(async () => 1, 7), TypeError, "reliable options");
  assertNamed(() => new CircuitBreaker("x"), TypeError, "CircuitBreaker options");
});

test("expBackoff's bad arguments", () => {
  assertNamed(() => expBackoff(0.5), RangeError, "attempt");
  assertNamed(() => expBackoff(1, { base: 0 }), RangeError, "base");
  assertNamed(() => expBackoff(1, { jitter: 3 }), RangeError, "jitter");
  assertNamed(() => expBackoff(1, { factor: "2" }), TypeError, "factor");
});

test("an rng or clock returning garbage cannot trap the module", async () => {
  for (const bad of [NaN, Infinity, -Infinity, -1, 2, 1e300]) {
    const clock = () => bad;
    const b = new CircuitBreaker({ window: 1, failureRate: 1, cooldown: 10, probe: 1, clock });
    assert.ok(["closed", "open", "half-open"].includes(b.state));
    const f = reliable(async () => { throw new Error("x"); }, { breaker: b, rng: () => bad, sleep: async () => {}, maxAttempts: 3 });
    await assert.rejects(f(), (e) => !(e instanceof WebAssembly.RuntimeError));
    assert.equal(typeof expBackoff(3, { rng: () => bad }), "number");
  }
});

test("the TypeScript import table matches the module's exports (no drift)", () => {
  const bytes = readFileSync(new URL("../dist/reliable.wasm", import.meta.url));
  const exported = WebAssembly.Module.exports(new WebAssembly.Module(bytes))
    .map((e) => e.name)
    .filter((n) => n.startsWith("rk_"))
    .sort();
  assert.deepEqual(exported, [...ABI_FUNCTIONS].sort());
  assert.deepEqual(WebAssembly.Module.imports(new WebAssembly.Module(bytes)), []);
});

test("CommonJS: require() gives the same API, ready to use", async () => {
  const { createRequire } = await import("node:module");
  const cjs = createRequire(import.meta.url)("../dist/cjs/entry.cjs.js");
  const b = new cjs.CircuitBreaker({ window: 1, failureRate: 1, cooldown: 1000, probe: 1 });
  await assert.rejects(cjs.reliable(async () => { throw new Error("x"); }, { breaker: b, maxAttempts: 1 })());
  assert.equal(b.state, "open");
});

test("a full breaker table is a RangeError saying so; dispose() frees a slot", () => {
  const live = [];
  assert.throws(() => {
    for (let i = 0; i < 10_000; i++) live.push(new CircuitBreaker());
  }, (e) => e instanceof RangeError && /too many live CircuitBreakers \(256\)/.test(e.message));
  assert.ok(live.length <= 256);
  live.pop().dispose();
  live.push(new CircuitBreaker());
  for (const b of live) b.dispose();
});

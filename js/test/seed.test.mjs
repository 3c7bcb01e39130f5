// The seed library's README: its example, and every transition of its state diagram, under an
// injected clock (no real waiting).
import assert from "node:assert/strict";
import { test } from "node:test";
import { CircuitBreaker, CircuitOpenError, expBackoff, reliable } from "../dist/esm/entry.esm.js";
import { manualClock, recordingSleep } from "./helpers.mjs";

const ok = async () => "ok";
const boom = async () => {
  throw new Error("down");
};

/** One call of `fn` through `b`, no retries: "ok", the error's message, or "open". */
async function once(b, fn) {
  try {
    return await reliable(fn, { breaker: b, maxAttempts: 1, timeout: Infinity })();
  } catch (e) {
    return e instanceof CircuitOpenError ? "open" : e.message;
  }
}

test("the README example: five attempts with jittered backoff, then the fallback while open", async () => {
  const clock = manualClock();
  const breaker = new CircuitBreaker({ failureRate: 0.5, window: 20, cooldown: 30_000, probe: 3, clock });
  const sleep = recordingSleep();
  let calls = 0;
  const callLlm = reliable.withContext(
    async ({ signal }, prompt) => {
      calls++;
      assert.ok(signal instanceof AbortSignal);
      throw new Error(`llm down for ${prompt}`);
    },
    {
      breaker,
      timeout: 8000,
      maxAttempts: 5,
      baseDelay: 200,
      jitter: 0.1,
      sleep,
      rng: () => 0.5,
      onOpen: () => "cached answer",
    },
  );
  await assert.rejects(callLlm("hi"), /llm down for hi/);
  assert.equal(calls, 5);
  // base · 2^(a−1), the jitter's midpoint (rng 0.5): 200, 400, 800, 1600 ms.
  assert.deepEqual(sleep.waits, [200, 400, 800, 1600]);
  // 20 calls in the window, all failed: the fourth request trips it.
  for (let i = 0; i < 3; i++) await assert.rejects(callLlm("hi"));
  assert.equal(breaker.state, "open");
  assert.equal(calls, 20);
  assert.equal(await callLlm("hi"), "cached answer");
  assert.equal(calls, 20);
});

test("closed → open when the failure rate of a full window reaches failureRate", async () => {
  const b = new CircuitBreaker({ failureRate: 0.5, window: 4, cooldown: 1000, probe: 2, clock: manualClock() });
  // Not before the window is full: three calls, two failed, stays closed.
  for (const fn of [boom, boom, ok]) await once(b, fn);
  assert.equal(b.state, "closed");
  // Four calls, two failed: 50% trips it.
  await once(b, ok);
  assert.equal(b.state, "open");
});

test("closed stays closed under the failure rate", async () => {
  const b = new CircuitBreaker({ failureRate: 0.5, window: 4, cooldown: 1000, probe: 2, clock: manualClock() });
  for (const fn of [boom, ok, ok, ok, boom, ok, ok, ok]) await once(b, fn);
  assert.equal(b.state, "closed");
});

/** A breaker opened at t = 0 with a 1000 ms cooldown and probe 2. */
async function opened() {
  const clock = manualClock();
  const b = new CircuitBreaker({ failureRate: 1, window: 1, cooldown: 1000, probe: 2, clock });
  await once(b, boom);
  assert.equal(b.state, "open");
  return { b, clock };
}

test("open rejects with CircuitOpenError carrying the cooldown left, without calling", async () => {
  const { b, clock } = await opened();
  clock.now = 250;
  let called = false;
  const err = await reliable(() => (called = true), { breaker: b, maxAttempts: 1 })().catch((e) => e);
  assert.ok(err instanceof CircuitOpenError);
  assert.equal(err.retryAfter, 750);
  assert.equal(called, false);
});

test("open → half-open when the cooldown is over", async () => {
  const { b, clock } = await opened();
  clock.now = 999;
  assert.equal(b.state, "open");
  clock.now = 1000;
  assert.equal(b.state, "half-open");
});

test("half-open → closed after probe successes in a row, with the window cleared", async () => {
  const { b, clock } = await opened();
  clock.now = 1000;
  assert.equal(await once(b, ok), "ok");
  assert.equal(b.state, "half-open");
  assert.equal(await once(b, ok), "ok");
  assert.equal(b.state, "closed");
});

test("half-open → open on any failure, and the cooldown starts again", async () => {
  const { b, clock } = await opened();
  clock.now = 1000;
  await once(b, ok);
  clock.now = 1500;
  assert.equal(await once(b, boom), "down");
  assert.equal(b.state, "open");
  clock.now = 2499;
  assert.equal(b.state, "open");
  clock.now = 2500;
  assert.equal(b.state, "half-open");
});

test("expBackoff: the seed's formula, jitter within ±jitter", () => {
  assert.equal(expBackoff(1, { rng: () => 0.5 }), 200);
  assert.equal(expBackoff(4, { base: 100, factor: 3, jitter: 0, rng: () => 0.9 }), 2700);
  for (let i = 0; i < 200; i++) {
    const d = expBackoff(2);
    assert.ok(d >= 360 && d <= 440, `${d}`);
  }
});

test("reliable(fn) passes exactly the caller's arguments; reliable.withContext(fn) the attempt's context first", async () => {
  const seen = [];
  const plain = reliable((...args) => {
    seen.push(args);
    return args.length;
  }, { timeout: Infinity });
  assert.equal(await plain("prompt", 2), 2);
  assert.equal(await plain(), 0);
  assert.deepEqual(seen, [["prompt", 2], []]);
  const withContext = reliable.withContext(
    (ctx, prompt) => {
      assert.ok(ctx.signal instanceof AbortSignal);
      return `${ctx.attempt} ${ctx.hedge} ${prompt}`;
    },
    { timeout: Infinity },
  );
  assert.equal(await withContext("hi"), "1 false hi");
});

// Chaos: the strategies through a wrapped function, the switches and the kill switch, the events,
// the options refused by name, and the same decisions as the Rust layers for the same seed (the
// fixture the Rust switch writes, conformance/chaos-decisions.json), with a negative control.
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { Chaos, ChaosResponse, CircuitBreaker, CircuitOpenError, reliable } from "../dist/esm/entry.esm.js";
import { manualClock, recordingSleep } from "./helpers.mjs";

const fixture = fileURLToPath(new URL("../../conformance/chaos-decisions.json", import.meta.url));

test("an injected 503 with Retry-After is read by the retry like a real one", async () => {
  const sleep = recordingSleep();
  const events = [];
  let calls = 0;
  const chaos = new Chaos({ fault: { rate: 1, seed: 3, status: 503, retryAfter: 1500 } });
  // A clock that stands still: the waits are the decided ones, not what is left of them.
  const clock = manualClock();
  const f = reliable(() => ++calls, { maxAttempts: 3, baseDelay: 100, jitter: 0, sleep, clock, chaos, onEvent: (e) => events.push(e) });
  const res = await f();
  assert.ok(res instanceof ChaosResponse);
  assert.equal(res.status, 503);
  assert.equal(res.headers.get("Retry-After"), "2");
  assert.equal(res.headers.get("retry-after-ms"), "1500");
  assert.deepEqual(sleep.waits, [1500, 1500]);
  assert.equal(calls, 0, "a fault answers without calling");
  assert.deepEqual(events.filter((e) => e.kind === "chaos").map((e) => [e.event, e.attempt, e.copy]), [
    ["Chaos.OnFault", 0, 1],
    ["Chaos.OnFault", 1, 2],
    ["Chaos.OnFault", 2, 3],
  ]);
  assert.deepEqual(events.filter((e) => e.kind === "answer").map((e) => e.class), ["throttled", "throttled", "throttled"]);
  assert.equal(chaos.attempts, 3);
  f.dispose();
  chaos.dispose();
});

test("an injected reset opens the breaker; a refused call never reaches the chaos layer", async () => {
  const clock = manualClock();
  const breaker = new CircuitBreaker({ failureRate: 1, window: 2, cooldown: 10_000, clock });
  const chaos = new Chaos({ fault: { rate: 1, reset: true } });
  const f = reliable(async () => "real", { breaker, maxAttempts: 1, chaos });
  for (let i = 0; i < 2; i++) await assert.rejects(f(), /connection reset injected/);
  await assert.rejects(f(), CircuitOpenError);
  assert.equal(breaker.state, "open");
  assert.equal(chaos.attempts, 2);
  f.dispose();
});

test("switched off it injects and counts nothing; killAll stops every layer", async () => {
  const chaos = new Chaos({ fault: { rate: 1, status: 500, enabled: false } });
  const f = reliable(async () => "real", { maxAttempts: 1, chaos });
  assert.equal(await f(), "real");
  assert.deepEqual(chaos.enabled, []);
  assert.equal(chaos.attempts, 0);
  chaos.setEnabled("fault", true);
  assert.deepEqual(chaos.enabled, ["fault"]);
  assert.equal((await f()).status, 500);
  assert.equal(chaos.attempts, 1);
  Chaos.killAll(true);
  try {
    assert.equal(Chaos.killed, true);
    assert.equal(await f(), "real");
    assert.equal(chaos.attempts, 1, "killed: nothing drawn");
  } finally {
    Chaos.killAll(false);
  }
  assert.equal((await f()).status, 500);
  chaos.setEnabled("latency", true);
  assert.deepEqual(chaos.enabled, ["fault"], "a strategy not configured stays off");
  f.dispose();
});

test("outcome, latency and behaviour, reported in the Rust layers' order", async () => {
  const sleep = recordingSleep();
  const events = [];
  let seen = 0;
  const chaos = new Chaos({
    outcome: { rate: 1, value: "chosen" },
    latency: { rate: 1, seed: 9, min: 10, max: 20 },
    behavior: { rate: 1, callback: () => seen++ },
  });
  let calls = 0;
  const f = reliable(async () => ++calls, { maxAttempts: 1, sleep, chaos, onEvent: (e) => events.push(e) });
  assert.equal(await f(), "chosen");
  assert.equal(calls, 0);
  assert.equal(seen, 1);
  assert.equal(sleep.waits.length, 1);
  assert.ok(sleep.waits[0] >= 10 && sleep.waits[0] <= 20);
  const c = events.filter((e) => e.kind === "chaos");
  assert.deepEqual(c.map((e) => e.event), ["Chaos.OnBehavior", "Chaos.OnLatency", "Chaos.OnOutcome"]);
  assert.equal(c[1].delay, sleep.waits[0]);
  const g = reliable(async () => "real", { maxAttempts: 1, chaos: new Chaos({ fault: { rate: 1, error: new TypeError("mine") } }) });
  await assert.rejects(g(), { name: "TypeError", message: "mine" });
  const h = reliable.withContext(async () => "real", { maxAttempts: 1, timeout: 50, chaos: new Chaos({ fault: { rate: 1, hang: true } }) });
  await assert.rejects(h(), { name: "TimeoutError" });
  for (const w of [f, g, h]) w.dispose();
});

test("bad options are refused by name, never a trap", () => {
  const cases = [
    [{ fault: { rate: 1.5, status: 503 } }, RangeError, /^chaos\.fault\.rate must be a fraction/],
    [{ fault: { rate: Number.NaN, status: 503 } }, TypeError, /^chaos\.fault\.rate must be a number/],
    [{ fault: { rate: "x", status: 503 } }, TypeError, /^chaos\.fault\.rate/],
    [{ fault: { status: 503 } }, TypeError, /^chaos\.fault\.rate: required/],
    [{ fault: { rate: 0.1, status: 200 } }, RangeError, /^chaos\.fault\.status/],
    [{ fault: { rate: 0.1, status: 42 } }, RangeError, /^chaos\.fault\.status/],
    [{ fault: { rate: 0.1, status: 503.5 } }, RangeError, /^chaos\.fault\.status/],
    [{ fault: { rate: 0.1, status: 503, retryAfter: -1 } }, RangeError, /^chaos\.fault\.retryAfter/],
    [{ fault: { rate: 0.1, status: 503, colour: 1 } }, TypeError, /^chaos\.fault\.colour/],
    [{ fault: { rate: 0.1 } }, TypeError, /^chaos\.fault: give exactly one/],
    [{ fault: { rate: 0.1, status: 503, seed: -1 } }, RangeError, /^chaos\.fault\.seed/],
    [{ fault: { rate: 0.1, status: 503, seed: 1n << 64n } }, RangeError, /^chaos\.fault\.seed/],
    [{ fault: { rate: 0.1, status: 503, seed: 1.5 } }, RangeError, /^chaos\.fault\.seed/],
    [{ latency: { rate: 0.5, min: 50, max: 10 } }, RangeError, /^chaos\.latency\.max/],
    [{ latency: { rate: 0.5 } }, TypeError, /^chaos\.latency: give delay/],
    [{ outcome: { rate: 0.5, status: 200, enabled: 1 } }, TypeError, /^chaos\.outcome\.enabled/],
    [{ behavior: { rate: 0.5 } }, TypeError, /^chaos\.behavior\.callback/],
    [{ jitter: {} }, TypeError, /^chaos\.jitter: unknown strategy/],
  ];
  for (const [opts, kind, message] of cases) {
    assert.throws(() => new Chaos(opts), (e) => e instanceof kind && message.test(e.message), JSON.stringify(opts, (_, v) => (typeof v === "bigint" ? String(v) : v)));
  }
  assert.throws(() => reliable(async () => 1, { chaos: {} }), /^TypeError: chaos must be a Chaos/);
  assert.throws(() => new Chaos({ fault: { rate: 0.1, reset: true } }).setEnabled("lag", true), TypeError);
});

/** The fixture's neutral config as this package's `Chaos` (seeds moved by `bump`). */
function chaosOf(c, bump = 0) {
  return new Chaos({
    fault: { rate: c.fault.rate, seed: BigInt(c.fault.seed) + BigInt(bump), status: c.fault.status, retryAfter: c.fault.retry_after_ms },
    latency: { rate: c.latency.rate, seed: BigInt(c.latency.seed) + BigInt(bump), min: c.latency.min_ms, max: c.latency.max_ms },
    outcome: { rate: c.outcome.rate, seed: BigInt(c.outcome.seed) + BigInt(bump), status: c.outcome.status },
    behavior: { rate: c.behavior.rate, seed: BigInt(c.behavior.seed) + BigInt(bump), callback: () => {} },
  });
}

function decisions(chaos, n) {
  const out = [];
  for (let i = 0; i < n; i++) {
    const d = chaos.decide();
    if (d === undefined) out.push([false, null, null]);
    else out.push([d.behavior, d.delay === undefined ? null : Math.round(d.delay * 1e6), d.answer ?? null]);
  }
  chaos.dispose();
  return out;
}

test("the same seed decides as the Rust switch, another seed does not", { skip: !existsSync(fixture) && "no conformance/ beside this package" }, () => {
  const { cases } = JSON.parse(readFileSync(fixture, "utf8"));
  assert.ok(cases.length >= 3);
  for (const c of cases) {
    assert.deepEqual(decisions(chaosOf(c.config), c.decisions.length), c.decisions, `seed ${c.seed}`);
    assert.notDeepEqual(decisions(chaosOf(c.config, 1), c.decisions.length), c.decisions, `seed ${c.seed} + 1`);
  }
});

test("a timeline plays a scenario's faults by the clock, as the Rust TimelineLayer does", async () => {
  const { ChaosTimeline } = await import("../dist/esm/entry.esm.js");
  const clock = manualClock();
  const waits = [];
  const sleep = async (ms) => {
    waits.push(ms);
    clock.now += ms;
  };
  const tl = new ChaosTimeline(
    [
      { kind: "Outage", from: 1000, until: 2000 },
      { kind: "Throttle", from: 3000, until: 4000, retryAfter: 3000 },
      { kind: "Partition", from: 5000, until: 6000 },
    ],
    { seed: 1, clock },
  );
  const events = [];
  let calls = 0;
  const f = reliable(async () => (++calls, "real"), { maxAttempts: 1, clock, sleep, chaos: tl, onEvent: (e) => events.push(e) });
  assert.equal(await f(), "real");
  clock.now = 1500;
  assert.equal((await f()).status, 503);
  clock.now = 3500;
  const throttled = await f();
  assert.equal(throttled.status, 429);
  assert.equal(throttled.headers.get("retry-after"), "3");
  clock.now = 5250;
  assert.equal(await f(), "real");
  assert.deepEqual(waits, [750]);
  assert.equal(calls, 2);
  assert.deepEqual(events.filter((e) => e.kind === "chaos").map((e) => e.event), ["Chaos.OnFault", "Chaos.OnFault", "Chaos.OnLatency"]);
  f.dispose();
  tl.dispose();
});

test("a timeline refuses the server's faults with the core's reason, and bad fields by name", async () => {
  const { ChaosTimeline } = await import("../dist/esm/entry.esm.js");
  const source = readFileSync(new URL("../../core/src/fault.rs", import.meta.url), "utf8").replace(/\\\n\s*/g, "");
  for (const kind of ["CapacityLoss", "LoadSpike"]) {
    let message = "";
    try {
      new ChaosTimeline([{ kind, from: 0, until: 1 }]);
    } catch (e) {
      assert.ok(e instanceof TypeError);
      message = e.message;
    }
    const reason = message.replace(`faults[0]: ${kind} refused: `, "");
    assert.ok(reason.length > 20 && source.includes(`kind: "${kind}",\n                    reason: "${reason}"`), `${kind}: ${message}`);
  }
  assert.throws(() => new ChaosTimeline([{ kind: "LatencyInflation", from: 0, until: 1, factor: 0.5 }]), /^RangeError: faults\[0\]\.factor/);
  assert.throws(() => new ChaosTimeline([{ kind: "Partition", from: 5, until: 5 }]), /^RangeError: faults\[0\]\.until/);
  assert.throws(() => new ChaosTimeline([{ kind: "ErrorRate", from: 0, until: 1, rate: 2 }]), /^RangeError: faults\[0\]\.rate/);
  assert.throws(() => new ChaosTimeline([{ kind: "Quake", from: 0, until: 1 }]), /^TypeError: faults\[0\]\.kind/);
  assert.throws(() => new ChaosTimeline([{ kind: "Outage", from: 0, until: 1, hang: "yes" }]), /^TypeError: faults\[0\]\.hang/);
});

test("a timeline stretches latency and fails successes by its error rate", async () => {
  const { ChaosTimeline } = await import("../dist/esm/entry.esm.js");
  const clock = manualClock();
  const waits = [];
  const sleep = async (ms) => {
    waits.push(ms);
    clock.now += ms;
  };
  const tl = new ChaosTimeline(
    [
      { kind: "LatencyInflation", from: 0, until: 10_000, factor: 3 },
      { kind: "ErrorRate", from: 20_000, until: 30_000, rate: 1 },
    ],
    { clock },
  );
  const slow = async () => {
    clock.now += 100; // the real call takes 100 ms
    return "real";
  };
  const f = reliable(slow, { maxAttempts: 1, clock, sleep, timeout: Infinity, chaos: tl });
  assert.equal(await f(), "real");
  assert.deepEqual(waits, [200]);
  clock.now = 25_000;
  assert.equal((await f()).status, 500);
  f.dispose();
});

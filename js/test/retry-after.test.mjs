// Responses, classed by the core's answer table in the module: overload (429, 503, 529) and any
// retried status with a server delay are throttled and the delay honoured (clamped to
// maxServerDelay), 408, 409 and other 5xx retried with backoff, x-should-retry obeyed, other 4xx
// returned at once and not held against the downstream.
import assert from "node:assert/strict";
import { test } from "node:test";
import { CircuitBreaker, reliable, retryAfterMs } from "../dist/esm/entry.esm.js";
import { recordingSleep } from "./helpers.mjs";

function responses(...list) {
  const fn = async () => list[fn.calls++];
  fn.calls = 0;
  return fn;
}

// A clock that stands still: the waits recorded are the core's, to the nanosecond.
const base = { baseDelay: 200, jitter: 0, timeout: Infinity, clock: () => 0 };

test("Retry-After in seconds from a 503 is waited, longer than the backoff", async () => {
  const sleep = recordingSleep();
  const fn = responses(new Response("busy", { status: 503, headers: { "Retry-After": "2" } }), new Response("ok"));
  const res = await reliable(fn, { ...base, sleep })();
  assert.equal(res.status, 200);
  assert.equal(await res.text(), "ok");
  assert.deepEqual(sleep.waits, [2000]);
});

test("Retry-After as an HTTP date from a 429; a short one still waits the backoff", async () => {
  const sleep = recordingSleep();
  // 25 s ahead (within the default maxServerDelay of 30 s), to the second (an HTTP date has no
  // milliseconds): the wait read from it is between 24 s and 25 s less the time this test took
  // to get there, so 20 s leaves 4 s of margin for a loaded machine.
  const date = new Date(Date.now() + 25_000).toUTCString();
  const fn = responses(
    new Response(null, { status: 429, headers: { "Retry-After": date } }),
    new Response(null, { status: 429, headers: { "Retry-After": "0" } }),
    new Response("ok"),
  );
  await reliable(fn, { ...base, sleep })();
  assert.ok(sleep.waits[0] > 20_000 && sleep.waits[0] <= 25_000, `${sleep.waits}`);
  assert.equal(sleep.waits[1], 400);
});

test("Retry-After is clamped to maxServerDelay", async () => {
  const sleep = recordingSleep();
  const fn = responses(new Response(null, { status: 503, headers: { "Retry-After": "3600" } }), new Response("ok"));
  await reliable(fn, { ...base, sleep, maxServerDelay: 5000 })();
  assert.deepEqual(sleep.waits, [5000]);
});

test("a 500 is retried with backoff; when attempts run out the last Response is returned", async () => {
  const sleep = recordingSleep();
  const fn = responses(...[1, 2, 3].map(() => new Response(null, { status: 500 })));
  const res = await reliable(fn, { ...base, sleep, maxAttempts: 3 })();
  assert.equal(res.status, 500);
  assert.equal(fn.calls, 3);
  assert.deepEqual(sleep.waits, [200, 400]);
});

test("a 404 is returned at once and not counted against the downstream", async () => {
  const breaker = new CircuitBreaker({ failureRate: 1, window: 1, cooldown: 1000, probe: 1, clock: base.clock });
  const fn = responses(new Response(null, { status: 404 }));
  const res = await reliable(fn, { ...base, breaker })();
  assert.equal(res.status, 404);
  assert.equal(fn.calls, 1);
  assert.equal(breaker.state, "closed");
});

test("retryAfterMs reads both forms and refuses garbage", () => {
  assert.equal(retryAfterMs("7"), 7000);
  assert.equal(retryAfterMs(" 1.5 "), 1500);
  assert.equal(retryAfterMs("-3"), -1);
  assert.equal(retryAfterMs("0x10"), -1);
  assert.equal(retryAfterMs(new Date(61_000).toUTCString(), 1000), 60_000);
  assert.equal(retryAfterMs("soon"), -1);
  assert.equal(retryAfterMs(null), -1);
});

test("maxDelay caps the backoff (uncapped by default, as in the seed)", async () => {
  const capped = recordingSleep();
  const uncapped = recordingSleep();
  const fail = async () => {
    throw new Error("down");
  };
  await assert.rejects(reliable(fail, { ...base, sleep: capped, maxAttempts: 5, maxDelay: 500 })());
  await assert.rejects(reliable(fail, { ...base, sleep: uncapped, maxAttempts: 5 })());
  assert.deepEqual(capped.waits, [200, 400, 500, 500]);
  assert.deepEqual(uncapped.waits, [200, 400, 800, 1600]);
});

/** The classes and waits of a call whose attempts get `list`, with a recording sleep. */
async function classes(list, opts = {}) {
  const sleep = recordingSleep();
  const events = [];
  const fn = responses(...list);
  const res = await reliable(fn, { ...base, sleep, onEvent: (e) => events.push(e), ...opts })();
  const answers = events.filter((e) => e.kind === "answer").map((e) => `${e.class}${e.accepted ? "" : " (refused)"}`);
  return { res, answers, waits: sleep.waits, gaveUp: events.find((e) => e.kind === "give-up")?.reason };
}

const r = (status, headers = {}) => new Response(null, { status, headers });

test("408, 409 and a 5xx are retried with backoff; 529 is overload", async () => {
  const got = await classes([r(408), r(409), r(502), r(529), r(200)]);
  assert.deepEqual(got.answers, ["transient", "transient", "transient", "throttled (refused)", "ok"]);
  assert.deepEqual(got.waits, [200, 400, 800, 1600]);
});

test("retry-after-ms wins over Retry-After; a 500 with a delay is throttled and waits it", async () => {
  const got = await classes([r(429, { "retry-after-ms": "1500.5", "retry-after": "9" }), r(500, { "retry-after": "3" }), r(200)]);
  assert.deepEqual(got.answers, ["throttled (refused)", "throttled (refused)", "ok"]);
  assert.deepEqual(got.waits, [1500.5, 3000]);
});

test("an unreadable retry-after-ms falls back to Retry-After; a 404's delay is not honoured", async () => {
  const got = await classes([r(503, { "retry-after-ms": "soon", "retry-after": "2" }), r(404, { "retry-after": "5" })]);
  assert.deepEqual(got.answers, ["throttled (refused)", "fatal"]);
  assert.deepEqual(got.waits, [2000]);
  assert.equal(got.gaveUp, "fatal");
});

test("x-should-retry: false ends the call (counted against the breaker), true retries a 400", async () => {
  const breaker = new CircuitBreaker({ failureRate: 1, window: 1, cooldown: 1000, probe: 1, clock: base.clock });
  const no = await classes([r(503, { "x-should-retry": "FALSE" })], { breaker });
  assert.deepEqual(no.answers, ["dont-retry"]);
  assert.equal(no.gaveUp, "dont-retry");
  assert.equal(no.res.status, 503);
  assert.equal(breaker.state, "open");
  const yes = await classes([r(400, { "x-should-retry": " true " }), r(400, { "x-should-retry": "true", "retry-after": "1" }), r(200)]);
  assert.deepEqual(yes.answers, ["transient", "throttled (refused)", "ok"]);
  assert.deepEqual(yes.waits, [200, 1000]);
});

test("a thrown error is transient, a timeout is not accepted by the backend", async () => {
  const events = [];
  let n = 0;
  const fn = async () => {
    if (n++ === 0) throw new Error("reset");
    throw Object.assign(new Error("slow"), { name: "TimeoutError" });
  };
  await assert.rejects(reliable(fn, { ...base, sleep: recordingSleep(), maxAttempts: 2, onEvent: (e) => events.push(e) })());
  assert.deepEqual(
    events.filter((e) => e.kind === "answer").map((e) => [e.class, e.accepted]),
    [["transient", true], ["timeout", false]],
  );
});

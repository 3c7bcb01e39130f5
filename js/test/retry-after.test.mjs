// Responses: 429/503 are throttled and their Retry-After honoured (clamped to maxServerDelay),
// other 5xx retried with backoff, other 4xx returned at once and not held against the downstream.
import assert from "node:assert/strict";
import { test } from "node:test";
import { CircuitBreaker, reliable, retryAfterMs } from "../dist/esm/entry.esm.js";
import { recordingSleep } from "./helpers.mjs";

function responses(...list) {
  const fn = async () => list[fn.calls++];
  fn.calls = 0;
  return fn;
}

const base = { baseDelay: 200, jitter: 0, timeout: Infinity };

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
  const date = new Date(Date.now() + 10_000).toUTCString();
  const fn = responses(
    new Response(null, { status: 429, headers: { "Retry-After": date } }),
    new Response(null, { status: 429, headers: { "Retry-After": "0" } }),
    new Response("ok"),
  );
  await reliable(fn, { ...base, sleep })();
  assert.ok(sleep.waits[0] > 8000 && sleep.waits[0] <= 10_000, `${sleep.waits}`);
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
  const breaker = new CircuitBreaker({ failureRate: 1, window: 1, cooldown: 1000, probe: 1 });
  const fn = responses(new Response(null, { status: 404 }));
  const res = await reliable(fn, { ...base, breaker })();
  assert.equal(res.status, 404);
  assert.equal(fn.calls, 1);
  assert.equal(breaker.state, "closed");
});

test("retryAfterMs reads both forms and refuses garbage", () => {
  assert.equal(retryAfterMs("7"), 7000);
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

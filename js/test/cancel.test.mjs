// True cancellation: a timed-out attempt's fetch is aborted (the loopback server sees its
// connection closed), and a caller's signal cancels the whole call and hands the breaker permit
// back without counting it.
import assert from "node:assert/strict";
import { once } from "node:events";
import { createServer } from "node:http";
import { test } from "node:test";
import { CircuitBreaker, reliable } from "../dist/esm/entry.esm.js";

/** A loopback server that never answers; resolves each request's connection close. */
async function hangingServer() {
  const closed = [];
  const server = createServer((req) => {
    closed.push(once(req.socket, "close").then(() => Date.now()));
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const url = `http://127.0.0.1:${server.address().port}/`;
  return { url, closed, stop: () => server.close() };
}

/** Fails the test rather than hanging it. */
function within(ms, promise, what) {
  return Promise.race([
    promise,
    new Promise((_, reject) => setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms).unref()),
  ]);
}

test("a timed-out attempt aborts its fetch: the server sees each connection closed", async () => {
  const server = await hangingServer();
  try {
    let attempts = 0;
    const get = reliable.withContext(
      ({ signal }) => {
        attempts++;
        return fetch(server.url, { signal });
      },
      { timeout: 300, maxAttempts: 2, baseDelay: 10 },
    );
    const started = Date.now();
    await assert.rejects(within(5000, get(), "the call"), { name: "TimeoutError" });
    assert.ok(Date.now() - started < 3000);
    assert.equal(attempts, 2);
    // On a loaded machine an attempt may time out before its request reaches the server; every
    // request that did arrive must see its connection closed.
    assert.ok(server.closed.length >= 1, "a request reached the server");
    await within(2000, Promise.all(server.closed), "the server seeing the connections close");
  } finally {
    server.stop();
  }
});

test("the caller's signal cancels the call in flight, closes the connection and returns the permit", async () => {
  const server = await hangingServer();
  try {
    // Window of one call, failureRate 1: a cancelled attempt counted as a failure would trip it.
    const breaker = new CircuitBreaker({ failureRate: 1, window: 1, cooldown: 60_000, probe: 1 });
    const get = reliable.withContext(({ signal }) => fetch(server.url, { signal }), { breaker, timeout: 10_000 });
    const controller = new AbortController();
    const call = get.withSignal(controller.signal);
    while (server.closed.length === 0) await new Promise((r) => setTimeout(r, 5));
    controller.abort(new Error("user went away"));
    await assert.rejects(within(2000, call, "the cancelled call"), /user went away/);
    await within(2000, server.closed[0], "the server seeing the connection close");
    assert.equal(server.closed.length, 1, "no retry after a cancel");
    assert.equal(breaker.state, "closed");
  } finally {
    server.stop();
  }
});

test("a cancel during the backoff wait stops the call there", async () => {
  let calls = 0;
  const controller = new AbortController();
  const f = reliable(
    async () => {
      calls++;
      setTimeout(() => controller.abort(new Error("stop")), 20);
      throw new Error("down");
    },
    { baseDelay: 5000, timeout: Infinity },
  );
  const started = Date.now();
  await assert.rejects(f.withSignal(controller.signal), /stop/);
  assert.equal(calls, 1);
  assert.ok(Date.now() - started < 2000);
});

test("cancelled calls free their slots: more cancels than the call table holds", async () => {
  const breaker = new CircuitBreaker({ failureRate: 1, window: 1, cooldown: 60_000, probe: 1 });
  let controller;
  const f = reliable(
    () => {
      controller.abort(new Error("cancelled"));
      return new Promise(() => {});
    },
    { breaker, timeout: 60_000 },
  );
  for (let i = 0; i < 9000; i++) {
    controller = new AbortController();
    await assert.rejects(f.withSignal(controller.signal), /cancelled/);
  }
  assert.equal(breaker.state, "closed");
});

test("a hedge races the first copy in real time; the loser's signal aborts", async () => {
  const policy = {
    Retry: {
      policy: { max_attempts: 1, attempt_timeout: "5s", backoff: { shape: { Constant: { delay: "0s" } } } },
      inner: { Hedge: { config: { delay: { Fixed: "20ms" }, max_hedges: 1 }, idempotent: true, inner: { Call: { downstream: "api" } } } },
    },
  };
  const aborted = [];
  const events = [];
  const f = reliable.withContext(
    ({ signal, attempt, hedge }) =>
      new Promise((resolve, reject) => {
        signal.addEventListener("abort", () => {
          aborted.push([attempt, signal.reason?.name]);
          reject(signal.reason);
        });
        // The first copy is slow; the hedge answers at once.
        if (hedge) resolve(`copy ${attempt}`);
        else setTimeout(() => resolve(`copy ${attempt}`), 2000).unref();
      }),
    { policy, onEvent: (e) => events.push(e.kind) },
  );
  const started = Date.now();
  assert.equal(await within(1500, f(), "the hedged call"), "copy 2");
  assert.ok(Date.now() - started < 1500);
  assert.deepEqual(aborted, [[1, "AbortError"]]);
  assert.deepEqual(events, ["hedge", "answer", "lost"]);
  f.dispose();
});

// Each call hears its own decisions only: the module drops the events of a call whose wrapper
// does not listen (it never reads them) when another call is fed an input.
import assert from "node:assert/strict";
import { test } from "node:test";
import { CircuitBreaker, reliable } from "../dist/esm/entry.esm.js";

test("a listening call does not hear what a call nobody listens to decided meanwhile", async () => {
  const breaker = new CircuitBreaker({ failureRate: 1, window: 1, cooldown: 60_000, probe: 1, clock: () => 0 });
  const options = { breaker, maxAttempts: 1, timeout: Infinity };
  let release;
  const gate = new Promise((resolve) => (release = resolve));
  const heard = [];
  const loud = reliable(async () => {
    await gate;
    return "ok";
  }, { ...options, onEvent: (e) => heard.push(e) });
  const quiet = reliable(async () => {
    throw new Error("down");
  }, options);
  const inFlight = loud();
  // The quiet call's failure opens the shared breaker while the loud call is out: a breaker
  // transition, decided during the quiet call's answer and never read by it.
  await assert.rejects(quiet(), /down/);
  assert.equal(breaker.state, "open");
  release();
  assert.equal(await inFlight, "ok");
  assert.deepEqual(heard, [{ kind: "answer", attempt: 1, class: "ok", accepted: true }]);
});

// A `Policy` made once and given to several wrappers: the state of its `scope: "Shared"` layers is
// one for all of them, its `PerClient` layers (the default) each wrapper's own; the same policy
// given as a plain object or JSON text is read for one wrapper alone.
import assert from "node:assert/strict";
import { test } from "node:test";
import { CircuitOpenError, Policy, RefusedError, reliable } from "../dist/esm/entry.esm.js";

const call = { Call: { downstream: "api" } };
/** A breaker opened by one failure, open for a minute, with the given scope. */
const breaker = (scope, inner = call) => ({ Breaker: { config: { consecutive_failures: 1, open: { duration: "60s" } }, scope, inner } });
/** A bulkhead of one call in flight, with the given scope. */
const bulkhead = (scope, inner = call) => ({ Limit: { config: { rule: "Fixed", initial: 1, min: 1, max: 1 }, scope, inner } });
const timing = { clock: () => 0, sleep: async () => {} };

/** A wrapper whose calls fail (an Error thrown: transient), counting the calls that reach it. */
function failing(policy) {
  const f = reliable(
    async () => {
      f.calls++;
      throw new Error("down");
    },
    { policy, ...timing },
  );
  f.calls = 0;
  return f;
}

test("two wrappers made with one Policy share its Shared breaker: one opens it, the other is refused", async () => {
  const policy = new Policy({ name: "api", stack: breaker("Shared") });
  assert.equal(policy.name, "api");
  const [a, b] = [failing(policy), failing(policy)];
  await assert.rejects(a(), /down/);
  assert.equal(a.calls, 1);
  await assert.rejects(b(), (e) => e instanceof CircuitOpenError);
  assert.equal(b.calls, 0, "b was refused without being called");
  // Disposing one wrapper leaves the breaker to the other.
  a.dispose();
  await assert.rejects(b(), (e) => e instanceof CircuitOpenError);
  b.dispose();
  policy.dispose();
});

test("a PerClient breaker (the default scope) is each wrapper's own", async () => {
  for (const scope of ["PerClient", undefined]) {
    const policy = Policy.fromJson(JSON.stringify({ stack: breaker(scope) }));
    const [a, b] = [failing(policy), failing(policy)];
    await assert.rejects(a(), /down/);
    await assert.rejects(a(), (e) => e instanceof CircuitOpenError);
    await assert.rejects(b(), /down/); // its own breaker was closed
    assert.deepEqual([a.calls, b.calls], [1, 1], `scope ${scope}`);
    a.dispose();
    b.dispose();
  }
});

test("a plain policy object or JSON text is one wrapper's own, whatever its scopes say", async () => {
  const stack = breaker("Shared");
  for (const plain of [{ stack }, stack, JSON.stringify({ stack })]) {
    const [a, b] = [failing(plain), failing(plain)];
    await assert.rejects(a(), /down/);
    await assert.rejects(a(), (e) => e instanceof CircuitOpenError);
    await assert.rejects(b(), /down/);
    assert.deepEqual([a.calls, b.calls], [1, 1]);
    a.dispose();
    b.dispose();
  }
});

test("each layer shares as its own scope says: a Shared bulkhead around a PerClient breaker", async () => {
  const policy = new Policy({ stack: bulkhead("Shared", breaker("PerClient")) });
  let release;
  let calls = 0;
  const slow = reliable(
    async () => {
      calls++;
      await new Promise((r) => (release = r));
      return "slow";
    },
    { policy, ...timing },
  );
  const other = failing(policy);
  const pending = slow();
  // The one slot of the shared bulkhead is taken by `slow`'s call: `other`'s is refused.
  await assert.rejects(other(), (e) => e instanceof RefusedError && e.by === "limit");
  assert.equal(other.calls, 0);
  release();
  assert.equal(await pending, "slow");
  // Slot free: `other` fails and opens its own breaker, not `slow`'s.
  await assert.rejects(other(), /down/);
  await assert.rejects(other(), (e) => e instanceof CircuitOpenError);
  const again = slow();
  release();
  assert.equal(await again, "slow");
  assert.equal(calls, 2);
  slow.dispose();
  other.dispose();
  policy.dispose();
});

test("a Policy is read when made, kept from later changes, and disposed without breaking its wrappers", async () => {
  assert.throws(() => new Policy({ stack: { Breaker: { config: { failure_rate: 2 }, inner: call } } }), (e) => e instanceof RangeError && /^stack\.config\.failure_rate/.test(e.message));
  assert.throws(() => Policy.fromJson("{"), (e) => e instanceof TypeError && /^policy: not JSON/.test(e.message));
  assert.throws(() => Policy.fromJson({ stack: call }), (e) => e instanceof TypeError && /text must be a string/.test(e.message));
  const stack = breaker("Shared");
  const policy = new Policy({ stack });
  stack.Breaker.scope = "PerClient"; // the Policy read it already
  const a = failing(policy);
  // Disposed with a wrapper alive: the wrappers made keep its state; no new one can be made.
  policy.dispose();
  assert.equal(policy.disposed, true);
  assert.throws(() => failing(policy), (e) => e instanceof TypeError && /disposed/.test(e.message));
  await assert.rejects(a(), /down/);
  await assert.rejects(a(), (e) => e instanceof CircuitOpenError);
  a.dispose();
  // Many wrappers made and disposed over one Policy do not fill the module's tables.
  const many = new Policy({ stack: bulkhead("Shared", breaker("Shared")) });
  for (let i = 0; i < 600; i++) {
    const w = reliable(async () => i, { policy: many, ...timing });
    assert.equal(await w(), i);
    w.dispose();
  }
  many.dispose();
});

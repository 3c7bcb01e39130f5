// The policy format, as a Node service loads it: every client policy of every scenario the
// simulator runs (scenarios/*.ron, turned into JSON here: the package reads JSON) is read by
// `reliable(fn, { policy })`. A stack the engine runs is accepted; any other is refused with an
// error naming its place in the stack. That the package then decides as the reference does on
// the same answers is the conformance suite's: it feeds every sequence's policy through this
// same reader (conformance.test.mjs).
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { reliable } from "../dist/esm/entry.esm.js";

const scenarios = fileURLToPath(new URL("../../scenarios", import.meta.url));

/** RON as JSON, for the subset scenario files use (serde's JSON forms of the same values). */
export function ronToJson(text) {
  let i = 0;
  const fail = (what) => {
    throw new SyntaxError(`RON at ${i}: ${what}`);
  };
  const space = () => {
    for (;;) {
      while (i < text.length && /\s/.test(text[i])) i++;
      if (text.startsWith("//", i)) while (i < text.length && text[i] !== "\n") i++;
      else if (text.startsWith("/*", i)) i = text.indexOf("*/", i) + 2;
      else return;
    }
  };
  const ident = () => {
    const m = /^[A-Za-z_][A-Za-z0-9_]*/.exec(text.slice(i));
    if (!m) fail("expected a name");
    i += m[0].length;
    return m[0];
  };
  /** `(key: v, ...)` as an object, `(a, b)` as a list; at the `(`. */
  const group = () => {
    i++;
    space();
    const keyed = /^[A-Za-z_][A-Za-z0-9_]*\s*:(?!:)/.test(text.slice(i));
    const out = keyed ? {} : [];
    for (;;) {
      space();
      if (text[i] === ")") {
        i++;
        return out;
      }
      if (keyed) {
        const k = ident();
        space();
        if (text[i++] !== ":") fail("expected ':'");
        out[k] = value();
        // RON's `None` is an absent Option or a variant named None: the backoff's `jitter` is
        // the one such variant scenario files write.
        if (k === "jitter" && out[k] === null) out[k] = "None";
      } else {
        out.push(value());
      }
      space();
      if (text[i] === ",") i++;
    }
  };
  const value = () => {
    space();
    const c = text[i];
    if (c === '"') {
      let j = i + 1;
      while (text[j] !== '"') j += text[j] === "\\" ? 2 : 1;
      const s = JSON.parse(text.slice(i, j + 1));
      i = j + 1;
      return s;
    }
    if (c === "[") {
      i++;
      const out = [];
      for (;;) {
        space();
        if (text[i] === "]") {
          i++;
          return out;
        }
        out.push(value());
        space();
        if (text[i] === ",") i++;
      }
    }
    if (c === "(") return group();
    const num = /^[+-]?(\d[\d_]*\.?[\d_]*([eE][+-]?\d+)?|\.\d+)/.exec(text.slice(i));
    if (num) {
      i += num[0].length;
      return Number(num[0].replaceAll("_", ""));
    }
    const name = ident();
    if (name === "true" || name === "false") return name === "true";
    if (name === "None") return null;
    space();
    if (text[i] !== "(") return name;
    const inner = group();
    if (name === "Some") return Array.isArray(inner) && inner.length === 1 ? inner[0] : inner;
    // A struct variant's fields (none: `Quantile()`, all defaults), or a newtype variant's value.
    if (Array.isArray(inner) && inner.length === 0) return { [name]: {} };
    return { [name]: Array.isArray(inner) && inner.length === 1 ? inner[0] : inner };
  };
  const v = value();
  space();
  if (i < text.length) fail("trailing text");
  return v;
}

/** Every client policy of every scenario: [file, name, policy entry as JSON]. */
function scenarioPolicies() {
  const out = [];
  for (const file of readdirSync(scenarios).filter((f) => f.endsWith(".ron")).sort()) {
    const doc = ronToJson(readFileSync(`${scenarios}/${file}`, "utf8"));
    const body = doc.Scenario ?? doc;
    for (const p of body.policies ?? []) out.push([file, p.name, JSON.stringify(p)]);
  }
  return out;
}

test("every scenario's client policies load as JSON files, or are refused with the place in the stack", { skip: !existsSync(scenarios) && "no scenarios/ beside this package" }, () => {
  const policies = scenarioPolicies();
  assert.ok(policies.length >= 20, `only ${policies.length} policies found`);
  let accepted = 0;
  const refused = [];
  for (const [file, name, json] of policies) {
    let f;
    try {
      f = reliable(async () => "ok", { policy: json });
    } catch (e) {
      // Refused: a layer the engine does not run (a Fallback, an Llm) or out of its order, named.
      assert.ok(e instanceof TypeError || e instanceof RangeError, `${file} ${name}: ${e}`);
      // Only what the engine itself does not run (as reliable_core::engine::Stack refuses it):
      // a Fallback, an Llm, a breaker per host (one host per downstream here), a fleet's store.
      assert.match(e.message, /^stack(\.inner)*(: the engine does not run a (Fallback|Llm) yet|\.scope: scope PerHost needs a balancer|\.(scope|budget_scope): scope Fleet shares state through a store this face does not have)/, `${file} ${name}: ${e.message}`);
      refused.push(`${file} ${name}: ${e.message}`);
      continue;
    }
    accepted++;
    f.dispose();
  }
  assert.ok(accepted >= policies.length / 2, `accepted ${accepted} of ${policies.length}:\n${refused.join("\n")}`);
});

test("a scenario's policy decides its calls: retries, its breaker opens and refuses", async () => {
  const doc = ronToJson(readFileSync(`${scenarios}/default.ron`, "utf8"));
  const entry = doc.Scenario.policies.find((p) => p.name === "budget + breaker + jitter");
  let calls = 0;
  const events = [];
  const f = reliable(
    async () => {
      calls++;
      return { status: 503, headers: { get: () => null } };
    },
    { policy: JSON.stringify(entry), clock: () => 0, sleep: async () => {}, onEvent: (e) => events.push(e.kind) },
  );
  // The budget (10% of first tries, none yet) refuses every retry: one attempt per call. The
  // breaker (failure rate 0.5 over at least 10 calls) opens on the tenth answer, and the call
  // ends at once; the next call is refused without being sent.
  for (let i = 0; i < 10; i++) await f().catch(() => {});
  assert.equal(calls, 10);
  assert.deepEqual(events.slice(0, 2), ["answer", "give-up"]);
  assert.ok(events.includes("breaker"), events.join(" "));
  const before = calls;
  await assert.rejects(f(), { name: "CircuitOpenError" });
  assert.equal(calls, before);
  f.dispose();
});

/** A `pub const NAME: &str = "..."` of core/src/policy.rs, its line continuations joined. */
function coreMessage(name) {
  const text = readFileSync(fileURLToPath(new URL("../../core/src/policy.rs", import.meta.url)), "utf8");
  const m = text.match(new RegExp(`pub const ${name}: &str = "((?:[^"\\\\]|\\\\[^])*)";`));
  assert.ok(m, `${name} not found in core/src/policy.rs`);
  return m[1].replace(/\\\n\s*/g, "");
}

test("a Fleet scope is refused with the core's reason, word for word: no store here", { skip: !existsSync(scenarios) && "no scenarios/ beside this package" }, () => {
  const fleet = { Fleet: { store: "orders" } };
  const call = { Call: { downstream: "api" } };
  for (const [stack, path] of [
    [{ Breaker: { config: { consecutive_failures: 3 }, scope: fleet, inner: call } }, "stack.scope"],
    [{ Retry: { policy: { backoff: { shape: { Constant: { delay: "0s" } } } }, budget: { Ratio: { ratio: 0.1, min_per_sec: 1, ttl: "10s", slots: 10 } }, budget_scope: fleet, inner: call } }, "stack.budget_scope"],
  ]) {
    assert.throws(() => reliable(async () => 1, { policy: { stack } }), (e) => e instanceof TypeError && e.message === `${path}: ${coreMessage("FLEET_NO_STORE")}`);
  }
});

test("a breaker with a time window opens on the failures of its span, as the simulator's do", async () => {
  let now = 0;
  let calls = 0;
  const breaker = { failure_rate: 0.5, minimum_calls: 3, window: { Time: { span: "10s", buckets: 10 } } };
  const f = reliable(
    async () => {
      calls++;
      return { status: 503, headers: { get: () => null } };
    },
    { policy: { stack: { Breaker: { config: breaker, inner: { Call: { downstream: "api" } } } } }, clock: () => now, sleep: async () => {} },
  );
  for (let i = 0; i < 2; i++) await f().catch(() => {});
  now = 11_000; // both failures leave the span: the third is alone, the breaker stays closed
  for (let i = 0; i < 3; i++) await f().catch(() => {});
  assert.equal(calls, 5);
  await assert.rejects(f(), { name: "CircuitOpenError" });
  assert.equal(calls, 5);
  f.dispose();
  // A time window the breaker cannot hold, or with no span or no bucket: a RangeError naming it.
  for (const [window, says] of [
    [{ Time: { span: "10s", buckets: 65 } }, /window\.buckets must be at most 64, got 65/],
    [{ Time: { span: "0s", buckets: 10 } }, /window\.span/],
    [{ Time: { span: "10s", buckets: 0 } }, /window\.buckets must not be zero/],
  ]) {
    const stack = { Breaker: { config: { ...breaker, window }, inner: { Call: { downstream: "api" } } } };
    assert.throws(() => reliable(async () => 1, { policy: { stack } }), (e) => e instanceof RangeError && says.test(e.message));
  }
});

test("every nesting the core's stack reader accepts loads: gates on either side of the retry, in any order", () => {
  const call = { Call: { downstream: "api", timeout: "1s" } };
  const retry = (inner) => ({ Retry: { policy: { max_attempts: 2, backoff: { shape: { Constant: { delay: "0s" } } } }, inner } });
  const limit = (inner) => ({ Limit: { config: { rule: "Fixed", initial: 4, min: 4, max: 4 }, inner } });
  const rate = (inner) => ({ RateLimit: { config: { rate: 10, period: "1s", burst: 10 }, inner } });
  const breaker = (inner) => ({ Breaker: { config: { consecutive_failures: 3 }, inner } });
  const throttle = (inner) => ({ Throttle: { config: {}, inner } });
  const ledger = (inner) => ({ Ledger: { config: { ratio: 0.1, min_per_sec: 1, ttl: "10s", slots: 10 }, inner } });
  const stacks = [
    throttle(retry(call)),
    limit(retry(breaker(call))),
    retry(rate(limit(throttle(breaker(call))))),
    breaker(ledger(throttle(retry(rate(call))))),
    rate(limit(breaker(throttle(call)))),
    retry(breaker(throttle(call))),
  ];
  for (const stack of stacks) reliable(async () => 1, { policy: { stack } }).dispose();
});

test("a policy's errors name the place in the stack", () => {
  const call = { Call: { downstream: "api", timeout: "1s" } };
  const cases = [
    [{ Fallback: [call] }, TypeError, /^stack: the engine does not run a Fallback yet/],
    [{ Retry: { policy: { max_attempts: 0, backoff: { shape: { Constant: { delay: "0s" } } } }, inner: call } }, RangeError, /^stack\.policy\.max_attempts/],
    [{ Retry: { policy: { max_attempts: 2, backoff: { shape: { Constant: { delay: "0s" } } }, tries: 3 }, inner: call } }, TypeError, /^stack\.policy: unknown field `tries`/],
    [{ Retry: { policy: { max_attempts: 2, backoff: { shape: { Constant: { delay: "soon" } } } }, inner: call } }, TypeError, /^stack\.policy\.backoff\.shape\.Constant\.delay: invalid duration "soon"/],
    [{ Breaker: { config: { failure_rate: 2 }, inner: { Retry: { policy: { backoff: { shape: { Constant: { delay: "0s" } } } }, inner: call } } } }, RangeError, /^stack\.config\.failure_rate/],
    [{ Hedge: { config: { delay: { Fixed: "10ms" }, max_hedges: 1 }, inner: { Retry: { policy: { backoff: { shape: { Constant: { delay: "0s" } } } }, inner: call } } } }, TypeError, /^stack\.inner: a Hedge sends copies of one call/],
    [{ Retry: { policy: { backoff: { shape: { Constant: { delay: "0s" } } } }, inner: { Ledger: { config: { ratio: 0.1, min_per_sec: 1, ttl: "10s", slots: 10 }, inner: call } } } }, TypeError, /^stack\.inner: a Ledger inside a Retry counts every retry as a first try/],
    [{ Breaker: { config: { consecutive_failures: 3 }, inner: { Retry: { policy: { backoff: { shape: { Constant: { delay: "0s" } } } }, inner: { Breaker: { config: { consecutive_failures: 3 }, inner: call } } } } } }, TypeError, /^stack\.inner\.inner: a second Breaker on the route/],
    [{ Ledger: { config: { ratio: 0.1, min_per_sec: 1, ttl: "10s", slots: 10 }, inner: { Retry: { policy: { backoff: { shape: { Constant: { delay: "0s" } } } }, budget: { Ratio: { ratio: 0.1, min_per_sec: 1, ttl: "10s", slots: 10 } }, inner: call } } } }, TypeError, /^stack: a Retry inside a Ledger draws from it/],
    [{ Retry: { policy: { backoff: { shape: { Constant: { delay: "0s" } } } }, inner: { Call: { downstream: 7 } } } }, TypeError, /^stack\.inner\.downstream: expected a string/],
    ["{not json", TypeError, /^policy: not JSON/],
  ];
  for (const [policy, kind, message] of cases) {
    assert.throws(() => reliable(async () => 1, { policy }), (e) => e instanceof kind && message.test(e.message), JSON.stringify(policy));
  }
  assert.throws(() => reliable(async () => 1, { policy: { Call: { downstream: "a" } }, maxAttempts: 3 }), /maxAttempts is set by the policy/);
});

// The TypeScript face of the cross-face conformance suite (format 1, described in the
// repository's conformance/README.md): each scripted sequence is fed through this package's
// public API in virtual time, and the decision trace is written as JSON lines, then compared
// byte for byte with the expected trace.
//
//   node conformance/run.mjs [SEQUENCES_DIR [TRACES_DIR]]    compare (exit 1 on any difference)
//   node conformance/run.mjs --print SEQUENCE.json           print one trace
//
// The sequence's policy block is written as a policy format stack (the layers nested as its
// `nesting` says, by default in the README's order,
// `Ledger(Retry(Throttle(Breaker(Limit(RateLimit(Hedge(Call)))))))` without those the block
// leaves out), exactly as the engine face of the suite writes it, and handed to
// `reliable.withContext(fn, { policy })`: the package reads it as it reads a policy file, and its
// engine decides everything.
//
// The runner owns the virtual clock, the timers (the package's `sleep` and `timer` are the
// runner's, so waits and copy timeouts run in virtual time) and the scripted downstream: each
// copy's answer arrives after its latency, as a Response-shaped value the package classes with
// the core's answer table. At one instant, answers arrive before the package's timers fire (as
// the engine face takes them). The runner writes what `onEvent` reports and decides nothing.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { basename, join } from "node:path";
import { Chaos, reliable } from "../dist/esm/entry.esm.js";

const ms = (n) => `${n}ms`;
// The stock nesting, outermost first (conformance/src/lib.rs, `STOCK_ORDER`).
const STOCK_ORDER = ["ledger", "retry", "throttle", "breaker", "limit", "rate_limit"];
// reliable_core::Duration::MAX as the policy format writes it.
const NEVER = "18446744073.709551615s";

function backoff(b) {
  return {
    shape: { Exponential: { base: ms(b.base_ms), factor: b.factor } },
    cap: b.cap_ms == null ? null : ms(b.cap_ms),
    jitter: "None",
    first_exponent: 0,
  };
}

/** The sequence's policy block as a policy format stack (conformance/src/lib.rs, engine.rs). */
export function stack(p) {
  let layer = { Call: { downstream: "conformance", timeout: p.hedge?.copy_timeout_ms == null ? null : ms(p.hedge.copy_timeout_ms) } };
  if (p.hedge != null) {
    const delay =
      p.hedge.quantile != null
        ? {
            Quantile: {
              quantile: p.hedge.quantile.q,
              window: p.hedge.quantile.window,
              min_samples: p.hedge.quantile.min_samples,
              min: ms(p.hedge.quantile.min_ms),
              max: ms(p.hedge.quantile.max_ms),
            },
          }
        : { Fixed: ms(p.hedge.delay_ms ?? 0) };
    layer = { Hedge: { config: { delay, max_hedges: p.hedge.max_hedges }, idempotent: p.idempotent === true, inner: layer } };
  }
  // Each layer the block sets, wrapping its inner one; nested as `nesting` says (outermost
  // first), by default in the stock order without those the block leaves out.
  const wraps = {};
  if (p.rate_limit != null) {
    const r = p.rate_limit;
    wraps.rate_limit = (inner) => ({ RateLimit: { config: { rate: r.rate, period: ms(r.period_ms), burst: r.burst }, inner } });
  }
  if (p.limit != null) {
    const l = p.limit;
    const config =
      l.max_in_flight != null
        ? { rule: "Fixed", initial: l.max_in_flight, min: l.max_in_flight, max: l.max_in_flight }
        : l.aimd != null
          ? { rule: { Aimd: { backoff: l.aimd.backoff, increase: l.aimd.increase } }, initial: l.aimd.initial, min: l.aimd.min, max: l.aimd.max }
          : {
              rule: { Gradient: { tolerance: l.gradient.tolerance, smoothing: l.gradient.smoothing, long_window: l.gradient.long_window, queue: l.gradient.queue } },
              initial: l.gradient.initial,
              min: l.gradient.min,
              max: l.gradient.max,
            };
    wraps.limit = (inner) => ({ Limit: { config, inner } });
  }
  if (p.breaker != null) {
    const b = p.breaker;
    const config = {
      consecutive_failures: b.consecutive_failures,
      open: { duration: ms(b.open_ms), growth: 1, jitter: 0 },
      half_open: { max_in_flight: 1, rule: { Consecutive: { successes: b.half_open_successes } }, probe_timeout: NEVER },
    };
    wraps.breaker = (inner) => ({ Breaker: { config, inner } });
  }
  if (p.throttle != null) {
    const t = p.throttle;
    const config = { k: t.k, window: ms(t.window_ms), buckets: t.buckets, max_rejection: t.max_rejection ?? null };
    wraps.throttle = (inner) => ({ Throttle: { config, inner } });
  }
  const budget =
    p.budget?.token_bucket == null
      ? null
      : {
          TokenBucket: {
            max_tokens: p.budget.token_bucket.max_tokens,
            initial_tokens: null,
            first_try_credit: 0,
            success_credit: p.budget.token_bucket.success_credit,
            retried_success_credit: null,
            failure_cost: p.budget.token_bucket.failure_cost,
            retry_cost: p.budget.token_bucket.retry_cost,
            retry_when: { AtLeast: p.budget.token_bucket.retry_cost },
          },
        };
  const policy = {
    max_attempts: p.max_attempts,
    attempt_timeout: p.attempt_timeout_ms == null ? null : ms(p.attempt_timeout_ms),
    deadline: p.deadline_ms == null ? null : ms(p.deadline_ms),
    backoff: backoff(p.backoff),
    throttled_backoff: p.throttled_backoff == null ? null : backoff(p.throttled_backoff),
    max_server_delay: ms(p.max_server_delay_ms),
    retry_timeouts: p.retry_timeouts,
    wait_on_refusal: p.wait_on_refusal,
  };
  wraps.retry = (inner) => ({ Retry: { policy, budget, inner } });
  if (p.ledger != null) {
    const config = { ratio: p.ledger.ratio, min_per_sec: p.ledger.min_per_sec, ttl: ms(p.ledger.ttl_ms), slots: 10 };
    wraps.ledger = (inner) => ({ Ledger: { config, inner } });
  }
  const order = p.nesting ?? STOCK_ORDER.filter((name) => wraps[name] !== undefined);
  for (const name of [...order].reverse()) {
    if (wraps[name] === undefined) throw new Error(`nesting: ${JSON.stringify(name)} is not set in the policy block`);
    layer = wraps[name](layer);
  }
  return layer;
}

/** Virtual time: timers ordered by (time, priority, order made); answers (priority 0) first. */
function virtualTime() {
  let now = 0;
  let seq = 0;
  const timers = [];
  const at = (t, priority, fire) => {
    const timer = { t, priority, seq: seq++, fire, live: true };
    timers.push(timer);
    return timer;
  };
  const sleep = (delay, signal) =>
    new Promise((resolve, reject) => {
      if (signal?.aborted) return reject(signal.reason);
      // A millisecond timer, as the other faces': a wake-up between two ticks fires at the next.
      const timer = at(Math.ceil(now + delay - 1e-9), 1, resolve);
      signal?.addEventListener("abort", () => {
        timer.live = false;
        reject(signal.reason);
      }, { once: true });
    });
  /** Runs timers until `done` settles; false if nothing was left to run while it had not. */
  const run = async (done) => {
    let over = false;
    done.then(() => (over = true), () => (over = true));
    for (let steps = 0; steps < 100_000; steps++) {
      // Let every promise reaction run before the next timer.
      await new Promise((r) => setImmediate(r));
      if (over) return true;
      const live = timers.filter((x) => x.live);
      if (live.length === 0) return false;
      live.sort((a, b) => a.t - b.t || a.priority - b.priority || a.seq - b.seq);
      const next = live[0];
      next.live = false;
      timers.splice(timers.indexOf(next), 1);
      now = Math.max(now, next.t);
      next.fire();
    }
    return false;
  };
  return { clock: () => now, set: (t) => (now = Math.max(now, t)), at, sleep, run, purge: () => (timers.length = 0) };
}

/** The policy block's `chaos` (the suite's README) as a `Chaos`: each strategy's rate, seed and
 * switch, its status with `retry_after_ms` and `should_retry`, or a transport failure. */
export function chaosOf(block) {
  if (block == null) return undefined;
  const opts = {};
  for (const [strategy, b] of Object.entries(block)) {
    if (strategy === "latency") {
      opts.latency = { rate: b.rate, seed: b.seed, enabled: b.enabled ?? true, delay: b.delay_ms };
      continue;
    }
    if (strategy !== "fault" && strategy !== "outcome") throw new Error(`chaos.${strategy}: not in format 1`);
    const o = { rate: b.rate, seed: b.seed, enabled: b.enabled ?? true };
    if (b.status != null) {
      o.status = b.status;
      if (b.retry_after_ms != null) o.retryAfter = b.retry_after_ms;
      if (b.should_retry != null) o.shouldRetry = b.should_retry;
    } else if (b.transport === "reset") o.reset = true;
    else o.hang = true;
    opts[strategy] = o;
  }
  return new Chaos(opts);
}

const REFUSER = { breaker: "breaker", throttle: "throttle", ledger: "ledger", limit: "limiter", "rate-limit": "limiter" };

/** The trace of one sequence, as lines of JSON. */
export async function trace(sequence) {
  if (sequence.format !== 1) throw new Error(`${sequence.name}: format ${sequence.format}, not 1`);
  const p = sequence.policy;
  const lines = [];
  const time = virtualTime();
  let index = 0;
  const emit = (ev, rest = {}) => lines.push(JSON.stringify({ t: time.clock(), call: index, ev, ...rest }));
  const draws = [...(p.throttle?.draws ?? [])];
  let sent = 0;
  // Attempts that reached the downstream (the chaos layer answers some): each takes the next answer.
  let reached = 0;
  let script = [];
  let gaveUp;
  const chaos = chaosOf(p.chaos);
  const wrapped = reliable.withContext(
    (ctx) => {
      sent++;
      if (ctx.attempt !== sent) throw new Error(`${sequence.name}: call ${index}: copy ${ctx.attempt} sent as ${sent}`);
      emit("attempt", { n: ctx.attempt });
      const answer = script[reached++];
      if (answer === undefined) throw new Error(`${sequence.name}: call ${index}: script exhausted`);
      // Never answers: only its timer (or the call's end) stops it.
      if (answer.transport === "timeout") return new Promise(() => {});
      return new Promise((resolve, reject) => {
        time.at(time.clock() + (answer.latency_ms ?? 0), 0, () => {
          if (answer.transport === "reset") return reject(new Error("connection reset"));
          const headers = Object.fromEntries(Object.entries(answer.headers ?? {}).map(([k, v]) => [k.toLowerCase(), v]));
          resolve({ status: answer.status, headers: { get: (name) => headers[name.toLowerCase()] ?? null } });
        });
      });
    },
    {
      policy: stack(p),
      uninterruptible: p.uninterruptible === true,
      clock: time.clock,
      sleep: time.sleep,
      timer: time.sleep,
      rng: () => 0.5,
      // The throttle's draws, in the order the core asks for them (then never rejected).
      throttleRng: () => (draws.length > 0 ? draws.shift() : 1),
      onOpen: (error) => error,
      chaos,
      onEvent: (e) => {
        switch (e.kind) {
          case "chaos":
            // Delayed: its attempt line comes when it reaches the downstream.
            if (e.event === "Chaos.OnLatency") return emit("chaos", { n: e.copy, event: e.event, draw: e.attempt, delay_ms: Math.round(e.delay) });
            // The chaos layer answered this copy: it counts as sent, never reaches the script.
            if (e.event !== "Chaos.OnFault" && e.event !== "Chaos.OnOutcome") return;
            sent++;
            if (e.copy !== sent) throw new Error(`${sequence.name}: call ${index}: copy ${e.copy} injected as ${sent}`);
            return emit("chaos", { n: sent, event: e.event, draw: e.attempt });
          case "answer":
            return emit("answer", { n: e.attempt, class: e.class, accepted: e.accepted });
          case "retry":
            return emit("retry", { delay_ms: Math.floor(e.delay) });
          case "refused":
            return emit("refused", { by: REFUSER[e.by] });
          case "hedge":
            return emit("hedge", { n: e.attempt });
          case "no-hedge":
            return emit("no-hedge", { by: REFUSER[e.by] });
          case "lost":
            return emit("cancelled", { n: e.attempt });
          case "limit":
            return emit("limit", { from: e.from, to: e.to });
          case "breaker":
            return emit("breaker", { from: e.from, to: e.to });
          case "give-up":
            gaveUp = e.reason;
        }
      },
    },
  );
  try {
    for (const [i, call] of sequence.calls.entries()) {
      index = i;
      time.set(call.start_ms);
      sent = 0;
      reached = 0;
      gaveUp = undefined;
      script = call.answers;
      for (const [strategy, on] of Object.entries(call.chaos ?? {})) {
        if (chaos === undefined) throw new Error(`${sequence.name}: call ${i}: chaos switches without a chaos block`);
        chaos.setEnabled(strategy, on);
      }
      let result;
      let error;
      const done = wrapped().then(
        (v) => (result = v),
        (e) => (error = e),
      );
      if (!(await time.run(done))) throw new Error(`${sequence.name}: call ${i}: stuck at ${time.clock()} ms`);
      // Whatever the call left behind (a hung copy's promise) is not this call's any more.
      time.purge();
      if (result?.name === "CircuitOpenError" || error?.name === "RefusedError") emit("end", { result: "refused", attempts: sent });
      else if (gaveUp) emit("end", { result: "gave-up", reason: gaveUp, attempts: sent });
      else if (error !== undefined) throw error;
      else emit("end", { result: "ok", attempts: sent });
    }
  } finally {
    wrapped.dispose();
    chaos?.dispose();
  }
  return lines;
}

async function main(argv) {
  if (argv[0] === "--print") {
    for (const line of await trace(JSON.parse(readFileSync(argv[1], "utf8")))) console.log(line);
    return 0;
  }
  const here = new URL(".", import.meta.url).pathname;
  const sequences = argv[0] ?? join(here, "sequences");
  const traces = argv[1] ?? join(sequences, "..", "traces");
  let ran = 0;
  let failed = 0;
  const waiting = [];
  // Sequences this face does not follow yet: each must differ (none are listed today).
  const pendingFile = join(sequences, "..", "pending.json");
  const pending = new Set(
    existsSync(pendingFile) ? JSON.parse(readFileSync(pendingFile, "utf8")).faces.typescript ?? [] : [],
  );
  for (const file of readdirSync(sequences).filter((f) => f.endsWith(".json")).sort()) {
    const sequence = JSON.parse(readFileSync(join(sequences, file), "utf8"));
    ran++;
    let got;
    try {
      got = (await trace(sequence)).map((l) => l + "\n").join("");
    } catch (e) {
      failed++;
      console.log(`FAILED  ${sequence.name}: ${e.message}`);
      continue;
    }
    const want = readFileSync(join(traces, basename(file, ".json") + ".jsonl"), "utf8");
    if (pending.has(sequence.name)) {
      if (got === want) {
        failed++;
        console.log(`LISTED  ${sequence.name}: listed as pending in pending.json, but the face now follows it: unlist it`);
      } else {
        waiting.push(sequence.name);
        console.log(`pending ${sequence.name}`);
      }
    } else if (got !== want) {
      failed++;
      const [g, w] = [got.split("\n"), want.split("\n")];
      const i = g.findIndex((line, k) => line !== w[k]);
      console.log(`DIFFERS ${sequence.name}, line ${i + 1}:\n  expected ${w[i]}\n  got      ${g[i]}`);
    } else {
      console.log(`same    ${sequence.name}`);
    }
  }
  console.log(`${ran} sequences run, ${ran - failed - waiting.length} same, ${failed} different, ${waiting.length} pending`);
  if (waiting.length) console.log(`pending: ${waiting.join(", ")}`);
  return failed === 0 && ran > 0 ? 0 : 1;
}

if (process.argv[1] && new URL(import.meta.url).pathname === process.argv[1]) {
  process.exitCode = await main(process.argv.slice(2));
}

// The TypeScript face of the cross-face conformance suite (format 1, described in the
// repository's conformance/README.md): each scripted sequence is fed through this package's
// public API (`reliable` + `CircuitBreaker`) in virtual time, and the decision trace is written
// as JSON lines, then compared byte for byte with the expected trace.
//
//   node conformance/run.mjs [SEQUENCES_DIR [TRACES_DIR]]    compare (exit 1 on any difference)
//   node conformance/run.mjs --print SEQUENCE.json           print one trace
//
// What the seed's API cannot express is refused by name and listed, never run half-way: a
// deadline, a throttled backoff, retry_timeouts false, wait_on_refusal, a budget, a throttle, and
// any policy field this runner does not know (hedging, the ledger, limits).
// The block's breaker (N failures in a row, open_ms, M probe successes, one probe at a time) is
// the seed's breaker with window N and failureRate 1 (the last N calls all failed is N failures
// in a row) and probe M; calls in a sequence run one after another, so the seed's ungated
// half-open admits one probe at a time as well.
//
// The runner owns the virtual clock and the scripted downstream. The attempt timer is the
// runner's too (`timeout: Infinity` in the wrapper, and an answer later than the timer becomes a
// TimeoutError at the timer), because the package's own timer is a real setTimeout. Statuses and
// headers are classed by the package (a Response-shaped answer, classed by the core's answer
// table in the WebAssembly module); the runner reads the class and whether the backend accepted
// the answer back from `onEvent`, and decides neither.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { basename, join } from "node:path";
import { CircuitBreaker, CircuitOpenError, reliable } from "../dist/esm/entry.esm.js";

/** Why a sequence cannot be expressed in the seed's API, or null. */
// The policy fields this runner reads; any other field that is set (a later optional field of
// format 1: hedging, the ledger, limits) is not expressible in the seed's API.
const KNOWN_FIELDS = new Set([
  "max_attempts", "attempt_timeout_ms", "deadline_ms", "backoff", "throttled_backoff",
  "max_server_delay_ms", "retry_timeouts", "wait_on_refusal", "breaker", "budget",
]);

export function inexpressible(policy) {
  for (const field of Object.keys(policy).sort()) {
    if (!KNOWN_FIELDS.has(field) && policy[field] != null && policy[field] !== false) return field;
  }
  if (policy.deadline_ms != null) return "deadline_ms";
  if (policy.throttled_backoff != null) return "throttled_backoff";
  if (policy.retry_timeouts !== true) return "retry_timeouts";
  if (policy.wait_on_refusal !== false) return "wait_on_refusal";
  if (policy.budget != null) return "budget";
  if (policy.throttle != null) return "throttle";
  return null;
}

/** The trace of one sequence, as lines of JSON. */
export async function trace(sequence) {
  if (sequence.format !== 1) throw new Error(`${sequence.name}: format ${sequence.format}, not 1`);
  const p = sequence.policy;
  const lines = [];
  let now = 0;
  const clock = () => now;
  const emit = (call, ev, rest) => lines.push(JSON.stringify({ t: now, call, ev, ...rest }));
  const breaker =
    p.breaker == null
      ? undefined
      : new CircuitBreaker({
          failureRate: 1,
          window: p.breaker.consecutive_failures,
          cooldown: p.breaker.open_ms,
          probe: p.breaker.half_open_successes,
          clock,
        });
  let known = "closed";
  const watchBreaker = (call) => {
    const state = breaker?.state ?? "closed";
    if (state !== known) emit(call, "breaker", { from: known, to: state });
    known = state;
  };

  for (const [index, call] of sequence.calls.entries()) {
    now = Math.max(now, call.start_ms);
    let sent = 0;
    let gaveUp;
    const answers = [...call.answers];
    const timer = p.attempt_timeout_ms;
    const downstream = async () => {
      watchBreaker(index);
      sent++;
      emit(index, "attempt", { n: sent });
      const answer = answers.shift();
      if (answer === undefined) throw new Error(`${sequence.name}: call ${index}: script exhausted`);
      const latency = answer.transport === "timeout" ? Infinity : (answer.latency_ms ?? 0);
      if (timer != null && timer < latency) {
        now += timer;
        throw Object.assign(new Error("attempt timed out"), { name: "TimeoutError" });
      }
      if (latency === Infinity) throw new Error(`${sequence.name}: a "timeout" answer with no timer`);
      now += latency;
      if (answer.transport === "reset") throw new Error("connection reset");
      const headers = Object.fromEntries(Object.entries(answer.headers ?? {}).map(([k, v]) => [k.toLowerCase(), v]));
      return { status: answer.status, headers: { get: (name) => headers[name.toLowerCase()] ?? null } };
    };
    let lastStatus;
    const wrapped = reliable(
      async (ctx) => {
        const res = await downstream(ctx);
        lastStatus = res.status;
        return res;
      },
      {
        breaker,
        timeout: Infinity,
        maxAttempts: p.max_attempts,
        baseDelay: p.backoff.base_ms,
        factor: p.backoff.factor,
        jitter: 0,
        maxDelay: p.backoff.cap_ms ?? Infinity,
        maxServerDelay: p.max_server_delay_ms,
        clock,
        sleep: async (ms) => {
          watchBreaker(index);
          emit(index, "retry", { delay_ms: ms });
          now += ms;
        },
        onOpen: (error) => {
          watchBreaker(index);
          emit(index, "refused", { by: "breaker" });
          return error;
        },
        onEvent: (e) => {
          if (e.kind === "answer") {
            emit(index, "answer", { n: e.attempt, class: e.class, accepted: e.accepted });
            lastStatus = undefined;
            watchBreaker(index);
          } else {
            gaveUp = e.reason;
          }
        },
      },
    );
    let result;
    try {
      result = await wrapped();
    } catch (error) {
      if (!gaveUp) throw error;
    }
    watchBreaker(index);
    if (result instanceof CircuitOpenError) emit(index, "end", { result: "refused", attempts: sent });
    else if (gaveUp) emit(index, "end", { result: "gave-up", reason: gaveUp, attempts: sent });
    else emit(index, "end", { result: "ok", attempts: sent });
    wrapped.dispose();
  }
  breaker?.dispose();
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
  const skipped = [];
  const waiting = [];
  // Sequences this face still decides with its own loop, not the core's engine: each must differ.
  const pendingFile = join(sequences, "..", "pending.json");
  const pending = new Set(
    existsSync(pendingFile) ? JSON.parse(readFileSync(pendingFile, "utf8")).faces.typescript ?? [] : [],
  );
  for (const file of readdirSync(sequences).filter((f) => f.endsWith(".json")).sort()) {
    const sequence = JSON.parse(readFileSync(join(sequences, file), "utf8"));
    const why = inexpressible(sequence.policy);
    if (why) {
      skipped.push(`${sequence.name} (${why})`);
      continue;
    }
    ran++;
    const got = (await trace(sequence)).map((l) => l + "\n").join("");
    const want = readFileSync(join(traces, basename(file, ".json") + ".jsonl"), "utf8");
    if (pending.has(sequence.name)) {
      if (got === want) {
        failed++;
        console.log(`LISTED  ${sequence.name}: listed as pending the engine in pending.json, but the face now follows it: unlist it`);
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
  if (waiting.length) console.log(`decided by the face's own loop, not yet the engine's: ${waiting.join(", ")}`);
  if (skipped.length) console.log(`not expressible in the seed's API, not run: ${skipped.join(", ")}`);
  return failed === 0 && ran > 0 ? 0 : 1;
}

if (process.argv[1] && new URL(import.meta.url).pathname === process.argv[1]) {
  process.exitCode = await main(process.argv.slice(2));
}

// reliablekit: the seed library's API (CircuitBreaker, reliable, expBackoff, CircuitOpenError) in
// TypeScript idiom. Every decision (admit or reject, trip, recover, retry or give up, how long to
// wait) is made by reliable-core compiled to WebAssembly; this file runs the user's async
// function, the timers and the AbortSignals, and turns options into the module's numbers.
//
// Durations are milliseconds, as with setTimeout. Clocks return milliseconds (performance.now()
// by default).

import type { Abi } from "./abi.js";

let abi: Abi;

/** Binds the instantiated module; called once by the entry point before anything is exported. */
export function bind(instance: WebAssembly.Instance): void {
  abi = instance.exports as unknown as Abi;
}

/** The state of a breaker, as the seed's state diagram names it. */
export type BreakerState = "closed" | "open" | "half-open" | "forced-open" | "disabled";
const STATES: readonly BreakerState[] = ["closed", "open", "half-open", "forced-open", "disabled"];

/** A clock in milliseconds. */
export type Clock = () => number;
/** A uniform random number in [0, 1). */
export type Rng = () => number;
/** Waits `ms` milliseconds; should reject with `signal.reason` if the signal aborts first. */
export type Sleep = (ms: number, signal?: AbortSignal) => Promise<void>;

const defaultClock: Clock = () => performance.now();

// ---------------------------------------------------------------------------------------------
// Options: types are checked here (a wrong type is a TypeError naming the option); ranges are
// the core's own rules, and its refusal comes back as a RangeError naming the option.

/** The core's field names, as the options that set them. */
const OPTION_OF: Record<string, string> = {
  failure_rate: "failureRate",
  minimum_calls: "window",
  "window.calls": "window",
  "open.duration": "cooldown",
  "half_open.rule.successes": "probe",
  max_attempts: "maxAttempts",
  attempt_timeout: "timeout",
  "shape.base": "baseDelay",
  "backoff.shape.base": "baseDelay",
  "shape.factor": "factor",
  "backoff.shape.factor": "factor",
  "jitter.fraction": "jitter",
  "backoff.jitter.fraction": "jitter",
  cap: "maxDelay",
  "backoff.cap": "maxDelay",
};

function describe(value: unknown): string {
  if (typeof value === "string") return JSON.stringify(value);
  if (typeof value === "number" || typeof value === "boolean" || value == null) return String(value);
  return typeof value;
}

function number(name: string, value: unknown, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== "number" || Number.isNaN(value)) {
    throw new TypeError(`${name} must be a number, got ${describe(value)}`);
  }
  return value;
}

/** An integer the module reads as a `u32` (WebAssembly would otherwise wrap it silently). */
function count(name: string, value: unknown, fallback: number): number {
  const n = number(name, value, fallback);
  if (!Number.isInteger(n) || n < 0 || n > 0xffff_ffff) {
    throw new RangeError(`${name} must be a whole number in [0, 4294967295], got ${n}`);
  }
  return n;
}

/** A duration in ms; `Infinity` (or `null`) means none, passed to the module as -1. */
function duration(name: string, value: unknown, fallback: number): number {
  if (value === null) return -1;
  const n = number(name, value, fallback);
  if (n === Infinity) return -1;
  if (!Number.isFinite(n) || n < 0) {
    throw new RangeError(`${name} must be a finite number of milliseconds >= 0 (or Infinity for none), got ${n}`);
  }
  return n;
}

function func<T>(name: string, value: unknown, fallback: T): T {
  if (value === undefined) return fallback;
  if (typeof value !== "function") throw new TypeError(`${name} must be a function, got ${describe(value)}`);
  return value as T;
}

function options(name: string, value: unknown): Record<string, unknown> {
  if (value === undefined) return {};
  if (typeof value !== "object" || value === null) {
    throw new TypeError(`${name} must be an object, got ${describe(value)}`);
  }
  return value as Record<string, unknown>;
}

/** The module's latest refusal as an Error naming the option (or a plain Error for the rest). */
function refusal(): Error {
  const kind = abi.rk_error_kind();
  if (kind === 11) return new RangeError("too many live CircuitBreakers (256): dispose() the ones no longer used");
  if (kind === 12) return new RangeError("too many live reliable() wrappers (256): dispose() the ones no longer used");
  if (kind === 13) return new RangeError("too many calls in flight at once (8192)");
  if (kind !== 1) return new Error(`reliablekit: internal error ${kind} (a disposed breaker or wrapper?)`);
  const bytes = new Uint8Array(abi.memory.buffer, abi.rk_error_ptr(), abi.rk_error_len());
  const [field, why] = new TextDecoder().decode(bytes).split("\0");
  const option = OPTION_OF[field] ?? field;
  const [a, b, c] = [0, 1, 2].map((i) => abi.rk_error_number(i));
  switch (abi.rk_error_problem()) {
    case 1:
      return new RangeError(`${option} must be a fraction in ${b ? "[" : "("}0, 1${c ? "]" : ")"}, got ${a}`);
    case 2:
      return new RangeError(`${option} must be a finite number in [${b}, ${c}], got ${a}`);
    case 3:
      return new RangeError(`${option} must not be zero`);
    case 4:
      return new RangeError(`${option} must be at most ${b}, got ${a}`);
    default:
      return new RangeError(`${option}: ${why ?? "refused"}`);
  }
}

function checked(handle: number): number {
  if (handle < 0 || Number.isNaN(handle)) throw refusal();
  return handle;
}

// Frees module slots of breakers and wrappers the program dropped without dispose().
const freeBreaker = new FinalizationRegistry<number>((h) => abi.rk_breaker_free(h));
const freePolicy = new FinalizationRegistry<number>((h) => abi.rk_policy_free(h));

// ---------------------------------------------------------------------------------------------

/** Options of {@link CircuitBreaker}; the seed's names, durations in milliseconds. */
export interface CircuitBreakerOptions {
  /** Trip when at least this share of the window's calls failed, in (0, 1]. Default 0.5. */
  failureRate?: number;
  /** The window: the last this many calls (at most 256); decides only once it is full. Default 20. */
  window?: number;
  /** How long the breaker stays open before it lets probes through, in ms. Default 30 000. */
  cooldown?: number;
  /** Half-open: this many successful probes in a row close it; any failure re-opens it. Default 3. */
  probe?: number;
  /** The clock in ms. Default `performance.now`. */
  clock?: Clock;
  /** Accepted for the seed's signature; the seed's breaker draws nothing at random (no cooldown jitter). */
  rng?: Rng;
}

/**
 * The seed's sliding-window circuit breaker: closed → open when the failure rate of the last
 * `window` calls reaches `failureRate`; open → half-open after `cooldown`; half-open → closed
 * after `probe` successes in a row, → open again on any failure. Every call in half-open is a
 * probe (no gate), as in the seed.
 */
export class CircuitBreaker {
  /** @internal the module's handle */
  readonly handle: number;
  /** The clock it reads. */
  readonly clock: Clock;

  constructor(opts?: CircuitBreakerOptions) {
    const o = options("CircuitBreaker options", opts);
    const failureRate = number("failureRate", o.failureRate, 0.5);
    const window = count("window", o.window, 20);
    const cooldown = duration("cooldown", o.cooldown, 30_000);
    const probe = count("probe", o.probe, 3);
    this.clock = func<Clock>("clock", o.clock, defaultClock);
    func<Rng>("rng", o.rng, Math.random);
    this.handle = checked(abi.rk_breaker_new(failureRate, window, cooldown < 0 ? Infinity : cooldown, probe));
    freeBreaker.register(this, this.handle, this);
  }

  /** The state now (an open breaker whose cooldown is over reads as half-open). */
  get state(): BreakerState {
    return STATES[checked(abi.rk_breaker_state(this.handle, this.clock()))];
  }

  /** Frees its slot in the module now rather than at garbage collection. Do not use it afterwards. */
  dispose(): void {
    freeBreaker.unregister(this);
    abi.rk_breaker_free(this.handle);
  }
}

/** A call the breaker refused; `retryAfter` is the cooldown left, in ms. */
export class CircuitOpenError extends Error {
  readonly retryAfter: number;
  constructor(retryAfter: number) {
    super(`circuit open; retry after ${Math.ceil(retryAfter)} ms`);
    this.name = "CircuitOpenError";
    this.retryAfter = retryAfter;
  }
}

/** Options of {@link expBackoff}. */
export interface BackoffOptions {
  /** The first delay, ms. Default 200. */
  base?: number;
  /** Growth per attempt. Default 2. */
  factor?: number;
  /** Relative jitter: the delay is drawn from [1 − jitter, 1 + jitter] of itself. Default 0.1. */
  jitter?: number;
  /** Default `Math.random`. */
  rng?: Rng;
}

/** The wait after failed attempt `attempt` (from 1): `base · factor^(attempt−1) · U[1 − jitter, 1 + jitter]` ms. */
export function expBackoff(attempt: number, opts?: BackoffOptions): number {
  const o = options("expBackoff options", opts);
  const a = count("attempt", attempt, 1);
  const rng = func<Rng>("rng", o.rng, Math.random);
  const base = number("base", o.base, 200);
  const factor = number("factor", o.factor, 2);
  const jitter = number("jitter", o.jitter, 0.1);
  const ms = abi.rk_exp_backoff(a, base, factor, jitter, rng());
  if (Number.isNaN(ms)) {
    const e = refusal();
    throw Object.assign(e, { message: e.message.replace(/^baseDelay/, "base") });
  }
  return ms;
}

// ---------------------------------------------------------------------------------------------

/** What the wrapped function gets first: the attempt's signal and its number (from 1). */
export interface AttemptContext {
  /** Aborts when the attempt times out or the caller's signal aborts: pass it to `fetch`. */
  readonly signal: AbortSignal;
  readonly attempt: number;
}

/** Options of {@link reliable}; the seed's names, durations in milliseconds. */
export interface ReliableOptions<A extends unknown[], R> {
  /** Every attempt asks it first; each result is reported to it. Default: none. */
  breaker?: CircuitBreaker;
  /** Per-attempt timeout, ms; `Infinity` for none. Default 8000. */
  timeout?: number;
  /** Attempts in all, the first included. Default 5. */
  maxAttempts?: number;
  /** Backoff base, ms. Default 200. */
  baseDelay?: number;
  /** Backoff growth. Default 2. */
  factor?: number;
  /** Relative backoff jitter. Default 0.1. */
  jitter?: number;
  /** The longest backoff delay, ms (jitter included). Default `Infinity`: uncapped, as in the seed. */
  maxDelay?: number;
  /** The longest `Retry-After` honoured, ms (longer ones are clamped). Default 30 000. */
  maxServerDelay?: number;
  /** How to wait between attempts. Default: a timer, cancelled by the caller's signal. */
  sleep?: Sleep;
  /** Jitter's randomness. Default `Math.random`. */
  rng?: Rng;
  /** The clock, ms. Default: the breaker's, else `performance.now`. */
  clock?: Clock;
  /** While the breaker is open: answer with this instead of throwing {@link CircuitOpenError}. */
  onOpen?: (error: CircuitOpenError, ...args: A) => R | Promise<R>;
  /** Told each attempt's class (after the breaker has recorded it) and why a call gave up: for metrics and traces. */
  onEvent?: (event: ReliableEvent) => void;
}

/** How an attempt ended, as the core classes it. */
export type AnswerClass = "ok" | "transient" | "timeout" | "throttled" | "fatal" | "dont-retry";
/** Why a call stopped retrying, in the core's words (the core's own names, passed on as they are). */
export type GiveUpReason =
  | "max-attempts"
  | "fatal"
  | "dont-retry"
  | "timeout-not-retried"
  | "deadline"
  | "budget"
  | "finished";
/** What {@link ReliableOptions.onEvent} is told. */
export type ReliableEvent =
  | {
      kind: "answer";
      attempt: number;
      class: AnswerClass;
      /** Whether the backend accepted it (the core's rule: what an adaptive throttle counts). */
      accepted: boolean;
    }
  | { kind: "give-up"; attempt: number; reason: GiveUpReason };

const CLASS_NAMES: readonly AnswerClass[] = ["transient", "timeout", "throttled", "fatal", "dont-retry"];
/** The core's name of the latest give-up reason (read from the module, not mapped here). */
function gaveUp(): GiveUpReason {
  const bytes = new Uint8Array(abi.memory.buffer, abi.rk_gave_up_ptr(), abi.rk_gave_up_len());
  return new TextDecoder().decode(bytes) as GiveUpReason;
}

/** A wrapped function: call it as the original (without the context), or with a signal of your own. */
export interface Reliable<A extends unknown[], R> {
  (...args: A): Promise<R>;
  /** Cancels the whole call (the attempt in flight and any wait) when `signal` aborts. */
  withSignal(signal: AbortSignal | undefined, ...args: A): Promise<R>;
  /** Frees its slot in the module now rather than at garbage collection. */
  dispose(): void;
}

// What `rk_answer` answers (js/wasm/src/lib.rs, `answer_meaning`): the class's code in the low
// four bits (the index in CLASS_NAMES, OK for a success), and flags of its consequences.
const CLASS_BITS = 15;
const OK = 15;
const DELAY_HONOURED = 16;
const BREAKER_IGNORES = 32;
const ACCEPTED = 64;
// What `rk_answer` reads instead of a status: the attempt's timer fired, or it threw before any answer.
const TIMED_OUT = -1;
const NO_ANSWER = -2;
// Breaker outcomes.
const FAILURE = 1;
const IGNORED = 2;

/** A `fetch` Response, or anything shaped like one. */
interface ResponseLike {
  status: number;
  headers: { get(name: string): string | null };
  body?: { cancel?(): Promise<void> } | null;
}

function isResponse(value: unknown): value is ResponseLike {
  return (
    typeof value === "object" &&
    value !== null &&
    Number.isInteger((value as ResponseLike).status) &&
    (value as ResponseLike).status >= 0 &&
    typeof (value as ResponseLike).headers?.get === "function"
  );
}

/** A decimal number, as Rust's `f64` parser reads one (no hex, no `Infinity`). */
const DECIMAL = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/;

/** A finite number >= 0 from `text`, or -1 (what the core reads as no delay). */
function delay(text: string, scale: number): number {
  if (!DECIMAL.test(text)) return -1;
  const ms = Number(text) * scale;
  return Number.isFinite(ms) && ms >= 0 ? ms : -1;
}

/**
 * `Retry-After` in ms: delay-seconds (a decimal such as `1.5` too) or an HTTP date (a past one is
 * 0); -1 when absent or unreadable (negative, not a number, not a date), as the Rust faces read it.
 */
export function retryAfterMs(header: string | null, now: number = Date.now()): number {
  if (header == null) return -1;
  const text = header.trim();
  if (/^\d/.test(text)) return delay(text, 1000);
  // HTTP dates all start with a day name; Date.parse alone would read "-3" as a year.
  if (!/^[A-Za-z]{3}/.test(text)) return -1;
  const at = Date.parse(text);
  return Number.isNaN(at) ? -1 : Math.max(0, at - now);
}

/** The server's delay in ms: `retry-after-ms`, else `Retry-After`; -1 for none. */
function serverDelayOf(r: ResponseLike): number {
  const ms = r.headers.get("retry-after-ms");
  const delayMs = ms == null ? -1 : delay(ms.trim(), 1);
  return delayMs >= 0 ? delayMs : retryAfterMs(r.headers.get("retry-after"));
}

/**
 * What a Response means: its status and headers parsed into plain numbers (`serverDelay` from
 * {@link serverDelayOf}; `x-should-retry`), then classed by the core's one table of answers in
 * the module, never here.
 */
function responseMeaning(r: ResponseLike, serverDelay: number): number {
  const should = r.headers.get("x-should-retry")?.trim().toLowerCase();
  const shouldRetry = should === "true" ? 1 : should === "false" ? 0 : -1;
  // Clamped here: WebAssembly would wrap a larger number into an i32 (the core reads any status
  // over 65535 as 65535).
  const status = Math.min(r.status, 0xffff);
  // No overload marker: one would be in the body, which is the caller's to read.
  return abi.rk_answer(status, serverDelay, shouldRetry, 0);
}

/** The attempt timed out (its signal's reason, and the error thrown when the function ignores it). */
function timeoutError(ms: number): Error {
  const e = new Error(`attempt timed out after ${ms} ms`);
  e.name = "TimeoutError";
  return e;
}

const defaultSleep: Sleep = (ms, signal) =>
  new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });

/** The context handed to an attempt; its signal is made only if the function reads it. */
class Attempt implements AttemptContext {
  controller: AbortController | undefined;
  constructor(readonly attempt: number) {}
  get signal(): AbortSignal {
    this.controller ??= new AbortController();
    return this.controller.signal;
  }
  abort(reason: unknown): void {
    this.controller ??= new AbortController();
    this.controller.abort(reason);
  }
}

/** Runs one attempt: the function, raced against its timeout and the caller's signal. */
function runAttempt<A extends unknown[], R>(
  fn: (ctx: AttemptContext, ...args: A) => R | Promise<R>,
  ctx: Attempt,
  args: A,
  timeout: number,
  caller: AbortSignal | undefined,
): Promise<R> {
  if (timeout < 0 && caller === undefined) return Promise.resolve(fn(ctx, ...args));
  return new Promise<R>((resolve, reject) => {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const stop = (reason: unknown) => {
      ctx.abort(reason);
      finish();
      reject(reason);
    };
    const onAbort = () => stop(caller?.reason);
    const finish = () => {
      if (timer !== undefined) clearTimeout(timer);
      caller?.removeEventListener("abort", onAbort);
    };
    if (timeout >= 0) timer = setTimeout(() => stop(timeoutError(timeout)), timeout);
    caller?.addEventListener("abort", onAbort, { once: true });
    let pending: Promise<R>;
    try {
      pending = Promise.resolve(fn(ctx, ...args));
    } catch (e) {
      pending = Promise.reject(e);
    }
    pending.then(
      (value) => {
        finish();
        resolve(value);
      },
      (error) => {
        finish();
        reject(error);
      },
    );
  });
}

/**
 * Wraps `fn` with the seed's timeout + exponential backoff + circuit breaker + fallback. `fn`
 * gets an {@link AttemptContext} first (pass `ctx.signal` to `fetch` so a timed-out attempt is
 * really cancelled), then the wrapped function's arguments.
 *
 * A thrown error is a failed attempt (a timeout counts as one). A returned `Response` is classed by
 * the core's answer table: 429, 503 and 529 (and 408, 409 or a 5xx that gives a delay) are
 * throttled and their `retry-after-ms` or `Retry-After` honoured, 408, 409 and other 5xx retried
 * with backoff, `x-should-retry` obeyed, and another 4xx ends the call at once without counting
 * against the downstream. When the attempts run out, the last error is thrown (or the last
 * Response returned).
 */
export function reliable<A extends unknown[], R>(
  fn: (ctx: AttemptContext, ...args: A) => R | Promise<R>,
  opts?: ReliableOptions<A, R>,
): Reliable<A, R> {
  if (typeof fn !== "function") throw new TypeError(`fn must be a function, got ${describe(fn)}`);
  const o = options("reliable options", opts);
  if (o.breaker !== undefined && !(o.breaker instanceof CircuitBreaker)) {
    throw new TypeError(`breaker must be a CircuitBreaker, got ${describe(o.breaker)}`);
  }
  const breaker = o.breaker as CircuitBreaker | undefined;
  const timeout = duration("timeout", o.timeout, 8000);
  const maxAttempts = count("maxAttempts", o.maxAttempts, 5);
  const baseDelay = number("baseDelay", o.baseDelay, 200);
  const factor = number("factor", o.factor, 2);
  const jitter = number("jitter", o.jitter, 0.1);
  const maxDelay = duration("maxDelay", o.maxDelay, Infinity);
  const maxServerDelay = duration("maxServerDelay", o.maxServerDelay, 30_000);
  const sleep = func<Sleep>("sleep", o.sleep, defaultSleep);
  const rng = func<Rng>("rng", o.rng, Math.random);
  const clock = func<Clock>("clock", o.clock, breaker?.clock ?? defaultClock);
  const onOpen = func<ReliableOptions<A, R>["onOpen"]>("onOpen", o.onOpen, undefined);
  const onEvent = func<ReliableOptions<A, R>["onEvent"]>("onEvent", o.onEvent, undefined);
  const policy = checked(
    abi.rk_policy_new(
      maxAttempts,
      timeout,
      baseDelay,
      factor,
      jitter,
      maxDelay,
      maxServerDelay < 0 ? Infinity : maxServerDelay,
    ),
  );

  /**
   * The whole call. `first`, when given, is a first attempt already started by the fast path
   * (call `id`, its permit held), whose result is read from it instead of running one.
   */
  async function call(caller: AbortSignal | undefined, args: A, id = -1, first?: Promise<R>): Promise<R> {
    // Read from the breaker object, so a live wrapper keeps its breaker from being collected.
    const b = breaker === undefined ? -1 : breaker.handle;
    if (first === undefined) {
      caller?.throwIfAborted();
      // The first attempt's permit comes with the call (one crossing into the module).
      const begun = abi.rk_begin(policy, b, clock());
      if (begun < 0) return rejected(begun, args);
      id = begun;
    }
    let ended = false;
    try {
      for (let attempt = 1; ; attempt++) {
        if (attempt > 1 && b >= 0) {
          const refused = abi.rk_acquire(b, id, clock());
          if (refused >= 0 || Number.isNaN(refused)) return await rejected(Number.isNaN(refused) ? -1 : -2 - refused, args);
        }
        let value: R;
        let meaning: number;
        let serverDelay = -1;
        let failure: unknown;
        try {
          value = await (attempt === 1 && first ? first : runAttempt(fn, new Attempt(attempt), args, timeout, caller));
          if (isResponse(value)) {
            serverDelay = serverDelayOf(value);
            meaning = responseMeaning(value, serverDelay);
          } else {
            meaning = OK;
          }
        } catch (error) {
          if (caller?.aborted) throw caller.reason;
          value = undefined as R;
          failure = error;
          const timedOut = error instanceof Error && error.name === "TimeoutError";
          meaning = abi.rk_answer(timedOut ? TIMED_OUT : NO_ANSWER, -1, -1, 0);
        }
        const now = clock();
        const errorClass = meaning & CLASS_BITS;
        if (errorClass === OK) {
          ended = true;
          abi.rk_succeed(policy, b, id, now);
          onEvent?.({ kind: "answer", attempt, class: "ok", accepted: true });
          return value;
        }
        if (b >= 0) abi.rk_record(b, id, meaning & BREAKER_IGNORES ? IGNORED : FAILURE, now);
        onEvent?.({ kind: "answer", attempt, class: CLASS_NAMES[errorClass], accepted: (meaning & ACCEPTED) !== 0 });
        const retryAfter = meaning & DELAY_HONOURED ? serverDelay : -1;
        const wait = abi.rk_call_failed(policy, id, errorClass, retryAfter, now, rng());
        if (Number.isNaN(wait)) throw refusal();
        if (wait < 0) {
          if (onEvent) onEvent({ kind: "give-up", attempt, reason: gaveUp() });
          if (failure === undefined) return value;
          throw failure;
        }
        // A Response given up on: free its connection.
        if (isResponse(value)) void value.body?.cancel?.().catch(() => {});
        await sleep(wait, caller);
        caller?.throwIfAborted();
      }
    } finally {
      // Hands back a permit still held (a cancelled attempt) without counting it.
      if (!ended) abi.rk_call_end(policy, b, id, 0, clock());
    }
  }

  /**
   * Without a timeout or a caller's signal, the first attempt runs here with no async frame of
   * ours around it: a plain success costs one `then`. Anything else continues in `call`.
   */
  function fast(...args: A): Promise<R> {
    if (timeout >= 0) return call(undefined, args);
    const b = breaker === undefined ? -1 : breaker.handle;
    const id = abi.rk_begin(policy, b, clock());
    if (id < 0) return rejected(id, args);
    let first: Promise<R>;
    try {
      first = Promise.resolve(fn(new Attempt(1), ...args));
    } catch (error) {
      first = Promise.reject(error);
    }
    return first.then(
      (value) => {
        if (isResponse(value)) return call(undefined, args, id, first);
        abi.rk_succeed(policy, b, id, clock());
        onEvent?.({ kind: "answer", attempt: 1, class: "ok", accepted: true });
        return value;
      },
      () => call(undefined, args, id, first),
    );
  }

  /** The breaker refused: `begun` is `-2 - retryAfter` (ms left), or -1 (the module failed). */
  async function rejected(begun: number, args: A): Promise<R> {
    if (begun === -1) throw refusal();
    const error = new CircuitOpenError(-2 - begun);
    if (onOpen === undefined) throw error;
    return await onOpen(error, ...args);
  }

  const wrapped = fast as Reliable<A, R>;
  wrapped.withSignal = (signal, ...args) => call(signal, args);
  wrapped.dispose = () => {
    freePolicy.unregister(wrapped);
    abi.rk_policy_free(policy);
  };
  freePolicy.register(wrapped, policy, wrapped);
  return wrapped;
}

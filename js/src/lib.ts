// reliablekit: the seed library's API (CircuitBreaker, reliable, expBackoff, CircuitOpenError) in
// TypeScript idiom. Every decision (admit or reject, trip, recover, retry or give up, how long to
// wait) is made by reliable-core compiled to WebAssembly; this file runs the user's async
// function, the timers and the AbortSignals, and turns options into the module's numbers.
//
// Durations are milliseconds, as with setTimeout. Clocks return milliseconds (performance.now()
// by default).

import type { Abi } from "./abi.js";

let abi: Abi;
/** The module's record of the latest action polled (js/wasm/src/lib.rs, `Record`), read in place:
 * an input answers with one export call, not one per number. The module never grows its memory
 * (it allocates nothing), so the view stays valid (a call's start checks). */
let record: Float64Array;

/** Binds the instantiated module; called once by the entry point before anything is exported. */
export function bind(instance: WebAssembly.Instance): void {
  abi = instance.exports as unknown as Abi;
  record = new Float64Array(abi.memory.buffer, abi.rk_record_ptr(), RECORD);
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

/** The module's latest refusal as an Error naming the option (or a plain Error for the rest);
 * `prefix`: the path of the config in a policy, before the core's field. */
function refusal(prefix?: string): Error {
  const kind = abi.rk_error_kind();
  if (kind === 11) return new RangeError("too many live CircuitBreakers (256): dispose() the ones no longer used");
  if (kind === 12) return new RangeError("too many live reliable() wrappers (256): dispose() the ones no longer used");
  if (kind === 13) return new RangeError("too many calls in flight at once (2048)");
  if (kind === 14) return new RangeError("too many live Chaos layers (256): dispose() the ones no longer used");
  if (kind === 15) return new RangeError("too many live ChaosTimelines (64): dispose() the ones no longer used");
  const bytes = new Uint8Array(abi.memory.buffer, abi.rk_error_ptr(), abi.rk_error_len());
  const text = new TextDecoder().decode(bytes);
  // A policy's config the core's reader refused: where in it, and why.
  if (kind === 20) return new TypeError(`${prefix}${text.startsWith(":") ? "" : "."}${text}`);
  if (kind !== 1) return new Error(`reliablekit: internal error ${kind} (a disposed breaker or wrapper?)`);
  const [field, why] = text.split("\0");
  const option = prefix === undefined ? (OPTION_OF[field] ?? field) : `${prefix}.${field}`;
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

/** A call refused locally (by a throttle, a ledger, a concurrency or rate limit) and not waited out. */
export class RefusedError extends Error {
  readonly by: Refuser;
  /** When the refuser would admit a call, ms, if it says. */
  readonly retryAfter: number | undefined;
  constructor(by: Refuser, retryAfter?: number) {
    super(`refused by the ${by}${retryAfter === undefined ? "" : `; retry after ${Math.ceil(retryAfter)} ms`}`);
    this.name = "RefusedError";
    this.by = by;
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

/** What a function wrapped by {@link reliable.withContext} gets first: the attempt's signal and its number. */
export interface AttemptContext {
  /** Aborts when the copy times out, loses a hedge race, or the caller's signal aborts: pass it to `fetch`. */
  readonly signal: AbortSignal;
  /** The copy's number, from 1 across the call (a retry or a hedge is the next number). */
  readonly attempt: number;
  /** Whether this copy is a hedge of the attempt in flight. */
  readonly hedge: boolean;
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
  /**
   * How to wait between attempts (a backoff, a server's delay): resolving means the wait is over.
   * Default: a timer, cancelled by the signal it is given.
   */
  sleep?: Sleep;
  /**
   * The timer while copies are in flight (an attempt's timeout, a hedge's delay); resolving means
   * the time has come. Default: a `setTimeout` timer, cancelled by the signal it is given.
   */
  timer?: Sleep;
  /** Jitter's randomness. Default `Math.random`. */
  rng?: Rng;
  /** The adaptive throttle's randomness (a policy with a `Throttle`). Default: `rng`. */
  throttleRng?: Rng;
  /** The clock, ms. Default: the breaker's, else `performance.now`. */
  clock?: Clock;
  /**
   * The whole policy, in the policy format a simulator scenario's client writes (a stack, a
   * `{ name, stack }` entry, or either as JSON text), or a {@link Policy} read from it: instead
   * of the options above from `breaker` to `maxServerDelay`, which must then be left out. A
   * {@link Policy} shares the state of its `scope: "Shared"` layers with every wrapper made with
   * it; its `PerClient` layers (the default scope) are this wrapper's own. A plain stack, entry
   * or text is read for this wrapper alone: the state of every layer (breaker, budget, throttle,
   * ledger, hedger, limits) is this wrapper's own, whatever its `scope` says.
   */
  policy?: PolicyStack | PolicyFile | string | Policy;
  /**
   * The work cannot be interrupted (it ignores its signal): a copy past its timeout is waited
   * for and its answer taken as it comes (a late success is a success). Default false.
   */
  uninterruptible?: boolean;
  /** While the breaker is open: answer with this instead of throwing {@link CircuitOpenError}. */
  onOpen?: (error: CircuitOpenError, ...args: A) => R | Promise<R>;
  /** Told every decision as it is taken (see {@link ReliableEvent}): for metrics and traces. */
  onEvent?: (event: ReliableEvent) => void;
  /**
   * Chaos injected into every copy sent, below every layer, where a real answer comes from: an
   * injected status is a Response-like value classed by the core's answer table as a real one,
   * a reset a thrown error, a hang never answers (only the copy's timeout ends it).
   */
  chaos?: Chaos | ChaosTimeline;
}

/** How an attempt ended, as the core classes it. */
export type AnswerClass = "ok" | "transient" | "timeout" | "throttled" | "fatal" | "dont-retry";
/** Why a call stopped retrying, in the core's words (the core's own names, passed on as they are). */
export type GiveUpReason =
  | "max-attempts"
  | "fatal"
  | "dont-retry"
  | "timeout-not-retried"
  | "refused"
  | "deadline"
  | "budget"
  | "finished";
/** Who refused an attempt locally, without sending it. */
export type Refuser = "breaker" | "throttle" | "ledger" | "limit" | "rate-limit";
/** A breaker's state change. */
export type BreakerTransition = { kind: "breaker"; from: BreakerState; to: BreakerState };
/** What {@link ReliableOptions.onEvent} is told, in the order the decisions are taken. */
export type ReliableEvent =
  | {
      kind: "answer";
      attempt: number;
      class: AnswerClass;
      /** Whether the backend accepted it (the core's rule: what an adaptive throttle counts). */
      accepted: boolean;
    }
  /** The policy waits `delay` ms, then admits the next attempt (`attempts`: copies sent so far). */
  | { kind: "retry"; delay: number; attempts: number }
  /** An attempt was refused locally; `retryAfter` ms when the refuser says. */
  | { kind: "refused"; by: Refuser; retryAfter?: number }
  /** Copy `attempt` goes out as a hedge. */
  | { kind: "hedge"; attempt: number }
  /** A hedge was due and refused; no other hedge of this attempt follows. */
  | { kind: "no-hedge"; by: Refuser }
  /** Copy `attempt` lost the race to another copy and is aborted. */
  | { kind: "lost"; attempt: number }
  /** The concurrency limit moved. */
  | { kind: "limit"; from: number; to: number }
  | BreakerTransition
  | { kind: "give-up"; attempt: number; reason: GiveUpReason }
  /** The chaos layer injected into copy `copy`: `event` as Polly names it, `attempt` the copy's
   * number through the chaos layer (from 0, across calls), `delay` the injected latency (ms). */
  | { kind: "chaos"; event: ChaosEvent; attempt: number; copy: number; delay?: number };

const CLASS_NAMES: readonly AnswerClass[] = ["transient", "timeout", "throttled", "fatal", "dont-retry"];
const REFUSERS: readonly Refuser[] = ["breaker", "throttle", "ledger", "limit", "rate-limit"];
/** The core's name of the latest give-up reason (read from the module, not mapped here). */
function gaveUp(): GiveUpReason {
  const bytes = new Uint8Array(abi.memory.buffer, abi.rk_gave_up_ptr(), abi.rk_gave_up_len());
  return new TextDecoder().decode(bytes) as GiveUpReason;
}

/** A wrapped function: call it as the original, or with a signal of your own. */
export interface Reliable<A extends unknown[], R> {
  (...args: A): Promise<R>;
  /** Cancels the whole call (the copies in flight and any wait) when `signal` aborts. */
  withSignal(signal: AbortSignal | undefined, ...args: A): Promise<R>;
  /** Frees its slot in the module now rather than at garbage collection. */
  dispose(): void;
}

// ---------------------------------------------------------------------------------------------
// Chaos: the four strategies of Polly v8, decided by reliable-core's chaos module in the
// WebAssembly module (js/wasm/src/chaos.rs): whether copy `n` through a layer is hit depends only
// on the strategy's rate and seed and `n`, so the Rust layers, the Python package and this one
// inject the same answers at the same attempts for the same seed.

/** A chaos strategy. */
export type ChaosStrategy = "fault" | "latency" | "outcome" | "behavior";
/** The event an injection reports, as Polly names it. */
export type ChaosEvent = "Chaos.OnFault" | "Chaos.OnLatency" | "Chaos.OnOutcome" | "Chaos.OnBehavior";
const CHAOS_STRATEGIES: readonly ChaosStrategy[] = ["fault", "latency", "outcome", "behavior"];
const CHAOS_EVENTS: readonly ChaosEvent[] = ["Chaos.OnFault", "Chaos.OnLatency", "Chaos.OnOutcome", "Chaos.OnBehavior"];

/** What every strategy has: the share of attempts hit, the seed of its decisions, whether it starts switched on. */
export interface ChaosRate {
  /** Share of attempts hit, in [0, 1]. */
  rate: number;
  /** The seed of its decisions: a whole number in [0, 2^53), or a bigint in [0, 2^64). Default 0. */
  seed?: number | bigint;
  /** Switched on at the start. Default true. */
  enabled?: boolean;
}
/** An injected answer: a status (with its `Retry-After` in ms and `x-should-retry`), a reset connection, or a hang. */
export interface ChaosAnswer {
  status?: number;
  retryAfter?: number;
  shouldRetry?: boolean;
  reset?: boolean;
  hang?: boolean;
}
/** The fault strategy: a failure instead of the real answer (or `error`, thrown). */
export interface ChaosFault extends ChaosRate, ChaosAnswer {
  error?: unknown;
}
/** The outcome strategy: a chosen answer instead of the real one (or `value`, returned). */
export interface ChaosOutcome extends ChaosRate, ChaosAnswer {
  value?: unknown;
}
/** The latency strategy: a delay before the copy is sent, `delay` ms, or uniform in [`min`, `max`] ms. */
export interface ChaosLatency extends ChaosRate {
  delay?: number;
  min?: number;
  max?: number;
}
/** The behaviour strategy: `callback` runs before the copy. */
export interface ChaosBehavior extends ChaosRate {
  callback: () => void;
}
/** Options of {@link Chaos}: each strategy left out is off for good. */
export interface ChaosOptions {
  fault?: ChaosFault;
  latency?: ChaosLatency;
  outcome?: ChaosOutcome;
  behavior?: ChaosBehavior;
}

let chaosKilled = false;
/** The module's record of the latest chaos decision, read in place. */
let chaosOut: Float64Array | undefined;
const freeChaos = new FinalizationRegistry<number>((h) => abi.rk_chaos_free(h));
// js/wasm/src/chaos.rs: numbers per strategy, and in a config.
const PER_STRATEGY = 9;
const CHAOS_CONFIG = 4 * PER_STRATEGY;

function chaosSeed(name: string, value: unknown): [number, number] {
  if (value === undefined) return [0, 0];
  if (typeof value === "bigint") {
    if (value < 0n || value >= 1n << 64n) throw new RangeError(`${name} must be in [0, 2^64), got ${value}`);
    return [Number(value >> 32n), Number(value & 0xffff_ffffn)];
  }
  if (typeof value !== "number") throw new TypeError(`${name} must be a number or a bigint, got ${describe(value)}`);
  if (!Number.isSafeInteger(value) || value < 0) {
    throw new RangeError(`${name} must be a whole number in [0, 2^53) (a bigint for larger seeds), got ${value}`);
  }
  return [Math.floor(value / 4_294_967_296), value % 4_294_967_296];
}

function flag(name: string, value: unknown, fallback: boolean): boolean {
  if (value === undefined) return fallback;
  if (typeof value !== "boolean") throw new TypeError(`${name} must be a boolean, got ${describe(value)}`);
  return value;
}

/** A strategy's own numbers: [kind, a, b, c] (js/wasm/src/chaos.rs, `config_of`). */
function chaosAnswer(name: string, o: Record<string, unknown>, user: "error" | "value"): [number, number, number, number] {
  const given = ["status", "reset", "hang", user].filter((k) => o[k] !== undefined && o[k] !== false);
  if (given.length !== 1) throw new TypeError(`${name}: give exactly one of status, reset: true, hang: true, ${user}`);
  if (given[0] !== "status" && (o.retryAfter !== undefined || o.shouldRetry !== undefined)) {
    throw new TypeError(`${name}.retryAfter: only a status answer carries headers`);
  }
  switch (given[0]) {
    case "status": {
      const retryAfter = o.retryAfter === undefined ? -1 : duration(`${name}.retryAfter`, o.retryAfter, -1);
      const should = o.shouldRetry === undefined ? -1 : flag(`${name}.shouldRetry`, o.shouldRetry, false) ? 1 : 0;
      return [0, number(`${name}.status`, o.status, 0), retryAfter, should];
    }
    case "reset":
      flag(`${name}.reset`, o.reset, false);
      return [1, 0, 0, 0];
    case "hang":
      flag(`${name}.hang`, o.hang, false);
      return [2, 0, 0, 0];
    default:
      // The core decides with a stand-in (a reset for an error, a 200 for a value); the copy
      // throws the error or returns the value instead.
      return user === "error" ? [1, 0, 0, 0] : [0, 200, -1, -1];
  }
}

const STRATEGY_KEYS: Record<ChaosStrategy, readonly string[]> = {
  fault: ["rate", "seed", "enabled", "status", "retryAfter", "shouldRetry", "reset", "hang", "error"],
  latency: ["rate", "seed", "enabled", "delay", "min", "max"],
  outcome: ["rate", "seed", "enabled", "status", "retryAfter", "shouldRetry", "reset", "hang", "value"],
  behavior: ["rate", "seed", "enabled", "callback"],
};

/** An injected status, as a `fetch` Response carries it: `Retry-After` in whole seconds (rounded
 * up), `retry-after-ms` too when not whole seconds, `x-should-retry` (the Rust layers' headers). */
export class ChaosResponse {
  readonly status: number;
  readonly headers: { get(name: string): string | null };
  constructor(status: number, retryAfterMs: number, shouldRetry: number) {
    this.status = status;
    const h: Record<string, string> = {};
    if (retryAfterMs >= 0) {
      const ms = Math.floor(retryAfterMs);
      h["retry-after"] = String(Math.ceil(ms / 1000));
      if (ms % 1000 !== 0) h["retry-after-ms"] = String(ms);
    }
    if (shouldRetry >= 0) h["x-should-retry"] = shouldRetry === 1 ? "true" : "false";
    this.headers = { get: (name: string) => h[name.toLowerCase()] ?? null };
  }
}

/**
 * Chaos injection for {@link reliable}'s `chaos` option: the fault, latency, outcome and
 * behaviour strategies, each with its `rate`, `seed` and `enabled` switch (flip it with
 * {@link Chaos.setEnabled}); {@link Chaos.killAll} stops every chaos layer of the program.
 * Nothing is injected unless configured, and a layer with every strategy off costs a copy one
 * comparison.
 */
export class Chaos {
  /** @internal the module's handle */
  readonly handle: number;
  /** @internal the strategies on now, one bit each (the module's, kept here for the fast path) */
  on: number;
  /** @internal */ readonly error: unknown;
  /** @internal */ readonly hasError: boolean;
  /** @internal */ readonly value: unknown;
  /** @internal */ readonly hasValue: boolean;
  /** @internal */ readonly callback: (() => void) | undefined;

  constructor(opts: ChaosOptions) {
    const o = options("Chaos options", opts);
    for (const k of Object.keys(o)) {
      if (!(CHAOS_STRATEGIES as readonly string[]).includes(k)) {
        throw new TypeError(`chaos.${k}: unknown strategy, expected one of ${CHAOS_STRATEGIES.join(", ")}`);
      }
    }
    const numbers = new Array<number>(CHAOS_CONFIG).fill(0);
    const parts: Record<string, Record<string, unknown>> = {};
    CHAOS_STRATEGIES.forEach((strategy, i) => {
      if (o[strategy] === undefined) return;
      const name = `chaos.${strategy}`;
      const b = options(name, o[strategy]);
      for (const k of Object.keys(b)) {
        if (!STRATEGY_KEYS[strategy].includes(k)) throw new TypeError(`${name}.${k}: unknown field, expected one of ${STRATEGY_KEYS[strategy].join(", ")}`);
      }
      parts[strategy] = b;
      if (b.rate === undefined) throw new TypeError(`${name}.rate: required (a fraction in [0, 1])`);
      const [hi, lo] = chaosSeed(`${name}.seed`, b.seed);
      let own: [number, number, number, number];
      if (strategy === "latency") {
        if (b.delay !== undefined && b.min === undefined && b.max === undefined) {
          own = [0, duration(`${name}.delay`, b.delay, 0), 0, 0];
        } else if (b.delay === undefined && b.min !== undefined && b.max !== undefined) {
          own = [1, duration(`${name}.min`, b.min, 0), duration(`${name}.max`, b.max, 0), 0];
        } else {
          throw new TypeError(`${name}: give delay (ms), or min and max (ms) for a uniform delay`);
        }
        if (own[1] < 0 || own[2] < 0) throw new RangeError(`${name}: a delay must be finite`);
      } else if (strategy === "behavior") {
        func(`${name}.callback`, b.callback, undefined);
        if (b.callback === undefined) throw new TypeError(`${name}.callback: required (a function run before each copy it hits)`);
        own = [0, 0, 0, 0];
      } else {
        own = chaosAnswer(name, b, strategy === "fault" ? "error" : "value");
      }
      const at = i * PER_STRATEGY;
      numbers.splice(at, PER_STRATEGY, 1, number(`${name}.rate`, b.rate, 0), flag(`${name}.enabled`, b.enabled, true) ? 1 : 0, hi, lo, ...own);
    });
    inputCap ||= abi.rk_input_cap();
    const view = new DataView(abi.memory.buffer, abi.rk_input_ptr(), inputCap);
    numbers.forEach((n, i) => view.setFloat64(i * 8, n, true));
    const h = abi.rk_chaos_new();
    if (h < 0) {
      const e = refusal("chaos");
      // The core's field names, as the options that set them.
      throw Object.assign(e, { message: e.message.replace(/\.answer(\.status)?(?=[ :])/, ".status").replace("latency.delay.max", "latency.max") });
    }
    this.handle = h;
    this.on = CHAOS_STRATEGIES.reduce((bits, s, i) => bits | (parts[s] !== undefined && parts[s].enabled !== false ? 1 << i : 0), 0);
    this.hasError = parts.fault?.error !== undefined;
    this.error = parts.fault?.error;
    this.hasValue = parts.outcome?.value !== undefined;
    this.value = parts.outcome?.value;
    this.callback = parts.behavior?.callback as (() => void) | undefined;
    freeChaos.register(this, h, this);
  }

  /** Switches `strategy` on or off for the next copies; a strategy not configured stays off. */
  setEnabled(strategy: ChaosStrategy, on: boolean): void {
    const i = CHAOS_STRATEGIES.indexOf(strategy);
    if (i < 0) throw new TypeError(`strategy must be one of ${CHAOS_STRATEGIES.join(", ")}, got ${describe(strategy)}`);
    const bits = abi.rk_chaos_set(this.handle, i, flag("on", on, false) ? 1 : 0);
    if (bits < 0) throw refusal();
    this.on = bits;
  }

  /** The strategies switched on now. */
  get enabled(): ChaosStrategy[] {
    return CHAOS_STRATEGIES.filter((_, i) => (this.on & (1 << i)) !== 0);
  }

  /** Copies counted so far (only while some strategy was on and chaos not killed). */
  get attempts(): number {
    const n = abi.rk_chaos_attempts(this.handle);
    if (Number.isNaN(n)) throw refusal();
    return n;
  }

  /** Stops (`true`) or allows again (`false`) every chaos injection of the program. */
  static killAll(killed = true): void {
    chaosKilled = flag("killed", killed, true);
  }

  /** Whether {@link Chaos.killAll} stopped every injection. */
  static get killed(): boolean {
    return chaosKilled;
  }

  /**
   * What the next copy gets, as the core decides it (`undefined`: nothing): for tests and
   * tools; a wrapped function asks this itself.
   */
  decide(): { attempt: number; behavior: boolean; delay?: number; answer?: "fault" | "outcome"; kind?: "status" | "reset" | "hang"; status?: number } | undefined {
    if (this.on === 0 || chaosKilled) return undefined;
    const code = abi.rk_chaos_decide(this.handle);
    if (code < 0) throw refusal();
    if (code === 0) return undefined;
    const out = chaosRecord();
    const d: ReturnType<Chaos["decide"]> & object = { attempt: out[0], behavior: out[1] === 1 };
    if (out[2] >= 0) d.delay = out[2];
    if (out[3] >= 0) {
      d.answer = out[3] === 0 ? "fault" : "outcome";
      d.kind = (["status", "reset", "hang"] as const)[out[4]];
      if (out[4] === 0) d.status = out[5];
    }
    return d;
  }

  /** Frees its slot in the module now rather than at garbage collection. */
  dispose(): void {
    freeChaos.unregister(this);
    abi.rk_chaos_free(this.handle);
  }
}

/** A scenario's client-visible fault, times in ms since the replay starts, as the simulator's
 * scenario files name them (`ErrorRate`'s `rate`, `LatencyInflation`'s `factor`, `Throttle`'s
 * `share` and `retryAfter` ms, `Outage`'s `hang`). */
export type TimelineFault =
  | { kind: "Outage"; from: number; until: number; hang?: boolean }
  | { kind: "Partition"; from: number; until: number }
  | { kind: "ErrorRate"; from: number; until: number; rate: number }
  | { kind: "LatencyInflation"; from: number; until: number; factor: number }
  | { kind: "Throttle"; from: number; until: number; share?: number; retryAfter: number };

/** Why a client cannot play the faults only a server or the workload makes: the reasons of
 * reliable_core::fault's `Fault::client_side` (a test holds them to that file). */
const SERVER_SIDE: Record<string, string> = {
  CapacityLoss:
    "a capacity loss removes the server's workers, and only the server has them: a client cannot make the server slower for everyone; play it in the service (fewer workers)",
  LoadSpike: "a load spike multiplies the workload's arrival rate: the load generator plays it, not a layer on one client's calls",
};
const TIMELINE_KINDS: Record<string, [number, readonly string[]]> = {
  Outage: [0, ["hang"]],
  Partition: [1, []],
  ErrorRate: [2, ["rate"]],
  LatencyInflation: [3, ["factor"]],
  Throttle: [4, ["share", "retryAfter"]],
};
const freeTimeline = new FinalizationRegistry<number>((h) => abi.rk_timeline_free(h));
let timelineOut: Float64Array | undefined;
function timelineRecord(): Float64Array {
  if (timelineOut === undefined || timelineOut.length === 0) timelineOut = new Float64Array(abi.memory.buffer, abi.rk_timeline_out_ptr(), 3);
  return timelineOut;
}

/**
 * A scenario's client-visible faults (outage, partition, error rate, latency inflation,
 * throttle), played by the clock from the moment it is made (or {@link ChaosTimeline.restart}ed)
 * with the simulator's meaning, decided by the core's `chaos::Timeline` in the module; give it as
 * {@link reliable}'s `chaos` option. A `CapacityLoss` or a `LoadSpike` is refused with the reason,
 * as the Rust loader refuses it. {@link Chaos.killAll} stops it too.
 */
export class ChaosTimeline {
  /** @internal */ readonly handle: number;
  /** The clock it plays by, ms. */
  readonly clock: Clock;
  /** @internal */ start: number;

  constructor(faults: readonly TimelineFault[], opts?: { seed?: number | bigint; clock?: Clock }) {
    const o = options("ChaosTimeline options", opts);
    if (!Array.isArray(faults)) throw new TypeError(`faults must be an array, got ${describe(faults)}`);
    this.clock = func<Clock>("clock", o.clock, defaultClock);
    const [hi, lo] = chaosSeed("seed", o.seed);
    if (abi.rk_timeline_begin(hi, lo) < 0) throw refusal();
    faults.forEach((f, i) => {
      const name = `faults[${i}]`;
      const b = options(name, f);
      const kind = String(b.kind);
      if (SERVER_SIDE[kind] !== undefined) throw new TypeError(`${name}: ${kind} refused: ${SERVER_SIDE[kind]}`);
      const known = TIMELINE_KINDS[kind];
      if (known === undefined) throw new TypeError(`${name}.kind: expected one of ${Object.keys(TIMELINE_KINDS).join(", ")}, got ${describe(b.kind)}`);
      for (const k of Object.keys(b)) {
        if (k !== "kind" && k !== "from" && k !== "until" && !known[1].includes(k)) throw new TypeError(`${name}.${k}: unknown field of a ${kind}`);
      }
      const from = duration(`${name}.from`, b.from, NaN);
      const until = duration(`${name}.until`, b.until, NaN);
      if (from < 0 || until < 0) throw new RangeError(`${name}: from and until must be finite`);
      let a = 0;
      let c = 0;
      if (kind === "Outage") a = flag(`${name}.hang`, b.hang, false) ? 1 : 0;
      if (kind === "ErrorRate") a = number(`${name}.rate`, b.rate, NaN);
      if (kind === "LatencyInflation") a = number(`${name}.factor`, b.factor, NaN);
      if (kind === "Throttle") {
        a = number(`${name}.share`, b.share, 1);
        c = duration(`${name}.retryAfter`, b.retryAfter, NaN);
        if (c < 0) throw new RangeError(`${name}.retryAfter must be finite`);
      }
      if (abi.rk_timeline_fault(known[0], from, until, a, c) < 0) throw refusal(name);
    });
    const h = abi.rk_timeline_finish();
    if (h < 0) throw refusal();
    this.handle = h;
    this.start = this.clock();
    freeTimeline.register(this, h, this);
  }

  /** Plays the faults again from now. */
  restart(): void {
    this.start = this.clock();
  }

  /** @internal ms since the replay started. */
  now(): number {
    return Math.max(0, this.clock() - this.start);
  }

  /** Frees its slot in the module now rather than at garbage collection. */
  dispose(): void {
    freeTimeline.unregister(this);
    abi.rk_timeline_free(this.handle);
  }
}

function chaosRecord(): Float64Array {
  if (chaosOut === undefined || chaosOut.length === 0) chaosOut = new Float64Array(abi.memory.buffer, abi.rk_chaos_out_ptr(), 8);
  return chaosOut;
}

// What `rk_answer` answers (js/wasm/src/lib.rs, `answer_meaning`): the class's code in the low
// four bits (the index in CLASS_NAMES, OK for a success), and flags of its consequences.
const CLASS_BITS = 15;
const OK = 15;
const ACCEPTED = 64;
// What the module reads instead of a status: the copy's timer fired, or it threw before any answer.
const TIMED_OUT = -1;
const NO_ANSWER = -2;
// What `rk_call_poll` and the inputs answer (js/wasm/src/lib.rs, `Polled`).
const IDLE = 0;
const SEND = 1;
const CANCEL = 2;
const DONE = 3;
// The record's numbers (js/wasm/src/lib.rs, `Record`): the action's code, its six numbers from
// OUT, the actions still queued, the samples the input used, the events to read, whether the
// call waits for a time.
const CODE = 0;
const OUT = 1;
const NUMBERS_END = 7;
const QUEUED = 7;
const USED = 8;
const EVENTS = 9;
const WAKE = 10;
const RECORD = 11;

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
 * An answer as the module's numbers: a Response's status and headers parsed (`serverDelay` from
 * {@link serverDelayOf}; `x-should-retry`), anything else returned a success, a thrown error no
 * answer (a `TimeoutError` a timeout). The core classes them, never this file.
 */
function answerOf(ok: boolean, value: unknown): [status: number, serverDelay: number, shouldRetry: number] {
  if (!ok) {
    const timedOut = value instanceof Error && value.name === "TimeoutError";
    return [timedOut ? TIMED_OUT : NO_ANSWER, -1, -1];
  }
  if (!isResponse(value)) return [200, -1, -1];
  const should = value.headers.get("x-should-retry")?.trim().toLowerCase();
  const shouldRetry = should === "true" ? 1 : should === "false" ? 0 : -1;
  // Clamped here: WebAssembly would wrap a larger number into an i32 (the core reads any status
  // over 65535 as 65535). No overload marker: one would be in the body, which is the caller's.
  return [Math.min(value.status, 0xffff), serverDelayOf(value), shouldRetry];
}

/** The attempt timed out (its signal's reason, and the error thrown when it ended so). */
function timeoutError(ms: number): Error {
  const e = new Error(`attempt timed out after ${ms} ms`);
  e.name = "TimeoutError";
  return e;
}

function abortError(message: string): Error {
  const e = new Error(message);
  e.name = "AbortError";
  return e;
}

/** Why a timer is stopped when the call no longer needs it (not an error: nobody sees it). */
const SUPERSEDED = Object.freeze({ reason: "the call's timer was replaced or the call is over" });

const defaultSleep: Sleep = (ms, signal) =>
  new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    // Whole milliseconds, rounded up: a timer never fires before the time it was asked for.
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, Math.ceil(ms));
    signal?.addEventListener("abort", onAbort, { once: true });
  });

/** The context handed to a copy; its signal is made only if the function reads it. */
class Attempt implements AttemptContext {
  controller: AbortController | undefined;
  constructor(
    readonly attempt: number,
    readonly hedge: boolean,
  ) {}
  get signal(): AbortSignal {
    this.controller ??= new AbortController();
    return this.controller.signal;
  }
  abort(reason: unknown): void {
    this.controller ??= new AbortController();
    this.controller.abort(reason);
  }
}

/** A copy sent: its number, context (none for a plain `reliable` function, which never sees
 * one), deadline (ms, -1 none), whether its answer still counts, and how it ended. */
class Copy {
  live = true;
  /** It ended: `ok` and `value` say how. */
  settled = false;
  ok = false;
  value: unknown = undefined;
  constructor(
    readonly n: number,
    readonly deadline: number,
    readonly ctx: Attempt | undefined,
  ) {}
}

// ---------------------------------------------------------------------------------------------
// The policy format: the same stack of layers a simulator scenario's policy is (JSON, as
// `JSON.parse` reads it). This walks the layers (their nesting and order); each layer's config is
// read by the core's own serde derives in the module and checked by the core's own constructors.

/** A policy format stack, as JSON gives it: `{"Retry": {"policy": {...}, "inner": {"Call": {...}}}}`. */
export type PolicyStack = Record<string, unknown>;
/** A scenario's policy entry: a name and its stack. */
export interface PolicyFile {
  name?: string;
  stack: PolicyStack;
}

// What `rk_stack_layer` reads (js/wasm/src/policy.rs, `Kind`).
const RETRY = 1;
const BUDGET = 2;
const BREAKER = 3;
const THROTTLE = 4;
const LEDGER = 5;
const HEDGE = 6;
const LIMIT = 7;
const RATE = 8;
const CALL_TIMEOUT = 9;

const NESTING = 10;
/** The kind of each stateful layer, for the bits of the layers a {@link Policy} shares. */
const LAYER_KINDS: Record<string, number> = {
  Breaker: BREAKER,
  Throttle: THROTTLE,
  Ledger: LEDGER,
  Hedge: HEDGE,
  Limit: LIMIT,
  RateLimit: RATE,
};

/** What the engine runs (reliable_core::engine::Stack::from_layer), as its errors say it. */
const ORDER = "a chain of Ledger, Retry, Throttle, Breaker, Limit and RateLimit, each at most once, then a Hedge and the Call";
/** The gates (reliable_core::engine::Gate), as `rk_stack_layer`'s nesting flag numbers them. */
const GATES: Record<string, number> = { Throttle: 1, Breaker: 2, Limit: 3, RateLimit: 4 };
// reliable_core::policy's reasons for refusing a nesting (`Layer::check_nesting`).
const LEDGER_IN_RETRY = "a Ledger inside a Retry counts every retry as a first try: expected the Ledger outside the Retry";
const HEDGE_OF_CALL = "a Hedge sends copies of one call: expected `inner: Call(...)`";
// reliable_core::policy::PER_HOST_ONE_HOST: one host per downstream here, so no breaker per host.
const PER_HOST_ONE_HOST = "scope PerHost needs a balancer over a downstream's replicas, and this face calls one host per downstream (the simulator's `replicas` have one): expected PerClient or Shared";
// reliable_core::policy::FLEET_NO_STORE: no store here, so no state shared by a fleet.
const FLEET_NO_STORE = "scope Fleet shares state through a store this face does not have: expected PerClient or Shared here (the simulator models it with the scenario's `stores`; a Rust service gives the stores its policies name to reliable::policy's Route::fleet_builder)";
/** Each layer's fields (besides `inner`), as the policy format names them. */
const FIELDS: Record<string, readonly string[]> = {
  Call: ["downstream", "timeout", "timeout_dist"],
  Retry: ["policy", "budget", "budget_scope", "inner"],
  Throttle: ["config", "scope", "inner"],
  Breaker: ["config", "scope", "inner"],
  Ledger: ["config", "scope", "inner"],
  Limit: ["config", "scope", "inner"],
  RateLimit: ["config", "scope", "inner"],
  Hedge: ["config", "idempotent", "scope", "inner"],
};
const OTHER_LAYERS = ["Fallback", "Llm"];

/** The largest config the module reads, in bytes of tokens. */
let inputCap = 0;

/** Writes `value` as the module's config tokens (js/wasm/de/src/lib.rs); `path` names it in errors. */
function writeTokens(value: unknown, path: string): number {
  inputCap ||= abi.rk_input_cap();
  const out = new Uint8Array(abi.memory.buffer, abi.rk_input_ptr(), inputCap);
  const view = new DataView(out.buffer, out.byteOffset, inputCap);
  const text = new TextEncoder();
  let at = 0;
  const room = (n: number) => {
    if (at + n > inputCap) throw new RangeError(`${path}: too large (the module reads ${inputCap} bytes of a config at most)`);
  };
  const str = (s: string) => {
    const bytes = text.encode(s);
    room(5 + bytes.length);
    out[at] = 0x73; // s
    view.setUint32(at + 1, bytes.length, true);
    out.set(bytes, at + 5);
    at += 5 + bytes.length;
  };
  const write = (v: unknown, where: string, depth: number) => {
    if (depth > 24) throw new RangeError(`${where}: nested too deeply`);
    if (v === null) {
      room(1);
      out[at++] = 0x6e; // n
    } else if (typeof v === "boolean") {
      room(1);
      out[at++] = v ? 0x74 : 0x66;
    } else if (typeof v === "number") {
      if (!Number.isFinite(v)) throw new TypeError(`${where}: expected a finite number, got ${v}`);
      room(9);
      out[at] = 0x64; // d
      view.setFloat64(at + 1, v, true);
      at += 9;
    } else if (typeof v === "string") {
      str(v);
    } else if (Array.isArray(v)) {
      room(1);
      out[at++] = 0x5b; // [
      v.forEach((item, i) => write(item, `${where}[${i}]`, depth + 1));
      room(1);
      out[at++] = 0x5d;
    } else if (typeof v === "object") {
      room(1);
      out[at++] = 0x7b; // {
      for (const [k, item] of Object.entries(v as Record<string, unknown>)) {
        if (item === undefined) continue;
        str(k);
        write(item, `${where}.${k}`, depth + 1);
      }
      room(1);
      out[at++] = 0x7d;
    } else {
      throw new TypeError(`${where}: expected JSON, got ${describe(v)}`);
    }
  };
  write(value, path, 0);
  return at;
}

/** Reads one layer's config into the module's stack; an error names `path`. */
function layer(kind: number, flag: number, value: unknown, path: string): void {
  const len = writeTokens(value, path);
  if (abi.rk_stack_layer(kind, flag, len) < 0) throw refusal(path);
}

/** Checks a layer's `scope` (or a Retry's `budget_scope`): whether it says `Shared`. */
function scope(body: Record<string, unknown>, field: string, path: string): boolean {
  const v = body[field];
  if (v === "PerHost") throw new TypeError(`${path}.${field}: ${PER_HOST_ONE_HOST}`);
  if (typeof v === "object" && v !== null && !Array.isArray(v) && "Fleet" in v) {
    throw new TypeError(`${path}.${field}: ${FLEET_NO_STORE}`);
  }
  if (v !== undefined && v !== "PerClient" && v !== "Shared") {
    throw new TypeError(`${path}.${field}: expected "PerClient" or "Shared", got ${describe(v)}`);
  }
  return v === "Shared";
}

/** A policy read into the module: its handle, and which of its layers say `scope: "Shared"`
 * (`1 << kind` of each, the kinds of `rk_stack_layer`: js/wasm/src/policy.rs, `shared_bit`). */
interface ReadPolicy {
  handle: number;
  shared: number;
}

/**
 * Reads a policy (a stack, a `{ name, stack }` entry, or either as JSON text) into the module:
 * the handle of its policy. Every error names the place in the policy (`stack.inner.config.failure_rate`).
 */
function readPolicy(policy: unknown): ReadPolicy {
  let p = policy;
  if (typeof p === "string") {
    try {
      p = JSON.parse(p);
    } catch (e) {
      throw new TypeError(`policy: not JSON: ${(e as Error).message}`);
    }
  }
  if (typeof p !== "object" || p === null || Array.isArray(p)) {
    throw new TypeError(`policy must be a policy format stack or { name, stack }, got ${describe(p)}`);
  }
  let node: unknown = p;
  let path = "stack";
  if ("stack" in (p as object)) {
    for (const k of Object.keys(p as object)) {
      if (k !== "name" && k !== "stack") throw new TypeError(`policy.${k}: unknown field, expected name or stack`);
    }
    node = (p as PolicyFile).stack;
  }
  abi.rk_stack_begin();
  // The rule of the core's stack reader: each layer at most once; a gate outside the Retry judges
  // the call once, inside it every attempt; a Ledger outside the Retry, anywhere among the gates
  // there; a Hedge directly around the Call.
  const seen = new Set<string>();
  const outside: number[] = [];
  const inside: number[] = [];
  let ledgerAt = -1;
  let retry = false;
  let budget = false;
  let hedged = false;
  let shared = 0;
  for (;;) {
    if (typeof node !== "object" || node === null || Array.isArray(node) || Object.keys(node).length !== 1) {
      throw new TypeError(`${path}: expected a layer, an object of one variant such as {"Retry": {...}}, got ${describe(node)}`);
    }
    const [kind, raw] = Object.entries(node as Record<string, unknown>)[0];
    if (hedged && kind !== "Call") throw new TypeError(`${path}: ${HEDGE_OF_CALL}`);
    if (kind === "Ledger" && retry) throw new TypeError(`${path}: ${LEDGER_IN_RETRY}`);
    if (OTHER_LAYERS.includes(kind)) {
      throw new TypeError(`${path}: the engine does not run a ${kind} yet: it runs ${ORDER}`);
    }
    const fields = FIELDS[kind];
    if (fields === undefined) {
      throw new TypeError(`${path}: unknown layer ${JSON.stringify(kind)}, expected one of ${[...Object.keys(FIELDS), ...OTHER_LAYERS].join(", ")}`);
    }
    if (typeof raw !== "object" || raw === null || Array.isArray(raw)) {
      throw new TypeError(`${path}.${kind}: expected an object of its fields, got ${describe(raw)}`);
    }
    const body = raw as Record<string, unknown>;
    for (const k of Object.keys(body)) {
      if (!fields.includes(k)) throw new TypeError(`${path}.${k}: unknown field of a ${kind}, expected one of ${fields.join(", ")}`);
    }
    const need = (k: string) => {
      if (body[k] === undefined) throw new TypeError(`${path}: a ${kind} needs its ${k}`);
      return body[k];
    };
    if (kind === "Call") {
      if (typeof body.downstream !== "string") throw new TypeError(`${path}.downstream: expected a string, got ${describe(body.downstream)}`);
      layer(CALL_TIMEOUT, 0, body.timeout ?? null, `${path}.timeout`);
      break;
    }
    if (seen.has(kind)) throw new TypeError(`${path}: a second ${kind} on the route: the engine runs ${ORDER}`);
    seen.add(kind);
    switch (kind) {
      case "Retry":
        layer(RETRY, 0, need("policy"), `${path}.policy`);
        if (body.budget != null) {
          layer(BUDGET, 0, body.budget, `${path}.budget`);
          budget = true;
        }
        if (scope(body, "budget_scope", path) && budget) shared |= 1 << BUDGET;
        retry = true;
        break;
      case "Throttle":
        // Default: the SRE book's throttle.
        layer(THROTTLE, 0, body.config ?? {}, `${path}.config`);
        break;
      case "Breaker":
        layer(BREAKER, retry ? 0 : 1, need("config"), `${path}.config`);
        break;
      case "Ledger":
        layer(LEDGER, 0, need("config"), `${path}.config`);
        ledgerAt = outside.length;
        break;
      case "Limit":
        layer(LIMIT, 0, need("config"), `${path}.config`);
        break;
      case "RateLimit":
        layer(RATE, 0, need("config"), `${path}.config`);
        break;
      default: {
        if (body.idempotent !== undefined && typeof body.idempotent !== "boolean") {
          throw new TypeError(`${path}.idempotent: expected a boolean, got ${describe(body.idempotent)}`);
        }
        layer(HEDGE, body.idempotent === true ? 1 : 0, need("config"), `${path}.config`);
        hedged = true;
      }
    }
    if (scope(body, "scope", path)) shared |= 1 << LAYER_KINDS[kind];
    const gate = GATES[kind];
    if (gate !== undefined) (retry ? inside : outside).push(gate);
    node = need("inner");
    path += ".inner";
  }
  if (seen.has("Ledger") && budget) {
    throw new TypeError("stack: a Retry inside a Ledger draws from it: its own budget would be a second one");
  }
  // The nesting flag (js/wasm/src/policy.rs, `nesting_of`): the gates outermost first, three bits
  // each, then how many sit outside the retry, then how many of those the ledger is inside.
  const gates = [...outside, ...inside];
  const flag = gates.reduce((f, g, i) => f | (g << (3 * i)), 0) | (outside.length << 12) | ((ledgerAt < 0 ? outside.length : ledgerAt) << 15);
  if (abi.rk_stack_layer(NESTING, flag, 0) < 0) throw refusal("stack");
  return { handle: checked2(abi.rk_stack_finish(), "stack"), shared };
}

// Frees the module's slot of a Policy's shared state the program dropped without dispose() (the
// module keeps it while a wrapper made with it lives).
const freeShared = new FinalizationRegistry<number>((h) => abi.rk_policy_free(h));

/**
 * A policy read once, for several wrappers: `reliable(fn, { policy })` with the same `Policy`
 * gives every wrapper made with it one state for each layer whose `scope` is `"Shared"` (a
 * breaker one wrapper opens refuses the others' calls; a retry budget by its `budget_scope`, a
 * throttle, a ledger, a hedge's latency estimate, a concurrency or rate limit: one for all), as
 * a Python `Policy`'s `Shared` layers are by the functions decorated with it. A layer whose
 * `scope` is `"PerClient"` (the policy format's default) is each wrapper's own: one wrapper is
 * one client. The same policy given as a plain stack, entry or JSON text is read for one wrapper
 * alone, every layer its own.
 *
 * It takes what the `policy` option takes, read (and refused, naming the place in the stack)
 * when it is made.
 */
export class Policy {
  /** @internal the module's handle of the state its `Shared` layers keep */
  readonly handle: number;
  /** @internal the policy as JSON text: each wrapper reads it for its own layers */
  readonly text: string;
  /** @internal which layers are shared (`1 << kind` of each) */
  readonly shared: number;
  /** The `name` of a `{ name, stack }` entry, if it has one. */
  readonly name: string | undefined;
  #disposed = false;

  constructor(policy: PolicyStack | PolicyFile | string) {
    let p: unknown = policy;
    if (typeof p === "string") {
      try {
        p = JSON.parse(p);
      } catch (e) {
        throw new TypeError(`policy: not JSON: ${(e as Error).message}`);
      }
    }
    const read = readPolicy(p);
    // Read, so JSON: kept as text, safe from changes to the caller's object.
    this.text = JSON.stringify(p);
    this.handle = read.handle;
    this.shared = read.shared;
    const name = (p as Partial<PolicyFile>).stack !== undefined ? (p as PolicyFile).name : undefined;
    this.name = typeof name === "string" ? name : undefined;
    freeShared.register(this, read.handle, this);
  }

  /** A policy from JSON text (a stack or a `{ name, stack }` entry), as Python's `Policy.from_json`. */
  static fromJson(text: string): Policy {
    if (typeof text !== "string") throw new TypeError(`text must be a string of JSON, got ${describe(text)}`);
    return new Policy(text);
  }

  /** Whether {@link dispose} was called. */
  get disposed(): boolean {
    return this.#disposed;
  }

  /**
   * Frees its shared state's slot in the module now rather than at garbage collection: the
   * wrappers made with it keep it until the last of them is disposed; no wrapper can be made with
   * it afterwards.
   */
  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    freeShared.unregister(this);
    abi.rk_policy_free(this.handle);
  }

  /** @internal A wrapper's own policy in the module, its `Shared` layers drawing from this one's. */
  wrapperPolicy(): number {
    if (this.#disposed) throw new TypeError("policy: this Policy was disposed: make the wrapper with a live one");
    const own = readPolicy(JSON.parse(this.text)).handle;
    if (this.shared !== 0 && abi.rk_policy_share(own, this.handle, this.shared) < 0) {
      abi.rk_policy_free(own);
      throw refusal();
    }
    return own;
  }
}

function checked2(handle: number, prefix: string): number {
  if (handle < 0 || Number.isNaN(handle)) throw refusal(prefix);
  return handle;
}

type Wrapped<A extends unknown[], R> = (ctx: AttemptContext, ...args: A) => R | Promise<R>;
type Plain<A extends unknown[], R> = (...args: A) => R | Promise<R>;

/** What every call of one wrapped function shares: its options, its policy in the module, and
 * one random sample of each kind ready for the next input of any of its calls. */
class Shared<A extends unknown[], R> {
  // Drawn again only once the core used it, so a sequence of draws is consumed in the order the
  // core asks for them.
  backoffSample: number | undefined = undefined;
  throttleSample: number | undefined = undefined;
  /** The chaos layer every copy meets first, if any. */
  chaos: Chaos | undefined = undefined;
  /** The fault timeline every copy meets first, if any. */
  timeline: ChaosTimeline | undefined = undefined;
  constructor(
    readonly fn: Wrapped<A, R> | Plain<A, R>,
    readonly plain: boolean,
    readonly policy: number,
    readonly clock: Clock,
    readonly rng: Rng,
    readonly throttleRng: Rng,
    readonly sleep: Sleep,
    readonly timer: Sleep,
    readonly timeout: number,
    readonly uninterruptible: boolean,
    readonly onOpen: ReliableOptions<A, R>["onOpen"],
    readonly onEvent: ReliableOptions<A, R>["onEvent"],
  ) {}

  backoff(): number {
    return (this.backoffSample ??= this.rng());
  }

  throttle(): number {
    return (this.throttleSample ??= this.throttleRng());
  }

  /** Right after an input: forgets the samples it used. */
  used(): void {
    const bits = record[USED];
    if (bits & 1) this.backoffSample = undefined;
    if (bits & 2) this.throttleSample = undefined;
  }
}

/** An input for the engine (run at once, or queued while another is handled): the code of the
 * first action it leaves in the record ({@link IDLE} none), or -1. */
type Input = () => number;

/** The timer a call waits on: when it is due (`at`, ms on the call's clock), on the shared
 * default timer ({@link Timers}) or a custom one (stopped through `controller`). */
class Wake {
  /** On the shared timer: not fired nor stopped yet. */
  live = false;
  /** On the shared timer: when it is due, on `performance.now()`. */
  due = 0;
  controller: AbortController | undefined = undefined;
  constructor(
    readonly run: { fired(wake: Wake): void },
    readonly at: number,
  ) {}

  stop(): void {
    if (this.controller !== undefined) this.controller.abort(SUPERSEDED);
    else timers.stop(this);
  }
}

/**
 * The default timers of every call (an attempt's timeout, a hedge's delay, a backoff), on one
 * `setTimeout`: a call that ends before its timer is due (the common case) costs an entry in a
 * list and no `setTimeout`/`clearTimeout` pair (1.2-1.9 us a pair on Node 20 here). The timer is
 * re-armed only for an earlier wake-up, and keeps the process alive only while a wake-up is live
 * (`ref`/`unref`, as each call's own timer did). A wake-up never fires before its time.
 */
class Timers {
  /** Sorted by `due` (then by order added), from `head`; stopped ones stay until passed or swept. */
  list: Wake[] = [];
  head = 0;
  live = 0;
  stopped = 0;
  handle: ReturnType<typeof setTimeout> | undefined = undefined;
  /** When `handle` fires, on `performance.now()`. */
  armed = Infinity;
  refed = true;

  add(wake: Wake, ms: number): void {
    const now = performance.now();
    wake.due = now + ms;
    wake.live = true;
    const list = this.list;
    let i = list.length;
    while (i > this.head && list[i - 1].due > wake.due) i--;
    if (i === list.length) list.push(wake);
    else list.splice(i, 0, wake);
    if (++this.live === 1) this.ref(true);
    if (this.handle === undefined || wake.due < this.armed) this.arm(wake.due, now);
  }

  stop(wake: Wake): void {
    if (!wake.live) return;
    wake.live = false;
    this.stopped++;
    if (--this.live === 0) this.ref(false);
    // Sweep the stopped ones once they are most of the list.
    if (this.stopped > 1024 && this.stopped * 2 > this.list.length - this.head) {
      this.list = this.list.slice(this.head).filter((w) => w.live);
      this.head = 0;
      this.stopped = 0;
    }
  }

  ref(on: boolean): void {
    this.refed = on;
    const h = this.handle as { ref?(): void; unref?(): void } | undefined;
    if (typeof h === "object") on ? h.ref?.() : h.unref?.();
  }

  arm(due: number, now: number): void {
    if (this.handle !== undefined) clearTimeout(this.handle);
    this.armed = due;
    // Whole milliseconds, rounded up: never before the time asked for.
    this.handle = setTimeout(() => this.fire(), Math.max(0, Math.ceil(due - now)));
    if (!this.refed) this.ref(false);
  }

  fire(): void {
    this.handle = undefined;
    this.armed = Infinity;
    const now = performance.now();
    const list = this.list;
    const due: Wake[] = [];
    while (this.head < list.length && list[this.head].due <= now) {
      const wake = list[this.head++];
      if (wake.live) {
        wake.live = false;
        this.live--;
        due.push(wake);
      } else this.stopped--;
    }
    if (this.head > 1024 && this.head * 2 > list.length) {
      this.list = list.slice(this.head);
      this.head = 0;
    }
    for (; this.head < this.list.length && !this.list[this.head].live; this.head++) this.stopped--;
    if (this.head < this.list.length) this.arm(this.list[this.head].due, now);
    if (this.live === 0) this.ref(false);
    for (const wake of due) wake.run.fired(wake);
  }
}

const timers = new Timers();

/** One call, decided by the module's engine: this only runs what it asks for (one object per
 * call, its methods on the prototype). */
class Run<A extends unknown[], R> {
  id = -1;
  /** The engine's time: the clock, never going back, and at least the time a wait was for. */
  t = 0;
  over = false;
  busy = false;
  /** Inputs that came while one was being handled (the function may cancel from inside). */
  queue: Input[] | undefined = undefined;
  /** Actions polled by inputs fed one after another before they could be run ({@link timedOut}). */
  early: number[][] | undefined = undefined;
  wake: Wake | undefined = undefined;
  /** Every copy sent, by number. */
  sent: Copy[] = [];
  /** Copies in flight. */
  live = 0;
  onCancel: (() => void) | undefined = undefined;

  constructor(
    readonly s: Shared<A, R>,
    readonly caller: AbortSignal | undefined,
    readonly args: A,
    readonly resolve: (value: R | PromiseLike<R>) => void,
    readonly reject: (error: unknown) => void,
  ) {}

  now(): number {
    return (this.t = Math.max(this.t, this.s.clock()));
  }

  start(): void {
    const s = this.s;
    // The module never grows its memory, but a view over a grown one would read nothing.
    if (record.length === 0) record = new Float64Array(abi.memory.buffer, abi.rk_record_ptr(), RECORD);
    const id = abi.rk_call_start(s.policy, this.now(), s.backoff(), s.throttle());
    if (id < 0) return this.reject(refusal());
    s.used();
    this.id = id;
    const caller = this.caller;
    if (caller !== undefined) {
      this.onCancel = () => this.feed(() => abi.rk_call_cancel(this.id, this.now()));
      caller.addEventListener("abort", this.onCancel, { once: true });
    }
    // The start's first action is in the record already.
    this.feed(undefined);
  }

  /** Feeds an input (`undefined`: the call's start, already fed), then runs what it asks for;
   * queued while one is being handled. */
  feed(input: Input | undefined): void {
    if (this.busy) {
      if (input !== undefined) (this.queue ??= []).push(input);
      return;
    }
    if (this.over) return;
    this.busy = true;
    try {
      let code = input === undefined ? record[CODE] : this.input(input);
      for (;;) {
        this.pump(code);
        const next = this.queue?.shift();
        if (next === undefined || this.over) break;
        code = this.input(next);
      }
    } catch (error) {
      this.fail(error);
    } finally {
      this.busy = false;
    }
  }

  /** Feeds one input: the code of the first action it polled. */
  input(input: Input): number {
    const code = input();
    this.s.used();
    if (code < 0) throw refusal();
    return code;
  }

  fail(error: unknown): void {
    if (this.over) return;
    for (const c of this.sent) if (c !== undefined && c.live) c.ctx?.abort(error);
    this.end();
    this.reject(error);
  }

  end(): void {
    this.over = true;
    this.wake?.stop();
    if (this.onCancel !== undefined) this.caller?.removeEventListener("abort", this.onCancel);
    abi.rk_call_free(this.id, this.t);
  }

  /** Runs every action the engine asks for after an input (`code`: the first, in the record),
   * then sets the timer it wants. What the record says is read before anything runs. */
  pump(code: number): void {
    let queued = record[QUEUED];
    const wakes = record[WAKE] === 1;
    if (this.s.onEvent !== undefined && record[EVENTS] > 0) this.events();
    const early = this.early;
    if (early !== undefined) {
      this.early = undefined;
      for (const action of early) if (this.act(action[CODE], action)) return;
    }
    if (code !== IDLE && this.act(code, record)) return;
    while (queued > 0) {
      const next = abi.rk_call_poll(this.id);
      if (next < 0) throw refusal();
      queued = record[QUEUED];
      if (next !== IDLE && this.act(next, record)) return;
    }
    this.schedule(wakes);
  }

  /** Runs one action (its numbers in `r`, as the record holds them); true if the call is over. */
  act(code: number, r: ArrayLike<number>): boolean {
    if (code === SEND) this.send(r[OUT], r[OUT + 1], r[OUT + 2] === 1);
    else if (code === CANCEL) this.cancel(r[OUT], r[OUT + 1]);
    else if (code === DONE) {
      this.done(r[OUT], r[OUT + 2], r[OUT + 4], r[OUT + 5]);
      return true;
    }
    return false;
  }

  emit(e: ReliableEvent): void {
    this.s.onEvent?.(e);
  }

  events(): void {
    for (let code = abi.rk_event(); code !== 0; code = abi.rk_event()) {
      const [a, b] = [abi.rk_event_number(0), abi.rk_event_number(1)];
      switch (code) {
        case 1:
          this.emit({ kind: "hedge", attempt: a });
          break;
        case 2:
          this.emit({ kind: "no-hedge", by: REFUSERS[a] });
          break;
        case 3:
          this.emit({ kind: "lost", attempt: a });
          break;
        case 4:
          this.emit(b < 0 ? { kind: "refused", by: REFUSERS[a] } : { kind: "refused", by: REFUSERS[a], retryAfter: b });
          break;
        case 5:
          this.emit({ kind: "retry", delay: a, attempts: abi.rk_event_number(2) });
          break;
        case 6:
          this.emit({ kind: "limit", from: a, to: b });
          break;
        case 10:
          this.emit({ kind: "breaker", from: STATES[a], to: STATES[b] });
          break;
      }
    }
  }

  send(n: number, deadline: number, hedge: boolean): void {
    const s = this.s;
    const copy = new Copy(n, deadline, s.plain ? undefined : new Attempt(n, hedge));
    this.sent[n] = copy;
    this.live++;
    let pending: Promise<R>;
    const chaos = s.chaos;
    try {
      if (chaos !== undefined && chaos.on !== 0 && !chaosKilled) pending = this.chaotic(chaos, copy);
      else if (s.timeline !== undefined && !chaosKilled) pending = this.replayed(s.timeline, copy);
      else pending = this.call(copy);
    } catch (error) {
      pending = Promise.reject(error);
    }
    pending.then(
      (value) => this.answered(copy, true, value),
      (error) => this.answered(copy, false, error),
    );
  }

  /** Sends copy `copy` to the wrapped function. */
  call(copy: Copy): Promise<R> {
    const s = this.s;
    return Promise.resolve(
      s.plain ? (s.fn as Plain<A, R>)(...this.args) : (s.fn as Wrapped<A, R>)(copy.ctx as Attempt, ...this.args),
    );
  }

  /** Copy `copy` through the chaos layer: what the core decides is told to onEvent (behaviour,
   * latency, then the answer, as the Rust layers report them), then carried out. */
  chaotic(chaos: Chaos, copy: Copy): Promise<R> {
    const code = abi.rk_chaos_decide(chaos.handle);
    if (code < 0) throw refusal();
    if (code === 0) return this.call(copy);
    const [k, behavior, delay, strategy, kind, status, after, retry] = chaosRecord();
    const tell = (event: ChaosEvent, ms?: number) => {
      if (this.s.onEvent !== undefined) {
        this.emit(ms === undefined ? { kind: "chaos", event, attempt: k, copy: copy.n } : { kind: "chaos", event, attempt: k, copy: copy.n, delay: ms });
      }
    };
    if (behavior === 1) {
      tell("Chaos.OnBehavior");
      chaos.callback?.();
    }
    if (delay >= 0) tell("Chaos.OnLatency", delay);
    if (strategy >= 0) tell(CHAOS_EVENTS[strategy]);
    const answer = (): Promise<R> => {
      if (strategy < 0) return this.call(copy);
      // A hang never answers: the copy's timer (or the caller) ends it.
      if (kind === 2) return new Promise<R>(() => {});
      if (strategy === 0 && chaos.hasError) return Promise.reject(chaos.error);
      if (strategy === 2 && chaos.hasValue) return Promise.resolve(chaos.value as R);
      if (kind === 1) return Promise.reject(Object.assign(new Error("chaos: connection reset injected"), { code: "ECONNRESET" }));
      return Promise.resolve(new ChaosResponse(status, after, retry) as R);
    };
    return delay >= 0 ? this.s.sleep(delay, copy.ctx?.signal).then(answer) : answer();
  }

  /** Copy `copy` through a fault timeline, as the Rust `TimelineLayer` plays it: held by a
   * partition, answered by an outage (a 503, or a hang) or a throttle (a 429 with its
   * Retry-After), stretched by a latency inflation, a success failed (a 500) by an error rate.
   * Told to onEvent as the Rust layer reports it: an answer as `Chaos.OnFault`, a hold or a
   * stretch as `Chaos.OnLatency`. */
  async replayed(tl: ChaosTimeline, copy: Copy): Promise<R> {
    const s = this.s;
    const out = timelineRecord();
    const tell = (event: ChaosEvent, n: number, ms?: number) => {
      if (s.onEvent !== undefined) this.emit(ms === undefined ? { kind: "chaos", event, attempt: n, copy: copy.n } : { kind: "chaos", event, attempt: n, copy: copy.n, delay: ms });
    };
    const send = (n: number) => {
      const code = abi.rk_timeline_send(tl.handle, tl.now(), n);
      if (code < 0) throw refusal();
      return [code, out[0], out[1], out[2]];
    };
    let [code, a, b, n] = send(-1);
    while (code === 1) {
      const wait = Math.max(0, a - tl.now());
      tell("Chaos.OnLatency", n, wait);
      await s.sleep(wait, copy.ctx?.signal);
      [code, a, b] = send(n);
    }
    if (code === 2) {
      tell("Chaos.OnFault", n);
      return new ChaosResponse(a, b, -1) as R;
    }
    if (code === 3) {
      tell("Chaos.OnFault", n);
      return new Promise<R>(() => {});
    }
    const factor = a;
    const sent = tl.now();
    let ok = true;
    let value: unknown;
    try {
      value = await this.call(copy);
    } catch (e) {
      ok = false;
      value = e;
    }
    if (factor > 1) {
      const extra = (tl.now() - sent) * (factor - 1);
      tell("Chaos.OnLatency", n, extra);
      await s.sleep(extra, copy.ctx?.signal);
    }
    // A success by the core's answer table.
    const [status, serverDelay, shouldRetry] = answerOf(ok, value);
    const success = ok && (typeof value !== "object" || value === null || (abi.rk_answer(status, serverDelay, shouldRetry, 0) & CLASS_BITS) === OK);
    for (;;) {
      const at = abi.rk_timeline_answer(tl.handle, tl.now(), n, success ? 1 : 0);
      if (at < 0) throw refusal();
      if (at === 0) break;
      if (at === 1) {
        const wait = Math.max(0, out[0] - tl.now());
        tell("Chaos.OnLatency", n, wait);
        await s.sleep(wait, copy.ctx?.signal);
        continue;
      }
      tell("Chaos.OnFault", n);
      return new ChaosResponse(out[0], -1, -1) as R;
    }
    if (ok) return value as R;
    throw value;
  }

  /** A copy no longer counts. */
  drop(copy: Copy): void {
    if (!copy.live) return;
    copy.live = false;
    this.live--;
  }

  cancel(n: number, why: number): void {
    const copy = this.sent[n];
    if (copy === undefined || !copy.live) return;
    this.drop(copy);
    copy.ctx?.abort(
      why === 1 ? timeoutError(this.s.timeout) : why === 0 ? abortError("another copy answered first") : this.caller?.reason,
    );
  }

  /** A copy answered: the core classes it (told to onEvent first), then the engine hears it. */
  answered(copy: Copy, ok: boolean, value: unknown): void {
    if (!copy.live || this.over) {
      // Too late to count (cancelled, or the call is over): a Response's connection is freed.
      if (ok && isResponse(value)) void value.body?.cancel?.().catch(() => {});
      return;
    }
    this.feed(() => this.answer(copy, ok, value));
  }

  answer(copy: Copy, ok: boolean, value: unknown): number {
    const s = this.s;
    const at = this.now();
    const n = copy.n;
    // Past its deadline, the copy's timer has fired: it timed out, whatever raced it here
    // (unless the work cannot be interrupted: then its answer is taken as it comes).
    if (!s.uninterruptible && copy.deadline >= 0 && at + 1e-3 >= copy.deadline) return this.timedOut([n], at);
    this.drop(copy);
    copy.settled = true;
    copy.ok = ok;
    copy.value = value;
    // A plain value (not an error, not a Response) is a success: nothing to parse.
    if (ok && (typeof value !== "object" || value === null)) {
      if (s.onEvent !== undefined) this.emitAnswer(n, abi.rk_answer(200, -1, -1, 0));
      return abi.rk_call_answer(this.id, n, 200, -1, -1, 0, at, s.backoff(), s.throttle());
    }
    const [status, serverDelay, shouldRetry] = answerOf(ok, value);
    if (s.onEvent !== undefined) this.emitAnswer(n, abi.rk_answer(status, serverDelay, shouldRetry, 0));
    return abi.rk_call_answer(this.id, n, status, serverDelay, shouldRetry, 0, at, s.backoff(), s.throttle());
  }

  emitAnswer(n: number, meaning: number): void {
    const code = meaning & CLASS_BITS;
    this.emit({ kind: "answer", attempt: n, class: code === OK ? "ok" : CLASS_NAMES[code], accepted: (meaning & ACCEPTED) !== 0 });
  }

  /** The timers of copies `ns` fired at `at`: each is told as a timeout, then the engine hears
   * each (the actions the inputs before the last polled are kept in order, for {@link pump}). */
  timedOut(ns: number[], at: number): number {
    const s = this.s;
    const meaning = s.onEvent === undefined ? 0 : abi.rk_answer(TIMED_OUT, -1, -1, 0);
    for (const n of ns) {
      const copy = this.sent[n];
      if (copy === undefined || !copy.live) continue;
      this.drop(copy);
      const error = timeoutError(s.timeout);
      copy.ctx?.abort(error);
      copy.settled = true;
      copy.ok = false;
      copy.value = error;
      if (s.onEvent !== undefined) this.emitAnswer(n, meaning);
    }
    let code = IDLE;
    for (let i = 0; i < ns.length; i++) {
      if (code !== IDLE) (this.early ??= []).push(Array.from(record.subarray(0, NUMBERS_END)));
      code = abi.rk_call_answer(this.id, ns[i], TIMED_OUT, -1, -1, 0, at, s.backoff(), s.throttle());
      if (code < 0) return -1;
    }
    return code;
  }

  /** Sets the one timer the call needs: the engine's next wake-up, if any (`wakes`: it has one). */
  schedule(wakes: boolean): void {
    const s = this.s;
    let at = -1;
    // Work that cannot be interrupted is waited for: no timer runs while a copy is out.
    let ms = -1;
    if (wakes && !(s.uninterruptible && this.live > 0)) {
      // From now: the wait's end is an instant, whatever time the input it follows took.
      ms = abi.rk_call_timeout(this.id, this.now());
      if (Number.isNaN(ms)) throw refusal();
      if (ms >= 0) at = this.t + ms;
    }
    if (this.wake !== undefined && this.wake.at === at) return;
    this.wake?.stop();
    this.wake = undefined;
    if (at < 0) return;
    const wake = new Wake(this, at);
    const wait = this.live > 0 ? s.timer : s.sleep;
    this.wake = wake;
    if (wait === defaultSleep) {
      // The default timer: the shared one, without the AbortController a custom one is handed.
      timers.add(wake, ms);
    } else {
      const stop = (wake.controller = new AbortController());
      wait(ms, stop.signal).then(
        () => this.fired(wake),
        (error) => {
          if (!stop.signal.aborted) this.fail(error);
        },
      );
    }
  }

  /** The timer of `wake` fired. */
  fired(wake: Wake): void {
    if (this.wake !== wake || this.over) return;
    this.wake = undefined;
    this.feed(() => this.tick(wake.at));
  }

  /** The timer set for `at` fired. */
  tick(at: number): number {
    this.t = Math.max(this.t, at);
    const t = this.t;
    // Within a microsecond: the deadline and the wake-up are the same instant, rounded apart.
    const late: number[] = [];
    for (const c of this.sent) if (c !== undefined && c.live && c.deadline >= 0 && c.deadline <= t + 1e-3) late.push(c.n);
    const s = this.s;
    return late.length > 0 ? this.timedOut(late, t) : abi.rk_call_tick(this.id, t, s.backoff(), s.throttle());
  }

  /** The call is over: its result, as the seed's API gives it. */
  done(result: number, n: number, by: number, retryAfter: number): void {
    const s = this.s;
    const reason = result === 1 && s.onEvent !== undefined ? gaveUp() : undefined;
    const last = this.sent[n];
    const settled = last !== undefined && last.settled;
    this.end();
    if (result === 0 && settled) return this.resolve(last.value as R);
    if (result === 3) return this.reject(this.caller?.reason ?? abortError("the call was cancelled"));
    if (result === 1 && reason !== undefined) this.emit({ kind: "give-up", attempt: n, reason });
    if (result === 2 && by === 0) {
      const error = new CircuitOpenError(Math.max(0, retryAfter));
      if (s.onOpen === undefined) return this.reject(error);
      let fallback: Promise<R>;
      try {
        fallback = Promise.resolve(s.onOpen(error, ...this.args));
      } catch (e) {
        fallback = Promise.reject(e);
      }
      fallback.then(this.resolve, this.reject);
      return;
    }
    if (result === 2) return this.reject(new RefusedError(REFUSERS[by] ?? "breaker", retryAfter < 0 ? undefined : retryAfter));
    // The last answer: a Response is returned as it is, anything thrown is thrown again.
    if (settled && last.ok) return this.resolve(last.value as R);
    this.reject((settled ? last.value : undefined) ?? new Error(`reliablekit: the call ended (${result}) with no answer`));
  }
}

/**
 * Wraps `fn`: `plain`, it gets the wrapped function's arguments only (no context is made for it);
 * otherwise an {@link AttemptContext} first.
 */
function wrap<A extends unknown[], R>(
  fn: Wrapped<A, R> | Plain<A, R>,
  plain: boolean,
  opts: ReliableOptions<A, R> | undefined,
): Reliable<A, R> {
  if (typeof fn !== "function") throw new TypeError(`fn must be a function, got ${describe(fn)}`);
  const o = options("reliable options", opts);
  if (o.breaker !== undefined && !(o.breaker instanceof CircuitBreaker)) {
    throw new TypeError(`breaker must be a CircuitBreaker, got ${describe(o.breaker)}`);
  }
  if (o.policy !== undefined) {
    for (const k of ["breaker", "timeout", "maxAttempts", "baseDelay", "factor", "jitter", "maxDelay", "maxServerDelay"]) {
      if (o[k] !== undefined) throw new TypeError(`${k} is set by the policy: leave it out when policy is given`);
    }
  }
  if (o.uninterruptible !== undefined && typeof o.uninterruptible !== "boolean") {
    throw new TypeError(`uninterruptible must be a boolean, got ${describe(o.uninterruptible)}`);
  }
  const uninterruptible = o.uninterruptible === true;
  const breaker = o.breaker as CircuitBreaker | undefined;
  const timeout = duration("timeout", o.timeout, 8000);
  const maxAttempts = count("maxAttempts", o.maxAttempts, 5);
  const baseDelay = number("baseDelay", o.baseDelay, 200);
  const factor = number("factor", o.factor, 2);
  const jitter = number("jitter", o.jitter, 0.1);
  const maxDelay = duration("maxDelay", o.maxDelay, Infinity);
  const maxServerDelay = duration("maxServerDelay", o.maxServerDelay, 30_000);
  const sleep = func<Sleep>("sleep", o.sleep, defaultSleep);
  const timer = func<Sleep>("timer", o.timer, defaultSleep);
  const rng = func<Rng>("rng", o.rng, Math.random);
  const throttleRng = func<Rng>("throttleRng", o.throttleRng, rng);
  const clock = func<Clock>("clock", o.clock, breaker?.clock ?? defaultClock);
  const onOpen = func<ReliableOptions<A, R>["onOpen"]>("onOpen", o.onOpen, undefined);
  const onEvent = func<ReliableOptions<A, R>["onEvent"]>("onEvent", o.onEvent, undefined);
  const policy = o.policy instanceof Policy ? o.policy.wrapperPolicy() : o.policy !== undefined ? readPolicy(o.policy).handle : checked(
    abi.rk_policy_new(
      maxAttempts,
      timeout,
      baseDelay,
      factor,
      jitter,
      maxDelay,
      maxServerDelay < 0 ? Infinity : maxServerDelay,
      breaker === undefined ? -1 : breaker.handle,
    ),
  );

  const shared = new Shared<A, R>(fn, plain, policy, clock, rng, throttleRng, sleep, timer, timeout, uninterruptible, onOpen, onEvent);
  if (o.chaos instanceof ChaosTimeline) shared.timeline = o.chaos;
  else if (o.chaos !== undefined) {
    if (!(o.chaos instanceof Chaos)) throw new TypeError(`chaos must be a Chaos or a ChaosTimeline, got ${describe(o.chaos)}`);
    shared.chaos = o.chaos;
  }

  /** One whole call, decided by the module's engine; this only runs what it asks for. */
  function call(caller: AbortSignal | undefined, args: A): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      if (caller?.aborted) return reject(caller.reason);
      new Run(shared, caller, args, resolve, reject).start();
    });
  }

  const wrapped = ((...args: A) => call(undefined, args)) as Reliable<A, R>;
  wrapped.withSignal = (signal, ...args) => call(signal, args);
  wrapped.dispose = () => {
    freePolicy.unregister(wrapped);
    abi.rk_policy_free(policy);
  };
  freePolicy.register(wrapped, policy, wrapped);
  // Held by the wrapper: its breaker's slot is not freed while the wrapper lives.
  Object.defineProperty(wrapped, "breaker", { value: breaker });
  return wrapped;
}

/**
 * Wraps `fn` with the seed's timeout + exponential backoff + circuit breaker + fallback: the
 * wrapped function takes `fn`'s arguments, and `fn` gets exactly them. Every decision (admit,
 * retry or give up, how long to wait, when an attempt times out) is the core's call engine's, in
 * the WebAssembly module. For the attempt's `AbortSignal` (so a timed-out attempt's `fetch` is
 * really cancelled), wrap with {@link reliable.withContext} instead.
 *
 * A thrown error is a failed attempt (a timeout counts as one). A returned `Response` is classed by
 * the core's answer table: 429, 503 and 529 (and 408, 409 or a 5xx that gives a delay) are
 * throttled and their `retry-after-ms` or `Retry-After` honoured, 408, 409 and other 5xx retried
 * with backoff, `x-should-retry` obeyed, and another 4xx ends the call at once without counting
 * against the downstream. When the attempts run out, the last error is thrown (or the last
 * Response returned).
 */
export function reliable<A extends unknown[], R>(
  fn: (...args: A) => R | Promise<R>,
  opts?: ReliableOptions<A, R>,
): Reliable<A, R> {
  if (typeof fn !== "function") throw new TypeError(`fn must be a function, got ${describe(fn)}`);
  return wrap<A, R>(fn, true, opts);
}

/**
 * {@link reliable}, with `fn` getting an {@link AttemptContext} before the wrapped function's
 * arguments: pass `ctx.signal` to `fetch`, so a copy that times out, loses a hedge race or is
 * cancelled by the caller is really aborted.
 */
reliable.withContext = function withContext<A extends unknown[], R>(
  fn: (ctx: AttemptContext, ...args: A) => R | Promise<R>,
  opts?: ReliableOptions<A, R>,
): Reliable<A, R> {
  return wrap(fn, false, opts);
};

//! # reliable-wasm: the core's call engine for JavaScript, as plain WebAssembly exports
//!
//! The npm package `reliablekit` loads this module with `WebAssembly.instantiate` and calls the
//! `rk_*` functions of [`ffi`] directly: no generated glue, only numbers cross the boundary.
//!
//! Every call is decided by the core's engine ([`reliable_core::engine::CallState`]): the TypeScript side only sends the
//! copies it is told to send, keeps the timers, aborts what it is told to cancel, and hands each
//! answer back. Breakers, policies (a [`Plan`] and the stateful layers it draws from) and calls
//! in flight live in fixed tables of a [`World`], named across the boundary by index (a
//! *handle*). The tables are fixed-size, so the module never allocates; when one is full the
//! constructor answers "full" and the TypeScript side throws a `RangeError` saying which.
//!
//! This file is the safe part: every operation checks each handle and each number it is given
//! (a stale handle or a NaN is an error answer, never a trap). The `unsafe` item (the global
//! that holds the world) is in [`ffi`].
//!
//! Times cross as `f64` milliseconds on the caller's clock (`performance.now()` or an injected
//! one): JavaScript numbers need no `BigInt` that way, and a millisecond `f64` keeps nanosecond
//! precision for over a hundred days of uptime.
#![cfg_attr(target_arch = "wasm32", no_std)]
#![deny(unsafe_code)]
#![deny(missing_docs)]
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::indexing_slicing
    )
)]

pub use reliable_wasm_de as de;
pub mod chaos;
#[cfg(target_arch = "wasm32")]
pub mod ffi;
#[cfg(target_arch = "wasm32")]
mod init;
pub mod policy;
pub mod slot;

use core::cell::{Cell, RefCell};

use heapless::Deque;
use reliable_core::answer::{Answer, Signals};
use reliable_core::backoff::{BackoffConfig, BackoffPolicy, Jitter};
use reliable_core::breaker::{
    AnyWindow, BreakerConfig, BreakerPolicy, CircuitBreaker, HalfOpenConfig, Observer, OpenConfig,
    Outcome, Permit, ProbeRule, Rejection, State, Transition, WindowConfig,
};
use reliable_core::budget::{AnyBudget, Budget, Unlimited};
use reliable_core::engine::{Action, Ended, Input, Note, Plan, Refusal, SampleFor, Shared};
use reliable_core::hedge::Hedger;
use reliable_core::ledger::ExtraLedger;
use reliable_core::limit::{Limiter, RateLimiter};
use reliable_core::outcome::ErrorClass;
use reliable_core::retry::{RetryConfig, RetryPolicy};
use reliable_core::throttle::AdaptiveThrottle;
use reliable_core::{ConfigError, Duration, Instant};

/// The most calls a breaker's window may hold (the seed's default is 20).
pub const MAX_WINDOW: usize = 256;
/// Breakers alive at once.
#[cfg(not(test))]
pub const MAX_BREAKERS: usize = 256;
/// Breakers alive at once.
#[cfg(test)]
pub const MAX_BREAKERS: usize = 4;
/// Policies (one per wrapped function) alive at once.
#[cfg(not(test))]
pub const MAX_POLICIES: usize = 256;
/// Policies (one per wrapped function) alive at once.
#[cfg(test)]
pub const MAX_POLICIES: usize = 4;
/// Calls in flight at once, across every wrapped function.
#[cfg(not(test))]
pub const MAX_CALLS: usize = 2048;
/// Calls in flight at once, across every wrapped function.
#[cfg(test)]
pub const MAX_CALLS: usize = 8;
/// Copies of one attempt in flight at once (a first copy and up to three hedges).
pub const COPIES: usize = 4;
/// Decisions and breaker transitions one input may report before they are read.
pub const EVENTS: usize = 64;

/// The most buckets a breaker's time window may have (as in the Rust crate and the simulator, so
/// that a policy file with a time window loads in every face).
pub const MAX_BUCKETS: usize = 64;

/// A breaker: a count window of up to [`MAX_WINDOW`] calls or a time window of up to
/// [`MAX_BUCKETS`] buckets, as its config says; its transitions are reported as
/// [`Event::Breaker`].
pub type Breaker = CircuitBreaker<BreakerPolicy, BreakerWindow, 1, Transitions>;
/// A breaker's window: the kind its config asks for.
pub type BreakerWindow = AnyWindow<MAX_WINDOW, MAX_BUCKETS, 4>;

pub use slot::EngineCall;

/// Why an operation failed; the TypeScript side turns it into a `TypeError` or `RangeError`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Failure {
    /// The core refused a setting; the error names its field.
    Config(ConfigError),
    /// A table is full: [`Table::Breakers`] etc.
    Full(Table),
    /// A handle that names nothing alive (freed already, or never issued).
    BadHandle,
    /// A policy's config could not be read: where and why is [`World::read_error`].
    De,
}

impl From<ConfigError> for Failure {
    fn from(e: ConfigError) -> Self {
        Failure::Config(e)
    }
}

/// The fixed tables, for [`Failure::Full`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Table {
    /// [`MAX_BREAKERS`].
    Breakers = 1,
    /// [`MAX_POLICIES`].
    Policies = 2,
    /// [`MAX_CALLS`].
    Calls = 3,
    /// [`chaos::MAX_CHAOS`].
    Chaos = 4,
    /// [`chaos::MAX_TIMELINES`].
    Timelines = 5,
}

/// Which of a fixed number of slots are taken, with a stack of free indices: O(1) both ways.
#[derive(Debug)]
pub struct Slots<const N: usize> {
    used: [Cell<bool>; N],
    free: [Cell<u16>; N],
    free_len: Cell<usize>,
    /// Slots never used yet are `fresh..N`.
    fresh: Cell<usize>,
}

impl<const N: usize> Slots<N> {
    const CHECK: () = assert!(N <= u16::MAX as usize, "indices are u16");

    /// All free.
    pub fn new() -> Self {
        let () = Self::CHECK;
        Slots {
            used: [const { Cell::new(false) }; N],
            free: [const { Cell::new(0) }; N],
            free_len: Cell::new(0),
            fresh: Cell::new(0),
        }
    }

    fn take(&self) -> Option<usize> {
        let index = if self.free_len.get() > 0 {
            let len = self.free_len.get() - 1;
            self.free_len.set(len);
            usize::from(self.free.get(len)?.get())
        } else if self.fresh.get() < N {
            self.fresh.set(self.fresh.get() + 1);
            self.fresh.get() - 1
        } else {
            return None;
        };
        self.used.get(index)?.set(true);
        Some(index)
    }

    fn is_used(&self, handle: u32) -> bool {
        self.used.get(handle as usize).is_some_and(Cell::get)
    }

    fn give_back(&self, handle: u32) {
        let Some(used) = self.used.get(handle as usize) else {
            return;
        };
        if !used.replace(false) {
            return;
        }
        // A slot just freed was in use, so the free stack has room for it.
        if let Some(slot) = self.free.get(self.free_len.get()) {
            slot.set(handle as u16);
            self.free_len.set(self.free_len.get() + 1);
        }
    }
}

impl<const N: usize> Default for Slots<N> {
    fn default() -> Self {
        Self::new()
    }
}

/// Reports a breaker's transitions as [`Event::Breaker`].
#[derive(Debug)]
pub struct Transitions(&'static Events);

impl Observer for Transitions {
    fn on_transition(&self, t: Transition) {
        self.0.push(Event::Breaker {
            from: t.from,
            to: t.to,
        });
    }
}

/// What a call reports as it is decided, read by the TypeScript side after each input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// A decision the engine took.
    Note(Note),
    /// A breaker changed state.
    Breaker {
        /// Before.
        from: State,
        /// After.
        to: State,
    },
}

/// The events not read yet.
#[derive(Debug, Default)]
pub struct Events(RefCell<Deque<Event, EVENTS>>);

impl Events {
    fn push(&self, e: Event) {
        if let Ok(mut q) = self.0.try_borrow_mut() {
            // Full only when nobody reads them: the oldest goes.
            if q.is_full() {
                q.pop_front();
            }
            let _ = q.push_back(e);
        }
    }

    /// The oldest event not read yet.
    pub fn pop(&self) -> Option<Event> {
        self.0.try_borrow_mut().ok()?.pop_front()
    }

    /// How many events are not read yet.
    pub fn len(&self) -> usize {
        self.0.try_borrow().map_or(0, |q| q.len())
    }

    /// Whether every event was read.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Forgets the events not read yet.
    pub fn clear(&self) {
        if let Ok(mut q) = self.0.try_borrow_mut() {
            q.clear();
        }
    }
}

/// A policy: what each call of one wrapped function runs, and the stateful layers its calls
/// share (a breaker is its own handle, as several wrappers may share one).
///
/// A wrapper made from a TypeScript `Policy` object has a policy of its own whose `Shared`
/// layers are another's, the *base* the object holds ([`World::policy_share`]): its calls then
/// draw from the base's state for those layers, and from their own for the rest (`PerClient`).
#[derive(Debug)]
pub struct Policy {
    plan: Plan,
    breaker: Option<u32>,
    /// The breaker is the policy's own (from its stack): freed with it.
    owns_breaker: bool,
    budget: Option<RefCell<AnyBudget>>,
    ledger: Option<RefCell<ExtraLedger>>,
    throttle: Option<RefCell<AdaptiveThrottle>>,
    hedger: Option<RefCell<Hedger>>,
    limiter: Option<RefCell<Limiter>>,
    rate: Option<RefCell<RateLimiter>>,
    /// The policy whose state the layers in `borrowed` are, if any.
    base: Option<u32>,
    /// The layers drawn from `base` ([`policy::shared_bit`] of each); the breaker is shared by
    /// handle instead.
    borrowed: u32,
    /// Policies drawing from this one: it is kept until the last of them is freed.
    dependents: u32,
    /// Freed by its owner while policies still draw from it: freed with the last of them.
    released: bool,
}

impl Policy {
    /// A policy running `plan`, no stateful layer yet.
    pub fn new(plan: Plan) -> Self {
        Policy {
            plan,
            breaker: None,
            owns_breaker: false,
            budget: None,
            ledger: None,
            throttle: None,
            hedger: None,
            limiter: None,
            rate: None,
            base: None,
            borrowed: 0,
            dependents: 0,
            released: false,
        }
    }
}

/// One slot of the call table: the call, the plan it runs and its policy.
#[derive(Debug, Default)]
pub struct CallSlot {
    cell: slot::CallCell,
    policy: Cell<u32>,
}

impl CallSlot {
    /// An empty slot.
    pub const fn new() -> Self {
        CallSlot {
            cell: slot::CallCell::new(),
            policy: Cell::new(0),
        }
    }
}

/// Everything the module holds. Every field is interior-mutable: the world is shared by `&`,
/// as the engine's calls hold it while the tables change around them.
#[derive(Debug)]
pub struct World {
    breakers: [RefCell<Option<Breaker>>; MAX_BREAKERS],
    breaker_slots: Slots<MAX_BREAKERS>,
    policies: [RefCell<Option<Policy>>; MAX_POLICIES],
    policy_slots: Slots<MAX_POLICIES>,
    calls: [CallSlot; MAX_CALLS],
    call_slots: Slots<MAX_CALLS>,
    /// The policy of the call being fed an input.
    current: Cell<u32>,
    /// The call fed the latest input: the events not read yet are its own.
    last_call: Cell<u32>,
    /// The stack being read.
    builder: RefCell<policy::Builder>,
    /// Why the latest config could not be read.
    read_error: Cell<Option<de::DeError>>,
    /// The random samples of the input being fed (backoff jitter, throttle).
    samples: Cell<(u64, u64)>,
    /// Which of them the input used (1 the backoff's, 2 the throttle's): JavaScript draws a new
    /// one only for a sample used, so a sequence of draws is consumed as the core asks.
    used: Cell<u32>,
    events: Events,
    /// The latest action polled and what the face needs to know with it (see [`Record`]).
    record: Cell<[f64; RECORD]>,
    /// The core's name of the latest give-up reason (`max-attempts`, `fatal`, ...).
    gave_up: Cell<&'static str>,
    /// The chaos layers.
    pub chaos: chaos::Table,
}

impl World {
    /// An empty world (large: build it in place, see [`ffi`]).
    pub fn new() -> Self {
        World {
            breakers: [const { RefCell::new(None) }; MAX_BREAKERS],
            breaker_slots: Slots::new(),
            policies: [const { RefCell::new(None) }; MAX_POLICIES],
            policy_slots: Slots::new(),
            calls: [const { CallSlot::new() }; MAX_CALLS],
            call_slots: Slots::new(),
            current: Cell::new(u32::MAX),
            last_call: Cell::new(u32::MAX),
            builder: RefCell::new(policy::Builder::default()),
            read_error: Cell::new(None),
            samples: Cell::new((0, 0)),
            used: Cell::new(0),
            events: Events::default(),
            record: Cell::new([0.0; RECORD]),
            gave_up: Cell::new(""),
            chaos: chaos::Table::new(),
        }
    }
}

impl Default for World {
    fn default() -> Self {
        Self::new()
    }
}

/// A time on the caller's clock, in milliseconds, as an instant (negative and NaN: zero).
pub fn instant(ms: f64) -> Instant {
    Instant::ZERO.saturating_add(duration(ms))
}

/// Milliseconds as a duration (negative and NaN: zero; too large: saturated).
pub fn duration(ms: f64) -> Duration {
    Duration::from_secs_f64(ms / 1000.0)
}

/// `now`, or the call's wake-up `wake` when `now` is within a microsecond of it: a time that
/// went through a JavaScript number (the wake-up, or a wait's end added up from its length) comes
/// back at the instant it stood for, not a nanosecond short of it.
pub fn snap(now: Instant, wake: Option<Instant>) -> Instant {
    const NEAR: u64 = 1_000;
    match wake {
        Some(w) if now.as_nanos().abs_diff(w.as_nanos()) <= NEAR => w,
        _ => now,
    }
}

/// A duration in milliseconds.
pub fn millis(d: Duration) -> f64 {
    d.as_nanos() as f64 / 1e6
}

/// An instant in milliseconds.
pub fn instant_millis(i: Instant) -> f64 {
    i.as_nanos() as f64 / 1e6
}

/// A uniform sample in [0, 1) (JavaScript's `Math.random()` or an injected `rng`) as the uniform
/// `u64` the core reads. Out-of-range values are clamped; NaN reads as 0.
pub fn sample(unit: f64) -> u64 {
    // 2^64 as f64; `as` saturates and maps NaN to 0.
    (unit * 18_446_744_073_709_551_616.0) as u64
}

/// The state as a number: closed 0, open 1, half-open 2, forced open 3, disabled 4.
pub fn state_code(state: State) -> u32 {
    match state {
        State::Closed => 0,
        State::Open => 1,
        State::HalfOpen => 2,
        State::ForcedOpen => 3,
        State::Disabled => 4,
    }
}

/// The code of a class: transient 0, timeout 1, throttled 2, fatal 3, don't-retry 4, a local
/// refusal 5.
pub fn class_code(class: ErrorClass) -> u32 {
    match class {
        ErrorClass::Transient => 0,
        ErrorClass::Timeout => 1,
        ErrorClass::Throttled { .. } => 2,
        ErrorClass::Fatal => 3,
        ErrorClass::DontRetry => 4,
        ErrorClass::Refused { .. } => 5,
    }
}

/// Who refused: breaker 0, throttle 1, ledger 2, concurrency limit 3, rate limit 4.
pub fn refusal_code(r: Refusal) -> u32 {
    match r {
        Refusal::Breaker(_) => 0,
        Refusal::Throttle(_) => 1,
        Refusal::Ledger(_) => 2,
        Refusal::Limit(_) => 3,
        Refusal::Rate(_) => 4,
    }
}

/// [`answer_meaning`]'s class code of a success.
pub const ANSWER_OK: u32 = 15;
/// [`answer_meaning`]: the bits that hold the class code.
pub const ANSWER_CLASS: u32 = 15;
/// [`answer_meaning`]: the class carries the server's delay and the retry honours it (up to the
/// policy's `max_server_delay`).
pub const ANSWER_DELAY_HONOURED: u32 = 1 << 4;
/// [`answer_meaning`]: the breaker ignores the attempt (records neither success nor failure).
pub const ANSWER_BREAKER_IGNORES: u32 = 1 << 5;
/// [`answer_meaning`]: the backend accepted it (what an adaptive throttle counts).
pub const ANSWER_ACCEPTED: u32 = 1 << 6;

/// An attempt's answer from numbers: `status >= 0` is a response's status (above `u16::MAX`:
/// read as `u16::MAX`), `-1` the attempt's timer fired, any other negative an error before any
/// answer (connection refused or reset, or a thrown error). The signals: `server_delay_ms` the
/// server's delay (`retry-after-ms`, else `Retry-After`; negative or NaN: none), `should_retry`
/// `x-should-retry` (1 true, 0 false, anything else absent), `overloaded` an explicit overload
/// marker (non-zero).
pub fn answer_of(status: i32, server_delay_ms: f64, should_retry: i32, overloaded: u32) -> Answer {
    let signals = Signals {
        retry_after: (server_delay_ms >= 0.0).then(|| duration(server_delay_ms)),
        should_retry: match should_retry {
            0 => Some(false),
            1 => Some(true),
            _ => None,
        },
        overloaded: overloaded != 0,
    };
    match status {
        -1 => Answer::Timeout,
        s if s < 0 => Answer::Connection,
        s => Answer::status(u16::try_from(s).unwrap_or(u16::MAX), signals),
    }
}

/// What an attempt's answer ([`answer_of`]) means, by the core's one table
/// ([`reliable_core::answer`]): the face parses, the core decides. The class's code
/// ([`class_code`], [`ANSWER_OK`] for a success) in the [`ANSWER_CLASS`] bits, with the
/// `ANSWER_*` flags of its consequences.
pub fn answer_meaning(
    status: i32,
    server_delay_ms: f64,
    should_retry: i32,
    overloaded: u32,
) -> u32 {
    let answer = answer_of(status, server_delay_ms, should_retry, overloaded);
    let flag = |on: bool, bit: u32| if on { bit } else { 0 };
    let Some(class) = answer.class() else {
        return ANSWER_OK | ANSWER_ACCEPTED;
    };
    let c = class.consequences();
    class_code(class)
        | flag(
            c.server_delay && class.retry_after().is_some(),
            ANSWER_DELAY_HONOURED,
        )
        | flag(c.breaker == Outcome::Ignored, ANSWER_BREAKER_IGNORES)
        | flag(c.accepted, ANSWER_ACCEPTED)
}

/// The seed library's backoff, `base · factor^(attempt − 1) · U[1 − jitter, 1 + jitter]`, capped
/// at `cap_ms` (negative: uncapped, as in the seed).
pub fn seed_backoff(
    base_ms: f64,
    factor: f64,
    jitter: f64,
    cap_ms: f64,
) -> Result<BackoffPolicy, ConfigError> {
    let cap = if cap_ms < 0.0 {
        Duration::MAX
    } else {
        duration(cap_ms)
    };
    BackoffPolicy::new(BackoffConfig {
        jitter: Jitter::Proportional { fraction: jitter },
        ..BackoffConfig::exponential(duration(base_ms), factor, cap, Jitter::None)
    })
}

/// The seed's `exp_backoff(attempt, base, factor, jitter, rng)` in milliseconds; `attempt` counts
/// from 1 (0 reads as 1).
pub fn exp_backoff(
    attempt: u32,
    base_ms: f64,
    factor: f64,
    jitter: f64,
    unit: f64,
) -> Result<f64, Failure> {
    let policy = seed_backoff(base_ms, factor, jitter, -1.0)?;
    Ok(millis(policy.delay(
        attempt.max(1),
        Duration::ZERO,
        sample(unit),
    )))
}

/// The seed library's breaker: trip when at least `failure_rate` of the last `window` calls
/// failed (deciding only over a full window), stay open `cooldown_ms`, then let every call
/// through as a probe; `probe` successes in a row close it, any failure re-opens it.
pub fn seed_breaker(failure_rate: f64, window: u32, cooldown_ms: f64, probe: u32) -> BreakerConfig {
    BreakerConfig {
        failure_rate: Some(failure_rate),
        minimum_calls: window,
        window: WindowConfig::Count { calls: window },
        open: OpenConfig {
            duration: duration(cooldown_ms),
            ..OpenConfig::default()
        },
        half_open: HalfOpenConfig {
            max_in_flight: None,
            rule: ProbeRule::Consecutive { successes: probe },
            probe_timeout: Duration::MAX,
            decide_at_minimum: false,
            max_wait: None,
            max_wait_closes: false,
        },
        ..BreakerConfig::reliablekit()
    }
}

/// The seed library's retry policy: `max_attempts` in all, `timeout_ms` per attempt (negative:
/// none), the seed's backoff between them capped at `cap_ms` (negative: none), server delays
/// (`Retry-After`) honoured up to `max_server_delay_ms`.
pub fn seed_retry(
    max_attempts: u32,
    timeout_ms: f64,
    base_ms: f64,
    factor: f64,
    jitter: f64,
    cap_ms: f64,
    max_server_delay_ms: f64,
) -> Result<RetryPolicy, ConfigError> {
    let backoff = seed_backoff(base_ms, factor, jitter, cap_ms)?;
    RetryPolicy::new(RetryConfig {
        max_attempts: Some(max_attempts),
        attempt_timeout: (timeout_ms >= 0.0).then(|| duration(timeout_ms)),
        max_server_delay: duration(max_server_delay_ms),
        ..RetryConfig::new(*backoff.config())
    })
}

/// The numbers of [`World::record`], by index: what an action polled says, and what the face
/// must know after an input without asking again. JavaScript reads them straight from linear
/// memory (a `Float64Array` over [`World::record_ptr`]): one export per input, not one per number.
pub struct Record;

impl Record {
    /// The action's code ([`Polled`]).
    pub const CODE: usize = 0;
    /// Its numbers (six, see [`Polled`]) start here.
    pub const NUMBERS: usize = 1;
    /// Actions still queued after it: poll again only if not zero.
    pub const QUEUED: usize = 7;
    /// The samples the latest input used (1 backoff, 2 throttle).
    pub const USED: usize = 8;
    /// Events not read yet (read them with `rk_event` only if not zero).
    pub const EVENTS: usize = 9;
    /// 1 if the call waits for a time (ask `rk_call_timeout`), 0 if only for answers or over.
    pub const WAKE: usize = 10;
}

/// The numbers in [`World::record`].
pub const RECORD: usize = 11;

/// What [`World::poll`] answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Polled {
    /// Nothing to do until an input.
    Idle = 0,
    /// Send a copy: [`World::out`] holds its number, its deadline (ms, -1 none), 1 if a hedge.
    Send = 1,
    /// Cancel a copy: its number, why (0 lost, 1 timed out, 2 the call is over).
    Cancel = 2,
    /// The call is over: result (0 ok, 1 gave up, 2 refused, 3 cancelled), copies sent, the
    /// winning or last copy (0 none), the last class ([`class_code`], -1 a success or none), who
    /// refused ([`refusal_code`], -1 nobody), the refuser's retry-after (ms, -1 none). A give-up's
    /// reason is [`World::gave_up`].
    Done = 3,
}

impl World {
    /// The core's name of the reason the latest call given up on gave up, as text (a reason the
    /// core adds needs no change here).
    pub fn gave_up(&self) -> &'static str {
        self.gave_up.get()
    }

    /// The numbers of the latest action polled.
    pub fn out(&self) -> [f64; 6] {
        let r = self.record.get();
        let mut out = [0.0; 6];
        if let Some(numbers) = r.get(Record::NUMBERS..Record::NUMBERS + 6) {
            out.copy_from_slice(numbers);
        }
        out
    }

    /// The latest action polled, and what the face needs with it ([`Record`]).
    pub fn record(&self) -> [f64; RECORD] {
        self.record.get()
    }

    /// Where [`record`](Self::record) lives in memory (the world never moves).
    pub fn record_ptr(&self) -> *const f64 {
        self.record.as_ptr().cast()
    }

    /// The events not read yet.
    pub fn events(&self) -> &Events {
        &self.events
    }

    /// A breaker with `config`; its transitions are reported as events.
    pub fn breaker_new(&'static self, config: BreakerConfig) -> Result<u32, Failure> {
        let policy = BreakerPolicy::new(config)?;
        let breaker = CircuitBreaker::<_, BreakerWindow, 1>::with_storage(policy)?
            .observe(Transitions(&self.events));
        let h = self
            .breaker_slots
            .take()
            .ok_or(Failure::Full(Table::Breakers))?;
        let slot = self.breakers.get(h).ok_or(Failure::BadHandle)?;
        let mut slot = slot.try_borrow_mut().map_err(|_| Failure::BadHandle)?;
        *slot = Some(breaker);
        Ok(h as u32)
    }

    /// Frees a breaker (a handle freed twice is ignored).
    pub fn breaker_free(&self, breaker: u32) {
        if !self.breaker_slots.is_used(breaker) {
            return;
        }
        if let Some(Ok(mut b)) = self
            .breakers
            .get(breaker as usize)
            .map(RefCell::try_borrow_mut)
        {
            *b = None;
        }
        self.breaker_slots.give_back(breaker);
    }

    fn with_breaker<R>(&self, breaker: u32, f: impl FnOnce(&mut Breaker) -> R) -> Option<R> {
        let cell = self.breakers.get(breaker as usize)?;
        let mut b = cell.try_borrow_mut().ok()?;
        Some(f(b.as_mut()?))
    }

    /// The breaker's state as of `now_ms`, as [`state_code`].
    pub fn breaker_state(&self, breaker: u32, now_ms: f64) -> Result<u32, Failure> {
        self.with_breaker(breaker, |b| state_code(b.state(instant(now_ms))))
            .ok_or(Failure::BadHandle)
    }

    /// A policy (see [`Policy`]); `breaker` a breaker's handle, if any.
    pub fn policy_new(&self, mut policy: Policy, breaker: Option<u32>) -> Result<u32, Failure> {
        if let Some(b) = breaker {
            if !self.breaker_slots.is_used(b) {
                return Err(Failure::BadHandle);
            }
            policy.breaker = Some(b);
        }
        let h = self
            .policy_slots
            .take()
            .ok_or(Failure::Full(Table::Policies))?;
        let slot = self.policies.get(h).ok_or(Failure::BadHandle)?;
        *slot.try_borrow_mut().map_err(|_| Failure::BadHandle)? = Some(policy);
        Ok(h as u32)
    }

    /// Frees a policy; its calls still in flight go on with a policy of no stateful layer. A
    /// policy others draw from ([`policy_share`](Self::policy_share)) is kept until the last of
    /// them is freed (its handle then names it no more for a new share).
    pub fn policy_free(&self, policy: u32) {
        if !self.policy_slots.is_used(policy) {
            return;
        }
        let Some(Ok(mut slot)) = self
            .policies
            .get(policy as usize)
            .map(RefCell::try_borrow_mut)
        else {
            return;
        };
        if let Some(p) = slot.as_mut()
            && p.dependents > 0
        {
            p.released = true;
            return;
        }
        let taken = slot.take();
        drop(slot);
        self.policy_slots.give_back(policy);
        let Some(p) = taken else {
            return;
        };
        if p.owns_breaker
            && let Some(b) = p.breaker
        {
            self.breaker_free(b);
        }
        // The last policy drawing from a base its owner freed: the base goes with it.
        let Some(base) = p.base else {
            return;
        };
        let last = self
            .policies
            .get(base as usize)
            .and_then(|c| c.try_borrow_mut().ok())
            .is_some_and(|mut b| match b.as_mut() {
                Some(b) => {
                    b.dependents = b.dependents.saturating_sub(1);
                    b.dependents == 0 && b.released
                }
                None => false,
            });
        if last {
            self.policy_free(base);
        }
    }

    /// Makes `policy`'s layers in `layers` ([`policy::shared_bit`] of each) draw from `base`'s
    /// state: a wrapper made from a TypeScript `Policy` object shares its `Shared` layers with
    /// every other one made from it. Both read from the same stack: each has the layers the
    /// other has. `policy`'s own breaker, when shared, is freed and `base`'s used instead.
    pub fn policy_share(&self, policy: u32, base: u32, layers: u32) -> Result<(), Failure> {
        if policy == base
            || !self.policy_slots.is_used(policy)
            || !self.policy_slots.is_used(base)
            || layers & !policy::SHARED_LAYERS != 0
        {
            return Err(Failure::BadHandle);
        }
        let cell = |h: u32| {
            self.policies
                .get(h as usize)
                .and_then(|c| c.try_borrow_mut().ok())
                .ok_or(Failure::BadHandle)
        };
        let mut p = cell(policy)?;
        let mut b = cell(base)?;
        let (Some(p), Some(b)) = (p.as_mut(), b.as_mut()) else {
            return Err(Failure::BadHandle);
        };
        // One level: a base is no one's dependent, a dependent no one's base, and each is bound
        // once.
        if b.released || b.base.is_some() || p.base.is_some() || p.dependents > 0 {
            return Err(Failure::BadHandle);
        }
        if layers & policy::shared_bit(policy::Kind::Breaker) != 0 {
            let Some(shared) = b.breaker else {
                return Err(Failure::BadHandle);
            };
            if p.owns_breaker
                && let Some(own) = p.breaker
            {
                self.breaker_free(own);
            }
            p.breaker = Some(shared);
            p.owns_breaker = false;
        }
        p.base = Some(base);
        p.borrowed = layers & !policy::shared_bit(policy::Kind::Breaker);
        b.dependents += 1;
        Ok(())
    }

    /// The policy whose state the current call's layer `kind` is: its own, or its base's.
    fn holder(&self, kind: policy::Kind) -> u32 {
        let current = self.current.get();
        let base = self
            .policies
            .get(current as usize)
            .and_then(|c| c.try_borrow().ok())
            .and_then(|p| {
                let p = p.as_ref()?;
                if p.borrowed & policy::shared_bit(kind) != 0 {
                    p.base
                } else {
                    None
                }
            });
        base.unwrap_or(current)
    }

    fn with_policy<R>(&self, f: impl FnOnce(&Policy) -> Option<R>) -> Option<R> {
        let cell = self.policies.get(self.current.get() as usize)?;
        let p = cell.try_borrow().ok()?;
        f(p.as_ref()?)
    }

    /// Runs `f` on the current call's layer `kind` (`which` picks it out of a policy), in the
    /// policy that holds its state.
    fn part<T, R>(
        &self,
        kind: policy::Kind,
        which: impl FnOnce(&Policy) -> Option<&RefCell<T>>,
        f: impl FnOnce(&mut T) -> R,
    ) -> Option<R> {
        let cell = self.policies.get(self.holder(kind) as usize)?;
        let p = cell.try_borrow().ok()?;
        let mut t = which(p.as_ref()?)?.try_borrow_mut().ok()?;
        Some(f(&mut t))
    }

    fn slot(&self, call: u32) -> Result<&CallSlot, Failure> {
        if !self.call_slots.is_used(call) {
            return Err(Failure::BadHandle);
        }
        self.calls.get(call as usize).ok_or(Failure::BadHandle)
    }

    /// Starts a call under `policy` at `now_ms`, with the random samples `backoff` and
    /// `throttle` (units in [0, 1)) for any decision it takes now. Poll it for what to do.
    pub fn call_start(
        &'static self,
        policy: u32,
        now_ms: f64,
        backoff: f64,
        throttle: f64,
    ) -> Result<u32, Failure> {
        let plan = {
            let cell = self
                .policies
                .get(policy as usize)
                .ok_or(Failure::BadHandle)?;
            let p = cell.try_borrow().map_err(|_| Failure::BadHandle)?;
            p.as_ref().ok_or(Failure::BadHandle)?.plan
        };
        let h = self.call_slots.take().ok_or(Failure::Full(Table::Calls))?;
        let slot: &'static CallSlot = self.calls.get(h).ok_or(Failure::BadHandle)?;
        slot.policy.set(policy);
        // A new call (perhaps in the slot of one freed): nothing before it is its own.
        self.events.clear();
        self.enter(h as u32, policy, backoff, throttle);
        if !slot.cell.start(plan, self, instant(now_ms)) {
            self.call_slots.give_back(h as u32);
            return Err(Failure::BadHandle);
        }
        Ok(h as u32)
    }

    /// Why the latest config could not be read ([`Failure::De`]).
    pub fn read_error(&self) -> Option<de::DeError> {
        self.read_error.get()
    }

    fn enter(&self, call: u32, policy: u32, backoff: f64, throttle: f64) {
        // The events of another call not read by now are never read: the face reads a call's
        // events right after the inputs that made them, or (when nobody listens) never. Those
        // of the same call stay, as one answer may be fed as several inputs before they are read.
        if self.last_call.replace(call) != call {
            self.events.clear();
        }
        self.used.set(0);
        self.current.set(policy);
        self.samples.set((sample(backoff), sample(throttle)));
    }

    /// Feeds `input` to `call` at `now_ms`, with the random samples for any decision it takes.
    pub fn call_input(
        &self,
        call: u32,
        input: Input,
        now_ms: f64,
        backoff: f64,
        throttle: f64,
    ) -> Result<(), Failure> {
        let slot = self.slot(call)?;
        self.enter(call, slot.policy.get(), backoff, throttle);
        slot.cell
            .with(|c| {
                let now = snap(instant(now_ms), c.poll_timeout());
                c.handle(now, input)
            })
            .ok_or(Failure::BadHandle)
    }

    /// The next action of `call` (see [`Polled`]; its numbers in [`out`](Self::out), and the
    /// whole [`record`](Self::record) written).
    pub fn poll(&self, call: u32) -> Result<Polled, Failure> {
        let slot = self.slot(call)?;
        let (action, queued, wake) = slot
            .cell
            .with(|c| (c.poll(), c.queued(), c.poll_timeout().is_some()))
            .ok_or(Failure::BadHandle)?;
        let opt = |t: Option<Instant>| t.map_or(-1.0, instant_millis);
        let (polled, out) = match action {
            None => (Polled::Idle, [0.0; 6]),
            Some(Action::Send { n, deadline, hedge }) => (
                Polled::Send,
                [
                    f64::from(n),
                    opt(deadline),
                    f64::from(u8::from(hedge)),
                    0.0,
                    0.0,
                    0.0,
                ],
            ),
            Some(Action::Cancel { n, why }) => {
                let why = match why {
                    reliable_core::engine::Cancelled::Lost => 0.0,
                    reliable_core::engine::Cancelled::TimedOut => 1.0,
                    reliable_core::engine::Cancelled::CallOver => 2.0,
                };
                (Polled::Cancel, [f64::from(n), why, 0.0, 0.0, 0.0, 0.0])
            }
            Some(Action::Done(end)) => {
                let (result, refusal) = match end.result {
                    Ended::Ok { .. } => (0.0, None),
                    Ended::GaveUp(reason) => {
                        self.gave_up.set(reason.name());
                        (1.0, None)
                    }
                    Ended::Refused(r) => (2.0, Some(r)),
                    Ended::Cancelled => (3.0, None),
                };
                let (n, class) = match (end.result, end.last) {
                    (Ended::Ok { n }, _) => (n, -1.0),
                    (_, Some((n, class))) => (n, class.map_or(-1.0, |c| f64::from(class_code(c)))),
                    (_, None) => (0, -1.0),
                };
                let by = refusal.map_or(-1.0, |r| f64::from(refusal_code(r)));
                let after = refusal.and_then(Refusal::retry_after).map_or(-1.0, millis);
                (
                    Polled::Done,
                    [
                        result,
                        f64::from(end.attempts),
                        f64::from(n),
                        class,
                        by,
                        after,
                    ],
                )
            }
        };
        let [a, b, c, d, e, f] = out;
        self.record.set([
            f64::from(polled as u32),
            a,
            b,
            c,
            d,
            e,
            f,
            queued as f64,
            f64::from(self.used.get()),
            self.events.len() as f64,
            f64::from(u8::from(wake)),
        ]);
        Ok(polled)
    }

    /// How long from `now_ms` until `call` wants a tick (ms, 0 if due), -1 if it waits for
    /// nothing but answers. A duration, exact: the time a wait is for, as the core computed it.
    pub fn timeout(&self, call: u32, now_ms: f64) -> Result<f64, Failure> {
        let slot = self.slot(call)?;
        let now = instant(now_ms);
        slot.cell
            .with(|c| {
                c.poll_timeout()
                    .map_or(-1.0, |at| millis(at.saturating_duration_since(now)))
            })
            .ok_or(Failure::BadHandle)
    }

    /// Frees a call's slot; a call not over is cancelled first (what its copies hold goes back).
    pub fn call_free(&self, call: u32, now_ms: f64) {
        let Ok(slot) = self.slot(call) else {
            return;
        };
        self.enter(call, slot.policy.get(), 0.0, 0.0);
        slot.cell.with(|c| {
            if !c.is_done() {
                c.handle(instant(now_ms), Input::Cancel);
                while c.poll().is_some() {}
            }
        });
        slot.cell.clear();
        self.call_slots.give_back(call);
    }
}

impl Shared for World {
    fn breaker_acquire(&self, now: Instant) -> Option<Result<Permit, Rejection>> {
        let b = self.with_policy(|p| p.breaker)?;
        self.with_breaker(b, |b| b.try_acquire(now))
    }
    fn breaker_record(&self, permit: Permit, outcome: Outcome, now: Instant) {
        if let Some(b) = self.with_policy(|p| p.breaker) {
            self.with_breaker(b, |b| b.record(permit, outcome, now));
        }
    }
    fn breaker_refuses(&self, now: Instant) -> Option<Duration> {
        let b = self.with_policy(|p| p.breaker)?;
        self.with_breaker(b, |b| match b.retry_after(now) {
            Some(after) => Some(after),
            None if b.state(now) == State::ForcedOpen => Some(Duration::MAX),
            None => None,
        })
        .flatten()
    }
    fn budget<R>(&self, f: impl FnOnce(&mut dyn Budget) -> R) -> R {
        use policy::Kind;
        // The ledger is the retry budget when there is one, else the budget, else none; each in
        // the policy that holds its state.
        let holder = |kind: Kind| {
            self.policies
                .get(self.holder(kind) as usize)
                .and_then(|c| c.try_borrow().ok())
        };
        let ledger = holder(Kind::Ledger);
        if let Some(l) = ledger.as_ref().and_then(|p| p.as_ref()?.ledger.as_ref()) {
            return match l.try_borrow_mut() {
                Ok(mut l) => f(&mut *l),
                Err(_) => f(&mut Unlimited),
            };
        }
        let budget = holder(Kind::Budget);
        if let Some(b) = budget.as_ref().and_then(|p| p.as_ref()?.budget.as_ref()) {
            return match b.try_borrow_mut() {
                Ok(mut b) => f(&mut *b),
                Err(_) => f(&mut Unlimited),
            };
        }
        f(&mut Unlimited)
    }
    fn throttle<R>(
        &self,
        f: impl FnOnce(&mut dyn reliable_core::throttle::AnyThrottle) -> R,
    ) -> Option<R> {
        self.part(policy::Kind::Throttle, |p| p.throttle.as_ref(), |t| f(t))
    }
    fn ledger<R>(
        &self,
        f: impl FnOnce(&mut dyn reliable_core::ledger::AnyLedger) -> R,
    ) -> Option<R> {
        self.part(policy::Kind::Ledger, |p| p.ledger.as_ref(), |l| f(l))
    }
    fn hedger<R>(&self, f: impl FnOnce(&mut Hedger) -> R) -> Option<R> {
        self.part(policy::Kind::Hedge, |p| p.hedger.as_ref(), f)
    }
    fn limiter<R>(&self, f: impl FnOnce(&mut Limiter) -> R) -> Option<R> {
        self.part(policy::Kind::Limit, |p| p.limiter.as_ref(), f)
    }
    fn rate<R>(&self, f: impl FnOnce(&mut RateLimiter) -> R) -> Option<R> {
        self.part(policy::Kind::Rate, |p| p.rate.as_ref(), f)
    }
    fn sample(&self, what: SampleFor) -> u64 {
        let (backoff, throttle) = self.samples.get();
        match what {
            SampleFor::Backoff => {
                self.used.set(self.used.get() | 1);
                backoff
            }
            SampleFor::Throttle => {
                self.used.set(self.used.get() | 2);
                throttle
            }
        }
    }
    fn note(&self, note: Note) {
        self.events.push(Event::Note(note));
    }
}

#[cfg(test)]
mod tests;

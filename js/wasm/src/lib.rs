//! # reliable-wasm: the decisions of `reliable-core` for JavaScript, as plain WebAssembly exports
//!
//! The npm package `reliablekit` loads this module with `WebAssembly.instantiate` and calls the
//! `rk_*` functions of [`ffi`] directly: no generated glue, only numbers cross the boundary.
//! Every breaker, retry policy and call in flight lives in a fixed table here ([`Tables`]) and is
//! named across the boundary by its index (a *handle*). The tables are fixed-size, so the module
//! never allocates; when one is full the constructor answers "full" and the TypeScript side
//! throws a `RangeError` saying which.
//!
//! This file is the safe part: every operation, on a `&mut Tables`, checking each handle and
//! each number it is given (a stale handle or a NaN is an error answer, never a trap). The one
//! `unsafe` item, the global that holds the tables, is in [`ffi`].
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

#[cfg(target_arch = "wasm32")]
pub mod ffi;

use reliable_core::answer::{Answer, Signals};
use reliable_core::backoff::{BackoffConfig, BackoffPolicy, Jitter};
use reliable_core::breaker::{
    BreakerConfig, BreakerPolicy, CircuitBreaker, CountWindow, HalfOpenConfig, OpenConfig, Outcome,
    Permit, ProbeRule, State, WindowConfig,
};
use reliable_core::budget::Unlimited;
use reliable_core::outcome::ErrorClass;
use reliable_core::retry::{RetryConfig, RetryDecision, RetryPolicy, RetryState};
use reliable_core::{ConfigError, Duration, Instant};

/// The most calls a breaker's window may hold (the seed's default is 20).
pub const MAX_WINDOW: usize = 256;
/// Breakers alive at once.
pub const MAX_BREAKERS: usize = 256;
/// Retry policies (one per wrapped function) alive at once.
pub const MAX_POLICIES: usize = 256;
/// Calls in flight at once, across every wrapped function.
pub const MAX_CALLS: usize = 8192;

/// The seed library's breaker: a count window of up to [`MAX_WINDOW`] calls, ungated probes.
pub type SeedBreaker = CircuitBreaker<BreakerPolicy, CountWindow<MAX_WINDOW, 4>, 1>;

/// One wrapped call in flight: its retry state and the breaker permit of its current attempt.
#[derive(Debug)]
pub struct Call {
    retry: RetryState,
    permit: Option<Permit>,
}

/// Why an operation failed; the TypeScript side turns it into a `TypeError` or `RangeError`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Failure {
    /// The core refused a setting; the error names its field.
    Config(ConfigError),
    /// A table is full: [`Table::Breakers`] etc.
    Full(Table),
    /// A handle that names nothing alive (freed already, or never issued).
    BadHandle,
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
}

/// A fixed table of `N` slots with a stack of free indices: insert and remove in O(1).
#[derive(Debug)]
pub struct Slab<T, const N: usize> {
    slots: [Option<T>; N],
    free: [u16; N],
    free_len: usize,
    /// Slots never used yet are `fresh..N`.
    fresh: usize,
}

impl<T, const N: usize> Slab<T, N> {
    const CHECK: () = assert!(N <= u16::MAX as usize, "indices are u16");

    fn new() -> Self {
        let () = Self::CHECK;
        Slab {
            slots: [const { None }; N],
            free: [0; N],
            free_len: 0,
            fresh: 0,
        }
    }

    fn insert(&mut self, value: T) -> Option<u32> {
        let index = if self.free_len > 0 {
            self.free_len -= 1;
            usize::from(*self.free.get(self.free_len)?)
        } else if self.fresh < N {
            self.fresh += 1;
            self.fresh - 1
        } else {
            return None;
        };
        *self.slots.get_mut(index)? = Some(value);
        u32::try_from(index).ok()
    }

    fn get_mut(&mut self, handle: u32) -> Option<&mut T> {
        self.slots.get_mut(handle as usize)?.as_mut()
    }

    fn get(&self, handle: u32) -> Option<&T> {
        self.slots.get(handle as usize)?.as_ref()
    }

    fn remove(&mut self, handle: u32) -> Option<T> {
        let value = self.slots.get_mut(handle as usize)?.take()?;
        // A slot just emptied was in use, so the free stack has room for it.
        *self.free.get_mut(self.free_len)? = handle as u16;
        self.free_len += 1;
        Some(value)
    }
}

/// Everything the module holds.
#[derive(Debug)]
pub struct Tables {
    breakers: Slab<SeedBreaker, MAX_BREAKERS>,
    policies: Slab<RetryPolicy, MAX_POLICIES>,
    calls: Slab<Call, MAX_CALLS>,
    /// The core's name of the latest give-up reason (`max-attempts`, `fatal`, ...).
    gave_up: &'static str,
}

/// A time on the caller's clock, in milliseconds, as an instant (negative and NaN: zero).
pub fn instant(ms: f64) -> Instant {
    Instant::ZERO.saturating_add(duration(ms))
}

/// Milliseconds as a duration (negative and NaN: zero; too large: saturated).
pub fn duration(ms: f64) -> Duration {
    Duration::from_secs_f64(ms / 1000.0)
}

/// A duration in milliseconds.
pub fn millis(d: Duration) -> f64 {
    d.as_nanos() as f64 / 1e6
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

/// A call's outcome from its number: success 0, failure 1, anything else ignored (the permit is
/// handed back without counting, as for a cancelled call).
pub fn outcome(code: u32) -> Outcome {
    match code {
        0 => Outcome::Success,
        1 => Outcome::Failure,
        _ => Outcome::Ignored,
    }
}

/// An attempt's failure class from its number: transient 0, timeout 1, throttled 2 (with the
/// server's delay when `retry_after_ms >= 0`), fatal 3, don't-retry 4; unknown numbers are transient.
pub fn error_class(code: u32, retry_after_ms: f64) -> ErrorClass {
    match code {
        1 => ErrorClass::Timeout,
        2 => ErrorClass::Throttled {
            retry_after: (retry_after_ms >= 0.0).then(|| duration(retry_after_ms)),
        },
        3 => ErrorClass::Fatal,
        4 => ErrorClass::DontRetry,
        _ => ErrorClass::Transient,
    }
}

/// The code of a class, as [`error_class`] reads it; a local refusal (never an answer's class) is 5.
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

/// What an attempt's answer means, by the core's one table ([`reliable_core::answer`]): the
/// face parses, the core decides. `status >= 0` is a response's status (above `u16::MAX`: read as
/// `u16::MAX`), `-1` the attempt's timer fired, any other negative an error before any answer
/// (connection refused or reset, or a thrown error). The signals: `server_delay_ms` the server's
/// delay (`retry-after-ms`, else `Retry-After`; negative or NaN: none), `should_retry`
/// `x-should-retry` (1 true, 0 false, anything else absent), `overloaded` an explicit overload
/// marker (non-zero). The result: the class's code ([`class_code`], [`ANSWER_OK`] for a success)
/// in the [`ANSWER_CLASS`] bits, with the `ANSWER_*` flags of its consequences.
pub fn answer_meaning(
    status: i32,
    server_delay_ms: f64,
    should_retry: i32,
    overloaded: u32,
) -> u32 {
    let signals = Signals {
        retry_after: (server_delay_ms >= 0.0).then(|| duration(server_delay_ms)),
        should_retry: match should_retry {
            0 => Some(false),
            1 => Some(true),
            _ => None,
        },
        overloaded: overloaded != 0,
    };
    let answer = match status {
        -1 => Answer::Timeout,
        s if s < 0 => Answer::Connection,
        s => Answer::status(u16::try_from(s).unwrap_or(u16::MAX), signals),
    };
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
    let policy = seed_backoff(base_ms, factor, jitter, -1.0).map_err(Failure::Config)?;
    Ok(millis(policy.delay(
        attempt.max(1),
        Duration::ZERO,
        sample(unit),
    )))
}

impl Default for Tables {
    fn default() -> Self {
        Tables::new()
    }
}

impl Tables {
    /// Empty tables.
    pub fn new() -> Self {
        Tables {
            breakers: Slab::new(),
            policies: Slab::new(),
            calls: Slab::new(),
            gave_up: "",
        }
    }

    /// The core's name of the reason the latest call given up on gave up (see
    /// [`call_failed`](Self::call_failed)): passed on as text, so a reason the core adds needs no
    /// change here.
    pub fn gave_up(&self) -> &'static str {
        self.gave_up
    }

    /// A closed breaker with the seed's options: trip when at least `failure_rate` of the last
    /// `window` calls failed (deciding only over a full window), stay open `cooldown_ms`, then let
    /// every call through as a probe; `probe` successes in a row close it, any failure re-opens it.
    pub fn breaker_new(
        &mut self,
        failure_rate: f64,
        window: u32,
        cooldown_ms: f64,
        probe: u32,
    ) -> Result<u32, Failure> {
        let config = BreakerConfig {
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
        };
        let policy = BreakerPolicy::new(config).map_err(Failure::Config)?;
        let breaker = SeedBreaker::with_storage(policy).map_err(Failure::Config)?;
        self.breakers
            .insert(breaker)
            .ok_or(Failure::Full(Table::Breakers))
    }

    /// Frees a breaker (a handle freed twice is ignored).
    pub fn breaker_free(&mut self, breaker: u32) {
        self.breakers.remove(breaker);
    }

    /// The breaker's state as of `now_ms`, as [`state_code`].
    pub fn breaker_state(&self, breaker: u32, now_ms: f64) -> Result<u32, Failure> {
        let b = self.breakers.get(breaker).ok_or(Failure::BadHandle)?;
        Ok(state_code(b.state(instant(now_ms))))
    }

    /// Asks `breaker` to admit the current attempt of `call`: `Ok(None)` admitted (the permit is
    /// kept with the call), `Ok(Some(retry_after_ms))` rejected (`retry_after_ms` is 0 when the
    /// rejection gives no time).
    pub fn acquire(
        &mut self,
        breaker: u32,
        call: u32,
        now_ms: f64,
    ) -> Result<Option<f64>, Failure> {
        let b = self.breakers.get_mut(breaker).ok_or(Failure::BadHandle)?;
        let c = self.calls.get_mut(call).ok_or(Failure::BadHandle)?;
        match b.try_acquire(instant(now_ms)) {
            Ok(permit) => {
                // A permit still held (never the case from the TypeScript side) is handed back
                // unused rather than lost.
                if let Some(old) = c.permit.replace(permit) {
                    b.record(old, Outcome::Ignored, instant(now_ms));
                }
                Ok(None)
            }
            Err(rejection) => Ok(Some(rejection.retry_after().map_or(0.0, millis))),
        }
    }

    /// Reports how the admitted attempt of `call` ended (see [`outcome`]); nothing if it holds no
    /// permit.
    pub fn record(
        &mut self,
        breaker: u32,
        call: u32,
        outcome_code: u32,
        now_ms: f64,
    ) -> Result<(), Failure> {
        let b = self.breakers.get_mut(breaker).ok_or(Failure::BadHandle)?;
        let c = self.calls.get_mut(call).ok_or(Failure::BadHandle)?;
        if let Some(permit) = c.permit.take() {
            b.record(permit, outcome(outcome_code), instant(now_ms));
        }
        Ok(())
    }

    /// A retry policy with the seed's options: `max_attempts` in all, `timeout_ms` per attempt
    /// (negative: none), the seed's backoff between them capped at `cap_ms` (negative: none),
    /// server delays (`Retry-After`) honoured up to `max_server_delay_ms`.
    #[allow(clippy::too_many_arguments)]
    pub fn policy_new(
        &mut self,
        max_attempts: u32,
        timeout_ms: f64,
        base_ms: f64,
        factor: f64,
        jitter: f64,
        cap_ms: f64,
        max_server_delay_ms: f64,
    ) -> Result<u32, Failure> {
        let backoff = seed_backoff(base_ms, factor, jitter, cap_ms).map_err(Failure::Config)?;
        let config = RetryConfig {
            max_attempts: Some(max_attempts),
            attempt_timeout: (timeout_ms >= 0.0).then(|| duration(timeout_ms)),
            max_server_delay: duration(max_server_delay_ms),
            ..RetryConfig::new(*backoff.config())
        };
        let policy = RetryPolicy::new(config).map_err(Failure::Config)?;
        self.policies
            .insert(policy)
            .ok_or(Failure::Full(Table::Policies))
    }

    /// Frees a retry policy.
    pub fn policy_free(&mut self, policy: u32) {
        self.policies.remove(policy);
    }

    /// Starts a call under `policy` at `now_ms`.
    pub fn call_start(&mut self, policy: u32, now_ms: f64) -> Result<u32, Failure> {
        let p = self.policies.get(policy).ok_or(Failure::BadHandle)?;
        let retry = p.start(instant(now_ms), &mut Unlimited);
        self.calls
            .insert(Call {
                retry,
                permit: None,
            })
            .ok_or(Failure::Full(Table::Calls))
    }

    /// [`call_start`](Self::call_start) and, with a breaker, [`acquire`](Self::acquire) in one
    /// step (the fast path of a first attempt): `Ok(Ok(call))` admitted, `Ok(Err(retry_after_ms))`
    /// rejected, the call already ended.
    pub fn begin(
        &mut self,
        policy: u32,
        breaker: Option<u32>,
        now_ms: f64,
    ) -> Result<Result<u32, f64>, Failure> {
        let call = self.call_start(policy, now_ms)?;
        let Some(b) = breaker else {
            return Ok(Ok(call));
        };
        match self.acquire(b, call, now_ms) {
            Ok(None) => Ok(Ok(call)),
            Ok(Some(retry_after)) => {
                self.call_end(policy, None, call, false, now_ms)?;
                Ok(Err(retry_after))
            }
            Err(f) => {
                self.call_end(policy, None, call, false, now_ms)?;
                Err(f)
            }
        }
    }

    /// The call's attempt succeeded: [`record`](Self::record) a success with the breaker (if
    /// any) and [`call_end`](Self::call_end) it, in one step.
    pub fn succeed(
        &mut self,
        policy: u32,
        breaker: Option<u32>,
        call: u32,
        now_ms: f64,
    ) -> Result<(), Failure> {
        if let Some(b) = breaker {
            self.record(b, call, 0, now_ms)?;
        }
        self.call_end(policy, breaker, call, true, now_ms)
    }

    /// The call's latest attempt failed with `class_code` (see [`error_class`]) at `now_ms`:
    /// `>= 0`, retry after that many milliseconds; `-1`, give up (why: [`gave_up`](Self::gave_up)).
    pub fn call_failed(
        &mut self,
        policy: u32,
        call: u32,
        class_code: u32,
        retry_after_ms: f64,
        now_ms: f64,
        unit: f64,
    ) -> Result<f64, Failure> {
        let p = self.policies.get(policy).ok_or(Failure::BadHandle)?;
        let c = self.calls.get_mut(call).ok_or(Failure::BadHandle)?;
        let now = instant(now_ms);
        let class = error_class(class_code, retry_after_ms);
        Ok(
            match p.on_failure_with(&mut c.retry, class, now, &mut Unlimited, sample(unit)) {
                RetryDecision::RetryAt(at) => millis(at.saturating_duration_since(now)),
                RetryDecision::GiveUp(reason) => {
                    self.gave_up = reason.name();
                    -1.0
                }
            },
        )
    }

    /// Ends a call and frees its slot: `succeeded` tells the policy how (an abandoned call hands
    /// back anything it holds). A permit still held goes back to `breaker` as ignored, so a
    /// cancelled call never keeps a probe slot.
    pub fn call_end(
        &mut self,
        policy: u32,
        breaker: Option<u32>,
        call: u32,
        succeeded: bool,
        now_ms: f64,
    ) -> Result<(), Failure> {
        let p = self.policies.get(policy).ok_or(Failure::BadHandle)?;
        let mut c = self.calls.remove(call).ok_or(Failure::BadHandle)?;
        let now = instant(now_ms);
        if succeeded {
            p.on_success(&mut c.retry, now, &mut Unlimited);
        } else {
            p.abandon(&mut c.retry, now, &mut Unlimited);
        }
        if let (Some(permit), Some(b)) = (c.permit, breaker.and_then(|b| self.breakers.get_mut(b)))
        {
            b.record(permit, Outcome::Ignored, now);
        }
        Ok(())
    }

    /// The attempt timeout of `policy` in milliseconds, negative when there is none.
    pub fn attempt_timeout(&self, policy: u32) -> Result<f64, Failure> {
        let p = self.policies.get(policy).ok_or(Failure::BadHandle)?;
        Ok(p.config().attempt_timeout.map_or(-1.0, millis))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_breaker_trips_over_a_full_window_and_recovers() {
        let mut t = Tables::new();
        let b = t.breaker_new(0.5, 4, 1000.0, 2).unwrap();
        let p = t
            .policy_new(1, -1.0, 200.0, 2.0, 0.1, -1.0, 30_000.0)
            .unwrap();
        let outcomes = [0, 1, 0, 1]; // 50% of a full window of 4
        for (i, o) in outcomes.into_iter().enumerate() {
            let c = t.call_start(p, i as f64).unwrap();
            assert_eq!(t.acquire(b, c, i as f64).unwrap(), None);
            t.record(b, c, o, i as f64).unwrap();
            t.call_end(p, Some(b), c, o == 0, i as f64).unwrap();
        }
        assert_eq!(t.breaker_state(b, 4.0).unwrap(), 1);
        let c = t.call_start(p, 4.0).unwrap();
        assert_eq!(t.acquire(b, c, 4.0).unwrap(), Some(999.0));
        assert_eq!(t.breaker_state(b, 1003.0).unwrap(), 2);
        for now in [1003.0, 1004.0] {
            assert_eq!(t.acquire(b, c, now).unwrap(), None);
            t.record(b, c, 0, now).unwrap();
        }
        assert_eq!(t.breaker_state(b, 1004.0).unwrap(), 0);
    }

    #[test]
    fn handles_are_checked_and_reused() {
        let mut t = Tables::new();
        assert_eq!(t.breaker_state(7, 0.0), Err(Failure::BadHandle));
        let b = t.breaker_new(0.5, 20, 30_000.0, 3).unwrap();
        t.breaker_free(b);
        t.breaker_free(b);
        assert_eq!(t.breaker_state(b, 0.0), Err(Failure::BadHandle));
        assert_eq!(t.breaker_new(0.5, 20, 30_000.0, 3).unwrap(), b);
        assert!(matches!(
            t.breaker_new(0.5, MAX_WINDOW as u32 + 1, 1.0, 1),
            Err(Failure::Config(_))
        ));
        assert!(
            matches!(t.breaker_new(f64::NAN, 20, 1.0, 1), Err(Failure::Config(e)) if e.field == "failure_rate")
        );
    }

    #[test]
    fn the_call_table_fills_and_says_so() {
        let mut t = Tables::new();
        let p = t
            .policy_new(3, -1.0, 200.0, 2.0, 0.1, -1.0, 30_000.0)
            .unwrap();
        for _ in 0..MAX_CALLS {
            t.call_start(p, 0.0).unwrap();
        }
        assert_eq!(t.call_start(p, 0.0), Err(Failure::Full(Table::Calls)));
        t.call_end(p, None, 5, true, 0.0).unwrap();
        assert_eq!(t.call_start(p, 0.0), Ok(5));
    }

    #[test]
    fn answers_mean_what_the_core_says() {
        let none = -1.0;
        let class = |m: u32| m & ANSWER_CLASS;
        let cases = [
            // status, server delay, x-should-retry, overload marker, class, flags
            (200, none, -1, 0, ANSWER_OK, ANSWER_ACCEPTED),
            (0, none, -1, 0, ANSWER_OK, ANSWER_ACCEPTED),
            (
                404,
                2000.0,
                -1,
                0,
                3,
                ANSWER_BREAKER_IGNORES | ANSWER_ACCEPTED,
            ),
            (408, none, -1, 0, 0, ANSWER_ACCEPTED),
            (409, none, -1, 0, 0, ANSWER_ACCEPTED),
            (429, 1500.0, -1, 0, 2, ANSWER_DELAY_HONOURED),
            (500, 1000.0, -1, 0, 2, ANSWER_DELAY_HONOURED),
            (503, none, -1, 0, 2, 0),
            (503, f64::NAN, -1, 0, 2, 0),
            (529, none, -1, 0, 2, 0),
            (400, none, -1, 1, 2, 0),
            (429, none, 0, 0, 4, ANSWER_ACCEPTED),
            (500, none, 0, 0, 4, ANSWER_ACCEPTED),
            (400, none, 0, 0, 3, ANSWER_BREAKER_IGNORES | ANSWER_ACCEPTED),
            (400, none, 1, 0, 0, ANSWER_ACCEPTED),
            (400, 3000.0, 1, 0, 2, ANSWER_DELAY_HONOURED),
            (400, none, 7, 0, 3, ANSWER_BREAKER_IGNORES | ANSWER_ACCEPTED),
            (70_000, none, -1, 0, 0, ANSWER_ACCEPTED),
            (-1, 5000.0, -1, 0, 1, 0),
            (-2, none, -1, 0, 0, ANSWER_ACCEPTED),
            (i32::MIN, none, -1, 0, 0, ANSWER_ACCEPTED),
        ];
        for (status, delay, should_retry, overloaded, code, flags) in cases {
            let m = answer_meaning(status, delay, should_retry, overloaded);
            assert_eq!(
                (class(m), m & !ANSWER_CLASS),
                (code, flags),
                "{status} {delay} {should_retry} {overloaded}"
            );
        }
    }

    #[test]
    fn retry_after_is_honoured_and_attempts_run_out() {
        let mut t = Tables::new();
        let p = t
            .policy_new(3, 8000.0, 200.0, 2.0, 0.0, -1.0, 30_000.0)
            .unwrap();
        let c = t.call_start(p, 0.0).unwrap();
        assert_eq!(t.call_failed(p, c, 0, -1.0, 0.0, 0.5).unwrap(), 200.0);
        assert_eq!(t.call_failed(p, c, 2, 5000.0, 1.0, 0.5).unwrap(), 5000.0);
        assert_eq!(t.call_failed(p, c, 0, -1.0, 2.0, 0.5).unwrap(), -1.0);
        assert_eq!(t.gave_up(), "max-attempts");
        assert_eq!(t.attempt_timeout(p).unwrap(), 8000.0);
    }
}

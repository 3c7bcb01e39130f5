//! The retry policy of one logical request: retry or give up, and when.
//!
//! A [`RetryPolicy`] (validated once, shared by every request) ties together the limits a
//! well-behaved client needs: a maximum number of attempts, a timeout per attempt, an overall
//! deadline, the error classes that may be retried, a [backoff](crate::backoff) (optionally a
//! different one after throttling), server-requested delays honoured up to a bound, and a shared
//! [retry budget](crate::budget). Each request keeps a [`RetryState`] of 32 bytes, so a simulator
//! can hold millions in flight.
//!
//! After a failed attempt the policy answers [`RetryDecision::RetryAt`] with the instant to send the
//! retry, or [`RetryDecision::GiveUp`] with the reason, checking in this order:
//!
//! 1. the error class: `Fatal` and `DontRetry` are never retried (nor `Timeout` if
//!    `retry_timeouts` is off, nor a local refusal, `Refused`, unless `wait_on_refusal` is on; see
//!    [`answer`](crate::answer) for every class's consequences);
//! 2. the attempt limit;
//! 3. the delay: the backoff's, or the server's `retry_after` if that is longer, clamped to
//!    `max_server_delay`;
//! 4. the deadline: a retry that would start at or after the overall deadline is not scheduled
//!    (so a wait on a local refusal never holds a request past its deadline);
//! 5. the budget, last, so no budget is spent on a retry that would not be sent.
//!
//! The budget is shared by many requests, so it is passed in by `&mut` on each call; the policy
//! makes the budget's calls for the request (first try, attempt ends, retry, request end).
//!
//! ```
//! use reliable_core::backoff::BackoffConfig;
//! use reliable_core::budget::{Quota, QuotaConfig, QuotaPolicy};
//! use reliable_core::outcome::ErrorClass;
//! use reliable_core::retry::{GiveUpReason, RetryConfig, RetryDecision, RetryPolicy};
//! use reliable_core::{Duration, Instant};
//!
//! let policy = RetryPolicy::new(RetryConfig {
//!     max_attempts: Some(3),
//!     deadline: Some(Duration::from_secs(10)),
//!     ..RetryConfig::new(BackoffConfig::constant(Duration::from_secs(1)))
//! })?;
//! let mut quota = Quota::new(QuotaPolicy::new(QuotaConfig::aws_standard())?);
//! let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(1);
//! # use rand_core::SeedableRng;
//!
//! let t0 = Instant::from_secs(100);
//! let mut request = policy.start(t0, &mut quota);
//! assert_eq!(policy.attempt_deadline(&request, t0), Instant::from_secs(110));
//!
//! // The first try fails with a 503: retry in 1 s.
//! let d = policy.on_failure(&mut request, ErrorClass::Transient, t0, &mut quota, &mut rng);
//! assert_eq!(d, RetryDecision::RetryAt(Instant::from_secs(101)));
//! assert_eq!(quota.available(), 495);
//!
//! // The retry is throttled with Retry-After: 5 s, longer than the backoff: honoured.
//! let throttled = ErrorClass::Throttled { retry_after: Some(Duration::from_secs(5)) };
//! let d = policy.on_failure(&mut request, throttled, Instant::from_secs(102), &mut quota, &mut rng);
//! assert_eq!(d, RetryDecision::RetryAt(Instant::from_secs(107)));
//!
//! // The third attempt fails too: that was the last one.
//! let d = policy.on_failure(&mut request, ErrorClass::Transient, Instant::from_secs(108), &mut quota, &mut rng);
//! assert_eq!(d, RetryDecision::GiveUp(GiveUpReason::MaxAttempts));
//! # Ok::<(), reliable_core::ConfigError>(())
//! ```

use crate::answer::BackoffKind;
use crate::backoff::{BackoffConfig, BackoffPolicy};
use crate::budget::{Budget, Denied, Grant};
use crate::error::{ConfigError, Problem, tri};
use crate::outcome::{AttemptOutcome, ErrorClass};
use crate::time::{Duration, Instant};

/// How one logical request is retried.
///
/// In RON, with the defaults written out:
///
/// ```text
/// (
///     max_attempts: Some(3),
///     attempt_timeout: Some("3s"),
///     deadline: None,
///     backoff: (shape: Exponential(base: "10s", factor: 2.0), cap: Some("40s"), jitter: Full, first_exponent: 1),
///     throttled_backoff: None,
///     max_server_delay: "30s",
///     retry_timeouts: true,
///     wait_on_refusal: false,
/// )
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
pub struct RetryConfig {
    /// Attempts in all, the first try included; `None`: no limit. Default `Some(3)`.
    #[cfg_attr(feature = "serde", serde(default = "default_max_attempts"))]
    pub max_attempts: Option<u32>,
    /// How long each attempt may take, from when it is sent. Default `None`: no per-attempt
    /// timeout (the caller's own, or the deadline).
    #[cfg_attr(feature = "serde", serde(default))]
    pub attempt_timeout: Option<Duration>,
    /// How long the whole request may take, from its first try. Default `None`.
    #[cfg_attr(feature = "serde", serde(default))]
    pub deadline: Option<Duration>,
    /// The wait before each retry.
    pub backoff: BackoffConfig,
    /// The wait before a retry after a throttling error, if it should differ (AWS 2026: base 1 s
    /// instead of 50 ms). Default `None`: `backoff`. Either way the retry number counts every retry.
    #[cfg_attr(feature = "serde", serde(default))]
    pub throttled_backoff: Option<BackoffConfig>,
    /// The longest server-requested delay (`Retry-After`, pushback) honoured; longer requests are
    /// clamped to it. Zero ignores server delays. Default 30 s.
    #[cfg_attr(feature = "serde", serde(default = "default_max_server_delay"))]
    pub max_server_delay: Duration,
    /// Whether timed-out attempts are retried (off for requests that are not idempotent, or when a
    /// timeout most likely means overload). Default `true`.
    #[cfg_attr(feature = "serde", serde(default = "default_true"))]
    pub retry_timeouts: bool,
    /// Whether a local refusal inside the retry (an open breaker, a throttle:
    /// [`ErrorClass::Refused`]) is waited out and retried, after its `retry_after` (up to
    /// `max_server_delay`) or the backoff, and only if that fits the deadline. Default `false`: the
    /// call ends at once with the refusal.
    #[cfg_attr(feature = "serde", serde(default))]
    pub wait_on_refusal: bool,
}

#[cfg(feature = "serde")]
fn default_max_attempts() -> Option<u32> {
    Some(3)
}
#[cfg(feature = "serde")]
fn default_max_server_delay() -> Duration {
    Duration::from_secs(30)
}
#[cfg(feature = "serde")]
fn default_true() -> bool {
    true
}

impl RetryConfig {
    /// The defaults (3 attempts, no timeouts, server delays up to 30 s, timeouts retried) with the
    /// given backoff.
    pub const fn new(backoff: BackoffConfig) -> Self {
        RetryConfig {
            max_attempts: Some(3),
            attempt_timeout: None,
            deadline: None,
            backoff,
            throttled_backoff: None,
            max_server_delay: Duration::from_secs(30),
            retry_timeouts: true,
            wait_on_refusal: false,
        }
    }

    /// The seed library's `@reliable(timeout=8.0, max_attempts=5, base_delay=0.2, factor=2,
    /// jitter=0.1)`: 5 attempts of at most 8 s, `0.2 s · 2^(a−1) · U[0.9, 1.1]` between them.
    pub const fn reliablekit() -> Self {
        RetryConfig {
            max_attempts: Some(5),
            attempt_timeout: Some(Duration::from_secs(8)),
            ..RetryConfig::new(BackoffConfig::reliablekit())
        }
    }

    /// AWS SDK standard retry mode (before 2026): 3 attempts, `U[0,1]·min(1 s·2^i, 20 s)`, server
    /// delays ignored. Pair it with [`QuotaConfig::aws_standard`](crate::budget::QuotaConfig::aws_standard).
    pub const fn aws_standard() -> Self {
        RetryConfig {
            max_server_delay: Duration::ZERO,
            ..RetryConfig::new(BackoffConfig::aws_standard())
        }
    }

    /// AWS SDK standard retry mode with the 2026 defaults: 3 attempts, `U[0,1]·min(50 ms·2^i, 20 s)`
    /// after transient errors and `U[0,1]·min(1 s·2^i, 20 s)` after throttling, `x-amz-retry-after`
    /// honoured up to 5 s. (The SDKs clamp it to `[backoff, backoff + 5 s]`; this policy clamps to
    /// `[backoff, max(backoff, 5 s)]`, the same whenever the backoff is under 5 s.) Pair it with
    /// [`QuotaConfig::aws_2026`](crate::budget::QuotaConfig::aws_2026).
    pub const fn aws_2026() -> Self {
        RetryConfig {
            throttled_backoff: Some(BackoffConfig::aws_2026_throttled()),
            max_server_delay: Duration::from_secs(5),
            ..RetryConfig::new(BackoffConfig::aws_2026())
        }
    }
}

/// A validated [`RetryConfig`]. Build once, share by reference; it holds no per-request state.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RetryPolicy {
    backoff: BackoffPolicy,
    throttled_backoff: Option<BackoffPolicy>,
    /// `u32::MAX`: no limit.
    max_attempts: u32,
    /// `Duration::MAX`: none.
    attempt_timeout: Duration,
    /// `Duration::MAX`: none.
    deadline: Duration,
    max_server_delay: Duration,
    retry_timeouts: bool,
    wait_on_refusal: bool,
    config: RetryConfig,
}

/// The answer to a failed attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RetryDecision {
    /// Send the next attempt at this instant (it may be `now`).
    RetryAt(Instant),
    /// The request is over; this is why.
    GiveUp(GiveUpReason),
}

/// Why a request is not retried.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GiveUpReason {
    /// The failure was [`ErrorClass::Fatal`].
    Fatal,
    /// The server said not to retry ([`ErrorClass::DontRetry`]).
    DontRetry,
    /// The attempt timed out and the policy does not retry timeouts.
    TimeoutNotRetried,
    /// The attempt was refused locally ([`ErrorClass::Refused`]) and the policy does not wait on
    /// refusals.
    Refused,
    /// The attempt limit was reached.
    MaxAttempts,
    /// The retry would start at or after the overall deadline.
    Deadline,
    /// The budget refused the retry.
    Budget(Denied),
    /// The request was already over (a call after it succeeded, gave up or was abandoned).
    Finished,
}

impl GiveUpReason {
    /// A short lower-case name, e.g. `max-attempts` or `budget`.
    pub const fn name(self) -> &'static str {
        match self {
            GiveUpReason::Fatal => "fatal",
            GiveUpReason::DontRetry => "dont-retry",
            GiveUpReason::TimeoutNotRetried => "timeout-not-retried",
            GiveUpReason::Refused => "refused",
            GiveUpReason::MaxAttempts => "max-attempts",
            GiveUpReason::Deadline => "deadline",
            GiveUpReason::Budget(_) => "budget",
            GiveUpReason::Finished => "finished",
        }
    }
}

impl core::fmt::Display for GiveUpReason {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            GiveUpReason::Budget(d) => write!(f, "budget ({d})"),
            other => f.write_str(other.name()),
        }
    }
}

/// The state of one logical request: 32 bytes on 64-bit targets. Made by [`RetryPolicy::start`]; not `Clone`, since
/// it may hold a budget [`Grant`] that must be handed back once.
#[derive(Debug, PartialEq, Eq)]
pub struct RetryState {
    /// `Instant::MAX`: none.
    deadline: Instant,
    /// The previous backoff delay (decorrelated jitter reads it).
    prev_delay: Duration,
    /// The grant of the retry in flight or scheduled, until its attempt ends.
    grant: Option<Grant>,
    /// Attempts sent or scheduled, the first try included.
    attempts: u32,
    finished: bool,
}

impl RetryState {
    /// Attempts sent or scheduled so far, the first try included.
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// The overall deadline, if the policy has one.
    pub fn deadline(&self) -> Option<Instant> {
        (self.deadline != Instant::MAX).then_some(self.deadline)
    }

    /// Whether the request is over (succeeded, gave up or abandoned).
    pub fn is_finished(&self) -> bool {
        self.finished
    }
}

const fn nonzero(field: &'static str, d: Option<Duration>) -> Result<Duration, ConfigError> {
    match d {
        Some(d) if d.is_zero() => Err(ConfigError::new(field, Problem::Zero)),
        Some(d) => Ok(d),
        None => Ok(Duration::MAX),
    }
}

impl RetryPolicy {
    /// Validates `config`. Errors name the field: `max_attempts`, `attempt_timeout`, `deadline`,
    /// `backoff.…`, `throttled_backoff.…`.
    ///
    /// A `const fn`, like [`BackoffPolicy::new`]: in a `const` or `static` item an invalid config is
    /// a compile error, and no validation code is left in the program.
    pub const fn new(config: RetryConfig) -> Result<Self, ConfigError> {
        let max_attempts = match config.max_attempts {
            Some(0) => return Err(ConfigError::new("max_attempts", Problem::Zero)),
            Some(n) => n,
            None => u32::MAX,
        };
        let attempt_timeout = tri!(nonzero("attempt_timeout", config.attempt_timeout));
        let deadline = tri!(nonzero("deadline", config.deadline));
        let backoff = tri!(BackoffPolicy::with_fields(
            config.backoff,
            &[
                "backoff.shape.base",
                "backoff.shape.factor",
                "backoff.cap",
                "backoff.jitter.fraction",
            ],
        ));
        let throttled_backoff = match config.throttled_backoff {
            Some(c) => Some(tri!(BackoffPolicy::with_fields(
                c,
                &[
                    "throttled_backoff.shape.base",
                    "throttled_backoff.shape.factor",
                    "throttled_backoff.cap",
                    "throttled_backoff.jitter.fraction",
                ],
            ))),
            None => None,
        };
        Ok(RetryPolicy {
            backoff,
            throttled_backoff,
            max_attempts,
            attempt_timeout,
            deadline,
            max_server_delay: config.max_server_delay,
            retry_timeouts: config.retry_timeouts,
            wait_on_refusal: config.wait_on_refusal,
            config,
        })
    }

    /// The config this policy was built from.
    pub fn config(&self) -> &RetryConfig {
        &self.config
    }

    /// The backoff after a failure of `class`.
    pub fn backoff_for(&self, class: ErrorClass) -> &BackoffPolicy {
        match (class.consequences().backoff, &self.throttled_backoff) {
            (BackoffKind::Throttled, Some(b)) => b,
            _ => &self.backoff,
        }
    }

    /// Starts a request whose first try is sent at `now`; tells the budget.
    pub fn start<B: Budget + ?Sized>(&self, now: Instant, budget: &mut B) -> RetryState {
        budget.on_first_try(now);
        RetryState {
            deadline: if self.deadline == Duration::MAX {
                Instant::MAX
            } else {
                now.saturating_add(self.deadline)
            },
            prev_delay: Duration::ZERO,
            grant: None,
            attempts: 1,
            finished: false,
        }
    }

    /// When an attempt sent at `sent_at` must be given up as timed out: its own timeout or the
    /// overall deadline, whichever comes first ([`Instant::MAX`] if neither is set).
    pub fn attempt_deadline(&self, state: &RetryState, sent_at: Instant) -> Instant {
        sent_at
            .saturating_add(self.attempt_timeout)
            .min(state.deadline)
    }

    /// The latest attempt failed with `class` at `now`: retry (when) or give up (why). Draws one
    /// `u64` from `rng` if the backoff is random and a delay is needed.
    pub fn on_failure<B, R>(
        &self,
        state: &mut RetryState,
        class: ErrorClass,
        now: Instant,
        budget: &mut B,
        rng: &mut R,
    ) -> RetryDecision
    where
        B: Budget + ?Sized,
        R: rand_core::Rng + ?Sized,
    {
        self.decide(state, class, now, budget, &mut || rng.next_u64())
    }

    /// [`on_failure`](Self::on_failure) drawing a uniform sample for the backoff's jitter from
    /// `sample`, called only when the decision needs one (a retry after a jittered backoff): a
    /// caller whose samples come from a stream shared with other decisions draws no more than
    /// the retry uses.
    pub fn on_failure_drawing<B: Budget + ?Sized>(
        &self,
        state: &mut RetryState,
        class: ErrorClass,
        now: Instant,
        budget: &mut B,
        sample: impl FnOnce() -> u64,
    ) -> RetryDecision {
        let mut sample = Some(sample);
        let mut draw = || sample.take().map_or(0, |f| f());
        self.decide(state, class, now, budget, &mut draw)
    }

    /// [`on_failure`](Self::on_failure) with a given uniform sample for the backoff's jitter.
    pub fn on_failure_with<B: Budget + ?Sized>(
        &self,
        state: &mut RetryState,
        class: ErrorClass,
        now: Instant,
        budget: &mut B,
        sample: u64,
    ) -> RetryDecision {
        self.decide(state, class, now, budget, &mut || sample)
    }

    // The sample comes through a `dyn` call: one copy of the decision per budget type, whatever
    // closure each caller draws with (a closure type per call site and face otherwise).
    fn decide<B: Budget + ?Sized>(
        &self,
        state: &mut RetryState,
        class: ErrorClass,
        now: Instant,
        budget: &mut B,
        sample: &mut dyn FnMut() -> u64,
    ) -> RetryDecision {
        if state.finished {
            return RetryDecision::GiveUp(GiveUpReason::Finished);
        }
        // A refused attempt sent nothing: the grant of the retry it was goes back unused.
        let ended = match class {
            ErrorClass::Refused { .. } => AttemptOutcome::Cancelled,
            _ => AttemptOutcome::Failed(class),
        };
        budget.on_attempt_end(ended, state.grant.take(), now);
        match self.plan(state, class, now, sample) {
            Ok((at, delay)) => match budget.try_retry(class, now) {
                Ok(grant) => {
                    state.grant = Some(grant);
                    state.attempts = state.attempts.saturating_add(1);
                    state.prev_delay = delay;
                    RetryDecision::RetryAt(at)
                }
                Err(denied) => Self::give_up(state, now, budget, GiveUpReason::Budget(denied)),
            },
            Err(reason) => Self::give_up(state, now, budget, reason),
        }
    }

    /// Everything but the budget: the retry's start and its backoff delay, or why not.
    fn plan(
        &self,
        state: &RetryState,
        class: ErrorClass,
        now: Instant,
        sample: impl FnOnce() -> u64,
    ) -> Result<(Instant, Duration), GiveUpReason> {
        match class {
            ErrorClass::Fatal => return Err(GiveUpReason::Fatal),
            ErrorClass::DontRetry => return Err(GiveUpReason::DontRetry),
            ErrorClass::Timeout if !self.retry_timeouts => {
                return Err(GiveUpReason::TimeoutNotRetried);
            }
            ErrorClass::Refused { .. } if !self.wait_on_refusal => {
                return Err(GiveUpReason::Refused);
            }
            _ => {}
        }
        if state.attempts >= self.max_attempts {
            return Err(GiveUpReason::MaxAttempts);
        }
        let backoff = self.backoff_for(class);
        let s = if backoff.is_random() { sample() } else { 0 };
        // The k-th retry follows the k-th failed attempt.
        let delay = backoff.delay(state.attempts, state.prev_delay, s);
        let wait = match class.retry_after() {
            Some(hint) if class.consequences().server_delay => {
                delay.max(hint.min(self.max_server_delay))
            }
            _ => delay,
        };
        let at = now.saturating_add(wait);
        if state.deadline != Instant::MAX && at >= state.deadline {
            return Err(GiveUpReason::Deadline);
        }
        Ok((at, delay))
    }

    fn give_up<B: Budget + ?Sized>(
        state: &mut RetryState,
        now: Instant,
        budget: &mut B,
        reason: GiveUpReason,
    ) -> RetryDecision {
        budget.on_request_end(now);
        state.finished = true;
        RetryDecision::GiveUp(reason)
    }

    /// The latest attempt succeeded at `now`: the request is over.
    pub fn on_success<B: Budget + ?Sized>(
        &self,
        state: &mut RetryState,
        now: Instant,
        budget: &mut B,
    ) {
        if state.finished {
            return;
        }
        budget.on_attempt_end(AttemptOutcome::Success, state.grant.take(), now);
        budget.on_request_end(now);
        state.finished = true;
    }

    /// The caller abandons the request (cancelled, or a scheduled retry will not be sent): a grant
    /// still held goes back to the budget unused.
    pub fn abandon<B: Budget + ?Sized>(
        &self,
        state: &mut RetryState,
        now: Instant,
        budget: &mut B,
    ) {
        if state.finished {
            return;
        }
        if let Some(grant) = state.grant.take() {
            budget.on_attempt_end(AttemptOutcome::Cancelled, Some(grant), now);
        }
        budget.on_request_end(now);
        state.finished = true;
    }
}

#[cfg(test)]
mod tests;

//! [`BreakerConfig`] (plain data, serde) and [`BreakerPolicy`] (the validated, fixed-point form).
//!
//! A config says what the breaker should do; [`BreakerPolicy::new`] checks it once and converts rates
//! to parts per million and factors to fixed point, so the hot path is integer-only and cannot fail.
//! One policy can be shared by any number of breakers (a breaker borrows it), which keeps each
//! breaker small: a registry of fifty breakers on a microcontroller stores the rules once.
//!
//! ```
//! use reliable_core::breaker::{BreakerConfig, BreakerPolicy, HalfOpenConfig, OpenConfig, ProbeRule, WindowConfig};
//! use reliable_core::Duration;
//!
//! // Trip at >= 25% failures over the last 40 calls (once 10 are in), open 5 s doubling up to 1 min
//! // with ±10% jitter, then let two probes through; two successes in a row close it.
//! let config = BreakerConfig {
//!     failure_rate: Some(0.25),
//!     window: WindowConfig::Count { calls: 40 },
//!     minimum_calls: 10,
//!     open: OpenConfig {
//!         duration: Duration::from_secs(5),
//!         growth: 2.0,
//!         max: Some(Duration::from_secs(60)),
//!         jitter: 0.1,
//!         strictly_after: false,
//!     },
//!     half_open: HalfOpenConfig {
//!         max_in_flight: Some(2),
//!         rule: ProbeRule::Consecutive { successes: 2 },
//!         probe_timeout: Duration::from_secs(10),
//!         decide_at_minimum: false,
//!         max_wait: None,
//!         max_wait_closes: false,
//!     },
//!     ..BreakerConfig::new()
//! };
//! let policy = BreakerPolicy::new(config).expect("valid");
//! assert_eq!(policy.max_open_time(), Duration::from_secs(60));
//! ```

use super::spec::State;
use super::window::WindowSpec;
use crate::error::{ConfigError, PPM, Problem, fraction_ppm, in_range, mul_ppm, tri};
use crate::time::Duration;

/// What a breaker does: when it trips, how long it stays open, how it probes and how it closes.
///
/// Start from [`BreakerConfig::new`] (no trip rule yet) or a named profile
/// ([`reliablekit`](BreakerConfig::reliablekit), [`layered_exercise`](BreakerConfig::layered_exercise),
/// [`resilience4j`](BreakerConfig::resilience4j)) and change fields with struct update syntax.
/// Any trip rule that fires opens the breaker; at least one must be set.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
pub struct BreakerConfig {
    /// Trip after this many failures in a row while closed. `None`: rule off.
    #[cfg_attr(feature = "serde", serde(default))]
    pub consecutive_failures: Option<u32>,
    /// Trip when failures ÷ calls in the window reaches this fraction (inclusive), in (0, 1].
    /// `None`: rule off.
    #[cfg_attr(feature = "serde", serde(default))]
    pub failure_rate: Option<f64>,
    /// Trip when too many calls are slow. `None`: rule off.
    #[cfg_attr(feature = "serde", serde(default))]
    pub slow_calls: Option<SlowCallRule>,
    /// No rate rule decides before the window holds at least this many calls. Default 10.
    #[cfg_attr(feature = "serde", serde(default = "default_minimum_calls"))]
    pub minimum_calls: u32,
    /// The window the rates are computed over. Default: the last 20 calls.
    #[cfg_attr(feature = "serde", serde(default))]
    pub window: WindowConfig,
    /// How long the breaker stays open. Default: 30 s, no growth, no jitter.
    #[cfg_attr(feature = "serde", serde(default))]
    pub open: OpenConfig,
    /// How the breaker probes once the open time is up. Default: one probe, one success closes.
    #[cfg_attr(feature = "serde", serde(default))]
    pub half_open: HalfOpenConfig,
    /// After closing, admit a rising share of calls over a ramp instead of all at once. Default off.
    #[cfg_attr(feature = "serde", serde(default))]
    pub slow_start: Option<SlowStartConfig>,
    /// Shadow mode, for rolling a breaker out safely: it decides as usual, making its would-be
    /// transitions and telling its observer each call it would reject
    /// ([`Observer::on_reject`](super::Observer::on_reject) with `shadow`), but admits every call
    /// (with a [shadow permit](super::Permit::is_shadow) where it would have rejected). A shadow
    /// permit's result is ignored, since the live breaker would not have made that call, so the
    /// breaker's state follows exactly what it would be live. An operator's forced open still
    /// rejects. Default off.
    #[cfg_attr(feature = "serde", serde(default))]
    pub shadow: bool,
    /// The state a new breaker starts in: closed (the default), half-open (its first calls are
    /// probes, as after an open time; a round that began at `Instant::ZERO`), forced open or
    /// disabled. Not open: an open time needs an instant to start from (open a new breaker with
    /// `open_for` instead). resilience4j's initial state.
    #[cfg_attr(feature = "serde", serde(default = "default_initial_state"))]
    pub initial_state: State,
}

/// The slow-call trip rule: a call is slow when its latency is strictly longer than `threshold`;
/// the breaker trips when slow calls ÷ calls in the window reaches `rate` (inclusive).
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
pub struct SlowCallRule {
    /// Calls longer than this are slow.
    pub threshold: Duration,
    /// The slow share that trips the breaker, in (0, 1].
    pub rate: f64,
}

/// The window that failure and slow-call rates are computed over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
pub enum WindowConfig {
    /// The last `calls` calls (a bit ring; see [`CountWindow`](super::CountWindow)).
    Count {
        /// How many of the most recent calls count.
        calls: u32,
    },
    /// The calls of the last `span`, kept in `buckets` buckets of `span / buckets` each (see
    /// [`TimeWindow`](super::TimeWindow)). Old buckets drop out whole, so the effective span moves in
    /// steps of one bucket.
    Time {
        /// How far back calls count.
        span: Duration,
        /// How many buckets the span is cut into.
        buckets: u32,
    },
}

/// How long the breaker stays open after it trips.
///
/// The first trip opens it for `duration`. Each time a probe fails and it opens again, the time is
/// multiplied by `growth`, up to `max`; a close resets it. `jitter` spreads each open time uniformly
/// over `±jitter` of itself (never above `max`), so that many clients do not probe at once.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
pub struct OpenConfig {
    /// Open time after the first trip.
    pub duration: Duration,
    /// Factor per consecutive re-open, at least 1. Default 1 (no growth).
    #[cfg_attr(feature = "serde", serde(default = "default_growth"))]
    pub growth: f64,
    /// Upper bound of any open time (jitter included). Required when `growth > 1`; defaults to
    /// `duration` otherwise.
    #[cfg_attr(feature = "serde", serde(default))]
    pub max: Option<Duration>,
    /// Relative jitter in [0, 1). Default 0.
    #[cfg_attr(feature = "serde", serde(default))]
    pub jitter: f64,
    /// Where the open time ends: `false` (the default), the first call **at or after** its end is a
    /// probe; `true`, only a call **strictly after** it (resilience4j's `isAfter`), so a call at
    /// exactly the end is still rejected, with a `retry_after` of 1 ns.
    #[cfg_attr(feature = "serde", serde(default))]
    pub strictly_after: bool,
}

/// How the half-open state probes the downstream.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
pub struct HalfOpenConfig {
    /// Probes allowed in flight at once; `None` lets every call through as a probe (the seed
    /// library's choice). Bounded probes need a breaker with at least this many probe slots.
    #[cfg_attr(feature = "serde", serde(default = "default_max_in_flight"))]
    pub max_in_flight: Option<u32>,
    /// What closes or re-opens the breaker.
    #[cfg_attr(feature = "serde", serde(default))]
    pub rule: ProbeRule,
    /// A probe that has not reported after this long counts as a failed probe, so a probe that never
    /// returns cannot wedge the breaker. [`Duration::MAX`] disables the lease. Default 10 s.
    #[cfg_attr(feature = "serde", serde(default = "default_probe_timeout"))]
    pub probe_timeout: Duration,
    /// With [`ProbeRule::Rate`] `{ calls }`: `false` (the default), the round decides once all
    /// `calls` probes reported; `true`, once `min(minimum_calls, calls)` reported (resilience4j
    /// evaluates its half-open window as soon as it holds the minimum number of calls). Probes of
    /// the round still out when it decides are of an older generation: their results are ignored.
    #[cfg_attr(feature = "serde", serde(default))]
    pub decide_at_minimum: bool,
    /// The longest a half-open round may last: a round still undecided this long after it began
    /// ends at the next call, re-opening the breaker (counted as a failed round) or, with
    /// `max_wait_closes`, closing it. Probes still out are then of an older generation, and their
    /// results are ignored. `None` (the default): no limit. resilience4j's
    /// `maxWaitDurationInHalfOpenState` (which re-opens).
    #[cfg_attr(feature = "serde", serde(default))]
    pub max_wait: Option<Duration>,
    /// What a round that ran out of `max_wait` does: re-open (`false`, the default) or close
    /// (`true`, as if its probes had succeeded).
    #[cfg_attr(feature = "serde", serde(default))]
    pub max_wait_closes: bool,
}

/// What the half-open probes decide.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
pub enum ProbeRule {
    /// `successes` successful probes in a row close the breaker; any failed (or slow, when the
    /// slow-call rule is on) probe re-opens it at once.
    Consecutive {
        /// Successes in a row needed to close.
        successes: u32,
    },
    /// Exactly `calls` probes are admitted; when all have reported (or, with
    /// [`HalfOpenConfig::decide_at_minimum`], `min(minimum_calls, calls)`: resilience4j's rule), the
    /// breaker re-opens if their failure rate or slow-call rate reaches the trip thresholds, and
    /// closes otherwise.
    Rate {
        /// Probes admitted and evaluated together.
        calls: u32,
    },
}

/// Slow start after closing: the admitted share of calls rises linearly from `initial` to 1 over
/// `ramp`; the rest are rejected with [`RejectReason::SlowStart`](super::RejectReason::SlowStart).
/// Admission is deterministic (error diffusion), not random: over any stretch the admitted share
/// follows the ramp within one call.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
pub struct SlowStartConfig {
    /// How long the ramp lasts.
    pub ramp: Duration,
    /// The share admitted right after closing, in [0, 1]. Default 0.1.
    #[cfg_attr(feature = "serde", serde(default = "default_initial"))]
    pub initial: f64,
}

#[cfg(feature = "serde")]
fn default_minimum_calls() -> u32 {
    10
}
fn default_growth() -> f64 {
    1.0
}
fn default_max_in_flight() -> Option<u32> {
    Some(1)
}
#[cfg(feature = "serde")]
fn default_initial_state() -> State {
    State::Closed
}

fn default_probe_timeout() -> Duration {
    Duration::from_secs(10)
}
#[cfg(feature = "serde")]
fn default_initial() -> f64 {
    0.1
}

impl Default for WindowConfig {
    fn default() -> Self {
        WindowConfig::Count { calls: 20 }
    }
}

impl Default for OpenConfig {
    fn default() -> Self {
        OpenConfig {
            duration: Duration::from_secs(30),
            growth: default_growth(),
            max: None,
            jitter: 0.0,
            strictly_after: false,
        }
    }
}

impl Default for ProbeRule {
    fn default() -> Self {
        ProbeRule::Consecutive { successes: 1 }
    }
}

impl Default for HalfOpenConfig {
    fn default() -> Self {
        HalfOpenConfig {
            max_in_flight: default_max_in_flight(),
            rule: ProbeRule::default(),
            probe_timeout: default_probe_timeout(),
            decide_at_minimum: false,
            max_wait: None,
            max_wait_closes: false,
        }
    }
}

impl BreakerConfig {
    /// The defaults of every field, with **no trip rule**: set at least one of
    /// `consecutive_failures`, `failure_rate` or `slow_calls` before building a policy.
    pub const fn new() -> Self {
        BreakerConfig {
            consecutive_failures: None,
            failure_rate: None,
            slow_calls: None,
            minimum_calls: 10,
            window: WindowConfig::Count { calls: 20 },
            open: OpenConfig {
                duration: Duration::from_secs(30),
                growth: 1.0,
                max: None,
                jitter: 0.0,
                strictly_after: false,
            },
            half_open: HalfOpenConfig {
                max_in_flight: Some(1),
                rule: ProbeRule::Consecutive { successes: 1 },
                probe_timeout: Duration::from_secs(10),
                decide_at_minimum: false,
                max_wait: None,
                max_wait_closes: false,
            },
            slow_start: None,
            shadow: false,
            initial_state: State::Closed,
        }
    }

    /// The breaker of the seed library (reliablekit 0.1): trips at a failure rate of at least 50%
    /// over the last 20 calls, stays open 30 s, then lets **every** call through as a probe (no
    /// concurrency gate); 3 successes in a row close it and clear the window, any failure re-opens it
    /// and restarts the 30 s.
    ///
    /// The seed does not say how it treats a window that is not yet full; this profile decides only
    /// over a full window (`minimum_calls = 20`), so one failure out of one call does not trip it.
    /// Without a probe gate there is nothing to lease, so `probe_timeout` plays no part.
    pub const fn reliablekit() -> Self {
        BreakerConfig {
            failure_rate: Some(0.5),
            minimum_calls: 20,
            window: WindowConfig::Count { calls: 20 },
            open: OpenConfig {
                duration: Duration::from_secs(30),
                growth: 1.0,
                max: None,
                jitter: 0.0,
                strictly_after: false,
            },
            half_open: HalfOpenConfig {
                max_in_flight: None,
                rule: ProbeRule::Consecutive { successes: 3 },
                probe_timeout: Duration::MAX,
                decide_at_minimum: false,
                max_wait: None,
                max_wait_closes: false,
            },
            ..BreakerConfig::new()
        }
    }

    /// The breaker of the layered-stack exercise: opens after 2 failures in a row, stays open 20 s
    /// from the failure that tripped it, then lets one trial through; a failed trial re-opens it for
    /// another 20 s, a successful one closes it. Needs no window ([`NoWindow`](super::NoWindow)) and one
    /// probe slot.
    pub const fn layered_exercise() -> Self {
        BreakerConfig {
            consecutive_failures: Some(2),
            open: OpenConfig {
                duration: Duration::from_secs(20),
                growth: 1.0,
                max: None,
                jitter: 0.0,
                strictly_after: false,
            },
            half_open: HalfOpenConfig {
                max_in_flight: Some(1),
                rule: ProbeRule::Consecutive { successes: 1 },
                probe_timeout: Duration::MAX,
                decide_at_minimum: false,
                max_wait: None,
                max_wait_closes: false,
            },
            ..BreakerConfig::new()
        }
    }

    /// resilience4j's `CircuitBreakerConfig.ofDefaults()`: failure rate >= 50% over a count window of
    /// 100 calls, at least 100 calls, open 60 s, then 10 permitted half-open calls evaluated together
    /// against the same thresholds; slow calls are those over 60 s, with a 100% slow-rate threshold.
    /// Needs a window of at least 100 calls (`CountWindow<100, 2>`, `AtomicCountWindow<100, 2>`) and
    /// 10 probe slots.
    ///
    /// resilience4j's own boundaries, as policy fields: a call at exactly the end of the open time
    /// is still rejected ([`OpenConfig::strictly_after`]), and a half-open round decides as soon as
    /// `min(minimum_calls, calls)` probes reported ([`HalfOpenConfig::decide_at_minimum`]; with the
    /// defaults, 10 of 10). resilience4j waits indefinitely in half-open by default, so the probe
    /// lease is off.
    ///
    /// Slow calls split as resilience4j's metrics split them:
    /// [`Counts::slow_failures`](super::Counts::slow_failures) is its
    /// `getNumberOfSlowFailedCalls`, [`Counts::slow_successes`](super::Counts::slow_successes)
    /// its `getNumberOfSlowSuccessfulCalls`, and `slow` their sum. The slow-call rate counts both,
    /// as resilience4j's does (a slow failed call is a failure and a slow call); the split is only
    /// read.
    ///
    /// Where this breaker deliberately differs from resilience4j (`core/tests/resilience4j.rs`
    /// asserts each):
    /// - **Late results.** A result whose permit was issued before a state change is ignored;
    ///   resilience4j counts it in the new state's window.
    /// - **`state()` after the wait.** An open breaker whose time is up reads as half-open (the next
    ///   call is a probe); resilience4j reports `OPEN` until a call (or its scheduler) moves it.
    /// - **Minimum calls above the window.** `minimum_calls` larger than a count window is refused
    ///   when the policy is built; resilience4j silently lowers it to the window size.
    /// - **Thresholds in parts per million.** Rates compare exactly in integers (`failures / calls
    ///   >= rate`), where resilience4j compares rounded `float` percentages.
    /// - **Disabled keeps metrics.** The disabled state records every call in the window (as
    ///   resilience4j's metrics-only state does); resilience4j's disabled state records nothing.
    /// - **Shadow mode is not a state.** resilience4j's metrics-only state never trips; shadow mode
    ///   ([`BreakerConfig::shadow`]) makes every would-be transition and admits every call.
    /// - **Rejections are counted by an observer** ([`Rejections`](super::Rejections)), not by
    ///   the breaker (resilience4j's `getNumberOfNotPermittedCalls`).
    /// - **Manual opens** take their time or instant explicitly (`open_for`, `open_until`);
    ///   resilience4j's `transitionToOpenState()` waits the configured interval of the next
    ///   attempt.
    /// - **Half-open metrics.** resilience4j's metrics in half-open (slow successes and slow
    ///   failures included) are those of a fresh window of the round's calls; here the snapshot's
    ///   `counts` keep the window of the closed state that tripped (until the breaker closes), and
    ///   the round's tallies are [`Snapshot::probe_round`](super::Snapshot::probe_round), whose
    ///   slow probes are not split into successes and failures.
    /// - **Not yet here**: call durations kept in the window (total and average).
    pub const fn resilience4j() -> Self {
        BreakerConfig {
            failure_rate: Some(0.5),
            slow_calls: Some(SlowCallRule {
                threshold: Duration::from_secs(60),
                rate: 1.0,
            }),
            minimum_calls: 100,
            window: WindowConfig::Count { calls: 100 },
            open: OpenConfig {
                duration: Duration::from_secs(60),
                growth: 1.0,
                max: None,
                jitter: 0.0,
                strictly_after: true,
            },
            half_open: HalfOpenConfig {
                max_in_flight: Some(10),
                rule: ProbeRule::Rate { calls: 10 },
                probe_timeout: Duration::MAX,
                decide_at_minimum: true,
                max_wait: None,
                max_wait_closes: false,
            },
            ..BreakerConfig::new()
        }
    }
}

impl Default for BreakerConfig {
    /// Same as [`BreakerConfig::new`]: no trip rule yet.
    fn default() -> Self {
        BreakerConfig::new()
    }
}

/// A validated [`BreakerConfig`] in fixed point. Build once, share by reference.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BreakerPolicy {
    pub(crate) consecutive: u32,
    pub(crate) failure_ppm: u32,
    pub(crate) slow_ppm: u32,
    pub(crate) slow_threshold: Duration,
    pub(crate) minimum_calls: u32,
    pub(crate) window: WindowSpec,
    pub(crate) needs_window: bool,
    pub(crate) open_base: Duration,
    pub(crate) open_max: Duration,
    /// Growth factor, 32.32 fixed point.
    pub(crate) growth_fp: u64,
    pub(crate) jitter_ppm: u32,
    /// `u32::MAX`: unlimited.
    pub(crate) max_in_flight: u32,
    pub(crate) rule: ProbeRule,
    /// `ProbeRule::Rate`: the reported probes that decide a round (`calls`, or
    /// `min(minimum_calls, calls)` with `decide_at_minimum`); 0 otherwise.
    pub(crate) quorum: u32,
    /// The open time ends strictly after its last instant (`OpenConfig::strictly_after`).
    pub(crate) strictly_after: bool,
    pub(crate) probe_timeout: Duration,
    /// Half-open: how long a round may last (`Duration::MAX`: no limit), and whether it then
    /// closes rather than re-opens.
    pub(crate) max_wait: Duration,
    pub(crate) max_wait_closes: bool,
    pub(crate) ramp: Duration,
    pub(crate) ramp_initial_ppm: u32,
    /// Admit what the rules reject, reporting it (`BreakerConfig::shadow`).
    pub(crate) shadow: bool,
    /// The state a new breaker starts in.
    pub(crate) initial_state: State,
    /// `consecutive`, or 2³² (never reached) when the rule is off: one comparison on the hot path.
    pub(crate) consecutive_limit: u64,
    /// `minimum_calls`, or `u64::MAX` when no rate rule is on.
    pub(crate) decide_from: u64,
    config: BreakerConfig,
}

/// 1.0 in 32.32 fixed point.
pub(crate) const FP_ONE: u64 = 1 << 32;

/// A rate of 0 ppm means "rule off", so a rate rounded to zero counts as 1 ppm.
const fn at_least_one(ppm: u32) -> u32 {
    if ppm == 0 { 1 } else { ppm }
}

impl BreakerPolicy {
    /// Validates `config`. Errors name the offending field.
    ///
    /// A `const fn`: a policy built in a `const` or `static` item is checked by the compiler (an
    /// invalid config is a compile error), and neither the check nor its floating-point arithmetic
    /// is left in the program, which matters on a microcontroller without a double-precision FPU.
    ///
    /// ```
    /// use reliable_core::breaker::{BreakerConfig, BreakerPolicy};
    ///
    /// static POLICY: BreakerPolicy = match BreakerPolicy::new(BreakerConfig::reliablekit()) {
    ///     Ok(policy) => policy,
    ///     Err(_) => panic!("invalid breaker config"), // a compile error, not a run-time panic
    /// };
    /// assert!(POLICY.needs_window());
    /// ```
    pub const fn new(config: BreakerConfig) -> Result<Self, ConfigError> {
        let consecutive = match config.consecutive_failures {
            Some(0) => return Err(ConfigError::new("consecutive_failures", Problem::Zero)),
            Some(n) => n,
            None => 0,
        };
        let failure_ppm = match config.failure_rate {
            Some(r) => at_least_one(tri!(fraction_ppm("failure_rate", r, false, true))),
            None => 0,
        };
        let (slow_ppm, slow_threshold) = match config.slow_calls {
            Some(rule) => (
                at_least_one(tri!(fraction_ppm(
                    "slow_calls.rate",
                    rule.rate,
                    false,
                    true
                ))),
                rule.threshold,
            ),
            None => (0, Duration::MAX),
        };
        if consecutive == 0 && failure_ppm == 0 && slow_ppm == 0 {
            return Err(ConfigError::new(
                "consecutive_failures",
                Problem::Inconsistent(
                    "no trip rule: set consecutive_failures, failure_rate or slow_calls",
                ),
            ));
        }
        let needs_window = failure_ppm != 0 || slow_ppm != 0;
        let window = match config.window {
            WindowConfig::Count { calls: 0 } => {
                return Err(ConfigError::new("window.calls", Problem::Zero));
            }
            WindowConfig::Count { calls } => WindowSpec::Count { calls },
            WindowConfig::Time { buckets: 0, .. } => {
                return Err(ConfigError::new("window.buckets", Problem::Zero));
            }
            WindowConfig::Time { span, buckets } => {
                let width = Duration::from_nanos(span.as_nanos() / buckets as u64);
                if width.is_zero() {
                    return Err(ConfigError::new(
                        "window.span",
                        Problem::Inconsistent("span is shorter than one nanosecond per bucket"),
                    ));
                }
                WindowSpec::Time { width, buckets }
            }
        };
        if needs_window {
            if config.minimum_calls == 0 {
                return Err(ConfigError::new("minimum_calls", Problem::Zero));
            }
            if let WindowSpec::Count { calls } = window
                && config.minimum_calls > calls
            {
                return Err(ConfigError::new(
                    "minimum_calls",
                    Problem::Inconsistent(
                        "larger than window.calls: the rate rules could never decide",
                    ),
                ));
            }
        }

        let open = config.open;
        if open.duration.is_zero() {
            return Err(ConfigError::new("open.duration", Problem::Zero));
        }
        let growth = tri!(in_range("open.growth", open.growth, 1.0, 65_536.0));
        let open_max = match open.max {
            Some(max) if max.as_nanos() < open.duration.as_nanos() => {
                return Err(ConfigError::new(
                    "open.max",
                    Problem::Inconsistent("shorter than open.duration"),
                ));
            }
            Some(max) => max,
            None if growth > 1.0 => {
                return Err(ConfigError::new(
                    "open.max",
                    Problem::Inconsistent(
                        "required when open.growth > 1, or open times grow without bound",
                    ),
                ));
            }
            None => open.duration,
        };
        let jitter_ppm = tri!(fraction_ppm("open.jitter", open.jitter, true, false));

        let half = config.half_open;
        let max_in_flight = match half.max_in_flight {
            Some(0) => return Err(ConfigError::new("half_open.max_in_flight", Problem::Zero)),
            Some(n) => n,
            None => u32::MAX,
        };
        match half.rule {
            ProbeRule::Consecutive { successes: 0 } => {
                return Err(ConfigError::new("half_open.rule.successes", Problem::Zero));
            }
            ProbeRule::Rate { calls: 0 } => {
                return Err(ConfigError::new("half_open.rule.calls", Problem::Zero));
            }
            ProbeRule::Rate { .. } if !needs_window => {
                return Err(ConfigError::new(
                    "half_open.rule",
                    Problem::Inconsistent(
                        "Rate probes need failure_rate or slow_calls to compare against",
                    ),
                ));
            }
            _ => {}
        }
        if matches!(config.initial_state, State::Open) {
            return Err(ConfigError::new(
                "initial_state",
                Problem::Inconsistent("an open state needs an instant to start from: use open_for"),
            ));
        }
        if half.probe_timeout.is_zero() {
            return Err(ConfigError::new("half_open.probe_timeout", Problem::Zero));
        }
        if let Some(w) = half.max_wait
            && w.is_zero()
        {
            return Err(ConfigError::new("half_open.max_wait", Problem::Zero));
        }
        let (ramp, ramp_initial_ppm) = match config.slow_start {
            Some(s) if s.ramp.is_zero() => {
                return Err(ConfigError::new("slow_start.ramp", Problem::Zero));
            }
            Some(s) => (
                s.ramp,
                tri!(fraction_ppm("slow_start.initial", s.initial, true, true)),
            ),
            None => (Duration::ZERO, PPM),
        };

        Ok(BreakerPolicy {
            consecutive,
            failure_ppm,
            slow_ppm,
            slow_threshold,
            minimum_calls: config.minimum_calls,
            window,
            needs_window,
            open_base: open.duration,
            open_max,
            growth_fp: (growth * FP_ONE as f64 + 0.5) as u64,
            jitter_ppm,
            max_in_flight,
            rule: half.rule,
            quorum: match half.rule {
                ProbeRule::Rate { calls }
                    if half.decide_at_minimum && config.minimum_calls < calls =>
                {
                    config.minimum_calls
                }
                ProbeRule::Rate { calls } => calls,
                ProbeRule::Consecutive { .. } => 0,
            },
            strictly_after: open.strictly_after,
            probe_timeout: half.probe_timeout,
            max_wait: match half.max_wait {
                Some(w) => w,
                None => Duration::MAX,
            },
            max_wait_closes: half.max_wait_closes,
            ramp,
            ramp_initial_ppm,
            shadow: config.shadow,
            initial_state: config.initial_state,
            consecutive_limit: match consecutive {
                0 => 1 << 32,
                n => n as u64,
            },
            decide_from: if needs_window {
                config.minimum_calls as u64
            } else {
                u64::MAX
            },
            config,
        })
    }

    /// Builds a breaker's window storage for this policy with `new`, refusing storage that keeps
    /// nothing (`NoWindow`) when a rate rule needs a window. A consecutive-only policy accepts any
    /// storage and keeps metrics in it if it can.
    pub(crate) fn build_window<W>(
        &self,
        new: impl Fn(WindowSpec) -> Result<W, ConfigError>,
        is_recording: impl Fn(&W) -> bool,
    ) -> Result<W, ConfigError> {
        if !self.needs_window {
            return new(self.window).or_else(|_| new(WindowSpec::Count { calls: 1 }));
        }
        let w = new(self.window)?;
        if is_recording(&w) {
            Ok(w)
        } else {
            Err(ConfigError::new(
                "window",
                Problem::Inconsistent(
                    "the rate rules need a window, but this breaker type has NoWindow",
                ),
            ))
        }
    }

    /// Refuses a breaker with fewer probe slots than the probes this policy lets into half-open.
    pub(crate) fn check_probe_slots(&self, slots: usize) -> Result<(), ConfigError> {
        if self.max_in_flight != u32::MAX && self.max_in_flight as usize > slots {
            return Err(ConfigError::new(
                "half_open.max_in_flight",
                Problem::ExceedsCapacity {
                    requested: u64::from(self.max_in_flight),
                    capacity: slots as u64,
                },
            ));
        }
        Ok(())
    }

    /// The config this policy was built from.
    pub fn config(&self) -> &BreakerConfig {
        &self.config
    }

    /// The window the rate rules need.
    pub fn window(&self) -> WindowSpec {
        self.window
    }

    /// Whether any rate rule (failure or slow-call) is on, so the breaker needs a window.
    pub fn needs_window(&self) -> bool {
        self.needs_window
    }

    /// Whether the breaker runs in shadow mode (see [`BreakerConfig::shadow`]).
    pub fn shadow(&self) -> bool {
        self.shadow
    }

    /// Probes allowed in flight at once in half-open, or `None` for no limit.
    pub fn max_in_flight(&self) -> Option<u32> {
        (self.max_in_flight != u32::MAX).then_some(self.max_in_flight)
    }

    /// The longest time the breaker can stay open; `retry_after` never exceeds it (by more than
    /// the 1 ns of [`OpenConfig::strictly_after`]).
    pub fn max_open_time(&self) -> Duration {
        self.open_max
    }

    /// Open time before jitter after `reopens` consecutive failed probe rounds:
    /// `min(max, duration * growth^reopens)`, computed in fixed point with saturation.
    pub fn open_time_before_jitter(&self, reopens: u32) -> Duration {
        let base = u128::from(self.open_base.as_nanos());
        let max = u128::from(self.open_max.as_nanos());
        if self.growth_fp == FP_ONE || reopens == 0 {
            return Duration::from_nanos(base.min(max) as u64);
        }
        // Square-and-multiply on the factor; stop as soon as the product passes the cap.
        let mut result = base << 32;
        let mut factor = u128::from(self.growth_fp);
        let mut n = reopens;
        let cap = max << 32;
        while n > 0 && result < cap {
            if n & 1 == 1 {
                result = (result.saturating_mul(factor) >> 32).min(cap);
            }
            n >>= 1;
            if n > 0 {
                factor = (factor.saturating_mul(factor) >> 32).min(cap.max(1 << 33));
            }
        }
        Duration::from_nanos((result.min(cap) >> 32) as u64)
    }

    /// The share of calls slow start admits `elapsed` into the ramp, in ppm (`elapsed < ramp`).
    #[inline]
    pub(crate) fn ramp_share(&self, elapsed: Duration) -> u32 {
        let initial = u64::from(self.ramp_initial_ppm);
        let rest = u64::from(PPM) - initial;
        // `elapsed < ramp`, so `ramp >= 1`; `max(1)` says so to the compiler, which otherwise
        // keeps a division-by-zero panic path (seen in the WebAssembly build).
        let (elapsed, ramp) = (elapsed.as_nanos(), self.ramp.as_nanos().max(1));
        // rest * elapsed / ramp, exact; in u64 unless the product needs more (ramps over ~5 h).
        let gained = match rest.checked_mul(elapsed) {
            Some(p) => p / ramp,
            None => (u128::from(rest) * u128::from(elapsed) / u128::from(ramp)) as u64,
        };
        (initial + gained) as u32
    }

    /// The open time after `reopens` failed probe rounds, jittered by the uniform sample `sample`:
    /// `d * U[1 - jitter, 1 + jitter]`, never above the cap.
    pub fn open_time(&self, reopens: u32, sample: u64) -> Duration {
        let d = self.open_time_before_jitter(reopens).as_nanos();
        if self.jitter_ppm == 0 {
            return Duration::from_nanos(d);
        }
        let spread = mul_ppm(d, self.jitter_ppm);
        let lo = d - spread;
        let hi = d.saturating_add(spread).min(self.open_max.as_nanos());
        Duration::from_nanos(crate::sample::uniform_between(sample, lo, hi))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::splitmix64;

    fn err(config: BreakerConfig) -> ConfigError {
        BreakerPolicy::new(config).unwrap_err()
    }

    #[test]
    fn named_profiles_are_valid() {
        for config in [
            BreakerConfig::reliablekit(),
            BreakerConfig::layered_exercise(),
            BreakerConfig::resilience4j(),
        ] {
            BreakerPolicy::new(config).unwrap();
        }
    }

    #[test]
    fn rejects_each_bad_field_by_name() {
        let base = BreakerConfig::reliablekit();
        assert_eq!(err(BreakerConfig::new()).field, "consecutive_failures");
        assert_eq!(
            err(BreakerConfig {
                consecutive_failures: Some(0),
                ..base
            })
            .field,
            "consecutive_failures"
        );
        assert_eq!(
            err(BreakerConfig {
                failure_rate: Some(0.0),
                ..base
            })
            .field,
            "failure_rate"
        );
        assert_eq!(
            err(BreakerConfig {
                failure_rate: Some(f64::NAN),
                ..base
            })
            .field,
            "failure_rate"
        );
        assert_eq!(
            err(BreakerConfig {
                failure_rate: Some(1.01),
                ..base
            })
            .field,
            "failure_rate"
        );
        let slow = Some(SlowCallRule {
            threshold: Duration::from_secs(1),
            rate: -0.5,
        });
        assert_eq!(
            err(BreakerConfig {
                slow_calls: slow,
                ..base
            })
            .field,
            "slow_calls.rate"
        );
        assert_eq!(
            err(BreakerConfig {
                window: WindowConfig::Count { calls: 0 },
                ..base
            })
            .field,
            "window.calls"
        );
        assert_eq!(
            err(BreakerConfig {
                minimum_calls: 21,
                ..base
            })
            .field,
            "minimum_calls"
        );
        assert_eq!(
            err(BreakerConfig {
                minimum_calls: 0,
                ..base
            })
            .field,
            "minimum_calls"
        );
        let tiny = WindowConfig::Time {
            span: Duration::from_nanos(3),
            buckets: 4,
        };
        assert_eq!(
            err(BreakerConfig {
                window: tiny,
                ..base
            })
            .field,
            "window.span"
        );
        let nobuckets = WindowConfig::Time {
            span: Duration::from_secs(3),
            buckets: 0,
        };
        assert_eq!(
            err(BreakerConfig {
                window: nobuckets,
                ..base
            })
            .field,
            "window.buckets"
        );
        let open = |o: OpenConfig| BreakerConfig { open: o, ..base };
        assert_eq!(
            err(open(OpenConfig {
                duration: Duration::ZERO,
                ..base.open
            }))
            .field,
            "open.duration"
        );
        assert_eq!(
            err(open(OpenConfig {
                growth: 0.5,
                ..base.open
            }))
            .field,
            "open.growth"
        );
        assert_eq!(
            err(open(OpenConfig {
                growth: f64::INFINITY,
                ..base.open
            }))
            .field,
            "open.growth"
        );
        assert_eq!(
            err(open(OpenConfig {
                growth: 2.0,
                ..base.open
            }))
            .field,
            "open.max"
        );
        assert_eq!(
            err(open(OpenConfig {
                max: Some(Duration::from_secs(1)),
                ..base.open
            }))
            .field,
            "open.max"
        );
        assert_eq!(
            err(open(OpenConfig {
                jitter: 1.0,
                ..base.open
            }))
            .field,
            "open.jitter"
        );
        let half = |h: HalfOpenConfig| BreakerConfig {
            half_open: h,
            ..base
        };
        assert_eq!(
            err(half(HalfOpenConfig {
                max_in_flight: Some(0),
                ..base.half_open
            }))
            .field,
            "half_open.max_in_flight"
        );
        let rule = ProbeRule::Consecutive { successes: 0 };
        assert_eq!(
            err(half(HalfOpenConfig {
                rule,
                ..base.half_open
            }))
            .field,
            "half_open.rule.successes"
        );
        let rule = ProbeRule::Rate { calls: 0 };
        assert_eq!(
            err(half(HalfOpenConfig {
                rule,
                ..base.half_open
            }))
            .field,
            "half_open.rule.calls"
        );
        let probe_timeout = Duration::ZERO;
        assert_eq!(
            err(half(HalfOpenConfig {
                probe_timeout,
                ..base.half_open
            }))
            .field,
            "half_open.probe_timeout"
        );
        let rate_without_rates = BreakerConfig {
            half_open: HalfOpenConfig {
                rule: ProbeRule::Rate { calls: 3 },
                ..base.half_open
            },
            ..BreakerConfig::layered_exercise()
        };
        assert_eq!(err(rate_without_rates).field, "half_open.rule");
        let ramp = Some(SlowStartConfig {
            ramp: Duration::ZERO,
            initial: 0.1,
        });
        assert_eq!(
            err(BreakerConfig {
                slow_start: ramp,
                ..base
            })
            .field,
            "slow_start.ramp"
        );
        let ramp = Some(SlowStartConfig {
            ramp: Duration::from_secs(1),
            initial: 2.0,
        });
        assert_eq!(
            err(BreakerConfig {
                slow_start: ramp,
                ..base
            })
            .field,
            "slow_start.initial"
        );
    }

    #[test]
    fn u64_arithmetic_matches_the_128_bit_formulas() {
        let mut x = 7u64;
        for i in 0..20_000u64 {
            x = splitmix64(x);
            let d = match i % 3 {
                0 => x,
                1 => x >> 20,
                _ => x % 5_000_000,
            };
            let j = splitmix64(x) % 1_000_001;
            let want = (u128::from(d) * u128::from(j) / 1_000_000) as u64;
            assert_eq!(mul_ppm(d, j as u32), want);
            let p = BreakerPolicy {
                ramp: Duration::from_nanos(d.max(1)),
                ramp_initial_ppm: (j as u32).min(PPM),
                ..BreakerPolicy::new(BreakerConfig::layered_exercise()).unwrap()
            };
            let elapsed = splitmix64(d) % d.max(1);
            let initial = u128::from(p.ramp_initial_ppm);
            let want = initial + (1_000_000 - initial) * u128::from(elapsed) / u128::from(d.max(1));
            assert_eq!(
                u128::from(p.ramp_share(Duration::from_nanos(elapsed))),
                want
            );
        }
    }

    #[test]
    fn open_time_grows_to_the_cap_and_jitter_stays_under_it() {
        let config = BreakerConfig {
            open: OpenConfig {
                duration: Duration::from_secs(1),
                growth: 2.0,
                max: Some(Duration::from_secs(10)),
                jitter: 0.5,
                strictly_after: false,
            },
            ..BreakerConfig::layered_exercise()
        };
        let p = BreakerPolicy::new(config).unwrap();
        let secs = |n| p.open_time_before_jitter(n).as_secs();
        assert_eq!(
            [
                secs(0),
                secs(1),
                secs(2),
                secs(3),
                secs(4),
                secs(1_000_000_000)
            ],
            [1, 2, 4, 8, 10, 10]
        );
        assert_eq!(p.open_time(0, 0), Duration::from_millis(500));
        assert_eq!(p.open_time(0, u64::MAX), Duration::from_millis(1_500));
        assert_eq!(
            p.open_time(3, u64::MAX),
            Duration::from_secs(10),
            "clamped to the cap"
        );
        assert_eq!(p.open_time(3, 0), Duration::from_secs(4));
        let slow = BreakerPolicy::new(BreakerConfig {
            open: OpenConfig {
                growth: 1.5,
                max: Some(Duration::from_secs(100)),
                ..config.open
            },
            ..config
        })
        .unwrap();
        assert_eq!(
            slow.open_time_before_jitter(2),
            Duration::from_millis(2_250)
        );
        assert_eq!(
            slow.open_time_before_jitter(u32::MAX),
            Duration::from_secs(100)
        );
    }
}

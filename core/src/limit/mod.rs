//! Concurrency limits: how many calls may be in flight at once, fixed (a bulkhead) or adapted to
//! the latency and drops the calls see (AIMD, gradient); and a client-side [rate limiter](rate).
//!
//! ## Why adapt
//!
//! Little's law: a downstream serving `X` calls per second at a latency of `R` seconds holds
//! `L = X × R` calls in flight. Past its capacity, more calls in flight do not raise `X`; they wait
//! in its queues, so `R` grows and so does everything else. The concurrency a downstream sustains
//! without queueing is its throughput × its minimum latency, and it changes with deploys,
//! neighbours and capacity losses. A fixed limit is either too low (wasted capacity) or too high
//! (a queue); an adaptive one looks for it the way TCP looks for a path's bandwidth.
//!
//! ## The rules
//!
//! One `match` over (rule, completion) in [`Limiter::release`]; `L` is the limit, `in` the calls in
//! flight when the completing call was admitted:
//!
//! | rule | completion | new limit | reference |
//! |---|---|---|---|
//! | any | [`Completion::Ignored`] | `L` | |
//! | [`Fixed`](LimitRule::Fixed) | any | `L` (a static bulkhead) | resilience4j, Polly, failsafe-go bulkheads |
//! | [`Aimd`](LimitRule::Aimd) | dropped | `max(min, ⌊L × backoff⌋)` | Netflix concurrency-limits `AIMDLimit`; Chiu & Jain 1989 |
//! | [`Aimd`](LimitRule::Aimd) | success, `2 × in ≥ L` | `min(max, L + increase)` | |
//! | [`Aimd`](LimitRule::Aimd) | success, `2 × in < L` | `L` (not using its limit: no evidence to grow) | |
//! | [`Gradient`](LimitRule::Gradient) | success, `2 × in < L` | `L` | Netflix `Gradient2Limit` |
//! | [`Gradient`](LimitRule::Gradient) | success | `L' = L × (1 − s) + (L × g + queue) × s`, `g = clamp(tolerance × long_rtt / rtt, ½, 1)` | |
//! | [`Gradient`](LimitRule::Gradient) | dropped | the same with `g = ½` | |
//!
//! Every result is clamped to `[min, max]`. For the gradient, `long_rtt` is an exponential moving
//! average of the RTTs over `long_window` samples (`α = 2 / (long_window + 1)`); when it is more
//! than twice the latest RTT (load has gone, latency is back) it is cut by 5% per sample so the
//! limit recovers without waiting for the average. `g < 1` means calls take longer than usual:
//! there is a queue, shrink; `g = 1` means no queue: grow by `queue × s` per sample.
//! **Deviation from `Gradient2Limit`:** Netflix feeds a drop's RTT through the same formula, so a
//! downstream that sheds load with a fast 503 looks fast and the limit grows; here a drop counts as
//! the steepest gradient (½), the strongest sign of congestion, as AIMD treats it.
//!
//! A limit is kept in millionths of a call (the gradient moves it by fractions); calls are admitted
//! while the calls in flight are fewer than its whole part.
//!
//! ```
//! use reliable_core::limit::{Completion, Limiter, LimiterConfig, LimiterPolicy};
//! use reliable_core::{Duration, Instant};
//!
//! // AIMD from 10, between 1 and 100, backing off to 90% on a drop.
//! let policy = LimiterPolicy::new(LimiterConfig { initial: 10, min: 1, ..LimiterConfig::aimd() })?;
//! let mut limiter = Limiter::new(policy);
//! let now = Instant::from_secs(1);
//! let mut permits: Vec<_> = (0..12).filter_map(|_| limiter.try_acquire(now).ok()).collect();
//! assert_eq!(permits.len(), 10); // the 11th and 12th are refused
//! let tenth = permits.pop().unwrap(); // admitted with 10 in flight
//! let later = now + Duration::from_millis(20);
//! limiter.release(permits.pop().unwrap(), Completion::Dropped, later);
//! assert_eq!(limiter.limit(), 9); // ⌊10 × 0.9⌋
//! limiter.release(tenth, Completion::Success, later);
//! assert_eq!(limiter.limit(), 10); // + 1: 2 × 10 in flight ≥ 9, the limit was in use
//! # Ok::<(), reliable_core::ConfigError>(())
//! ```

pub mod rate;

pub use rate::{RateConfig, RateLimited, RateLimiter, RatePolicy};

use crate::error::{ConfigError, PPM, Problem, fraction_ppm, in_range, tri};
use crate::outcome::{AttemptOutcome, ErrorClass};
use crate::time::Instant;

/// Most calls a limit may allow.
const MAX_LIMIT: u32 = 1 << 24;

/// How the limit moves.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
pub enum LimitRule {
    /// Never: a static bulkhead of `initial` calls.
    Fixed,
    /// Additive increase, multiplicative decrease.
    Aimd {
        /// The limit is multiplied by this on a drop, in (0, 1). Netflix: 0.9.
        backoff: f64,
        /// Calls added on a success while the limit is in use, at least 1. Netflix: 1.
        increase: u32,
    },
    /// Gradient2: the ratio of the long-term RTT to the latest one.
    Gradient {
        /// RTTs up to `tolerance` × the long-term RTT count as no queue, in [1, 100]. Netflix: 1.5
        /// (Gradient2's `rttTolerance`).
        tolerance: f64,
        /// Weight of each new estimate, in (0, 1]. Netflix: 0.2.
        smoothing: f64,
        /// Samples the long-term RTT averages over, at least 1. Netflix: 600.
        long_window: u32,
        /// Calls added per sample when there is no queue (Gradient2's `queueSize`). Netflix: 4.
        queue: u32,
    },
}

/// A concurrency limit. In RON: `(rule: Aimd(backoff: 0.9, increase: 1), initial: 20, min: 20,
/// max: 200)`.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
pub struct LimiterConfig {
    /// How the limit moves.
    pub rule: LimitRule,
    /// The limit at the start, in `[min, max]`.
    pub initial: u32,
    /// The smallest limit, at least 1.
    pub min: u32,
    /// The largest limit, at most 2²⁴.
    pub max: u32,
}

impl LimiterConfig {
    /// A static bulkhead: at most `calls` in flight.
    pub const fn bulkhead(calls: u32) -> Self {
        LimiterConfig {
            rule: LimitRule::Fixed,
            initial: calls,
            min: calls,
            max: calls,
        }
    }

    /// Netflix's `AIMDLimit` defaults: from 20, between 20 and 200, × 0.9 on a drop, + 1 per
    /// success.
    pub const fn aimd() -> Self {
        LimiterConfig {
            rule: LimitRule::Aimd {
                backoff: 0.9,
                increase: 1,
            },
            initial: 20,
            min: 20,
            max: 200,
        }
    }

    /// Netflix's `Gradient2Limit` defaults: from 20, between 20 and 200, tolerance 1.5, smoothing
    /// 0.2, a long window of 600 samples, queue 4.
    pub const fn gradient() -> Self {
        LimiterConfig {
            rule: LimitRule::Gradient {
                tolerance: 1.5,
                smoothing: 0.2,
                long_window: 600,
                queue: 4,
            },
            initial: 20,
            min: 20,
            max: 200,
        }
    }
}

/// A validated [`LimitRule`], in parts per million.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Rule {
    Fixed,
    Aimd {
        backoff_ppm: u32,
        increase: u32,
    },
    Gradient {
        tolerance_ppm: u64,
        smoothing_ppm: u32,
        /// `α = 2 / (long_window + 1)`, ppm.
        alpha_ppm: u32,
        queue: u32,
    },
}

/// A validated [`LimiterConfig`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LimiterPolicy {
    rule: Rule,
    initial: u32,
    min: u32,
    max: u32,
}

impl LimiterPolicy {
    /// Validates `config`. Errors name the field: `min`, `max`, `initial`, `rule.backoff`,
    /// `rule.increase`, `rule.tolerance`, `rule.smoothing`, `rule.long_window`.
    pub const fn new(config: LimiterConfig) -> Result<Self, ConfigError> {
        if config.min == 0 {
            return Err(ConfigError::new("min", Problem::Zero));
        }
        if config.max > MAX_LIMIT {
            return Err(ConfigError::new(
                "max",
                Problem::OutOfRange {
                    value: config.max as f64,
                    min: 1.0,
                    max: MAX_LIMIT as f64,
                },
            ));
        }
        if config.max < config.min {
            return Err(ConfigError::new(
                "max",
                Problem::Inconsistent("max is below min"),
            ));
        }
        if config.initial < config.min || config.initial > config.max {
            return Err(ConfigError::new(
                "initial",
                Problem::OutOfRange {
                    value: config.initial as f64,
                    min: config.min as f64,
                    max: config.max as f64,
                },
            ));
        }
        let rule = match config.rule {
            LimitRule::Fixed => Rule::Fixed,
            LimitRule::Aimd { backoff, increase } => {
                let backoff_ppm = tri!(fraction_ppm("rule.backoff", backoff, false, false));
                if increase == 0 {
                    return Err(ConfigError::new("rule.increase", Problem::Zero));
                }
                Rule::Aimd {
                    backoff_ppm,
                    increase,
                }
            }
            LimitRule::Gradient {
                tolerance,
                smoothing,
                long_window,
                queue,
            } => {
                let tolerance = tri!(in_range("rule.tolerance", tolerance, 1.0, 100.0));
                let smoothing_ppm = tri!(fraction_ppm("rule.smoothing", smoothing, false, true));
                if long_window == 0 {
                    return Err(ConfigError::new("rule.long_window", Problem::Zero));
                }
                Rule::Gradient {
                    tolerance_ppm: (tolerance * PPM as f64 + 0.5) as u64,
                    smoothing_ppm,
                    // In (0, 1e6]: 2e6 / (w + 1) for w >= 1.
                    alpha_ppm: (2 * PPM as u64 / (long_window as u64 + 1)) as u32,
                    queue,
                }
            }
        };
        Ok(LimiterPolicy {
            rule,
            initial: config.initial,
            min: config.min,
            max: config.max,
        })
    }

    /// The smallest limit.
    pub const fn min(&self) -> u32 {
        self.min
    }

    /// The largest limit.
    pub const fn max(&self) -> u32 {
        self.max
    }
}

/// How an admitted call ended, as the limit reads it. Not a notion of success of its own: it is
/// the "limit" column of the [answer table](crate::answer) ([`Completion::of`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Completion {
    /// It was served: its RTT is a sample.
    Success,
    /// It was dropped for overload: a timeout, a 503, a 429, `RESOURCE_EXHAUSTED`.
    Dropped,
    /// It says nothing about load: cancelled (a losing hedge), a bad request, a 500.
    Ignored,
}

impl Completion {
    /// What a limit reads from an attempt that ended with `class` (`None`: a success): the
    /// class's [`consequences`](ErrorClass::consequences)`.limit`.
    #[inline]
    pub const fn of(class: Option<ErrorClass>) -> Self {
        match class {
            None => Completion::Success,
            Some(class) => class.consequences().limit,
        }
    }
}

/// A success is a sample, a failure reads its class's row, a cancelled attempt is ignored.
impl From<AttemptOutcome> for Completion {
    fn from(outcome: AttemptOutcome) -> Self {
        match outcome {
            AttemptOutcome::Success => Completion::Success,
            AttemptOutcome::Failed(class) => Completion::of(Some(class)),
            AttemptOutcome::Cancelled => Completion::Ignored,
        }
    }
}

/// Permission for one call, from [`Limiter::try_acquire`]; hand it back to [`Limiter::release`].
#[must_use = "a permit holds a slot until it is released"]
#[derive(Debug, PartialEq, Eq)]
pub struct LimitPermit {
    sent: Instant,
    /// Calls in flight once this one was admitted.
    in_flight: u32,
}

/// A call refused because the calls in flight are at the limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LimitReached {
    /// The limit at the time.
    pub limit: u32,
}

/// A concurrency limit, fixed or adaptive. See the [module docs](self) for the rules.
///
/// 64 bytes on 64-bit targets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limiter {
    policy: LimiterPolicy,
    /// The limit in millionths of a call, in `[min, max] × 10⁶`.
    micro_limit: u64,
    in_flight: u32,
    /// Gradient: the long-term RTT (ns), 0 before the first sample.
    long_rtt: u64,
}

impl Limiter {
    /// A limiter at the policy's initial limit, nothing in flight.
    pub const fn new(policy: LimiterPolicy) -> Self {
        Limiter {
            micro_limit: policy.initial as u64 * PPM as u64,
            policy,
            in_flight: 0,
            long_rtt: 0,
        }
    }

    /// The policy.
    pub fn policy(&self) -> &LimiterPolicy {
        &self.policy
    }

    /// The limit: calls admitted at once.
    #[inline]
    pub fn limit(&self) -> u32 {
        (self.micro_limit / u64::from(PPM)) as u32
    }

    /// The limit in millionths of a call (the gradient moves it by fractions).
    pub fn micro_limit(&self) -> u64 {
        self.micro_limit
    }

    /// Calls in flight.
    pub fn in_flight(&self) -> u32 {
        self.in_flight
    }

    /// The gradient's long-term RTT, zero before the first sample.
    pub fn long_rtt(&self) -> crate::Duration {
        crate::Duration::from_nanos(self.long_rtt)
    }

    /// Admits a call if fewer than [`limit`](Self::limit) are in flight.
    #[inline]
    pub fn try_acquire(&mut self, now: Instant) -> Result<LimitPermit, LimitReached> {
        let limit = self.limit();
        if self.in_flight >= limit {
            return Err(LimitReached { limit });
        }
        self.in_flight += 1;
        Ok(LimitPermit {
            sent: now,
            in_flight: self.in_flight,
        })
    }

    /// A call admitted by `permit` ended at `now`; its RTT is `now − ` the time it was admitted.
    #[inline]
    pub fn release(&mut self, permit: LimitPermit, completion: Completion, now: Instant) {
        self.in_flight = self.in_flight.saturating_sub(1);
        let rtt = now.saturating_duration_since(permit.sent).as_nanos().max(1);
        let p = &self.policy;
        let (min, max) = (
            u64::from(p.min) * u64::from(PPM),
            u64::from(p.max) * u64::from(PPM),
        );
        let limit = self.micro_limit;
        let used = u64::from(permit.in_flight) * 2 * u64::from(PPM) >= limit;
        use Completion::*;
        let next = match (p.rule, completion) {
            (_, Ignored) | (Rule::Fixed, _) => limit,
            (Rule::Aimd { backoff_ppm, .. }, Dropped) => {
                whole(crate::error::mul_ppm(limit, backoff_ppm))
            }
            (Rule::Aimd { increase, .. }, Success) if used => {
                limit.saturating_add(u64::from(increase) * u64::from(PPM))
            }
            (Rule::Aimd { .. }, Success) => limit,
            (Rule::Gradient { alpha_ppm, .. }, Success) if !used => {
                self.long_rtt = long_average(self.long_rtt, rtt, alpha_ppm);
                limit
            }
            (
                Rule::Gradient {
                    tolerance_ppm,
                    smoothing_ppm,
                    alpha_ppm,
                    queue,
                },
                _,
            ) => {
                self.long_rtt = long_average(self.long_rtt, rtt, alpha_ppm);
                let gradient = match completion {
                    Dropped => PPM / 2,
                    _ => gradient_ppm(tolerance_ppm, self.long_rtt, rtt),
                };
                gradient_step(limit, gradient, smoothing_ppm, queue)
            }
        };
        // Not `clamp`, which asserts min <= max (the policy checked it): no panic path.
        self.micro_limit = next.max(min).min(max);
    }
}

/// Rounds a limit in millionths down to whole calls (AIMD keeps whole limits, as Netflix's does).
fn whole(micro: u64) -> u64 {
    micro - micro % u64::from(PPM)
}

/// The long-term RTT after a sample: an exponential moving average with weight `α`, started at
/// the first sample, cut by 5% when it is more than twice the sample (latency is back to normal).
fn long_average(long: u64, rtt: u64, alpha_ppm: u32) -> u64 {
    if long == 0 {
        return rtt;
    }
    let next = if rtt >= long {
        long + crate::error::mul_ppm(rtt - long, alpha_ppm)
    } else {
        long - crate::error::mul_ppm(long - rtt, alpha_ppm)
    };
    if next / 2 > rtt {
        next - next / 20
    } else {
        next
    }
}

/// `clamp(tolerance × long / rtt, ½, 1)` in ppm.
fn gradient_ppm(tolerance_ppm: u64, long: u64, rtt: u64) -> u32 {
    let g = u128::from(tolerance_ppm) * u128::from(long) / u128::from(rtt.max(1));
    g.clamp(u128::from(PPM / 2), u128::from(PPM)) as u32
}

/// `L × (1 − s) + (L × g + queue) × s`, all in millionths of a call.
fn gradient_step(limit: u64, gradient_ppm: u32, smoothing_ppm: u32, queue: u32) -> u64 {
    let target = u128::from(crate::error::mul_ppm(limit, gradient_ppm))
        + u128::from(queue) * u128::from(PPM);
    let s = u128::from(smoothing_ppm);
    let mixed = (u128::from(limit) * (u128::from(PPM) - s) + target * s) / u128::from(PPM);
    mixed.min(u128::from(u64::MAX)) as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Duration;

    fn limiter(config: LimiterConfig) -> Limiter {
        Limiter::new(LimiterPolicy::new(config).unwrap())
    }

    #[test]
    fn a_bulkhead_never_moves() {
        let mut l = limiter(LimiterConfig::bulkhead(3));
        let t = Instant::ZERO;
        let a = l.try_acquire(t).unwrap();
        let b = l.try_acquire(t).unwrap();
        let c = l.try_acquire(t).unwrap();
        assert_eq!(l.try_acquire(t), Err(LimitReached { limit: 3 }));
        l.release(a, Completion::Dropped, t);
        l.release(b, Completion::Success, t);
        assert_eq!((l.limit(), l.in_flight()), (3, 1));
        l.release(c, Completion::Ignored, t);
        assert_eq!(l.in_flight(), 0);
    }

    #[test]
    fn aimd_step_by_step() {
        let mut l = limiter(LimiterConfig {
            initial: 10,
            min: 2,
            max: 12,
            ..LimiterConfig::aimd()
        });
        let t = Instant::from_secs(1);
        // (completion, calls in flight when the call was admitted, limit after)
        let steps = [
            (Completion::Success, 5, 11), // 2 × 5 ≥ 10: grow
            (Completion::Success, 5, 11), // 2 × 5 < 11: not in use
            (Completion::Success, 6, 12),
            (Completion::Success, 12, 12), // the max
            (Completion::Dropped, 1, 10),  // ⌊12 × 0.9⌋ = 10
            (Completion::Ignored, 10, 10),
            (Completion::Dropped, 1, 9),
            (Completion::Dropped, 1, 8),
            (Completion::Dropped, 1, 7),
            (Completion::Dropped, 1, 6),
            (Completion::Dropped, 1, 5),
            (Completion::Dropped, 1, 4), // ⌊5 × 0.9⌋
            (Completion::Dropped, 1, 3),
            (Completion::Dropped, 1, 2),
            (Completion::Dropped, 1, 2), // the min
        ];
        for (i, (completion, in_flight, want)) in steps.into_iter().enumerate() {
            let permit = LimitPermit { sent: t, in_flight };
            l.in_flight = 1;
            l.release(permit, completion, t + Duration::from_millis(5));
            assert_eq!(l.limit(), want, "step {i}");
        }
    }

    #[test]
    fn gradient_step_by_step() {
        let mut l = limiter(LimiterConfig {
            rule: LimitRule::Gradient {
                tolerance: 1.5,
                smoothing: 0.5,
                long_window: 1,
                queue: 4,
            },
            initial: 20,
            min: 4,
            max: 100,
        });
        let t = Instant::ZERO;
        let ms = Duration::from_millis;
        let sample = |l: &mut Limiter, rtt: u64, in_flight: u32, c: Completion| {
            l.release(LimitPermit { sent: t, in_flight }, c, t + ms(rtt));
            (l.micro_limit(), l.long_rtt().as_millis())
        };
        // First sample: long = rtt, g = clamp(1.5) = 1: 20 × 0.5 + (20 + 4) × 0.5 = 22.
        assert_eq!(
            sample(&mut l, 10, 10, Completion::Success),
            (22_000_000, 10)
        );
        // long_window 1: α = 1, long follows the sample; g = 1.5 → 1: 22 → 24.
        assert_eq!(
            sample(&mut l, 10, 11, Completion::Success),
            (24_000_000, 10)
        );
        // Not in use (2 × 5 < 24): unchanged, but the RTT is still averaged.
        assert_eq!(sample(&mut l, 30, 5, Completion::Success), (24_000_000, 30));
        // A drop: g = ½: 24 × 0.5 + (12 + 4) × 0.5 = 20.
        assert_eq!(sample(&mut l, 30, 1, Completion::Dropped), (20_000_000, 30));
        // long 30 > 2 × 10: cut by 5% after the average: α = 1 → 10 ms, no cut needed then.
        assert_eq!(
            sample(&mut l, 10, 20, Completion::Success),
            (22_000_000, 10)
        );
    }

    #[test]
    fn the_gradient_shrinks_when_latency_rises() {
        let mut l = limiter(LimiterConfig::gradient());
        let t = Instant::ZERO;
        let ms = Duration::from_millis;
        for _ in 0..150 {
            let limit = l.limit();
            l.release(
                LimitPermit {
                    sent: t,
                    in_flight: limit,
                },
                Completion::Success,
                t + ms(10),
            );
        }
        let grown = l.limit();
        assert!(grown > 100, "{grown}");
        for _ in 0..30 {
            let limit = l.limit();
            l.release(
                LimitPermit {
                    sent: t,
                    in_flight: limit,
                },
                Completion::Success,
                t + ms(40),
            );
        }
        assert!(l.limit() < grown / 2, "{} from {grown}", l.limit());
        assert!(l.limit() >= 20);
    }

    #[test]
    fn the_average_cuts_itself_when_latency_is_back() {
        assert_eq!(long_average(0, 7, 3_328), 7);
        // α = 0.5: 100 → 55, more than 2 × 10: cut by 5% → 53 (integer).
        assert_eq!(long_average(100, 10, 500_000), 53);
        assert_eq!(long_average(10, 100, 500_000), 55);
        assert_eq!(gradient_ppm(1_500_000, 10, 10), PPM);
        assert_eq!(gradient_ppm(1_500_000, 10, 100), PPM / 2);
        assert_eq!(gradient_ppm(1_500_000, 10, 20), 750_000);
    }

    #[test]
    fn rejects_each_bad_field_by_name() {
        let field = |c| LimiterPolicy::new(c).unwrap_err().field;
        let aimd = LimiterConfig::aimd();
        assert_eq!(field(LimiterConfig { min: 0, ..aimd }), "min");
        assert_eq!(field(LimiterConfig { max: 10, ..aimd }), "max");
        assert_eq!(
            field(LimiterConfig {
                max: MAX_LIMIT + 1,
                ..aimd
            }),
            "max"
        );
        assert_eq!(field(LimiterConfig { initial: 2, ..aimd }), "initial");
        assert_eq!(
            field(LimiterConfig {
                initial: 201,
                ..aimd
            }),
            "initial"
        );
        for backoff in [0.0, 1.0, f64::NAN] {
            assert_eq!(
                field(LimiterConfig {
                    rule: LimitRule::Aimd {
                        backoff,
                        increase: 1
                    },
                    ..aimd
                }),
                "rule.backoff"
            );
        }
        assert_eq!(
            field(LimiterConfig {
                rule: LimitRule::Aimd {
                    backoff: 0.5,
                    increase: 0
                },
                ..aimd
            }),
            "rule.increase"
        );
        let g = |tolerance, smoothing, long_window| LimiterConfig {
            rule: LimitRule::Gradient {
                tolerance,
                smoothing,
                long_window,
                queue: 4,
            },
            ..aimd
        };
        assert_eq!(field(g(0.9, 0.2, 600)), "rule.tolerance");
        assert_eq!(field(g(1.5, 0.0, 600)), "rule.smoothing");
        assert_eq!(field(g(1.5, 0.2, 0)), "rule.long_window");
        LimiterPolicy::new(g(1.0, 1.0, u32::MAX)).unwrap();
        LimiterPolicy::new(LimiterConfig::gradient()).unwrap();
        LimiterPolicy::new(LimiterConfig::bulkhead(MAX_LIMIT)).unwrap();
        assert_eq!(
            LimiterPolicy::new(LimiterConfig::bulkhead(0))
                .unwrap_err()
                .field,
            "min"
        );
    }
}

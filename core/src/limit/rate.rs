//! [`RateLimiter`]: a client-side rate limit, `rate` calls per `period` with bursts of up to `burst`.
//!
//! The generic cell rate algorithm (GCRA; ITU-T I.371, the "virtual scheduling" form; the rule of
//! the `governor` crate and of Redis' `redis-cell`): a token bucket of `burst` tokens refilled at
//! one per `interval = period / rate`, kept as one number, the *theoretical arrival time* `tat`
//! of the next call if calls came at exactly the rate. With `τ = interval × (burst − 1)`:
//!
//! | state | call at `now` | decision |
//! |---|---|---|
//! | `max(tat, now) − now ≤ τ` | | admit; `tat = max(tat, now) + interval` |
//! | otherwise | | refuse, `retry_after = max(tat, now) − τ − now` |
//!
//! So over any span `d`, at most `burst + ⌊d / interval⌋` calls are admitted, and a refused caller
//! is told exactly when the next would be. The existing [token bucket](crate::budget::TokenBucket)
//! is moved by calls and outcomes, not by time: it budgets retries, this limits rate.
//!
//! The interval is `period / rate` rounded down to whole nanoseconds (at most 1 ns a call fast:
//! 3 calls per second admit one call every 333,333,333 ns).
//!
//! ```
//! use reliable_core::limit::{RateConfig, RateLimiter, RatePolicy};
//! use reliable_core::{Duration, Instant};
//!
//! // 10 calls per second, bursts of 5.
//! let mut limiter = RateLimiter::new(RatePolicy::new(RateConfig {
//!     rate: 10,
//!     period: Duration::from_secs(1),
//!     burst: 5,
//! })?);
//! let now = Instant::from_secs(1);
//! let admitted = (0..20).filter(|_| limiter.try_acquire(now).is_ok()).count();
//! assert_eq!(admitted, 5);
//! let refused = limiter.try_acquire(now).unwrap_err();
//! assert_eq!(refused.retry_after, Duration::from_millis(100));
//! assert!(limiter.try_acquire(now + Duration::from_millis(100)).is_ok());
//! # Ok::<(), reliable_core::ConfigError>(())
//! ```

use crate::error::{ConfigError, Problem};
use crate::time::{Duration, Instant};

/// A rate limit. In RON: `(rate: 100, period: "1s", burst: 10)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
pub struct RateConfig {
    /// Calls per `period`, at least 1.
    pub rate: u32,
    /// The period `rate` is counted over, at least `rate` nanoseconds.
    pub period: Duration,
    /// Calls that may go at once after a quiet spell, at least 1.
    pub burst: u32,
}

/// A validated [`RateConfig`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RatePolicy {
    interval: u64,
    tolerance: u64,
}

impl RatePolicy {
    /// Validates `config`. Errors name the field: `rate`, `period`, `burst`.
    pub const fn new(config: RateConfig) -> Result<Self, ConfigError> {
        if config.rate == 0 {
            return Err(ConfigError::new("rate", Problem::Zero));
        }
        if config.burst == 0 {
            return Err(ConfigError::new("burst", Problem::Zero));
        }
        let interval = config.period.as_nanos() / config.rate as u64;
        if interval == 0 {
            return Err(ConfigError::new(
                "period",
                Problem::Inconsistent("shorter than one nanosecond per call"),
            ));
        }
        Ok(RatePolicy {
            interval,
            tolerance: interval.saturating_mul(config.burst as u64 - 1),
        })
    }

    /// Time between calls at the rate.
    pub const fn interval(&self) -> Duration {
        Duration::from_nanos(self.interval)
    }
}

/// A call refused by a [`RateLimiter`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RateLimited {
    /// When a call would next be admitted, from the refused call's `now`.
    pub retry_after: Duration,
}

/// A client-side rate limiter (GCRA). See the [module docs](self). 24 bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RateLimiter {
    policy: RatePolicy,
    /// The theoretical arrival time of the next call, ns.
    tat: u64,
}

impl RateLimiter {
    /// A limiter with its full burst available.
    pub const fn new(policy: RatePolicy) -> Self {
        RateLimiter { policy, tat: 0 }
    }

    /// The policy.
    pub fn policy(&self) -> &RatePolicy {
        &self.policy
    }

    /// Admits a call at `now`, or says how long until one would be.
    #[inline]
    pub fn try_acquire(&mut self, now: Instant) -> Result<(), RateLimited> {
        let now = now.as_nanos();
        let tat = self.tat.max(now);
        let ahead = tat - now;
        if ahead > self.policy.tolerance {
            return Err(RateLimited {
                retry_after: Duration::from_nanos(ahead - self.policy.tolerance),
            });
        }
        self.tat = tat.saturating_add(self.policy.interval);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limiter(rate: u32, period_ms: u64, burst: u32) -> RateLimiter {
        RateLimiter::new(
            RatePolicy::new(RateConfig {
                rate,
                period: Duration::from_millis(period_ms),
                burst,
            })
            .unwrap(),
        )
    }

    #[test]
    fn table_of_calls_at_two_per_second_with_bursts_of_two() {
        let mut l = limiter(2, 1_000, 2);
        // (ms, admitted, or retry_after in ms)
        let steps: [(u64, Result<(), u64>); 8] = [
            (1_000, Ok(())),
            (1_000, Ok(())),
            (1_000, Err(500)),
            (1_400, Err(100)),
            (1_500, Ok(())),
            (1_500, Err(500)),
            (5_000, Ok(())), // a quiet spell refills the burst, no more
            (5_000, Ok(())),
        ];
        for (i, (at, want)) in steps.into_iter().enumerate() {
            let got = l
                .try_acquire(Instant::from_millis(at))
                .map_err(|r| r.retry_after.as_millis());
            assert_eq!(got, want, "step {i}");
        }
        assert_eq!(
            l.try_acquire(Instant::from_millis(5_000)),
            Err(RateLimited {
                retry_after: Duration::from_millis(500)
            })
        );
        // The clock stepping back counts as no time passing.
        assert!(l.try_acquire(Instant::ZERO).is_err());
        // The end of time does not overflow (the schedule saturates there, so it admits again).
        let mut l = limiter(1, 1, 1);
        assert!(l.try_acquire(Instant::MAX).is_ok());
        let _ = l.try_acquire(Instant::MAX);
    }

    #[test]
    fn rejects_each_bad_field_by_name() {
        let base = RateConfig {
            rate: 10,
            period: Duration::from_secs(1),
            burst: 1,
        };
        let field = |c| RatePolicy::new(c).unwrap_err().field;
        assert_eq!(field(RateConfig { rate: 0, ..base }), "rate");
        assert_eq!(field(RateConfig { burst: 0, ..base }), "burst");
        assert_eq!(
            field(RateConfig {
                period: Duration::from_nanos(9),
                ..base
            }),
            "period"
        );
        let p = RatePolicy::new(RateConfig { rate: 3, ..base }).unwrap();
        assert_eq!(p.interval(), Duration::from_nanos(333_333_333));
        RatePolicy::new(RateConfig {
            burst: u32::MAX,
            period: Duration::MAX,
            rate: 1,
        })
        .unwrap();
    }
}

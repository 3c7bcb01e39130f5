//! [`RatioBudget`]: retries as a share of first tries over a sliding window (Finagle's
//! `RetryBudget`, tower's `TpsBudget`).

use super::{Budget, Denied, Grant, micro_in, zero};
use crate::error::{ConfigError, PPM, in_range, tri};
use crate::outcome::{AttemptOutcome, ErrorClass};
use crate::ring::Ring;
use crate::time::{Duration, Instant};

/// A ratio budget.
///
/// In RON: `(ratio: 0.1, min_per_sec: 0, ttl: "10s", slots: 10)`.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
pub struct RatioConfig {
    /// Retries allowed per first try, in [0, 1000] (`0.1` = 10%; Finagle's `percentCanRetry`,
    /// tower's `retry_percent`).
    pub ratio: f64,
    /// Retries per second allowed on top of the ratio (the reserve is `min_per_sec × ttl`). Finagle
    /// and tower default to 10; a storm study usually wants 0. No serde default: say which.
    pub min_per_sec: u32,
    /// How long a deposit or withdrawal counts, in [1 s, 60 s] (Finagle's bounds). Default 10 s.
    #[cfg_attr(feature = "serde", serde(default = "default_ttl"))]
    pub ttl: Duration,
    /// Slots the window is kept in. Default 10 (tower's fixed choice).
    #[cfg_attr(feature = "serde", serde(default = "default_slots"))]
    pub slots: u32,
}

#[cfg(feature = "serde")]
fn default_ttl() -> Duration {
    Duration::from_secs(10)
}
#[cfg(feature = "serde")]
fn default_slots() -> u32 {
    10
}

impl RatioConfig {
    /// Finagle's and tower's default: 20%, 10 retries per second, 10 s, 10 slots.
    pub const fn finagle() -> Self {
        RatioConfig {
            ratio: 0.2,
            min_per_sec: 10,
            ttl: Duration::from_secs(10),
            slots: 10,
        }
    }

    /// A plain `ratio` budget without reserve over 10 s (the storm studies' "10% budget" is
    /// `percent(0.1)`).
    pub const fn percent(ratio: f64) -> Self {
        RatioConfig {
            ratio,
            min_per_sec: 0,
            ttl: Duration::from_secs(10),
            slots: 10,
        }
    }
}

/// A validated [`RatioConfig`]; amounts in millionths of a retry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RatioPolicy {
    deposit: u64,
    reserve: u64,
    width: u64,
    slots: u32,
}

impl RatioPolicy {
    /// Validates `config`. Errors name the field: `ratio`, `ttl`, `slots`.
    pub const fn new(config: RatioConfig) -> Result<Self, ConfigError> {
        let deposit = tri!(micro_in("ratio", config.ratio, 1_000.0));
        tri!(in_range(
            "ttl",
            config.ttl.as_nanos() as f64 / 1e9,
            1.0,
            60.0
        ));
        if config.slots == 0 {
            return Err(zero("slots"));
        }
        // min_per_sec <= 2^32 and ttl <= 60 s: the product is below 2^32 * 6e13, fits in u128
        // and, divided by 1000 (ns -> millionths of a second), below 2^64.
        let reserve = (config.min_per_sec as u128 * config.ttl.as_nanos() as u128 / 1_000) as u64;
        Ok(RatioPolicy {
            deposit,
            reserve,
            width: config.ttl.as_nanos() / config.slots as u64,
            slots: config.slots,
        })
    }

    /// The reserve, in retries.
    pub fn reserve(&self) -> f64 {
        self.reserve as f64 / 1e6
    }
}

/// Retries as a share of first tries over a sliding window (Finagle's
/// `RetryBudget`, tower's `TpsBudget`).
///
/// Each first try deposits `ratio`; each retry withdraws 1; both stay in the window for `ttl`,
/// kept in `slots` fixed slots (the window moves a slot at a time). A retry is allowed while the
/// deposits in the window, plus a reserve of `min_per_sec × ttl` retries, cover the withdrawals in
/// the window plus this one. The reserve lets a client with little traffic retry at all.
///
/// Exact in fixed point: a deposit is `ratio` in millionths, a withdrawal is one million, so a 60%
/// budget allows exactly 60 retries per 100 first tries. (tower's `TpsBudget` withdraws
/// `(1 / 0.6) as isize = 1` per retry against a deposit of 1, so its 60% budget allows 100%:
/// tower issue #857.)
///
/// ```
/// use reliable_core::budget::{Budget, RatioBudget, RatioConfig, RatioPolicy};
/// use reliable_core::outcome::ErrorClass;
/// use reliable_core::{Duration, Instant};
///
/// let policy = RatioPolicy::new(RatioConfig { ratio: 0.6, min_per_sec: 0, ..RatioConfig::finagle() })?;
/// let mut budget: RatioBudget = RatioBudget::new(policy)?;
/// let now = Instant::from_secs(1);
/// for _ in 0..100 {
///     budget.on_first_try(now);
/// }
/// let granted = (0..1_000).filter(|_| budget.try_retry(ErrorClass::Transient, now).is_ok()).count();
/// assert_eq!(granted, 60);
/// // Ten seconds later the deposits (and the withdrawals) have left the window.
/// assert_eq!(budget.balance(now + Duration::from_secs(10)), 0.0);
/// # Ok::<(), reliable_core::ConfigError>(())
/// ```
///
/// `N` is the slot capacity (at least the policy's `slots`). Each slot counts first
/// tries and retries (8 bytes; `RatioBudget<10>` is 152 bytes on 64-bit targets); deposits and
/// withdrawals are those counts times `ratio` and 1.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RatioBudget<const N: usize = 10> {
    policy: RatioPolicy,
    /// `a`: first tries, `b`: retries granted.
    ring: Ring<N>,
}

impl<const N: usize> RatioBudget<N> {
    /// An empty budget (only the reserve available). Fails if `N < slots`.
    pub fn new(policy: RatioPolicy) -> Result<Self, ConfigError> {
        Ok(RatioBudget {
            ring: Ring::new(policy.width, policy.slots, "slots", "ttl")?,
            policy,
        })
    }

    /// The policy.
    pub fn policy(&self) -> &RatioPolicy {
        &self.policy
    }

    /// Retries available as of `now`: reserve + deposits − withdrawals in the window. A retry needs
    /// at least 1. It can be negative: deposits may leave the window before the withdrawals they
    /// paid for.
    pub fn balance(&self, now: Instant) -> f64 {
        self.micro_balance(now) as f64 / 1e6
    }

    /// [`balance`](Self::balance) in millionths of a retry (exact).
    pub fn micro_balance(&self, now: Instant) -> i128 {
        let (deposits, withdrawals) = self.amounts(now);
        i128::from(self.policy.reserve) + deposits as i128 - withdrawals as i128
    }

    /// Deposits and withdrawals in the window, in millionths of a retry.
    fn amounts(&self, now: Instant) -> (u128, u128) {
        let t = self.ring.totals(now);
        (
            u128::from(t.a) * u128::from(self.policy.deposit),
            u128::from(t.b) * u128::from(PPM),
        )
    }
}

impl<const N: usize> Budget for RatioBudget<N> {
    fn on_first_try(&mut self, now: Instant) {
        self.ring.add(now, 1, 0);
    }

    fn try_retry(&mut self, _: ErrorClass, now: Instant) -> Result<Grant, Denied> {
        self.ring.advance(now);
        let (deposits, withdrawals) = self.amounts(now);
        if u128::from(self.policy.reserve) + deposits < withdrawals + u128::from(PPM) {
            return Err(Denied::Ratio);
        }
        self.ring.add(now, 0, 1);
        Ok(Grant::new(0))
    }

    fn on_attempt_end(&mut self, _: AttemptOutcome, _: Option<Grant>, now: Instant) {
        self.ring.advance(now);
    }

    fn on_request_end(&mut self, now: Instant) {
        self.ring.advance(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Problem;
    use crate::outcome::ErrorClass::Transient;

    fn budget(config: RatioConfig) -> RatioBudget {
        RatioBudget::new(RatioPolicy::new(config).unwrap()).unwrap()
    }

    #[test]
    fn sixty_percent_allows_sixty_percent_not_all_tower_857() {
        let mut b = budget(RatioConfig::percent(0.6));
        let now = Instant::from_secs(5);
        let mut granted = 0;
        for i in 1..=100u32 {
            b.on_first_try(now);
            while b.try_retry(Transient, now).is_ok() {
                granted += 1;
            }
            // After i first tries, floor(0.6 i) retries: never more, never fewer.
            assert_eq!(granted, i * 6 / 10, "after {i} first tries");
        }
        assert_eq!(granted, 60);
        assert_eq!(b.micro_balance(now), 0);
    }

    #[test]
    fn table_with_a_reserve_and_a_moving_window() {
        // 50%, 1 retry/s reserve over 2 s (2 retries), 2 slots of 1 s.
        let mut b = budget(RatioConfig {
            ratio: 0.5,
            min_per_sec: 1,
            ttl: Duration::from_secs(2),
            slots: 2,
        });
        let s = Instant::from_millis;
        enum Op {
            First,
            Retry(bool),
        }
        use Op::*;
        // (time in ms, op, balance after, in millionths)
        let steps = [
            (0, Retry(true), 1_000_000),
            (100, Retry(true), 0),
            (200, Retry(false), 0),
            (300, First, 500_000),
            (400, First, 1_000_000),
            (500, Retry(true), 0),
            // 1.5 s: slot 1 opens, slot 0 still in the window.
            (1_500, First, 500_000),
            (1_600, Retry(false), 500_000),
            // 2.0 s: slot 0 (2 deposits, 3 withdrawals) leaves: reserve 2 + 0.5 left.
            (2_000, First, 3_000_000),
            (2_100, Retry(true), 2_000_000),
            // Far later: everything has left; only the reserve.
            (60_000, Retry(true), 1_000_000),
            // A clock that steps back counts as the latest time.
            (10, Retry(true), 0),
            (20, Retry(false), 0),
        ];
        for (i, (at, op, want)) in steps.into_iter().enumerate() {
            match op {
                First => b.on_first_try(s(at)),
                Retry(ok) => assert_eq!(b.try_retry(Transient, s(at)).is_ok(), ok, "step {i}"),
            }
            assert_eq!(b.micro_balance(s(at)), want, "step {i} at {at} ms");
        }
    }

    #[test]
    fn the_reserve_is_min_per_sec_times_ttl() {
        let p = RatioPolicy::new(RatioConfig::finagle()).unwrap();
        assert_eq!(p.reserve(), 100.0);
        let b: RatioBudget = RatioBudget::new(p).unwrap();
        assert_eq!(b.balance(Instant::ZERO), 100.0);
        let odd = RatioPolicy::new(RatioConfig {
            min_per_sec: 3,
            ttl: Duration::from_millis(1_500),
            ..RatioConfig::finagle()
        })
        .unwrap();
        assert_eq!(odd.reserve(), 4.5);
    }

    #[test]
    fn rejects_each_bad_field_by_name() {
        let base = RatioConfig::finagle();
        let err = |c: RatioConfig| RatioPolicy::new(c).unwrap_err();
        assert_eq!(
            err(RatioConfig {
                ratio: -0.1,
                ..base
            })
            .field,
            "ratio"
        );
        assert_eq!(
            err(RatioConfig {
                ratio: 1000.5,
                ..base
            })
            .field,
            "ratio"
        );
        assert_eq!(
            err(RatioConfig {
                ratio: f64::NAN,
                ..base
            })
            .field,
            "ratio"
        );
        let short = err(RatioConfig {
            ttl: Duration::from_millis(999),
            ..base
        });
        assert_eq!(short.field, "ttl");
        assert!(matches!(short.problem, Problem::OutOfRange { .. }));
        assert_eq!(
            err(RatioConfig {
                ttl: Duration::from_secs(61),
                ..base
            })
            .field,
            "ttl"
        );
        assert_eq!(err(RatioConfig { slots: 0, ..base }).field, "slots");
        let e = RatioBudget::<4>::new(RatioPolicy::new(base).unwrap()).unwrap_err();
        assert_eq!(e.field, "slots");
        // Extremes are fine.
        let max = RatioPolicy::new(RatioConfig {
            ratio: 1000.0,
            min_per_sec: u32::MAX,
            ttl: Duration::from_secs(60),
            slots: 10,
        })
        .unwrap();
        let mut b: RatioBudget = RatioBudget::new(max).unwrap();
        b.on_first_try(Instant::MAX);
        assert!(b.try_retry(Transient, Instant::MAX).is_ok());
        let zero = RatioPolicy::new(RatioConfig {
            ratio: 0.0,
            min_per_sec: 0,
            ..base
        })
        .unwrap();
        let mut b: RatioBudget = RatioBudget::new(zero).unwrap();
        b.on_first_try(Instant::ZERO);
        assert_eq!(b.try_retry(Transient, Instant::ZERO), Err(Denied::Ratio));
    }
}

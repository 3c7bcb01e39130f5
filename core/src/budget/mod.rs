//! Retry budgets: bound the retries of all requests together, as a share of real traffic.
//!
//! ## Why a budget and not only a retry limit
//!
//! A retry limit bounds the retries of *one* request. What a struggling downstream feels is the
//! retries of *all* requests, and a limit does nothing about those: with 3 retries per request, a
//! downstream that fails every call receives **up to 4× its normal load** (the first try plus three
//! retries) at exactly the moment it is least able to take it, and two layers that each retry 3
//! times make that 16×. The extra load causes more failures, the failures cause more retries, and
//! the system can stay overloaded after the trigger is gone (a metastable failure).
//!
//! A budget instead lets retries be at most a share of first tries. With a **10% budget** the
//! downstream receives at most **about 1.1× its normal load** however many calls fail, while the
//! rare failures of a healthy downstream, the case retries exist for, are still retried. Google's
//! SRE book ("Handling Overload") recommends a per-client budget of 10%; Finagle's default is 20%.
//! Yandex's outage simulation ("Good Retry, Bad Retry", 2024) measured 3.9–4× amplification for
//! "retry 3 times" during an outage against ≤ 1.15× for a 10% budget or a 10% retry breaker.
//!
//! | policy | load per first try while every call fails |
//! |---|---|
//! | no retries | 1× |
//! | 3 retries per request | up to 4× |
//! | 10% retry budget | about 1.1× |
//!
//! ## The kinds, with their published semantics
//!
//! | kind | from | rule |
//! |---|---|---|
//! | [`TokenBucket`] | gRPC A6; Brooker 2022; Yandex 2024 | tokens move with first tries, successes, failures and retries; a retry needs the tokens above a threshold |
//! | [`RatioBudget`] | Finagle `RetryBudget`, tower `TpsBudget` | each first try deposits `ratio`, each retry withdraws 1, over a sliding `ttl`, plus a reserve of `min_per_sec·ttl` (exact fixed point: a 60% budget allows 60%) |
//! | [`Quota`] | AWS SDK standard retry mode (and its 2026 update) | a retry costs tokens by error class; a success refunds its last retry's cost, or adds 1 |
//! | [`ConcurrencyBudget`] | Envoy `retry_budget` | retries in flight ≤ `ratio` × requests in flight, at least `min_concurrency` |
//! | [`RetryBreaker`] | Brooker 2022, Yandex 2024 | no retries while failures ÷ calls (cumulative or over a time window) is over a threshold |
//! | [`Unlimited`] | | always yes: the baseline |
//!
//! Each kind has a serde config (`…Config`), a validated fixed-point policy (`…Policy`) and the
//! state (which owns a copy of its small policy). [`BudgetConfig`] / [`BudgetPolicy`] /
//! [`AnyBudget`] choose the kind at run time, for scenario files and settings pages.
//!
//! ## How a budget is driven
//!
//! A budget is shared by every request of a client (or of a process), so it is passed to the
//! [retry policy](crate::retry) by `&mut`, which makes these calls in this order for each request:
//!
//! 1. [`on_first_try`](Budget::on_first_try) when the first attempt is sent;
//! 2. [`on_attempt_end`](Budget::on_attempt_end) when any attempt ends, with the [`Grant`] that
//!    admitted it if it was a retry;
//! 3. [`try_retry`](Budget::try_retry) after a failed attempt, once the policy has decided it would
//!    retry (attempts, deadline): a [`Grant`] on yes (the cost is withdrawn), [`Denied`] on no;
//! 4. [`on_request_end`](Budget::on_request_end) once, when the request is over.
//!
//! A grant that will never be used (a retry scheduled, then cancelled) is handed back through
//! `on_attempt_end` with [`AttemptOutcome::Cancelled`], so a concurrency budget frees its slot.
//!
//! ```
//! use reliable_core::budget::{AnyBudget, Budget, BudgetConfig, BudgetPolicy, RatioConfig};
//! use reliable_core::outcome::{AttemptOutcome, ErrorClass};
//! use reliable_core::{Duration, Instant};
//!
//! // 10% of first tries may be retried, no reserve, over the last 10 s.
//! let policy = BudgetPolicy::new(BudgetConfig::Ratio(RatioConfig {
//!     ratio: 0.1,
//!     min_per_sec: 0,
//!     ttl: Duration::from_secs(10),
//!     slots: 10,
//! }))?;
//! let mut budget: AnyBudget = AnyBudget::new(&policy)?;
//! let now = Instant::from_secs(1);
//! let (mut first_tries, mut retries) = (0, 0);
//! // A full outage: every attempt fails, every request wants to retry.
//! for _ in 0..1_000 {
//!     budget.on_first_try(now);
//!     first_tries += 1;
//!     budget.on_attempt_end(AttemptOutcome::Failed(ErrorClass::Transient), None, now);
//!     if let Ok(grant) = budget.try_retry(ErrorClass::Transient, now) {
//!         retries += 1;
//!         budget.on_attempt_end(AttemptOutcome::Failed(ErrorClass::Transient), Some(grant), now);
//!     }
//!     budget.on_request_end(now);
//! }
//! assert_eq!(retries, 100); // load = 1.1 × first tries
//! # Ok::<(), reliable_core::ConfigError>(())
//! ```

mod concurrency;
mod fleet;
mod quota;
mod ratio;
mod retry_breaker;
mod token_bucket;

pub use concurrency::{ConcurrencyBudget, ConcurrencyConfig, ConcurrencyPolicy};
pub use fleet::FLEET_MAX_SLOTS;
pub use quota::{Quota, QuotaConfig, QuotaPolicy};
pub use ratio::{RatioBudget, RatioConfig, RatioPolicy};
pub use retry_breaker::{Calls, RateWindow, RetryBreaker, RetryBreakerConfig, RetryBreakerPolicy};
pub use token_bucket::{TokenBucket, TokenBucketConfig, TokenBucketPolicy};

use crate::error::{ConfigError, PPM, Problem, in_range, tri};
use crate::outcome::{AttemptOutcome, ErrorClass};
use crate::time::Instant;

/// Permission for one retry, from [`Budget::try_retry`]. Hand it back with the retry's outcome to
/// [`Budget::on_attempt_end`] (a quota refunds from it, a concurrency budget frees its slot).
///
/// Not `Clone`: each grant is handed back once.
#[must_use = "a grant must be handed back to `on_attempt_end`, or a concurrency budget keeps its slot"]
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct Grant {
    cost: u32,
}

impl Grant {
    /// A grant that cost `cost` in the budget's own units (quota tokens; 0 for kinds that refund
    /// nothing). For implementers of [`Budget`].
    pub const fn new(cost: u32) -> Self {
        Grant { cost }
    }

    /// What the retry cost, in the budget's units; a [`Quota`] refunds it on success.
    pub const fn cost(&self) -> u32 {
        self.cost
    }
}

/// Why a budget refused a retry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Denied {
    /// [`TokenBucket`]: the tokens are not above the threshold.
    Tokens,
    /// [`RatioBudget`]: the window's deposits and the reserve are spent.
    Ratio,
    /// [`Quota`]: fewer tokens left than this retry costs.
    Quota,
    /// [`ConcurrencyBudget`]: as many retries in flight as allowed.
    Concurrency,
    /// [`RetryBreaker`]: the failure rate is over the threshold.
    FailureRate,
}

impl Denied {
    /// A short lower-case name: `tokens`, `ratio`, `quota`, `concurrency`, `failure-rate`.
    pub const fn name(self) -> &'static str {
        match self {
            Denied::Tokens => "tokens",
            Denied::Ratio => "ratio",
            Denied::Quota => "quota",
            Denied::Concurrency => "concurrency",
            Denied::FailureRate => "failure-rate",
        }
    }
}

impl core::fmt::Display for Denied {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

/// A retry budget. See the [module docs](self) for the order of calls. Implementations never panic
/// and never allocate; `now` may step backwards (it then counts as the latest time seen).
pub trait Budget {
    /// A logical request sends its first attempt.
    fn on_first_try(&mut self, now: Instant);
    /// May a retry be scheduled after a failure of class `class`? On `Ok` the retry's cost has been
    /// withdrawn.
    fn try_retry(&mut self, class: ErrorClass, now: Instant) -> Result<Grant, Denied>;
    /// An attempt ended; `grant` is the grant that admitted it, if it was a retry.
    fn on_attempt_end(&mut self, outcome: AttemptOutcome, grant: Option<Grant>, now: Instant);
    /// A logical request is over (success, given up, or abandoned). Once per request, after its last
    /// [`on_attempt_end`](Budget::on_attempt_end).
    fn on_request_end(&mut self, now: Instant);
}

impl<B: Budget + ?Sized> Budget for &mut B {
    fn on_first_try(&mut self, now: Instant) {
        (**self).on_first_try(now);
    }
    fn try_retry(&mut self, class: ErrorClass, now: Instant) -> Result<Grant, Denied> {
        (**self).try_retry(class, now)
    }
    fn on_attempt_end(&mut self, outcome: AttemptOutcome, grant: Option<Grant>, now: Instant) {
        (**self).on_attempt_end(outcome, grant, now);
    }
    fn on_request_end(&mut self, now: Instant) {
        (**self).on_request_end(now);
    }
}

/// A comparison against a threshold: strictly above it, or at least it. Published rules differ
/// (Brooker: a retry needs *more than* 1 token, retries stop once the failure rate is *over* 10%;
/// Yandex: a retry needs *at least* its cost, retries stop once the rate *reaches* 10%), so the
/// configs say which.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Threshold {
    /// `value > threshold`.
    Above(f64),
    /// `value >= threshold`.
    AtLeast(f64),
}

impl Threshold {
    /// The threshold's value.
    pub const fn value(self) -> f64 {
        match self {
            Threshold::Above(v) | Threshold::AtLeast(v) => v,
        }
    }

    /// Validates the value (finite, in `[0, max]`) and converts it to parts per million.
    pub(crate) const fn to_ppm(
        self,
        field: &'static str,
        max: f64,
    ) -> Result<FixedThreshold, ConfigError> {
        let v = tri!(in_range(field, self.value(), 0.0, max));
        Ok(FixedThreshold {
            ppm: micro(v),
            inclusive: matches!(self, Threshold::AtLeast(_)),
        })
    }
}

/// A [`Threshold`] in parts per million.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FixedThreshold {
    pub(crate) ppm: u64,
    pub(crate) inclusive: bool,
}

impl FixedThreshold {
    /// Whether `value` (in the same ppm units) passes the threshold.
    #[inline]
    pub(crate) const fn passed_by(self, value: u128) -> bool {
        if self.inclusive {
            value >= self.ppm as u128
        } else {
            value > self.ppm as u128
        }
    }
}

/// A non-negative real in parts per million (rounded); callers have bounded it.
pub(crate) const fn micro(v: f64) -> u64 {
    (v * PPM as f64 + 0.5) as u64
}

/// Validates a non-negative real in `[0, max]` and converts it to parts per million.
pub(crate) const fn micro_in(field: &'static str, v: f64, max: f64) -> Result<u64, ConfigError> {
    Ok(micro(tri!(in_range(field, v, 0.0, max))))
}

/// No limit: every retry is granted. The baseline that storm studies compare against.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Unlimited;

impl Budget for Unlimited {
    fn on_first_try(&mut self, _: Instant) {}
    fn try_retry(&mut self, _: ErrorClass, _: Instant) -> Result<Grant, Denied> {
        Ok(Grant::new(0))
    }
    fn on_attempt_end(&mut self, _: AttemptOutcome, _: Option<Grant>, _: Instant) {}
    fn on_request_end(&mut self, _: Instant) {}
}

/// Any kind of budget, chosen by configuration. In RON:
///
/// ```text
/// budget: Unlimited
/// budget: TokenBucket((max_tokens: 5.0, first_try_credit: 0.1, retry_cost: 1.0, retry_when: Above(1.0)))
/// budget: Ratio((ratio: 0.1, min_per_sec: 0, ttl: "10s"))
/// budget: Quota((retry_cost: 14, timeout_cost: 14))
/// budget: Concurrency((ratio: 0.2, min_concurrency: 3))
/// budget: RetryBreaker((stop_when: AtLeast(0.1), calls: Attempts, window: Time(span: "200ms", buckets: 10)))
/// ```
///
/// With RON's `unwrap_variant_newtypes` extension (`#![enable(unwrap_variant_newtypes)]` at the top
/// of a file, or enabled by the loader) the inner parentheses go: `Ratio(ratio: 0.1, min_per_sec: 0)`.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum BudgetConfig {
    /// No limit.
    Unlimited,
    /// A token bucket.
    TokenBucket(TokenBucketConfig),
    /// A ratio over a sliding window.
    Ratio(RatioConfig),
    /// A quota with costs by error class.
    Quota(QuotaConfig),
    /// A share of requests in flight.
    Concurrency(ConcurrencyConfig),
    /// A retry breaker on the failure rate.
    RetryBreaker(RetryBreakerConfig),
}

/// A validated [`BudgetConfig`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum BudgetPolicy {
    /// No limit.
    Unlimited,
    /// A token bucket.
    TokenBucket(TokenBucketPolicy),
    /// A ratio over a sliding window.
    Ratio(RatioPolicy),
    /// A quota with costs by error class.
    Quota(QuotaPolicy),
    /// A share of requests in flight.
    Concurrency(ConcurrencyPolicy),
    /// A retry breaker on the failure rate.
    RetryBreaker(RetryBreakerPolicy),
}

impl BudgetPolicy {
    /// Validates `config`; errors name the field within the kind's config (e.g. `"ttl"`).
    ///
    /// A `const fn`: built in a `const` or `static` item, an invalid config is a compile error and
    /// no validation code is left in the program.
    pub const fn new(config: BudgetConfig) -> Result<Self, ConfigError> {
        Ok(match config {
            BudgetConfig::Unlimited => BudgetPolicy::Unlimited,
            BudgetConfig::TokenBucket(c) => {
                BudgetPolicy::TokenBucket(tri!(TokenBucketPolicy::new(c)))
            }
            BudgetConfig::Ratio(c) => BudgetPolicy::Ratio(tri!(RatioPolicy::new(c))),
            BudgetConfig::Quota(c) => BudgetPolicy::Quota(tri!(QuotaPolicy::new(c))),
            BudgetConfig::Concurrency(c) => {
                BudgetPolicy::Concurrency(tri!(ConcurrencyPolicy::new(c)))
            }
            BudgetConfig::RetryBreaker(c) => {
                BudgetPolicy::RetryBreaker(tri!(RetryBreakerPolicy::new(c)))
            }
        })
    }
}

/// Any kind of budget, chosen at run time. `N` is the slot capacity of the windowed kinds (ratio,
/// time-windowed retry breaker); a policy asking for more slots is refused at construction.
#[derive(Clone, Debug, PartialEq)]
pub enum AnyBudget<const N: usize = 10> {
    /// No limit.
    Unlimited(Unlimited),
    /// A token bucket.
    TokenBucket(TokenBucket),
    /// A ratio over a sliding window.
    Ratio(RatioBudget<N>),
    /// A quota with costs by error class.
    Quota(Quota),
    /// A share of requests in flight.
    Concurrency(ConcurrencyBudget),
    /// A retry breaker on the failure rate.
    RetryBreaker(RetryBreaker<N>),
}

impl<const N: usize> AnyBudget<N> {
    /// A fresh budget for `policy`. Fails only if `N` slots cannot hold the policy's window.
    pub fn new(policy: &BudgetPolicy) -> Result<Self, ConfigError> {
        Ok(match *policy {
            BudgetPolicy::Unlimited => AnyBudget::Unlimited(Unlimited),
            BudgetPolicy::TokenBucket(p) => AnyBudget::TokenBucket(TokenBucket::new(p)),
            BudgetPolicy::Ratio(p) => AnyBudget::Ratio(RatioBudget::new(p)?),
            BudgetPolicy::Quota(p) => AnyBudget::Quota(Quota::new(p)),
            BudgetPolicy::Concurrency(p) => AnyBudget::Concurrency(ConcurrencyBudget::new(p)),
            BudgetPolicy::RetryBreaker(p) => AnyBudget::RetryBreaker(RetryBreaker::new(p)?),
        })
    }

    /// Validates `config` and builds a fresh budget for it.
    pub fn from_config(config: BudgetConfig) -> Result<Self, ConfigError> {
        Self::new(&BudgetPolicy::new(config)?)
    }

    fn inner(&mut self) -> &mut dyn Budget {
        match self {
            AnyBudget::Unlimited(b) => b,
            AnyBudget::TokenBucket(b) => b,
            AnyBudget::Ratio(b) => b,
            AnyBudget::Quota(b) => b,
            AnyBudget::Concurrency(b) => b,
            AnyBudget::RetryBreaker(b) => b,
        }
    }
}

impl<const N: usize> Budget for AnyBudget<N> {
    fn on_first_try(&mut self, now: Instant) {
        self.inner().on_first_try(now);
    }
    fn try_retry(&mut self, class: ErrorClass, now: Instant) -> Result<Grant, Denied> {
        self.inner().try_retry(class, now)
    }
    fn on_attempt_end(&mut self, outcome: AttemptOutcome, grant: Option<Grant>, now: Instant) {
        self.inner().on_attempt_end(outcome, grant, now);
    }
    fn on_request_end(&mut self, now: Instant) {
        self.inner().on_request_end(now);
    }
}

pub(crate) const fn zero(field: &'static str) -> ConfigError {
    ConfigError::new(field, Problem::Zero)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_compare_as_named() {
        let above = Threshold::Above(1.0).to_ppm("t", 10.0).unwrap();
        let at_least = Threshold::AtLeast(1.0).to_ppm("t", 10.0).unwrap();
        assert!(!above.passed_by(1_000_000) && above.passed_by(1_000_001));
        assert!(at_least.passed_by(1_000_000) && !at_least.passed_by(999_999));
        assert_eq!(
            Threshold::Above(11.0).to_ppm("t", 10.0).unwrap_err().field,
            "t"
        );
        assert!(Threshold::AtLeast(f64::NAN).to_ppm("t", 10.0).is_err());
        assert_eq!(Threshold::AtLeast(2.5).value(), 2.5);
    }

    #[test]
    fn any_budget_delegates_to_its_kind() {
        let now = Instant::ZERO;
        let mut unlimited: AnyBudget = AnyBudget::from_config(BudgetConfig::Unlimited).unwrap();
        for _ in 0..1_000 {
            let g = unlimited.try_retry(ErrorClass::Transient, now).unwrap();
            unlimited.on_attempt_end(AttemptOutcome::Success, Some(g), now);
        }
        let mut quota: AnyBudget =
            AnyBudget::from_config(BudgetConfig::Quota(QuotaConfig::aws_standard())).unwrap();
        let g = quota.try_retry(ErrorClass::Timeout, now).unwrap();
        assert_eq!(g.cost(), 10);
        let AnyBudget::Quota(q) = &quota else {
            panic!("kind")
        };
        assert_eq!(q.available(), 490);
        // Through `&mut B` and `&mut dyn Budget` too.
        fn retry_once(mut b: impl Budget) -> bool {
            b.try_retry(ErrorClass::Transient, Instant::ZERO).is_ok()
        }
        assert!(retry_once(&mut quota));
        let dynamic: &mut dyn Budget = &mut quota;
        assert!(retry_once(dynamic));
        let AnyBudget::Quota(q) = &quota else {
            panic!("kind")
        };
        assert_eq!(q.available(), 480);
        assert_eq!(Denied::FailureRate.to_string(), "failure-rate");
    }

    #[test]
    fn a_small_any_budget_refuses_a_large_window() {
        let config = BudgetConfig::Ratio(RatioConfig {
            slots: 20,
            ..RatioConfig::finagle()
        });
        let err = AnyBudget::<10>::from_config(config).unwrap_err();
        assert_eq!(err.field, "slots");
        assert!(matches!(
            err.problem,
            Problem::ExceedsCapacity {
                requested: 20,
                capacity: 10
            }
        ));
        assert!(AnyBudget::<20>::from_config(config).is_ok());
    }

    fn extreme_configs() -> [BudgetConfig; 8] {
        use crate::time::Duration;
        [
            BudgetConfig::Unlimited,
            BudgetConfig::TokenBucket(TokenBucketConfig {
                max_tokens: 1e9,
                initial_tokens: Some(1e9),
                first_try_credit: 1e9,
                success_credit: 1e9,
                retried_success_credit: Some(0.0),
                failure_cost: 1e9,
                retry_cost: 1e9,
                retry_when: Threshold::AtLeast(0.0),
            }),
            BudgetConfig::TokenBucket(TokenBucketConfig::grpc(1e-5, 0.0)),
            BudgetConfig::Ratio(RatioConfig {
                ratio: 1_000.0,
                min_per_sec: u32::MAX,
                ttl: Duration::from_secs(60),
                slots: 10,
            }),
            BudgetConfig::Quota(QuotaConfig {
                capacity: u32::MAX,
                initial: Some(0),
                retry_cost: u32::MAX,
                timeout_cost: 0,
                throttle_cost: 1,
                success_increment: u32::MAX,
            }),
            BudgetConfig::Concurrency(ConcurrencyConfig {
                ratio: 1.0,
                min_concurrency: u32::MAX,
            }),
            BudgetConfig::RetryBreaker(RetryBreakerConfig {
                stop_when: Threshold::Above(1_000.0),
                calls: Calls::Attempts,
                window: RateWindow::Time {
                    span: Duration::MAX,
                    buckets: 10,
                },
                minimum_calls: u32::MAX,
            }),
            BudgetConfig::RetryBreaker(RetryBreakerConfig {
                window: RateWindow::Time {
                    span: Duration::from_nanos(10),
                    buckets: 10,
                },
                ..RetryBreakerConfig::yandex_2024()
            }),
        ]
    }

    proptest::proptest! {
        #[test]
        fn no_panic_on_extreme_inputs(
            kind in 0..8usize,
            ops in proptest::collection::vec(
                (0..4u8, proptest::prop_oneof![
                    proptest::strategy::Just(0u64),
                    proptest::strategy::Just(u64::MAX),
                    proptest::strategy::Just(u64::MAX - 1),
                    proptest::prelude::any::<u64>(),
                ], 0..6u8),
                1..200,
            ),
        ) {
            let mut budget: AnyBudget = AnyBudget::from_config(extreme_configs()[kind]).unwrap();
            let mut grants = std::vec::Vec::new();
            for (op, at, class) in ops {
                let now = Instant::from_nanos(at);
                let class = match class {
                    0 => ErrorClass::Transient,
                    1 => ErrorClass::Timeout,
                    2 => ErrorClass::Throttled { retry_after: Some(crate::time::Duration::MAX) },
                    3 => ErrorClass::Fatal,
                    _ => ErrorClass::DontRetry,
                };
                match op {
                    0 => budget.on_first_try(now),
                    1 => {
                        if let Ok(g) = budget.try_retry(class, now) {
                            grants.push(g);
                        }
                    }
                    2 => budget.on_attempt_end(AttemptOutcome::Failed(class), grants.pop(), now),
                    _ => {
                        budget.on_attempt_end(AttemptOutcome::Success, grants.pop(), now);
                        budget.on_request_end(now);
                    }
                }
            }
        }
    }
}

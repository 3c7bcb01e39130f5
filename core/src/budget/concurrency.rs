//! [`ConcurrencyBudget`]: retries in flight as a share of requests in flight (Envoy's
//! `retry_budget`).

use super::{Budget, Denied, Grant};
use crate::error::{ConfigError, PPM, Problem, fraction_ppm, tri};
use crate::outcome::{AttemptOutcome, ErrorClass};
use crate::time::Instant;

/// A concurrency budget. Defaults to Envoy's: in RON `()` is `(ratio: 0.2, min_concurrency: 3)`.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields, default))]
pub struct ConcurrencyConfig {
    /// Retries in flight allowed per request in flight, in [0, 1] (Envoy's `budget_percent` / 100).
    /// Default 0.2.
    pub ratio: f64,
    /// Retries in flight always allowed (Envoy's `min_retry_concurrency`). Default 3.
    pub min_concurrency: u32,
}

impl ConcurrencyConfig {
    /// Envoy's defaults: 20%, at least 3.
    pub const fn envoy() -> Self {
        ConcurrencyConfig {
            ratio: 0.2,
            min_concurrency: 3,
        }
    }
}

impl Default for ConcurrencyConfig {
    /// [`ConcurrencyConfig::envoy`].
    fn default() -> Self {
        ConcurrencyConfig::envoy()
    }
}

/// A validated [`ConcurrencyConfig`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConcurrencyPolicy {
    ratio_ppm: u32,
    min: u32,
}

impl ConcurrencyPolicy {
    /// Validates `config`. Errors name the field: `ratio`, or `min_concurrency` when both are zero
    /// (no retry could ever go).
    pub const fn new(config: ConcurrencyConfig) -> Result<Self, ConfigError> {
        let ratio_ppm = tri!(fraction_ppm("ratio", config.ratio, true, true));
        if ratio_ppm == 0 && config.min_concurrency == 0 {
            return Err(ConfigError::new(
                "min_concurrency",
                Problem::Inconsistent(
                    "ratio and min_concurrency are both 0: no retry could ever go",
                ),
            ));
        }
        Ok(ConcurrencyPolicy {
            ratio_ppm,
            min: config.min_concurrency,
        })
    }

    /// Retries allowed in flight with `requests` requests in flight.
    pub fn limit(&self, requests: u32) -> u32 {
        let share = (u64::from(self.ratio_ppm) * u64::from(requests) / u64::from(PPM)) as u32;
        share.max(self.min)
    }
}

/// Retries in flight as a share of requests in flight (Envoy's
/// `retry_budget`).
///
/// A retry is granted while the retries in flight are fewer than
/// `max(min_concurrency, ⌊ratio × requests in flight⌋)`. A retry is in flight from its grant (so the
/// backoff wait counts, as in Envoy) until its attempt ends; a request is in flight from its first
/// try until it is over. Unlike the other kinds this bounds retries *now*, not over time: it reacts
/// at once when requests pile up, and forgets at once when they drain.
///
/// Envoy counts active and pending upstream requests; here "requests" are the logical requests
/// (first try to final answer), which is what a client library sees.
///
/// ```
/// use reliable_core::budget::{Budget, ConcurrencyBudget, ConcurrencyConfig, ConcurrencyPolicy};
/// use reliable_core::outcome::ErrorClass;
/// use reliable_core::Instant;
///
/// // Envoy's defaults: 20% of requests in flight, at least 3.
/// let mut budget = ConcurrencyBudget::new(ConcurrencyPolicy::new(ConcurrencyConfig::envoy())?);
/// let now = Instant::ZERO;
/// for _ in 0..20 {
///     budget.on_first_try(now);
/// }
/// let grants: Vec<_> = (0..10).filter_map(|_| budget.try_retry(ErrorClass::Transient, now).ok()).collect();
/// assert_eq!(grants.len(), 4); // 20% of 20
/// # Ok::<(), reliable_core::ConfigError>(())
/// ```
///
/// 16 bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConcurrencyBudget {
    policy: ConcurrencyPolicy,
    requests: u32,
    retries: u32,
}

impl ConcurrencyBudget {
    /// Nothing in flight.
    pub fn new(policy: ConcurrencyPolicy) -> Self {
        ConcurrencyBudget {
            policy,
            requests: 0,
            retries: 0,
        }
    }

    /// The policy.
    pub fn policy(&self) -> &ConcurrencyPolicy {
        &self.policy
    }

    /// Logical requests in flight.
    pub fn requests_in_flight(&self) -> u32 {
        self.requests
    }

    /// Retries in flight (granted and not yet ended).
    pub fn retries_in_flight(&self) -> u32 {
        self.retries
    }
}

impl Budget for ConcurrencyBudget {
    fn on_first_try(&mut self, _: Instant) {
        self.requests = self.requests.saturating_add(1);
    }

    fn try_retry(&mut self, _: ErrorClass, _: Instant) -> Result<Grant, Denied> {
        if self.retries >= self.policy.limit(self.requests) {
            return Err(Denied::Concurrency);
        }
        self.retries += 1;
        Ok(Grant::new(0))
    }

    fn on_attempt_end(&mut self, _: AttemptOutcome, grant: Option<Grant>, _: Instant) {
        if grant.is_some() {
            self.retries = self.retries.saturating_sub(1);
        }
    }

    fn on_request_end(&mut self, _: Instant) {
        self.requests = self.requests.saturating_sub(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::ErrorClass::Transient;

    #[test]
    fn table_of_requests_and_retries_in_flight() {
        let mut b =
            ConcurrencyBudget::new(ConcurrencyPolicy::new(ConcurrencyConfig::envoy()).unwrap());
        let t = Instant::ZERO;
        let mut held = Vec::new();
        // (requests to start, retries to ask for, granted, in flight after: requests, retries)
        let steps: [(u32, u32, u32, u32, u32); 5] = [
            (1, 5, 3, 1, 3),   // the minimum: 3
            (14, 5, 0, 15, 3), // 20% of 15 = 3
            (5, 5, 1, 20, 4),  // 20% of 20 = 4
            (10, 5, 2, 30, 6), // 20% of 30 = 6
            (0, 0, 0, 30, 6),
        ];
        for (i, (starts, asks, granted, requests, retries)) in steps.into_iter().enumerate() {
            for _ in 0..starts {
                b.on_first_try(t);
            }
            let mut got = 0;
            for _ in 0..asks {
                if let Ok(g) = b.try_retry(Transient, t) {
                    held.push(g);
                    got += 1;
                }
            }
            assert_eq!(got, granted, "step {i}");
            assert_eq!(
                (b.requests_in_flight(), b.retries_in_flight()),
                (requests, retries),
                "step {i}"
            );
        }
        // Retries end: slots free up. Requests end: the limit falls back.
        for g in held.drain(..) {
            b.on_attempt_end(AttemptOutcome::Failed(Transient), Some(g), t);
        }
        assert_eq!(b.retries_in_flight(), 0);
        // First tries end without a grant: nothing changes.
        b.on_attempt_end(AttemptOutcome::Success, None, t);
        assert_eq!(b.retries_in_flight(), 0);
        for _ in 0..30 {
            b.on_request_end(t);
        }
        assert_eq!(b.requests_in_flight(), 0);
        b.on_request_end(t); // one too many: saturates, no panic
        assert_eq!(b.requests_in_flight(), 0);
        let grants: Vec<_> = (0..5)
            .filter_map(|_| b.try_retry(Transient, t).ok())
            .collect();
        assert_eq!(grants.len(), 3);
    }

    #[test]
    fn rejects_each_bad_field_by_name() {
        let field = |c| ConcurrencyPolicy::new(c).unwrap_err().field;
        assert_eq!(
            field(ConcurrencyConfig {
                ratio: 1.5,
                min_concurrency: 3
            }),
            "ratio"
        );
        assert_eq!(
            field(ConcurrencyConfig {
                ratio: -0.5,
                min_concurrency: 3
            }),
            "ratio"
        );
        assert_eq!(
            field(ConcurrencyConfig {
                ratio: 0.0,
                min_concurrency: 0
            }),
            "min_concurrency"
        );
        let p = ConcurrencyPolicy::new(ConcurrencyConfig {
            ratio: 1.0,
            min_concurrency: 0,
        })
        .unwrap();
        assert_eq!(p.limit(u32::MAX), u32::MAX);
        assert_eq!(p.limit(0), 0);
        assert_eq!(ConcurrencyConfig::default(), ConcurrencyConfig::envoy());
    }
}

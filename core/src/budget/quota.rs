//! [`Quota`]: the AWS SDKs' retry quota. A retry costs tokens according to its error class; a
//! success gives back the cost of the request's last retry, or a small increment if the request
//! needed no retry.

use super::{Budget, Denied, Grant, zero};
use crate::error::{ConfigError, Problem};
use crate::outcome::{AttemptOutcome, ErrorClass};
use crate::time::Instant;

/// A retry quota. Every field defaults to AWS standard mode, so `()` in RON is standard mode and
/// `(retry_cost: 14, timeout_cost: 14)` is the 2026 update.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields, default))]
pub struct QuotaConfig {
    /// Most tokens; not zero. Default 500.
    pub capacity: u32,
    /// Tokens at the start. Default (`None`): the capacity.
    pub initial: Option<u32>,
    /// Cost of retrying a transient error (and of any class without its own cost). Default 5.
    pub retry_cost: u32,
    /// Cost of retrying a timeout. Default 10.
    pub timeout_cost: u32,
    /// Cost of retrying a throttling error. Default 5.
    pub throttle_cost: u32,
    /// Added when a request succeeds on its first try. Default 1.
    pub success_increment: u32,
}

impl QuotaConfig {
    /// AWS SDK standard retry mode: capacity 500, retry cost 5, timeout cost 10, throttling cost 5
    /// (no special case), +1 on a success without retry, the last retry's cost back on a success
    /// after retries.
    pub const fn aws_standard() -> Self {
        QuotaConfig {
            capacity: 500,
            initial: None,
            retry_cost: 5,
            timeout_cost: 10,
            throttle_cost: 5,
            success_increment: 1,
        }
    }

    /// AWS SDK standard retry mode with the 2026 defaults (`AWS_NEW_RETRIES_2026`): transient and
    /// timeout retries cost 14, throttling retries 5; the rest as in standard mode.
    pub const fn aws_2026() -> Self {
        QuotaConfig {
            retry_cost: 14,
            timeout_cost: 14,
            throttle_cost: 5,
            ..QuotaConfig::aws_standard()
        }
    }
}

impl Default for QuotaConfig {
    /// [`QuotaConfig::aws_standard`].
    fn default() -> Self {
        QuotaConfig::aws_standard()
    }
}

/// A validated [`QuotaConfig`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QuotaPolicy {
    config: QuotaConfig,
}

impl QuotaPolicy {
    /// Validates `config`. Errors name the field: `capacity`, `initial`, or a cost larger than the
    /// capacity (that class could never be retried).
    pub const fn new(config: QuotaConfig) -> Result<Self, ConfigError> {
        if config.capacity == 0 {
            return Err(zero("capacity"));
        }
        if let Some(initial) = config.initial
            && initial > config.capacity
        {
            return Err(ConfigError::new(
                "initial",
                Problem::Inconsistent("more than the capacity"),
            ));
        }
        let mut costs: &[(&'static str, u32)] = &[
            ("retry_cost", config.retry_cost),
            ("timeout_cost", config.timeout_cost),
            ("throttle_cost", config.throttle_cost),
        ];
        // A `for` loop is not available in a `const fn`.
        while let [(field, cost), rest @ ..] = costs {
            if *cost > config.capacity {
                return Err(ConfigError::new(
                    field,
                    Problem::Inconsistent("more than the capacity: such retries could never go"),
                ));
            }
            costs = rest;
        }
        Ok(QuotaPolicy { config })
    }

    /// The config.
    pub fn config(&self) -> &QuotaConfig {
        &self.config
    }

    /// What retrying a failure of `class` costs.
    pub fn cost(&self, class: ErrorClass) -> u32 {
        match class {
            ErrorClass::Timeout => self.config.timeout_cost,
            ErrorClass::Throttled { .. } => self.config.throttle_cost,
            _ => self.config.retry_cost,
        }
    }
}

/// The AWS SDKs' retry quota. A retry costs tokens according to its error class; a
/// success gives back the cost of the request's last retry, or a small increment if the request
/// needed no retry.
///
/// | | standard mode ([`aws_standard`](QuotaConfig::aws_standard)) | 2026 update ([`aws_2026`](QuotaConfig::aws_2026)) |
/// |---|---|---|
/// | capacity (starts full) | 500 | 500 |
/// | transient error | 5 | 14 |
/// | timeout | 10 | 14 |
/// | throttling error | 5 | 5 |
/// | success without retry | +1 | +1 |
/// | success after retries | + the last retry's cost | + the last retry's cost |
///
/// A retry is granted when its cost is at most the tokens left. Tokens never exceed the capacity.
///
/// ```
/// use reliable_core::budget::{Budget, Quota, QuotaConfig, QuotaPolicy};
/// use reliable_core::outcome::{AttemptOutcome, ErrorClass};
/// use reliable_core::Instant;
///
/// let mut quota = Quota::new(QuotaPolicy::new(QuotaConfig::aws_2026())?);
/// let now = Instant::ZERO;
/// quota.on_first_try(now);
/// quota.on_attempt_end(AttemptOutcome::Failed(ErrorClass::Transient), None, now);
/// let grant = quota.try_retry(ErrorClass::Transient, now).unwrap();
/// assert_eq!(quota.available(), 486);
/// quota.on_attempt_end(AttemptOutcome::Success, Some(grant), now);
/// assert_eq!(quota.available(), 500); // refunded
/// # Ok::<(), reliable_core::ConfigError>(())
/// ```
///
/// 32 bytes on 64-bit targets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Quota {
    policy: QuotaPolicy,
    available: u32,
}

impl Quota {
    /// A quota holding the policy's initial tokens.
    pub fn new(policy: QuotaPolicy) -> Self {
        Quota {
            available: policy.config.initial.unwrap_or(policy.config.capacity),
            policy,
        }
    }

    /// The policy.
    pub fn policy(&self) -> &QuotaPolicy {
        &self.policy
    }

    /// Tokens left.
    pub fn available(&self) -> u32 {
        self.available
    }
}

impl Budget for Quota {
    fn on_first_try(&mut self, _: Instant) {}

    fn try_retry(&mut self, class: ErrorClass, _: Instant) -> Result<Grant, Denied> {
        let cost = self.policy.cost(class);
        if cost > self.available {
            return Err(Denied::Quota);
        }
        self.available -= cost;
        Ok(Grant::new(cost))
    }

    fn on_attempt_end(&mut self, outcome: AttemptOutcome, grant: Option<Grant>, _: Instant) {
        if outcome == AttemptOutcome::Success {
            let back = grant.map_or(self.policy.config.success_increment, |g| g.cost());
            self.available = self
                .available
                .saturating_add(back)
                .min(self.policy.config.capacity);
        }
    }

    fn on_request_end(&mut self, _: Instant) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::ErrorClass::{Timeout, Transient};

    #[test]
    fn standard_mode_step_by_step() {
        let mut q = Quota::new(QuotaPolicy::new(QuotaConfig::aws_standard()).unwrap());
        let t = Instant::ZERO;
        let g1 = q.try_retry(Transient, t).unwrap();
        assert_eq!((g1.cost(), q.available()), (5, 495));
        q.on_attempt_end(AttemptOutcome::Failed(Timeout), Some(g1), t);
        assert_eq!(q.available(), 495, "failures cost nothing by themselves");
        let g2 = q.try_retry(Timeout, t).unwrap();
        assert_eq!((g2.cost(), q.available()), (10, 485));
        q.on_attempt_end(AttemptOutcome::Success, Some(g2), t);
        assert_eq!(
            q.available(),
            495,
            "the last retry's cost comes back, not all"
        );
        let g3 = q
            .try_retry(ErrorClass::Throttled { retry_after: None }, t)
            .unwrap();
        assert_eq!((g3.cost(), q.available()), (5, 490));
        q.on_attempt_end(AttemptOutcome::Cancelled, Some(g3), t);
        assert_eq!(q.available(), 490, "a cancelled retry refunds nothing");
        q.on_attempt_end(AttemptOutcome::Success, None, t);
        assert_eq!(q.available(), 491, "+1 for a success without retry");
        for _ in 0..100 {
            q.on_attempt_end(AttemptOutcome::Success, None, t);
        }
        assert_eq!(q.available(), 500, "never above the capacity");
    }

    #[test]
    fn runs_dry_exactly_at_the_cost() {
        let mut q = Quota::new(
            QuotaPolicy::new(QuotaConfig {
                initial: Some(24),
                ..QuotaConfig::aws_2026()
            })
            .unwrap(),
        );
        let t = Instant::ZERO;
        let g = q.try_retry(Transient, t).unwrap();
        assert_eq!(q.available(), 10);
        assert_eq!(q.try_retry(Timeout, t), Err(Denied::Quota));
        let throttled = q
            .try_retry(ErrorClass::Throttled { retry_after: None }, t)
            .unwrap();
        assert_eq!(q.available(), 5);
        let again = q
            .try_retry(ErrorClass::Throttled { retry_after: None }, t)
            .unwrap();
        assert_eq!(q.available(), 0);
        assert_eq!(
            q.try_retry(ErrorClass::Throttled { retry_after: None }, t),
            Err(Denied::Quota)
        );
        for g in [g, throttled, again] {
            q.on_attempt_end(AttemptOutcome::Success, Some(g), t);
        }
        assert_eq!(q.available(), 24);
    }

    #[test]
    fn rejects_each_bad_field_by_name() {
        let base = QuotaConfig::aws_standard();
        let field = |c: QuotaConfig| QuotaPolicy::new(c).unwrap_err().field;
        assert_eq!(
            field(QuotaConfig {
                capacity: 0,
                ..base
            }),
            "capacity"
        );
        assert_eq!(
            field(QuotaConfig {
                initial: Some(501),
                ..base
            }),
            "initial"
        );
        assert_eq!(
            field(QuotaConfig {
                retry_cost: 501,
                ..base
            }),
            "retry_cost"
        );
        assert_eq!(
            field(QuotaConfig {
                timeout_cost: 501,
                ..base
            }),
            "timeout_cost"
        );
        assert_eq!(
            field(QuotaConfig {
                throttle_cost: 501,
                ..base
            }),
            "throttle_cost"
        );
        let extreme = QuotaConfig {
            capacity: u32::MAX,
            initial: Some(u32::MAX),
            success_increment: u32::MAX,
            ..base
        };
        let mut q = Quota::new(QuotaPolicy::new(extreme).unwrap());
        q.on_attempt_end(AttemptOutcome::Success, None, Instant::ZERO);
        assert_eq!(q.available(), u32::MAX);
        assert_eq!(QuotaConfig::default(), base);
    }
}

//! Retry budgets and adaptive throttles as the simulator stores them: the smallest core type that
//! fits the config, per client or shared.
//!
//! The core's windowed budgets and throttles take their slot capacity as a const generic. As with
//! breakers, [`BudgetSlot`] and [`ThrottleSlot`] try a small inline capacity first and fall back to
//! a boxed larger one, so a million per-client budgets stay small when the config allows it.

use reliable_core::budget::{AnyBudget, Budget, BudgetPolicy, Denied, Grant, Unlimited};
use reliable_core::outcome::{AttemptOutcome, ErrorClass};
use reliable_core::throttle::{AdaptiveThrottle, ThrottlePolicy};
use reliable_core::{ConfigError, Instant};

/// A retry budget of whichever capacity fits its policy.
// The small variant is inline on purpose: it is the common case, and boxing it would add an
// allocation and a pointer chase per client.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug)]
pub enum BudgetSlot {
    /// Up to 10 window slots, inline.
    Small(AnyBudget<10>),
    /// Up to 64 window slots, boxed.
    Large(Box<AnyBudget<64>>),
}

impl BudgetSlot {
    /// A fresh budget for `policy`.
    pub fn new(policy: &BudgetPolicy) -> Result<Self, ConfigError> {
        if let Ok(b) = AnyBudget::<10>::new(policy) {
            return Ok(BudgetSlot::Small(b));
        }
        Ok(BudgetSlot::Large(Box::new(AnyBudget::<64>::new(policy)?)))
    }

    /// No limit: what a retry layer without a budget uses.
    pub fn unlimited() -> Self {
        BudgetSlot::Small(AnyBudget::Unlimited(Unlimited))
    }

    /// Bytes this budget takes, its boxed part included.
    pub fn bytes(&self) -> usize {
        match self {
            BudgetSlot::Small(_) => std::mem::size_of::<Self>(),
            BudgetSlot::Large(_) => {
                std::mem::size_of::<Self>() + std::mem::size_of::<AnyBudget<64>>()
            }
        }
    }
}

impl Budget for BudgetSlot {
    fn on_first_try(&mut self, now: Instant) {
        match self {
            BudgetSlot::Small(b) => b.on_first_try(now),
            BudgetSlot::Large(b) => b.on_first_try(now),
        }
    }
    fn try_retry(&mut self, class: ErrorClass, now: Instant) -> Result<Grant, Denied> {
        match self {
            BudgetSlot::Small(b) => b.try_retry(class, now),
            BudgetSlot::Large(b) => b.try_retry(class, now),
        }
    }
    fn on_attempt_end(&mut self, outcome: AttemptOutcome, grant: Option<Grant>, now: Instant) {
        match self {
            BudgetSlot::Small(b) => b.on_attempt_end(outcome, grant, now),
            BudgetSlot::Large(b) => b.on_attempt_end(outcome, grant, now),
        }
    }
    fn on_request_end(&mut self, now: Instant) {
        match self {
            BudgetSlot::Small(b) => b.on_request_end(now),
            BudgetSlot::Large(b) => b.on_request_end(now),
        }
    }
}

/// An adaptive throttle of whichever capacity fits its policy.
#[allow(clippy::large_enum_variant)] // Inline small variant on purpose, as for budgets.
#[derive(Clone, Debug)]
pub enum ThrottleSlot {
    /// Up to 12 window slots, inline.
    Small(AdaptiveThrottle<12>),
    /// Up to 128 window slots, boxed.
    Large(Box<AdaptiveThrottle<128>>),
}

impl ThrottleSlot {
    /// A fresh throttle for `policy`.
    pub fn new(policy: ThrottlePolicy) -> Result<Self, ConfigError> {
        if let Ok(t) = AdaptiveThrottle::<12>::new(policy) {
            return Ok(ThrottleSlot::Small(t));
        }
        Ok(ThrottleSlot::Large(Box::new(AdaptiveThrottle::<128>::new(
            policy,
        )?)))
    }

    /// Bytes this throttle takes, its boxed part included.
    pub fn bytes(&self) -> usize {
        match self {
            ThrottleSlot::Small(_) => std::mem::size_of::<Self>(),
            ThrottleSlot::Large(_) => {
                std::mem::size_of::<Self>() + std::mem::size_of::<AdaptiveThrottle<128>>()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reliable_core::Duration;
    use reliable_core::budget::{BudgetConfig, RatioConfig};
    use reliable_core::throttle::ThrottleConfig;

    #[test]
    fn picks_the_smallest_capacity_that_fits() {
        let ratio = |slots| {
            BudgetPolicy::new(BudgetConfig::Ratio(RatioConfig {
                ratio: 0.1,
                min_per_sec: 0,
                ttl: Duration::from_secs(10),
                slots,
            }))
            .unwrap()
        };
        assert!(matches!(
            BudgetSlot::new(&ratio(10)).unwrap(),
            BudgetSlot::Small(_)
        ));
        assert!(matches!(
            BudgetSlot::new(&ratio(60)).unwrap(),
            BudgetSlot::Large(_)
        ));
        assert!(BudgetSlot::new(&ratio(1000)).is_err());
        let sre = ThrottlePolicy::new(ThrottleConfig::google_sre()).unwrap();
        assert!(matches!(
            ThrottleSlot::new(sre).unwrap(),
            ThrottleSlot::Small(_)
        ));
    }
}

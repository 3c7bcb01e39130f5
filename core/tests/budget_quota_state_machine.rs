//! The retry quota against a plain reference model, on random valid call sequences and random
//! configs (capacities, initial tokens, a cost per error class, the success increment).
//!
//! Invariants: `0 ≤ available ≤ capacity`; every grant costs what its class costs; tokens are
//! conserved: available = initial − costs granted + refunds received (refunds capped).
//!
//! `PROPTEST_CASES=5000 cargo test -p reliable-core --test budget_quota_state_machine` is CI's long
//! pass.

mod common;

use common::{Machine, Model};
use proptest::prelude::*;
use proptest_state_machine::prop_state_machine;
use reliable_core::Instant;
use reliable_core::budget::{Denied, Quota, QuotaConfig, QuotaPolicy};
use reliable_core::outcome::{AttemptOutcome, ErrorClass};

#[derive(Clone, Debug)]
struct Tokens {
    capacity: u64,
    initial: u64,
    retry_cost: u64,
    timeout_cost: u64,
    throttle_cost: u64,
    success_increment: u64,
    available: u64,
    spent: u64,
    refunded: u64,
}

impl Model for Tokens {
    type Budget = Quota;

    fn strategy() -> BoxedStrategy<Self> {
        (
            1..=600u64,
            0..=100u64,
            (0..=20u64, 0..=20u64, 0..=20u64),
            0..=3u64,
        )
            .prop_map(|(capacity, initial_pct, (r, t, th), success_increment)| {
                let initial = capacity * initial_pct / 100;
                Tokens {
                    capacity,
                    initial,
                    retry_cost: r.min(capacity),
                    timeout_cost: t.min(capacity),
                    throttle_cost: th.min(capacity),
                    success_increment,
                    available: initial,
                    spent: 0,
                    refunded: 0,
                }
            })
            .boxed()
    }

    fn build(&self) -> Quota {
        let n = |v: u64| v as u32;
        Quota::new(
            QuotaPolicy::new(QuotaConfig {
                capacity: n(self.capacity),
                initial: Some(n(self.initial)),
                retry_cost: n(self.retry_cost),
                timeout_cost: n(self.timeout_cost),
                throttle_cost: n(self.throttle_cost),
                success_increment: n(self.success_increment),
            })
            .unwrap(),
        )
    }

    fn first_try(&mut self, _: u64) {}

    fn try_retry(&mut self, class: ErrorClass, _: u64) -> Result<u32, Denied> {
        let cost = match class {
            ErrorClass::Timeout => self.timeout_cost,
            ErrorClass::Throttled { .. } => self.throttle_cost,
            _ => self.retry_cost,
        };
        if cost > self.available {
            return Err(Denied::Quota);
        }
        self.available -= cost;
        self.spent += cost;
        Ok(cost as u32)
    }

    fn attempt_end(&mut self, outcome: AttemptOutcome, grant: Option<u32>, _: u64) {
        if outcome == AttemptOutcome::Success {
            let back = grant.map_or(self.success_increment, u64::from);
            let before = self.available;
            self.available = (self.available + back).min(self.capacity);
            self.refunded += self.available - before;
        }
    }

    fn request_end(&mut self, _: u64) {}

    fn check(&self, budget: &Quota, _: Instant, _: u64) {
        assert_eq!(u64::from(budget.available()), self.available);
        assert!(self.available <= self.capacity);
        assert_eq!(self.available + self.spent, self.initial + self.refunded);
    }
}

prop_state_machine! {
    #[test]
    fn quota_matches_the_model(sequential 1..150 => Machine<Tokens>);
}

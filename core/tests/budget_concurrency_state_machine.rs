//! The concurrency budget against a plain reference model (two counters), on random valid call
//! sequences and random configs.
//!
//! Invariants: retries in flight never exceed requests in flight (each belongs to one), and a
//! retry is granted exactly when fewer than `max(min, ⌊ratio × requests⌋)` are in flight.
//!
//! `PROPTEST_CASES=5000 cargo test -p reliable-core --test budget_concurrency_state_machine` is CI's
//! long pass.

mod common;

use common::{Machine, Model};
use proptest::prelude::*;
use proptest_state_machine::prop_state_machine;
use reliable_core::Instant;
use reliable_core::budget::{ConcurrencyBudget, ConcurrencyConfig, ConcurrencyPolicy, Denied};
use reliable_core::outcome::{AttemptOutcome, ErrorClass};

#[derive(Clone, Debug)]
struct InFlight {
    ratio_micro: u64,
    min: u64,
    requests: u64,
    retries: u64,
}

impl Model for InFlight {
    type Budget = ConcurrencyBudget;

    fn strategy() -> BoxedStrategy<Self> {
        (
            prop_oneof![Just(0u64), 0..=1_000_000u64, Just(200_000)],
            0..=4u64,
        )
            .prop_filter("some retry can go", |(r, m)| *r > 0 || *m > 0)
            .prop_map(|(ratio_micro, min)| InFlight {
                ratio_micro,
                min,
                requests: 0,
                retries: 0,
            })
            .boxed()
    }

    fn build(&self) -> ConcurrencyBudget {
        ConcurrencyBudget::new(
            ConcurrencyPolicy::new(ConcurrencyConfig {
                ratio: self.ratio_micro as f64 / 1e6,
                min_concurrency: self.min as u32,
            })
            .unwrap(),
        )
    }

    fn first_try(&mut self, _: u64) {
        self.requests += 1;
    }

    fn try_retry(&mut self, _: ErrorClass, _: u64) -> Result<u32, Denied> {
        let limit = (self.ratio_micro * self.requests / 1_000_000).max(self.min);
        if self.retries >= limit {
            return Err(Denied::Concurrency);
        }
        self.retries += 1;
        Ok(0)
    }

    fn attempt_end(&mut self, _: AttemptOutcome, grant: Option<u32>, _: u64) {
        if grant.is_some() {
            self.retries -= 1;
        }
    }

    fn request_end(&mut self, _: u64) {
        self.requests -= 1;
    }

    fn check(&self, budget: &ConcurrencyBudget, _: Instant, _: u64) {
        assert_eq!(u64::from(budget.requests_in_flight()), self.requests);
        assert_eq!(u64::from(budget.retries_in_flight()), self.retries);
        assert!(self.retries <= self.requests);
    }
}

prop_state_machine! {
    #[test]
    fn concurrency_budget_matches_the_model(sequential 1..150 => Machine<InFlight>);
}

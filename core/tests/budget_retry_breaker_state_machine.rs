//! The retry breaker against a plain reference model (a list of timestamped calls and failures,
//! filtered to the live window, or all of them when cumulative), on random valid call sequences and
//! random configs (Above/AtLeast thresholds, first tries or attempts as calls, cumulative or time
//! windows, a minimum number of calls).
//!
//! Invariant: a retry is granted exactly when the model's failure rate allows it, compared in
//! exact rationals.
//!
//! `PROPTEST_CASES=5000 cargo test -p reliable-core --test budget_retry_breaker_state_machine` is
//! CI's long pass.

mod common;

use common::{Machine, Model, live};
use proptest::prelude::*;
use proptest_state_machine::prop_state_machine;
use reliable_core::budget::{
    Calls, Denied, RateWindow, RetryBreaker, RetryBreakerConfig, RetryBreakerPolicy, Threshold,
};
use reliable_core::outcome::{AttemptOutcome, ErrorClass};
use reliable_core::{Duration, Instant};

const BUCKETS: usize = 8;

#[derive(Clone, Debug)]
struct Rate {
    threshold_micro: u64,
    at_least: bool,
    attempts: bool,
    /// (width in ns, buckets), or cumulative.
    window: Option<(u64, u32)>,
    minimum_calls: u64,
    /// (time, calls, failures).
    events: Vec<(u64, u64, u64)>,
}

impl Rate {
    fn counts(&self, view: u64) -> (u64, u64) {
        self.events
            .iter()
            .filter(|e| self.window.is_none_or(|(w, n)| live(e.0, view, w, n)))
            .fold((0, 0), |(c, f), e| (c + e.1, f + e.2))
    }

    fn allows(&self, view: u64) -> bool {
        let (calls, failures) = self.counts(view);
        if calls < self.minimum_calls {
            return true;
        }
        // failures / calls against threshold / 10^6, cross-multiplied.
        let rate = u128::from(failures) * 1_000_000;
        let limit = u128::from(self.threshold_micro) * u128::from(calls);
        let stop = if self.at_least {
            rate >= limit
        } else {
            rate > limit
        };
        !stop
    }
}

impl Model for Rate {
    type Budget = RetryBreaker<BUCKETS>;

    fn strategy() -> BoxedStrategy<Self> {
        let window = proptest::option::of((1_000_000..2_000_000_000u64, 1..=BUCKETS as u32));
        (
            prop_oneof![Just(100_000u64), 0..=1_500_000u64],
            any::<bool>(),
            any::<bool>(),
            window,
            prop_oneof![Just(0u64), 0..=5u64],
        )
            .prop_filter("AtLeast(0) is refused", |(t, at_least, ..)| {
                *t > 0 || !at_least
            })
            .prop_map(
                |(threshold_micro, at_least, attempts, window, minimum_calls)| Rate {
                    threshold_micro,
                    at_least,
                    attempts,
                    window,
                    minimum_calls,
                    events: Vec::new(),
                },
            )
            .boxed()
    }

    fn build(&self) -> RetryBreaker<BUCKETS> {
        let t = self.threshold_micro as f64 / 1e6;
        let config = RetryBreakerConfig {
            stop_when: if self.at_least {
                Threshold::AtLeast(t)
            } else {
                Threshold::Above(t)
            },
            calls: if self.attempts {
                Calls::Attempts
            } else {
                Calls::FirstTries
            },
            window: match self.window {
                None => RateWindow::Cumulative,
                Some((width, buckets)) => RateWindow::Time {
                    span: Duration::from_nanos(width * u64::from(buckets)),
                    buckets,
                },
            },
            minimum_calls: self.minimum_calls as u32,
        };
        RetryBreaker::new(RetryBreakerPolicy::new(config).unwrap()).unwrap()
    }

    fn width(&self) -> u64 {
        self.window.map_or(1_000_000_000, |(w, _)| w)
    }

    fn first_try(&mut self, latest: u64) {
        if !self.attempts {
            self.events.push((latest, 1, 0));
        }
    }

    fn try_retry(&mut self, _: ErrorClass, latest: u64) -> Result<u32, Denied> {
        if self.allows(latest) {
            Ok(0)
        } else {
            Err(Denied::FailureRate)
        }
    }

    fn attempt_end(&mut self, outcome: AttemptOutcome, _: Option<u32>, latest: u64) {
        let (call, failure) = match outcome {
            AttemptOutcome::Cancelled => return,
            AttemptOutcome::Success | AttemptOutcome::Failed(ErrorClass::Fatal) => (1, 0),
            AttemptOutcome::Failed(_) => (1, 1),
        };
        let call = if self.attempts { call } else { 0 };
        self.events.push((latest, call, failure));
    }

    fn request_end(&mut self, _: u64) {}

    fn check(&self, budget: &RetryBreaker<BUCKETS>, now: Instant, view: u64) {
        assert_eq!(budget.counts(now), self.counts(view), "counts at {now:?}");
        assert_eq!(budget.allows_retry(now), self.allows(view));
    }
}

prop_state_machine! {
    #[test]
    fn retry_breaker_matches_the_model(sequential 1..150 => Machine<Rate>);
}

//! The token bucket against a plain reference model (signed integers, clamped by hand), on random
//! valid call sequences and random configs covering gRPC A6, Brooker 2022 and Yandex 2024 shapes.
//!
//! Invariants: tokens stay in `[0, max]`; the tokens spent on granted retries never exceed the
//! initial tokens plus every credit received.
//!
//! `PROPTEST_CASES=5000 cargo test -p reliable-core --test budget_token_bucket_state_machine` is
//! CI's long pass.

mod common;

use common::{Machine, Model};
use proptest::prelude::*;
use proptest_state_machine::prop_state_machine;
use reliable_core::Instant;
use reliable_core::budget::{Denied, Threshold, TokenBucket, TokenBucketConfig, TokenBucketPolicy};
use reliable_core::outcome::{AttemptOutcome, ErrorClass};

const M: i128 = 1_000_000;

#[derive(Clone, Debug)]
struct Bucket {
    // Config, in millionths of a token.
    max: i128,
    initial: i128,
    first_try_credit: i128,
    success_credit: i128,
    retried_success_credit: i128,
    failure_cost: i128,
    retry_cost: i128,
    threshold: i128,
    at_least: bool,
    // State.
    tokens: i128,
    credited: i128,
    spent_on_retries: i128,
}

fn tokens(micro: i128) -> f64 {
    micro as f64 / 1e6
}

impl Bucket {
    fn credit(&mut self, amount: i128) {
        let before = self.tokens;
        self.tokens = (self.tokens + amount).min(self.max);
        self.credited += self.tokens - before;
    }
}

impl Model for Bucket {
    type Budget = TokenBucket;

    fn strategy() -> BoxedStrategy<Self> {
        let amount = || prop_oneof![Just(0i128), 1..3 * M, Just(M / 10), Just(M)];
        (
            (1..30 * M),
            (0..=100u32),
            (amount(), amount(), proptest::option::of(amount())),
            (amount(), amount()),
            (0..=100u32, any::<bool>()),
        )
            .prop_map(
                |(max, initial_pct, (ftc, sc, rsc), (fc, rc), (thr_pct, at_least))| {
                    let initial = max * i128::from(initial_pct) / 100;
                    // A threshold a full bucket passes.
                    let threshold = if at_least {
                        max * i128::from(thr_pct) / 100
                    } else {
                        max * i128::from(thr_pct.min(99)) / 100
                    };
                    Bucket {
                        max,
                        initial,
                        first_try_credit: ftc,
                        success_credit: sc,
                        retried_success_credit: rsc.unwrap_or(sc),
                        failure_cost: fc,
                        retry_cost: rc,
                        threshold,
                        at_least,
                        tokens: initial,
                        credited: 0,
                        spent_on_retries: 0,
                    }
                },
            )
            .prop_filter("the threshold is representable", |b| {
                b.threshold < b.max || b.at_least
            })
            .boxed()
    }

    fn build(&self) -> TokenBucket {
        let t = tokens(self.threshold);
        let config = TokenBucketConfig {
            max_tokens: tokens(self.max),
            initial_tokens: Some(tokens(self.initial)),
            first_try_credit: tokens(self.first_try_credit),
            success_credit: tokens(self.success_credit),
            retried_success_credit: Some(tokens(self.retried_success_credit)),
            failure_cost: tokens(self.failure_cost),
            retry_cost: tokens(self.retry_cost),
            retry_when: if self.at_least {
                Threshold::AtLeast(t)
            } else {
                Threshold::Above(t)
            },
        };
        TokenBucket::new(TokenBucketPolicy::new(config).unwrap())
    }

    fn first_try(&mut self, _: u64) {
        self.credit(self.first_try_credit);
    }

    fn try_retry(&mut self, _: ErrorClass, _: u64) -> Result<u32, Denied> {
        let allowed = if self.at_least {
            self.tokens >= self.threshold
        } else {
            self.tokens > self.threshold
        };
        if !allowed {
            return Err(Denied::Tokens);
        }
        let before = self.tokens;
        self.tokens = (self.tokens - self.retry_cost).max(0);
        self.spent_on_retries += before - self.tokens;
        Ok(0)
    }

    fn attempt_end(&mut self, outcome: AttemptOutcome, grant: Option<u32>, _: u64) {
        match outcome {
            AttemptOutcome::Success if grant.is_some() => self.credit(self.retried_success_credit),
            AttemptOutcome::Success => self.credit(self.success_credit),
            AttemptOutcome::Failed(ErrorClass::Fatal) | AttemptOutcome::Cancelled => {}
            AttemptOutcome::Failed(_) => self.tokens = (self.tokens - self.failure_cost).max(0),
        }
    }

    fn request_end(&mut self, _: u64) {}

    fn check(&self, budget: &TokenBucket, _: Instant, _: u64) {
        assert_eq!(i128::from(budget.micro_tokens()), self.tokens);
        assert!((0..=self.max).contains(&self.tokens));
        assert!(self.spent_on_retries <= self.initial + self.credited);
    }
}

prop_state_machine! {
    #[test]
    fn token_bucket_matches_the_model(sequential 1..120 => Machine<Bucket>);
}

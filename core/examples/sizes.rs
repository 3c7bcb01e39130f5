//! Prints the size of each policy and state type of the core, for the docs and for anyone sizing
//! a fleet of clients (a simulator holding millions of requests in flight, a microcontroller).
//!
//! `cargo run -p reliable-core --example sizes`

use core::mem::size_of;

use reliable_core::backoff::{Backoff, BackoffConfig, BackoffPolicy};
use reliable_core::budget::{
    AnyBudget, BudgetConfig, BudgetPolicy, ConcurrencyBudget, Grant, Quota, RatioBudget,
    RetryBreaker, TokenBucket, Unlimited,
};
use reliable_core::outcome::{AttemptOutcome, ErrorClass};
use reliable_core::retry::{RetryConfig, RetryDecision, RetryPolicy, RetryState};
use reliable_core::throttle::{AdaptiveThrottle, ThrottleConfig, ThrottlePolicy};

macro_rules! sizes {
    ($($t:ty),* $(,)?) => {
        $(println!("{:>4} bytes  {}", size_of::<$t>(), stringify!($t));)*
    };
}

fn main() {
    println!("per request (one per request in flight):");
    sizes!(
        RetryState,
        Backoff<'static>,
        Grant,
        ErrorClass,
        AttemptOutcome,
        RetryDecision
    );
    println!("per client or per downstream (state; each budget owns a copy of its small policy):");
    sizes!(
        Unlimited,
        TokenBucket,
        Quota,
        ConcurrencyBudget,
        RatioBudget<10>,
        RetryBreaker<10>,
        AnyBudget<10>,
        AnyBudget<1>,
        AdaptiveThrottle<12>,
    );
    println!("shared, read-only (validated policies):");
    sizes!(BackoffPolicy, RetryPolicy, BudgetPolicy, ThrottlePolicy);
    println!("configs (plain data):");
    sizes!(BackoffConfig, RetryConfig, BudgetConfig, ThrottleConfig);
}

//! Prints the size of each policy and state type of the core, for the docs and for anyone sizing
//! a fleet of clients (a simulator holding millions of requests in flight, a microcontroller).
//!
//! `cargo run -p reliable-core --example sizes`

use core::mem::size_of;

use reliable_core::backoff::{Backoff, BackoffConfig, BackoffPolicy};
use reliable_core::breaker::{
    AnyWindow, AtomicAnyWindow, AtomicCountWindow, AtomicTimeWindow, BreakerConfig, BreakerPolicy,
    CircuitBreaker, CountWindow, NoWindow, Permit, Rejection, SharedBreaker, TimeWindow,
    Transition,
};
use reliable_core::budget::{
    AnyBudget, BudgetConfig, BudgetPolicy, ConcurrencyBudget, Grant, Quota, RatioBudget,
    RetryBreaker, TokenBucket, Unlimited,
};
use reliable_core::hedge::{HedgedCall, Hedger, LatencyQuantile};
use reliable_core::ledger::{Draw, ExtraLedger};
use reliable_core::limit::{LimitPermit, Limiter, RateLimiter};
use reliable_core::outcome::{AttemptOutcome, ErrorClass};
use reliable_core::provider::{QuotaUpdate, Signal};
use reliable_core::retry::{RetryConfig, RetryDecision, RetryPolicy, RetryState};
use reliable_core::spend::{
    Refusal, Reservation, Settlement, SpendBreaker, SpendConfig, SpendPolicy,
};
use reliable_core::throttle::{AdaptiveThrottle, ThrottleConfig, ThrottlePolicy};

macro_rules! sizes {
    ($($t:ty),* $(,)?) => {
        $(println!("{:>4} bytes  {}", size_of::<$t>(), stringify!($t));)*
    };
}

fn main() {
    println!("circuit breakers sharing one BreakerPolicy by reference (state only):");
    sizes!(
        CircuitBreaker<&BreakerPolicy, NoWindow, 1>,
        CircuitBreaker<&BreakerPolicy, CountWindow<64>, 1>,
        CircuitBreaker<&BreakerPolicy, CountWindow<100, 2>, 1>,
        CircuitBreaker<&BreakerPolicy, TimeWindow<10>, 1>,
        CircuitBreaker<&BreakerPolicy, AnyWindow<128, 10, 2>, 10>,
        SharedBreaker<&BreakerPolicy, NoWindow, 1>,
        SharedBreaker<&BreakerPolicy, AtomicCountWindow<64>, 1>,
        SharedBreaker<&BreakerPolicy, AtomicCountWindow<100, 2>, 1>,
        SharedBreaker<&BreakerPolicy, AtomicTimeWindow<10>, 1>,
        SharedBreaker<&BreakerPolicy, AtomicAnyWindow<128, 10, 2>, 10>,
    );
    println!("circuit breakers owning their BreakerPolicy (the default):");
    sizes!(CircuitBreaker, SharedBreaker);
    println!("per call through a breaker:");
    sizes!(Permit, Rejection, Transition, Result<Permit, Rejection>);
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
        ExtraLedger<10>,
        Hedger,
        LatencyQuantile,
        Limiter,
        RateLimiter,
    );
    println!("per call hedged or limited, and per extra attempt drawn:");
    sizes!(HedgedCall, LimitPermit, Draw);
    println!("spend breakers (state only; each borrows its SpendPolicy):");
    sizes!(
        SpendBreaker<&'static SpendPolicy>,
        SpendBreaker<&'static SpendPolicy, 1, 1, 1>,
        SpendBreaker<&'static SpendPolicy, 6, 24, 30>,
        SpendBreaker<&'static SpendPolicy, 12, 96, 30>,
    );
    println!("per LLM call:");
    sizes!(
        Reservation,
        Refusal,
        Result<Reservation, Refusal>,
        Settlement,
        Signal,
        QuotaUpdate
    );
    println!("shared, read-only (validated policies):");
    sizes!(
        BreakerPolicy,
        BackoffPolicy,
        RetryPolicy,
        BudgetPolicy,
        ThrottlePolicy,
        SpendPolicy
    );
    println!("configs (plain data):");
    sizes!(
        BreakerConfig,
        BackoffConfig,
        RetryConfig,
        BudgetConfig,
        ThrottleConfig,
        SpendConfig
    );
}

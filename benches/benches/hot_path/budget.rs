//! Retry budgets: record a request and check a retry, for each kind, next to tower's `TpsBudget`.
//!
//! tower's budget has two calls: `deposit()` when a request is made and `withdraw()` to ask for a
//! retry; both read the clock (`tokio::time::Instant::now()`) and take a mutex. Ours get `now`
//! passed in. Each of our kinds does one request's whole ledger per iteration, in the order the
//! retry policy makes the calls: `on_first_try`, `try_retry` after the first try failed, then (if
//! granted) `on_attempt_end` with the grant, and `on_request_end`: four calls, the last two of
//! which keep a concurrency budget's and a quota's state from drifting. `reliable_ratio_pair` is
//! the ratio budget doing exactly tower's two calls.

use std::hint::black_box;
use std::time::Duration as StdDuration;

use criterion::Criterion;
use reliable_core::budget::{
    Budget, ConcurrencyBudget, ConcurrencyConfig, ConcurrencyPolicy, Quota, QuotaConfig,
    QuotaPolicy, RatioBudget, RatioConfig, RatioPolicy, RetryBreaker, RetryBreakerConfig,
    RetryBreakerPolicy, TokenBucket, TokenBucketConfig, TokenBucketPolicy,
};
use reliable_core::outcome::{AttemptOutcome, ErrorClass};
use reliable_core::{Duration, Instant};
use tower::retry::budget::{Budget as _, TpsBudget};

const STEP: Duration = Duration::from_nanos(25);

/// One request's ledger: first try, retry check, the retry's end (it succeeded), request end.
#[inline]
fn ledger(b: &mut impl Budget, now: Instant) {
    b.on_first_try(now);
    match b.try_retry(black_box(ErrorClass::Transient), now) {
        Ok(grant) => b.on_attempt_end(black_box(AttemptOutcome::Success), Some(grant), now),
        Err(denied) => {
            black_box(denied);
        }
    }
    b.on_request_end(now);
}

pub fn record_and_check(c: &mut Criterion) {
    let mut g = c.benchmark_group("budget_record_check");
    macro_rules! ours {
        ($name:literal, $budget:expr) => {{
            let mut budget = $budget;
            let mut now = Instant::from_secs(1);
            g.bench_function($name, |bench| {
                bench.iter(|| {
                    now += black_box(STEP);
                    ledger(black_box(&mut budget), black_box(now));
                })
            });
        }};
    }
    ours!(
        "reliable_token_bucket",
        TokenBucket::new(
            TokenBucketPolicy::new(TokenBucketConfig::grpc(10.0, 0.1)).expect("valid")
        )
    );
    // Finagle's and tower's default: 20%, 10 retries/s of reserve, 10 s in 10 slots.
    let ratio = RatioPolicy::new(RatioConfig::finagle()).expect("valid");
    ours!(
        "reliable_ratio",
        RatioBudget::<10>::new(ratio).expect("fits")
    );
    ours!(
        "reliable_quota",
        Quota::new(QuotaPolicy::new(QuotaConfig::aws_standard()).expect("valid"))
    );
    ours!(
        "reliable_concurrency",
        ConcurrencyBudget::new(ConcurrencyPolicy::new(ConcurrencyConfig::envoy()).expect("valid"))
    );
    ours!(
        "reliable_retry_breaker",
        RetryBreaker::<10>::new(
            RetryBreakerPolicy::new(RetryBreakerConfig::yandex_2024()).expect("valid")
        )
        .expect("fits")
    );

    let mut budget = RatioBudget::<10>::new(ratio).expect("fits");
    let mut now = Instant::from_secs(1);
    g.bench_function("reliable_ratio_pair", |bench| {
        bench.iter(|| {
            now += black_box(STEP);
            let b = black_box(&mut budget);
            b.on_first_try(black_box(now));
            black_box(b.try_retry(black_box(ErrorClass::Transient), black_box(now)))
        })
    });

    let tower = TpsBudget::new(StdDuration::from_secs(10), 10, 0.2);
    g.bench_function("tower_tps_budget", |bench| {
        bench.iter(|| {
            let b = black_box(&tower);
            b.deposit();
            black_box(b.withdraw())
        })
    });
    g.finish();
}

//! Every policy constructor is a `const fn`: a policy built in a `const` item (checked by the
//! compiler, no validation code left in the program) is the same policy as one built at run time,
//! and an invalid config is refused the same way in both.

use reliable_core::ConfigError;
use reliable_core::backoff::{BackoffConfig, BackoffPolicy, Jitter};
use reliable_core::breaker::{BreakerConfig, BreakerPolicy};
use reliable_core::budget::{
    BudgetConfig, BudgetPolicy, ConcurrencyConfig, ConcurrencyPolicy, QuotaConfig, QuotaPolicy,
    RatioConfig, RatioPolicy, RetryBreakerConfig, RetryBreakerPolicy, TokenBucketConfig,
    TokenBucketPolicy,
};
use reliable_core::retry::{RetryConfig, RetryPolicy};

/// The policy of a valid config; a compile error for an invalid one (only ever used in `const`s).
const fn valid<P: Copy>(built: Result<P, ConfigError>) -> P {
    match built {
        Ok(policy) => policy,
        Err(e) => panic!("{}", e.field),
    }
}

const BREAKER: BreakerPolicy = valid(BreakerPolicy::new(BreakerConfig::resilience4j()));
const BACKOFF: BackoffPolicy = valid(BackoffPolicy::new(BackoffConfig::reliablekit()));
const RETRY: RetryPolicy = valid(RetryPolicy::new(RetryConfig::aws_2026()));
const BUCKET: TokenBucketPolicy = valid(TokenBucketPolicy::new(TokenBucketConfig::yandex_2024()));
const RATIO: RatioPolicy = valid(RatioPolicy::new(RatioConfig::finagle()));
const QUOTA: QuotaPolicy = valid(QuotaPolicy::new(QuotaConfig::aws_2026()));
const CONCURRENCY: ConcurrencyPolicy = valid(ConcurrencyPolicy::new(ConcurrencyConfig::envoy()));
const RETRY_BREAKER: RetryBreakerPolicy =
    valid(RetryBreakerPolicy::new(RetryBreakerConfig::brooker_2022()));
const BUDGET: BudgetPolicy = valid(BudgetPolicy::new(BudgetConfig::TokenBucket(
    TokenBucketConfig::brooker_2022(),
)));

#[test]
fn const_built_policies_equal_run_time_built_ones() {
    let run_time = |config| BreakerPolicy::new(config).unwrap();
    assert_eq!(BREAKER, run_time(BreakerConfig::resilience4j()));
    assert_eq!(
        BACKOFF,
        BackoffPolicy::new(BackoffConfig::reliablekit()).unwrap()
    );
    assert_eq!(RETRY, RetryPolicy::new(RetryConfig::aws_2026()).unwrap());
    assert_eq!(
        BUCKET,
        TokenBucketPolicy::new(TokenBucketConfig::yandex_2024()).unwrap()
    );
    assert_eq!(RATIO, RatioPolicy::new(RatioConfig::finagle()).unwrap());
    assert_eq!(QUOTA, QuotaPolicy::new(QuotaConfig::aws_2026()).unwrap());
    assert_eq!(
        CONCURRENCY,
        ConcurrencyPolicy::new(ConcurrencyConfig::envoy()).unwrap()
    );
    assert_eq!(
        RETRY_BREAKER,
        RetryBreakerPolicy::new(RetryBreakerConfig::brooker_2022()).unwrap()
    );
    let bucket = BudgetPolicy::new(BudgetConfig::TokenBucket(TokenBucketConfig::brooker_2022()));
    assert_eq!(BUDGET, bucket.unwrap());
}

#[test]
fn const_evaluation_refuses_what_run_time_refuses() {
    // Evaluated by the compiler (a `const` item), but kept as a `Result` to look at the error.
    const BAD: Result<RetryPolicy, ConfigError> = RetryPolicy::new(RetryConfig {
        throttled_backoff: Some(BackoffConfig::exponential(
            reliable_core::Duration::from_millis(10),
            2.0,
            reliable_core::Duration::from_secs(1),
            Jitter::Proportional { fraction: 1.5 },
        )),
        ..RetryConfig::aws_2026()
    });
    let err = BAD.unwrap_err();
    assert_eq!(err.field, "throttled_backoff.jitter.fraction");
    assert_eq!(
        err.to_string(),
        "throttled_backoff.jitter.fraction: 1.5 is not a fraction in [0, 1]"
    );
}

//! The policies the firmware programs use, built at compile time.

use reliable_core::backoff::{BackoffConfig, Jitter};
use reliable_core::breaker::{BreakerConfig, BreakerPolicy, WindowConfig};
use reliable_core::budget::{TokenBucketConfig, TokenBucketPolicy};
use reliable_core::retry::{RetryConfig, RetryPolicy};
use reliable_core::{ConfigError, Duration};

/// The policies are built at compile time: an invalid config does not compile, and neither the
/// validation nor its floating-point arithmetic is in the binary.
pub static BREAKER_POLICY: BreakerPolicy = valid(BreakerPolicy::new(BreakerConfig {
    failure_rate: Some(0.5),
    minimum_calls: 20,
    window: WindowConfig::Count { calls: 64 },
    ..BreakerConfig::new()
}));
/// Four attempts, exponential backoff from 10 ms to 1 s with full jitter.
pub const RETRY_CONFIG: RetryConfig = RetryConfig {
    max_attempts: Some(4),
    ..RetryConfig::new(BackoffConfig::exponential(
        Duration::from_millis(10),
        2.0,
        Duration::from_secs(1),
        Jitter::Full,
    ))
};
pub static RETRY_POLICY: RetryPolicy = valid(RetryPolicy::new(RETRY_CONFIG));
pub const BUDGET_POLICY: TokenBucketPolicy =
    valid(TokenBucketPolicy::new(TokenBucketConfig::brooker_2022()));

/// The policy, or a compile error naming the bad field (evaluated in a `static` or `const` item,
/// this `panic!` stops the build; it is never reached at run time).
pub const fn valid<P: Copy>(built: Result<P, ConfigError>) -> P {
    match built {
        Ok(policy) => policy,
        Err(e) => panic!("{}", e.field),
    }
}

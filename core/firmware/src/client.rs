//! The client loop both firmware programs run: a breaker with a 64-call window in front of the
//! calls, a retry policy with exponential backoff and full jitter, retries paid from a token
//! bucket. Time comes from the cycle counter, the downstream's answer from an input pin, and what
//! happens goes to the output pins. The programs differ only in how the breaker names its policy.

use core::borrow::Borrow;

use reliable_core::backoff::{BackoffConfig, Jitter};
use reliable_core::breaker::{
    BreakerConfig, BreakerPolicy, CircuitBreaker, CountWindow, Outcome, WindowConfig,
};
use reliable_core::budget::{TokenBucket, TokenBucketConfig, TokenBucketPolicy};
use reliable_core::outcome::ErrorClass;
use reliable_core::retry::{RetryConfig, RetryDecision, RetryPolicy};
use reliable_core::sample::splitmix64;
use reliable_core::{ConfigError, Duration, Instant};

/// The policies are built at compile time: an invalid config does not compile, and neither the
/// validation nor its floating-point arithmetic is in the binary.
pub static BREAKER_POLICY: BreakerPolicy = valid(BreakerPolicy::new(BreakerConfig {
    failure_rate: Some(0.5),
    minimum_calls: 20,
    window: WindowConfig::Count { calls: 64 },
    ..BreakerConfig::new()
}));
static RETRY_POLICY: RetryPolicy = valid(RetryPolicy::new(RetryConfig {
    max_attempts: Some(4),
    ..RetryConfig::new(BackoffConfig::exponential(
        Duration::from_millis(10),
        2.0,
        Duration::from_secs(1),
        Jitter::Full,
    ))
}));
const BUDGET_POLICY: TokenBucketPolicy =
    valid(TokenBucketPolicy::new(TokenBucketConfig::brooker_2022()));

/// The policy, or a compile error naming the bad field (evaluated in a `static` or `const` item,
/// this `panic!` stops the build; it is never reached at run time).
const fn valid<P: Copy>(built: Result<P, ConfigError>) -> P {
    match built {
        Ok(policy) => policy,
        Err(e) => panic!("{}", e.field),
    }
}

/// Ticks of the cycle counter are taken as nanoseconds: the core does not care about the unit.
fn now(clock: &mut crate::board::Clock) -> Instant {
    Instant::from_nanos(clock.ticks())
}

/// The breaker the programs keep: 64 calls, and a policy handle `R` (`&BreakerPolicy`, or a
/// zero-sized name for the one policy in flash).
pub type Breaker<R> = CircuitBreaker<R, CountWindow<64>>;

/// The client's loop; returns only on a config error.
pub fn client<R: Borrow<BreakerPolicy>>(policy: R) -> Result<(), ConfigError> {
    let mut breaker = Breaker::with_storage(policy)?;
    let retry = &RETRY_POLICY;
    let mut budget = TokenBucket::new(BUDGET_POLICY);
    let mut clock = crate::board::Clock::default();
    let mut sample = u64::from(crate::board::cycles());
    loop {
        let mut request = retry.start(now(&mut clock), &mut budget);
        loop {
            let t = now(&mut clock);
            let permit = match breaker.try_acquire(t) {
                Ok(permit) => permit,
                Err(rejected) => {
                    // Open: fail fast, and say for how long.
                    retry.abandon(&mut request, t, &mut budget);
                    let wait = rejected.retry_after().unwrap_or(Duration::ZERO);
                    crate::board::report(0x8000_0000 | wait.as_millis() as u32);
                    break;
                }
            };
            let answered = crate::board::answered();
            let t = now(&mut clock);
            let outcome = if answered {
                Outcome::Success
            } else {
                Outcome::from(ErrorClass::Transient)
            };
            breaker.record(permit, outcome, t);
            if answered {
                retry.on_success(&mut request, t, &mut budget);
                crate::board::report(1);
                break;
            }
            sample = splitmix64(sample);
            match retry.on_failure_with(&mut request, ErrorClass::Transient, t, &mut budget, sample)
            {
                RetryDecision::RetryAt(at) => while now(&mut clock) < at {},
                RetryDecision::GiveUp(_) => {
                    crate::board::report(2);
                    break;
                }
            }
        }
    }
}

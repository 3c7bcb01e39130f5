//! The client loop both firmware programs run: a breaker with a 64-call window in front of the
//! calls, a retry policy with exponential backoff and full jitter, retries paid from a token
//! bucket. Time comes from the cycle counter, the downstream's answer from an input pin, and what
//! happens goes to the output pins. The programs differ only in how the breaker names its policy.

use core::borrow::Borrow;

use reliable_core::breaker::{BreakerPolicy, CircuitBreaker, CountWindow, Outcome};
use reliable_core::budget::TokenBucket;
use reliable_core::outcome::ErrorClass;
use reliable_core::retry::RetryDecision;
use reliable_core::sample::splitmix64;
use reliable_core::{ConfigError, Duration, Instant};

pub use crate::policies::BREAKER_POLICY;
use crate::policies::{BUDGET_POLICY, RETRY_POLICY};

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

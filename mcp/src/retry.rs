//! The retry settings an agent gives (attempts, per-attempt timeout, backoff), turned into the
//! core's [`RetryConfig`] within the operator's limits: used by `create_breaker` for a named
//! downstream and by `reliable_http_call` for a call without one.

use reliable_core::Duration;
use reliable_core::retry::RetryConfig;

use crate::backoff::BackoffSpec;
use crate::duration::parse_duration;
use crate::ssrf::Limits;

/// Most attempts per call.
pub const MAX_ATTEMPTS: u32 = 5;
/// Attempts by default.
pub const DEFAULT_ATTEMPTS: u32 = 3;
/// Per-attempt timeout by default.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// The retry config for `attempts`, `timeout` and `backoff` (each optional), or an error naming
/// the field. `retry_timeouts`: whether a timed-out attempt may be retried (not for a request that
/// is not idempotent: it may have been received).
pub fn config(
    attempts: Option<u32>,
    timeout: Option<&str>,
    backoff: Option<&BackoffSpec>,
    retry_timeouts: bool,
    limits: &Limits,
) -> Result<RetryConfig, String> {
    let attempts = attempts.unwrap_or(DEFAULT_ATTEMPTS);
    if !(1..=MAX_ATTEMPTS).contains(&attempts) {
        return Err(format!(
            "attempts: {attempts} is outside 1..={MAX_ATTEMPTS}"
        ));
    }
    let timeout = parse_duration("timeout", timeout, DEFAULT_TIMEOUT)?;
    let max = Duration::from_nanos(
        u64::try_from(limits.max_attempt_timeout.as_nanos()).unwrap_or(u64::MAX),
    );
    if timeout.is_zero() || timeout > max {
        return Err(format!("timeout: {timeout} is outside (0, {max}]"));
    }
    let backoff = backoff.cloned().unwrap_or_default();
    let backoff_config = backoff.config()?;
    // Validate here so the error names the argument, not the builder's field.
    backoff.policy()?;
    Ok(RetryConfig {
        max_attempts: Some(attempts),
        attempt_timeout: Some(timeout),
        deadline: Some(Duration::from_nanos(
            u64::try_from(limits.max_call_time.as_nanos()).unwrap_or(u64::MAX),
        )),
        retry_timeouts,
        ..RetryConfig::new(backoff_config)
    })
}

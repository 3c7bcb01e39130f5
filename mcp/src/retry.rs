//! The retry settings an agent gives (attempts, per-attempt timeout, backoff), turned into the
//! core's [`RetryConfig`] within the operator's limits: used by `create_breaker` for a named
//! downstream and by `reliable_http_call` for a call without one.

use reliable_core::Duration;
use reliable_core::retry::RetryConfig;

use crate::backoff::BackoffSpec;
use crate::duration::parse_duration;
use crate::ssrf::Limits;

/// Attempts by default (or the operator's ceiling, `Limits::max_attempts`, if lower).
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
    let ceiling = limits.max_attempts;
    let attempts = attempts.unwrap_or(DEFAULT_ATTEMPTS.min(ceiling));
    if !(1..=ceiling).contains(&attempts) {
        return Err(format!(
            "attempts: {attempts} is outside 1..={ceiling} (the server's ceiling of {ceiling} attempts, set by --max-attempts)"
        ));
    }
    let timeout = parse_duration("timeout", timeout, DEFAULT_TIMEOUT)?;
    let max = Duration::from_nanos(
        u64::try_from(limits.max_attempt_timeout.as_nanos()).unwrap_or(u64::MAX),
    );
    if timeout.is_zero() || timeout > max {
        return Err(format!(
            "timeout: {timeout} is outside (0, {max}] (the server's ceiling, set by --max-attempt-timeout)"
        ));
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

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(max_attempts: u32) -> Limits {
        Limits {
            max_attempts,
            ..Limits::default()
        }
    }

    fn attempts(given: Option<u32>, ceiling: u32) -> Result<Option<u32>, String> {
        config(given, None, None, true, &limits(ceiling)).map(|c| c.max_attempts)
    }

    /// The operator's ceiling, not a constant: up to it is taken, past it refused naming it and
    /// its flag.
    #[test]
    fn attempts_are_held_to_the_configured_ceiling() {
        assert_eq!(attempts(Some(5), 5), Ok(Some(5)));
        let e = attempts(Some(6), 5).unwrap_err();
        assert_eq!(
            e,
            "attempts: 6 is outside 1..=5 (the server's ceiling of 5 attempts, set by --max-attempts)"
        );
        assert_eq!(attempts(Some(6), 8), Ok(Some(6)));
        assert_eq!(attempts(Some(8), 8), Ok(Some(8)));
        let e = attempts(Some(9), 8).unwrap_err();
        assert!(
            e.contains("ceiling of 8 attempts") && e.contains("--max-attempts"),
            "{e}"
        );
        assert!(attempts(Some(0), 8).is_err());
    }

    /// The default (3) never goes over a lower ceiling: a call that names no attempts is not
    /// refused by a server started with `--max-attempts 2`.
    #[test]
    fn the_default_fits_a_lower_ceiling() {
        assert_eq!(attempts(None, 5), Ok(Some(DEFAULT_ATTEMPTS)));
        assert_eq!(attempts(None, 2), Ok(Some(2)));
        assert_eq!(attempts(None, 1), Ok(Some(1)));
    }
}

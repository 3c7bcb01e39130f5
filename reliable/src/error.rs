//! What a call returns when it does not succeed ([`Error`]), and why a config was refused
//! ([`BuildError`]).
//!
//! Each variant says what happened to the downstream, which is what the caller decides on:
//!
//! | variant | downstream called? | what to do |
//! |---|---|---|
//! | [`Open`](Error::Open) | no: the breaker is open | serve a fallback ([`OrOpen::or_open`]), or come back after `retry_after` |
//! | [`Rejected`](Error::Rejected) | not (again): refused locally (probe slots full, slow start, adaptive throttling, retry budget, ledger, concurrency or rate limit) | fall back, or fail fast |
//! | [`Timeout`](Error::Timeout) | yes, and the last attempt ran out of time | the downstream is slow |
//! | [`GaveUp`](Error::GaveUp) | yes, and the last attempt failed with `last` | look at `reason` and `last` |
//!
//! ```
//! use reliable::{Error, OrOpen};
//! use std::time::Duration;
//!
//! let refused: Result<&str, Error<std::io::Error>> =
//!     Err(Error::Open { retry_after: Some(Duration::from_secs(12)) });
//! assert_eq!(refused.or_open(|_retry_after| "cached answer").unwrap(), "cached answer");
//! ```

use reliable_core::budget::Denied;
use reliable_core::retry::GiveUpReason;
use std::fmt;
use std::time::Duration;

/// Why a call did not succeed. `E` is the caller's own error type.
#[derive(Debug)]
pub enum Error<E> {
    /// The breaker is open: the downstream was not called. `retry_after` is the time until it lets
    /// a probe through; `None` when it was forced open by hand.
    Open {
        /// Time until the breaker turns half-open.
        retry_after: Option<Duration>,
    },
    /// Refused locally before an attempt was sent. `last` is the previous attempt's error when
    /// this refusal stopped a retry (a budget that refuses, probe slots taken since).
    Rejected {
        /// Why.
        why: ShedReason,
        /// The error of the attempt before, if this refusal came on a retry.
        last: Option<E>,
    },
    /// The last attempt ran out of time: its own timeout, or the call's overall deadline.
    Timeout {
        /// Attempts made, the timed-out one included.
        attempts: u32,
    },
    /// The last attempt failed with `last` and no retry followed.
    GaveUp {
        /// Why there was no retry (a fatal error, the server's "don't retry", the attempt limit, the
        /// deadline).
        reason: GiveUpReason,
        /// The last attempt's error.
        last: E,
        /// Attempts made.
        attempts: u32,
    },
}

/// Why a call (or its retry) was shed locally while the breaker was not open: probe slots full,
/// slow start, adaptive throttling, or the retry budget. (An open breaker is [`Error::Open`]; the
/// core's [`breaker::Rejection`](reliable_core::breaker::Rejection) is the breaker's own refusal of
/// a permit, open included.)
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ShedReason {
    /// The breaker is half-open and every probe slot is taken: another caller's probe decides.
    HalfOpenFull,
    /// The breaker closed recently and is ramping traffic back up; this call fell outside the share.
    SlowStart,
    /// Adaptive throttling rejected it locally, with this probability.
    Throttled {
        /// The rejection probability at the time, in [0, 1].
        probability: f64,
    },
    /// The retry budget (or the ledger of extra attempts, as the retry budget) refused the retry.
    Budget(Denied),
    /// The ledger of extra attempts refused a half-open probe.
    Ledger(Denied),
    /// The concurrency limit is reached (a bulkhead, or an adaptive limit at this value).
    Limit {
        /// The limit at the time.
        limit: u32,
    },
    /// The client-side rate limiter refused it; a call would be admitted after `retry_after`.
    RateLimited {
        /// Time until the next call is admitted.
        retry_after: Duration,
    },
}

impl ShedReason {
    /// A short lower-case name: `half-open-full`, `slow-start`, `throttled`, `budget`, `ledger`,
    /// `limit`, `rate-limited`.
    pub const fn name(self) -> &'static str {
        match self {
            ShedReason::HalfOpenFull => "half-open-full",
            ShedReason::SlowStart => "slow-start",
            ShedReason::Throttled { .. } => "throttled",
            ShedReason::Budget(_) => "budget",
            ShedReason::Ledger(_) => "ledger",
            ShedReason::Limit { .. } => "limit",
            ShedReason::RateLimited { .. } => "rate-limited",
        }
    }

    /// Who refused, in the core's vocabulary: what the [answer table](reliable_core::answer)
    /// reads it as.
    pub const fn refuser(self) -> reliable_core::answer::Refuser {
        use reliable_core::answer::Refuser;
        match self {
            ShedReason::HalfOpenFull | ShedReason::SlowStart => Refuser::Breaker,
            ShedReason::Throttled { .. } => Refuser::Throttle,
            ShedReason::Budget(_) | ShedReason::Ledger(_) => Refuser::Budget,
            ShedReason::Limit { .. } | ShedReason::RateLimited { .. } => Refuser::Limiter,
        }
    }
}

impl fmt::Display for ShedReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ShedReason::Throttled { probability } => {
                write!(f, "throttled locally (p = {probability:.3})")
            }
            ShedReason::Budget(d) => write!(f, "retry budget ({d})"),
            ShedReason::Ledger(d) => write!(f, "ledger of extra attempts ({d})"),
            ShedReason::Limit { limit } => write!(f, "concurrency limit ({limit} in flight)"),
            ShedReason::RateLimited { retry_after } => {
                write!(f, "rate limited (next call in {retry_after:?})")
            }
            other => f.write_str(other.name()),
        }
    }
}

impl<E> Error<E> {
    /// Whether the breaker refused the call (open, forced open, probe slots full, slow start):
    /// the case a fallback is for.
    pub fn is_open(&self) -> bool {
        matches!(
            self,
            Error::Open { .. }
                | Error::Rejected {
                    why: ShedReason::HalfOpenFull | ShedReason::SlowStart,
                    ..
                }
        )
    }

    /// When the breaker will let a probe through, if it is open and knows.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Error::Open { retry_after } => *retry_after,
            _ => None,
        }
    }

    /// The last attempt's error, if an attempt failed with one.
    pub fn last(&self) -> Option<&E> {
        match self {
            Error::GaveUp { last, .. } => Some(last),
            Error::Rejected { last, .. } => last.as_ref(),
            _ => None,
        }
    }

    /// A short lower-case name of the variant, used as the `outcome` label of metrics: `open`,
    /// `rejected`, `timeout`, `gave-up`.
    pub fn name(&self) -> &'static str {
        match self {
            Error::Open { .. } => "open",
            Error::Rejected { .. } => "rejected",
            Error::Timeout { .. } => "timeout",
            Error::GaveUp { .. } => "gave-up",
        }
    }
}

impl<E: fmt::Display> fmt::Display for Error<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Open {
                retry_after: Some(d),
            } => write!(f, "circuit open; retry after {d:?}"),
            Error::Open { retry_after: None } => f.write_str("circuit forced open"),
            Error::Rejected { why, last: None } => write!(f, "rejected: {why}"),
            Error::Rejected { why, last: Some(e) } => write!(f, "rejected: {why}; last error: {e}"),
            Error::Timeout { attempts } => write!(f, "timed out (attempt {attempts})"),
            Error::GaveUp {
                reason,
                last,
                attempts,
            } => write!(f, "gave up after {attempts} attempt(s) ({reason}): {last}"),
        }
    }
}

impl<E: std::error::Error + 'static> std::error::Error for Error<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.last().map(|e| e as _)
    }
}

/// `or_open` on a call's result: the seed's `on_open` fallback, typed per call.
pub trait OrOpen<T> {
    /// Replaces a refusal by the breaker ([`Error::is_open`]) with `fallback(retry_after)`; any
    /// other result passes through.
    fn or_open(self, fallback: impl FnOnce(Option<Duration>) -> T) -> Self;
}

impl<T, E> OrOpen<T> for Result<T, Error<E>> {
    fn or_open(self, fallback: impl FnOnce(Option<Duration>) -> T) -> Self {
        match self {
            Err(e) if e.is_open() => Ok(fallback(e.retry_after())),
            other => other,
        }
    }
}

/// A configuration was refused when building a [`Reliable`](crate::Reliable) (the core's
/// [`ConfigError`](reliable_core::ConfigError), with the part of the builder it came from): the part it
/// belongs to (`breaker`, `retry`, `budget`, `throttle`, or empty for the builder's own fields)
/// and the core's error naming the field.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BuildError {
    /// The part of the config: `breaker`, `retry`, `budget`, `throttle`, or `""`.
    pub part: &'static str,
    /// The field within that part and what was wrong with it.
    pub error: reliable_core::ConfigError,
}

impl BuildError {
    pub(crate) fn new(part: &'static str, error: reliable_core::ConfigError) -> Self {
        BuildError { part, error }
    }

    /// The field as a dotted path from the builder, e.g. `breaker.failure_rate`.
    pub fn field(&self) -> String {
        if self.part.is_empty() {
            self.error.field.to_string()
        } else {
            format!("{}.{}", self.part, self.error.field)
        }
    }
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.part.is_empty() {
            write!(f, "{}", self.error)
        } else {
            write!(f, "{}.{}", self.part, self.error)
        }
    }
}

impl std::error::Error for BuildError {}

#[cfg(test)]
mod tests {
    use super::*;
    use reliable_core::Problem;

    #[test]
    fn or_open_only_replaces_breaker_refusals() {
        type R = Result<u8, Error<&'static str>>;
        let open: R = Err(Error::Open { retry_after: None });
        assert_eq!(open.or_open(|_| 7).ok(), Some(7));
        let full: R = Err(Error::Rejected {
            why: ShedReason::HalfOpenFull,
            last: None,
        });
        assert_eq!(full.or_open(|_| 7).ok(), Some(7));
        let budget: R = Err(Error::Rejected {
            why: ShedReason::Budget(Denied::Ratio),
            last: Some("503"),
        });
        assert!(budget.or_open(|_| 7).is_err());
        let gave_up: R = Err(Error::GaveUp {
            reason: GiveUpReason::MaxAttempts,
            last: "503",
            attempts: 3,
        });
        let e = gave_up.or_open(|_| 7).unwrap_err();
        assert_eq!(
            e.to_string(),
            "gave up after 3 attempt(s) (max-attempts): 503"
        );
        assert_eq!(e.last(), Some(&"503"));
    }

    #[test]
    fn config_error_names_the_dotted_field() {
        let e = BuildError::new(
            "breaker",
            reliable_core::ConfigError::new("failure_rate", Problem::Zero),
        );
        assert_eq!(e.field(), "breaker.failure_rate");
        assert_eq!(e.to_string(), "breaker.failure_rate: must not be zero");
    }
}

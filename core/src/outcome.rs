//! How an attempt ended, as the retry policy and the retry budgets see it: [`ErrorClass`] and
//! [`AttemptOutcome`].
//!
//! The caller classifies each failed attempt once (from a status code, an exception type, a timer),
//! and every piece that decides about retries reads the same class: the retry policy (retry or give
//! up, how long to wait), the budgets (what a retry costs, what counts as a failure).
//!
//! | class | retried? | counts as a failure for budgets? | typical source |
//! |---|---|---|---|
//! | [`Transient`](ErrorClass::Transient) | yes | yes | 500, 502, 408, connection reset |
//! | [`Timeout`](ErrorClass::Timeout) | yes, unless the policy says not to | yes | the per-attempt timer fired |
//! | [`Throttled`](ErrorClass::Throttled) | yes, not before the server's delay (clamped) | yes | 429, 503, 529, `RESOURCE_EXHAUSTED`, any retried status with `Retry-After` |
//! | [`Fatal`](ErrorClass::Fatal) | never | no: it says nothing about the downstream's health | 400, 404, a validation error |
//! | [`DontRetry`](ErrorClass::DontRetry) | never | yes: the server is pushing back | gRPC pushback "don't retry", `x-should-retry: false` |
//! | [`Refused`](ErrorClass::Refused) | only if the policy waits on refusals | no: nothing was sent | an open breaker, the adaptive throttle, a limiter |
//!
//! How an answer becomes a class, and every consequence of each class, is one table:
//! [`answer`](crate::answer).
//!
//! ```
//! use reliable_core::outcome::{AttemptOutcome, ErrorClass};
//! use reliable_core::Duration;
//!
//! let throttled = ErrorClass::Throttled { retry_after: Some(Duration::from_secs(2)) };
//! assert!(throttled.is_retryable());
//! assert_eq!(throttled.retry_after(), Some(Duration::from_secs(2)));
//! assert!(!ErrorClass::Fatal.counts_as_failure());
//! assert!(AttemptOutcome::Failed(ErrorClass::DontRetry).is_failure());
//! ```

use crate::time::Duration;

/// Why an attempt failed, as far as retrying is concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
pub enum ErrorClass {
    /// A failure that may well not happen again (a 5xx, a reset connection).
    Transient,
    /// The attempt ran out of time (its own timeout, not the overall deadline).
    Timeout,
    /// The downstream said it is overloaded, possibly with a delay before which not to retry
    /// (`Retry-After`, gRPC pushback). The retry policy honours the delay, clamped to its maximum.
    Throttled {
        /// The server's delay, if it gave one.
        retry_after: Option<Duration>,
    },
    /// A failure that retrying cannot fix (a bad request). Never retried; not counted against the
    /// downstream's health.
    Fatal,
    /// The server explicitly asked not to be retried. Never retried; counted as a failure.
    DontRetry,
    /// Refused locally, without sending anything (an open breaker, the adaptive throttle, a
    /// limiter). Ends the call at once unless the retry policy waits on refusals; never counted
    /// against the downstream.
    Refused {
        /// When the refuser would let a call through, if it knows.
        retry_after: Option<Duration>,
    },
}

impl ErrorClass {
    /// The class's name, as traces, logs and the other languages' faces write it (one table,
    /// here): `transient`, `timeout`, `throttled`, `fatal`, `dont-retry`, `refused`.
    pub const fn name(self) -> &'static str {
        match self {
            ErrorClass::Transient => "transient",
            ErrorClass::Timeout => "timeout",
            ErrorClass::Throttled { .. } => "throttled",
            ErrorClass::Fatal => "fatal",
            ErrorClass::DontRetry => "dont-retry",
            ErrorClass::Refused { .. } => "refused",
        }
    }

    /// Whether a retry policy may retry this failure at all.
    /// (A [`Refused`](ErrorClass::Refused) call is retried only by a policy that waits on
    /// refusals: not here.)
    pub const fn is_retryable(self) -> bool {
        !matches!(
            self,
            ErrorClass::Fatal | ErrorClass::DontRetry | ErrorClass::Refused { .. }
        )
    }

    /// Whether budgets that watch failures (the token bucket's failure cost, the retry breaker's
    /// failure rate) count it: every class except [`Fatal`](ErrorClass::Fatal) and
    /// [`Refused`](ErrorClass::Refused).
    pub const fn counts_as_failure(self) -> bool {
        !matches!(self, ErrorClass::Fatal | ErrorClass::Refused { .. })
    }

    /// The server's requested delay, for [`Throttled`](ErrorClass::Throttled); the refuser's, for
    /// [`Refused`](ErrorClass::Refused).
    pub const fn retry_after(self) -> Option<Duration> {
        match self {
            ErrorClass::Throttled { retry_after } | ErrorClass::Refused { retry_after } => {
                retry_after
            }
            _ => None,
        }
    }
}

/// How one attempt (a first try or a retry) ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum AttemptOutcome {
    /// It succeeded.
    Success,
    /// It failed, for this reason.
    Failed(ErrorClass),
    /// It was abandoned by the caller before it said anything about the downstream (the logical
    /// request was cancelled, or a scheduled retry was never sent). Counts for nothing.
    Cancelled,
}

impl AttemptOutcome {
    /// Whether this is a failure that budgets count (see [`ErrorClass::counts_as_failure`]).
    pub const fn is_failure(self) -> bool {
        match self {
            AttemptOutcome::Failed(class) => class.counts_as_failure(),
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_say_what_the_table_says() {
        let throttled = ErrorClass::Throttled { retry_after: None };
        let all = [
            ErrorClass::Transient,
            ErrorClass::Timeout,
            throttled,
            ErrorClass::Fatal,
            ErrorClass::DontRetry,
        ];
        let retryable = all.map(ErrorClass::is_retryable);
        assert_eq!(retryable, [true, true, true, false, false]);
        let failure = all.map(ErrorClass::counts_as_failure);
        assert_eq!(failure, [true, true, true, false, true]);
        assert_eq!(throttled.retry_after(), None);
        assert_eq!(ErrorClass::Transient.retry_after(), None);
        assert!(!AttemptOutcome::Success.is_failure());
        assert!(!AttemptOutcome::Cancelled.is_failure());
        assert!(!AttemptOutcome::Failed(ErrorClass::Fatal).is_failure());
        assert!(AttemptOutcome::Failed(ErrorClass::Timeout).is_failure());
    }
}

//! The layers' own errors. Services in a stack return tower's [`BoxError`]; these are the concrete
//! types inside it, to downcast to.

use std::fmt;
use std::time::Duration;

use reliable_core::budget::Denied;
use reliable_core::retry::GiveUpReason;

/// tower's error type for stacked services.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The breaker is open (or its probe slots are full): the call was not made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Open {
    /// When the breaker will let a probe through, if it knows.
    pub retry_after: Option<Duration>,
}

impl fmt::Display for Open {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.retry_after {
            Some(d) => write!(f, "circuit open; retry after {d:?}"),
            None => f.write_str("circuit open"),
        }
    }
}

impl std::error::Error for Open {}

/// The ledger of extra attempts denied a half-open probe: the call was not made, and the breaker
/// stays half-open (see [`BreakerLayer::ledger`](super::BreakerLayer::ledger)). The builder's
/// breaker refuses the same probe with
/// [`ShedReason::Ledger`](crate::ShedReason::Ledger).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProbeDenied {
    /// Why the ledger said no.
    pub denied: Denied,
}

impl fmt::Display for ProbeDenied {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "half-open probe refused by the ledger of extra attempts ({})",
            self.denied
        )
    }
}

impl std::error::Error for ProbeDenied {}

/// The adaptive throttle rejected the call locally: the call was not made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Throttled {
    /// The rejection probability at the time, in parts per million.
    pub probability_ppm: u32,
}

impl fmt::Display for Throttled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "rejected by the client-side throttle (p = {:.3})",
            f64::from(self.probability_ppm) / 1e6
        )
    }
}

impl std::error::Error for Throttled {}

/// An attempt ran out of time (its per-attempt timeout, or the overall deadline).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimedOut;

impl fmt::Display for TimedOut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("attempt timed out")
    }
}

impl std::error::Error for TimedOut {}

/// The retry layer gave up: why, after how many attempts, and the last attempt's error (for an
/// error *response*, the retry layer returns the response itself, not this).
#[derive(Debug)]
pub struct GaveUp {
    /// Why no further attempt was made.
    pub reason: GiveUpReason,
    /// Attempts made, the first included.
    pub attempts: u32,
    /// The last attempt's error.
    pub last: BoxError,
}

impl fmt::Display for GaveUp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "gave up after {} attempt(s) ({}): {}",
            self.attempts, self.reason, self.last
        )
    }
}

impl std::error::Error for GaveUp {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.last)
    }
}

/// The concurrency limit is reached: the call was not made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OverLimit {
    /// The limit at the time.
    pub limit: u32,
}

impl fmt::Display for OverLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "concurrency limit reached ({} in flight)", self.limit)
    }
}

impl std::error::Error for OverLimit {}

/// The client-side rate limit refused the call: the call was not made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OverRate {
    /// Time until a call would be admitted.
    pub retry_after: Duration,
}

impl fmt::Display for OverRate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "rate limited: next call in {:?}", self.retry_after)
    }
}

impl std::error::Error for OverRate {}

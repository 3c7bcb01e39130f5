//! The [`Window`] trait: where a breaker keeps the outcomes its rate rules look at.
//!
//! The storage is a type parameter of the breaker, so each breaker pays only for what it uses:
//! [`NoWindow`] (zero bytes, for consecutive-failure breakers), [`CountWindow`] (a bit ring over the
//! last N calls), [`TimeWindow`] (buckets over the last span of time), or [`AnyWindow`](super::AnyWindow)
//! when the kind is only known at run time (a scenario file, a settings page). Capacities are const generics; the
//! size a policy asks for is checked against them when the breaker is built.
//!
//! ```
//! use reliable_core::breaker::{CountWindow, Window, WindowSpec};
//! use reliable_core::Instant;
//!
//! let mut w = CountWindow::<64>::new(WindowSpec::Count { calls: 3 }).unwrap();
//! let t = Instant::ZERO;
//! w.record(t, true, false);
//! w.record(t, false, false);
//! w.record(t, false, true);
//! w.record(t, false, false); // evicts the first call, a failure
//! assert_eq!(w.counts(t).failures, 0);
//! assert_eq!(w.counts(t).slow, 1);
//! assert_eq!(w.counts(t).calls, 3);
//! w.record(t, true, true); // a slow failure
//! let c = w.counts(t);
//! assert_eq!((c.slow, c.slow_failures, c.slow_successes()), (2, 1, 1));
//! ```

use crate::error::{ConfigError, Problem};
use crate::time::{Duration, Instant};

/// Calls, failures and slow calls currently in a window.
///
/// The slow calls split into slow failures (counted) and slow successes (the rest,
/// [`slow_successes`](Counts::slow_successes)), as resilience4j's `getNumberOfSlowFailedCalls` and
/// `getNumberOfSlowSuccessfulCalls` read them. The split is for reading only: the slow-call rate
/// a breaker trips on counts every slow call, failed or not, as resilience4j's does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Calls recorded.
    pub calls: u64,
    /// Of which failed.
    pub failures: u64,
    /// Of which were slow (whatever their outcome).
    pub slow: u64,
    /// Of the slow calls, those that failed (never more than `slow` or `failures`).
    pub slow_failures: u64,
}

impl Counts {
    /// Of the slow calls, those that succeeded: `slow - slow_failures`.
    #[inline]
    pub const fn slow_successes(&self) -> u64 {
        self.slow.saturating_sub(self.slow_failures)
    }
}

/// Storage for the outcomes a breaker's rate rules look at.
pub trait Window: Sized {
    /// Builds storage for `spec`, or says why this type cannot hold it.
    fn new(spec: WindowSpec) -> Result<Self, ConfigError>;
    /// Records one call and returns the counts including it.
    fn record(&mut self, now: Instant, failure: bool, slow: bool) -> Counts;
    /// The counts as of `now` (time windows drop buckets that have aged out).
    fn counts(&self, now: Instant) -> Counts;
    /// Forgets every call.
    fn clear(&mut self);
    /// Whether this storage really keeps outcomes ([`NoWindow`] does not).
    fn is_recording(&self) -> bool {
        true
    }
}

/// No storage: for breakers whose only trip rule is consecutive failures. Zero bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NoWindow;

impl Window for NoWindow {
    fn new(_: WindowSpec) -> Result<Self, ConfigError> {
        Ok(NoWindow)
    }
    fn record(&mut self, _: Instant, _: bool, _: bool) -> Counts {
        Counts::default()
    }
    fn counts(&self, _: Instant) -> Counts {
        Counts::default()
    }
    fn clear(&mut self) {}
    fn is_recording(&self) -> bool {
        false
    }
}

/// The window a policy asks for, in the form window storage checks against its capacity.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WindowSpec {
    /// The last `calls` calls.
    Count {
        /// Calls counted.
        calls: u32,
    },
    /// `buckets` buckets of `width` each.
    Time {
        /// Width of one bucket (at least 1 ns).
        width: Duration,
        /// Number of buckets.
        buckets: u32,
    },
}

pub(crate) fn wrong_kind(expected: &'static str) -> ConfigError {
    ConfigError::new("window", Problem::Inconsistent(expected))
}

//! The [`Window`] trait: where a breaker keeps the outcomes its rate rules look at.
//!
//! The storage is a type parameter of the breaker, so each breaker pays only for what it uses:
//! [`NoWindow`] (zero bytes, for consecutive-failure breakers), [`CountWindow`] (a bit ring over the
//! last N calls), [`TimeWindow`] (buckets over the last span of time), or [`AnyWindow`] when the kind
//! is only known at run time (a scenario file, a settings page). Capacities are const generics; the
//! size a policy asks for is checked against them when the breaker is built.
//!
//! ```
//! use reliable_core::breaker::{CountWindow, Window, WindowSpec};
//! use reliable_core::Instant;
//!
//! let mut w = CountWindow::<1>::new(WindowSpec::Count { calls: 3 }).unwrap();
//! let t = Instant::ZERO;
//! w.record(t, true, false);
//! w.record(t, false, false);
//! w.record(t, false, true);
//! w.record(t, false, false); // evicts the first call, a failure
//! assert_eq!(w.counts(t).failures, 0);
//! assert_eq!(w.counts(t).slow, 1);
//! assert_eq!(w.counts(t).calls, 3);
//! ```

use super::config::WindowSpec;
use super::count_window::CountWindow;
use super::time_window::TimeWindow;
use crate::error::{ConfigError, Problem};
use crate::time::Instant;

/// Calls, failures and slow calls currently in a window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Calls recorded.
    pub calls: u64,
    /// Of which failed.
    pub failures: u64,
    /// Of which were slow (whatever their outcome).
    pub slow: u64,
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

/// Either kind of window, chosen by the policy at run time. `WORDS` sizes the count window
/// (64 calls per word), `BUCKETS` the time window.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AnyWindow<const WORDS: usize, const BUCKETS: usize> {
    /// A count window.
    Count(CountWindow<WORDS>),
    /// A time window.
    Time(TimeWindow<BUCKETS>),
}

impl<const WORDS: usize, const BUCKETS: usize> Window for AnyWindow<WORDS, BUCKETS> {
    fn new(spec: WindowSpec) -> Result<Self, ConfigError> {
        Ok(match spec {
            WindowSpec::Count { .. } => AnyWindow::Count(CountWindow::new(spec)?),
            WindowSpec::Time { .. } => AnyWindow::Time(TimeWindow::new(spec)?),
        })
    }
    fn record(&mut self, now: Instant, failure: bool, slow: bool) -> Counts {
        match self {
            AnyWindow::Count(w) => w.record(now, failure, slow),
            AnyWindow::Time(w) => w.record(now, failure, slow),
        }
    }
    fn counts(&self, now: Instant) -> Counts {
        match self {
            AnyWindow::Count(w) => w.counts(now),
            AnyWindow::Time(w) => w.counts(now),
        }
    }
    fn clear(&mut self) {
        match self {
            AnyWindow::Count(w) => w.clear(),
            AnyWindow::Time(w) => w.clear(),
        }
    }
}

pub(crate) fn wrong_kind(expected: &'static str) -> ConfigError {
    ConfigError::new("window", Problem::Inconsistent(expected))
}

//! [`AnyWindow`]: a count or a time window, whichever the policy asks for at run time (a scenario
//! file, a settings page), at the cost of the larger of the two.

use super::count_window::CountWindow;
use super::time_window::TimeWindow;
use super::window::{Counts, Window, WindowSpec};
use crate::error::ConfigError;
use crate::time::Instant;

/// Either kind of window, chosen by the policy at run time: a count window of up to `CALLS` calls
/// (in `WORDS = CALLS.div_ceil(64)` words) or a time window of up to `BUCKETS` buckets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AnyWindow<const CALLS: usize, const BUCKETS: usize, const WORDS: usize = 1> {
    /// A count window.
    Count(CountWindow<CALLS, WORDS>),
    /// A time window.
    Time(TimeWindow<BUCKETS>),
}

impl<const CALLS: usize, const BUCKETS: usize, const WORDS: usize> Window
    for AnyWindow<CALLS, BUCKETS, WORDS>
{
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

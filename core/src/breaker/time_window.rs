//! [`TimeWindow`]: the outcomes of the last span of time, in fixed-width buckets.
//!
//! Time is cut into buckets of `width`; the window is the current bucket and the `n - 1` before it.
//! When time moves on, buckets that aged out are subtracted from running totals and zeroed, so the
//! cost is O(1) per call amortised and O(n) at most after a long idle gap. A `now` earlier than the
//! latest seen is treated as the latest (no time passed).
//!
//! ```
//! use reliable_core::breaker::{TimeWindow, Window, WindowSpec};
//! use reliable_core::{Duration, Instant};
//!
//! // 10 s in 10 buckets of 1 s.
//! let mut w = TimeWindow::<10>::new(WindowSpec::Time { width: Duration::from_secs(1), buckets: 10 }).unwrap();
//! w.record(Instant::from_millis(500), true, false);
//! w.record(Instant::from_millis(9_500), false, false);
//! assert_eq!(w.counts(Instant::from_millis(9_999)).failures, 1);
//! // At 10 s the first bucket (0-1 s) has aged out.
//! assert_eq!(w.counts(Instant::from_secs(10)).failures, 0);
//! assert_eq!(w.counts(Instant::from_secs(10)).calls, 1);
//! ```

use super::window::{Counts, Window, WindowSpec, wrong_kind};
use crate::error::{ConfigError, Problem};
use crate::time::Instant;
use core::num::{NonZeroU32, NonZeroU64};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Bucket {
    calls: u32,
    failures: u32,
    slow: u32,
    /// Of the slow calls, those that failed: written only when a call is both.
    slow_failures: u32,
}

/// Calls of the last `n * width` (at most `BUCKETS` buckets).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TimeWindow<const BUCKETS: usize> {
    buckets: [Bucket; BUCKETS],
    // Non-zero in the type: the divisions below then have no panic path to optimize away.
    width: NonZeroU64,
    n: NonZeroU32,
    /// Index (time / width) of the newest bucket.
    epoch: u64,
    totals: Counts,
}

impl<const BUCKETS: usize> TimeWindow<BUCKETS> {
    fn slot(&self, epoch: u64) -> usize {
        (epoch % NonZeroU64::from(self.n)) as usize
    }

    /// Counts of the buckets that are still inside the window at `epoch` (> self.epoch).
    fn expired_between(&self, new_epoch: u64) -> Counts {
        let steps = new_epoch - self.epoch;
        if steps >= u64::from(self.n.get()) {
            return self.totals;
        }
        let mut gone = Counts::default();
        for e in self.epoch + 1..=new_epoch {
            if let Some(b) = self.buckets.get(self.slot(e)) {
                gone.calls += u64::from(b.calls);
                gone.failures += u64::from(b.failures);
                gone.slow += u64::from(b.slow);
                gone.slow_failures += u64::from(b.slow_failures);
            }
        }
        gone
    }

    fn advance(&mut self, now: Instant) {
        let epoch = now.as_nanos() / self.width;
        if epoch <= self.epoch {
            return;
        }
        if epoch - self.epoch >= u64::from(self.n.get()) {
            self.clear();
        } else {
            for e in self.epoch + 1..=epoch {
                let slot = self.slot(e);
                if let Some(b) = self.buckets.get_mut(slot) {
                    self.totals.calls -= u64::from(b.calls);
                    self.totals.failures -= u64::from(b.failures);
                    self.totals.slow -= u64::from(b.slow);
                    self.totals.slow_failures -= u64::from(b.slow_failures);
                    *b = Bucket::default();
                }
            }
        }
        self.epoch = epoch;
    }
}

impl<const BUCKETS: usize> Window for TimeWindow<BUCKETS> {
    fn new(spec: WindowSpec) -> Result<Self, ConfigError> {
        let WindowSpec::Time { width, buckets } = spec else {
            return Err(wrong_kind(
                "the policy asks for a count window; this breaker has a TimeWindow",
            ));
        };
        let Some(n) = NonZeroU32::new(buckets) else {
            return Err(ConfigError::new("window.buckets", Problem::Zero));
        };
        if buckets as usize > BUCKETS {
            return Err(ConfigError::new(
                "window.buckets",
                Problem::ExceedsCapacity {
                    requested: u64::from(buckets),
                    capacity: BUCKETS as u64,
                },
            ));
        }
        let Some(width) = NonZeroU64::new(width.as_nanos()) else {
            return Err(ConfigError::new("window.span", Problem::Zero));
        };
        Ok(TimeWindow {
            buckets: [Bucket::default(); BUCKETS],
            width,
            n,
            epoch: 0,
            totals: Counts::default(),
        })
    }

    fn record(&mut self, now: Instant, failure: bool, slow: bool) -> Counts {
        self.advance(now);
        let slot = self.slot(self.epoch);
        if let Some(b) = self.buckets.get_mut(slot)
            && let Some(calls) = b.calls.checked_add(1)
        {
            // A bucket that is full (4 billion calls) stops counting rather than wrapping.
            b.calls = calls;
            b.failures += u32::from(failure);
            b.slow += u32::from(slow);
            self.totals.calls += 1;
            self.totals.failures += u64::from(failure);
            self.totals.slow += u64::from(slow);
            if failure & slow {
                b.slow_failures += 1;
                self.totals.slow_failures += 1;
            }
        }
        self.totals
    }

    fn counts(&self, now: Instant) -> Counts {
        let epoch = now.as_nanos() / self.width;
        if epoch <= self.epoch {
            return self.totals;
        }
        let gone = self.expired_between(epoch);
        Counts {
            calls: self.totals.calls - gone.calls,
            failures: self.totals.failures - gone.failures,
            slow: self.totals.slow - gone.slow,
            slow_failures: self.totals.slow_failures - gone.slow_failures,
        }
    }

    fn clear(&mut self) {
        self.buckets = [Bucket::default(); BUCKETS];
        self.totals = Counts::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Duration;

    #[test]
    fn matches_a_plain_list_of_timestamps() {
        let width = 250u64;
        let n = 8u32;
        let mut w = TimeWindow::<8>::new(WindowSpec::Time {
            width: Duration::from_nanos(width),
            buckets: n,
        })
        .unwrap();
        let mut model: std::vec::Vec<(u64, bool, bool)> = std::vec::Vec::new();
        let mut x = 99u64;
        let mut t = 0u64;
        for _ in 0..3_000 {
            x = crate::sample::splitmix64(x);
            // Mostly small steps, sometimes a jump past the whole window, sometimes backwards.
            match x % 20 {
                0 => t += 5_000,
                1 => t = t.saturating_sub(300),
                _ => t += x % 97,
            }
            let seen = model.iter().map(|m| m.0).max().unwrap_or(0).max(t);
            let (f, s) = (x & 32 != 0, x & 64 != 0);
            let got = w.record(Instant::from_nanos(t), f, s);
            model.push((seen, f, s));
            let current = seen / width;
            let live: std::vec::Vec<_> = model
                .iter()
                .filter(|m| m.0 / width + u64::from(n) > current)
                .collect();
            let want = Counts {
                calls: live.len() as u64,
                failures: live.iter().filter(|m| m.1).count() as u64,
                slow: live.iter().filter(|m| m.2).count() as u64,
                slow_failures: live.iter().filter(|m| m.1 && m.2).count() as u64,
            };
            assert_eq!(got, want, "t = {t}");
            // Reading ahead agrees with what recording there would drop.
            let ahead = seen + x % 1_500;
            let live_ahead: std::vec::Vec<_> = model
                .iter()
                .filter(|m| m.0 / width + u64::from(n) > ahead / width)
                .collect();
            let c = w.counts(Instant::from_nanos(ahead));
            assert_eq!(c.calls, live_ahead.len() as u64);
            let slow_failures = live_ahead.iter().filter(|m| m.1 && m.2).count() as u64;
            assert_eq!(c.slow_failures, slow_failures);
        }
    }

    #[test]
    fn rejects_bad_specs() {
        let spec = |buckets| WindowSpec::Time {
            width: Duration::from_secs(1),
            buckets,
        };
        assert!(TimeWindow::<4>::new(spec(5)).is_err());
        assert!(TimeWindow::<4>::new(spec(0)).is_err());
        assert!(TimeWindow::<4>::new(WindowSpec::Count { calls: 3 }).is_err());
        assert!(TimeWindow::<4>::new(spec(4)).is_ok());
    }
}

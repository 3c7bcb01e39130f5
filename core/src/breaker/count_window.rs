//! [`CountWindow`]: the outcomes of the last N calls as a bit ring.
//!
//! Two bits per call (failed, slow) in `[u64; WORDS]` rings, with running counts that are adjusted
//! when a call is evicted, so recording and reading are O(1) and a 64-call window costs 24 bytes.
//! `WORDS` is the capacity in units of 64 calls; a policy may ask for any size up to it.
//!
//! ```
//! use reliable_core::breaker::{CountWindow, Window, WindowSpec};
//! use reliable_core::Instant;
//!
//! // Room for 128 calls, used as a window of 100.
//! let mut w = CountWindow::<2>::new(WindowSpec::Count { calls: 100 }).unwrap();
//! for i in 0..150 {
//!     w.record(Instant::ZERO, i % 2 == 0, false);
//! }
//! let c = w.counts(Instant::ZERO);
//! assert_eq!((c.calls, c.failures), (100, 50));
//! assert!(CountWindow::<1>::new(WindowSpec::Count { calls: 100 }).is_err());
//! ```

use super::config::WindowSpec;
use super::window::{Counts, Window, wrong_kind};
use crate::error::{ConfigError, Problem};
use crate::time::Instant;

/// The last `size` calls (at most `64 * WORDS`, and at most 65,535) as two bit rings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CountWindow<const WORDS: usize> {
    failed: [u64; WORDS],
    slow: [u64; WORDS],
    size: u16,
    len: u16,
    /// Next position to write; once full, also the oldest call.
    head: u16,
    failures: u16,
    slows: u16,
}

impl<const WORDS: usize> CountWindow<WORDS> {
    /// How many calls this type can hold.
    pub const CAPACITY: usize = if 64 * WORDS < u16::MAX as usize {
        64 * WORDS
    } else {
        u16::MAX as usize
    };
}

impl<const WORDS: usize> Window for CountWindow<WORDS> {
    fn new(spec: WindowSpec) -> Result<Self, ConfigError> {
        let WindowSpec::Count { calls } = spec else {
            return Err(wrong_kind(
                "the policy asks for a time window; this breaker has a CountWindow",
            ));
        };
        if calls == 0 {
            return Err(ConfigError::new("window.calls", Problem::Zero));
        }
        if calls as usize > Self::CAPACITY {
            return Err(ConfigError::new(
                "window.calls",
                Problem::ExceedsCapacity {
                    requested: u64::from(calls),
                    capacity: Self::CAPACITY as u64,
                },
            ));
        }
        Ok(CountWindow {
            failed: [0; WORDS],
            slow: [0; WORDS],
            size: calls as u16,
            len: 0,
            head: 0,
            failures: 0,
            slows: 0,
        })
    }

    #[inline]
    fn record(&mut self, _: Instant, failure: bool, slow: bool) -> Counts {
        let pos = usize::from(self.head);
        let (word, shift) = (pos / 64, pos % 64);
        // Overwrite the call at `pos` (the oldest once the window is full). Until then the bits
        // there are clear, so subtracting the old bits is right in both cases, without a branch.
        if let (Some(f), Some(s)) = (self.failed.get_mut(word), self.slow.get_mut(word)) {
            let (old_f, old_s) = ((*f >> shift) & 1, (*s >> shift) & 1);
            *f = (*f & !(1 << shift)) | (u64::from(failure) << shift);
            *s = (*s & !(1 << shift)) | (u64::from(slow) << shift);
            self.failures = self.failures - old_f as u16 + u16::from(failure);
            self.slows = self.slows - old_s as u16 + u16::from(slow);
        }
        self.len += u16::from(self.len < self.size);
        self.head = if self.head + 1 == self.size {
            0
        } else {
            self.head + 1
        };
        self.counts(Instant::ZERO)
    }

    #[inline]
    fn counts(&self, _: Instant) -> Counts {
        Counts {
            calls: u64::from(self.len),
            failures: u64::from(self.failures),
            slow: u64::from(self.slows),
        }
    }

    fn clear(&mut self) {
        self.failed = [0; WORDS];
        self.slow = [0; WORDS];
        self.len = 0;
        self.head = 0;
        self.failures = 0;
        self.slows = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_a_plain_deque_on_every_size() {
        for size in [1u32, 2, 5, 63, 64, 65, 100, 128] {
            let mut w = CountWindow::<2>::new(WindowSpec::Count { calls: size }).unwrap();
            let mut model = std::collections::VecDeque::new();
            let mut x = 12345u64;
            for _ in 0..500 {
                x = crate::sample::splitmix64(x);
                let (f, s) = (x & 1 == 1, x & 6 == 6);
                model.push_back((f, s));
                if model.len() > size as usize {
                    model.pop_front();
                }
                let got = w.record(Instant::ZERO, f, s);
                let want = Counts {
                    calls: model.len() as u64,
                    failures: model.iter().filter(|c| c.0).count() as u64,
                    slow: model.iter().filter(|c| c.1).count() as u64,
                };
                assert_eq!(got, want, "size {size}");
            }
            w.clear();
            assert_eq!(w.counts(Instant::ZERO), Counts::default());
        }
    }

    #[test]
    fn rejects_sizes_over_capacity_and_time_specs() {
        let e = CountWindow::<1>::new(WindowSpec::Count { calls: 65 }).unwrap_err();
        assert_eq!(
            e.problem,
            Problem::ExceedsCapacity {
                requested: 65,
                capacity: 64
            }
        );
        let time = WindowSpec::Time {
            width: crate::Duration::from_secs(1),
            buckets: 2,
        };
        assert!(CountWindow::<1>::new(time).is_err());
        assert_eq!(CountWindow::<2000>::CAPACITY, 65_535);
    }
}

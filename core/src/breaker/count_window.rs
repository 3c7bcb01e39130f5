//! [`CountWindow`]: the outcomes of the last N calls as a bit ring.
//!
//! Two bits per call (failed, slow) in `[u64; WORDS]` rings, with running counts that are adjusted
//! when a call is evicted, so recording and reading are O(1) and a 64-call window costs 32 bytes.
//! Slow failures are not kept apart: they are the calls with both bits set, counted (one `AND` and
//! one `popcount` a word) only when the counts are read with a slow call in the window, so
//! recording writes nothing for them.
//!
//! `CALLS` is the capacity in calls; a policy may ask for any size up to it. `WORDS`, the number of
//! 64-bit words that hold `CALLS` bits, must be `CALLS.div_ceil(64)`: stable Rust cannot compute an
//! array length from another const parameter, so it is written out (it defaults to 1, right for up
//! to 64 calls) and checked when the code is built. `CountWindow<100>` fails to build with "a
//! CountWindow of CALLS calls needs WORDS = CALLS.div_ceil(64)"; `CountWindow<100, 2>` builds.
//!
//! ```
//! use reliable_core::breaker::{CountWindow, Window, WindowSpec};
//! use reliable_core::Instant;
//!
//! // Room for 100 calls (two words of bits).
//! let mut w = CountWindow::<100, 2>::new(WindowSpec::Count { calls: 100 }).unwrap();
//! for i in 0..150 {
//!     w.record(Instant::ZERO, i % 2 == 0, false);
//! }
//! let c = w.counts(Instant::ZERO);
//! assert_eq!((c.calls, c.failures), (100, 50));
//! // A policy asking for more calls than the type holds is refused when the breaker is built.
//! assert!(CountWindow::<64>::new(WindowSpec::Count { calls: 100 }).is_err());
//! ```
//!
//! ```compile_fail,E0080
//! use reliable_core::breaker::{CountWindow, Window, WindowSpec};
//! // 100 calls do not fit in one word: a build error, not a run-time one.
//! let w = CountWindow::<100>::new(WindowSpec::Count { calls: 100 });
//! ```

use super::window::{Counts, Window, WindowSpec, wrong_kind};
use crate::error::{ConfigError, Problem};
use crate::time::Instant;

/// The last `size` calls (at most `CALLS`, and at most 65,535) as two bit rings of `WORDS` words
/// (`WORDS = CALLS.div_ceil(64)`, checked at build time).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CountWindow<const CALLS: usize, const WORDS: usize = 1> {
    failed: [u64; WORDS],
    slow: [u64; WORDS],
    size: u16,
    len: u16,
    /// Next position to write; once full, also the oldest call.
    head: u16,
    /// Failed calls in the low 16 bits, slow calls in the high 16: one word, zero when the window
    /// holds nothing bad.
    bad: u32,
}

/// One slow call in [`CountWindow::bad`].
const SLOW: u32 = 1 << 16;

/// The number of 64-bit words that hold `calls` bits: the `WORDS` of a window of `calls` calls.
pub const fn words_for(calls: usize) -> usize {
    calls.div_ceil(64)
}

/// Checks, at build time, that `WORDS` words hold exactly `CALLS` calls' bits and that `CALLS` fits
/// the 16-bit positions.
pub(crate) const fn check_count_capacity<const CALLS: usize, const WORDS: usize>() {
    assert!(CALLS > 0, "a CountWindow holds at least one call");
    assert!(
        CALLS <= u16::MAX as usize,
        "a CountWindow holds at most 65,535 calls"
    );
    assert!(
        WORDS == words_for(CALLS),
        "a CountWindow of CALLS calls needs WORDS = CALLS.div_ceil(64): CountWindow<100, 2>, CountWindow<256, 4>"
    );
}

impl<const CALLS: usize, const WORDS: usize> CountWindow<CALLS, WORDS> {
    /// How many calls this type can hold: `CALLS`.
    pub const CAPACITY: usize = CALLS;

    /// The counts of a window of `len` calls whose running counts are `bad`.
    #[inline(always)]
    fn counts_of(&self, len: u16, bad: u32) -> Counts {
        // Only with a slow call in the window can a call have both bits set. (A breaker's rules
        // never read the split, so where the counts only feed them this is compiled away.)
        let slow_failures = if bad >= SLOW {
            let both = self.failed.iter().zip(&self.slow).map(|(f, s)| f & s);
            u64::from(both.map(u64::count_ones).sum::<u32>())
        } else {
            0
        };
        Counts {
            calls: u64::from(len),
            failures: u64::from(bad % SLOW),
            slow: u64::from(bad / SLOW),
            slow_failures,
        }
    }
}

impl<const CALLS: usize, const WORDS: usize> Window for CountWindow<CALLS, WORDS> {
    fn new(spec: WindowSpec) -> Result<Self, ConfigError> {
        const { check_count_capacity::<CALLS, WORDS>() };
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
            bad: 0,
        })
    }

    #[inline]
    fn record(&mut self, _: Instant, failure: bool, slow: bool) -> Counts {
        // Every field is read once into a local and written at most once: a field re-read after
        // a narrower store to its neighbour would be a wide load that store forwarding cannot
        // serve.
        let (size, mut len, head, bad) = (self.size, self.len, self.head, self.bad);
        // Once the window is full (most calls), its length is not written again.
        if len < size {
            len += 1;
            self.len = len;
        }
        // A healthy downstream's common case: a good call into a window with no bit set. Every
        // bit is clear, so which clear bit the call replaces does not matter: the position need
        // not move. A bit set later is still evicted exactly `size` calls after it was written,
        // because from then on every call moves the position.
        if (u32::from(failure | slow) | bad) == 0 {
            return Counts {
                calls: u64::from(len),
                ..Counts::default()
            };
        }
        let pos = usize::from(head);
        // Overwrite the call at `pos` (the oldest once the window is full; until then its bits
        // are clear, so subtracting the old bit is right in both cases).
        let mut bad = overwrite(&mut self.failed, pos, failure, bad, 1);
        // A ring with no bit set, given a clear bit, stays as it is. A policy without a slow-call
        // rule never reports a slow call, so its slow ring is never read or written.
        if slow || bad >= SLOW {
            bad = overwrite(&mut self.slow, pos, slow, bad, SLOW);
        }
        self.bad = bad;
        self.head = if head + 1 == size { 0 } else { head + 1 };
        self.counts_of(len, bad)
    }

    #[inline]
    fn counts(&self, _: Instant) -> Counts {
        self.counts_of(self.len, self.bad)
    }

    fn clear(&mut self) {
        self.failed = [0; WORDS];
        self.slow = [0; WORDS];
        self.len = 0;
        self.head = 0;
        self.bad = 0;
    }
}

/// Puts `bit` at position `pos` of `ring`; returns `bad` with `one` added or taken for a set bit
/// put or a set bit replaced. The word is written only when the bit changes: in a steady stream
/// of outcomes the call evicted has most often the same outcome as the call recorded.
#[inline(always)]
fn overwrite<const WORDS: usize>(
    ring: &mut [u64; WORDS],
    pos: usize,
    bit: bool,
    bad: u32,
    one: u32,
) -> u32 {
    let Some(word) = ring.get_mut(pos / 64) else {
        return bad;
    };
    let old = *word >> (pos % 64) & 1 != 0;
    if old == bit {
        return bad;
    }
    *word ^= 1 << (pos % 64);
    if bit { bad + one } else { bad - one }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// How the outcomes of a test run are drawn.
    #[derive(Clone, Copy, Debug)]
    enum Mix {
        /// Half failed, a quarter slow.
        Dense,
        /// Runs of good calls empty the window now and then (the position stands still while it
        /// is empty).
        Sparse,
        /// A fifth failed, none slow: a policy without a slow-call rule.
        NeverSlow,
    }

    #[test]
    fn matches_a_plain_deque_on_every_size() {
        for (size, mix) in [1u32, 2, 5, 63, 64, 65, 100, 128]
            .into_iter()
            .flat_map(|size| [Mix::Dense, Mix::Sparse, Mix::NeverSlow].map(|mix| (size, mix)))
        {
            let mut w = CountWindow::<128, 2>::new(WindowSpec::Count { calls: size }).unwrap();
            let mut model = std::collections::VecDeque::new();
            let mut x = 12345u64;
            for _ in 0..2_000 {
                x = crate::sample::splitmix64(x);
                let (f, s) = match mix {
                    Mix::Dense => (x & 1 == 1, x & 6 == 6),
                    Mix::Sparse => (x.is_multiple_of(97), x % 89 == 1),
                    Mix::NeverSlow => (x.is_multiple_of(5), false),
                };
                model.push_back((f, s));
                if model.len() > size as usize {
                    model.pop_front();
                }
                let got = w.record(Instant::ZERO, f, s);
                let want = Counts {
                    calls: model.len() as u64,
                    failures: model.iter().filter(|c| c.0).count() as u64,
                    slow: model.iter().filter(|c| c.1).count() as u64,
                    slow_failures: model.iter().filter(|c| c.0 && c.1).count() as u64,
                };
                assert_eq!(got, want, "size {size}, {mix:?}");
                assert_eq!(w.counts(Instant::ZERO), want, "size {size}, {mix:?}");
                // Each ring holds exactly the window's bits: nothing stale is left set.
                let ones =
                    |ring: &[u64; 2]| u64::from(ring.iter().map(|w| w.count_ones()).sum::<u32>());
                assert_eq!(ones(&w.failed), want.failures, "size {size}, {mix:?}");
                assert_eq!(ones(&w.slow), want.slow, "size {size}, {mix:?}");
            }
            w.clear();
            assert_eq!(w.counts(Instant::ZERO), Counts::default());
        }
    }

    #[test]
    fn rejects_sizes_over_capacity_and_time_specs() {
        let e = CountWindow::<64>::new(WindowSpec::Count { calls: 65 }).unwrap_err();
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
        assert!(CountWindow::<64>::new(time).is_err());
        assert_eq!(CountWindow::<100, 2>::CAPACITY, 100);
    }
}

//! [`Stats`]: an instance's call totals, counted without a write that every core shares.
//!
//! Every clone of a `Reliable`, on every thread, counts into the same totals. One atomic counter
//! per total would be a cache line that every call on every core writes: with a closed breaker's
//! success writing nothing shared, that line would be the one thing the cores fight over. So each
//! thread counts in a stripe of its own (past [`STRIPES`] threads, some share one), each stripe on
//! cache lines of its own, and reading a total sums the stripes. The price is memory: 2 KiB per
//! instance (16 stripes of 128 bytes), which a registry of a thousand downstreams pays as 2 MiB.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};

/// Stripes per instance: a power of two.
const STRIPES: usize = 16;

/// A total kept by [`Stats`].
#[derive(Clone, Copy, Debug)]
pub(crate) enum Total {
    Succeeded,
    Failed,
    Refused,
    Cancelled,
    Retries,
    Hedges,
    HedgesWon,
}

/// One thread's counts, alone on its cache lines (128 bytes: adjacent-line prefetching pairs 64-byte
/// lines on x86).
#[derive(Debug, Default)]
#[repr(align(128))]
struct Stripe([AtomicU64; 7]);

/// Totals since the instance was built.
#[derive(Debug, Default)]
pub(crate) struct Stats {
    stripes: [Stripe; STRIPES],
}

impl Stats {
    /// Counts one more in `total`, on the calling thread's stripe.
    #[inline]
    pub fn bump(&self, total: Total) {
        let stripe = &self.stripes[stripe() & (STRIPES - 1)];
        stripe.0[total as usize].fetch_add(1, Relaxed);
    }

    /// `total` as of now: exact once the calls counting into it have returned.
    pub fn total(&self, total: Total) -> u64 {
        self.stripes
            .iter()
            .map(|s| s.0[total as usize].load(Relaxed))
            .fold(0, u64::wrapping_add)
    }
}

/// The calling thread's stripe: threads take the next one as they first count.
#[inline]
fn stripe() -> usize {
    thread_local!(static STRIPE: Cell<usize> = const { Cell::new(usize::MAX) });
    // A constant thread-local without a destructor is a plain load, and is there until the
    // thread ends.
    let s = STRIPE.get();
    if s != usize::MAX {
        s
    } else {
        first_stripe(&STRIPE)
    }
}

#[cold]
fn first_stripe(key: &'static std::thread::LocalKey<Cell<usize>>) -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let s = NEXT.fetch_add(1, Relaxed) & (STRIPES - 1);
    key.set(s);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_from_many_threads_are_exact() {
        let stats = Stats::default();
        std::thread::scope(|s| {
            for t in 0..40u64 {
                let stats = &stats;
                s.spawn(move || {
                    for i in 0..1_000 {
                        stats.bump(Total::Succeeded);
                        if (i + t) % 4 == 0 {
                            stats.bump(Total::Retries);
                        }
                    }
                });
            }
        });
        assert_eq!(stats.total(Total::Succeeded), 40_000);
        assert_eq!(stats.total(Total::Retries), 10_000);
        assert_eq!(stats.total(Total::Failed), 0);
        // Threads spread over the stripes.
        let used = stats.stripes.iter().filter(|s| s.0[0].load(Relaxed) > 0);
        assert!(used.count() > 1);
    }
}

//! [`AtomicWindow`]: the windows of a [`SharedBreaker`](super::SharedBreaker), recorded through `&self`
//! from many threads without locks.
//!
//! Each kind keeps the same outcomes as its `&mut` counterpart and, for any sequential history, gives
//! the same counts: [`AtomicCountWindow`] is [`CountWindow`](super::CountWindow)'s bit ring in atomic
//! words, [`AtomicTimeWindow`] is [`TimeWindow`](super::TimeWindow)'s buckets in atomic words,
//! [`AtomicAnyWindow`] picks one at run time, and [`NoWindow`] keeps nothing.
//!
//! ```
//! use reliable_core::breaker::{AtomicCountWindow, AtomicWindow, WindowSpec};
//! use reliable_core::Instant;
//!
//! let w = AtomicCountWindow::<64>::new(WindowSpec::Count { calls: 3 }).unwrap();
//! std::thread::scope(|s| {
//!     s.spawn(|| w.record(Instant::ZERO, true, false));
//!     s.spawn(|| w.record(Instant::ZERO, false, false));
//! });
//! let c = w.counts(Instant::ZERO);
//! assert_eq!((c.calls, c.failures), (2, 1));
//! ```
//!
//! Under concurrency the counts are those of *some* order of the calls, give or take the calls still
//! being written: a reader racing a writer may miss its call, and a call racing
//! [`clear`](AtomicWindow::clear) may survive it. Counts never exceed the window
//! (failures and slow calls never exceed calls, slow failures neither of them). One limit of the count window's bit ring: two
//! calls a lap apart (more calls than the window holds, recorded while one call is still writing
//! its bits) write the same position at once, and their bits may interleave so that both outcomes
//! are lost, or one call's failure and the other's slowness are kept as one slow failure. The
//! model checks (`loom`, `breaker/model_check.rs`) show the counts are always those
//! of some order of the calls while the calls being written fit in the window, and find the lap
//! race in a window of 2 with 3 threads.

use core::num::NonZeroU64;
use core::sync::atomic::Ordering::{Acquire, Relaxed, Release};

use super::count_window::CountWindow;
use super::window::{Counts, NoWindow, WindowSpec, wrong_kind};
use crate::error::{ConfigError, Problem};
use crate::sync::{AtomicU64, zeroed};
use crate::time::Instant;

/// Storage for the outcomes a [`SharedBreaker`](super::SharedBreaker)'s rate rules look at, written
/// through `&self` by many threads.
///
/// Recording returns only the number of calls in the window; the breaker asks for the failures and
/// slow calls separately, and only for those its rules read, once the window holds enough calls
/// to decide. (Counting them is the costly part of an atomic bit ring.)
pub trait AtomicWindow: Sized + Sync {
    /// Builds storage for `spec`, or says why this type cannot hold it.
    fn new(spec: WindowSpec) -> Result<Self, ConfigError>;
    /// Records one call; returns the number of calls in the window including it.
    fn record(&self, now: Instant, failure: bool, slow: bool) -> u64;
    /// The counts a breaker's rules read, as of `now`: failures counted only if `failures` and
    /// slow calls only if `slow` (0 otherwise); slow failures, which no rule reads, never (0).
    fn counts_of(&self, now: Instant, failures: bool, slow: bool) -> Counts;
    /// Every count as of `now`, slow failures included (time windows drop buckets that have aged
    /// out).
    fn counts(&self, now: Instant) -> Counts;
    /// Records a good call (neither failed nor slow) if the window holds no failed and no slow
    /// call, and says whether it did; records nothing otherwise. `true` means the counts with this
    /// call hold no bad call, so no rate rule can fire on them: a breaker need not count them.
    /// The default records nothing and answers `false`.
    #[inline]
    fn record_good_if_clear(&self, now: Instant) -> bool {
        let _ = now;
        false
    }
    /// Forgets every call.
    fn clear(&self);
    /// Whether this storage really keeps outcomes ([`NoWindow`] does not).
    fn is_recording(&self) -> bool {
        true
    }
}

impl AtomicWindow for NoWindow {
    fn new(_: WindowSpec) -> Result<Self, ConfigError> {
        Ok(NoWindow)
    }
    #[inline]
    fn record(&self, _: Instant, _: bool, _: bool) -> u64 {
        0
    }
    fn counts_of(&self, _: Instant, _: bool, _: bool) -> Counts {
        Counts::default()
    }
    fn counts(&self, _: Instant) -> Counts {
        Counts::default()
    }
    #[inline]
    fn record_good_if_clear(&self, _: Instant) -> bool {
        true
    }
    fn clear(&self) {}
    fn is_recording(&self) -> bool {
        false
    }
}

/// The last `size` calls (at most `CALLS`, and at most 65,535) as two rings of atomic bits, in
/// `WORDS = CALLS.div_ceil(64)` words (checked at build time, as for [`CountWindow`]).
///
/// A call claims its position with one `fetch_add` on a call counter, then sets its bits with
/// `fetch_or` (a failure) or clears them with `fetch_and` (only if set: a success over a success
/// writes nothing). Failures and slow calls are counted by `popcount` over the ring, so the counts
/// can never drift from the bits, whatever the interleaving; recording costs O(`WORDS`). Slow
/// failures are the positions with both bits set, counted only by [`counts`](AtomicWindow::counts):
/// recording writes nothing for them.
#[derive(Debug)]
#[repr(C)]
pub struct AtomicCountWindow<const CALLS: usize, const WORDS: usize = 1> {
    /// Calls recorded since the last clear; the next position is `total % size`. Written by every
    /// call, so on a cache line of its own: the bits, read by every call but written only when a
    /// call's outcome differs from the one it replaces, stay shared by the cores.
    total: Line<AtomicU64>,
    failed: [AtomicU64; WORDS],
    slow: [AtomicU64; WORDS],
    size: u64,
    /// `size - 1` when `size` is a power of two (positions by masking), else 0.
    mask: u64,
    /// Otherwise `u64::MAX / size + 1`: positions by Lemire's multiply-shift remainder, exact for
    /// totals below 2³² (a division costs tens of cycles on every call; a multiply a few).
    reciprocal: u64,
    /// Ring words in use: `ceil(size / 64)`.
    words: usize,
}

impl<const CALLS: usize, const WORDS: usize> AtomicCountWindow<CALLS, WORDS> {
    /// How many calls this type can hold: `CALLS`.
    pub const CAPACITY: usize = CALLS;

    /// Whether no call in the window failed or was slow.
    #[inline]
    fn clear_bits(&self) -> bool {
        let words = |ring: &[AtomicU64]| {
            let ring = ring.get(..self.words).unwrap_or(ring);
            ring.iter().all(|w| w.load(Relaxed) == 0)
        };
        words(&self.failed) && words(&self.slow)
    }

    #[inline]
    fn counts_after(&self, total: u64, failures: bool, slow: bool) -> Counts {
        let calls = total.min(self.size);
        let ones = |ring: &[AtomicU64]| -> u64 {
            let ring = ring.get(..self.words).unwrap_or(ring);
            if ring.iter().all(|w| w.load(Relaxed) == 0) {
                // No bit set (the usual case for failures of a healthy downstream): no counting.
                return 0;
            }
            let n: u32 = ring.iter().map(|w| w.load(Relaxed).count_ones()).sum();
            // A call racing a clear can leave a bit beyond `calls` for a moment.
            u64::from(n).min(calls)
        };
        Counts {
            calls,
            failures: if failures { ones(&self.failed) } else { 0 },
            slow: if slow { ones(&self.slow) } else { 0 },
            slow_failures: 0,
        }
    }

    /// Every count, each word of each ring loaded once, so that the slow failures (both bits set)
    /// never exceed the failures or the slow calls read beside them.
    fn all_counts(&self, total: u64) -> Counts {
        let calls = total.min(self.size);
        let (failed, slow) = (
            self.failed.get(..self.words).unwrap_or(&self.failed),
            self.slow.get(..self.words).unwrap_or(&self.slow),
        );
        let (mut f, mut s, mut both) = (0u32, 0u32, 0u32);
        for (fw, sw) in failed.iter().zip(slow) {
            let (fw, sw) = (fw.load(Relaxed), sw.load(Relaxed));
            f += fw.count_ones();
            s += sw.count_ones();
            both += (fw & sw).count_ones();
        }
        // A call racing a clear can leave a bit beyond `calls` for a moment.
        let (failures, slow) = (u64::from(f).min(calls), u64::from(s).min(calls));
        Counts {
            calls,
            failures,
            slow,
            slow_failures: u64::from(both).min(failures).min(slow),
        }
    }
}

/// A value alone on a 64-byte cache line, so that writing it does not take its neighbours' line
/// away from the other cores.
#[derive(Debug)]
#[repr(C, align(64))]
pub(crate) struct Line<T>(pub(crate) T);

impl<T> core::ops::Deref for Line<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// `n % size`, where `mask` is `size - 1` for a power of two (else 0) and `reciprocal` is
/// `u64::MAX / size + 1` otherwise (else 0). Without a division for the first 2³² calls.
#[inline(always)]
fn position(n: u64, size: u64, mask: u64, reciprocal: u64) -> u64 {
    if reciprocal == 0 {
        n & mask
    } else if n <= u64::from(u32::MAX) {
        // Lemire, Kaser and Kurz, "Faster remainder by direct computation" (2019): exact for
        // 32-bit numerators and divisors.
        let low = reciprocal.wrapping_mul(n);
        ((u128::from(low) * u128::from(size)) >> 64) as u64
    } else {
        n % size
    }
}

#[inline]
fn put_bit(ring: &[AtomicU64], word: usize, mask: u64, on: bool) {
    if let Some(w) = ring.get(word) {
        if on {
            w.fetch_or(mask, Relaxed);
        } else if w.load(Relaxed) & mask != 0 {
            w.fetch_and(!mask, Relaxed);
        }
    }
}

impl<const CALLS: usize, const WORDS: usize> AtomicWindow for AtomicCountWindow<CALLS, WORDS> {
    fn new(spec: WindowSpec) -> Result<Self, ConfigError> {
        // The same checks, and errors, as the `&mut` window.
        let WindowSpec::Count { calls } = spec else {
            return Err(wrong_kind(
                "the policy asks for a time window; this breaker has an AtomicCountWindow",
            ));
        };
        <CountWindow<CALLS, WORDS> as super::Window>::new(spec)?;
        Ok(AtomicCountWindow {
            total: Line(AtomicU64::new(0)),
            failed: zeroed(),
            slow: zeroed(),
            size: u64::from(calls),
            mask: if calls.is_power_of_two() {
                u64::from(calls) - 1
            } else {
                0
            },
            reciprocal: if calls.is_power_of_two() {
                0
            } else {
                u64::MAX / u64::from(calls) + 1
            },
            words: (calls as usize).div_ceil(64),
        })
    }

    #[inline]
    fn record(&self, _: Instant, failure: bool, slow: bool) -> u64 {
        // A healthy downstream's common case: a good call into a full window with no bit set.
        // As in `CountWindow`, every bit is clear, so which clear bit the call would replace does
        // not matter: the position need not move, and the call needs no locked instruction and
        // no write to the line every call shares. A call that races a failure being set may
        // leave it in the window one call longer; sequentially the counts are exactly the
        // `&mut` window's.
        if !(failure | slow) && self.total.load(Relaxed) >= self.size && self.clear_bits() {
            return self.size;
        }
        let n = self.total.fetch_add(1, Relaxed);
        let pos = position(n, self.size, self.mask, self.reciprocal);
        let (word, mask) = ((pos / 64) as usize, 1u64 << (pos % 64));
        put_bit(&self.failed, word, mask, failure);
        put_bit(&self.slow, word, mask, slow);
        n.saturating_add(1).min(self.size)
    }

    #[inline]
    fn counts_of(&self, _: Instant, failures: bool, slow: bool) -> Counts {
        self.counts_after(self.total.load(Relaxed), failures, slow)
    }

    fn counts(&self, _: Instant) -> Counts {
        self.all_counts(self.total.load(Relaxed))
    }

    #[inline]
    fn record_good_if_clear(&self, _: Instant) -> bool {
        if !self.clear_bits() {
            return false;
        }
        // Every bit is clear, so the bits of the position this call takes are too: only a window
        // still filling up has anything to write, its call count.
        if self.total.load(Relaxed) < self.size {
            self.total.fetch_add(1, Relaxed);
        }
        true
    }

    fn clear(&self) {
        for w in self.failed.iter().chain(&self.slow) {
            w.store(0, Relaxed);
        }
        self.total.store(0, Relaxed);
    }
}

/// A bucket counter: the low 32 bits of the epoch it counts (`epoch = time / width`) in the high
/// half, the count in the low half. The tag lets a writer of a new epoch reset a bucket with one
/// compare-and-swap, without losing a call that another thread adds to the new epoch meanwhile.
#[inline]
fn tagged(epoch: u64, count: u32) -> u64 {
    (epoch << 32) | u64::from(count)
}
#[inline]
fn tag_of(word: u64) -> u32 {
    (word >> 32) as u32
}
#[inline]
fn count_of(word: u64) -> u32 {
    word as u32
}

/// Calls of the last `n * width` (at most `BUCKETS` buckets) in atomic bucket counters.
///
/// Each bucket is four tagged words (calls, failures, slow calls, slow failures; the last written
/// only for a call both slow and failed). The newest epoch is an atomic
/// maximum; the thread that moves it forward resets the buckets that aged out, as
/// [`TimeWindow`](super::TimeWindow) does, so a bucket never holds counts of an epoch outside the
/// window. Reading the counts sums the live buckets: O(`BUCKETS`) per call.
#[derive(Debug)]
pub struct AtomicTimeWindow<const BUCKETS: usize> {
    newest: AtomicU64,
    calls: [AtomicU64; BUCKETS],
    failures: [AtomicU64; BUCKETS],
    slow: [AtomicU64; BUCKETS],
    slow_failures: [AtomicU64; BUCKETS],
    // Non-zero in the type: the divisions below then have no panic path to optimize away.
    width: NonZeroU64,
    n: NonZeroU64,
}

impl<const BUCKETS: usize> AtomicTimeWindow<BUCKETS> {
    #[inline]
    fn slot(&self, epoch: u64) -> usize {
        (epoch % self.n) as usize
    }

    /// Moves the newest epoch to at least `epoch`; returns the newest epoch.
    fn advance(&self, epoch: u64) -> u64 {
        let seen = self.newest.load(Acquire);
        if epoch <= seen {
            return seen;
        }
        if epoch - seen >= self.n.get() {
            // A jump past the whole window: every bucket is stale. Zero them before publishing
            // the new epoch, so no tag can be mistaken for a live one (tags are 32 bits).
            self.clear();
            return self.newest.fetch_max(epoch, Release).max(epoch);
        }
        let before = self.newest.fetch_max(epoch, Release);
        if before >= epoch {
            return before;
        }
        // This thread moved the window from `before` to `epoch`: reset the buckets of the epochs
        // that entered it, which are those that left it.
        for e in before + 1..=epoch {
            let slot = self.slot(e);
            for ring in [&self.calls, &self.failures, &self.slow, &self.slow_failures] {
                if let Some(w) = ring.get(slot) {
                    self.reset(w, slot);
                }
            }
        }
        epoch
    }

    /// Zeroes `w` unless it already counts the live epoch of `slot` (which another thread may
    /// have started filling).
    fn reset(&self, w: &AtomicU64, slot: usize) {
        let mut cur = w.load(Acquire);
        loop {
            let live = self.live_epoch(slot, self.newest.load(Acquire));
            if tag_of(cur) == live as u32 || count_of(cur) == 0 {
                return;
            }
            match w.compare_exchange_weak(cur, tagged(live, 0), Release, Acquire) {
                Ok(_) => return,
                Err(x) => cur = x,
            }
        }
    }

    /// The epoch that `slot` stands for while `newest` is the newest.
    #[inline]
    fn live_epoch(&self, slot: usize, newest: u64) -> u64 {
        let back = (newest % self.n + self.n.get() - slot as u64) % self.n;
        newest - back.min(newest)
    }

    /// Adds one to the bucket counter `w` for `epoch`. Returns `false` if the bucket is full
    /// (`u32::MAX`, as in [`TimeWindow`](super::TimeWindow)) or `epoch` has left the window.
    fn bump(&self, w: &AtomicU64, epoch: u64) -> bool {
        let mut cur = w.load(Acquire);
        loop {
            let next = if tag_of(cur) == epoch as u32 {
                match count_of(cur).checked_add(1) {
                    Some(c) => tagged(epoch, c),
                    None => return false,
                }
            } else if self.newest.load(Acquire) > epoch {
                // Another thread moved the window on since this call read it.
                return false;
            } else {
                tagged(epoch, 1)
            };
            match w.compare_exchange_weak(cur, next, Release, Acquire) {
                Ok(_) => return true,
                Err(x) => cur = x,
            }
        }
    }

    /// The counts of the window whose newest epoch is `newest`: failures only if `failures`, slow
    /// calls only if `slow`, slow failures only if `split`.
    fn counts_at(&self, newest: u64, failures: bool, slow: bool, split: bool) -> Counts {
        let first = newest.saturating_sub(self.n.get() - 1);
        let mut c = Counts::default();
        let mut slot = self.slot(first);
        for e in first..=newest {
            let tag = e as u32;
            let read = |ring: &[AtomicU64]| {
                ring.get(slot).map_or(0, |w| {
                    let v = w.load(Acquire);
                    if tag_of(v) == tag {
                        u64::from(count_of(v))
                    } else {
                        0
                    }
                })
            };
            c.calls += read(&self.calls);
            if failures {
                c.failures += read(&self.failures);
            }
            if slow {
                c.slow += read(&self.slow);
            }
            if split {
                c.slow_failures += read(&self.slow_failures);
            }
            slot += 1;
            if slot as u64 == self.n.get() {
                slot = 0;
            }
        }
        // A reader racing a writer may see a failure before its call.
        c.failures = c.failures.min(c.calls);
        c.slow = c.slow.min(c.calls);
        c.slow_failures = c.slow_failures.min(c.failures).min(c.slow);
        c
    }
}

impl<const BUCKETS: usize> AtomicWindow for AtomicTimeWindow<BUCKETS> {
    fn new(spec: WindowSpec) -> Result<Self, ConfigError> {
        let WindowSpec::Time { width, buckets } = spec else {
            return Err(wrong_kind(
                "the policy asks for a count window; this breaker has an AtomicTimeWindow",
            ));
        };
        let Some(n) = NonZeroU64::new(u64::from(buckets)) else {
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
        Ok(AtomicTimeWindow {
            newest: AtomicU64::new(0),
            calls: zeroed(),
            failures: zeroed(),
            slow: zeroed(),
            slow_failures: zeroed(),
            width,
            n,
        })
    }

    fn record(&self, now: Instant, failure: bool, slow: bool) -> u64 {
        let mut epoch = self.advance(now.as_nanos() / self.width);
        loop {
            let slot = self.slot(epoch);
            let Some(calls) = self.calls.get(slot) else {
                return 0;
            };
            if self.bump(calls, epoch) {
                if failure && let Some(w) = self.failures.get(slot) {
                    self.bump(w, epoch);
                }
                if slow && let Some(w) = self.slow.get(slot) {
                    self.bump(w, epoch);
                }
                if failure
                    && slow
                    && let Some(w) = self.slow_failures.get(slot)
                {
                    self.bump(w, epoch);
                }
                return self.counts_at(epoch, false, false, false).calls;
            }
            let newest = self.newest.load(Acquire);
            if newest == epoch {
                // The bucket is full: the call is not counted, as in `TimeWindow`.
                return self.counts_at(epoch, false, false, false).calls;
            }
            // The window moved on while this call was being recorded: count it in the newest bucket.
            epoch = newest;
        }
    }

    fn counts_of(&self, now: Instant, failures: bool, slow: bool) -> Counts {
        let newest = self.newest.load(Acquire);
        self.counts_at(
            (now.as_nanos() / self.width).max(newest),
            failures,
            slow,
            false,
        )
    }

    fn counts(&self, now: Instant) -> Counts {
        let newest = self.newest.load(Acquire);
        self.counts_at((now.as_nanos() / self.width).max(newest), true, true, true)
    }

    fn clear(&self) {
        let rings = [&self.calls, &self.failures, &self.slow, &self.slow_failures];
        for w in rings.into_iter().flatten() {
            w.store(0, Release);
        }
    }
}

/// Either kind of atomic window, chosen by the policy at run time: a count window of up to `CALLS`
/// calls (in `WORDS = CALLS.div_ceil(64)` words) or a time window of up to `BUCKETS` buckets.
#[derive(Debug)]
pub enum AtomicAnyWindow<const CALLS: usize, const BUCKETS: usize, const WORDS: usize = 1> {
    /// A count window.
    Count(AtomicCountWindow<CALLS, WORDS>),
    /// A time window.
    Time(AtomicTimeWindow<BUCKETS>),
}

impl<const CALLS: usize, const BUCKETS: usize, const WORDS: usize> AtomicWindow
    for AtomicAnyWindow<CALLS, BUCKETS, WORDS>
{
    fn new(spec: WindowSpec) -> Result<Self, ConfigError> {
        Ok(match spec {
            WindowSpec::Count { .. } => AtomicAnyWindow::Count(AtomicCountWindow::new(spec)?),
            WindowSpec::Time { .. } => AtomicAnyWindow::Time(AtomicTimeWindow::new(spec)?),
        })
    }
    #[inline]
    fn record(&self, now: Instant, failure: bool, slow: bool) -> u64 {
        match self {
            AtomicAnyWindow::Count(w) => w.record(now, failure, slow),
            AtomicAnyWindow::Time(w) => w.record(now, failure, slow),
        }
    }
    #[inline]
    fn counts_of(&self, now: Instant, failures: bool, slow: bool) -> Counts {
        match self {
            AtomicAnyWindow::Count(w) => w.counts_of(now, failures, slow),
            AtomicAnyWindow::Time(w) => w.counts_of(now, failures, slow),
        }
    }
    fn counts(&self, now: Instant) -> Counts {
        match self {
            AtomicAnyWindow::Count(w) => w.counts(now),
            AtomicAnyWindow::Time(w) => w.counts(now),
        }
    }
    #[inline]
    fn record_good_if_clear(&self, now: Instant) -> bool {
        match self {
            AtomicAnyWindow::Count(w) => w.record_good_if_clear(now),
            AtomicAnyWindow::Time(w) => w.record_good_if_clear(now),
        }
    }
    fn clear(&self) {
        match self {
            AtomicAnyWindow::Count(w) => w.clear(),
            AtomicAnyWindow::Time(w) => w.clear(),
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::super::{TimeWindow, Window};
    use super::*;
    use crate::Duration;
    use crate::sample::splitmix64;

    #[test]
    fn position_is_the_remainder_for_every_size_and_total() {
        let boundary = u64::from(u32::MAX);
        for size in (1..=300u64).chain([1000, 4095, 65_535]) {
            let mask = if size.is_power_of_two() { size - 1 } else { 0 };
            let reciprocal = if size.is_power_of_two() {
                0
            } else {
                u64::MAX / size + 1
            };
            let mut x = size;
            let totals = (0..2_000u64)
                .chain(boundary - 1_000..boundary + 1_000)
                .chain((0..2_000).map(|_| {
                    x = splitmix64(x);
                    x
                }));
            for n in totals {
                assert_eq!(
                    position(n, size, mask, reciprocal),
                    n % size,
                    "{n} % {size}"
                );
            }
        }
    }

    #[test]
    fn count_window_matches_the_mut_window() {
        // Dense outcomes, and sparse ones whose runs of good calls empty the window now and then
        // (neither window then moves its position).
        for (size, sparse) in [1u32, 2, 5, 63, 64, 65, 100, 128]
            .into_iter()
            .flat_map(|size| [(size, false), (size, true)])
        {
            let spec = WindowSpec::Count { calls: size };
            let mut w = CountWindow::<128, 2>::new(spec).unwrap();
            let a = AtomicCountWindow::<128, 2>::new(spec).unwrap();
            let mut x = 5u64;
            for i in 0..2_000 {
                x = splitmix64(x);
                let (f, s) = if sparse {
                    (x.is_multiple_of(97), x % 89 == 1)
                } else {
                    (x & 1 == 1, x & 6 == 6)
                };
                let want = w.record(Instant::ZERO, f, s);
                // Half the good calls go through the clear-window shortcut, as a breaker's do;
                // when it declines, the call is recorded the usual way.
                let shortcut = !(f | s) && x & 8 != 0 && a.record_good_if_clear(Instant::ZERO);
                if shortcut {
                    assert_eq!((want.failures, want.slow), (0, 0), "size {size}");
                } else {
                    assert_eq!(a.record(Instant::ZERO, f, s), want.calls, "size {size}");
                }
                assert_eq!(
                    a.counts(Instant::ZERO),
                    want,
                    "size {size}, sparse {sparse}"
                );
                if i == 300 {
                    a.clear();
                    w.clear();
                }
            }
            assert_eq!(a.counts(Instant::ZERO), w.counts(Instant::ZERO));
        }
        assert!(AtomicCountWindow::<64>::new(WindowSpec::Count { calls: 65 }).is_err());
    }

    #[test]
    fn time_window_matches_the_mut_window() {
        for (width, n) in [(250u64, 8u32), (7, 1), (1, 3), (1_000, 5)] {
            let spec = WindowSpec::Time {
                width: Duration::from_nanos(width),
                buckets: n,
            };
            let mut w = TimeWindow::<8>::new(spec).unwrap();
            let a = AtomicTimeWindow::<8>::new(spec).unwrap();
            let (mut x, mut t, mut latest) = (99u64, 0u64, 0u64);
            for i in 0..4_000 {
                x = splitmix64(x);
                match x % 23 {
                    0 => t = t.saturating_add(5_000),
                    1 => t = t.saturating_sub(300),
                    2 => t = t.saturating_add(u64::MAX / 3),
                    _ => t = t.saturating_add(x % 97),
                }
                // The breaker passes the latest time it has seen.
                latest = latest.max(t);
                let now = Instant::from_nanos(latest);
                let (f, s) = (x & 32 != 0, x & 64 != 0);
                let want = w.record(now, f, s);
                assert_eq!(a.record(now, f, s), want.calls, "i = {i}");
                assert_eq!(a.counts(now), want, "i = {i}");
                let ahead = Instant::from_nanos(latest.saturating_add(x % 3_000));
                assert_eq!(a.counts(ahead), w.counts(ahead));
                if i % 1_000 == 999 {
                    a.clear();
                    w.clear();
                }
            }
        }
    }

    #[test]
    fn threads_lose_no_call() {
        let spec = WindowSpec::Count { calls: 4_000 };
        let a = AtomicCountWindow::<4032, 63>::new(spec).unwrap();
        let t = AtomicTimeWindow::<4>::new(WindowSpec::Time {
            width: Duration::from_secs(1),
            buckets: 4,
        })
        .unwrap();
        std::thread::scope(|s| {
            for k in 0..4u64 {
                let (a, t) = (&a, &t);
                s.spawn(move || {
                    for i in 0..1_000u64 {
                        let now = Instant::from_millis(i * 3);
                        a.record(now, (i + k) % 4 == 0, i % 10 == 0);
                        t.record(now, (i + k) % 4 == 0, i % 10 == 0);
                    }
                });
            }
        });
        // Thread k's failures are its calls with i + k ≡ 0 (mod 4), its slow calls those with
        // i ≡ 0 (mod 10), which are even: both for 50 calls of an even k (i ≡ 5k mod 20), none
        // of an odd k.
        let want = Counts {
            calls: 4_000,
            failures: 1_000,
            slow: 400,
            slow_failures: 100,
        };
        assert_eq!(a.counts(Instant::ZERO), want);
        assert_eq!(t.counts(Instant::from_secs(2)), want);
    }
}

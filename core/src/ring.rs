//! A ring of fixed-width time slots holding two counters each, with running totals: the sliding
//! window under the ratio budget, the time-windowed retry breaker and the adaptive throttle.
//!
//! Each slot holds two `u32` counters (8 bytes, so a ring of ten slots is 80 bytes: windowed
//! budgets stay small enough for a million clients or a microcontroller); a slot that reaches
//! 4,294,967,295 of something stops counting, and the totals (`u64`) only ever hold what the slots
//! hold, so expiry stays exact.
//!
//! Time is cut into slots of `width`; the window is the current slot and the `n - 1` before it, so
//! old counts drop out a whole slot at a time (the effective span moves in steps of one slot, as in
//! Finagle's and tower's budgets). A `now` earlier than the newest slot seen counts as the newest
//! (no time passed). Advancing costs O(slots crossed), at most O(n) after a long gap.

use core::num::{NonZeroU32, NonZeroU64};

use crate::error::{ConfigError, Problem};
use crate::time::Instant;

/// Two counters; their meaning belongs to the ring's owner.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Pair {
    pub(crate) a: u64,
    pub(crate) b: u64,
}

impl Pair {
    pub(crate) fn add(&mut self, a: u64, b: u64) {
        self.a = self.a.saturating_add(a);
        self.b = self.b.saturating_add(b);
    }
    fn sub(&mut self, slot: Slot) {
        self.a = self.a.saturating_sub(u64::from(slot.a));
        self.b = self.b.saturating_sub(u64::from(slot.b));
    }
}

/// One slot's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Slot {
    a: u32,
    b: u32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Ring<const N: usize> {
    slots: [Slot; N],
    totals: Pair,
    /// Width of a slot in nanoseconds (non-zero: dividing by it has no panic path).
    width: NonZeroU64,
    /// Slots in use, in `1..=N`.
    n: NonZeroU32,
    /// Index in `slots` of the newest slot: `epoch % n`, where `epoch = time / width`.
    cur: u32,
    /// Where the newest slot starts: `epoch · width` (ns). A `now` less than `width` past it is in
    /// the newest slot (or earlier), which the hot path checks without a division.
    start: u64,
}

impl<const N: usize> Ring<N> {
    /// `n` slots of `width_ns` each. `slots_field` and `span_field` name the config fields to blame.
    pub(crate) fn new(
        width_ns: u64,
        n: u32,
        slots_field: &'static str,
        span_field: &'static str,
    ) -> Result<Self, ConfigError> {
        let Some(n) = NonZeroU32::new(n) else {
            return Err(ConfigError::new(slots_field, Problem::Zero));
        };
        if n.get() as usize > N {
            return Err(ConfigError::new(
                slots_field,
                Problem::ExceedsCapacity {
                    requested: u64::from(n.get()),
                    capacity: N as u64,
                },
            ));
        }
        let Some(width) = NonZeroU64::new(width_ns) else {
            return Err(ConfigError::new(
                span_field,
                Problem::Inconsistent("shorter than one nanosecond per slot"),
            ));
        };
        Ok(Ring {
            slots: [Slot::default(); N],
            totals: Pair::default(),
            width,
            n,
            cur: 0,
            start: 0,
        })
    }

    /// A placeholder for an owner that keeps no window (one slot of 1 ns, no capacity check: it is
    /// never written).
    pub(crate) fn unused() -> Self {
        Ring {
            slots: [Slot::default(); N],
            totals: Pair::default(),
            width: NonZeroU64::MIN,
            n: NonZeroU32::MIN,
            cur: 0,
            start: 0,
        }
    }

    fn slot(&self, epoch: u64) -> usize {
        (epoch % NonZeroU64::from(self.n)) as usize
    }

    /// The index (time / width) of the newest slot.
    fn epoch(&self) -> u64 {
        self.start / self.width
    }

    /// Whether `now` falls in the newest slot or before it (then it counts as the newest).
    #[inline]
    fn in_newest(&self, now: Instant) -> bool {
        now.as_nanos().saturating_sub(self.start) < self.width.get()
    }

    /// Moves the window to `now` (a `now` earlier than the newest slot changes nothing).
    #[inline]
    pub(crate) fn advance(&mut self, now: Instant) {
        if !self.in_newest(now) {
            self.move_to(now.as_nanos() / self.width);
        }
    }

    /// Moves the newest slot to `epoch` (later than the current one), zeroing the slots it passes.
    fn move_to(&mut self, epoch: u64) {
        let old = self.epoch();
        if epoch - old >= u64::from(self.n.get()) {
            self.clear();
        } else {
            for e in old + 1..=epoch {
                let slot = self.slot(e);
                if let Some(s) = self.slots.get_mut(slot) {
                    self.totals.sub(*s);
                    *s = Slot::default();
                }
            }
        }
        self.start = epoch * self.width.get();
        self.cur = self.slot(epoch) as u32;
    }

    /// Adds to the slot of `now` (saturating) and returns the totals of the window including it.
    #[inline]
    pub(crate) fn add(&mut self, now: Instant, a: u32, b: u32) -> Pair {
        self.advance(now);
        if let Some(s) = self.slots.get_mut(self.cur as usize) {
            let before = *s;
            s.a = s.a.saturating_add(a);
            s.b = s.b.saturating_add(b);
            self.totals
                .add(u64::from(s.a - before.a), u64::from(s.b - before.b));
        }
        self.totals
    }

    /// The totals of the window as of `now`, without changing anything.
    #[inline]
    pub(crate) fn totals(&self, now: Instant) -> Pair {
        if self.in_newest(now) {
            return self.totals;
        }
        let epoch = now.as_nanos() / self.width;
        let old = self.epoch();
        if epoch - old >= u64::from(self.n.get()) {
            return Pair::default();
        }
        let mut left = self.totals;
        for e in old + 1..=epoch {
            if let Some(s) = self.slots.get(self.slot(e)) {
                left.sub(*s);
            }
        }
        left
    }

    /// Forgets everything (the epoch stays).
    pub(crate) fn clear(&mut self) {
        self.slots = [Slot::default(); N];
        self.totals = Pair::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_a_list_of_timestamped_counts() {
        let (width, n) = (100u64, 5u32);
        let mut ring = Ring::<8>::new(width, n, "slots", "span").unwrap();
        let mut events: std::vec::Vec<(u64, u64, u64)> = std::vec::Vec::new();
        let (mut t, mut seen, mut x) = (0u64, 0u64, 7u64);
        for _ in 0..5_000 {
            x = crate::sample::splitmix64(x);
            match x % 16 {
                0 => t += 1_000,
                1 => t = t.saturating_sub(250),
                _ => t += x % 60,
            }
            seen = seen.max(t);
            let (a, b) = ((x >> 40 & 3) as u32, (x >> 50 & 1) as u32);
            let got = ring.add(Instant::from_nanos(t), a, b);
            events.push((seen, u64::from(a), u64::from(b)));
            let live = |at: u64| {
                events
                    .iter()
                    .filter(|e| e.0 / width + u64::from(n) > at / width)
                    .fold(Pair::default(), |mut p, e| {
                        p.add(e.1, e.2);
                        p
                    })
            };
            assert_eq!(got, live(seen), "t = {t}");
            let ahead = seen + (x >> 20) % 700;
            assert_eq!(ring.totals(Instant::from_nanos(ahead)), live(ahead));
        }
    }

    #[test]
    fn rejects_bad_shapes() {
        assert_eq!(Ring::<4>::new(1, 0, "s", "w").unwrap_err().field, "s");
        assert!(matches!(
            Ring::<4>::new(1, 5, "s", "w").unwrap_err().problem,
            Problem::ExceedsCapacity {
                requested: 5,
                capacity: 4
            }
        ));
        assert_eq!(Ring::<4>::new(0, 4, "s", "w").unwrap_err().field, "w");
        let mut r = Ring::<4>::new(1, 4, "s", "w").unwrap();
        // The largest instant is just another slot.
        r.add(Instant::MAX, 1, 1);
        assert_eq!(r.totals(Instant::MAX), Pair { a: 1, b: 1 });
        assert_eq!(r.totals(Instant::ZERO), Pair { a: 1, b: 1 });
    }

    #[test]
    fn a_full_slot_stops_counting_and_expires_exactly() {
        let mut r = Ring::<2>::new(10, 2, "s", "w").unwrap();
        r.add(Instant::from_nanos(0), u32::MAX, 1);
        assert_eq!(
            r.add(Instant::from_nanos(1), 5, 0),
            Pair {
                a: u64::from(u32::MAX),
                b: 1
            }
        );
        assert_eq!(
            r.add(Instant::from_nanos(10), 7, 0),
            Pair {
                a: u64::from(u32::MAX) + 7,
                b: 1
            }
        );
        assert_eq!(r.totals(Instant::from_nanos(20)), Pair { a: 7, b: 0 });
        r.clear();
        assert_eq!(r.totals(Instant::from_nanos(20)), Pair::default());
    }
}

//! One sliding window of spend: a ring of `N` buckets of tokens and cost (`u64` each, so a month of
//! tokens or of micro-dollars fits), with running totals.
//!
//! Time is cut into buckets of `width`; the window is the current bucket and the `n - 1` before it,
//! so usage leaves the window a whole bucket at a time and the instant it leaves is known exactly:
//! bucket `e` (covering `[e·width, (e+1)·width)`) leaves at `(e + n)·width`. That is what lets a
//! refusal say when a request will fit. A `now` earlier than the newest bucket counts as the newest.

use crate::time::{Duration, Instant};

/// Tokens and cost, added and subtracted together.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Amount {
    /// Tokens (input + output).
    pub tokens: u64,
    /// Cost in micro-units.
    pub cost: u64,
}

impl Amount {
    pub(crate) fn plus(self, o: Amount) -> Amount {
        Amount {
            tokens: self.tokens.saturating_add(o.tokens),
            cost: self.cost.saturating_add(o.cost),
        }
    }
    pub(crate) fn minus(self, o: Amount) -> Amount {
        Amount {
            tokens: self.tokens.saturating_sub(o.tokens),
            cost: self.cost.saturating_sub(o.cost),
        }
    }
    /// The per-field minimum.
    pub(crate) fn min(self, o: Amount) -> Amount {
        Amount {
            tokens: self.tokens.min(o.tokens),
            cost: self.cost.min(o.cost),
        }
    }
}

/// Which of the two ceilings of a window.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Metric {
    /// The token ceiling.
    Tokens,
    /// The cost ceiling.
    Cost,
}

/// A window's ceilings, as limits on an [`Amount`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Limits {
    pub(crate) tokens: Option<u64>,
    pub(crate) cost: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SpendWindow<const N: usize> {
    slots: [Amount; N],
    totals: Amount,
    /// Bucket width in ns (at least 1).
    width: u64,
    /// Buckets in use, `1..=N`; 0 when the window has no ceiling (nothing is kept).
    n: u64,
    /// The epoch (time / width) of the newest bucket.
    epoch: u64,
}

impl<const N: usize> SpendWindow<N> {
    /// `n` buckets over `span`; the caller checked `1 <= n <= N` and that `span / n` is exact.
    pub(crate) fn new(span: Duration, n: u32) -> Self {
        let n = u64::from(n).min(N as u64);
        SpendWindow {
            slots: [Amount::default(); N],
            totals: Amount::default(),
            width: span.as_nanos().checked_div(n).unwrap_or(1).max(1),
            n,
            epoch: 0,
        }
    }

    /// A window that keeps nothing (no ceiling on this span).
    pub(crate) fn off() -> Self {
        SpendWindow {
            slots: [Amount::default(); N],
            totals: Amount::default(),
            width: 1,
            n: 0,
            epoch: 0,
        }
    }

    fn index(&self, epoch: u64) -> usize {
        epoch.checked_rem(self.n).unwrap_or(0) as usize
    }

    /// Whether the bucket of `at` is still in the window (after [`advance`](Self::advance)).
    fn is_live(&self, at: Instant) -> bool {
        let e = at.as_nanos() / self.width;
        e <= self.epoch && e.saturating_add(self.n) > self.epoch
    }

    /// Moves the window to `now` (which the caller keeps monotonic).
    pub(crate) fn advance(&mut self, now: Instant) {
        let epoch = now.as_nanos() / self.width;
        if self.n == 0 || epoch <= self.epoch {
            return;
        }
        if epoch - self.epoch >= self.n {
            self.slots = [Amount::default(); N];
            self.totals = Amount::default();
        } else {
            for e in self.epoch + 1..=epoch {
                let i = self.index(e);
                if let Some(s) = self.slots.get_mut(i) {
                    self.totals = self.totals.minus(*s);
                    *s = Amount::default();
                }
            }
        }
        self.epoch = epoch;
    }

    /// Adds `a` to the newest bucket (saturating); the window must have been advanced to now.
    pub(crate) fn add(&mut self, a: Amount) {
        if self.n == 0 {
            return;
        }
        let i = self.index(self.epoch);
        if let Some(s) = self.slots.get_mut(i) {
            let before = *s;
            *s = s.plus(a);
            self.totals = self.totals.plus(s.minus(before));
        }
    }

    /// Takes up to `a` back out of the bucket of `at`, if that bucket is still in the window (usage
    /// that already left the window has nothing to refund).
    pub(crate) fn refund(&mut self, at: Instant, a: Amount) {
        if self.n == 0 || !self.is_live(at) {
            return;
        }
        let i = self.index(at.as_nanos() / self.width);
        if let Some(s) = self.slots.get_mut(i) {
            let taken = a.min(*s);
            *s = s.minus(taken);
            self.totals = self.totals.minus(taken);
        }
    }

    /// Usage in the window as of `now`, without moving it.
    pub(crate) fn totals_at(&self, now: Instant) -> Amount {
        let epoch = now.as_nanos() / self.width;
        if self.n == 0 || epoch <= self.epoch {
            return self.totals;
        }
        if epoch - self.epoch >= self.n {
            return Amount::default();
        }
        let mut left = self.totals;
        for e in self.epoch + 1..=epoch {
            if let Some(s) = self.slots.get(self.index(e)) {
                left = left.minus(*s);
            }
        }
        left
    }

    /// How long from `now` until `need` more fits under `limits`, as `(metric, wait)`: `None` if it
    /// fits now, `Duration::MAX` if it never can (more than the whole ceiling). When both metrics
    /// must wait, the longer wait is returned (the token one on a tie). The window must have been
    /// advanced to `now`.
    pub(crate) fn wait(
        &self,
        now: Instant,
        need: Amount,
        limits: Limits,
    ) -> Option<(Metric, Duration)> {
        let t = self.wait_one(now, need.tokens, limits.tokens, |a| a.tokens);
        let c = self.wait_one(now, need.cost, limits.cost, |a| a.cost);
        match (t, c) {
            (Some(t), Some(c)) if c > t => Some((Metric::Cost, c)),
            (Some(t), _) => Some((Metric::Tokens, t)),
            (None, Some(c)) => Some((Metric::Cost, c)),
            (None, None) => None,
        }
    }

    fn wait_one(
        &self,
        now: Instant,
        need: u64,
        limit: Option<u64>,
        get: impl Fn(&Amount) -> u64,
    ) -> Option<Duration> {
        let limit = limit?;
        if self.n == 0 {
            return None;
        }
        let mut used = get(&self.totals);
        if used.saturating_add(need) <= limit {
            return None;
        }
        if need > limit {
            return Some(Duration::MAX);
        }
        // Oldest bucket first: find the first expiry after which enough has left.
        let oldest = self.epoch.saturating_sub(self.n - 1);
        for e in oldest..=self.epoch {
            used = used.saturating_sub(self.slots.get(self.index(e)).map_or(0, &get));
            if used.saturating_add(need) <= limit {
                // Past the end of representable time, it never leaves.
                let leaves = e
                    .checked_add(self.n)
                    .and_then(|x| x.checked_mul(self.width));
                return Some(leaves.map_or(Duration::MAX, |at| {
                    Instant::from_nanos(at).saturating_duration_since(now)
                }));
            }
        }
        // Unreachable with consistent totals; "after the whole window" is the honest bound.
        Some(Duration::from_nanos(self.n.saturating_mul(self.width)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NO: Limits = Limits {
        tokens: None,
        cost: None,
    };

    fn amt(tokens: u64, cost: u64) -> Amount {
        Amount { tokens, cost }
    }

    #[test]
    fn usage_leaves_a_bucket_at_a_time() {
        let mut w = SpendWindow::<4>::new(Duration::from_nanos(40), 4);
        for (t, a) in [(0, 1), (15, 2), (25, 4), (39, 8)] {
            w.advance(Instant::from_nanos(t));
            w.add(amt(a, a * 10));
        }
        assert_eq!(w.totals_at(Instant::ZERO), amt(15, 150));
        assert_eq!(w.totals_at(Instant::from_nanos(40)), amt(14, 140));
        assert_eq!(w.totals_at(Instant::from_nanos(65)), amt(8, 80));
        assert_eq!(w.totals_at(Instant::from_nanos(1_000)), amt(0, 0));
        w.advance(Instant::from_nanos(55));
        assert_eq!(w.totals_at(Instant::ZERO), amt(12, 120));
        // The bucket of t = 15 has left: its refund is dropped; t = 25's is taken back.
        w.refund(Instant::from_nanos(15), amt(2, 20));
        w.refund(Instant::from_nanos(25), amt(1, 99));
        assert_eq!(w.totals_at(Instant::ZERO), amt(11, 80));
        // A refund never takes more than its bucket holds.
        w.refund(Instant::from_nanos(25), amt(100, 100));
        assert_eq!(w.totals_at(Instant::ZERO), amt(8, 80));
    }

    #[test]
    fn wait_names_the_first_expiry_that_makes_room() {
        let mut w = SpendWindow::<4>::new(Duration::from_nanos(40), 4);
        for (t, a) in [(0, 5), (10, 3), (20, 2)] {
            w.advance(Instant::from_nanos(t));
            w.add(amt(a, 0));
        }
        let now = Instant::from_nanos(22);
        let lim = Limits {
            tokens: Some(10),
            cost: Some(100),
        };
        assert_eq!(w.wait(now, amt(0, 0), lim), None);
        // 10 used; 4 more fit once the t = 0 bucket leaves at 40.
        assert_eq!(
            w.wait(now, amt(4, 0), lim),
            Some((Metric::Tokens, Duration::from_nanos(18)))
        );
        // 8 more needs the t = 10 bucket gone too (at 50).
        assert_eq!(
            w.wait(now, amt(8, 0), lim),
            Some((Metric::Tokens, Duration::from_nanos(28)))
        );
        assert_eq!(
            w.wait(now, amt(11, 0), lim),
            Some((Metric::Tokens, Duration::MAX))
        );
        assert_eq!(
            w.wait(now, amt(11, 101), lim),
            Some((Metric::Tokens, Duration::MAX))
        );
        assert_eq!(
            w.wait(now, amt(1, 101), lim),
            Some((Metric::Cost, Duration::MAX))
        );
        assert_eq!(w.wait(now, amt(u64::MAX, 0), NO), None);
        assert_eq!(SpendWindow::<4>::off().wait(now, amt(9, 9), lim), None);
    }
}

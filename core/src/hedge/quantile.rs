//! [`LatencyQuantile`]: a streaming quantile of latencies in fixed memory, with a stated error bound.
//!
//! **Estimator:** a log-linear histogram (the bucket layout of HdrHistogram with 4 significant
//! bits, as in tower's `hedge`, which keeps an HdrHistogram): latencies below 16 ns have a bucket
//! each; above, each power of two `[2ᵉ, 2ᵉ⁺¹)` is cut into 16 equal buckets, up to 2⁴⁰ ns (18.3
//! minutes; longer latencies count as 2⁴⁰ ns). 592 buckets of `u16`: 1,184 bytes.
//!
//! **Error bound:** the estimate is the largest latency of the bucket holding the sample
//! quantile `x` (the `⌈q·n⌉`-th smallest of the `n` samples held), so `x ≤ estimate < x × 17/16`:
//! never below, less than 6.25% above (below 16 ns: exact). The rank is exact: no interpolation
//! between samples, no rank error, unlike P² (Jain & Chlamtac 1985), whose error has no bound.
//!
//! **Forgetting:** when the samples held reach `window`, every bucket is halved, so a sample's
//! weight halves every ~`window / 2` samples: old latencies fade geometrically, in fixed memory,
//! with no clock (tower instead swaps two histograms every period). The halving carries each odd
//! count's half sample into the next bucket (error diffusion), so the samples at or below any
//! bucket become exactly half of what they were, rounded down: the distribution's shape survives
//! a halving, and a tail of single samples in many buckets is not wiped out as plain rounding down
//! would (which would pull a p95 down after every halving).
//!
//! **Cost:** the quantile's bucket is tracked as samples arrive (the count below it is kept), so
//! recording moves a pointer by a bucket or so and reading is O(1); halving rescans the buckets,
//! once every ~`window / 2` samples.

use crate::error::PPM;
use crate::time::Duration;

/// Buckets below 16 ns, one per nanosecond; then 16 per power of two from 2⁴ to 2⁴⁰ ns.
const SUB: u32 = 16;
const TOP_EXP: u32 = 40;
/// Number of buckets.
pub const BUCKETS: usize = (SUB + (TOP_EXP - 4) * SUB) as usize;

/// The bucket of a latency of `ns` nanoseconds (for reference models and plots).
#[inline]
pub const fn bucket_of(ns: u64) -> usize {
    if ns < SUB as u64 {
        return ns as usize;
    }
    if ns >= 1 << TOP_EXP {
        return BUCKETS - 1;
    }
    let e = 63 - ns.leading_zeros(); // in 4..40
    let mantissa = (ns >> (e - 4)) as u32 & (SUB - 1);
    (SUB + (e - 4) * SUB + mantissa) as usize
}

/// The largest latency in bucket `i`, in ns (the top bucket reports 2⁴⁰ ns).
#[inline]
pub const fn bucket_max(i: usize) -> u64 {
    let i = i as u32;
    if i < SUB {
        return i as u64;
    }
    if i as usize >= BUCKETS - 1 {
        return 1 << TOP_EXP;
    }
    let e = (i - SUB) / SUB + 4;
    let mantissa = (i - SUB) % SUB;
    let width = 1u64 << (e - 4);
    (1u64 << e) + (mantissa as u64 + 1) * width - 1
}

/// A streaming quantile of latencies. See the [module docs](self).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LatencyQuantile {
    counts: [u16; BUCKETS],
    /// Samples held (the sum of `counts`).
    total: u32,
    /// The quantile in ppm, in (0, 10⁶].
    quantile_ppm: u32,
    /// Halve every bucket once `total` reaches it; in [2, 65,535].
    window: u32,
    /// The bucket holding the quantile, and the samples in the buckets below it. With `r` the
    /// quantile's rank, `below < r ≤ below + counts[at]` whenever `total > 0`.
    at: usize,
    below: u32,
}

impl LatencyQuantile {
    /// An empty estimator of the `quantile_ppm` quantile (clamped to `[1, 10⁶]`), halving at
    /// `window` samples (clamped to `[2, 65,535]`).
    pub const fn new(quantile_ppm: u32, window: u32) -> Self {
        LatencyQuantile {
            counts: [0; BUCKETS],
            total: 0,
            quantile_ppm: if quantile_ppm == 0 {
                1
            } else if quantile_ppm > PPM {
                PPM
            } else {
                quantile_ppm
            },
            window: if window < 2 {
                2
            } else if window > u16::MAX as u32 {
                u16::MAX as u32
            } else {
                window
            },
            at: 0,
            below: 0,
        }
    }

    /// Samples held (after halvings).
    pub fn samples(&self) -> u32 {
        self.total
    }

    /// The estimate, `None` while empty.
    #[inline]
    pub fn estimate(&self) -> Option<Duration> {
        if self.total == 0 {
            return None;
        }
        Some(Duration::from_nanos(bucket_max(self.at)))
    }

    fn count(&self, i: usize) -> u32 {
        self.counts.get(i).map_or(0, |&c| u32::from(c))
    }

    /// The quantile's rank among the samples held: `⌈q·n⌉`, at least 1.
    fn rank(&self) -> u32 {
        let r = (u64::from(self.quantile_ppm) * u64::from(self.total)).div_ceil(u64::from(PPM));
        (r as u32).max(1)
    }

    /// Adds a latency.
    #[inline]
    pub fn record(&mut self, latency: Duration) {
        let b = bucket_of(latency.as_nanos());
        if let Some(c) = self.counts.get_mut(b) {
            // total < window ≤ u16::MAX, so no bucket is full.
            *c = c.saturating_add(1);
        }
        self.total += 1;
        if b < self.at {
            self.below += 1;
        }
        if self.total >= self.window {
            self.halve();
        } else {
            self.settle();
        }
    }

    /// Moves the quantile's bucket until `below < rank ≤ below + counts[at]`.
    fn settle(&mut self) {
        let r = self.rank();
        while self.below + self.count(self.at) < r && self.at < BUCKETS - 1 {
            self.below += self.count(self.at);
            self.at += 1;
        }
        while self.below >= r && self.at > 0 {
            self.at -= 1;
            self.below -= self.count(self.at);
        }
    }

    /// Halves every bucket, carrying odd halves upwards, and finds the quantile's bucket again:
    /// the samples at or below each bucket become ⌊before / 2⌋.
    fn halve(&mut self) {
        self.total = 0;
        let mut carry = 0u16;
        for c in self.counts.iter_mut() {
            // Saturating: a bucket holding a whole window of 65,535 drops the half sample carried in.
            let sum = c.saturating_add(carry);
            *c = sum / 2;
            carry = sum % 2;
            self.total += u32::from(*c);
        }
        self.at = 0;
        self.below = 0;
        if self.total > 0 {
            self.settle();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_the_range_in_order_within_a_sixteenth() {
        let mut prev_max = None;
        for i in 0..BUCKETS {
            let max = bucket_max(i);
            assert_eq!(bucket_of(max), i, "bucket {i}");
            if let Some(p) = prev_max {
                assert!(max > p);
                // The next latency after the previous bucket is this bucket's smallest.
                let min = p + 1;
                assert_eq!(bucket_of(min), i);
                // Relative width below 1/16.
                assert!((max - min) * 16 < min.max(16), "bucket {i}: [{min}, {max}]");
            }
            prev_max = Some(max);
        }
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
        assert_eq!(bucket_of(1 << 40), BUCKETS - 1);
        assert_eq!(BUCKETS, 592);
    }

    #[test]
    fn p95_of_one_to_a_thousand_ms() {
        let mut q = LatencyQuantile::new(950_000, 60_000);
        assert_eq!(q.estimate(), None);
        // A shuffled order, so the pointer moves both ways.
        for i in 0..1_000u64 {
            q.record(Duration::from_millis((i * 337) % 1_000 + 1));
        }
        let x = 950_000_000u64; // the 950th smallest: 950 ms
        let est = q.estimate().unwrap().as_nanos();
        assert!(x <= est && est * 16 < x * 17, "{est}");
        // p100 is the largest's bucket, p0.0001 the smallest's.
        let mut max = LatencyQuantile::new(PPM, 60_000);
        let mut min = LatencyQuantile::new(1, 60_000);
        for ms in [5, 1, 9, 3] {
            max.record(Duration::from_millis(ms));
            min.record(Duration::from_millis(ms));
        }
        assert_eq!(
            bucket_of(max.estimate().unwrap().as_nanos()),
            bucket_of(9_000_000)
        );
        assert_eq!(
            bucket_of(min.estimate().unwrap().as_nanos()),
            bucket_of(1_000_000)
        );
    }

    #[test]
    fn halving_keeps_a_tail_of_single_samples() {
        // 95 fast samples, then 5 slow ones each in its own bucket: p95 is in the slow tail.
        let mut q = LatencyQuantile::new(950_000, 100);
        for _ in 0..95 {
            q.record(Duration::from_millis(1));
        }
        for ms in [100, 200, 300, 400] {
            q.record(Duration::from_millis(ms));
        }
        let before = q.estimate().unwrap();
        q.record(Duration::from_millis(500)); // the 100th: halved
        assert_eq!(q.samples(), 50);
        // At or below each bucket: ⌊cumulative / 2⌋; so 47 fast, and 3 of the 5 slow ones kept.
        assert_eq!(q.counts.iter().map(|&c| u32::from(c)).sum::<u32>(), 50);
        assert_eq!(q.count(bucket_of(1_000_000)), 47);
        let after = q.estimate().unwrap();
        assert!(
            after >= Duration::from_millis(100),
            "{after} (was {before})"
        );
    }

    #[test]
    fn old_latencies_fade() {
        let mut q = LatencyQuantile::new(500_000, 100);
        for _ in 0..99 {
            q.record(Duration::from_millis(100));
        }
        assert_eq!(q.samples(), 99);
        q.record(Duration::from_millis(100)); // the 100th: halved to 50
        assert_eq!(q.samples(), 50);
        // Latency drops to 10 ms; after enough samples the median follows.
        for _ in 0..60 {
            q.record(Duration::from_millis(10));
        }
        let est = q.estimate().unwrap();
        assert!(est < Duration::from_millis(11), "{est}");
        assert!(LatencyQuantile::new(0, 0).window == 2);
        assert!(LatencyQuantile::new(2 * PPM, u32::MAX).quantile_ppm == PPM);
    }
}

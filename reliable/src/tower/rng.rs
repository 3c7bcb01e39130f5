//! Uniform `u64` samples for jitter and throttle draws: SplitMix64, seeded per layer (from a
//! process-wide counter mixed with the time unless a seed is given, so two stacks built the same
//! way do not draw in lockstep).

use std::sync::atomic::{AtomicU64, Ordering};

static NEXT: AtomicU64 = AtomicU64::new(0x243f_6a88_85a3_08d3);

/// A seed that differs for every call in this process (and between processes).
pub(crate) fn fresh_seed() -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    NEXT.fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed) ^ t
}

/// SplitMix64 behind an atomic, so clones of a service can draw without a lock.
#[derive(Debug)]
pub(crate) struct Samples(AtomicU64);

impl Samples {
    pub(crate) fn new(seed: u64) -> Self {
        Samples(AtomicU64::new(seed))
    }

    pub(crate) fn next(&self) -> u64 {
        let mut z = self
            .0
            .fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed)
            .wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

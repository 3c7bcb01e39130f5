//! Turning raw random `u64` samples into the values the policies need, without floats.
//!
//! The core takes randomness as input: either a [`rand_core::Rng`] or a raw `u64` sample, so pure
//! helpers can be tested with pinned values. These functions are the only place samples are mapped.
//!
//! ```
//! use reliable_core::sample::{uniform_inclusive, splitmix64};
//!
//! assert_eq!(uniform_inclusive(0, 100), 0);
//! assert_eq!(uniform_inclusive(u64::MAX, 100), 100);
//! assert!(uniform_inclusive(splitmix64(7), 100) <= 100);
//! ```

/// Maps a uniform `u64` sample to a uniform integer in `[0, n]` (both ends included) by
/// fixed-point multiplication (Lemire's method without the rejection step: the bias is below
/// `(n + 1) / 2^64`, far under anything a retry policy can notice).
#[inline]
pub const fn uniform_inclusive(sample: u64, n: u64) -> u64 {
    // ⌊sample·(n + 1) / 2⁶⁴⌋ = the high word of sample·n + sample: one multiplication, then the
    // carry of adding `sample` to its low word. No branch for n = u64::MAX (the answer is then
    // `sample`).
    let wide = sample as u128 * n as u128;
    let (_, carry) = (wide as u64).overflowing_add(sample);
    (wide >> 64) as u64 + carry as u64
}

/// Maps a uniform `u64` sample to a uniform integer in `[lo, hi]`; returns `lo` if `hi < lo`.
#[inline]
pub const fn uniform_between(sample: u64, lo: u64, hi: u64) -> u64 {
    // hi < lo gives a width of 0, so `lo`: no branch.
    lo + uniform_inclusive(sample, hi.saturating_sub(lo))
}

/// A seed no other call of this function in this program has returned (until 2³² calls), for
/// things that must not act in lockstep when built the same way: each breaker's open-time jitter.
///
/// It counts instances in a static atomic, so it depends on the order in which they are built;
/// where runs must be reproducible (a simulation, a test), pass a seed explicitly instead. On
/// targets without atomic read-modify-write (Cortex-M0) two instances built at the same moment
/// from an interrupt and the main loop may get the same seed.
pub fn instance_seed() -> u64 {
    use core::sync::atomic::{AtomicU32, Ordering::Relaxed};
    static INSTANCES: AtomicU32 = AtomicU32::new(0);
    #[cfg(target_has_atomic = "32")]
    let n = INSTANCES.fetch_add(1, Relaxed);
    #[cfg(not(target_has_atomic = "32"))]
    let n = {
        let n = INSTANCES.load(Relaxed);
        INSTANCES.store(n.wrapping_add(1), Relaxed);
        n
    };
    splitmix64(0x5EED_0FB4_EA4E_4B45 ^ u64::from(n))
}

/// SplitMix64: a fast, well-mixed hash of a `u64`. Used to derive per-event samples from a seed
/// (for example the breaker's open-time jitter from its seed and generation) without keeping
/// generator state.
#[inline]
pub const fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Returns `true` with probability `ppm / 1_000_000` for a uniform sample.
#[inline]
pub const fn bernoulli_ppm(sample: u64, ppm: u32) -> bool {
    uniform_inclusive(sample, crate::PPM as u64 - 1) < ppm as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ends_are_reachable_and_bounds_hold() {
        for n in [0, 1, 2, 7, 1_000, u64::MAX - 1, u64::MAX] {
            assert_eq!(uniform_inclusive(0, n), 0);
            assert_eq!(uniform_inclusive(u64::MAX, n), n);
            for s in [1, 12345, u64::MAX / 2, u64::MAX - 1] {
                assert!(uniform_inclusive(s, n) <= n);
            }
        }
        assert_eq!(uniform_between(5, 10, 3), 10);
        assert!(!bernoulli_ppm(u64::MAX, 999_999) || bernoulli_ppm(u64::MAX, 1_000_000));
        assert!(bernoulli_ppm(u64::MAX, 1_000_000));
        assert!(!bernoulli_ppm(0, 0));
    }

    #[test]
    fn the_carry_form_is_the_128_bit_product() {
        let mut x = 3u64;
        for i in 0..100_000u32 {
            x = splitmix64(x);
            let sample = if i % 7 == 0 {
                u64::MAX - u64::from(i % 3)
            } else {
                x
            };
            let n = match i % 4 {
                0 => splitmix64(x),
                1 => splitmix64(x) >> (x % 64),
                2 => u64::MAX - (x % 3),
                _ => x % 1_000,
            };
            let want = if n == u64::MAX {
                sample
            } else {
                ((u128::from(sample) * (u128::from(n) + 1)) >> 64) as u64
            };
            assert_eq!(uniform_inclusive(sample, n), want, "{sample} {n}");
        }
    }
}

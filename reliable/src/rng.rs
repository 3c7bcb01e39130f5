//! Each instance's random numbers: a SplitMix64 sequence behind one atomic, so clones on many
//! threads draw without a lock, and a seed replays the same draws in the same order.

use reliable_core::sample::splitmix64;
use std::sync::atomic::{AtomicU64, Ordering};

/// SplitMix64's increment (the golden ratio): every state is visited once per 2^64 draws.
const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

#[derive(Debug)]
pub(crate) struct Rng {
    seed: u64,
    state: AtomicU64,
}

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng {
            seed,
            state: AtomicU64::new(seed),
        }
    }

    /// The next uniform `u64`.
    pub fn next_u64(&self) -> u64 {
        splitmix64(
            self.state
                .fetch_add(GAMMA, Ordering::Relaxed)
                .wrapping_add(GAMMA),
        )
    }

    /// A seed for a part of the instance (the breaker's open-time jitter), derived from the
    /// instance's seed and `stream`, independent of the draws.
    pub fn fork(&self, stream: u64) -> u64 {
        splitmix64(self.seed ^ splitmix64(stream))
    }
}

/// Uniform samples given from outside instead of drawn from a seeded stream: a throttle's
/// decisions replayed from a script (tests, the cross-face conformance suite).
#[derive(Clone)]
pub(crate) struct Given(pub std::sync::Arc<dyn Fn() -> u64 + Send + Sync>);

impl std::fmt::Debug for Given {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Given(..)")
    }
}

/// A seed that differs per call and per process: `std`'s randomly keyed hasher.
pub(crate) fn random_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(0);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeded_draws_repeat_and_forks_differ() {
        let (a, b) = (Rng::new(7), Rng::new(7));
        let xs: Vec<u64> = (0..4).map(|_| a.next_u64()).collect();
        let ys: Vec<u64> = (0..4).map(|_| b.next_u64()).collect();
        assert_eq!(xs, ys);
        assert_ne!(xs[0], xs[1]);
        assert_ne!(a.fork(1), a.fork(2));
        assert_ne!(Rng::new(8).next_u64(), Rng::new(7).next_u64());
    }
}

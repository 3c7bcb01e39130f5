//! Random streams: one master seed forked into an independent stream per component.
//!
//! Each component (the workload, each downstream's service times, each downstream's network, the
//! clients' jitter...) draws from its own xoshiro256++ generator, seeded by SplitMix64 from the
//! master seed and the component's [`StreamId`]. So adding a client or a policy layer never shifts
//! the draws of the server, and **the workload's stream does not depend on the policy**: every
//! policy of a scenario sees the same arrivals (times and clients). Downstream streams do not depend
//! on the policy either (common random numbers), which makes policy differences less noisy.
//!
//! Closed-loop think times are drawn counter-based ([`Stream::keyed`]): the `k`-th think time of
//! client `c` is a pure function of `(seed, c, k)`, independent of the order in which clients
//! happen to finish under a given policy.

use rand::{Rng, RngExt, SeedableRng};
use rand_xoshiro::{SplitMix64, Xoshiro256PlusPlus};
use reliable_core::sample::splitmix64;

/// Which component a stream belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StreamId {
    /// The workload: arrival times and which client each arrival belongs to.
    Workload,
    /// A downstream's service times and injected errors.
    Service(u16),
    /// A downstream's network delays, both ways.
    Network(u16),
    /// Client-side policy randomness (retry jitter, throttling draws).
    Client,
    /// Faults that draw (error-rate and throttle shares).
    Faults(u16),
    /// Per-request timeouts drawn by calls (keyed by request number and node).
    Timeouts,
    /// A replicated downstream's balancer (its group's index).
    Balancer(u16),
    /// A store's round trips (its index among the scenario's stores).
    Store(u16),
    #[cfg(test)]
    /// Tests.
    Test,
}

impl StreamId {
    fn code(self) -> u64 {
        match self {
            StreamId::Workload => 1,
            StreamId::Service(i) => 0x1_0000 | u64::from(i),
            StreamId::Network(i) => 0x2_0000 | u64::from(i),
            StreamId::Client => 3,
            StreamId::Faults(i) => 0x4_0000 | u64::from(i),
            StreamId::Timeouts => 5,
            StreamId::Balancer(i) => 0x6_0000 | u64::from(i),
            StreamId::Store(i) => 0x7_0000 | u64::from(i),
            #[cfg(test)]
            StreamId::Test => 0xFFFF_FFFF,
        }
    }
}

/// Derives a 64-bit seed for `(master, id, key)`.
pub fn derive(master: u64, id: StreamId, key: u64) -> u64 {
    splitmix64(splitmix64(splitmix64(master) ^ id.code()) ^ key.wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

/// One component's random stream.
#[derive(Clone, Debug)]
pub struct Stream {
    rng: Xoshiro256PlusPlus,
}

impl Stream {
    /// The stream of component `id` under master seed `seed`.
    pub fn new(seed: u64, id: StreamId) -> Self {
        Stream {
            rng: Xoshiro256PlusPlus::seed_from_u64(derive(seed, id, 0)),
        }
    }

    /// A throwaway generator for one keyed draw: a pure function of `(seed, id, key)`.
    pub fn keyed(seed: u64, id: StreamId, key: u64) -> SplitMix64 {
        SplitMix64::seed_from_u64(derive(seed, id, key))
    }

    /// A uniform `u64`.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.rng.next_u64()
    }

    /// A uniform integer in `[0, n)`; 0 when `n` is 0.
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        ((u128::from(self.rng.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// A uniform float in `[0, 1)`.
    #[inline]
    pub fn unit(&mut self) -> f64 {
        self.rng.random::<f64>()
    }

    /// `true` with probability `p`.
    #[inline]
    pub fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && (p >= 1.0 || self.unit() < p)
    }

    /// The underlying generator, for distributions and the core's policies.
    pub fn rng(&mut self) -> &mut Xoshiro256PlusPlus {
        &mut self.rng
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_reproducible_and_independent() {
        let a: Vec<u64> = {
            let mut s = Stream::new(1, StreamId::Workload);
            (0..4).map(|_| s.next_u64()).collect()
        };
        let b: Vec<u64> = {
            let mut s = Stream::new(1, StreamId::Workload);
            (0..4).map(|_| s.next_u64()).collect()
        };
        let c: Vec<u64> = {
            let mut s = Stream::new(1, StreamId::Service(0));
            (0..4).map(|_| s.next_u64()).collect()
        };
        let d: Vec<u64> = {
            let mut s = Stream::new(2, StreamId::Workload);
            (0..4).map(|_| s.next_u64()).collect()
        };
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_ne!(a, d);
        assert_ne!(
            Stream::keyed(1, StreamId::Workload, 5).next_u64(),
            Stream::keyed(1, StreamId::Workload, 6).next_u64()
        );
    }

    #[test]
    fn below_and_chance_stay_in_range() {
        let mut s = Stream::new(3, StreamId::Test);
        assert_eq!(s.below(0), 0);
        let mut hits = 0;
        for _ in 0..10_000 {
            assert!(s.below(7) < 7);
            hits += u32::from(s.chance(0.25));
        }
        assert!((2_200..2_800).contains(&hits), "{hits}");
        assert!(!s.chance(0.0));
        assert!(s.chance(1.0));
    }
}

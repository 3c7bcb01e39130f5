//! Closed-loop clients: each sends a request, waits for its final answer (success or give-up),
//! thinks, and sends the next. The load they offer falls when the downstream slows down, which is
//! why backoff works differently for them than for open-loop arrivals (Brooker, "What is Backoff
//! For?").
//!
//! Start offsets and think times are keyed draws: the `k`-th think time of client `c` depends only
//! on `(seed, c, k)`, so it is the same whichever policy runs and whenever the client finishes.

use crate::engine::{Stream, StreamId};
use crate::model::dist::Sampler;

/// The closed-loop clients of one run.
#[derive(Clone, Debug)]
pub struct ClosedLoop {
    seed: u64,
    think: Sampler,
    spread_ns: u64,
    /// Requests each client has finished.
    done: Vec<u64>,
}

impl ClosedLoop {
    /// `clients` clients thinking `think` between requests, starting over `[0, spread)`.
    pub fn new(seed: u64, clients: u32, think: Sampler, spread_ns: u64) -> Self {
        ClosedLoop {
            seed,
            think,
            spread_ns,
            done: vec![0; clients as usize],
        }
    }

    /// Number of clients.
    pub fn clients(&self) -> u32 {
        self.done.len() as u32
    }

    /// When client `c` sends its first request.
    pub fn start_of(&self, c: u32) -> u64 {
        start_offset(self.seed, c, self.spread_ns)
    }

    /// Client `c` got its final answer: how long it thinks before the next request.
    pub fn think_after(&mut self, c: u32) -> u64 {
        let Some(k) = self.done.get_mut(c as usize) else {
            return 0;
        };
        *k += 1;
        let key = (u64::from(c) << 32) ^ *k;
        self.think
            .sample(&mut Stream::keyed(self.seed, StreamId::Workload, key))
    }
}

/// A keyed uniform start offset in `[0, spread)` for client `c`.
pub fn start_offset(seed: u64, c: u32, spread_ns: u64) -> u64 {
    if spread_ns == 0 {
        return 0;
    }
    let r = rand::Rng::next_u64(&mut Stream::keyed(
        seed,
        StreamId::Workload,
        u64::from(c) | 1 << 63,
    ));
    ((u128::from(r) * u128::from(spread_ns)) >> 64) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn think_times_depend_only_on_client_and_count() {
        let think = Sampler::Exponential {
            dist: rand_distr::Exp::new(1.0 / 1e9).unwrap(),
            mean_ns: 1e9,
        };
        let mut a = ClosedLoop::new(3, 4, think.clone(), 1_000);
        let mut b = ClosedLoop::new(3, 4, think, 1_000);
        // Different finishing orders, same draws per (client, k).
        let a1 = a.think_after(1);
        let a0 = a.think_after(0);
        let b0 = b.think_after(0);
        let b1 = b.think_after(1);
        assert_eq!((a0, a1), (b0, b1));
        assert_ne!(a0, a1);
        assert!(a.start_of(2) < 1_000);
    }
}

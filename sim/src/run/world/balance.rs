//! Replicas behind a balancer: which replica an attempt to a replicated downstream goes to.
//!
//! Each group keeps a cursor (round robin, and where least-outstanding's scan starts) and a random
//! stream of its own, so picks are the same on every run of a seed whatever else draws. An
//! attempt is *outstanding* at its replica from when it is sent to when it is answered, times out
//! or is cancelled, as a client-side balancer counts active requests.

use super::*;
use crate::scenario::Balancer;

/// One group's balancer state.
#[derive(Debug)]
pub(super) struct BalancerState {
    cursor: u32,
    rng: Stream,
}

impl BalancerState {
    /// The balancers of `c`'s groups under master seed `seed`.
    pub(super) fn all(c: &Compiled, seed: u64) -> Vec<BalancerState> {
        (0..c.groups.len())
            .map(|g| BalancerState {
                cursor: 0,
                rng: Stream::new(seed, StreamId::Balancer(g as u16)),
            })
            .collect()
    }
}

impl World<'_> {
    /// The downstream an attempt to `ds` goes to: `ds` itself, or a replica its group's balancer
    /// picks; counted as outstanding there.
    #[inline]
    pub(super) fn pick_replica(&mut self, ds: u16) -> u16 {
        let g = self.c.group_of.get(usize::from(ds)).copied().unwrap_or(u16::MAX);
        if g == u16::MAX {
            return ds;
        }
        let group = &self.c.groups[usize::from(g)];
        let members = &group.members;
        let n = members.len() as u32;
        let b = &mut self.balancers[usize::from(g)];
        let out = &self.outstanding;
        let load = |k: u32| out[usize::from(members[k as usize])];
        let k = match group.balancer {
            Balancer::RoundRobin => {
                let k = b.cursor % n;
                b.cursor = (k + 1) % n;
                k
            }
            Balancer::Random => b.rng.below(u64::from(n)) as u32,
            Balancer::LeastOutstanding => {
                let start = b.cursor % n;
                let mut best = start;
                for j in 1..n {
                    let k = (start + j) % n;
                    if load(k) < load(best) {
                        best = k;
                    }
                }
                b.cursor = (best + 1) % n;
                best
            }
            Balancer::PowerOfTwo => {
                if n < 2 {
                    0
                } else {
                    let a = b.rng.below(u64::from(n)) as u32;
                    let c = (a + 1 + b.rng.below(u64::from(n - 1)) as u32) % n;
                    if load(c) < load(a) { c } else { a }
                }
            }
        };
        let d = members[k as usize];
        self.outstanding[usize::from(d)] += 1;
        d
    }

    /// An attempt sent to `ds` ended (answered, timed out or cancelled).
    #[inline]
    pub(super) fn attempt_gone(&mut self, ds: u16) {
        if let Some(o) = self.outstanding.get_mut(usize::from(ds)) {
            *o = o.saturating_sub(1);
        }
    }
}

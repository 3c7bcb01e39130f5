//! Replicas behind a balancer, for real: each replica is a downstream of its own (its own
//! listener, workers and queue), and every attempt to the group picks one, as `sim` picks it.
//!
//! One balancer per group for the whole run (every caller's attempts, the edge's and the
//! services', go through it), with a cursor (round robin, and where least-outstanding's scan
//! starts) and a random stream of its own (`sim`'s stream for the group, so a seed draws the same
//! numbers). An attempt is *outstanding* at its replica from when it is sent to when it is
//! answered, times out or is cancelled. Where a request's later attempts go follows the group's
//! `retry_host`: anywhere, the same replica, or one the request has not tried yet while one is
//! left (replica `k` counts as `k % 64`, as in `sim`). Outlier detection is not emulated yet:
//! [`crate::graph::check`] refuses it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::simface::{Balancer, Compiled, RetryHost, Stream, StreamId};

/// The replicas a request tried in a group (kept in its [`Logical`](crate::client::Logical)).
#[derive(Clone, Copy, Debug)]
pub struct Tried {
    group: usize,
    /// The last one (`u32::MAX`: none yet).
    last: u32,
    /// Bit `k % 64` for each replica `k` tried.
    mask: u64,
}

impl Default for Tried {
    fn default() -> Self {
        Tried {
            group: usize::MAX,
            last: u32::MAX,
            mask: 0,
        }
    }
}

#[derive(Debug)]
struct State {
    cursor: u32,
    rng: Stream,
    /// Attempts outstanding per replica.
    outstanding: Vec<u32>,
}

/// One replicated downstream's balancer.
#[derive(Debug)]
pub struct Group {
    index: usize,
    /// The run's downstream indices of its replicas, replica 0 first.
    pub members: Vec<usize>,
    balancer: Balancer,
    retry_host: RetryHost,
    state: Mutex<State>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Group {
    /// Picks the replica (its position in [`members`](Self::members)) for an attempt of a
    /// request that tried `tried` (`first`: the request's first attempt), counted as
    /// outstanding there until [`gone`](Self::gone).
    pub fn pick(&self, tried: &mut Tried, first: bool) -> usize {
        let mut st = lock(&self.state);
        let n = self.members.len() as u32;
        if first || tried.group != self.index {
            *tried = Tried {
                group: self.index,
                ..Tried::default()
            };
        }
        let bit = |k: u32| 1u64 << (k % 64);
        let k = if self.retry_host == RetryHost::Same && tried.last != u32::MAX {
            tried.last
        } else {
            let mut avoid = if self.retry_host == RetryHost::Other {
                tried.mask
            } else {
                0
            };
            let mut healthy = if avoid == 0 {
                n
            } else {
                (0..n).filter(|&k| avoid & bit(k) == 0).count() as u32
            };
            if healthy == 0 {
                avoid = 0;
                healthy = n;
            }
            let ok = |k: u32| avoid & bit(k) == 0;
            let nth = |i: u32| -> u32 {
                if healthy == n {
                    return i;
                }
                (0..n).filter(|&k| ok(k)).nth(i as usize).unwrap_or(0)
            };
            let State {
                cursor,
                rng,
                outstanding,
            } = &mut *st;
            let load = |k: u32| outstanding[k as usize];
            match self.balancer {
                Balancer::RoundRobin => {
                    let mut k = *cursor % n;
                    for _ in 0..n {
                        if ok(k) {
                            break;
                        }
                        k = (k + 1) % n;
                    }
                    *cursor = (k + 1) % n;
                    k
                }
                Balancer::Random => nth(rng.below(u64::from(healthy)) as u32),
                Balancer::LeastOutstanding => {
                    let start = *cursor % n;
                    let mut best = None;
                    for j in 0..n {
                        let k = (start + j) % n;
                        if ok(k) && best.is_none_or(|x| load(k) < load(x)) {
                            best = Some(k);
                        }
                    }
                    let best = best.unwrap_or(start);
                    *cursor = (best + 1) % n;
                    best
                }
                Balancer::PowerOfTwo => {
                    if healthy < 2 {
                        nth(0)
                    } else {
                        let i = rng.below(u64::from(healthy)) as u32;
                        let j = (i + 1 + rng.below(u64::from(healthy - 1)) as u32) % healthy;
                        let (a, c) = (nth(i), nth(j));
                        if load(c) < load(a) { c } else { a }
                    }
                }
            }
        };
        tried.last = k;
        tried.mask |= bit(k);
        st.outstanding[k as usize] += 1;
        k as usize
    }

    /// An attempt sent to replica `k` ended (answered, timed out or cancelled).
    pub fn gone(&self, k: usize) {
        if let Some(o) = lock(&self.state).outstanding.get_mut(k) {
            *o = o.saturating_sub(1);
        }
    }
}

/// Every balancer of a run, by the name calls use.
#[derive(Debug, Default)]
pub struct Balancers {
    by_name: HashMap<String, Arc<Group>>,
}

impl Balancers {
    /// The balancers of `c`'s replicated downstreams, their random streams drawn from `seed`.
    pub fn new(c: &Compiled, seed: u64) -> Self {
        let by_name = crate::simface::groups(c)
            .into_iter()
            .enumerate()
            .map(|(g, grp)| {
                let group = Group {
                    index: g,
                    members: grp.members.iter().map(|&m| usize::from(m)).collect(),
                    balancer: grp.balancer,
                    retry_host: grp.retry_host,
                    state: Mutex::new(State {
                        cursor: 0,
                        rng: Stream::new(seed, StreamId::Balancer(g as u16)),
                        outstanding: vec![0; grp.members.len()],
                    }),
                };
                (grp.name.to_string(), Arc::new(group))
            })
            .collect();
        Balancers { by_name }
    }

    /// The group calls to `name` go through, if `name` is replicated.
    pub fn get(&self, name: &str) -> Option<&Arc<Group>> {
        self.by_name.get(name)
    }
}

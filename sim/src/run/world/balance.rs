//! Replicas behind a balancer: which replica an attempt to a replicated downstream goes to, and
//! outlier detection (Envoy's `outlier_detection`) that takes bad replicas out of its choice.
//!
//! Each group keeps a cursor (round robin, and where least-outstanding's scan starts) and a random
//! stream of its own, so picks are the same on every run of a seed whatever else draws. An
//! attempt is *outstanding* at its replica from when it is sent to when it is answered, times out
//! or is cancelled, as a client-side balancer counts active requests. Outlier detection's sweeps
//! run at multiples of its interval, lazily: when a pick or an answer comes at or after the next
//! sweep's time, the sweeps due run first, in order.

use super::*;
use crate::scenario::{Balancer, OutlierDetection, RetryHost};

/// One replica's outlier-detection state.
#[derive(Clone, Copy, Debug, Default)]
struct Host {
    /// 5xx in a row.
    consecutive: u32,
    /// Ejected since (ns), if ejected.
    ejected_at: Option<u64>,
    /// Envoy's ejection multiplier: raised at each ejection, lowered at each sweep it is not
    /// ejected.
    multiplier: u32,
    /// Answers and successes since the last sweep.
    total: u32,
    ok: u32,
}

/// The replicas a request tried in a group.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Tried {
    group: u16,
    /// The last one (`u16::MAX`: none yet).
    last: u16,
    /// Bit `k % 64` for each replica `k` tried.
    mask: u64,
}

/// One group's balancer state.
#[derive(Debug)]
pub(super) struct BalancerState {
    cursor: u32,
    rng: Stream,
    /// Per replica, with outlier detection.
    hosts: Vec<Host>,
    ejected: u32,
    next_sweep: u64,
}

impl BalancerState {
    /// The balancers of `c`'s groups under master seed `seed`.
    pub(super) fn all(c: &Compiled, seed: u64) -> Vec<BalancerState> {
        c.groups
            .iter()
            .enumerate()
            .map(|(g, group)| BalancerState {
                cursor: 0,
                rng: Stream::new(seed, StreamId::Balancer(g as u16)),
                hosts: if group.outlier.is_some() {
                    vec![Host::default(); group.members.len()]
                } else {
                    Vec::new()
                },
                ejected: 0,
                next_sweep: group
                    .outlier
                    .as_ref()
                    .map_or(u64::MAX, |o| o.interval.as_nanos()),
            })
            .collect()
    }

    /// Whether replica `k` may be picked.
    #[inline]
    fn eligible(&self, k: u32, panic: bool) -> bool {
        panic
            || self
                .hosts
                .get(k as usize)
                .is_none_or(|h| h.ejected_at.is_none())
    }

    /// Ejects replica `k` at `now` if the share allows; returns whether it did.
    fn eject(&mut self, k: usize, od: &OutlierDetection, now: u64) -> bool {
        let n = self.hosts.len() as u64;
        let share_ok =
            (u64::from(self.ejected) + 1) * 100 <= u64::from(od.max_ejection_percent) * n;
        if self.hosts[k].ejected_at.is_some() || !(share_ok || self.ejected == 0) {
            return false;
        }
        let h = &mut self.hosts[k];
        h.ejected_at = Some(now);
        h.multiplier = h.multiplier.saturating_add(1);
        h.consecutive = 0;
        self.ejected += 1;
        true
    }

    /// One sweep at `now`: ejections that are over end, then success-rate detection; returns the
    /// replicas it ejected.
    fn sweep(&mut self, od: &OutlierDetection, now: u64) -> Vec<usize> {
        let base = od.base_ejection_time.as_nanos();
        let max = od.max_ejection_time.as_nanos().max(base);
        for h in &mut self.hosts {
            match h.ejected_at {
                Some(at) => {
                    let time = base.saturating_mul(u64::from(h.multiplier)).min(max);
                    if now >= at.saturating_add(time) {
                        h.ejected_at = None;
                        h.consecutive = 0;
                        self.ejected = self.ejected.saturating_sub(1);
                    }
                }
                None => h.multiplier = h.multiplier.saturating_sub(1),
            }
        }
        let mut out = Vec::new();
        if od.success_rate_stdev_factor > 0 {
            let rates: Vec<(usize, f64)> = self
                .hosts
                .iter()
                .enumerate()
                .filter(|(_, h)| h.total >= od.success_rate_request_volume.max(1))
                .map(|(k, h)| (k, f64::from(h.ok) / f64::from(h.total)))
                .collect();
            if rates.len() >= od.success_rate_minimum_hosts.max(1) as usize {
                let n = rates.len() as f64;
                let mean = rates.iter().map(|r| r.1).sum::<f64>() / n;
                let var = rates.iter().map(|r| (r.1 - mean).powi(2)).sum::<f64>() / n;
                let limit = mean - f64::from(od.success_rate_stdev_factor) / 1000.0 * var.sqrt();
                for &(k, rate) in &rates {
                    if rate < limit && self.eject(k, od, now) {
                        out.push(k);
                    }
                }
            }
        }
        for h in &mut self.hosts {
            h.total = 0;
            h.ok = 0;
        }
        out
    }
}

/// The balancers of a run and what they keep per request, apart from the rest of the world: a
/// chain's call picks a replica (its per-host breaker's) while the engine steps it.
#[derive(Debug)]
pub(super) struct Balancing {
    /// Per replicated downstream: its balancer's state.
    balancers: Vec<BalancerState>,
    /// Per downstream: attempts sent to it not yet answered or timed out (kept for replicas).
    outstanding: Vec<u32>,
    /// Per request slot: the replicas it tried (for retries that pick the same or another).
    tried: Vec<Tried>,
    /// Scratch for a per-host breaker's pick: which replicas' breakers refuse calls.
    pub(super) blocked: Vec<bool>,
}

/// What a pick reads beside the balancers: the run's groups, the time, and the counts of
/// ejections.
pub(super) struct PickCtx<'a> {
    pub(super) c: &'a Compiled,
    pub(super) now: u64,
    pub(super) m: &'a mut Recorder,
}

impl Balancing {
    /// The balancers of `c`'s groups under master seed `seed`, for `downstreams` downstreams.
    pub(super) fn new(c: &Compiled, seed: u64, downstreams: usize) -> Self {
        Balancing {
            balancers: BalancerState::all(c, seed),
            outstanding: vec![0; downstreams],
            tried: Vec::new(),
            blocked: Vec::new(),
        }
    }

    /// The downstream an attempt of `request` to `ds` goes to: `ds` itself, or a replica its
    /// group's balancer picks (`first`: the request's first attempt), or replica `host` when a
    /// per-host breaker picked it already; counted as outstanding there.
    #[inline]
    pub(super) fn pick(
        &mut self,
        cx: &mut PickCtx<'_>,
        ds: u16,
        request: Handle,
        first: bool,
        host: Option<u16>,
    ) -> u16 {
        let g = group_of(cx.c, ds);
        if g == u16::MAX {
            return ds;
        }
        let k = match host {
            Some(k) => u32::from(k),
            // With no replica blocked, one is always eligible.
            None => self.choose(cx, g, request, first, None).unwrap_or(0),
        };
        let slot = request.index as usize;
        if self.tried.len() <= slot {
            self.tried.resize(slot + 1, Tried::default());
        }
        let tried = self.tried[slot];
        self.tried[slot] = Tried {
            group: g,
            last: k as u16,
            mask: tried.mask | (1u64 << (k % 64)),
        };
        let d = cx.c.groups[usize::from(g)].members[k as usize];
        self.outstanding[usize::from(d)] += 1;
        d
    }

    /// The replica of group `g` the balancer picks for an attempt of `request` (`first`: its
    /// first attempt), among those outlier detection has not ejected and, with `blocked`, whose
    /// entry is false (their per-host breaker admits calls); `None` when `blocked` leaves none.
    /// Moves the balancer's cursor and random stream, not the request's record of replicas tried
    /// ([`pick`](Self::pick) does when the attempt is sent).
    pub(super) fn choose(
        &mut self,
        cx: &mut PickCtx<'_>,
        g: u16,
        request: Handle,
        first: bool,
        blocked: Option<&[bool]>,
    ) -> Option<u32> {
        self.sweeps_due(cx, g);
        let group = &cx.c.groups[usize::from(g)];
        let n = group.members.len() as u32;
        // What this request tried before in this group.
        let slot = request.index as usize;
        if self.tried.len() <= slot {
            self.tried.resize(slot + 1, Tried::default());
        }
        if first || self.tried[slot].group != g {
            self.tried[slot] = Tried {
                group: g,
                last: u16::MAX,
                mask: 0,
            };
        }
        let tried = self.tried[slot];
        let b = &mut self.balancers[usize::from(g)];
        // Envoy's panic threshold (50%): with fewer than half the replicas left, use them all.
        let panic = (n - b.ejected) * 2 < n;
        let open = |k: u32| blocked.is_some_and(|x| x.get(k as usize).copied().unwrap_or(true));
        if group.retry_host == RetryHost::Same
            && tried.last != u16::MAX
            && b.eligible(u32::from(tried.last), panic)
            && !open(u32::from(tried.last))
        {
            return Some(u32::from(tried.last));
        }
        // Envoy's `previous_hosts`: replicas this request tried are not picked again while
        // another is left (replica k is bit k % 64).
        let mut avoid = if group.retry_host == RetryHost::Other {
            tried.mask
        } else {
            0
        };
        let ok = |b: &BalancerState, avoid: u64, k: u32| {
            b.eligible(k, panic) && avoid & (1u64 << (k % 64)) == 0 && !open(k)
        };
        let count = |b: &BalancerState, avoid: u64| (0..n).filter(|&k| ok(b, avoid, k)).count();
        let mut healthy = if avoid == 0 && (panic || b.ejected == 0) && blocked.is_none() {
            n
        } else {
            count(b, avoid) as u32
        };
        if healthy == 0 && avoid != 0 {
            avoid = 0;
            healthy = count(b, avoid) as u32;
        }
        if healthy == 0 {
            return None;
        }
        let members = &group.members;
        let out = &self.outstanding;
        let load = |k: u32| out[usize::from(members[k as usize])];
        // The `i`-th eligible replica.
        let nth = |b: &BalancerState, i: u32| -> u32 {
            if healthy == n {
                return i;
            }
            (0..n)
                .filter(|&k| ok(b, avoid, k))
                .nth(i as usize)
                .unwrap_or(0)
        };
        let k = match group.balancer {
            Balancer::RoundRobin => {
                let mut k = b.cursor % n;
                for _ in 0..n {
                    if ok(b, avoid, k) {
                        break;
                    }
                    k = (k + 1) % n;
                }
                b.cursor = (k + 1) % n;
                k
            }
            Balancer::Random => {
                let i = b.rng.below(u64::from(healthy)) as u32;
                nth(b, i)
            }
            Balancer::LeastOutstanding => {
                let start = b.cursor % n;
                let mut best = None;
                for j in 0..n {
                    let k = (start + j) % n;
                    if ok(b, avoid, k) && best.is_none_or(|x| load(k) < load(x)) {
                        best = Some(k);
                    }
                }
                let best = best.unwrap_or(start);
                b.cursor = (best + 1) % n;
                best
            }
            Balancer::PowerOfTwo => {
                if healthy < 2 {
                    nth(b, 0)
                } else {
                    let i = b.rng.below(u64::from(healthy)) as u32;
                    let j = (i + 1 + b.rng.below(u64::from(healthy - 1)) as u32) % healthy;
                    let (a, c) = (nth(b, i), nth(b, j));
                    if load(c) < load(a) { c } else { a }
                }
            }
        };
        Some(k)
    }

    /// An attempt sent to `ds` ended (answered, timed out or cancelled).
    #[inline]
    pub(super) fn gone(&mut self, ds: u16) {
        if let Some(o) = self.outstanding.get_mut(usize::from(ds)) {
            *o = o.saturating_sub(1);
        }
    }

    /// Outlier detection hears an answer from `ds` (`failed`: a 5xx, a reset or a timeout).
    pub(super) fn outlier_outcome(&mut self, cx: &mut PickCtx<'_>, ds: u16, failed: bool) {
        let g = group_of(cx.c, ds);
        let Some(group) = cx.c.groups.get(usize::from(g)) else {
            return;
        };
        let Some(od) = &group.outlier else { return };
        self.sweeps_due(cx, g);
        let Some(k) = group.members.iter().position(|&m| m == ds) else {
            return;
        };
        let b = &mut self.balancers[usize::from(g)];
        let h = &mut b.hosts[k];
        h.total = h.total.saturating_add(1);
        if failed {
            h.consecutive = h.consecutive.saturating_add(1);
            if od.consecutive_5xx > 0 && h.consecutive >= od.consecutive_5xx {
                h.consecutive = 0;
                if b.eject(k, od, cx.now) {
                    count_ejection(cx.m, ds);
                }
            }
        } else {
            h.ok = h.ok.saturating_add(1);
            h.consecutive = 0;
        }
    }

    /// Runs group `g`'s sweeps due by now.
    fn sweeps_due(&mut self, cx: &mut PickCtx<'_>, g: u16) {
        let Some(od) = &cx.c.groups[usize::from(g)].outlier else {
            return;
        };
        let interval = od.interval.as_nanos().max(1);
        while self.balancers[usize::from(g)].next_sweep <= cx.now {
            let b = &mut self.balancers[usize::from(g)];
            let at = b.next_sweep;
            b.next_sweep = at.saturating_add(interval);
            let ejected = b.sweep(od, at);
            for k in ejected {
                let ds = cx.c.groups[usize::from(g)].members[k];
                count_ejection(cx.m, ds);
            }
        }
    }
}

/// The group `ds` belongs to, or `u16::MAX`.
#[inline]
pub(super) fn group_of(c: &Compiled, ds: u16) -> u16 {
    c.group_of.get(usize::from(ds)).copied().unwrap_or(u16::MAX)
}

fn count_ejection(m: &mut Recorder, ds: u16) {
    if let Some(d) = m.ds.get_mut(usize::from(ds)) {
        *d.ejections.get_or_insert(0) += 1;
    }
}

impl World<'_> {
    /// The group `ds` belongs to, or `u16::MAX`.
    #[inline]
    pub(super) fn group_of(&self, ds: u16) -> u16 {
        group_of(self.c, ds)
    }

    /// What a pick reads beside the balancers, borrowed from the world.
    fn pick_cx(&mut self) -> (&mut Balancing, PickCtx<'_>) {
        (
            &mut self.bal,
            PickCtx {
                c: self.c,
                now: self.now,
                m: &mut self.m,
            },
        )
    }

    /// [`Balancing::pick`] at the world's time.
    #[inline]
    pub(super) fn pick_replica(
        &mut self,
        ds: u16,
        request: Handle,
        first: bool,
        host: Option<u16>,
    ) -> u16 {
        if self.group_of(ds) == u16::MAX {
            return ds;
        }
        let (bal, mut cx) = self.pick_cx();
        bal.pick(&mut cx, ds, request, first, host)
    }

    /// An attempt sent to `ds` ended (answered, timed out or cancelled).
    #[inline]
    pub(super) fn attempt_gone(&mut self, ds: u16) {
        self.bal.gone(ds);
    }

    /// Outlier detection hears an answer from `ds` (`failed`: a 5xx, a reset or a timeout).
    pub(super) fn outlier_outcome(&mut self, ds: u16, failed: bool) {
        let (bal, mut cx) = self.pick_cx();
        bal.outlier_outcome(&mut cx, ds, failed);
    }
}

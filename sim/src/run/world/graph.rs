//! Call graphs: a service's jobs call other downstreams through their handler's stacks.
//!
//! A job of a service (a `Server` downstream with a `handler`) is served as any job (its worker,
//! its service time), then, still holding its worker, makes its handler's calls: one after
//! another, or all at once. Each call is a request of its own through its compiled stack (a
//! *hop request*: the same nodes, frames and per-layer state as an edge request, with one
//! instance of each layer's state for the service), not counted among the edge's first tries,
//! attempts or timeouts. When the calls are done the service answers its caller: a success if
//! every required call succeeded (and its own `error_rate` and faults spare it), otherwise an
//! error, or the do-not-retry answer (503, `x-should-retry: false`) with `no_retry_on_failure`.
//! A sequential handler stops at the first required call that fails.
//!
//! With `propagate_deadline`, each attempt's deadline (when its timer would fire) travels with
//! it; the service takes its margin off, refuses an arrival past it, drops queued jobs past it
//! (or whose caller is gone), stops a job past it before its calls, and gives its calls that
//! deadline. What a propagating service calls honours the deadlines its calls carry in the same
//! way (with no margin of its own), services or not.

use super::*;

/// A service job waiting for its handler's calls.
#[derive(Clone, Copy, Debug)]
pub(super) struct SvcJob {
    ds: u16,
    /// The caller's attempt it answers.
    attempt: Handle,
    /// The next call to make (sequential handlers).
    next: u16,
    /// Calls in flight.
    pending: u16,
    /// A required call failed.
    failed: bool,
    /// The deadline its calls inherit, ns (`u64::MAX`: none).
    deadline: u64,
}

/// A run's call-graph state.
#[derive(Debug, Default)]
pub(super) struct Graph {
    jobs: Slab<SvcJob>,
    /// Per request slot: the service job and call it serves (`None`: an edge request).
    parents: Vec<Option<(Handle, u16)>>,
    /// Per attempt slot: when its timer fires (its caller's deadline), ns.
    deadlines: Vec<u64>,
    /// Per downstream that honours propagated deadlines: the margin it takes off its caller's
    /// deadline (0 for a downstream that only receives them from a propagating service).
    margin: Vec<Option<u64>>,
}

/// A call graph's shape for `stack` over `c`, or `None` when no downstream is a service: per
/// downstream, its depth (the fewest hops from the edge; `u32::MAX`: no path reaches it) and the
/// margin it takes off its caller's deadline if it honours deadlines (`Some(0)`: it only
/// receives them from a propagating service). The emulator reads the same shape.
pub(crate) fn shape(c: &Compiled, stack: &CompiledStack) -> Option<(Vec<u32>, Vec<Option<u64>>)> {
    {
        if stack.handlers.iter().all(Vec::is_empty) {
            return None;
        }
        let n = c.scenario.downstreams.len();
        let first_handler = stack.handlers.iter().flatten().copied().min().unwrap_or(0);
        // Depth by breadth-first search from the edge stack's calls.
        let mut depth = vec![u32::MAX; n];
        let mut frontier: Vec<usize> = Vec::new();
        for node in &stack.nodes[..usize::from(first_handler)] {
            if let NodeKind::Call { ds, .. } | NodeKind::Llm { ds, .. } = node.kind
                && depth[usize::from(ds)] == u32::MAX
            {
                depth[usize::from(ds)] = 1;
                frontier.push(usize::from(ds));
            }
        }
        let mut d = 1;
        while !frontier.is_empty() {
            d += 1;
            let mut next = Vec::new();
            for u in frontier {
                for &root in stack.handlers.get(u).into_iter().flatten() {
                    for callee in calls_of(stack, root) {
                        if depth[callee] == u32::MAX {
                            depth[callee] = d;
                            next.push(callee);
                        }
                    }
                }
            }
            frontier = next;
        }
        // Replicas sit at their group's depth (calls name replica 0).
        for g in &c.groups {
            let d0 = depth[usize::from(g.members[0])];
            for &m in &g.members[1..] {
                depth[usize::from(m)] = d0;
            }
        }
        let mut margin: Vec<Option<u64>> = c
            .scenario
            .downstreams
            .iter()
            .map(|d| {
                d.handler
                    .as_ref()
                    .and_then(|h| h.propagate_deadline.as_ref())
                    .map(|p| p.margin.as_nanos())
            })
            .collect();
        // A propagating service's calls carry its deadline (less its margin, already taken off):
        // what it calls honours them as they come.
        for u in 0..n {
            if margin[u].is_none() || stack.handlers.get(u).is_none() {
                continue;
            }
            for &root in &stack.handlers[u] {
                for callee in calls_of(stack, root) {
                    margin[callee] = margin[callee].or(Some(0));
                    // Every replica of a group honours them.
                    let g = c.group_of.get(callee).copied().unwrap_or(u16::MAX);
                    if let Some(group) = c.groups.get(usize::from(g)) {
                        for &m in &group.members {
                            margin[usize::from(m)] = margin[usize::from(m)].or(Some(0));
                        }
                    }
                }
            }
        }
        Some((depth, margin))
    }
}

impl Graph {
    /// The graph state of a run of `stack` over `c`, with the depth of each downstream, or
    /// `None` when no downstream is a service.
    pub(super) fn new(c: &Compiled, stack: &CompiledStack) -> Option<(Box<Graph>, Vec<u32>)> {
        let (depth, margin) = shape(c, stack)?;
        Some((
            Box::new(Graph {
                margin,
                ..Graph::default()
            }),
            depth,
        ))
    }

    /// Whether a propagating service at `ds` should refuse or drop the job of `attempt` now.
    #[inline]
    pub(super) fn past_deadline(&self, ds: u16, attempt: Handle, now: u64) -> bool {
        match self.margin.get(ds as usize).copied().flatten() {
            Some(m) => {
                let fire = self
                    .deadlines
                    .get(attempt.index as usize)
                    .copied()
                    .unwrap_or(u64::MAX);
                fire.saturating_sub(m) <= now
            }
            None => false,
        }
    }

    /// Whether `ds` propagates deadlines.
    pub(super) fn propagates(&self, ds: u16) -> bool {
        self.margin.get(ds as usize).copied().flatten().is_some()
    }
}

/// The downstreams the stack under `root` calls (a handler call's nodes follow its root up to the
/// next root).
fn calls_of(stack: &CompiledStack, root: u16) -> Vec<usize> {
    let mut out = Vec::new();
    let mut i = usize::from(root);
    while let Some(n) = stack.nodes.get(i) {
        if i > usize::from(root) && n.parent == NONE {
            break;
        }
        if let NodeKind::Call { ds, .. } | NodeKind::Llm { ds, .. } = n.kind {
            out.push(usize::from(ds));
        }
        i += 1;
    }
    out
}

impl World<'_> {
    /// Whether `request` is a hop request (a service's call), not an edge request.
    #[inline]
    pub(super) fn is_hop(&self, request: Handle) -> bool {
        self.graph.as_ref().is_some_and(|g| {
            g.parents
                .get(request.index as usize)
                .is_some_and(Option::is_some)
        })
    }

    /// Records when `attempt`'s timer fires, for deadline propagation.
    #[inline]
    pub(super) fn note_deadline(&mut self, attempt: Handle, fire: u64) {
        if let Some(g) = &mut self.graph {
            let i = attempt.index as usize;
            if g.deadlines.len() <= i {
                g.deadlines.resize(i + 1, u64::MAX);
            }
            g.deadlines[i] = fire;
        }
    }

    /// Whether `ds` is a service in this run.
    #[inline]
    pub(super) fn is_service(&self, ds: u16) -> bool {
        self.graph.is_some()
            && self
                .stack
                .handlers
                .get(ds as usize)
                .is_some_and(|h| !h.is_empty())
    }

    /// A service's job finished its service time: make its handler's calls.
    pub(super) fn start_job(&mut self, ds: u16, attempt: Handle) {
        let now = self.now;
        let Some(g) = &mut self.graph else { return };
        let deadline = match g.margin.get(ds as usize).copied().flatten() {
            Some(m) => {
                let fire = if self.attempts.contains(attempt) {
                    g.deadlines
                        .get(attempt.index as usize)
                        .copied()
                        .unwrap_or(u64::MAX)
                } else {
                    // The caller is gone.
                    now
                };
                fire.saturating_sub(m)
            }
            None => u64::MAX,
        };
        let calls = self.stack.handlers[ds as usize].len() as u16;
        let parallel = self.c.scenario.downstreams[ds as usize]
            .handler
            .as_ref()
            .is_some_and(|h| h.parallel);
        let job = SvcJob {
            ds,
            attempt,
            next: if parallel { calls } else { 1 },
            pending: if parallel { calls } else { 1 },
            failed: false,
            deadline,
        };
        if deadline <= now {
            if let Some(h) = &mut self.m.hops {
                h.past_deadline[ds as usize] += 1;
            }
            self.end_job(SvcJob {
                failed: true,
                ..job
            });
            return;
        }
        let jh = g.jobs.insert(job);
        if parallel {
            for j in 0..calls {
                self.start_hop(jh, j, deadline);
            }
        } else {
            self.start_hop(jh, 0, deadline);
        }
    }

    /// Starts call `j` of service job `job`.
    fn start_hop(&mut self, job: Handle, j: u16, deadline: u64) {
        let Some(ds) = self
            .graph
            .as_ref()
            .and_then(|g| g.jobs.get(job))
            .map(|jb| jb.ds)
        else {
            return;
        };
        let root = self.stack.handlers[ds as usize][j as usize];
        let h = self.requests.insert(Request {
            id: 0,
            start: self.now,
            client: 0,
            attempts: 0,
        });
        let stride = self.stack.frames;
        let need = (h.index as usize + 1) * stride;
        if self.frames.len() < need {
            self.frames.resize_with(need, Frame::default);
        }
        if let Some(g) = &mut self.graph {
            let i = h.index as usize;
            if g.parents.len() <= i {
                g.parents.resize(i + 1, None);
            }
            g.parents[i] = Some((job, j));
        }
        self.invoke(h, root, deadline);
    }

    /// If `request` is a hop request, ends it with `ans` (handing the result to its service job)
    /// and returns true.
    pub(super) fn finish_hop(&mut self, request: Handle, ans: &Answer) -> bool {
        let Some(g) = &mut self.graph else {
            return false;
        };
        let Some((job, j)) = g
            .parents
            .get_mut(request.index as usize)
            .and_then(Option::take)
        else {
            return false;
        };
        self.requests.remove(request);
        let ok = ans.is_ok();
        let Some(g) = &mut self.graph else {
            return true;
        };
        let Some(jb) = g.jobs.get_mut(job) else {
            return true;
        };
        let required = self.c.scenario.downstreams[jb.ds as usize]
            .handler
            .as_ref()
            .and_then(|h| h.calls.get(j as usize))
            .is_none_or(|c| c.required);
        jb.pending = jb.pending.saturating_sub(1);
        if !ok && required {
            jb.failed = true;
        }
        if jb.pending > 0 {
            return true;
        }
        let calls = self.stack.handlers[jb.ds as usize].len() as u16;
        if !jb.failed && jb.next < calls {
            let (next, deadline) = (jb.next, jb.deadline);
            jb.next += 1;
            jb.pending = 1;
            if deadline <= self.now {
                // Past the deadline between two calls: stop here.
                jb.failed = true;
                jb.pending = 0;
                let ds = jb.ds;
                if let Some(h) = &mut self.m.hops {
                    h.past_deadline[ds as usize] += 1;
                }
            } else {
                self.start_hop(job, next, deadline);
                return true;
            }
        }
        let Some(g) = &mut self.graph else {
            return true;
        };
        if let Some(jb) = g.jobs.get(job).copied() {
            g.jobs.remove(job);
            self.end_job(jb);
        }
        true
    }

    /// A service job's calls are done: free its worker and answer its caller.
    fn end_job(&mut self, jb: SvcJob) {
        let now = self.now;
        let ds = jb.ds;
        let i = ds as usize;
        let fault_rate = self.c.timeline.error_rate(i, now);
        let Ds::Server(server) = &mut self.ds[i] else {
            return;
        };
        server.finish();
        let p = 1.0 - (1.0 - server.error_rate) * (1.0 - fault_rate);
        let failed = jb.failed || (p > 0.0 && server.rng.chance(p));
        self.m.answered(now, ds, !failed, false);
        let no_retry = self.c.scenario.downstreams[i]
            .handler
            .as_ref()
            .is_some_and(|h| h.no_retry_on_failure);
        let (reply, hint) = if !failed {
            (Reply::Ok, 0)
        } else if jb.failed && no_retry {
            (Reply::Status, self.c.no_retry_status)
        } else {
            (Reply::Error, 0)
        };
        self.send_reply(ds, jb.attempt, reply, hint);
        self.drain_server(ds);
    }
}

impl World<'_> {
    /// Attempt `a` timed out in a run over a call graph: counted for its downstream, and for the
    /// edge's figures if it is the edge's.
    pub(super) fn hop_ended(&mut self, a: Attempt) {
        let latency = self.now - a.sent;
        if let Some(NodeKind::Call { .. }) = self.stack.nodes.get(a.node as usize).map(|n| &n.kind)
            && let Some(h) = &mut self.m.hops
        {
            let e = &mut h.ended[a.ds as usize];
            e.0 += 1;
            e.1 += latency / 1_000;
        }
        if !self.is_hop(a.request) {
            self.m.at(self.now).timeouts += 1;
            self.m.attempt_ended(self.now, latency);
        }
    }
}

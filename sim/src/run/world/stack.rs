//! How a logical request travels through its policy stack: invoking nodes, handing answers up,
//! retry wake-ups, and finishing the request (see the [parent module](super) for the overview).

use reliable_core::breaker::{State, Transition};
use reliable_core::{Duration, Instant};

use super::*;

/// Counts a breaker's transition at `now`: a live one's (a decision, and the count of open
/// breakers), or, for a breaker in `shadow` mode, a would-be transition (which leaves the count
/// of open breakers alone: it sends regardless, and it is not a decision of the stack's).
pub(super) fn count_transition(
    m: &mut Recorder,
    decisions: &mut Option<Vec<(u64, Decision)>>,
    now: u64,
    t: Option<Transition>,
    shadow: bool,
) {
    let Some(t) = t else { return };
    let open = |s: State| matches!(s, State::Open | State::ForcedOpen);
    let opens = open(t.to) && !open(t.from);
    if shadow {
        m.shadow_transition(now, opens);
        return;
    }
    if let Some(log) = decisions {
        log.push((now, Decision::Breaker(t)));
    }
    m.breaker_transitions += 1;
    if opens {
        m.breakers_open += 1;
    } else if open(t.from) && !open(t.to) {
        m.breakers_open = m.breakers_open.saturating_sub(1);
    }
}

impl World<'_> {
    pub(super) fn start_request(&mut self, client: u32) {
        let id = self.next_id;
        self.next_id += 1;
        self.m.first_try(self.now);
        let h = self.requests.insert(Request {
            id,
            start: self.now,
            client,
            attempts: 0,
        });
        let stride = self.stack.frames;
        let need = (h.index as usize + 1) * stride;
        if self.frames.len() < need {
            self.frames.resize_with(need, Frame::default);
        }
        let need = (h.index as usize + 1) * self.fleet_stride;
        if self.fleet_frames.len() < need {
            self.fleet_frames.resize_with(need, FleetFrame::default);
        }
        let in_flight = self.requests.len() as u64;
        if in_flight > self.m.peak_in_flight {
            self.m.peak_in_flight = in_flight;
        }
        if let Some(trace) = &mut self.trace
            && trace.len() < TRACE_ROWS
        {
            let now = Instant::from_nanos(self.now);
            // A fleet's breaker: the fleet's state (the store's, number 0).
            let states = self
                .breakers
                .iter()
                .zip(&self.fleet)
                .map(|(v, fleet)| {
                    let i = if fleet.is_empty() {
                        client as usize % v.len().max(1)
                    } else {
                        0
                    };
                    v.get(i).state(now).name()
                })
                .collect();
            trace.push(TraceRow {
                request: id,
                start_ns: self.now,
                client,
                breakers_before: states,
                outcome: "",
                served_by: String::new(),
                attempts: 0,
                latency_ns: 0,
                calls_so_far: Vec::new(),
            });
        }
        self.invoke(h, 0, u64::MAX);
    }

    #[inline]
    pub(super) fn frame_mut(&mut self, request: Handle, node: u16) -> Option<&mut Frame> {
        let f = self.stack.nodes.get(node as usize)?.frame;
        if f == NONE {
            return None;
        }
        let i = request.index as usize * self.stack.frames + f as usize;
        self.frames.get_mut(i)
    }

    /// Which of `n` instances (1 when shared, one per client otherwise) serves `request`.
    #[inline]
    pub(super) fn instance(&self, n: usize, request: Handle) -> usize {
        if n <= 1 {
            return 0;
        }
        self.requests.get(request).map_or(0, |r| r.client as usize) % n
    }

    /// A wake-up of the chain topped by `node` is due (its engine call's: a backoff, a hedge, a
    /// copy's or the enclosing deadline).
    pub(super) fn wake(&mut self, request: Handle, node: u16) {
        if !self.requests.contains(request) {
            return;
        }
        if let Some(n) = self.stack.nodes.get(usize::from(node))
            && n.chain != NONE
        {
            self.wake_chain(request, n.chain);
        }
    }

    /// Starts node `node` for `request`; `deadline` (ns) is the nearest enclosing deadline.
    pub(super) fn invoke(&mut self, request: Handle, node: u16, deadline: u64) {
        let stack = self.stack;
        let Some(n) = stack.nodes.get(node as usize) else {
            return;
        };
        if n.chain != NONE && !matches!(n.kind, NodeKind::Call { .. }) {
            self.start_chain(request, n.chain, deadline);
            return;
        }
        match &n.kind {
            NodeKind::Call {
                ds,
                timeout,
                timeout_dist,
            } => {
                if deadline <= self.now {
                    // An enclosing deadline has already passed: the call is not sent.
                    self.m.at(self.now).timeouts += 1;
                    self.answer(request, node, Answer::new(AnswerKind::Timeout, node));
                    return;
                }
                if self.request_network_down(request) {
                    // The client's own network is down: the call fails at once, unsent.
                    self.answer(request, node, Answer::new(AnswerKind::Unavailable, node));
                    return;
                }
                self.send_attempt(
                    request,
                    node,
                    (*ds, None),
                    *timeout,
                    timeout_dist.as_ref(),
                    deadline,
                );
            }
            // Each of these tops a chain or sits in one, which the engine runs (above; a stack
            // with one the engine does not run is refused at load: `ENGINE_ONLY`).
            NodeKind::Breaker { .. }
            | NodeKind::Retry { .. }
            | NodeKind::Throttle { .. }
            | NodeKind::Ledger { .. }
            | NodeKind::Limit { .. }
            | NodeKind::RateLimit { .. }
            | NodeKind::Hedge { .. } => {}
            NodeKind::Fallback { children } => {
                if let Some(f) = self.frame_mut(request, node) {
                    *f = Frame::Fallback { index: 0, deadline };
                }
                self.invoke(request, children[0], deadline);
            }
            NodeKind::Llm { .. } => self.invoke_llm(request, node, deadline),
        }
    }

    /// Sends an attempt of `request` through call node `node` to downstream `ds` and arms its
    /// timer (its own `timeout` or `timeout_dist` draw, or `deadline` if sooner); returns the
    /// attempt and when its timer fires (`u64::MAX`: never). `deadline` has not passed.
    pub(super) fn send_attempt(
        &mut self,
        request: Handle,
        node: u16,
        (ds, host): (u16, Option<u16>),
        timeout: Option<Duration>,
        timeout_dist: Option<&Sampler>,
        deadline: u64,
    ) -> Option<(Handle, u64)> {
        let stack = self.stack;
        let r = self.requests.get_mut(request)?;
        let own_timeout = match timeout_dist {
            // Keyed by (request number, node): the same draw for every attempt of the request
            // and for every policy.
            Some(d) => Some(d.sample(&mut Stream::keyed(
                self.seed,
                StreamId::Timeouts,
                (r.id << 16) ^ u64::from(node),
            ))),
            None => timeout.map(|t| t.as_nanos()),
        };
        let first = r.attempts == 0;
        r.attempts += 1;
        let n = r.attempts;
        if !self.is_hop(request) {
            self.m.sent(self.now, first);
        }
        self.decide(Decision::Attempt);
        let ds = self.pick_replica(ds, request, first, host);
        let attempt = self.attempts.insert(Attempt {
            request,
            node,
            ds,
            n,
            sent: self.now,
        });
        let d = self.hop(ds, true);
        self.q.push(
            self.now.saturating_add(d),
            EventKind::AtDownstream { ds, attempt },
        );
        // The attempt's timer: its own timeout or the nearest enclosing deadline, whichever comes
        // first. A timer of a fixed length armed now goes to that length's FIFO lane.
        let own = own_timeout.map_or(u64::MAX, |t| self.now.saturating_add(t));
        let fire = own.min(deadline);
        self.note_deadline(attempt, fire);
        if fire != u64::MAX {
            let len = Duration::from_nanos(fire - self.now);
            let event = EventKind::Timeout { attempt };
            match stack.timeouts.iter().position(|t| *t == len) {
                Some(i) => self.q.push_lane(self.lanes[i], fire, event),
                None => self.q.push(fire, event),
            }
        }
        Some((attempt, fire))
    }

    /// Node `from` produced `ans` for `request`: hand it up through the parents.
    pub(super) fn answer(&mut self, request: Handle, from: u16, mut ans: Answer) {
        let stack = self.stack;
        let answering = self.answering.take();
        let chain = stack.nodes[from as usize].chain;
        if chain != NONE && matches!(stack.nodes[from as usize].kind, NodeKind::Call { .. }) {
            self.chain_answered(request, chain, answering, ans);
            return;
        }
        if self.decisions.is_some()
            && matches!(stack.nodes[from as usize].kind, NodeKind::Call { .. })
        {
            // An answer with no attempt sent (a deadline already passed) is the last attempt's.
            let n =
                answering.unwrap_or_else(|| self.requests.get(request).map_or(0, |r| r.attempts));
            self.decide(Decision::Answer {
                n,
                class: ans.error_class(),
                accepted: ans.accepted(),
            });
        }
        let mut child = from;
        loop {
            let c = stack.nodes[child as usize].subtree_of;
            if c != NONE {
                // The subtree a chain's copy invoked answered: the copy's answer.
                self.chain_answered(request, c, None, ans);
                return;
            }
            let parent = stack.nodes[child as usize].parent;
            if parent == NONE {
                self.finish_request(request, ans);
                return;
            }
            match &stack.nodes[parent as usize].kind {
                NodeKind::Fallback { children } => {
                    let (index, deadline) = match self.frame_mut(request, parent) {
                        Some(Frame::Fallback { index, deadline }) => (*index, *deadline),
                        _ => (0, u64::MAX),
                    };
                    let next = index as usize + 1;
                    if !ans.is_ok() && next < children.len() {
                        if let Some(f) = self.frame_mut(request, parent) {
                            *f = Frame::Fallback {
                                index: next as u16,
                                deadline,
                            };
                        }
                        self.invoke(request, children[next], deadline);
                        return;
                    }
                    if let Some(f) = self.frame_mut(request, parent) {
                        *f = Frame::Idle;
                    }
                }
                NodeKind::Llm { .. } => ans = self.answer_llm(request, parent, ans),
                // A chain's layers hand its answer up as the chain's top (`chain_over`).
                NodeKind::Ledger { .. }
                | NodeKind::Throttle { .. }
                | NodeKind::Breaker { .. }
                | NodeKind::Retry { .. }
                | NodeKind::Limit { .. }
                | NodeKind::RateLimit { .. }
                | NodeKind::Hedge { .. }
                | NodeKind::Call { .. } => {}
            }
            child = parent;
        }
    }

    pub(super) fn finish_request(&mut self, request: Handle, ans: Answer) {
        if self.graph.is_some() && self.finish_hop(request, &ans) {
            return;
        }
        let Some(r) = self.requests.get(request).copied() else {
            return;
        };
        self.requests.remove(request);
        let ok = ans.is_ok();
        self.decide(Decision::End { ok });
        let latency = self.now.saturating_sub(r.start);
        self.m.finish(self.now, ok, latency);
        // Rows are pushed in request order from request 1, so request `id` is row `id - 1`.
        if let Some(trace) = &mut self.trace
            && let Some(row) = trace.get_mut(r.id as usize - 1)
        {
            row.outcome = ans.kind.name();
            row.served_by = self.stack.nodes[ans.by as usize].served_by.clone();
            row.attempts = r.attempts;
            row.latency_ns = latency;
            row.calls_so_far = self.m.ds.iter().map(|d| d.arrivals).collect();
        }
        match &mut self.source {
            Source::Closed(cl) => {
                let think = cl.think_after(r.client);
                self.q.push(
                    self.now.saturating_add(think),
                    EventKind::ClientStart { client: r.client },
                );
            }
            Source::Jobs(js) => {
                if ok {
                    js.done += 1;
                    js.last_success = self.now;
                } else {
                    js.failed += 1;
                }
            }
            Source::Open(_) => {}
        }
    }
}

//! How a logical request travels through its policy stack: invoking nodes, handing answers up,
//! retry wake-ups, and finishing the request (see the [parent module](super) for the overview).

use reliable_core::answer::Refuser;
use reliable_core::breaker::{Outcome, State, Transition};
use reliable_core::ledger::Extra;
use reliable_core::retry::RetryDecision;
use reliable_core::{Duration, Instant};

use super::*;
use crate::client::fleet_budget::{FleetBudgetNode, FleetRetries};
use crate::client::ledgers::{LedgerRetries, RetryBudget};

/// Borrows what retry budgets draw from, field by field (the rest of the world stays free).
macro_rules! draws {
    ($w:expr) => {
        Draws {
            budgets: &mut $w.budgets,
            ledgers: &mut $w.ledgers,
            fleet: &mut $w.fleet_budgets,
            stores: &mut $w.stores,
        }
    };
}

/// What a retry node's budget is drawn from, beside its own: the ledgers, and a fleet budget's
/// state and stores.
struct Draws<'a> {
    budgets: &'a mut [Vec<BudgetSlot>],
    ledgers: &'a mut [Vec<LedgerSlot>],
    fleet: &'a mut [Option<FleetBudgetNode>],
    stores: &'a mut [crate::client::fleet::StoreSim],
}

/// The budget retry node `(slot, instance)` draws from: the ledger `(slot, instance)` enclosing
/// it when it has no budget of its own; a fleet's (client `who.0`, its network down or not) when
/// its budget is one; else its own.
fn retry_budget<'a>(
    d: Draws<'a>,
    own: (usize, usize),
    ledger: Option<(usize, usize)>,
    who: (u32, bool),
) -> RetryBudget<'a> {
    if let Some((l, i)) = ledger {
        return RetryBudget::Ledger(LedgerRetries(&mut d.ledgers[l][i]));
    }
    let client = who.0 as usize;
    if let Some(Some(node)) = d.fleet.get_mut(own.0)
        && let Some(store) = d.stores.get_mut(usize::from(node.store))
        && let Some(state) = node.clients.get_mut(client)
        && d.budgets[own.0].len() > client + 1
    {
        let (fleet, rest) = d.budgets[own.0].split_at_mut(1);
        return RetryBudget::Fleet(FleetRetries {
            client: state,
            fleet: &mut fleet[0],
            local: &mut rest[client],
            store,
            scope: node.scope,
            network_down: who.1,
            width_ns: node.width_ns,
            counters: &mut node.counters,
        });
    }
    RetryBudget::Own(&mut d.budgets[own.0][own.1])
}

/// While breaker `b` refuses calls at `now` (open, or forced open: [`Duration::MAX`]), how long
/// until it admits a probe.
fn refuses(b: &dyn reliable_core::breaker::Breaker, now: Instant) -> Option<Duration> {
    match b.retry_after(now) {
        Some(after) => Some(after),
        None if b.state(now) == State::ForcedOpen => Some(Duration::MAX),
        None => None,
    }
}

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

    pub(super) fn breaker_instance(&self, slot: u16, request: Handle) -> (usize, usize) {
        let n = self.breakers.get(slot as usize).map_or(1, |b| b.len());
        (slot as usize, self.instance(n, request))
    }

    pub(super) fn budget_instance(&self, slot: u16, request: Handle) -> (usize, usize) {
        let n = self.budgets.get(slot as usize).map_or(1, Vec::len);
        (slot as usize, self.instance(n, request))
    }

    /// The client of `request`, and whether its own network is down now (a fleet budget's
    /// store operations fail then).
    pub(super) fn who(&self, request: Handle) -> (u32, bool) {
        let client = self.requests.get(request).map_or(0, |r| r.client);
        (client, self.network_down(client))
    }

    pub(super) fn throttle_instance(&self, slot: u16, request: Handle) -> (usize, usize) {
        let n = self.throttles.get(slot as usize).map_or(1, Vec::len);
        (slot as usize, self.instance(n, request))
    }

    /// The instance of `slot` among `per_slot` (one vector of instances per slot) serving
    /// `request`.
    pub(super) fn instance_of<T>(
        &self,
        per_slot: &[Vec<T>],
        slot: u16,
        request: Handle,
    ) -> (usize, usize) {
        let n = per_slot.get(slot as usize).map_or(1, Vec::len);
        (slot as usize, self.instance(n, request))
    }

    /// The ledger `ledger` (a slot, if any) instance serving `request`.
    pub(super) fn ledger_of(&self, ledger: Option<u16>, request: Handle) -> Option<(usize, usize)> {
        ledger.map(|l| self.instance_of(&self.ledgers, l, request))
    }

    /// A retry layer's backoff is over: send the next attempt through its inner layer, unless an
    /// enclosing deadline has passed meanwhile (then the retry layer gives up with a timeout).
    pub(super) fn wake(&mut self, request: Handle, node: u16) {
        if !self.requests.contains(request) {
            return;
        }
        let stack = self.stack;
        if let Some(n) = stack.nodes.get(usize::from(node))
            && n.chain != NONE
        {
            self.wake_chain(request, n.chain);
            return;
        }
        let Some(NodeKind::Retry {
            policy,
            slot,
            inner,
            ledger,
            ..
        }) = stack.nodes.get(node as usize).map(|n| &n.kind)
        else {
            return;
        };
        let now = Instant::from_nanos(self.now);
        let (enclosing, attempt_deadline) = match self.frame_mut(request, node) {
            Some(Frame::Retry { state, deadline }) => {
                (*deadline, policy.attempt_deadline(state, now).as_nanos())
            }
            _ => return,
        };
        if enclosing <= self.now {
            let own = self.budget_instance(*slot, request);
            let l = self.ledger_of(*ledger, request);
            if let Some(Frame::Retry { mut state, .. }) =
                self.frame_mut(request, node).map(std::mem::take)
            {
                let who = self.who(request);
                let mut budget = retry_budget(draws!(self), own, l, who);
                policy.abandon(&mut state, now, &mut budget);
            }
            self.m.at(self.now).timeouts += 1;
            self.answer(request, node, Answer::new(AnswerKind::Timeout, node));
            return;
        }
        self.invoke(request, *inner, enclosing.min(attempt_deadline));
    }

    /// Counts a breaker's transition (see [`count_transition`]).
    pub(super) fn note_transition(&mut self, t: Option<Transition>, shadow: bool) {
        count_transition(&mut self.m, &mut self.decisions, self.now, t, shadow);
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
            NodeKind::Breaker { store, .. } if *store != NONE => {
                self.invoke_fleet(request, node, deadline)
            }
            // A breaker per host is in a chain, which the engine runs (above).
            NodeKind::Breaker {
                slot,
                inner,
                breaker,
                ledger,
                ..
            } => {
                let now = Instant::from_nanos(self.now);
                let (s, i) = self.breaker_instance(*slot, request);
                let (decision, transition) = self.breakers[s].try_acquire(i, now);
                self.note_transition(transition, breaker.shadow());
                match decision.map_err(|r| r.retry_after().unwrap_or(Duration::ZERO)) {
                    Ok(permit) => {
                        // A half-open breaker's permit is a probe: an extra attempt the ledger
                        // may refuse, and then the permit goes back unused, as in `reliable` (the
                        // draw is settled at once: the ratio ledger's balance does not depend on
                        // when a draw is settled, only its count of draws outstanding does).
                        let probe = permit.is_probe();
                        if probe && let Some((l, li)) = self.ledger_of(*ledger, request) {
                            match self.ledgers[l][li].try_draw(Extra::Probe, now) {
                                Ok(draw) => self.ledgers[l][li].settle(draw, now),
                                Err(_) => {
                                    let t =
                                        self.breakers[s].record(i, permit, Outcome::Ignored, now);
                                    self.note_transition(t, breaker.shadow());
                                    self.decide(Decision::Refused(Refuser::Budget));
                                    self.m.at(self.now).local_rejections += 1;
                                    let a = Answer::new(AnswerKind::Rejected, node);
                                    self.answer(request, node, a);
                                    return;
                                }
                            }
                        }
                        if permit.is_shadow() {
                            self.m.shadow_reject(self.now);
                        }
                        if probe && let Some(e) = &mut self.m.extra {
                            e.probes_sent += 1;
                        }
                        if let Some(f) = self.frame_mut(request, node) {
                            *f = Frame::Permit(permit);
                        }
                        self.invoke(request, *inner, deadline);
                    }
                    Err(retry_after) => {
                        self.decide(Decision::Refused(Refuser::Breaker));
                        self.m.at(self.now).local_rejections += 1;
                        let mut a = Answer::new(AnswerKind::Rejected, node);
                        a.retry_after = retry_after;
                        self.answer(request, node, a);
                    }
                }
            }
            NodeKind::Retry {
                policy,
                slot,
                inner,
                ledger,
                ..
            } => {
                let own = self.budget_instance(*slot, request);
                let l = self.ledger_of(*ledger, request);
                let now = Instant::from_nanos(self.now);
                let who = self.who(request);
                let mut budget = retry_budget(draws!(self), own, l, who);
                let state = policy.start(now, &mut budget);
                let inner_deadline = deadline.min(policy.attempt_deadline(&state, now).as_nanos());
                if let Some(f) = self.frame_mut(request, node) {
                    *f = Frame::Retry { state, deadline };
                }
                self.invoke(request, *inner, inner_deadline);
            }
            // Every `Hedge` is in a chain, which the engine runs (above).
            NodeKind::Hedge { .. } => {}
            NodeKind::Ledger { slot, inner, .. } => {
                let (l, i) = self.instance_of(&self.ledgers, *slot, request);
                self.ledgers[l][i].on_first_try(Instant::from_nanos(self.now));
                self.invoke(request, *inner, deadline);
            }
            NodeKind::Limit { slot, inner, .. } => {
                let (l, i) = self.instance_of(&self.limiters, *slot, request);
                match self.limiters[l][i].try_acquire(Instant::from_nanos(self.now)) {
                    Ok(permit) => {
                        if let Some(e) = &mut self.m.extra {
                            e.admitted(self.now, true);
                        }
                        if let Some(f) = self.frame_mut(request, node) {
                            *f = Frame::Limit(permit);
                        }
                        self.invoke(request, *inner, deadline);
                    }
                    Err(_) => {
                        self.decide(Decision::Refused(Refuser::Limiter));
                        self.m.at(self.now).local_rejections += 1;
                        if let Some(e) = &mut self.m.extra {
                            e.limit_refusals += 1;
                        }
                        self.answer(request, node, Answer::new(AnswerKind::Rejected, node));
                    }
                }
            }
            NodeKind::RateLimit { slot, inner, .. } => {
                let (l, i) = self.instance_of(&self.rate_limiters, *slot, request);
                match self.rate_limiters[l][i].try_acquire(Instant::from_nanos(self.now)) {
                    Ok(()) => self.invoke(request, *inner, deadline),
                    Err(limited) => {
                        // A limiter's refusal, with the time until the next call would be
                        // admitted: a `Retry` that waits on refusals waits it out if it fits.
                        self.decide(Decision::Refused(Refuser::Limiter));
                        self.m.at(self.now).local_rejections += 1;
                        if let Some(e) = &mut self.m.extra {
                            e.limit_refusals += 1;
                        }
                        let mut a = Answer::new(AnswerKind::Rejected, node);
                        a.retry_after = limited.retry_after;
                        self.answer(request, node, a);
                    }
                }
            }
            NodeKind::Throttle { slot, inner, .. } => {
                let (s, i) = self.throttle_instance(*slot, request);
                let sample = self.throttle_sample();
                let now = Instant::from_nanos(self.now);
                match self.throttles[s][i].try_acquire_with(now, sample) {
                    Ok(()) => self.invoke(request, *inner, deadline),
                    Err(_) => {
                        self.decide(Decision::Refused(Refuser::Throttle));
                        self.m.at(self.now).local_rejections += 1;
                        self.answer(request, node, Answer::new(AnswerKind::Rejected, node));
                    }
                }
            }
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
        // The breaker this answer passed on its way up since the last retry layer, if the answer
        // left it refusing calls: its node, and how long it refuses.
        let mut opened: Option<(u16, Duration)> = None;
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
                NodeKind::Breaker { slot, breaker, .. } => {
                    let frame = self
                        .frame_mut(request, parent)
                        .map(std::mem::take)
                        .unwrap_or_default();
                    let held = match frame {
                        Frame::Permit(permit) => {
                            Some((permit, self.breaker_instance(*slot, request)))
                        }
                        _ => None,
                    };
                    if let Some(FleetFrame::Held(held)) =
                        self.fleet_frame(request, *slot).map(std::mem::take)
                    {
                        self.record_fleet(request, parent, held, ans.breaker_outcome());
                    }
                    if let Some((permit, (s, i))) = held {
                        let outcome = ans.breaker_outcome();
                        let now = Instant::from_nanos(self.now);
                        let t = self.breakers[s].record(i, permit, outcome, now);
                        self.note_transition(t, breaker.shadow());
                        if !breaker.shadow()
                            && let Some(open) = refuses(self.breakers[s].get(i), now)
                            && opened.is_none_or(|(_, o)| o < open)
                        {
                            opened = Some((parent, open));
                        }
                    }
                }
                NodeKind::Retry {
                    policy,
                    slot,
                    ledger,
                    ..
                } => {
                    let own = self.budget_instance(*slot, request);
                    let l = self.ledger_of(*ledger, request);
                    let now = Instant::from_nanos(self.now);
                    let Some(Frame::Retry {
                        mut state,
                        deadline,
                    }) = self.frame_mut(request, parent).map(std::mem::take)
                    else {
                        child = parent;
                        continue;
                    };
                    let who = self.who(request);
                    let mut budget = retry_budget(draws!(self), own, l, who);
                    let opened = opened.take();
                    if let Some(class) = ans.error_class() {
                        match policy.on_failure(
                            &mut state,
                            class,
                            now,
                            &mut budget,
                            self.client_rng.rng(),
                        ) {
                            RetryDecision::RetryAt(at) => {
                                // The attempt's answer left the breaker inside refusing: the
                                // request ends now, refused by it, unless the policy waits on
                                // refusals and its open time fits the deadline (then it waits the
                                // longer of the backoff and the open time).
                                let at = match opened {
                                    None => at,
                                    Some((breaker, open)) => {
                                        let waited = at.max(now.saturating_add(open));
                                        let limit = state
                                            .deadline()
                                            .map_or(u64::MAX, Instant::as_nanos)
                                            .min(deadline);
                                        let ends = !policy.config().wait_on_refusal
                                            || waited.as_nanos() >= limit;
                                        if ends {
                                            policy.abandon(&mut state, now, &mut budget);
                                        }
                                        self.decide(Decision::Refused(Refuser::Breaker));
                                        self.m.at(self.now).local_rejections += 1;
                                        if ends {
                                            ans = Answer::new(AnswerKind::Rejected, breaker);
                                            if open != Duration::MAX {
                                                ans.retry_after = open;
                                            }
                                            child = parent;
                                            continue;
                                        }
                                        waited
                                    }
                                };
                                self.decide(Decision::Retry(at - now));
                                // Wake at the retry time, or at the enclosing deadline if sooner
                                // (the retry layer then gives up with a timeout).
                                let at = at.as_nanos().min(deadline).max(self.now);
                                if let Some(f) = self.frame_mut(request, parent) {
                                    *f = Frame::Retry { state, deadline };
                                }
                                self.q.push(
                                    at,
                                    EventKind::Wake {
                                        request,
                                        node: parent,
                                    },
                                );
                                return;
                            }
                            RetryDecision::GiveUp(reason) => {
                                self.decide(Decision::GiveUp(reason.name()));
                                self.m.give_up(reason)
                            }
                        }
                    } else {
                        policy.on_success(&mut state, now, &mut budget);
                    }
                }
                NodeKind::Throttle { slot, .. } => {
                    let (s, i) = self.throttle_instance(*slot, request);
                    let now = Instant::from_nanos(self.now);
                    self.throttles[s][i].record(now, ans.accepted());
                }
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
                NodeKind::Limit { slot, .. } => {
                    if let Some(Frame::Limit(permit)) =
                        self.frame_mut(request, parent).map(std::mem::take)
                    {
                        let (l, i) = self.instance_of(&self.limiters, *slot, request);
                        let now = Instant::from_nanos(self.now);
                        let from = self.limiters[l][i].limit();
                        self.limiters[l][i].release(permit, ans.limit_completion(), now);
                        let to = self.limiters[l][i].limit();
                        if from != to {
                            self.decide(Decision::Limit { from, to });
                        }
                        if let Some(e) = &mut self.m.extra {
                            e.admitted(self.now, false);
                        }
                    }
                }
                NodeKind::Ledger { .. }
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

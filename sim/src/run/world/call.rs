//! The core's call engine driving a [`Chain`] of a stack: the world is its I/O.
//!
//! A chain (`[Ledger] [Retry] [gates] [Hedge] Call`, or down to a subtree: see [`Chain`]) is one
//! [`reliable_core::engine`] call per logical request, kept as a `CallState` between events. The
//! world hands it what happens (the time, a copy's answer, the enclosing deadline passing) and
//! does what it says: send copy `n` through the chain's `Call` (a `Send`), drop it (a `Cancel`),
//! or hand the call's end up the stack (a `Done`). Every decision (admitting, retrying, hedging,
//! waiting, giving up, what each gate hears) is the engine's; the world keeps the per-client
//! state it draws from ([`Shared`] below, over the world's slots) and turns its [`Note`]s into
//! the run's metrics and decision trace.
//!
//! Each copy is timed by the world (its `Call`'s timer, or its `timeout_dist` draw, within the
//! deadline the engine gives it and the deadline of the layers enclosing the chain): its timer
//! firing is the copy's timeout answer. The engine is woken only for what it waits on itself (a
//! backoff, a hedge coming due) and for the enclosing deadline, which cancels it (a timeout).
//! A copy of a chain that ends in a subtree is an invocation of it, made once the step that sent
//! it is over (it may answer at once, stepping the call again); the subtree's calls time it out
//! at the copy's deadline, and the answer that comes up from it is the copy's.
//!
//! Two breakers answer from the world's own state. One per host: the balancer picks, among the
//! replicas whose breaker admits calls, the one the copy goes to (such a chain is unhedged, so
//! the call's one copy carries the pick, and reports to that replica's breaker). A fleet's: on a
//! cached view it decides at once; decided exactly, the store decides as it is asked and its
//! answer arrives a round trip later (the engine's `Asked::Later`: the call waits, unwoken by
//! its timers, until the world hands the answer in). Its permits (the store's and the client's
//! own) are kept by the world under the token of the core permit that stands for them.

use std::cell::{Cell, RefCell};

use reliable_core::answer::Refuser;
use reliable_core::breaker::{Outcome, Permit, RejectReason, Rejection, State, Transition};
use reliable_core::budget::Budget;
use reliable_core::engine::{
    Action, Asked, CallState, Cancelled, Ended, Input, Note, Refusal, SampleFor, Shared,
};
use reliable_core::hedge::Hedger;
use reliable_core::ledger::{AnyLedger, Extra};
use reliable_core::limit::{Limiter, RateLimiter};
use reliable_core::policy::{FleetMode, FleetScope};
use reliable_core::throttle::AnyThrottle;
use reliable_core::{Duration, Instant};

use super::*;
use crate::client::fleet::{Ctx, FleetClient, FleetCounters};
use crate::client::ledgers::LedgerRetries;
use crate::client::stack::Chain;

/// Copies a hedged chain's call keeps at most: a first copy and the most hedges a `Hedge` may
/// send.
const MANY: usize = crate::client::stack::MAX_HEDGES as usize + 1;

/// The engine's least queue of actions for a call of `C` copies (the world polls after every
/// step): `C + 4`.
const fn queue(copies: usize) -> usize {
    copies + 4
}

/// A copy the world sent for a chain's call, until it answers or is dropped.
#[derive(Clone, Copy, Debug)]
struct Out {
    /// Its number in the engine's call.
    copy: u32,
    /// Its number among the request's attempts (0 for a subtree's invocation).
    n: u32,
    /// Its attempt; `None` for a subtree's invocation (its calls are the subtree's own).
    attempt: Option<Handle>,
    /// When the world's timer for it fires.
    fire: u64,
    hedge: bool,
}

/// One chain's call of one logical request, with `C` copies at most and `Q` actions queued.
#[derive(Debug)]
pub(super) struct Running<const C: usize, const Q: usize> {
    st: CallState<C, Q>,
    out: [Option<Out>; C],
    /// The deadline of the layers enclosing the chain (ns).
    outer: u64,
    /// When a wake-up of the call is due (ns; 0: none pending).
    wake: u64,
    /// The last answer handed to the engine, and whether its copy was a hedge.
    last: Option<(Answer, bool)>,
    /// The enclosing deadline passed: the call was cancelled for it.
    timed_out: bool,
    /// The call is in progress (its end not handed up yet). An ended call keeps its room for the
    /// request's next call of the chain.
    live: bool,
    /// The replica the chain's breaker per host picked for the copy it permitted (such a chain
    /// is unhedged: one copy at a time), which the copy goes to and reports to.
    host: Cell<Option<u16>>,
}

/// A chain's call in progress: inline without hedges, boxed with them (one hedge at most, the
/// common case, or up to [`MANY`] copies).
// The one-copy call inline on purpose: it is every unhedged request's, and boxing it would cost
// an allocation per request; a hedged one is boxed, so an unhedged stack does not pay for copies.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub(super) enum ChainCall {
    One(Running<1, { queue(1) }>),
    Two(Box<Running<2, { queue(2) }>>),
    Many(Box<Running<MANY, { queue(MANY) }>>),
}

/// Runs `$body` with `$r` bound to the [`Running`] inside `$call`.
macro_rules! running {
    ($call:expr, $r:ident => $body:expr) => {
        match $call {
            ChainCall::One($r) => $body,
            ChainCall::Two($r) => $body,
            ChainCall::Many($r) => $body,
        }
    };
}

/// No shared state: what a call without a hedger needs to say when to wake it.
struct NoShared;

impl Shared for NoShared {}

/// A chain's state slots and how many instances each has (1: shared; one per client
/// otherwise), for the run.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct ChainSlots {
    breaker: Option<((usize, usize), bool)>,
    budget: Option<(usize, usize)>,
    throttle: Option<(usize, usize)>,
    ledger: Option<(usize, usize)>,
    hedger: Option<(usize, usize)>,
    limiter: Option<(usize, usize)>,
    rate: Option<(usize, usize)>,
    /// The ledger is the chain's own (it takes each call's deposit), not one enclosing it.
    own_ledger: bool,
    /// The retry's budget is a fleet's (kept in a store, `fleet_budgets`).
    fleet_budget: bool,
    /// The breaker is one per host: its hosts per client, and the group of replicas its call's
    /// balancer picks from (`u16::MAX`: one host).
    hosts: Option<(u32, u16)>,
    /// The breaker is a fleet's: the chain's top node (which the store's answer wakes), its store
    /// (index among the scenario's) and its scope.
    fleet: Option<(u16, u16, FleetScope)>,
}

/// The world's gates and budgets, borrowed for a step of a chain's call.
struct Gates<'v> {
    breakers: &'v mut Vec<Box<dyn Breakers>>,
    budgets: &'v mut Vec<Vec<BudgetSlot>>,
    throttles: &'v mut Vec<Vec<ThrottleSlot>>,
    hedgers: &'v mut Vec<Vec<Hedger>>,
    limiters: &'v mut Vec<Vec<Limiter>>,
    rate_limiters: &'v mut Vec<Vec<RateLimiter>>,
    /// A fleet retry budget's clients and counts.
    fleet_budgets: &'v mut Vec<Option<crate::client::fleet_budget::FleetBudgetNode>>,
    /// The stores a fleet's budget is kept in.
    stores: &'v mut Vec<crate::client::fleet::StoreSim>,
}

/// The run's metrics and decision trace, borrowed for a step of a chain's call.
struct Records<'v> {
    m: &'v mut Recorder,
    decisions: &'v mut Option<Vec<(u64, Decision)>>,
}

/// The world as the engine's [`Shared`] state for one request's call of one chain: its state
/// slots and its records, each borrowed apart (the engine draws a sample while it holds a budget
/// or a throttle, and asks the ledger while it holds a hedger).
struct View<'v> {
    /// The chain's slots, and the client whose instances the call draws from.
    k: &'v ChainSlots,
    client: usize,
    now: u64,
    /// The gates and budgets, in one cell: the engine never asks for one while it holds another.
    gates: RefCell<Gates<'v>>,
    /// The ledgers, apart: the engine asks a ledger while it holds a hedger.
    ledgers: RefCell<&'v mut Vec<Vec<LedgerSlot>>>,
    /// The clients' random stream, apart: drawn while a budget or a throttle is held.
    rng: RefCell<(&'v mut Stream, &'v mut (Vec<u64>, usize))>,
    /// Whether the client's own network is down now (a fleet budget's store fails then).
    network_down: bool,
    /// The run's metrics and decision trace, apart: counted while a gate is held.
    records: RefCell<Records<'v>>,
    /// The copies the world has out for the call (the trace names a lost copy by its attempt).
    outs: &'v [Option<Out>],
    /// For a breaker per host: the balancers that pick its replica, the run's groups, the
    /// request, whether it sent no attempt yet, and the replica picked (the call's).
    bal: RefCell<&'v mut super::balance::Balancing>,
    c: &'v Compiled,
    request: Handle,
    first: bool,
    host: &'v Cell<Option<u16>>,
    /// For a fleet's breaker: its clients' dealings with the store, the permits the engine
    /// holds, the request's frames and the decisions waiting for the store.
    fleet: RefCell<FleetParts<'v>>,
}

/// A fleet breaker's state, borrowed for a step of a chain's call.
struct FleetParts<'v> {
    clients: &'v mut Vec<Vec<FleetClient>>,
    held: &'v mut super::fleet::HeldPermits,
    frames: &'v mut Vec<FleetFrame>,
    stride: usize,
    asks: &'v mut Vec<(Handle, u16, u64)>,
}

impl World<'_> {
    /// The client of `request`, whose instances of the state its calls draw from.
    fn client_of(&self, request: Handle) -> usize {
        self.requests.get(request).map_or(0, |r| r.client as usize)
    }

    /// Each chain's slots and their number of instances (fixed for the run).
    pub(super) fn chain_slots(&self) -> Vec<ChainSlots> {
        let nodes = &self.stack.nodes;
        let kind = |n: u16| nodes.get(usize::from(n)).map(|n| &n.kind);
        let count = |slot: u16, n: Option<usize>| (usize::from(slot), n.unwrap_or(1));
        self.stack
            .chains
            .iter()
            .map(|chain| ChainSlots {
                breaker: match kind(chain.breaker) {
                    Some(NodeKind::Breaker { slot, breaker, .. }) => Some((
                        count(
                            *slot,
                            self.breakers.get(usize::from(*slot)).map(|b| b.len()),
                        ),
                        breaker.shadow(),
                    )),
                    _ => None,
                },
                budget: match kind(chain.retry) {
                    Some(NodeKind::Retry { slot, .. }) => Some(count(
                        *slot,
                        self.budgets.get(usize::from(*slot)).map(Vec::len),
                    )),
                    _ => None,
                },
                throttle: match kind(chain.throttle) {
                    Some(NodeKind::Throttle { slot, .. }) => Some(count(
                        *slot,
                        self.throttles.get(usize::from(*slot)).map(Vec::len),
                    )),
                    _ => None,
                },
                ledger: chain
                    .ledger
                    .map(|l| count(l, self.ledgers.get(usize::from(l)).map(Vec::len))),
                hedger: match kind(chain.hedge) {
                    Some(NodeKind::Hedge { slot, .. }) => Some(count(
                        *slot,
                        self.hedgers.get(usize::from(*slot)).map(Vec::len),
                    )),
                    _ => None,
                },
                limiter: match kind(chain.limit) {
                    Some(NodeKind::Limit { slot, .. }) => Some(count(
                        *slot,
                        self.limiters.get(usize::from(*slot)).map(Vec::len),
                    )),
                    _ => None,
                },
                rate: match kind(chain.rate) {
                    Some(NodeKind::RateLimit { slot, .. }) => Some(count(
                        *slot,
                        self.rate_limiters.get(usize::from(*slot)).map(Vec::len),
                    )),
                    _ => None,
                },
                own_ledger: chain.own_ledger,
                hosts: match (kind(chain.breaker), kind(chain.call)) {
                    (
                        Some(NodeKind::Breaker {
                            scope: Scope::PerHost,
                            hosts,
                            ..
                        }),
                        Some(NodeKind::Call { ds, .. }),
                    ) => Some(((*hosts).max(1), self.group_of(*ds))),
                    _ => None,
                },
                fleet: match kind(chain.breaker) {
                    Some(NodeKind::Breaker { store, scope, .. }) if *store != NONE => {
                        scope.fleet().map(|f| (chain.top, *store, f))
                    }
                    _ => None,
                },
                fleet_budget: matches!(
                    kind(chain.retry),
                    Some(NodeKind::Retry { store, .. }) if *store != NONE
                ),
            })
            .collect()
    }

    /// Where chain `ch`'s call of `request` is kept in `chain_calls`.
    fn chain_index(&self, request: Handle, ch: u16) -> usize {
        request.index as usize * self.stack.chains.len() + usize::from(ch)
    }

    /// Starts chain `ch` for `request`; `deadline` (ns) is the nearest enclosing deadline.
    pub(super) fn start_chain(&mut self, request: Handle, ch: u16, deadline: u64) {
        let stack = self.stack;
        let chain = &stack.chains[usize::from(ch)];
        if deadline <= self.now {
            // An enclosing deadline has already passed: nothing is asked, nothing sent.
            self.m.at(self.now).timeouts += 1;
            self.answer(
                request,
                chain.top,
                Answer::new(AnswerKind::Timeout, chain.top),
            );
            return;
        }
        let need = (request.index as usize + 1) * stack.chains.len();
        if self.chain_calls.len() < need {
            self.chain_calls.resize_with(need, || None);
        }
        let now = Instant::from_nanos(self.now);
        let client = self.client_of(request);
        let i = self.chain_index(request, ch);
        // The calls are set apart while the engine decides (it borrows the world).
        let mut calls = std::mem::take(&mut self.chain_calls);
        let Some(slot) = calls.get_mut(i) else {
            self.chain_calls = calls;
            return;
        };
        let plan = &chain.plan;
        let call = match slot {
            // The room of the request's last call of this chain (of the same size: a slot always
            // holds one chain's calls): started in place, not moved in.
            Some(call) => {
                running!(&mut *call, r => {
                    r.reset(deadline);
                    let view = View::new(self, ch, client, (request, &[], &r.host));
                    r.st.restart(plan, &view, now);
                });
                call
            }
            None => {
                let host = Cell::new(None);
                let view = View::new(self, ch, client, (request, &[], &host));
                let call = slot.insert(match chain.copies {
                    0 | 1 => {
                        ChainCall::One(Running::new(CallState::start(plan, &view, now), deadline))
                    }
                    2 => ChainCall::Two(Box::new(Running::new(
                        CallState::start(plan, &view, now),
                        deadline,
                    ))),
                    _ => ChainCall::Many(Box::new(Running::new(
                        CallState::start(plan, &view, now),
                        deadline,
                    ))),
                });
                running!(&mut *call, r => r.host.set(host.get()));
                call
            }
        };
        let end = running!(call, r => self.step_call(r, request, chain, client, None));
        self.chain_calls = calls;
        self.after_step();
        self.chain_over(request, chain, end);
    }

    /// A wake-up of chain `ch`'s call of `request` is due: the time passed, or the enclosing
    /// deadline did (the call is cancelled, and ends as a timeout).
    pub(super) fn wake_chain(&mut self, request: Handle, ch: u16) {
        if !self.requests.contains(request) {
            return;
        }
        let chain = &self.stack.chains[usize::from(ch)];
        let i = self.chain_index(request, ch);
        let now = self.now;
        let client = self.client_of(request);
        let mut calls = std::mem::take(&mut self.chain_calls);
        let end = live(&mut calls, i).and_then(|call| {
            running!(call, r => {
                if r.wake <= now {
                    r.wake = 0;
                }
                if self.blocked(r) || r.st.is_asking() {
                    // An attempt no timer ends is out, or the store's answer is awaited: the call
                    // hears nothing until it comes (a deadline passed meanwhile ends it then).
                    return None;
                }
                let input = if r.outer <= now {
                    r.timed_out = true;
                    Input::Cancel
                } else {
                    Input::Tick
                };
                self.step_call(r, request, chain, client, Some(input))
            })
        });
        self.chain_calls = calls;
        self.after_step();
        self.chain_over(request, chain, end);
    }

    /// The copy of chain `ch`'s call that was `request`'s attempt `n` (the one being answered,
    /// `None` for a copy never sent) answered `ans`.
    pub(super) fn chain_answered(&mut self, request: Handle, ch: u16, n: Option<u32>, ans: Answer) {
        let i = self.chain_index(request, ch);
        let subtree = self.stack.chains[usize::from(ch)].subtree;
        let n = n.unwrap_or_else(|| self.requests.get(request).map_or(0, |r| r.attempts));
        // A subtree's calls have answered for themselves.
        if self.decisions.is_some() && !subtree {
            self.decide(Decision::Answer {
                n,
                class: ans.error_class(),
                accepted: ans.accepted(),
            });
        }
        let chain = &self.stack.chains[usize::from(ch)];
        let ans = if chain.llm != NONE {
            self.answer_llm(request, chain.llm, ans)
        } else {
            ans
        };
        let client = self.client_of(request);
        let mut calls = std::mem::take(&mut self.chain_calls);
        let end = live(&mut calls, i).and_then(|call| {
            running!(call, r => {
                let out = r
                    .out
                    .iter_mut()
                    .find(|o| o.is_some_and(|o| subtree || o.n == n))
                    .and_then(Option::take)?;
                r.last = Some((ans, out.hedge));
                let input = Input::Answer {
                    n: out.copy,
                    answer: ans.core(),
                };
                self.step_call(r, request, chain, client, Some(input))
            })
        });
        self.chain_calls = calls;
        self.after_step();
        self.chain_over(request, chain, end);
    }

    /// The breaker of chain `ch`'s call of `request` answered (`answer`: a fleet's store, a round
    /// trip after the call asked it); the call goes on from it. A permit no call waits for goes
    /// back unused.
    pub(super) fn chain_decided(
        &mut self,
        request: Handle,
        ch: u16,
        answer: Result<Permit, Rejection>,
    ) {
        let Some(chain) = self.stack.chains.get(usize::from(ch)) else {
            return;
        };
        let i = self.chain_index(request, ch);
        let now = Instant::from_nanos(self.now);
        let client = self.client_of(request);
        let mut calls = std::mem::take(&mut self.chain_calls);
        let mut answer = Some(answer);
        let end = live(&mut calls, i).and_then(|call| {
            running!(call, r => {
                if let Some(answer) = answer.take() {
                    let view = View::new(self, ch, client, (request, &r.out, &r.host));
                    r.st.breaker_decided(&chain.plan, &view, now, answer);
                }
                self.step_call(r, request, chain, client, None)
            })
        });
        self.chain_calls = calls;
        if let Some(Ok(permit)) = answer {
            let host = Cell::new(None);
            let view = View::new(self, ch, client, (request, &[], &host));
            view.breaker_record(permit, Outcome::Ignored, now);
        }
        self.after_step();
        self.chain_over(request, chain, end);
    }

    /// Hands `input` (if any) to `r`, `request`'s call of `chain`, and does what it says until it
    /// asks for nothing more. Returns what the call answers up the stack, once it has ended.
    fn step_call<const C: usize, const Q: usize>(
        &mut self,
        r: &mut Running<C, Q>,
        request: Handle,
        chain: &Chain,
        client: usize,
        mut input: Option<Input>,
    ) -> Option<Answer> {
        loop {
            if let Some(input) = input.take() {
                let now = Instant::from_nanos(self.now);
                let view = View::new(self, chain.index, client, (request, &r.out, &r.host));
                r.st.handle(&chain.plan, &view, now, input);
            }
            while let Some(action) = r.st.poll() {
                match action {
                    Action::Send { n, deadline, hedge } => {
                        if let Some(next) = self.send_copy(r, request, chain, n, deadline, hedge) {
                            input = Some(next);
                        }
                    }
                    Action::Cancel { n, why } => self.cancel_copy(r, request, chain, n, why),
                    Action::Done(end) => {
                        r.live = false;
                        return Some(self.chain_end(chain, (r.last, r.timed_out), end.result));
                    }
                }
            }
            if input.is_none() {
                self.arm_call(r, request, chain, client);
                return None;
            }
        }
    }

    /// Hands up the stack what `request`'s call of `chain` answered, if it ended.
    fn chain_over(&mut self, request: Handle, chain: &Chain, end: Option<Answer>) {
        if let Some(ans) = end {
            self.answer(request, chain.top, ans);
        }
    }

    /// Sends copy `n` of `request`'s call `r` through the chain's `Call`, timed out at the
    /// sooner of `deadline` (the engine's), the enclosing deadline and the `Call`'s own draw.
    /// Returns what the call must hear at once instead: the enclosing deadline has passed (it is
    /// cancelled), the client's network is down or its spend breaker refuses (the copy fails
    /// unsent).
    fn send_copy<const C: usize, const Q: usize>(
        &mut self,
        r: &mut Running<C, Q>,
        request: Handle,
        chain: &Chain,
        n: u32,
        deadline: Option<Instant>,
        hedge: bool,
    ) -> Option<Input> {
        let now = self.now;
        if r.outer <= now {
            r.timed_out = true;
            return Some(Input::Cancel);
        }
        // A subtree's own calls meet the network as they are sent.
        let unsent = if !chain.subtree && self.request_network_down(request) {
            let ans = Answer::new(AnswerKind::Unavailable, chain.call);
            self.decide(Decision::Answer {
                n: self.requests.get(request).map_or(0, |r| r.attempts),
                class: ans.error_class(),
                accepted: ans.accepted(),
            });
            Some(ans)
        } else if chain.llm != NONE {
            self.llm_reserve(request, chain.llm).err()
        } else {
            None
        };
        if let Some(ans) = unsent {
            r.last = Some((ans, hedge));
            return Some(Input::Answer {
                n,
                answer: ans.core(),
            });
        }
        if chain.subtree {
            // The copy is an invocation of the subtree, once this step is over; it answers by
            // its deadline (its calls time out then).
            let fire = if self.uninterruptible {
                u64::MAX
            } else {
                deadline.map_or(u64::MAX, Instant::as_nanos).min(r.outer)
            };
            if let Some(free) = r.out.iter_mut().find(|o| o.is_none()) {
                *free = Some(Out {
                    copy: n,
                    n: 0,
                    attempt: None,
                    fire,
                    hedge,
                });
            }
            self.subtree_sends.push((request, chain.call, fire));
            return None;
        }
        let Some(NodeKind::Call {
            ds, timeout_dist, ..
        }) = self
            .stack
            .nodes
            .get(usize::from(chain.call))
            .map(|c| &c.kind)
        else {
            return None;
        };
        let (timeout_dist, fire) = if self.uninterruptible {
            // No timer: the copy ends when it answers.
            (None, u64::MAX)
        } else {
            let fire = deadline.map_or(u64::MAX, Instant::as_nanos).min(r.outer);
            (timeout_dist.as_ref(), fire)
        };
        let host = r.host.get();
        let (attempt, fire) =
            self.send_attempt(request, chain.call, (*ds, host), None, timeout_dist, fire)?;
        let sent = self.attempts.get(attempt).map(|a| a.n).unwrap_or_default();
        if let Some(free) = r.out.iter_mut().find(|o| o.is_none()) {
            *free = Some(Out {
                copy: n,
                n: sent,
                attempt: Some(attempt),
                fire,
                hedge,
            });
        }
        None
    }

    /// What the last step left for the world once the calls are back in it: the subtrees of
    /// the copies it sent to invoke (see [`Chain::subtree`]), the store answers it waits for.
    #[inline(always)]
    fn after_step(&mut self) {
        if !self.subtree_sends.is_empty() {
            self.invoke_subtrees();
        }
        if !self.store_asks.is_empty() {
            self.await_stores();
        }
    }

    /// Queues the store answers the last step's decisions wait for (see [`World::after_step`]).
    #[inline(never)]
    fn await_stores(&mut self) {
        for (request, node, at) in std::mem::take(&mut self.store_asks) {
            self.q.push(at, EventKind::StoreAnswer { request, node });
        }
    }

    /// [`World::send_subtrees`] when there are some: out of line, as most stacks have none.
    #[inline(never)]
    fn invoke_subtrees(&mut self) {
        for (request, node, deadline) in std::mem::take(&mut self.subtree_sends) {
            self.invoke(request, node, deadline);
        }
    }

    /// Drops copy `n` of `request`'s call `r`, as the engine says (`why`).
    fn cancel_copy<const C: usize, const Q: usize>(
        &mut self,
        r: &mut Running<C, Q>,
        request: Handle,
        chain: &Chain,
        n: u32,
        why: Cancelled,
    ) {
        let Some(out) = r
            .out
            .iter_mut()
            .find(|o| o.is_some_and(|o| o.copy == n))
            .and_then(Option::take)
        else {
            return;
        };
        // A subtree's invocation answers at its deadline, as its calls time out: nothing to drop.
        let Some(handle) = out.attempt else {
            return;
        };
        let Some(a) = self.attempts.get(handle).copied() else {
            return;
        };
        self.attempts.remove(handle);
        self.attempt_gone(a.ds);
        if chain.llm != NONE {
            // Abandoned: its reservation is settled as a timeout's.
            let abandoned = Answer::new(AnswerKind::Timeout, chain.call);
            let _ = self.answer_llm(request, chain.llm, abandoned);
        }
        match why {
            Cancelled::Lost => {
                if let Some(e) = &mut self.m.extra {
                    e.copies_cancelled += 1;
                }
            }
            // The engine's own clock got there first: the copy timed out, as its timer says.
            Cancelled::TimedOut => self.attempt_timed_out(a),
            Cancelled::CallOver => {}
        }
    }

    /// What a call that ended with `result` answers up the stack, given its last answer
    /// (whether a hedge's) and whether the enclosing deadline ended it.
    fn chain_end(
        &mut self,
        chain: &Chain,
        (last, timed_out): (Option<(Answer, bool)>, bool),
        result: Ended,
    ) -> Answer {
        match result {
            Ended::Ok { .. } => {
                let (ans, hedge) = last.unwrap_or((Answer::new(AnswerKind::Ok, chain.call), false));
                if hedge && let Some(e) = &mut self.m.extra {
                    e.hedges_won += 1;
                }
                ans
            }
            Ended::GaveUp(_) => last.map_or_else(
                || {
                    self.m.at(self.now).timeouts += 1;
                    Answer::new(AnswerKind::Timeout, chain.top)
                },
                |(ans, _)| ans,
            ),
            Ended::Refused(refusal) => {
                let by = match refusal {
                    Refusal::Breaker(_) | Refusal::Ledger(_) => chain.breaker,
                    Refusal::Throttle(_) => chain.throttle,
                    Refusal::Limit(_) => chain.limit,
                    Refusal::Rate(_) => chain.rate,
                };
                let mut ans = Answer::new(
                    AnswerKind::Rejected,
                    if by == NONE { chain.top } else { by },
                );
                if let Some(after) = refusal.retry_after().filter(|d| *d != Duration::MAX) {
                    ans.retry_after = after;
                }
                ans
            }
            Ended::Cancelled => {
                if timed_out {
                    self.m.at(self.now).timeouts += 1;
                }
                Answer::new(AnswerKind::Timeout, chain.top)
            }
        }
    }

    /// Arms a wake-up of `request`'s call `r` when the engine asks (its `poll_timeout`) or at
    /// the enclosing deadline, whichever is sooner, unless a copy's own timer fires by then (its
    /// timeout wakes the call) or a wake-up that soon is already pending.
    fn arm_call<const C: usize, const Q: usize>(
        &mut self,
        r: &mut Running<C, Q>,
        request: Handle,
        chain: &Chain,
        client: usize,
    ) {
        let now = self.now;
        if self.blocked(r) || r.st.is_asking() {
            // The answer of the attempt out (or of the store) wakes the call.
            return;
        }
        let timeout = if chain.hedge == NONE {
            // Only a hedger's schedule is the shared state's to say.
            r.st.poll_timeout(&NoShared)
        } else {
            let view = View::new(self, chain.index, client, (request, &r.out, &r.host));
            r.st.poll_timeout(&view)
        };
        let timers = r
            .out
            .iter()
            .flatten()
            .map(|o| o.fire)
            .min()
            .unwrap_or(u64::MAX);
        let at = timeout.map_or(u64::MAX, Instant::as_nanos).min(r.outer);
        if at == u64::MAX || at >= timers || (r.wake > now && r.wake <= at) {
            return;
        }
        r.wake = at.max(now);
        self.q.push(
            r.wake,
            EventKind::Wake {
                request,
                node: chain.top,
            },
        );
    }
}

impl World<'_> {
    /// Whether `r` waits on an attempt no timer ends (the scenario's `interruptible: false`).
    fn blocked<const C: usize, const Q: usize>(&self, r: &Running<C, Q>) -> bool {
        self.uninterruptible && r.out.iter().any(Option::is_some)
    }
}

/// The call at `i` in `calls`, if it is in progress.
fn live(calls: &mut [Option<ChainCall>], i: usize) -> Option<&mut ChainCall> {
    calls
        .get_mut(i)
        .and_then(Option::as_mut)
        .filter(|call| running!(call, r => r.live))
}

/// Bytes one request keeps for `chain`'s call: inline, and boxed for a hedged chain.
pub fn chain_bytes(chain: &Chain) -> usize {
    let boxed = match chain.copies {
        0 | 1 => 0,
        2 => std::mem::size_of::<Running<2, { queue(2) }>>(),
        _ => std::mem::size_of::<Running<MANY, { queue(MANY) }>>(),
    };
    std::mem::size_of::<Option<ChainCall>>() + boxed
}

impl<const C: usize, const Q: usize> Running<C, Q> {
    fn new(st: CallState<C, Q>, outer: u64) -> Self {
        Running {
            st,
            out: [None; C],
            outer,
            wake: 0,
            last: None,
            timed_out: false,
            live: true,
            host: Cell::new(None),
        }
    }

    /// Readies the room of an ended call for the request's next call of the chain (its state
    /// is started in place next).
    fn reset(&mut self, outer: u64) {
        self.out = [None; C];
        self.outer = outer;
        self.wake = 0;
        self.last = None;
        self.timed_out = false;
        self.live = true;
        self.host.set(None);
    }
}

impl<'v> View<'v> {
    /// The view of `request`'s call of chain `ch` (for client `client`), with the copies the
    /// world has out for it and the replica its breaker per host picked.
    #[inline(always)]
    fn new(
        w: &'v mut World<'_>,
        ch: u16,
        client: usize,
        (request, outs, host): (Handle, &'v [Option<Out>], &'v Cell<Option<u16>>),
    ) -> Self {
        let network_down = !w.client_down.is_empty() && w.network_down(client as u32);
        let k = &w.chain_slots[usize::from(ch)];
        let first = k.hosts.is_some() && w.requests.get(request).is_none_or(|r| r.attempts == 0);
        View {
            k,
            client,
            now: w.now,
            gates: RefCell::new(Gates {
                breakers: &mut w.breakers,
                budgets: &mut w.budgets,
                throttles: &mut w.throttles,
                hedgers: &mut w.hedgers,
                limiters: &mut w.limiters,
                rate_limiters: &mut w.rate_limiters,
                fleet_budgets: &mut w.fleet_budgets,
                stores: &mut w.stores,
            }),
            ledgers: RefCell::new(&mut w.ledgers),
            rng: RefCell::new((&mut w.client_rng, &mut w.given_draws)),
            network_down,
            records: RefCell::new(Records {
                m: &mut w.m,
                decisions: &mut w.decisions,
            }),
            outs,
            bal: RefCell::new(&mut w.bal),
            c: w.c,
            request,
            first,
            host,
            fleet: RefCell::new(FleetParts {
                clients: &mut w.fleet,
                held: &mut w.fleet_held,
                frames: &mut w.fleet_frames,
                stride: w.fleet_stride,
                asks: &mut w.store_asks,
            }),
        }
    }

    /// The call's instance in slot `(slot, n)` (n instances: one shared, or one per client).
    fn at(&self, (slot, n): (usize, usize)) -> (usize, usize) {
        // One instance per client: the client's own (the remainder only guards the index).
        let i = match n {
            0 | 1 => 0,
            n if self.client < n => self.client,
            n => self.client % n,
        };
        (slot, i)
    }

    fn decide(&self, d: Decision) {
        if let Some(log) = self.records.borrow_mut().decisions.as_mut() {
            log.push((self.now, d));
        }
    }

    fn transition(&self, t: Option<reliable_core::breaker::Transition>, shadow: bool) {
        if t.is_some() {
            let mut records = self.records.borrow_mut();
            let Records { m, decisions } = &mut *records;
            super::stack::count_transition(m, decisions, self.now, t, shadow);
        }
    }

    fn extra(&self, f: impl FnOnce(&mut crate::metrics::extra::ExtraCounters)) {
        if let Some(e) = &mut self.records.borrow_mut().m.extra {
            f(e);
        }
    }
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

impl View<'_> {
    /// [`Shared::budget`] when the retry draws from a ledger or a fleet's budget: out of line,
    /// as most chains' retries draw from their own budget.
    #[inline(never)]
    fn budget_aside<R>(&self, f: impl FnOnce(&mut dyn Budget) -> R) -> R {
        if let Some((l, i)) = self.k.ledger.map(|l| self.at(l)) {
            let mut ledgers = self.ledgers.borrow_mut();
            let ledger = &mut ledgers[l][i];
            // The chain's own ledger is the whole retry budget; one enclosing the chain took the
            // call's deposit when the call passed it.
            return match ledger {
                LedgerSlot::Small(own) if self.k.own_ledger => f(own),
                LedgerSlot::Large(own) if self.k.own_ledger => f(&mut **own),
                _ => f(&mut LedgerRetries(ledger)),
            };
        }
        if let Some((slot, _)) = self.k.budget.filter(|_| self.k.fleet_budget) {
            let mut gates = self.gates.borrow_mut();
            let Gates {
                fleet_budgets: nodes,
                stores,
                budgets,
                ..
            } = &mut *gates;
            if let Some(Some(node)) = nodes.get_mut(slot)
                && let Some(store) = stores.get_mut(usize::from(node.store))
                && let Some(state) = node.clients.get_mut(self.client)
                && budgets[slot].len() > self.client + 1
            {
                // The store's budget first, then each client's own.
                let (shared, own) = budgets[slot].split_at_mut(1);
                return f(&mut crate::client::fleet_budget::FleetRetries {
                    client: state,
                    fleet: &mut shared[0],
                    local: &mut own[self.client],
                    store,
                    scope: node.scope,
                    network_down: self.network_down,
                    width_ns: node.width_ns,
                    counters: &mut node.counters,
                });
            }
        }
        match self.k.budget.map(|b| self.at(b)) {
            Some((b, i)) => f(&mut self.gates.borrow_mut().budgets[b][i]),
            None => f(&mut reliable_core::budget::Unlimited),
        }
    }

    /// Runs `f` on the client's dealings with the store of fleet breaker slot `slot`
    /// (`fleet`: its node, store and scope), with the store and the slot's breakers (0 the
    /// store's, `1 + c` client `c`'s); counts the transitions it makes, and the fleet's openings.
    fn with_fleet<T>(
        &self,
        slot: usize,
        (_, store, scope): (u16, u16, FleetScope),
        shadow: bool,
        f: impl FnOnce(&mut FleetClient, &mut Ctx<'_>, crate::client::fleet::Note<'_>) -> T,
    ) -> Option<T> {
        let mut counters: FleetCounters =
            self.records.borrow_mut().m.fleet.take().unwrap_or_default();
        let mut transitions: Vec<(usize, Transition)> = Vec::new();
        let out = {
            let mut gates = self.gates.borrow_mut();
            let Gates {
                breakers, stores, ..
            } = &mut *gates;
            let mut parts = self.fleet.borrow_mut();
            let fc = parts.clients.get_mut(slot)?.get_mut(self.client)?;
            let mut cx = Ctx {
                scope,
                store: stores.get_mut(usize::from(store))?,
                breakers: &mut **breakers.get_mut(slot)?,
                client: self.client as u32,
                network_down: self.network_down,
                now: self.now,
                counters: &mut counters,
            };
            let mut note = |i: usize, t: Option<Transition>| {
                if let Some(t) = t {
                    transitions.push((i, t));
                }
            };
            f(fc, &mut cx, &mut note)
        };
        for (i, t) in transitions {
            if i == 0 && t.to == State::Open && t.from != State::Open {
                counters.fleet_opens += 1;
                counters.first_fleet_open_ns.get_or_insert(self.now);
            }
            self.transition(Some(t), shadow);
        }
        self.records.borrow_mut().m.fleet = Some(counters);
        Some(out)
    }

    /// A fleet breaker's decision for the call: how long it waits for the store (ns), and the
    /// permits or the refusal.
    fn fleet_acquire(
        &self,
        slot: usize,
        fleet: (u16, u16, FleetScope),
        shadow: bool,
    ) -> Option<(
        u64,
        Result<crate::client::fleet::Held, crate::client::fleet::Refusal>,
    )> {
        let d = self.with_fleet(slot, fleet, shadow, |fc, cx, note| fc.acquire(cx, note))?;
        Some((d.delay, d.result))
    }

    /// A fleet breaker's decision as the core's: its permits kept, a core permit standing for
    /// them.
    fn fleet_permit(
        &self,
        result: Result<crate::client::fleet::Held, crate::client::fleet::Refusal>,
        now: Instant,
    ) -> Result<Permit, Rejection> {
        match result {
            Ok(held) => Ok(self.fleet.borrow_mut().held.keep(held, now)),
            Err(refusal) => Err(super::fleet::rejection(refusal)),
        }
    }

    /// The client's first breaker of per-host breaker slot `(slot, n)` (`hosts` per client):
    /// its breaker for host `k` is this plus `k`.
    fn host_base(&self, (_, n): (usize, usize), hosts: u32) -> usize {
        let hosts = hosts.max(1) as usize;
        let per = n / hosts;
        let i = if per <= 1 { 0 } else { self.client % per };
        i * hosts
    }

    /// The breaker the call's permit is from: the client's, or, per host, the one of the
    /// replica picked.
    fn breaker_at(&self, slot: (usize, usize)) -> (usize, usize) {
        match self.k.hosts {
            Some((hosts, _)) => (
                slot.0,
                self.host_base(slot, hosts) + usize::from(self.host.get().unwrap_or(0)),
            ),
            None => self.at(slot),
        }
    }

    /// A permit of the breaker per host in `slot` (`hosts` per client, from replica group
    /// `group`), and the host it is for: the balancer picks among the replicas whose breaker
    /// admits calls (skipping those open, or refusing as they are asked); with none left, the
    /// call is refused until the soonest admits a probe (half-open with its probes out, if none
    /// says when). In `shadow` mode every breaker admits, and the balancer picks as without
    /// them.
    fn acquire_host(
        &self,
        slot: (usize, usize),
        (hosts, group): (u32, u16),
        shadow: bool,
        now: Instant,
    ) -> Result<Permit, Rejection> {
        let s = slot.0;
        let base = self.host_base(slot, hosts);
        if group == u16::MAX {
            // One host: one breaker.
            let (decision, t) = self.gates.borrow_mut().breakers[s].try_acquire(base, now);
            self.transition(t, shadow);
            self.host.set(Some(0));
            return decision;
        }
        let mut bal = self.bal.borrow_mut();
        let mut blocked = std::mem::take(&mut bal.blocked);
        blocked.clear();
        let mut soonest = Duration::MAX;
        {
            let gates = self.gates.borrow();
            for k in 0..hosts as usize {
                let refusing = if shadow {
                    None
                } else {
                    refuses(gates.breakers[s].get(base + k), now)
                };
                if let Some(after) = refusing {
                    soonest = soonest.min(after);
                }
                blocked.push(refusing.is_some());
            }
        }
        let out = loop {
            let picked = {
                let mut records = self.records.borrow_mut();
                let mut cx = super::balance::PickCtx {
                    c: self.c,
                    now: self.now,
                    m: &mut *records.m,
                };
                bal.choose(&mut cx, group, self.request, self.first, Some(&blocked))
            };
            let Some(k) = picked else {
                break Err(Rejection {
                    reason: if soonest == Duration::MAX {
                        RejectReason::HalfOpenFull
                    } else {
                        RejectReason::Open {
                            retry_after: soonest,
                        }
                    },
                });
            };
            let k = k as usize;
            let (decision, t) = self.gates.borrow_mut().breakers[s].try_acquire(base + k, now);
            self.transition(t, shadow);
            match decision {
                Ok(p) => {
                    self.host.set(Some(k as u16));
                    break Ok(p);
                }
                Err(r) => {
                    // Half-open with its probes out: not this one either.
                    soonest = soonest.min(r.retry_after().unwrap_or(Duration::MAX));
                    blocked[k] = true;
                }
            }
        };
        bal.blocked = blocked;
        out
    }
}

/// The refuser a decision trace names for a refusal.
fn refuser(r: Refusal) -> Refuser {
    match r {
        Refusal::Breaker(_) => Refuser::Breaker,
        Refusal::Throttle(_) => Refuser::Throttle,
        Refusal::Ledger(_) => Refuser::Budget,
        Refusal::Limit(_) | Refusal::Rate(_) => Refuser::Limiter,
    }
}

impl Shared for View<'_> {
    #[inline]
    fn breaker_ask(&self, now: Instant) -> Option<Asked> {
        let Some(fleet) = self.k.fleet.filter(|f| f.2.mode == FleetMode::Exact) else {
            return self.breaker_acquire(now).map(Asked::Now);
        };
        let (slot, shadow) = self.k.breaker?;
        let (delay, result) = self.fleet_acquire(slot.0, fleet, shadow)?;
        if delay == 0 {
            return Some(Asked::Now(self.fleet_permit(result, now)));
        }
        // The store decided as it was asked; its answer arrives a round trip later.
        let mut parts = self.fleet.borrow_mut();
        let i = self.request.index as usize * parts.stride + slot.0;
        let frame = parts.frames.get_mut(i)?;
        *frame = FleetFrame::Waiting(result);
        parts
            .asks
            .push((self.request, fleet.0, self.now.saturating_add(delay)));
        Some(Asked::Later)
    }

    fn breaker_acquire(&self, now: Instant) -> Option<Result<Permit, Rejection>> {
        let (slot, shadow) = self.k.breaker?;
        if let Some(fleet) = self.k.fleet {
            // At once: a cached view's decision (a hedge's too: it never waits for a store).
            let (_, result) = self.fleet_acquire(slot.0, fleet, shadow)?;
            return Some(self.fleet_permit(result, now));
        }
        let decision = match self.k.hosts {
            Some(hosts) => self.acquire_host(slot, hosts, shadow, now),
            None => {
                let (b, i) = self.at(slot);
                let (decision, t) = self.gates.borrow_mut().breakers[b].try_acquire(i, now);
                self.transition(t, shadow);
                decision
            }
        };
        if let Ok(permit) = &decision {
            if permit.is_shadow() {
                self.records.borrow_mut().m.shadow_reject(self.now);
            }
            if permit.is_probe() {
                self.extra(|e| e.probes_sent += 1);
            }
        }
        Some(decision)
    }

    fn breaker_record(&self, permit: Permit, outcome: Outcome, now: Instant) {
        let Some((slot, shadow)) = self.k.breaker else {
            return;
        };
        if let Some(fleet) = self.k.fleet {
            let held = self.fleet.borrow_mut().held.take(permit);
            if let Some(held) = held {
                self.with_fleet(slot.0, fleet, shadow, |fc, cx, note| {
                    fc.record(held, outcome, cx, note)
                });
            }
            return;
        }
        let (b, i) = self.breaker_at(slot);
        let t = self.gates.borrow_mut().breakers[b].record(i, permit, outcome, now);
        self.transition(t, shadow);
    }

    fn breaker_refuses(&self, now: Instant) -> Option<Duration> {
        let (slot, shadow) = self.k.breaker?;
        if shadow {
            return None;
        }
        if self.k.fleet.is_some() {
            let gates = self.gates.borrow();
            let local = gates.breakers[slot.0].get(1 + self.client);
            let parts = self.fleet.borrow();
            let fc = parts.clients.get(slot.0)?.get(self.client)?;
            return fc.refuses(local, self.now);
        }
        let (b, i) = self.breaker_at(slot);
        refuses(self.gates.borrow().breakers[b].get(i), now)
    }

    #[inline]
    fn budget<R>(&self, f: impl FnOnce(&mut dyn Budget) -> R) -> R {
        if self.k.ledger.is_some() || self.k.fleet_budget {
            return self.budget_aside(f);
        }
        match self.k.budget.map(|b| self.at(b)) {
            Some((b, i)) => f(&mut self.gates.borrow_mut().budgets[b][i]),
            None => f(&mut reliable_core::budget::Unlimited),
        }
    }

    fn throttle<R>(&self, f: impl FnOnce(&mut dyn AnyThrottle) -> R) -> Option<R> {
        let (t, i) = self.at(self.k.throttle?);
        Some(match &mut self.gates.borrow_mut().throttles[t][i] {
            ThrottleSlot::Small(throttle) => f(throttle),
            ThrottleSlot::Large(throttle) => f(&mut **throttle),
        })
    }

    fn ledger<R>(&self, f: impl FnOnce(&mut dyn AnyLedger) -> R) -> Option<R> {
        let (l, i) = self.at(self.k.ledger?);
        Some(match &mut self.ledgers.borrow_mut()[l][i] {
            LedgerSlot::Small(ledger) => f(ledger),
            LedgerSlot::Large(ledger) => f(&mut **ledger),
        })
    }

    fn hedger<R>(&self, f: impl FnOnce(&mut Hedger) -> R) -> Option<R> {
        let (h, i) = self.at(self.k.hedger?);
        Some(f(&mut self.gates.borrow_mut().hedgers[h][i]))
    }

    fn limiter<R>(&self, f: impl FnOnce(&mut Limiter) -> R) -> Option<R> {
        let (l, i) = self.at(self.k.limiter?);
        let mut gates = self.gates.borrow_mut();
        let limiter = &mut gates.limiters[l][i];
        let before = limiter.in_flight();
        let out = f(limiter);
        let after = limiter.in_flight();
        if after != before {
            self.extra(|e| e.admitted(self.now, after > before));
        }
        Some(out)
    }

    fn rate<R>(&self, f: impl FnOnce(&mut RateLimiter) -> R) -> Option<R> {
        let (r, i) = self.at(self.k.rate?);
        Some(f(&mut self.gates.borrow_mut().rate_limiters[r][i]))
    }

    fn sample(&self, what: SampleFor) -> u64 {
        let mut rng = self.rng.borrow_mut();
        let (client_rng, given) = &mut *rng;
        match what {
            SampleFor::Backoff => client_rng.next_u64(),
            SampleFor::Throttle => super::throttle_sample(client_rng, given),
        }
    }

    fn note(&self, note: Note) {
        match note {
            Note::Hedge { .. } => {
                self.extra(|e| e.hedges_sent += 1);
                self.decide(Decision::Hedge);
            }
            Note::NoHedge(r) => {
                self.extra(|e| e.hedges_refused += 1);
                self.decide(Decision::NoHedge(refuser(r)));
            }
            Note::Lost { n } => {
                if let Some(o) = self.outs.iter().flatten().find(|o| o.copy == n) {
                    self.decide(Decision::Cancelled(o.n));
                }
            }
            Note::Refused(r) => {
                self.decide(Decision::Refused(refuser(r)));
                self.records.borrow_mut().m.at(self.now).local_rejections += 1;
                if matches!(r, Refusal::Limit(_) | Refusal::Rate(_)) {
                    self.extra(|e| e.limit_refusals += 1);
                }
            }
            Note::Retry { after, .. } => self.decide(Decision::Retry(after)),
            Note::Limit { from, to } => self.decide(Decision::Limit { from, to }),
            Note::Ledger {
                kind: Extra::Probe,
                granted: false,
            } => {
                // The probe the breaker permitted is not sent.
                self.extra(|e| e.probes_sent = e.probes_sent.saturating_sub(1));
            }
            Note::GaveUp(reason) => {
                self.decide(Decision::GiveUp(reason.name()));
                // A chain without a `Retry` makes one attempt: it has no retrying to give up.
                if self.k.budget.is_some() {
                    self.records.borrow_mut().m.give_up(reason);
                }
            }
            Note::Ledger { .. } | Note::Ended { .. } => {}
        }
    }
}

//! [`World`]: one run of one policy under one seed, from the first event to the horizon.
//!
//! The world owns the event queue, the logical requests and attempts (in generational slabs), the
//! downstream models, the policy state (breakers, per client or shared) and the metrics recorder.
//! [`World::run`] pops events in `(time, sequence)` order and dispatches them; nothing else moves
//! virtual time.
//!
//! # How a logical request travels through a stack
//!
//! Starting a request *invokes* the outermost node. Every decision layer (a ledger, a retry, a
//! throttle, a breaker, a limit, a rate limit, a hedge) belongs to a chain the core's call engine
//! runs (`[Ledger] [Retry] [gates] [Hedge] Call`, see [`crate::client::stack::Chain`]), one node
//! to the world: invoking its top starts an engine call (`call.rs`), which says when to send each
//! copy through the chain's `Call`, when to drop one, when to wake it, and how the call ends;
//! every decision inside (admitting, retrying, hedging, what each gate hears) is the engine's,
//! the world keeping the state it draws from. A breaker per host is answered as the world's
//! balancer picks the replica, and the copy goes there; a fleet's breaker decided exactly answers
//! a store's round trip later (the call waits for it, `fleet.rs`). The world's own nodes are what
//! the engine does not decide: a bare `Call` sends an attempt (a network hop, then the
//! downstream) and arms its timer; a `Fallback` invokes its children in turn; an `Llm` reserves
//! and settles the tokens of its calls. A chain may end in such a subtree instead of a `Call` (a
//! `Retry` around a `Fallback`), or in a layer it holds already (a `Retry` inside a `Retry`,
//! which tops a chain of its own): each copy is an invocation of it. An answer produced at a
//! node travels up through its parents (`World::answer`): a copy's answer goes to its chain's
//! engine call, a chain's end on up, a fallback tries its next child on failure, and the answer
//! that leaves the outermost node finishes the request. Per-request state of each node that
//! keeps some (a fallback's position, an LLM call's reservation) lives in a fixed-stride frame
//! array beside the request slab, and each chain's engine call in another (boxed only for a
//! hedged chain), so a request in flight allocates nothing unless it hedges.

use reliable_core::Duration;

use crate::client::breakers::Breakers;
use crate::client::budgets::{BudgetSlot, ThrottleSlot};
use crate::client::ledgers::LedgerSlot;
use crate::client::stack::{NONE, NodeKind};
use crate::client::{Answer, AnswerKind, CompiledStack};
use crate::compile::Compiled;
use crate::engine::event::Reply;
use crate::engine::{EventKind, EventQueue, Handle, Lane, Slab, Stream, StreamId};
use crate::metrics::Recorder;
use crate::metrics::summary::{Context, PolicySummary, summarize};
use crate::model::Sampler;
use crate::model::register::Register;
use crate::model::scripted::Scripted;
use crate::model::server::{Admission, Job, Server, Started};
use crate::run::RunError;
use crate::scenario::{DownstreamModel, OutageMode, Scope, ScriptAnswer, Workload};
use crate::workload::{ClosedLoop, JobSet, OpenLoop, Source};

mod balance;
mod call;
mod downstreams;
mod fleet;
mod graph;
pub(crate) use graph::shape as graph_shape;
mod llm;
mod stack;

/// Events allowed at one instant before the run is declared a livelock (at least; large job sets
/// get 64 per client, since they all start at once).
const LIVELOCK_EVENTS: u64 = 10_000_000;

/// Most rows a traced run records (the first requests); `sim trace` is for small scenarios.
pub const TRACE_ROWS: usize = 1_000_000;

/// A logical request in flight.
#[derive(Clone, Copy, Debug)]
struct Request {
    /// Its number, from 1, in start order.
    id: u64,
    start: u64,
    client: u32,
    /// Attempts sent so far.
    attempts: u32,
}

/// An attempt in flight (sent, not yet answered or timed out).
#[derive(Clone, Copy, Debug)]
struct Attempt {
    request: Handle,
    node: u16,
    /// The downstream it was sent to (a replica, behind a balancer).
    ds: u16,
    /// Its number among its request's attempts, from 1.
    n: u32,
    /// When it was sent, for the attempt latency recovery is judged on.
    sent: u64,
}

/// Per-request state of one stateful node.
#[derive(Debug, Default)]
enum Frame {
    #[default]
    Idle,
    /// A fallback's current child and the deadline its children inherit.
    Fallback { index: u16, deadline: u64 },
}

/// Per-request state of one fleet breaker (kept beside the frames, only for stacks with one).
#[derive(Debug, Default)]
enum FleetFrame {
    #[default]
    Idle,
    /// A decision of the store's, waiting for its answer to arrive.
    Waiting(Result<crate::client::fleet::Held, crate::client::fleet::Refusal>),
}

/// A downstream's state in one run.
#[derive(Debug)]
enum Ds {
    Server(Server),
    Register(Register),
    Scripted(Scripted),
    // Boxed: a provider keeps its whole spec and per-key state; the other models are small.
    Llm(Box<crate::model::llm::LlmModel>),
}

/// One row of `sim trace`: a finished logical request.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct TraceRow {
    /// Request number, from 1.
    pub request: u64,
    /// Start time, ns.
    pub start_ns: u64,
    /// The client.
    pub client: u32,
    /// State of each breaker of the stack (for this client) just before the request.
    pub breakers_before: Vec<&'static str>,
    /// Final answer.
    pub outcome: &'static str,
    /// The layer path that produced it.
    pub served_by: String,
    /// Attempts the request sent.
    pub attempts: u32,
    /// Latency, ns.
    pub latency_ns: u64,
    /// Calls each downstream had received when the request finished.
    pub calls_so_far: Vec<u64>,
}

/// One decision of a client stack, in the order taken: what `World::run_calls` records for the
/// conformance suite's decision trace.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Decision {
    /// An attempt was sent.
    Attempt,
    /// Attempt `n` ended: its class by the core's table (`None`: a success) and whether the
    /// adaptive throttle counts it as accepted.
    Answer {
        /// The attempt's number among its request's attempts, from 1.
        n: u32,
        /// The class.
        class: Option<reliable_core::outcome::ErrorClass>,
        /// Accepted by the downstream.
        accepted: bool,
    },
    /// A breaker changed state.
    Breaker(reliable_core::breaker::Transition),
    /// A layer refused the request locally, sending nothing (a ledger's refusal of a half-open
    /// probe is [`Refuser::Budget`](reliable_core::answer::Refuser::Budget): the ledger is the
    /// retry budget).
    Refused(reliable_core::answer::Refuser),
    /// A hedge layer sends a hedge (its [`Attempt`](Decision::Attempt) follows).
    Hedge,
    /// A hedge was due and refused locally (by the ledger: `Refuser::Budget`); no other hedge of
    /// that call follows.
    NoHedge(reliable_core::answer::Refuser),
    /// Attempt `n` of the request (from 1, in send order) lost a hedged race and was dropped.
    Cancelled(u32),
    /// A concurrency limit's whole part moved.
    Limit {
        /// Before.
        from: u32,
        /// After.
        to: u32,
    },
    /// A retry layer retries after this delay (the policy's, before any enclosing deadline).
    Retry(Duration),
    /// A retry layer gave up, for the core's reason.
    GiveUp(&'static str),
    /// The logical request finished.
    End {
        /// Successfully.
        ok: bool,
    },
}

/// What one run produced.
#[derive(Clone, Debug)]
pub struct RunOutput {
    /// The headline numbers.
    pub summary: PolicySummary,
    /// Per-bucket metrics.
    pub buckets: Vec<crate::metrics::Bucket>,
    /// Latency of finished requests by percentile, for plots (see
    /// `metrics::summary::percentile_curve`).
    pub latency_curve: Vec<(f64, f64)>,
    /// Latency of finished requests (ms) at 5 to 7 nines in steps of 0.1 (`(nines, ms)`; empty
    /// with no request finished): the far tail a fan-out of many calls sees (see
    /// `metrics::summary::latency_at_nines`).
    pub far_tail: Vec<(f64, f64)>,
    /// Trace rows, if asked for.
    pub trace: Option<Vec<TraceRow>>,
    /// Most events pending at once.
    pub peak_events: usize,
    /// Most requests and attempts in flight at once (slab high-water marks).
    pub peak_requests: usize,
    /// Most attempts in flight at once.
    pub peak_attempts: usize,
    /// Limiter gauges per bucket (empty without a `Limit` layer).
    pub limits: Vec<crate::metrics::extra::LimitBucket>,
    /// Over a call graph, per depth from 1 (the edge's callees), per bucket: (arrivals at that
    /// depth, the edge's first tries). Empty without services.
    pub depth_arrivals: Vec<Vec<(u64, u64)>>,
}

/// Bytes a logical request in flight costs in the world's own structures, for `stack`: the
/// request slot, its frames, the engine's call of each of its chains, one attempt slot and the
/// two events an attempt has pending at most (its delivery or reply, and its timer). Server queue
/// entries (8 bytes) and the slabs' free lists (4 bytes per slot) come on top.
pub fn bytes_per_request(stack: &CompiledStack) -> usize {
    Slab::<Request>::slot_bytes()
        + stack.frames * std::mem::size_of::<Frame>()
        + stack.chains.iter().map(call::chain_bytes).sum::<usize>()
        + Slab::<Attempt>::slot_bytes()
        + 2 * std::mem::size_of::<crate::engine::Event>()
}

/// Bytes a logical request in flight costs on top of [`bytes_per_request`] for a stack with
/// `breakers` breaker slots, one of which is a fleet's (0 without one).
pub fn fleet_bytes_per_request(breakers: usize) -> usize {
    breakers * std::mem::size_of::<FleetFrame>()
}

/// A uniform sample for a throttle's decision: the next of the `given` draws (counting them;
/// past their end `u64::MAX`, never refused), else the client stream's.
fn throttle_sample(client_rng: &mut Stream, (given, taken): &mut (Vec<u64>, usize)) -> u64 {
    if given.is_empty() {
        return client_rng.next_u64();
    }
    *taken += 1;
    given.get(*taken - 1).copied().unwrap_or(u64::MAX)
}

/// One run of one policy under one seed.
pub struct World<'c> {
    c: &'c Compiled,
    stack: &'c CompiledStack,
    seed: u64,
    now: u64,
    q: EventQueue,
    lanes: Vec<Lane>,
    requests: Slab<Request>,
    frames: Vec<Frame>,
    attempts: Slab<Attempt>,
    ds: Vec<Ds>,
    net: Vec<(Sampler, Sampler)>,
    net_rng: Vec<Stream>,
    fault_rng: Stream,
    /// Per breaker slot of the stack: one breaker (shared) or one per client.
    breakers: Vec<Box<dyn Breakers>>,
    /// Per retry node: one budget (shared) or one per client; a fleet's: 0 is the store's, 1 + c
    /// client c's own.
    budgets: Vec<Vec<BudgetSlot>>,
    /// Per retry node: its fleet budget's clients and counts, if its budget is a fleet's.
    fleet_budgets: Vec<Option<crate::client::fleet_budget::FleetBudgetNode>>,
    /// Per throttle node: one throttle (shared) or one per client.
    throttles: Vec<Vec<ThrottleSlot>>,
    /// Per LLM node: one spend breaker (shared) or one per client (empty without `spend`).
    spends: Vec<Vec<crate::client::llm::SpendSlot<'c>>>,
    /// Spend reservations of the attempts in flight, indexed like `frames`.
    held: Vec<Option<reliable_core::spend::Reservation>>,
    /// Per hedge node: one hedger (shared) or one per client.
    hedgers: Vec<Vec<reliable_core::hedge::Hedger>>,
    /// Per ledger node: one ledger (shared) or one per client.
    ledgers: Vec<Vec<LedgerSlot>>,
    /// Per limit node: one limiter (shared) or one per client.
    limiters: Vec<Vec<reliable_core::limit::Limiter>>,
    /// Per rate-limit node: one rate limiter (shared) or one per client.
    rate_limiters: Vec<Vec<reliable_core::limit::RateLimiter>>,
    /// The calls of the stack's chains the core's engine runs, `stack.chains` per request slot.
    chain_calls: Vec<Option<call::ChainCall>>,
    /// Per chain: its state slots and their instances.
    chain_slots: Vec<call::ChainSlots>,
    /// Client-side randomness: retry jitter, throttle draws.
    client_rng: Stream,
    source: Source,
    pending_client: u32,
    m: Recorder,
    trace: Option<Vec<TraceRow>>,
    /// Decisions taken, with their times (ns), when `World::run_calls` records them.
    decisions: Option<Vec<(u64, Decision)>>,
    /// The number of the attempt whose answer is being handed up (set where an attempt ends).
    answering: Option<u32>,
    /// Samples the throttles take instead of `client_rng`'s, when given, and how many were
    /// taken (past the end: `u64::MAX`, never refused).
    given_draws: (Vec<u64>, usize),
    next_id: u64,
    events: u64,
    livelock: u64,
    progress: Option<&'c (dyn Fn(u64) + Sync)>,
    /// Call-graph state, when a downstream is a service.
    graph: Option<Box<graph::Graph>>,
    /// The balancers of the replicated downstreams, and what they keep per request.
    bal: balance::Balancing,
    /// The scenario's stores, as this run sees them.
    stores: Vec<crate::client::fleet::StoreSim>,
    /// Per breaker slot: for a `Fleet` scope, each client's dealings with the store; empty
    /// otherwise.
    fleet: Vec<Vec<crate::client::fleet::FleetClient>>,
    /// `(client, from, until)` (ns): windows when a client's own network is down.
    client_down: Vec<(u32, u64, u64)>,
    /// No timer ends an attempt: a client waits for each answer (the scenario's
    /// `interruptible: false`).
    uninterruptible: bool,
    /// Copies of chains whose bottom is a subtree, to invoke once the step that sent them is
    /// over (an invocation may answer at once, stepping its chain again): `(request, node,
    /// deadline)`.
    subtree_sends: Vec<(Handle, u16, u64)>,
    /// Per request, one [`FleetFrame`] per breaker slot, when the stack has a fleet breaker.
    fleet_frames: Vec<FleetFrame>,
    /// Fleet permits the chains' calls hold.
    fleet_held: fleet::HeldPermits,
    /// Decisions a chain's call waits for a store's answer to: the request, the breaker node,
    /// when the answer arrives (ns); queued once the step that asked is over.
    store_asks: Vec<(Handle, u16, u64)>,
    /// Breaker slots when the stack has a fleet breaker, else 0 (no fleet frames).
    fleet_stride: usize,
}

impl std::fmt::Debug for World<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("World")
            .field("now", &self.now)
            .field("seed", &self.seed)
            .field("events", &self.events)
            .field("requests", &self.requests.len())
            .field("attempts", &self.attempts.len())
            .finish_non_exhaustive()
    }
}

impl<'c> World<'c> {
    /// A world for policy `policy` (an index below the number of policies) of `c` under master
    /// seed `seed`. Cannot fail: everything that could was checked and built by
    /// [`load`](crate::load::load), and per-client state is copied from prototypes.
    pub fn new(c: &'c Compiled, policy: usize, seed: u64, trace: bool) -> Self {
        let stack = &c.stacks[policy.min(c.stacks.len() - 1)];
        let s = &c.scenario;
        let mut q = EventQueue::new();
        let lanes = stack.timeouts.iter().map(|_| q.lane()).collect();
        let mut ds = Vec::with_capacity(s.downstreams.len());
        let mut net = Vec::with_capacity(s.downstreams.len());
        let mut net_rng = Vec::with_capacity(s.downstreams.len());
        for (i, d) in s.downstreams.iter().enumerate() {
            let i = i as u16;
            ds.push(match &d.model {
                DownstreamModel::Server { .. } => match Server::from_model(&d.model, i, seed) {
                    Some(server) => Ds::Server(server),
                    None => unreachable!("a Server model makes a server"),
                },
                DownstreamModel::Register => Ds::Register(Register::new()),
                DownstreamModel::Scripted {
                    script,
                    then,
                    latency,
                    latencies,
                } => Ds::Scripted(
                    Scripted::new(script.clone(), *then, latency.as_nanos())
                        .with_latencies(latencies.iter().map(|l| l.as_nanos()).collect()),
                ),
                DownstreamModel::LlmProvider(spec) => Ds::Llm(Box::new(
                    crate::model::llm::LlmModel::new(spec, i, c.clients(), seed),
                )),
            });
            net.push((
                Sampler::new(&d.network.request),
                Sampler::new(&d.network.response),
            ));
            net_rng.push(Stream::new(seed, StreamId::Network(i)));
        }
        let clients = c.clients();
        let mut fleet = Vec::with_capacity(stack.breakers.len());
        let mut breakers = Vec::with_capacity(stack.breakers.len());
        for &node in &stack.breakers {
            let NodeKind::Breaker {
                breaker,
                scope,
                slot,
                hosts,
                ..
            } = &stack.nodes[node as usize].kind
            else {
                continue;
            };
            // Per host: client c's breaker for host k is instance c × hosts + k. A fleet's: 0 is
            // the store's, 1 + c client c's own.
            let n = match scope {
                Scope::Shared => 1,
                Scope::PerClient => clients,
                Scope::PerHost => clients.saturating_mul(*hosts),
                Scope::Fleet(_) => clients.saturating_add(1),
            };
            fleet.push(if scope.fleet().is_some() {
                vec![crate::client::fleet::FleetClient::default(); clients as usize]
            } else {
                Vec::new()
            });
            breakers.push(breaker.instances((0..n).map(|client| {
                let key = (u64::from(*slot) << 32) | u64::from(client);
                crate::engine::rng::derive(seed, StreamId::Client, key)
            })));
        }
        let mut budgets = Vec::with_capacity(stack.retries.len());
        let mut fleet_budgets = Vec::with_capacity(stack.retries.len());
        for &node in &stack.retries {
            if let NodeKind::Retry {
                budget,
                scope,
                store,
                width_ns,
                ..
            } = &stack.nodes[node as usize].kind
            {
                let n = match scope {
                    Scope::Shared => 1,
                    Scope::Fleet(_) => clients.saturating_add(1),
                    _ => clients,
                };
                budgets.push(vec![budget.clone(); n as usize]);
                fleet_budgets.push(scope.fleet().map(|f| {
                    crate::client::fleet_budget::FleetBudgetNode {
                        scope: f,
                        store: *store,
                        width_ns: *width_ns,
                        clients: vec![Default::default(); clients as usize],
                        counters: Default::default(),
                    }
                }));
            }
        }
        let mut throttles = Vec::with_capacity(stack.throttles.len());
        for &node in &stack.throttles {
            if let NodeKind::Throttle {
                throttle, scope, ..
            } = &stack.nodes[node as usize].kind
            {
                let n = if *scope == Scope::Shared { 1 } else { clients };
                throttles.push(vec![throttle.clone(); n as usize]);
            }
        }
        let mut spends = Vec::with_capacity(stack.llms.len());
        for &node in &stack.llms {
            if let NodeKind::Llm { spend, scope, .. } = &stack.nodes[node as usize].kind {
                let n = if *scope == Scope::Shared { 1 } else { clients };
                let mut v = Vec::new();
                if let Some(policy) = spend {
                    for _ in 0..n {
                        // Compiling the stack built this very policy's breaker already, so its
                        // buckets fit: a failure here is a bug in the compiler, not bad input.
                        let slot = crate::client::llm::spend_slot(policy)
                            .expect("spend buckets were checked when the stack was compiled");
                        v.push(slot);
                    }
                }
                spends.push(v);
            }
        }
        let per = |scope: &Scope| {
            if *scope == Scope::Shared {
                1
            } else {
                clients as usize
            }
        };
        let mut hedgers = Vec::with_capacity(stack.hedges.len());
        let mut ledgers = Vec::with_capacity(stack.ledgers.len());
        let mut limiters = Vec::with_capacity(stack.limits.len());
        let mut rate_limiters = Vec::with_capacity(stack.rate_limits.len());
        for n in &stack.nodes {
            match &n.kind {
                NodeKind::Hedge { hedger, scope, .. } => {
                    hedgers.push(vec![hedger.clone(); per(scope)])
                }
                NodeKind::Ledger { ledger, scope, .. } => {
                    ledgers.push(vec![ledger.clone(); per(scope)])
                }
                NodeKind::Limit { limiter, scope, .. } => {
                    limiters.push(vec![limiter.clone(); per(scope)])
                }
                NodeKind::RateLimit { limiter, scope, .. } => {
                    rate_limiters.push(vec![limiter.clone(); per(scope)])
                }
                _ => {}
            }
        }
        let mut m = Recorder::new(
            c.buckets,
            c.bucket_ns,
            s.downstreams.len(),
            c.timeline.span(),
        );
        if stack.counts_extra() {
            m.extra = Some(crate::metrics::extra::ExtraCounters::new(c.buckets));
        }
        for g in c.groups.iter().filter(|g| g.outlier.is_some()) {
            for &r in &g.members {
                m.ds[usize::from(r)].ejections = Some(0);
            }
        }
        let graph = graph::Graph::new(c, stack).map(|(g, depth)| {
            m.hops = Some(crate::metrics::hops::HopCounters::new(depth, c.buckets));
            for (i, d) in ds.iter_mut().enumerate() {
                if let Ds::Server(server) = d
                    && g.propagates(i as u16)
                {
                    server.cancel_abandoned();
                }
            }
            g
        });
        let source = match &s.workload {
            Workload::OpenLoop {
                rate,
                arrivals,
                clients,
                start,
                steps,
            } => Source::Open(OpenLoop::new(
                seed,
                *rate,
                *arrivals,
                *clients,
                start.as_nanos(),
                steps,
                c.horizon_ns,
            )),
            Workload::ClosedLoop {
                clients,
                think,
                start_spread,
            } => Source::Closed(ClosedLoop::new(
                seed,
                *clients,
                Sampler::new(think),
                start_spread.as_nanos(),
            )),
            Workload::JobSet {
                clients,
                start_spread,
            } => Source::Jobs(JobSet::new(seed, *clients, start_spread.as_nanos())),
        };
        let mut world = World {
            c,
            stack,
            seed,
            now: 0,
            q,
            lanes,
            requests: Slab::new(),
            frames: Vec::new(),
            attempts: Slab::new(),
            ds,
            net,
            net_rng,
            fault_rng: Stream::new(seed, StreamId::Faults(0)),
            breakers,
            budgets,
            fleet_budgets,
            throttles,
            spends,
            held: Vec::new(),
            hedgers,
            ledgers,
            limiters,
            rate_limiters,
            chain_calls: Vec::new(),
            chain_slots: Vec::new(),
            client_rng: Stream::new(seed, StreamId::Client),
            source,
            pending_client: 0,
            m,
            trace: trace.then(Vec::new),
            decisions: None,
            answering: None,
            given_draws: (Vec::new(), 0),
            next_id: 1,
            events: 0,
            livelock: LIVELOCK_EVENTS.max(64 * u64::from(clients)),
            progress: None,
            graph,
            bal: balance::Balancing::new(c, seed, s.downstreams.len()),
            stores: s
                .stores
                .iter()
                .enumerate()
                .map(|(i, st)| crate::client::fleet::StoreSim::new(st, i as u16, seed))
                .collect(),
            fleet_stride: if fleet.iter().any(|f| !f.is_empty()) {
                stack.breakers.len()
            } else {
                0
            },
            fleet,
            fleet_frames: Vec::new(),
            fleet_held: fleet::HeldPermits::default(),
            store_asks: Vec::new(),
            uninterruptible: !s.interruptible,
            subtree_sends: Vec::new(),
            client_down: s
                .client_faults
                .iter()
                .map(|f| match f {
                    crate::scenario::ClientFault::NetworkDown {
                        client,
                        from,
                        until,
                    } => (*client, from.as_nanos(), until.as_nanos()),
                })
                .collect(),
        };
        world.chain_slots = world.chain_slots();
        world
    }

    /// Reports progress to `f` every so often: the virtual time advanced since the last report, ns.
    pub fn with_progress(mut self, f: &'c (dyn Fn(u64) + Sync)) -> Self {
        self.progress = Some(f);
        self
    }

    fn schedule_start(&mut self) {
        match &mut self.source {
            Source::Open(src) => {
                if let Some((t, client)) = src.next(&self.c.timeline) {
                    self.pending_client = client;
                    self.q.push(t, EventKind::Arrival);
                }
            }
            Source::Closed(cl) => {
                for client in 0..cl.clients() {
                    let t = cl.start_of(client);
                    self.q.push(t, EventKind::ClientStart { client });
                }
            }
            Source::Jobs(js) => {
                for client in 0..js.clients() {
                    let t = js.start_of(client);
                    self.q.push(t, EventKind::ClientStart { client });
                }
            }
        }
        for &(t, fault) in self.c.timeline.edges() {
            if t < self.c.horizon_ns {
                self.q.push(t, EventKind::FaultEdge { fault });
            }
        }
        for k in 1..self.c.buckets as u64 {
            self.q.push(k * self.c.bucket_ns, EventKind::Sample);
        }
    }

    /// Records decision `d` now, if decisions are recorded.
    #[inline]
    fn decide(&mut self, d: Decision) {
        if let Some(log) = &mut self.decisions {
            log.push((self.now, d));
        }
    }

    /// Runs one logical request after another instead of the scenario's workload, recording every
    /// decision of the stack: request `k` starts at `calls[k].0` (ns), or when request `k − 1`
    /// finished if that is later, and the scripted downstream (downstream 0, if scripted) answers
    /// its attempts from answer `calls[k].1` of its script on. Throttles take their samples from
    /// `draws` when it is not empty (more decisions than draws is an error). Faults and the
    /// horizon still apply; an event past the horizon, or a request that never finishes, is an
    /// error. This is how the conformance suite feeds its sequences to the simulator's own
    /// client stack.
    pub fn run_calls(
        mut self,
        calls: &[(u64, u64)],
        draws: &[u64],
    ) -> Result<Vec<(u64, Decision)>, RunError> {
        self.decisions = Some(Vec::new());
        self.given_draws = (draws.to_vec(), 0);
        let horizon = self.c.horizon_ns;
        for &(fault_at, fault) in self.c.timeline.edges() {
            if fault_at < horizon {
                self.q.push(fault_at, EventKind::FaultEdge { fault });
            }
        }
        for &(start, first_answer) in calls {
            self.q
                .push(start.max(self.now), EventKind::ClientStart { client: 0 });
            let request = self.next_id;
            if let Some(Ds::Scripted(s)) = self.ds.first_mut() {
                s.skip_to(first_answer);
            }
            let mut same_instant = 0u64;
            while self.next_id == request || self.requests.len() > 0 {
                let unfinished = RunError::Unfinished {
                    request,
                    at_ns: self.now,
                };
                let Some(e) = self.q.pop() else {
                    return Err(unfinished);
                };
                if e.time >= horizon {
                    return Err(unfinished);
                }
                let time = e.time.max(self.now);
                same_instant = if time == self.now {
                    same_instant + 1
                } else {
                    0
                };
                if same_instant > self.livelock {
                    return Err(RunError::Livelock {
                        at_ns: time,
                        events: self.livelock,
                    });
                }
                self.now = time;
                self.dispatch(e.kind);
            }
        }
        let (given, taken) = &self.given_draws;
        if *taken > given.len() {
            return Err(RunError::DrawsExhausted {
                given: given.len(),
                taken: *taken,
            });
        }
        Ok(self.decisions.take().unwrap_or_default())
    }

    /// Runs to the horizon and summarises.
    pub fn run(mut self) -> Result<RunOutput, RunError> {
        self.schedule_start();
        let horizon = self.c.horizon_ns;
        let mut same_instant = 0u64;
        let mut last_report = 0u64;
        while let Some(e) = self.q.pop() {
            if e.time >= horizon {
                break;
            }
            // Time never goes back, whatever was scheduled.
            let time = e.time.max(self.now);
            if time == self.now {
                same_instant += 1;
                if same_instant > self.livelock {
                    return Err(RunError::Livelock {
                        at_ns: time,
                        events: self.livelock,
                    });
                }
            } else {
                same_instant = 0;
            }
            self.now = time;
            self.events += 1;
            if self.events & 0xFFFF == 0
                && let Some(p) = self.progress
                && self.now > last_report
            {
                p(self.now - last_report);
                last_report = self.now;
            }
            self.dispatch(e.kind);
        }
        self.now = horizon;
        self.sample();
        if let Some(p) = self.progress {
            p(horizon.saturating_sub(last_report));
        }
        Ok(self.finish())
    }

    fn finish(self) -> RunOutput {
        let makespan_ns = match &self.source {
            Source::Jobs(js) if js.done == u64::from(js.clients()) => Some(js.last_success),
            _ => None,
        };
        let s = &self.c.scenario;
        let register = self
            .ds
            .iter()
            .map(|d| match d {
                Ds::Register(r) => Some((r.commits, r.conflicts)),
                _ => None,
            })
            .collect();
        let cx = Context {
            name: &s.policies[self.policy_index()].name,
            seed: self.seed,
            horizon_ns: self.c.horizon_ns,
            bucket_ns: self.c.bucket_ns,
            fault: self.c.timeline.span(),
            threshold: s.recovery.threshold,
            relapse: s.recovery.relapse,
            settle: s.recovery.settle,
            sustain_ns: s.recovery.sustain.as_nanos(),
            unfinished: self.requests.len() as u64,
            makespan_ns,
            events: self.events,
            ds_names: &self.c.ds_names,
            register,
            scheduled: match &self.source {
                Source::Open(src) => {
                    Some(src.scheduled(&self.c.timeline, self.c.bucket_ns, self.c.buckets))
                }
                _ => None,
            },
            ledger: (!self.ledgers.is_empty()).then(|| {
                let (mut drawn, mut denied) = ([0u64; 3], [0u64; 3]);
                for l in self.ledgers.iter().flatten() {
                    let (d, n) = l.counts();
                    for k in 0..3 {
                        drawn[k] += d[k];
                        denied[k] += n[k];
                    }
                }
                crate::metrics::extra::LedgerCounts {
                    drawn: crate::metrics::extra::ByKind::from_array(drawn),
                    denied: crate::metrics::extra::ByKind::from_array(denied),
                }
            }),
            limited: !self.limiters.is_empty(),
        };
        let mut m = self.m;
        for node in self.fleet_budgets.iter().flatten() {
            let sum = m.fleet_budget.get_or_insert_with(Default::default);
            let c = &node.counters;
            sum.store_ops += c.store_ops;
            sum.store_failures += c.store_failures;
            sum.granted += c.granted;
            sum.refused += c.refused;
            sum.by_local += c.by_local;
            sum.store_refusals += c.store_refusals;
            sum.grants_taken += c.grants_taken;
        }
        if self.ds.iter().any(|d| matches!(d, Ds::Llm(_))) {
            m.llm.get_or_insert_with(Default::default);
        }
        let shadow = |&n: &u16| match &self.stack.nodes[n as usize].kind {
            NodeKind::Breaker { breaker, .. } => breaker.shadow(),
            _ => false,
        };
        if self.stack.breakers.iter().any(shadow) {
            m.shadow.get_or_insert_with(Default::default);
        }
        let mut summary = summarize(&m, &cx);
        summary.peak_in_flight = self.requests.capacity_used() as u64;
        let depth_arrivals = m
            .hops
            .as_ref()
            .map_or_else(Vec::new, |h| h.arrivals_by_depth(&m.buckets));
        RunOutput {
            summary,
            latency_curve: crate::metrics::summary::percentile_curve(&m.latency),
            far_tail: (50..=70)
                .filter_map(|k| {
                    let n = f64::from(k) / 10.0;
                    crate::metrics::summary::latency_at_nines(&m.latency, n).map(|ms| (n, ms))
                })
                .collect(),
            buckets: m.buckets,
            trace: self.trace,
            peak_events: self.q.peak_len(),
            peak_requests: self.requests.capacity_used(),
            peak_attempts: self.attempts.capacity_used(),
            limits: match m.extra {
                Some(e) if !self.limiters.is_empty() => e.limits,
                _ => Vec::new(),
            },
            depth_arrivals,
        }
    }

    fn policy_index(&self) -> usize {
        self.c
            .stacks
            .iter()
            .position(|s| std::ptr::eq(s, self.stack))
            .unwrap_or(0)
    }

    fn sample(&mut self) {
        let (mut queue, mut busy) = (0u64, 0u64);
        for d in &self.ds {
            match d {
                Ds::Server(s) => {
                    queue += s.queue_len() as u64;
                    busy += u64::from(s.busy());
                }
                Ds::Llm(m) => busy += u64::from(m.generating()),
                _ => {}
            }
        }
        let in_flight = self.requests.len() as u64;
        self.m.sample(self.now, queue, busy, in_flight);
        if let Some(e) = &mut self.m.extra {
            let limit = self
                .limiters
                .iter()
                .flatten()
                .map(|l| u64::from(l.limit()))
                .sum();
            let w = self.c.bucket_ns.max(1);
            let i = (self.now.saturating_sub(1) / w) as usize;
            e.sample(i, self.now, w, limit);
        }
    }

    /// Counts attempt `a` (gone from the slab) as timed out: for its replica's outlier detection,
    /// and as a call graph's hop or the run's timeout.
    fn attempt_timed_out(&mut self, a: Attempt) {
        if !self.c.groups.is_empty() {
            self.outlier_outcome(a.ds, true);
        }
        if self.graph.is_some() {
            self.hop_ended(a);
        } else {
            self.m.at(self.now).timeouts += 1;
            self.m.attempt_ended(self.now, self.now - a.sent);
        }
    }

    #[inline]
    fn dispatch(&mut self, kind: EventKind) {
        match kind {
            EventKind::Arrival => {
                let client = self.pending_client;
                self.start_request(client);
                if let Source::Open(src) = &mut self.source
                    && let Some((t, client)) = src.next(&self.c.timeline)
                {
                    self.pending_client = client;
                    self.q.push(t, EventKind::Arrival);
                }
            }
            EventKind::ClientStart { client } => self.start_request(client),
            EventKind::AtDownstream { ds, attempt } => self.at_downstream(ds, attempt),
            EventKind::ServiceDone {
                ds,
                attempt,
                work_us,
            } => self.service_done(ds, attempt, work_us),
            EventKind::Reply {
                ds,
                attempt,
                reply,
                hint,
            } => self.reply(ds, attempt, reply, hint),
            EventKind::RegisterRead {
                ds,
                attempt,
                version,
            } => {
                if self.held(ds, kind) {
                    return;
                }
                if self.attempts.contains(attempt) {
                    let d = self.hop(ds, true);
                    self.q.push(
                        self.now.saturating_add(d),
                        EventKind::RegisterWrite {
                            ds,
                            attempt,
                            version,
                        },
                    );
                }
            }
            EventKind::RegisterWrite {
                ds,
                attempt,
                version,
            } => {
                if self.held(ds, kind) {
                    return;
                }
                let ok = match self.ds.get_mut(ds as usize) {
                    Some(Ds::Register(r)) => r.write(version),
                    _ => false,
                };
                self.m.answered(self.now, ds, ok, false);
                let reply = if ok { Reply::Ok } else { Reply::Conflict };
                self.send_reply(ds, attempt, reply, 0);
            }
            EventKind::Timeout { attempt } => {
                if let Some(a) = self.attempts.get(attempt).copied() {
                    self.attempts.remove(attempt);
                    self.attempt_gone(a.ds);
                    self.attempt_timed_out(a);
                    self.answering = Some(a.n);
                    self.answer(a.request, a.node, Answer::new(AnswerKind::Timeout, a.node));
                }
            }
            EventKind::Wake { request, node } => self.wake(request, node),
            EventKind::StoreAnswer { request, node } => self.store_answer(request, node),
            EventKind::FaultEdge { fault } => {
                if let Some(ds) = self.c.timeline.downstream_of(fault) {
                    self.drain_server(ds as u16);
                }
            }
            EventKind::Sample => self.sample(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_flight_state_stays_small() {
        let sizes = (
            Slab::<Request>::slot_bytes(),
            std::mem::size_of::<Frame>(),
            Slab::<Attempt>::slot_bytes(),
            std::mem::size_of::<crate::engine::Event>(),
        );
        // An attempt carries its send time (for the attempt latency recovery is judged on).
        assert_eq!(sizes, (32, 16, 32, 32));
        // The default scenario's deepest stack (retry over breaker over call) is one chain: no
        // frame, and the engine's call (its `CallState<1, 5>`, the copy it has out, the last
        // answer and its wake-up).
        let limits = crate::compile::Limits::default();
        let c = crate::compile::compile_all(crate::DEFAULT_SCENARIO, "default", &limits)
            .unwrap()
            .remove(0);
        let deepest = c.stacks.iter().map(bytes_per_request).max().unwrap();
        assert_eq!(deepest, 32 + 552 + 32 + 64, "{deepest}");
    }
}

//! [`World`]: one run of one policy under one seed, from the first event to the horizon.
//!
//! The world owns the event queue, the logical requests and attempts (in generational slabs), the
//! downstream models, the policy state (breakers, per client or shared) and the metrics recorder.
//! [`World::run`] pops events in `(time, sequence)` order and dispatches them; nothing else moves
//! virtual time.
//!
//! # How a logical request travels through a stack
//!
//! Starting a request *invokes* the outermost node. A `Call` node sends an attempt (a network hop,
//! then the downstream) and arms its timer; a `Breaker` asks the core's breaker for a permit and
//! either invokes its inner node or answers at once with a rejection; a `Fallback` invokes its
//! children in turn. An answer produced at a node travels up through its parents (`World::answer`):
//! a breaker records the outcome with its permit, a fallback tries its next child on failure, and
//! the answer that leaves the outermost node finishes the request. Per-request state of each
//! stateful node (a permit, a fallback position) lives in a fixed-stride frame array beside the
//! request slab, so a request in flight allocates nothing.

use reliable_core::breaker::{Outcome, State, Transition};
use reliable_core::retry::{RetryDecision, RetryState};
use reliable_core::{Duration, Instant};

use crate::client::breakers::BreakerSlot;
use crate::client::budgets::{BudgetSlot, ThrottleSlot};
use crate::client::stack::{NONE, NodeKind};
use crate::client::{Answer, AnswerKind, CompiledStack};
use crate::engine::event::Reply;
use crate::engine::{EventKind, EventQueue, Handle, Lane, Slab, Stream, StreamId};
use crate::metrics::Recorder;
use crate::metrics::summary::{Context, PolicySummary, summarize};
use crate::model::Sampler;
use crate::model::register::Register;
use crate::model::scripted::Scripted;
use crate::model::server::{Admission, Job, Server, Started};
use crate::run::compiled::Compiled;
use crate::scenario::{DownstreamModel, OutageMode, Scope, ScriptAnswer, Workload};
use crate::workload::{ClosedLoop, JobSet, OpenLoop, Source};

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
}

/// Per-request state of one stateful node.
#[derive(Debug, Default)]
enum Frame {
    #[default]
    Idle,
    /// A breaker's permit for the call in progress.
    Permit(reliable_core::breaker::Permit),
    /// A fallback's current child and the deadline its children inherit.
    Fallback { index: u16, deadline: u64 },
    /// A retry layer's per-request state (the core's) and the deadline of the enclosing layers.
    Retry { state: RetryState, deadline: u64 },
}

/// A downstream's state in one run.
#[derive(Debug)]
enum Ds {
    Server(Server),
    Register(Register),
    Scripted(Scripted),
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

/// What one run produced.
#[derive(Debug)]
pub struct RunOutput {
    /// The headline numbers.
    pub summary: PolicySummary,
    /// Per-bucket metrics.
    pub buckets: Vec<crate::metrics::Bucket>,
    /// Trace rows, if asked for.
    pub trace: Option<Vec<TraceRow>>,
    /// Most events pending at once.
    pub peak_events: usize,
    /// Most requests and attempts in flight at once (slab high-water marks).
    pub peak_requests: usize,
    /// Most attempts in flight at once.
    pub peak_attempts: usize,
}

/// Why a run stopped early.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RunError {
    /// Too many events at one instant: something retries without delay against a layer that
    /// answers at once.
    Livelock {
        /// The instant, ns.
        at_ns: u64,
        /// The limit that was passed.
        events: u64,
    },
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunError::Livelock { at_ns, events } => write!(
                f,
                "livelock at t = {}: more than {events} events at one instant (a layer retrying without delay against one that answers at once?)",
                Duration::from_nanos(*at_ns)
            ),
        }
    }
}

impl std::error::Error for RunError {}

/// Bytes a logical request in flight costs in the world's own structures, for a stack with
/// `frames` frames: the request slot, its frames, one attempt slot and the two events an attempt
/// has pending at most (its delivery or reply, and its timer). Server queue entries (8 bytes) and
/// the slabs' free lists (4 bytes per slot) come on top.
pub fn bytes_per_request(frames: usize) -> usize {
    Slab::<Request>::slot_bytes()
        + frames * std::mem::size_of::<Frame>()
        + Slab::<Attempt>::slot_bytes()
        + 2 * std::mem::size_of::<crate::engine::Event>()
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
    breakers: Vec<Vec<BreakerSlot<'c>>>,
    /// Per retry node: one budget (shared) or one per client.
    budgets: Vec<Vec<BudgetSlot>>,
    /// Per throttle node: one throttle (shared) or one per client.
    throttles: Vec<Vec<ThrottleSlot>>,
    /// Client-side randomness: retry jitter, throttle draws.
    client_rng: Stream,
    source: Source,
    pending_client: u32,
    m: Recorder,
    trace: Option<Vec<TraceRow>>,
    next_id: u64,
    events: u64,
    livelock: u64,
    progress: Option<&'c (dyn Fn(u64) + Sync)>,
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
    /// A world for policy `policy` of `c` under master seed `seed`.
    pub fn new(c: &'c Compiled, policy: usize, seed: u64, trace: bool) -> Result<Self, String> {
        let stack = c
            .stacks
            .get(policy)
            .ok_or_else(|| format!("no policy #{policy}"))?;
        let s = &c.scenario;
        let mut q = EventQueue::new();
        let lanes = stack.timeouts.iter().map(|_| q.lane()).collect();
        let mut ds = Vec::with_capacity(s.downstreams.len());
        let mut net = Vec::with_capacity(s.downstreams.len());
        let mut net_rng = Vec::with_capacity(s.downstreams.len());
        for (i, d) in s.downstreams.iter().enumerate() {
            let i = i as u16;
            ds.push(match &d.model {
                DownstreamModel::Server {
                    workers,
                    queue,
                    service,
                    per_in_flight,
                    error_rate,
                    cancel_abandoned,
                } => Ds::Server(Server::new(
                    *workers,
                    queue.capacity,
                    queue.discipline,
                    Sampler::new(service),
                    per_in_flight.as_nanos(),
                    *error_rate,
                    *cancel_abandoned,
                    Stream::new(seed, StreamId::Service(i)),
                )),
                DownstreamModel::Register => Ds::Register(Register::new()),
                DownstreamModel::Scripted {
                    script,
                    then,
                    latency,
                } => Ds::Scripted(Scripted::new(script.clone(), *then, latency.as_nanos())),
            });
            net.push((
                Sampler::new(&d.network.request),
                Sampler::new(&d.network.response),
            ));
            net_rng.push(Stream::new(seed, StreamId::Network(i)));
        }
        let clients = c.clients();
        let mut breakers = Vec::with_capacity(stack.breakers.len());
        for &node in &stack.breakers {
            let NodeKind::Breaker {
                policy,
                scope,
                slot,
                ..
            } = &stack.nodes[node as usize].kind
            else {
                continue;
            };
            let n = if *scope == Scope::Shared { 1 } else { clients };
            let mut v = Vec::with_capacity(n as usize);
            for client in 0..n {
                let key = (u64::from(*slot) << 32) | u64::from(client);
                let seed = crate::engine::rng::derive(seed, StreamId::Client, key);
                v.push(BreakerSlot::new(policy, seed).map_err(|e| e.to_string())?);
            }
            breakers.push(v);
        }
        let mut budgets = Vec::with_capacity(stack.retries.len());
        for &node in &stack.retries {
            if let NodeKind::Retry { budget, scope, .. } = &stack.nodes[node as usize].kind {
                let n = if *scope == Scope::Shared { 1 } else { clients };
                let one = BudgetSlot::new(budget).map_err(|e| e.to_string())?;
                budgets.push(vec![one; n as usize]);
            }
        }
        let mut throttles = Vec::with_capacity(stack.throttles.len());
        for &node in &stack.throttles {
            if let NodeKind::Throttle { policy, scope, .. } = &stack.nodes[node as usize].kind {
                let n = if *scope == Scope::Shared { 1 } else { clients };
                let one = ThrottleSlot::new(*policy).map_err(|e| e.to_string())?;
                throttles.push(vec![one; n as usize]);
            }
        }
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
        Ok(World {
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
            throttles,
            client_rng: Stream::new(seed, StreamId::Client),
            source,
            pending_client: 0,
            m: Recorder::new(
                c.buckets,
                c.bucket_ns,
                s.downstreams.len(),
                c.timeline.span(),
            ),
            trace: trace.then(Vec::new),
            next_id: 1,
            events: 0,
            livelock: LIVELOCK_EVENTS.max(64 * u64::from(clients)),
            progress: None,
        })
    }

    /// Sets how many events may run at one instant before the run stops as a livelock.
    pub fn with_livelock_limit(mut self, events: u64) -> Self {
        self.livelock = events;
        self
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
        };
        let mut summary = summarize(&self.m, &cx);
        summary.peak_in_flight = self.requests.capacity_used() as u64;
        RunOutput {
            summary,
            buckets: self.m.buckets,
            trace: self.trace,
            peak_events: self.q.peak_len(),
            peak_requests: self.requests.capacity_used(),
            peak_attempts: self.attempts.capacity_used(),
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
            if let Ds::Server(s) = d {
                queue += s.queue_len() as u64;
                busy += u64::from(s.busy());
            }
        }
        let in_flight = self.requests.len() as u64;
        self.m.sample(self.now, queue, busy, in_flight);
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
                attempt,
                reply,
                hint,
            } => self.reply(attempt, reply, hint),
            EventKind::RegisterRead {
                ds,
                attempt,
                version,
            } => {
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
                    self.m.at(self.now).timeouts += 1;
                    self.answer(a.request, a.node, Answer::new(AnswerKind::Timeout, a.node));
                }
            }
            EventKind::Wake { request, node } => self.wake(request, node),
            EventKind::FaultEdge { fault } => {
                if let Some(ds) = self.c.timeline.downstream_of(fault) {
                    self.drain_server(ds as u16);
                }
            }
            EventKind::Sample => self.sample(),
        }
    }

    // ----- requests and the stack -----

    fn start_request(&mut self, client: u32) {
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
        let in_flight = self.requests.len() as u64;
        if in_flight > self.m.peak_in_flight {
            self.m.peak_in_flight = in_flight;
        }
        if let Some(trace) = &mut self.trace
            && trace.len() < TRACE_ROWS
        {
            let now = Instant::from_nanos(self.now);
            let states = self
                .breakers
                .iter()
                .map(|v| {
                    let b = if v.len() == 1 {
                        &v[0]
                    } else {
                        &v[client as usize % v.len().max(1)]
                    };
                    b.state(now).name()
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
    fn frame_mut(&mut self, request: Handle, node: u16) -> Option<&mut Frame> {
        let f = self.stack.nodes.get(node as usize)?.frame;
        if f == NONE {
            return None;
        }
        let i = request.index as usize * self.stack.frames + f as usize;
        self.frames.get_mut(i)
    }

    /// Which of `n` instances (1 when shared, one per client otherwise) serves `request`.
    #[inline]
    fn instance(&self, n: usize, request: Handle) -> usize {
        if n <= 1 {
            return 0;
        }
        self.requests.get(request).map_or(0, |r| r.client as usize) % n
    }

    fn breaker_instance(&self, slot: u16, request: Handle) -> (usize, usize) {
        let n = self.breakers.get(slot as usize).map_or(1, Vec::len);
        (slot as usize, self.instance(n, request))
    }

    fn budget_instance(&self, slot: u16, request: Handle) -> (usize, usize) {
        let n = self.budgets.get(slot as usize).map_or(1, Vec::len);
        (slot as usize, self.instance(n, request))
    }

    fn throttle_instance(&self, slot: u16, request: Handle) -> (usize, usize) {
        let n = self.throttles.get(slot as usize).map_or(1, Vec::len);
        (slot as usize, self.instance(n, request))
    }

    /// A retry layer's backoff is over: send the next attempt through its inner layer, unless an
    /// enclosing deadline has passed meanwhile (then the retry layer gives up with a timeout).
    fn wake(&mut self, request: Handle, node: u16) {
        if !self.requests.contains(request) {
            return;
        }
        let stack = self.stack;
        let Some(NodeKind::Retry {
            policy,
            slot,
            inner,
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
            let (s, i) = self.budget_instance(*slot, request);
            if let Some(Frame::Retry { mut state, .. }) =
                self.frame_mut(request, node).map(std::mem::take)
            {
                policy.abandon(&mut state, now, &mut self.budgets[s][i]);
            }
            self.m.at(self.now).timeouts += 1;
            self.answer(request, node, Answer::new(AnswerKind::Timeout, node));
            return;
        }
        self.invoke(request, *inner, enclosing.min(attempt_deadline));
    }

    fn note_transition(&mut self, t: Option<Transition>) {
        if let Some(t) = t {
            self.m.breaker_transitions += 1;
            let open = |s: State| matches!(s, State::Open | State::ForcedOpen);
            if open(t.to) && !open(t.from) {
                self.m.breakers_open += 1;
            } else if open(t.from) && !open(t.to) {
                self.m.breakers_open = self.m.breakers_open.saturating_sub(1);
            }
        }
    }

    /// Starts node `node` for `request`; `deadline` (ns) is the nearest enclosing deadline.
    fn invoke(&mut self, request: Handle, node: u16, deadline: u64) {
        let stack = self.stack;
        let Some(n) = stack.nodes.get(node as usize) else {
            return;
        };
        match &n.kind {
            NodeKind::Call { ds, timeout } => {
                if deadline <= self.now {
                    // An enclosing deadline has already passed: the call is not sent.
                    self.m.at(self.now).timeouts += 1;
                    self.answer(request, node, Answer::new(AnswerKind::Timeout, node));
                    return;
                }
                let Some(r) = self.requests.get_mut(request) else {
                    return;
                };
                let first = r.attempts == 0;
                r.attempts += 1;
                let b = self.m.at(self.now);
                b.attempts += 1;
                if !first {
                    b.retries += 1;
                }
                let attempt = self.attempts.insert(Attempt { request, node });
                let d = self.hop(*ds, true);
                self.q.push(
                    self.now.saturating_add(d),
                    EventKind::AtDownstream { ds: *ds, attempt },
                );
                // The attempt's timer: its own timeout or the nearest enclosing deadline, whichever
                // comes first. A timer of a fixed length armed now goes to that length's FIFO lane.
                let own = timeout.map_or(u64::MAX, |t| self.now.saturating_add(t.as_nanos()));
                let fire = own.min(deadline);
                if fire != u64::MAX {
                    let len = Duration::from_nanos(fire - self.now);
                    let event = EventKind::Timeout { attempt };
                    match stack.timeouts.iter().position(|t| *t == len) {
                        Some(i) => self.q.push_lane(self.lanes[i], fire, event),
                        None => self.q.push(fire, event),
                    }
                }
            }
            NodeKind::Breaker { slot, inner, .. } => {
                let (s, i) = self.breaker_instance(*slot, request);
                let now = Instant::from_nanos(self.now);
                let decision = self.breakers[s][i].try_acquire(now);
                match decision {
                    Ok(permit) => {
                        self.note_transition(permit.transition());
                        if let Some(f) = self.frame_mut(request, node) {
                            *f = Frame::Permit(permit);
                        }
                        self.invoke(request, *inner, deadline);
                    }
                    Err(rejection) => {
                        self.note_transition(rejection.transition);
                        self.m.at(self.now).local_rejections += 1;
                        let mut a = Answer::new(AnswerKind::Rejected, node);
                        a.retry_after = rejection.retry_after().unwrap_or(Duration::ZERO);
                        self.answer(request, node, a);
                    }
                }
            }
            NodeKind::Retry {
                policy,
                slot,
                inner,
                ..
            } => {
                let (s, i) = self.budget_instance(*slot, request);
                let now = Instant::from_nanos(self.now);
                let state = policy.start(now, &mut self.budgets[s][i]);
                let inner_deadline = deadline.min(policy.attempt_deadline(&state, now).as_nanos());
                if let Some(f) = self.frame_mut(request, node) {
                    *f = Frame::Retry { state, deadline };
                }
                self.invoke(request, *inner, inner_deadline);
            }
            NodeKind::Throttle { slot, inner, .. } => {
                let (s, i) = self.throttle_instance(*slot, request);
                let sample = self.client_rng.next_u64();
                let now = Instant::from_nanos(self.now);
                match self.throttles[s][i].try_acquire_with(now, sample) {
                    Ok(()) => self.invoke(request, *inner, deadline),
                    Err(_) => {
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
        }
    }

    /// Node `from` produced `ans` for `request`: hand it up through the parents.
    fn answer(&mut self, request: Handle, from: u16, ans: Answer) {
        let stack = self.stack;
        let mut child = from;
        loop {
            let parent = stack.nodes[child as usize].parent;
            if parent == NONE {
                self.finish_request(request, ans);
                return;
            }
            match &stack.nodes[parent as usize].kind {
                NodeKind::Breaker { slot, .. } => {
                    let frame = self
                        .frame_mut(request, parent)
                        .map(std::mem::take)
                        .unwrap_or_default();
                    if let Frame::Permit(permit) = frame {
                        let outcome = match ans.kind {
                            AnswerKind::Ok => Outcome::Success,
                            AnswerKind::Error
                            | AnswerKind::Unavailable
                            | AnswerKind::Timeout
                            | AnswerKind::Throttled
                            | AnswerKind::Conflict => Outcome::Failure,
                            // Says nothing about the downstream's health.
                            AnswerKind::Fatal | AnswerKind::Rejected => Outcome::Ignored,
                        };
                        let (s, i) = self.breaker_instance(*slot, request);
                        let t = self.breakers[s][i].record(
                            permit,
                            outcome,
                            Instant::from_nanos(self.now),
                        );
                        self.note_transition(t);
                    }
                }
                NodeKind::Retry { policy, slot, .. } => {
                    let (s, i) = self.budget_instance(*slot, request);
                    let now = Instant::from_nanos(self.now);
                    let Some(Frame::Retry {
                        mut state,
                        deadline,
                    }) = self.frame_mut(request, parent).map(std::mem::take)
                    else {
                        child = parent;
                        continue;
                    };
                    let budget = &mut self.budgets[s][i];
                    if ans.kind.is_ok() {
                        policy.on_success(&mut state, now, budget);
                    } else {
                        let class = ans.kind.error_class(ans.retry_after);
                        match policy.on_failure(
                            &mut state,
                            class,
                            now,
                            budget,
                            self.client_rng.rng(),
                        ) {
                            RetryDecision::RetryAt(at) => {
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
                            RetryDecision::GiveUp(reason) => self.m.give_up(reason),
                        }
                    }
                }
                NodeKind::Throttle { slot, .. } => {
                    let (s, i) = self.throttle_instance(*slot, request);
                    let now = Instant::from_nanos(self.now);
                    self.throttles[s][i].record(now, ans.kind.accepted());
                }
                NodeKind::Fallback { children } => {
                    let (index, deadline) = match self.frame_mut(request, parent) {
                        Some(Frame::Fallback { index, deadline }) => (*index, *deadline),
                        _ => (0, u64::MAX),
                    };
                    let next = index as usize + 1;
                    if !ans.kind.is_ok() && next < children.len() {
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
                NodeKind::Call { .. } => {}
            }
            child = parent;
        }
    }

    fn finish_request(&mut self, request: Handle, ans: Answer) {
        let Some(r) = self.requests.get(request).copied() else {
            return;
        };
        self.requests.remove(request);
        let ok = ans.kind.is_ok();
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

    // ----- downstreams -----

    /// A network delay to (`to_ds`) or from downstream `ds`.
    #[inline]
    fn hop(&mut self, ds: u16, to_ds: bool) -> u64 {
        let i = ds as usize;
        let (req, resp) = &self.net[i];
        let s = if to_ds { req } else { resp };
        if s.is_zero() {
            0
        } else {
            s.sample(self.net_rng[i].rng())
        }
    }

    fn send_reply(&mut self, ds: u16, attempt: Handle, reply: Reply, hint: u16) {
        if !self.attempts.contains(attempt) {
            self.m.late_replies += 1;
            return;
        }
        let d = self.hop(ds, false);
        self.q.push(
            self.now.saturating_add(d),
            EventKind::Reply {
                attempt,
                reply,
                hint,
            },
        );
    }

    fn at_downstream(&mut self, ds: u16, attempt: Handle) {
        let now = self.now;
        self.m.server_arrival(now, ds);
        let i = ds as usize;
        let tl = &self.c.timeline;
        let cond = if tl.has_faults(i) {
            Some(tl.on_arrival(i, now))
        } else {
            None
        };
        if let Some(c) = cond {
            match c.outage {
                Some(OutageMode::FailFast) => {
                    self.m.answered(now, ds, false, true);
                    self.send_reply(ds, attempt, Reply::Unavailable, 0);
                    return;
                }
                Some(OutageMode::Hang) => {
                    self.m.ds[i].hung += 1;
                    return;
                }
                None => {}
            }
            if let Some((share, fault)) = c.throttle
                && self.fault_rng.chance(share)
            {
                self.m.answered(now, ds, false, true);
                self.send_reply(ds, attempt, Reply::Throttled, fault);
                return;
            }
        }
        match &mut self.ds[i] {
            Ds::Server(server) => {
                let (lost, factor) = if cond.is_some() {
                    (tl.capacity_lost(i, now), tl.latency_factor(i, now))
                } else {
                    (0.0, 1.0)
                };
                match server.arrive(Job { attempt }, lost, factor) {
                    Admission::Started(s) => self.start_service(ds, s),
                    Admission::Queued => {}
                    Admission::Rejected => {
                        self.m.answered(now, ds, false, true);
                        self.send_reply(ds, attempt, Reply::Unavailable, 0);
                    }
                }
            }
            Ds::Register(r) => {
                if self.attempts.contains(attempt) {
                    let version = r.read();
                    let d = self.hop(ds, false);
                    self.q.push(
                        now.saturating_add(d),
                        EventKind::RegisterRead {
                            ds,
                            attempt,
                            version,
                        },
                    );
                }
            }
            Ds::Scripted(s) => {
                let answer = s.call();
                let latency = s.latency_ns;
                let (reply, hint) = match answer {
                    ScriptAnswer::Ok => (Reply::Ok, 0),
                    ScriptAnswer::Error => (Reply::Error, 0),
                    ScriptAnswer::Fatal => (Reply::Fatal, 0),
                    ScriptAnswer::Throttled(h) => (Reply::Throttled, self.c.hint_index(h)),
                    ScriptAnswer::Hang => {
                        self.m.ds[i].hung += 1;
                        return;
                    }
                };
                self.m.answered(now, ds, reply == Reply::Ok, false);
                if !self.attempts.contains(attempt) {
                    self.m.late_replies += 1;
                    return;
                }
                let d = latency.saturating_add(self.hop(ds, false));
                self.q.push(
                    now.saturating_add(d),
                    EventKind::Reply {
                        attempt,
                        reply,
                        hint,
                    },
                );
            }
        }
    }

    fn start_service(&mut self, ds: u16, s: Started) {
        let work_us = (s.work_ns / 1_000).min(u64::from(u32::MAX)) as u32;
        self.q.push(
            self.now.saturating_add(s.work_ns),
            EventKind::ServiceDone {
                ds,
                attempt: s.job.attempt,
                work_us,
            },
        );
    }

    fn service_done(&mut self, ds: u16, attempt: Handle, work_us: u32) {
        let now = self.now;
        let i = ds as usize;
        let live = self.attempts.contains(attempt);
        self.m.completion(now, ds, u64::from(work_us), !live);
        let fault_rate = self.c.timeline.error_rate(i, now);
        let Ds::Server(server) = &mut self.ds[i] else {
            return;
        };
        server.finish();
        let p = 1.0 - (1.0 - server.error_rate) * (1.0 - fault_rate);
        let failed = server.rng.chance(p);
        self.m.answered(now, ds, !failed, false);
        let reply = if failed { Reply::Error } else { Reply::Ok };
        self.send_reply(ds, attempt, reply, 0);
        self.drain_server(ds);
    }

    /// Starts waiting jobs on `ds` while workers are free.
    fn drain_server(&mut self, ds: u16) {
        let i = ds as usize;
        let now = self.now;
        let tl = &self.c.timeline;
        let (lost, factor) = if tl.has_faults(i) {
            (tl.capacity_lost(i, now), tl.latency_factor(i, now))
        } else {
            (0.0, 1.0)
        };
        loop {
            let attempts = &self.attempts;
            let Some(Ds::Server(server)) = self.ds.get_mut(i) else {
                return;
            };
            match server.next(lost, factor, |h| attempts.contains(h)) {
                Some(s) => self.start_service(ds, s),
                None => return,
            }
        }
    }

    fn reply(&mut self, attempt: Handle, reply: Reply, hint: u16) {
        let Some(a) = self.attempts.get(attempt).copied() else {
            self.m.late_replies += 1;
            return;
        };
        self.attempts.remove(attempt);
        let kind = match reply {
            Reply::Ok => AnswerKind::Ok,
            Reply::Error => AnswerKind::Error,
            Reply::Unavailable => AnswerKind::Unavailable,
            Reply::Throttled => AnswerKind::Throttled,
            Reply::Fatal => AnswerKind::Fatal,
            Reply::Conflict => AnswerKind::Conflict,
        };
        let mut ans = Answer::new(kind, a.node);
        if reply == Reply::Throttled {
            ans.retry_after = self.c.hints.get(hint as usize).copied().unwrap_or_default();
        }
        self.answer(a.request, a.node, ans);
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
        assert_eq!(sizes, (32, 40, 20, 32));
        // The default scenario's deepest stack (retry over breaker over call) has 2 frames.
        assert!(bytes_per_request(2) <= 256);
    }
}

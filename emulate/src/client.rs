//! The clients: each policy loaded by `reliable::policy` (the loader a user's program runs) into
//! reliable's `ReliableLayer`, one per route, over a real HTTP/2 client; one stack per client of
//! the workload. The emulator does not read the policy format itself: what it keeps is its I/O.
//!
//! - A policy's stack becomes a [`Plan`] ([`Plan::new`]): one [`Route`] per fallback branch, each
//!   built by [`Route::layer`], which runs every nesting as the core's call engine (and so the
//!   simulator) runs it; several routes are tried in order through reliable's `FallbackLayer`.
//!   What the loader refuses (a `Fallback` inside a layer, two retries on one route, a route
//!   mixing `Shared` and `PerClient` layers, a hedge of a call not marked idempotent, ...) is
//!   refused here with its message. `Route::layer` shares one instance for every client when
//!   the route's layers are `Shared` ([`ReliableLayer::is_shared`]), else each client gets its
//!   own, seeded per client ([`ReliableLayer::seed_each`]).
//! - Every instance reads answers with the stock [`HttpPolicy`], as a user's service would: the
//!   core's one table decides what a 500, 503 or 429 means.
//! - [`HttpCall`] is what each attempt (each hedged copy) reaches: it counts the attempt per
//!   bucket as `sim` counts it, picks the replica of a replicated downstream
//!   ([`crate::balance`]), sends the attempt's deadline as a `grpc-timeout` header (an attempt
//!   whose deadline has already passed is not sent), and fails with [`TimedOut`] at the
//!   deadline the engine put on the request ([`Deadline`]) or at the call's own timeout drawn
//!   per request (`timeout_dist`, the one field the loader leaves to the simulator: the
//!   emulator draws it here as `sim` keys it), so the layers above count the timeout as a
//!   failure, as in `sim`. Dropping it resets the HTTP/2 stream (the server sees the client give
//!   up). A service's calls ([`build_stack`]) are not counted among the edge's attempts, only in
//!   their downstream's per-hop figures, as in `sim`.
//! - Below it, per downstream (per replica), the faults a client sees (outage, partition, error
//!   rate, throttle) are played by reliable's chaos [`TimelineLayer`] from the scenario's
//!   `faults` ([`Chaos`]); under it the transport sends the request and rewrites the server's
//!   delay (`retry-after-ms`, wall time) into scenario time, the time base every layer runs on.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::Empty;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use reliable::chaos::tower::{HttpAnswers, TimelineLayer};
use reliable::chaos::{ChaosEvent, ChaosSwitch, ClientFault, ScenarioFaults};
use reliable::observer::{NotSent, Observer};
use reliable::policy::{Plan, Route};
use reliable::tower::{BoxError, Deadline, FallbackLayer, HttpPolicy, ReliableLayer, TimedOut};
use reliable_core::answer::Answer;
use reliable_core::chaos::{ChaosConfig, Strategy};
use tower::util::{BoxCloneService, BoxCloneSyncService};
use tower::{Layer as _, Service, ServiceExt as _};

use crate::balance::{Balancers, Group, Tried};
use crate::fleet::FleetRun;
use crate::meter::Meter;
use crate::simface::{Compiled, Dist, Layer, Sampler, Stream, StreamId};
use crate::timebase::Timebase;

/// A request through the stacks.
pub type Req = http::Request<Empty<Bytes>>;
/// An answer through the stacks (the body is always empty).
pub type Res = http::Response<()>;
/// A built stack.
pub type Svc = BoxCloneService<Req, Res, BoxError>;
/// What sends an attempt to one downstream (shared by every client's stacks).
type Sender = BoxCloneSyncService<Req, Res, BoxError>;

/// The logical request an attempt belongs to (in the request's extensions, kept by copies).
#[derive(Clone, Debug)]
pub struct Logical {
    /// Its number, from 1.
    pub id: u64,
    /// Attempts sent so far, over every call layer.
    attempts: Arc<AtomicU32>,
    /// The replicas it tried (replicated downstreams).
    tried: Arc<std::sync::Mutex<Tried>>,
}

impl Logical {
    /// A new logical request.
    pub fn new(id: u64) -> Self {
        Logical {
            id,
            attempts: Arc::new(AtomicU32::new(0)),
            tried: Arc::default(),
        }
    }
}

/// Every instance's classification and request copies: the stock HTTP policy (GETs are
/// idempotent).
fn policy() -> HttpPolicy {
    HttpPolicy::new()
}

/// The HTTP client every stack shares: one HTTP/2 connection to the downstream server.
pub fn http_client() -> Client<HttpConnector, Empty<Bytes>> {
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    Client::builder(TokioExecutor::new())
        .http2_only(true)
        .build(connector)
}

/// The transport: sends a request to one listener and rewrites the server's delay into
/// scenario time.
#[derive(Clone)]
struct Transport {
    client: Client<HttpConnector, Empty<Bytes>>,
    uri: http::Uri,
    tb: Timebase,
}

impl Service<Req> for Transport {
    type Response = Res;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Res, BoxError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut req: Req) -> Self::Future {
        *req.uri_mut() = self.uri.clone();
        let fut = self.client.request(req);
        let tb = self.tb;
        Box::pin(async move {
            let (mut parts, _body) = fut.await.map_err(|e| Box::new(e) as BoxError)?.into_parts();
            to_scenario_time(&mut parts.headers, tb);
            Ok(http::Response::from_parts(parts, ()))
        })
    }
}

/// The client-visible faults of a run, per downstream (per replica): a chaos [`TimelineLayer`]
/// each downstream's calls pass, on the run's time base from its start.
///
/// Played here, as a client sees them, with the simulator's meaning (`reliable_core::chaos`):
/// `Outage` (a 503 at once, or no answer), `Partition` (held until it heals), `ErrorRate` (a
/// success turned into a 500) and `Throttle` (a share refused with 429 and the hint). Played by
/// the server instead ([`crate::server`]), because only the server can make them:
/// `CapacityLoss` (fewer workers), `LatencyInflation` (in `sim` it stretches each job's service
/// time, so workers stay busy longer and the queue grows: a client-side stretch of each answer
/// would leave the server's capacity as it was, which changes every verdict that turns on the
/// server's backlog), and `LoadSpike` (the arrivals themselves). The emulator's README lists
/// them with the reasons.
#[derive(Clone, Default)]
pub struct Chaos(Arc<Vec<Option<TimelineLayer<HttpAnswers>>>>);

impl std::fmt::Debug for Chaos {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Chaos")
            .field(&self.0.iter().filter(|t| t.is_some()).count())
            .finish()
    }
}

impl Chaos {
    /// The client-visible faults of `c` (split by `reliable::chaos`), one timeline per
    /// downstream that has any, its draws seeded from `seed`, counted in `meter` as `sim`
    /// counts them (an outage's or a throttle's answer is an arrival the server refused).
    pub fn new(c: &Compiled, seed: u64, meter: &Arc<Meter>) -> Result<Chaos, String> {
        let tb = *meter.timebase();
        let mut out = Vec::new();
        for (i, d) in c.scenario.downstreams.iter().enumerate() {
            let mut faults = ScenarioFaults::from_faults(&c.scenario.faults, &d.name)?;
            // The server stretches service times itself (see the type's docs).
            faults
                .client
                .retain(|w| !matches!(w.fault, ClientFault::LatencyInflation { .. }));
            if faults.client.is_empty() {
                out.push(None);
                continue;
            }
            let counts = ChaosSwitch::builder(&d.name, ChaosConfig::OFF)
                .observer(Refusals {
                    meter: meter.clone(),
                    ds: i as u16,
                })
                .build()
                .map_err(|e| e.to_string())?;
            let seed = reliable_core::sample::splitmix64(seed ^ (0xC4A0_5000 + i as u64));
            let layer = TimelineLayer::new(
                faults.client,
                seed,
                reliable_core::Instant::from_nanos(0),
                tb,
                tb,
                HttpAnswers,
            )
            .map_err(|e| format!("downstream \"{}\": {e}", d.name))?
            .report_to(counts);
            out.push(Some(layer));
        }
        Ok(Chaos(Arc::new(out)))
    }

    /// The service that sends to downstream `ds` at `uri`: through its timeline, if it has one.
    fn sender(&self, ds: usize, transport: Transport) -> Sender {
        match self.0.get(ds).and_then(Option::as_ref) {
            Some(timeline) => BoxCloneSyncService::new(timeline.layer(transport)),
            None => BoxCloneSyncService::new(transport),
        }
    }
}

/// Counts what a chaos timeline did in the server's and the network's place as `sim` counts it:
/// an arrival refused (an outage's 503, a throttle's 429) or swallowed (a hanging outage), and
/// a call or an answer held by a partition (the only delay the timeline plays here: latency
/// inflation is the server's).
#[derive(Debug)]
struct Refusals {
    meter: Arc<Meter>,
    ds: u16,
}

impl Observer for Refusals {
    fn on_chaos(&self, _: &str, event: &ChaosEvent) {
        let ds = self.ds;
        if event.strategy == Strategy::Latency {
            self.meter.at(|r, _| {
                if let Some(d) = r.ds.get_mut(usize::from(ds)) {
                    d.held += 1;
                }
            });
            return;
        }
        if event.strategy != Strategy::Fault {
            return;
        }
        match event.answer {
            Some(Answer::Status {
                status: 503 | 429, ..
            }) => self.meter.at(|r, t| {
                r.server_arrival(t, ds);
                r.answered(t, ds, false, true);
            }),
            Some(Answer::Timeout) => self.meter.at(|r, t| {
                r.server_arrival(t, ds);
                if let Some(d) = r.ds.get_mut(usize::from(ds)) {
                    d.hung += 1;
                }
            }),
            _ => {}
        }
    }
}

/// What each attempt of a route reaches (see the [module docs](self)).
#[derive(Clone)]
pub struct HttpCall {
    /// The call's timeout drawn per request (`timeout_dist`) and the `Call`'s node number, its
    /// draws' key as `sim` keys them.
    timeout_dist: Option<(Arc<Sampler>, u16)>,
    seed: u64,
    meter: Arc<Meter>,
    /// Per replica (one for a downstream without replicas): its downstream index and sender.
    targets: Arc<Vec<(usize, Sender)>>,
    /// A replicated downstream's balancer.
    group: Option<Arc<Group>>,
    /// An edge attempt (counted among the run's attempts), not a service's call.
    edge: bool,
    /// The client instance this copy sends for, with the run's fleet (its own faults), if any.
    client: Option<(u32, Arc<FleetRun>)>,
}

impl std::fmt::Debug for HttpCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpCall")
            .field("targets", &self.targets.len())
            .finish()
    }
}

/// Ends an attempt as `sim` does, with its latency since `sent` (recovery judges it): answered
/// (`done`), or without an answer, counted as a timeout (timed out here, or dropped by a layer
/// above). In a call graph every attempt also counts for its downstream's figures; only the
/// edge's count among the run's attempts and timeouts.
struct Pending {
    meter: Arc<Meter>,
    sent: u64,
    done: bool,
    ds: usize,
    edge: bool,
    /// Outstanding at this replica of this group until it ends.
    replica: Option<(Arc<Group>, usize)>,
}

impl Drop for Pending {
    fn drop(&mut self) {
        if let Some((g, k)) = self.replica.take() {
            g.gone(k);
        }
        let (sent, done, ds, edge) = (self.sent, self.done, self.ds, self.edge);
        self.meter.at(|r, t| {
            let latency = t.saturating_sub(sent);
            if let Some(h) = &mut r.hops
                && let Some(e) = h.ended.get_mut(ds)
            {
                e.0 += 1;
                e.1 += latency / 1_000;
            }
            if edge {
                if !done {
                    r.at(t).timeouts += 1;
                }
                r.attempt_ended(t, latency);
            }
        });
    }
}

impl Service<Req> for HttpCall {
    type Response = Res;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Res, BoxError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Req) -> Self::Future {
        let meter = self.meter.clone();
        let tb = *meter.timebase();
        let now = tb.now_ns();
        let logical = req.extensions().get::<Logical>().cloned();
        // The same draw for every attempt of a request, as `sim` keys it.
        let own = match (&self.timeout_dist, &logical) {
            (Some((d, node)), Some(l)) => Some(d.sample(&mut Stream::keyed(
                self.seed,
                StreamId::Timeouts,
                (l.id << 16) ^ u64::from(*node),
            ))),
            _ => None,
        };
        let mut deadline = own.map_or(u64::MAX, |t| now.saturating_add(t));
        if let Some(Deadline(d)) = req.extensions().get::<Deadline>() {
            deadline = deadline.min(d.as_nanos());
        }
        if deadline <= now {
            // An enclosing deadline has already passed: the call is not sent (as in `sim`).
            meter.at(|r, t| r.at(t).timeouts += 1);
            return Box::pin(async { Err(Box::new(TimedOut) as BoxError) });
        }
        if let Some((client, fleet)) = &self.client
            && fleet.network_down(*client, now)
        {
            // The client's own network is down: the call fails at once, unsent (as in `sim`).
            return Box::pin(async { Err("the client's own network is down".into()) });
        }
        let first = logical
            .as_ref()
            .is_none_or(|l| l.attempts.fetch_add(1, Ordering::Relaxed) == 0);
        // Counted as `sim` counts it: per bucket, and sent before, during or after the fault.
        if self.edge {
            meter.at(|r, t| r.sent(t, first));
        }
        // A replicated downstream: the balancer picks the replica.
        let k = match &self.group {
            None => 0,
            Some(g) => match &logical {
                Some(l) => g.pick(
                    &mut l.tried.lock().unwrap_or_else(|e| e.into_inner()),
                    first,
                ),
                None => g.pick(&mut Tried::default(), first),
            },
        };
        let Some((ds, sender)) = self.targets.get(k).or(self.targets.first()).cloned() else {
            return Box::pin(async { Err("no downstream to call".into()) });
        };
        let replica = self.group.as_ref().map(|g| (g.clone(), k));
        let mut out = http::Request::new(Empty::new());
        if deadline != u64::MAX {
            // The remaining time travels with the call, in wall time, as gRPC sends it.
            let left = crate::graph::grpc_timeout(tb.to_wall(deadline - now));
            if let Ok(v) = http::HeaderValue::from_str(&left) {
                out.headers_mut().insert("grpc-timeout", v);
            }
        }
        let fut = sender.oneshot(out);
        let edge = self.edge;
        Box::pin(async move {
            let mut pending = Pending {
                meter,
                sent: now,
                done: false,
                ds,
                edge,
                replica,
            };
            // tokio's timeout polls the call first: an answer ready at the deadline wins.
            let answer = if deadline == u64::MAX {
                Some(fut.await)
            } else {
                tokio::time::timeout_at(tb.wall(deadline), fut).await.ok()
            };
            match answer {
                Some(answer) => {
                    pending.done = true;
                    answer
                }
                // `pending` counts the timeout as it drops.
                None => Err(Box::new(TimedOut) as BoxError),
            }
        })
    }
}

/// Rewrites the server's delay (wall time) into scenario time, the layers' time base: only
/// `retry-after-ms` is kept, at the precision the server wrote.
fn to_scenario_time(headers: &mut http::HeaderMap, tb: Timebase) {
    let wall = HttpPolicy::retry_after(headers);
    headers.remove(http::header::RETRY_AFTER);
    headers.remove("retry-after-ms");
    if let Some(d) = wall {
        let v = tb.to_virtual(d);
        if let Ok(value) = http::HeaderValue::from_str(&format!("{:.6}", v as f64 / 1e6)) {
            headers.insert("retry-after-ms", value);
        }
    }
}

/// The service just inside an instance with a concurrency limit: counts the attempts it
/// admitted while they are in flight (`sim`'s admitted concurrency).
#[derive(Clone)]
struct Admitted {
    inner: Svc,
    meter: Arc<Meter>,
}

/// One admitted call in flight; it ends when dropped (answered, failed or cancelled).
struct InFlight(Arc<Meter>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.admitted(false);
    }
}

impl Service<Req> for Admitted {
    type Response = Res;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Res, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Req) -> Self::Future {
        self.meter.admitted(true);
        let in_flight = InFlight(self.meter.clone());
        let fut = self.inner.call(req);
        Box::pin(async move {
            let _in_flight = in_flight;
            fut.await
        })
    }
}

/// What every stack of one run shares.
#[derive(Clone)]
pub struct Env {
    /// The HTTP client.
    pub client: Client<HttpConnector, Empty<Bytes>>,
    /// Per downstream, `http://127.0.0.1:port` of its listener.
    pub bases: Arc<Vec<String>>,
    /// The run's measurements.
    pub meter: Arc<Meter>,
    /// The run's seed.
    pub seed: u64,
    /// Stacks of the edge (the workload's clients), whose attempts the run counts; `false` for
    /// a service's calls in a call graph.
    pub edge: bool,
    /// The run's balancers over replicated downstreams.
    pub balancers: Arc<Balancers>,
    /// The run's client-visible faults.
    pub chaos: Chaos,
    /// The run's stores and client instances' own faults, if the scenario has any.
    pub fleet: Option<Arc<FleetRun>>,
}

impl std::fmt::Debug for Env {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Env")
            .field("bases", &self.bases)
            .field("edge", &self.edge)
            .finish()
    }
}

/// Counts what the instances report, as `sim` counts it: breaker transitions and open breakers,
/// local refusals (a limiter's also as a limit refusal), give-ups by reason, and hedges sent,
/// won, refused by the ledger and cancelled.
#[derive(Debug)]
struct Counts(Arc<Meter>);

impl Observer for Counts {
    fn on_transition(&self, _: &str, t: reliable_core::breaker::Transition) {
        use reliable_core::breaker::State;
        let open = |s: State| matches!(s, State::Open | State::ForcedOpen);
        self.0.at(|r, _| {
            r.breaker_transitions += 1;
            if open(t.to) && !open(t.from) {
                r.breakers_open += 1;
            } else if open(t.from) && !open(t.to) {
                r.breakers_open = r.breakers_open.saturating_sub(1);
            }
        });
    }

    fn on_reject(&self, _: &str, refusal: NotSent) {
        let limit = matches!(
            refusal,
            NotSent::Rejected(
                reliable::ShedReason::Limit { .. } | reliable::ShedReason::RateLimited { .. }
            )
        );
        self.0.at(|r, t| {
            r.at(t).local_rejections += 1;
            if let (true, Some(e)) = (limit, &mut r.extra) {
                e.limit_refusals += 1;
            }
        });
    }

    fn on_hedge(&self, _: &str, _: u32) {
        self.0.extra(|e| e.hedges_sent += 1);
    }

    fn on_hedge_refused(&self, _: &str, _: NotSent) {
        self.0.extra(|e| e.hedges_refused += 1);
    }

    fn on_hedge_won(&self, _: &str, _: u32, hedge: bool) {
        if hedge {
            self.0.extra(|e| e.hedges_won += 1);
        }
    }

    fn on_attempt_cancelled(&self, _: &str, _: u32) {
        self.0.extra(|e| e.copies_cancelled += 1);
    }

    fn on_give_up(&self, _: &str, _: u32, reason: &'static str) {
        self.0.at(|r, _| crate::simface::give_up(r, reason));
    }
}

/// One route of a policy, ready to build a client's service.
struct RouteStack {
    layer: ReliableLayer<HttpPolicy>,
    /// A route with a `Fleet` scope, with its seed: each client instance gets its own layer
    /// from it, its own fleet state over its own handle on the stores, as a process of the fleet.
    fleet: Option<(Route, u64)>,
    call: HttpCall,
    /// The route has a concurrency limit (its admitted attempts are counted).
    limited: bool,
    /// The route has a ledger (its draws are reported).
    ledger: bool,
    /// Its one shared instance was handed to the meter.
    registered: AtomicBool,
}

/// A policy's stack, loaded by `reliable::policy`: its routes in the order a fallback tries
/// them.
struct Stack(Vec<RouteStack>);

/// A stack as the loader reads it, and what only the emulator reads of it: each `Call`'s
/// `timeout_dist` (simulator only for a real client: a timeout drawn per request models a crowd
/// of callers; the emulator's transport draws it) with its node number, in route order.
fn strip(
    l: &mut Layer,
    next: &mut u16,
    calls: &mut Vec<(Option<Dist>, u16)>,
) -> Result<(), String> {
    let node = *next;
    *next = next.saturating_add(1);
    match l {
        Layer::Llm { .. } => {
            return Err(
                "the Llm layer cannot be emulated: the emulator's server implements the Server model only, not an LLM provider".into(),
            );
        }
        Layer::Call { timeout_dist, .. } => calls.push((timeout_dist.take(), node)),
        _ => {}
    }
    for inner in l.inner_mut() {
        strip(inner, next, calls)?;
    }
    Ok(())
}

impl Stack {
    fn new(c: &Compiled, name: &str, stack: &Layer, env: &Env) -> Result<Stack, String> {
        let mut stripped = stack.clone();
        let mut calls = Vec::new();
        strip(&mut stripped, &mut 0, &mut calls)?;
        let entry = reliable_core::policy::Policy {
            name: name.to_string(),
            stack: stripped,
        };
        let plan = Plan::new(&entry, &c.scenario.name).map_err(|e| e.to_string())?;
        if plan.routes.len() != calls.len() {
            return Err(format!(
                "{} calls for {} routes: expected one call per route",
                calls.len(),
                plan.routes.len()
            ));
        }
        let tb = *env.meter.timebase();
        let routes = plan
            .routes
            .iter()
            .zip(calls)
            .enumerate()
            .map(|(i, (route, (dist, node)))| {
                let seed = reliable_core::sample::splitmix64(env.seed ^ ((i as u64) << 24));
                let (layer, fleet) = match &env.fleet {
                    Some(run) if route.is_fleet() => {
                        // Built here once to refuse what the loader refuses before the run.
                        let layer = fleet_layer(route, &run.stores_for(0), env, seed)?;
                        (layer, Some((route.clone(), seed)))
                    }
                    _ => (
                        route
                            .layer(policy())
                            .map_err(|e| e.to_string())?
                            .with_time(tb, tb)
                            .observer(Counts(env.meter.clone()))
                            .seed_each(seed),
                        None,
                    ),
                };
                Ok(RouteStack {
                    layer,
                    fleet,
                    call: http_call(c, route, dist, node, env)?,
                    limited: route.limit.is_some(),
                    ledger: route.ledger.is_some(),
                    registered: AtomicBool::new(false),
                })
            })
            .collect::<Result<_, String>>()?;
        Ok(Stack(routes))
    }

    /// Client `client`'s service (the shared routes' one instance, or a new one per route; a
    /// fleet route's own, over the client's own handle on the stores).
    fn instance(&self, env: &Env, client: Option<u32>) -> Result<Svc, String> {
        let mut services: Vec<Svc> = self
            .0
            .iter()
            .map(|r| {
                let mut call = r.call.clone();
                call.client = client.zip(env.fleet.clone());
                let call = BoxCloneService::new(call);
                let inner = if r.limited {
                    BoxCloneService::new(Admitted {
                        inner: call,
                        meter: env.meter.clone(),
                    })
                } else {
                    call
                };
                let own = match (&r.fleet, &env.fleet) {
                    (Some((route, seed)), Some(run)) => {
                        let stores = run.stores_for(client.unwrap_or(0));
                        let seed = reliable_core::sample::splitmix64(
                            seed ^ u64::from(client.unwrap_or(0)),
                        );
                        Some(fleet_layer(route, &stores, env, seed)?)
                    }
                    _ => None,
                };
                let svc = own.as_ref().unwrap_or(&r.layer).layer(inner);
                let first = !r.registered.swap(true, Ordering::Relaxed);
                if first || own.is_some() || !r.layer.is_shared() {
                    if r.ledger {
                        env.meter.add_ledger(svc.reliable().clone());
                    }
                    if r.limited {
                        env.meter.add_limiter(svc.reliable().clone());
                    }
                }
                Ok(BoxCloneService::new(svc))
            })
            .collect::<Result<_, String>>()?;
        // Routes tried in order: each later one is the backup of those before it.
        let mut backup = services.pop().unwrap_or_else(|| {
            BoxCloneService::new(tower::service_fn(|_: Req| async {
                Err::<Res, BoxError>("a policy without a route".into())
            }))
        });
        while let Some(primary) = services.pop() {
            backup = BoxCloneService::new(FallbackLayer::new(backup, policy()).layer(primary));
        }
        Ok(backup)
    }
}

/// A fleet route's layer over `stores`, as the loader builds it for a service
/// (`Route::fleet_layer`), on the run's time base, seeded with `seed`.
fn fleet_layer(
    route: &Route,
    stores: &reliable::policy::Stores,
    env: &Env,
    seed: u64,
) -> Result<ReliableLayer<HttpPolicy>, String> {
    let tb = *env.meter.timebase();
    Ok(route
        .fleet_layer(policy(), stores)
        .map_err(|e| e.to_string())?
        .with_time(tb, tb)
        .observer(Counts(env.meter.clone()))
        .seed_each(seed))
}

/// The [`HttpCall`] of `route`: its downstream (or the replicas behind its balancer), each
/// through its chaos timeline.
fn http_call(
    c: &Compiled,
    route: &Route,
    dist: Option<Dist>,
    node: u16,
    env: &Env,
) -> Result<HttpCall, String> {
    let name = &route.downstream;
    let group = env.balancers.get(name).cloned();
    let members = match &group {
        Some(g) => g.members.clone(),
        None => vec![
            crate::simface::downstreams(c)
                .iter()
                .position(|n| n == name)
                .ok_or_else(|| format!("unknown downstream \"{name}\""))?,
        ],
    };
    let targets = members
        .into_iter()
        .map(|ds| {
            let transport = Transport {
                client: env.client.clone(),
                uri: uri_of(env, ds),
                tb: *env.meter.timebase(),
            };
            (ds, env.chaos.sender(ds, transport))
        })
        .collect();
    Ok(HttpCall {
        timeout_dist: dist.map(|d| (Arc::new(Sampler::new(&d)), node)),
        seed: env.seed,
        meter: env.meter.clone(),
        targets: Arc::new(targets),
        group,
        edge: env.edge,
        client: None,
    })
}

/// Where calls to downstream `ds` go: `/{ds}` on its listener.
fn uri_of(env: &Env, ds: usize) -> http::Uri {
    format!(
        "{}/{ds}",
        env.bases
            .get(ds)
            .map_or("http://127.0.0.1:9", String::as_str)
    )
    .parse()
    .unwrap_or_else(|_| http::Uri::from_static("http://127.0.0.1/"))
}

/// One instance of `stack` (a service's call in a call graph: one state for the service).
pub fn build_stack(c: &Compiled, stack: &Layer, env: &Env) -> Result<Svc, String> {
    Stack::new(c, "call", stack, env)?.instance(env, None)
}

/// One stack per client for policy `p`.
pub fn build(c: &Compiled, p: usize, env: &Env) -> Result<Vec<Svc>, String> {
    let policy = &c.scenario.policies[p];
    let stack = Stack::new(c, &policy.name, &policy.stack, env)?;
    (0..crate::simface::clients(c).max(1))
        .map(|client| stack.instance(env, Some(client)))
        .collect()
}

/// Whether a final answer is a success.
pub fn succeeded(answer: &Result<Res, BoxError>) -> bool {
    matches!(answer, Ok(res) if reliable::Classify::<BoxError, _>::ok(&policy(), res).is_none())
}

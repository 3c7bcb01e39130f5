//! The clients: each policy's layer tree built from reliable's tower layers (with the scenario's
//! own core configs) over a real HTTP/2 client, one stack per client of the workload.
//!
//! - Every layer reads answers with the stock [`HttpPolicy`], as a user's service would: the
//!   core's one table decides what a 500, 503 or 429 means and what the adaptive throttle counts
//!   as accepted. The emulator has no classification of its own.
//! - [`HttpCall`] is a `Call` layer: one HTTP request to the downstream, failed with
//!   [`TimedOut`] at its own timeout or at the deadline an enclosing retry layer set, whichever is
//!   sooner, so a breaker between them counts the timeout as a failure, as in `sim`. Dropping it
//!   resets the HTTP/2 stream (the server sees the client give up). The server's delay
//!   (`retry-after-ms`, wall time) is rewritten into scenario time, the time base every layer
//!   runs on, as the transport's only translation.
//! - In a call graph every attempt carries its deadline (its own timeout or the enclosing one,
//!   whichever is sooner) as a `grpc-timeout` header; one whose deadline has already passed is not
//!   sent. A call to a replicated downstream goes to the replica its group's balancer picks
//!   ([`crate::balance`]). A service's calls ([`build_stack`]) are not counted among the edge's
//!   attempts, only in their downstream's per-hop figures, as in `sim`.
//! - [`build`] turns a policy's layer tree into services: shared-scope layers get one state for
//!   every client, per-client ones a state per client, seeded per client (the hedger, the ledger
//!   and the limiters draw no random numbers: they need no seed).
//! - `Hedge` is reliable's [`HedgeLayer`] (copies only for a scenario that says `idempotent`),
//!   `Limit` its [`ConcurrencyLimitLayer`], `RateLimit` its [`RateLimitLayer`], and `Ledger` one [`SharedLedger`] per client or
//!   shared, handed to every hedge and to every retry without a budget of its own inside it. In
//!   `sim` a ledger deposits each request once as it enters; reliable's [`RetryLayer`] deposits
//!   each request entering it, so a ledger is fed by its retry when that retry is its direct
//!   inner layer, and otherwise by a feeder (a retry layer of one attempt: it deposits and never
//!   draws) when nothing inside retries. Other shapes are refused with the reason. A breaker
//!   inside a ledger draws its half-open probes from it ([`BreakerLayer::ledger`]), as in `sim`.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::Empty;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use reliable::observer::{NotSent, Observer};
use reliable::tower::{
    BoxError, BreakerLayer, ClassifyResponse, ConcurrencyLimitLayer, Deadline, FallbackLayer,
    GaveUp, HedgeLayer, HttpPolicy, Policy, RateLimitLayer, RetryLayer, SharedLedger,
    ThrottleLayer, TimedOut,
};
use reliable_core::Instant;
use reliable_core::outcome::ErrorClass;
use tower::util::BoxCloneService;
use tower::{Layer as _, Service, ServiceExt as _};

use crate::balance::{Balancers, Group, Tried};
use crate::meter::Meter;
use crate::simface::{Compiled, Layer, Sampler, Scope, Stream, StreamId};
use crate::timebase::Timebase;

/// A request through the stacks.
pub type Req = http::Request<Empty<Bytes>>;
/// An answer through the stacks (the body is always empty).
pub type Res = http::Response<()>;
/// A built stack.
pub type Svc = BoxCloneService<Req, Res, BoxError>;

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

/// Every layer's classification and request copies: the stock HTTP policy (GETs are
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

/// One call to a downstream (see the [module docs](self)).
#[derive(Clone)]
pub struct HttpCall {
    client: Client<HttpConnector, Empty<Bytes>>,
    uri: http::Uri,
    timeout: Option<u64>,
    timeout_dist: Option<Arc<Sampler>>,
    node: u16,
    seed: u64,
    meter: Arc<Meter>,
    /// The downstream it calls.
    ds: usize,
    /// For a replicated downstream: its balancer and each replica's URI.
    group: Option<(Arc<Group>, Arc<Vec<http::Uri>>)>,
    /// An edge attempt (counted among the run's attempts), not a service's call.
    edge: bool,
}

impl std::fmt::Debug for HttpCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpCall").field("uri", &self.uri).finish()
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
        let own = match (&self.timeout_dist, &logical) {
            // The same draw for every attempt of a request, as `sim` keys it.
            (Some(d), Some(l)) => Some(d.sample(&mut Stream::keyed(
                self.seed,
                StreamId::Timeouts,
                (l.id << 16) ^ u64::from(self.node),
            ))),
            _ => self.timeout,
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
        let first = logical
            .as_ref()
            .is_none_or(|l| l.attempts.fetch_add(1, Ordering::Relaxed) == 0);
        // Counted as `sim` counts it: per bucket, and sent before, during or after the fault.
        if self.edge {
            meter.at(|r, t| r.sent(t, first));
        }
        // A replicated downstream: the balancer picks the replica.
        let (ds, uri, replica) = match &self.group {
            None => (self.ds, self.uri.clone(), None),
            Some((g, uris)) => {
                let mut local = Tried::default();
                let k = match &logical {
                    Some(l) => g.pick(
                        &mut l.tried.lock().unwrap_or_else(|e| e.into_inner()),
                        first,
                    ),
                    None => g.pick(&mut local, first),
                };
                let uri = uris.get(k).cloned().unwrap_or_else(|| self.uri.clone());
                (g.members[k], uri, Some((g.clone(), k)))
            }
        };
        let mut out = http::Request::new(Empty::new());
        *out.uri_mut() = uri;
        if deadline != u64::MAX {
            // The remaining time travels with the call, in wall time, as gRPC sends it.
            let left = crate::graph::grpc_timeout(tb.to_wall(deadline - now));
            if let Ok(v) = http::HeaderValue::from_str(&left) {
                out.headers_mut().insert("grpc-timeout", v);
            }
        }
        let fut = self.client.request(out);
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
                Some(Ok(res)) => {
                    pending.done = true;
                    let (mut parts, _body) = res.into_parts();
                    to_scenario_time(&mut parts.headers, tb);
                    Ok(http::Response::from_parts(parts, ()))
                }
                Some(Err(e)) => {
                    pending.done = true;
                    Err(Box::new(e) as BoxError)
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

/// The HTTP policy of a hedge layer: copies a request only if the scenario calls it
/// idempotent (`sim` hedges only those), and reads answers as every other layer does.
#[derive(Clone, Copy, Debug)]
struct Copies {
    idempotent: bool,
}

impl ClassifyResponse<Res> for Copies {
    fn response(&self, res: &Res) -> Option<ErrorClass> {
        policy().response(res)
    }
}

impl Policy<Req, Res> for Copies {
    fn clone_request(&self, req: &Req) -> Option<Req> {
        self.idempotent
            .then(|| Policy::<Req, Res>::clone_request(&policy(), req))
            .flatten()
    }

    fn set_deadline(&self, req: &mut Req, at: Instant) {
        Policy::<Req, Res>::set_deadline(&policy(), req, at);
    }
}

/// The service just inside a limiter: counts the calls it admitted while they are in flight
/// (`sim`'s admitted concurrency).
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

/// A policy's layer tree with its layers configured (shared-scope state already made).
#[derive(Clone)]
enum Node {
    Call {
        ds: usize,
        /// A replicated downstream's balancer.
        group: Option<Arc<Group>>,
        timeout: Option<u64>,
        timeout_dist: Option<Arc<Sampler>>,
        node: u16,
    },
    /// A layer around `inner`: builds the service from the inner one, the client's seed for
    /// per-client state, and the enclosing ledger; `bool`: the state is shared by every client.
    Wrap(Wrap, bool, Box<Node>),
    Fallback(Vec<Node>),
    /// A ledger of extra attempts: one for every client (`shared`) or one per client made from
    /// `config`; `feed`: a feeder deposits each request entering it (no retry inside does).
    Ledger {
        shared: Option<SharedLedger>,
        config: reliable_core::budget::RatioConfig,
        feed: bool,
        inner: Box<Node>,
    },
}

/// Wraps a service in a configured layer, reseeded for one client when given a seed, drawing
/// from the enclosing ledger's instance for that client, if any.
type Wrap = Arc<dyn Fn(Svc, Option<u64>, Option<&SharedLedger>) -> Svc + Send + Sync>;

/// A layer with state (breaker, budget, throttle): per client or shared by all.
trait Stateful: tower::Layer<Svc> + Clone + Send + Sync + 'static {
    fn seeded(self, seed: u64) -> Self;
    fn one_for_all(self) -> Self;
}

impl Stateful for BreakerLayer<HttpPolicy> {
    fn seeded(self, seed: u64) -> Self {
        self.seed(seed)
    }
    fn one_for_all(self) -> Self {
        self.shared()
    }
}

impl Stateful for RetryLayer<HttpPolicy> {
    fn seeded(self, seed: u64) -> Self {
        self.seed(seed)
    }
    fn one_for_all(self) -> Self {
        self.shared()
    }
}

impl Stateful for ThrottleLayer<HttpPolicy> {
    fn seeded(self, seed: u64) -> Self {
        self.seed(seed)
    }
    fn one_for_all(self) -> Self {
        self.shared()
    }
}

/// `layer` around `inner`: its state made once now (seeded with `seed`) for a shared scope, or
/// per client (seeded per client) when the stacks are built; `draw` gives it the enclosing
/// ledger's instance.
fn stateful<L>(
    layer: L,
    scope: Scope,
    inner: Node,
    seed: u64,
    draw: impl Fn(L, &SharedLedger) -> L + Send + Sync + 'static,
) -> Node
where
    L: Stateful,
    L::Service: Service<Req, Response = Res, Error = BoxError> + Clone + Send + 'static,
    <L::Service as Service<Req>>::Future: Send + 'static,
{
    let shared = scope == Scope::Shared;
    let layer = if shared {
        layer.seeded(seed).one_for_all()
    } else {
        layer
    };
    let f: Wrap = Arc::new(move |svc, seed, ledger| {
        let mut l = match seed {
            Some(s) => layer.clone().seeded(s),
            None => layer.clone(),
        };
        if let Some(ledger) = ledger {
            l = draw(l, ledger);
        }
        BoxCloneService::new(l.layer(svc))
    });
    Node::Wrap(f, shared, Box::new(inner))
}

/// A layer whose state is one for all when `shared`, else made anew per client by `make`:
/// the layers whose clones share their state (the hedger, the limiter).
fn one_or_each<L>(shared: bool, make: impl Fn() -> L) -> impl Fn() -> L
where
    L: Clone,
{
    let one = shared.then(&make);
    move || one.clone().unwrap_or_else(&make)
}

/// Budgetless retry layers drawing from ledger `l` (the innermost ledger enclosing them) in
/// `l`'s subtree, not counting nested ledgers' own.
fn ledger_retries(l: &Layer) -> usize {
    match l {
        Layer::Retry { budget, inner, .. } => usize::from(budget.is_none()) + ledger_retries(inner),
        Layer::Breaker { inner, .. }
        | Layer::Throttle { inner, .. }
        | Layer::Hedge { inner, .. }
        | Layer::Limit { inner, .. }
        | Layer::RateLimit { inner, .. }
        | Layer::Llm { inner, .. } => ledger_retries(inner),
        Layer::Fallback(children) => children.iter().map(ledger_retries).sum(),
        Layer::Ledger { .. } | Layer::Call { .. } => 0,
    }
}

/// Whether a ledger over `inner` is fed by a feeder (`true`) or by its retry (`false`), or why
/// it cannot be emulated.
fn ledger_feed(inner: &Layer) -> Result<bool, String> {
    let direct = matches!(inner, Layer::Retry { budget: None, .. });
    match (direct, ledger_retries(inner)) {
        (_, 0) => Ok(true),
        (true, 1) => Ok(false),
        _ => Err("this Ledger cannot be emulated: `sim` deposits each request once as it enters a ledger, and reliable's RetryLayer deposits each request entering it, so a Retry without a budget inside a Ledger must be its direct inner layer and the only one".into()),
    }
}

/// The feeder of a ledger nothing inside deposits to: a retry layer of one attempt without
/// timeouts, which deposits each request entering it into `ledger` and never draws; an error
/// leaves it as it came (not wrapped as given up), so the layers above read it as `sim` does.
fn feeder(inner: Svc, ledger: &SharedLedger, tb: Timebase) -> Svc {
    let mut config = reliable_core::retry::RetryConfig::reliablekit();
    config.max_attempts = Some(1);
    config.attempt_timeout = None;
    config.deadline = None;
    let Ok(layer) = RetryLayer::new(config, policy()) else {
        unreachable!("one attempt without timeouts is a valid retry config")
    };
    let layer = layer.with_time(tb, tb).ledger(ledger.clone());
    BoxCloneService::new(
        layer
            .layer(inner)
            .map_err(|e: BoxError| match e.downcast::<GaveUp>() {
                Ok(gave_up) => gave_up.last,
                Err(e) => e,
            }),
    )
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
}

impl std::fmt::Debug for Env {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Env")
            .field("bases", &self.bases)
            .field("edge", &self.edge)
            .finish()
    }
}

fn compile(l: &Layer, c: &Compiled, env: &Env, next: &mut u16) -> Result<Node, String> {
    let node = *next;
    *next += 1;
    let tb = *env.meter.timebase();
    let policy = policy();
    let err = |e: reliable_core::ConfigError| e.to_string();
    // The seed of state shared by every client.
    let seed = env.seed ^ u64::from(node);
    Ok(match l {
        Layer::Llm { .. } => {
            return Err(
                "the Llm layer cannot be emulated: the emulator's server implements the Server model only, not an LLM provider".into(),
            );
        }
        Layer::Hedge {
            config,
            idempotent,
            scope,
            inner,
        } => {
            let copies = Copies {
                idempotent: *idempotent,
            };
            let (config, meter) = (*config, env.meter.clone());
            let make = move || {
                let Ok(l) = HedgeLayer::new(config, copies) else {
                    unreachable!("validated when the scenario was compiled")
                };
                l.with_time(tb, tb).observer(Counts(meter.clone()))
            };
            HedgeLayer::new(config, copies).map_err(err)?;
            let shared = *scope == Scope::Shared;
            let layer = one_or_each(shared, make);
            let f: Wrap = Arc::new(move |svc, _, ledger| {
                let l = match ledger {
                    Some(ledger) => layer().ledger(ledger.clone()),
                    None => layer(),
                };
                BoxCloneService::new(l.layer(svc))
            });
            Node::Wrap(f, shared, Box::new(compile(inner, c, env, next)?))
        }
        Layer::Ledger {
            config,
            scope,
            inner,
        } => {
            let ledger = SharedLedger::new(*config).map_err(err)?;
            let shared = (*scope == Scope::Shared).then(|| {
                env.meter.add_ledger(ledger.clone());
                ledger
            });
            Node::Ledger {
                shared,
                config: *config,
                feed: ledger_feed(inner)?,
                inner: Box::new(compile(inner, c, env, next)?),
            }
        }
        Layer::Limit {
            config,
            scope,
            inner,
        } => {
            let (config, meter) = (*config, env.meter.clone());
            let make = move || {
                let Ok(l) = ConcurrencyLimitLayer::new(config, policy) else {
                    unreachable!("validated when the scenario was compiled")
                };
                let l = l.with_time(tb, tb).observer(Counts(meter.clone()));
                meter.add_limiter(l.clone());
                l
            };
            ConcurrencyLimitLayer::new(config, policy).map_err(err)?;
            let shared = *scope == Scope::Shared;
            let layer = one_or_each(shared, make);
            let meter = env.meter.clone();
            let f: Wrap = Arc::new(move |svc, _, _| {
                let admitted = Admitted {
                    inner: svc,
                    meter: meter.clone(),
                };
                BoxCloneService::new(layer().layer(BoxCloneService::new(admitted)))
            });
            Node::Wrap(f, shared, Box::new(compile(inner, c, env, next)?))
        }
        Layer::RateLimit {
            config,
            scope,
            inner,
        } => {
            let (config, meter) = (*config, env.meter.clone());
            let make = move || {
                let Ok(l) = RateLimitLayer::new(config) else {
                    unreachable!("validated when the scenario was compiled")
                };
                l.with_time(tb, tb).observer(Counts(meter.clone()))
            };
            RateLimitLayer::new(config).map_err(err)?;
            let shared = *scope == Scope::Shared;
            let layer = one_or_each(shared, make);
            let f: Wrap = Arc::new(move |svc, _, _| BoxCloneService::new(layer().layer(svc)));
            Node::Wrap(f, shared, Box::new(compile(inner, c, env, next)?))
        }
        Layer::Call {
            downstream,
            timeout,
            timeout_dist,
        } => Node::Call {
            ds: match env.balancers.get(downstream) {
                Some(g) => g.members[0],
                None => crate::simface::downstreams(c)
                    .iter()
                    .position(|n| n == downstream)
                    .ok_or_else(|| format!("unknown downstream \"{downstream}\""))?,
            },
            group: env.balancers.get(downstream).cloned(),
            timeout: timeout.map(|t| t.as_nanos()),
            timeout_dist: timeout_dist.as_ref().map(|d| Arc::new(Sampler::new(d))),
            node,
        },
        Layer::Breaker {
            config,
            scope,
            inner,
        } => {
            let layer = BreakerLayer::new(*config, policy)
                .map_err(err)?
                .with_time(tb, tb)
                .observer(Counts(env.meter.clone()));
            // Its half-open probes draw from the enclosing ledger.
            let draw =
                |l: BreakerLayer<HttpPolicy>, ledger: &SharedLedger| l.ledger(ledger.clone());
            stateful(layer, *scope, compile(inner, c, env, next)?, seed, draw)
        }
        Layer::Retry {
            policy: config,
            budget,
            budget_scope,
            inner,
        } => {
            let mut layer = RetryLayer::new(*config, policy)
                .map_err(err)?
                .with_time(tb, tb)
                .observer(Counts(env.meter.clone()));
            let own = budget.is_some();
            if let Some(b) = budget {
                layer = layer.budget(*b).map_err(err)?;
            }
            // Without a budget of its own, it draws from the enclosing ledger.
            let draw = move |l: RetryLayer<HttpPolicy>, ledger: &SharedLedger| {
                if own { l } else { l.ledger(ledger.clone()) }
            };
            stateful(
                layer,
                *budget_scope,
                compile(inner, c, env, next)?,
                seed,
                draw,
            )
        }
        Layer::Throttle {
            config,
            scope,
            inner,
        } => {
            let layer = ThrottleLayer::new(*config, policy)
                .map_err(err)?
                .with_time(tb, tb)
                .observer(Counts(env.meter.clone()));
            stateful(layer, *scope, compile(inner, c, env, next)?, seed, |l, _| l)
        }
        Layer::Fallback(children) => Node::Fallback(
            children
                .iter()
                .map(|ch| compile(ch, c, env, next))
                .collect::<Result<_, _>>()?,
        ),
    })
}

/// Counts what the layers report, as `sim` counts it: breaker transitions and open breakers,
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

/// A seed for `(client, node)`.
fn seed_for(env: &Env, client: u32, node: usize) -> u64 {
    reliable_core::sample::splitmix64(env.seed ^ (u64::from(client) << 20) ^ node as u64)
}

/// Client `client`'s service for node `n`, `depth` deep, inside ledger instance `ledger`.
fn instantiate(
    n: &Node,
    env: &Env,
    client: u32,
    depth: usize,
    ledger: Option<&SharedLedger>,
) -> Svc {
    match n {
        Node::Call {
            ds,
            group,
            timeout,
            timeout_dist,
            node,
        } => BoxCloneService::new(HttpCall {
            client: env.client.clone(),
            uri: format!(
                "{}/{ds}",
                env.bases
                    .get(*ds)
                    .map_or("http://127.0.0.1:9", String::as_str)
            )
            .parse()
            .unwrap_or_else(|_| http::Uri::from_static("http://127.0.0.1/")),
            timeout: *timeout,
            timeout_dist: timeout_dist.clone(),
            node: *node,
            seed: env.seed,
            meter: env.meter.clone(),
            ds: *ds,
            group: group.as_ref().map(|g| {
                let uris = g.members.iter().map(|&m| uri_of(env, m)).collect();
                (g.clone(), Arc::new(uris))
            }),
            edge: env.edge,
        }),
        Node::Wrap(wrap, shared, inner) => {
            let inner = instantiate(inner, env, client, depth + 1, ledger);
            wrap(
                inner,
                (!shared).then(|| seed_for(env, client, depth)),
                ledger,
            )
        }
        Node::Ledger {
            shared,
            config,
            feed,
            inner,
        } => {
            let own = match shared {
                Some(l) => l.clone(),
                None => {
                    let Ok(l) = SharedLedger::new(*config) else {
                        unreachable!("validated when the stack was compiled")
                    };
                    env.meter.add_ledger(l.clone());
                    l
                }
            };
            let svc = instantiate(inner, env, client, depth + 1, Some(&own));
            if *feed {
                feeder(svc, &own, *env.meter.timebase())
            } else {
                svc
            }
        }
        Node::Fallback(children) => {
            let mut it = children.iter().rev();
            let Some(last) = it.next() else {
                unreachable!("validation refuses an empty fallback")
            };
            let mut backup = instantiate(last, env, client, depth + 1, ledger);
            let policy = policy();
            for ch in it {
                let primary = instantiate(ch, env, client, depth + 1, ledger);
                backup = BoxCloneService::new(FallbackLayer::new(backup, policy).layer(primary));
            }
            backup
        }
    }
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
    let mut next = 0;
    let tree = compile(stack, c, env, &mut next)?;
    Ok(instantiate(&tree, env, 0, 0, None))
}

/// One stack per client for policy `p`.
pub fn build(c: &Compiled, p: usize, env: &Env) -> Result<Vec<Svc>, String> {
    let mut next = 0;
    let tree = compile(&c.scenario.policies[p].stack, c, env, &mut next)?;
    Ok((0..crate::simface::clients(c).max(1))
        .map(|client| instantiate(&tree, env, client, 0, None))
        .collect())
}

/// Whether a final answer is a success.
pub fn succeeded(answer: &Result<Res, BoxError>) -> bool {
    matches!(answer, Ok(res) if policy().response(res).is_none())
}

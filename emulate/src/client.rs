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
//! - [`build`] turns a policy's layer tree into services: shared-scope layers get one state for
//!   every client, per-client ones a state per client, seeded per client.

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
    BoxError, BreakerLayer, ClassifyResponse, Deadline, FallbackLayer, HttpPolicy, RetryLayer,
    ThrottleLayer, TimedOut,
};
use tower::util::BoxCloneService;
use tower::{Layer as _, Service};

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
}

impl Logical {
    /// A new logical request.
    pub fn new(id: u64) -> Self {
        Logical {
            id,
            attempts: Arc::new(AtomicU32::new(0)),
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
}

impl std::fmt::Debug for HttpCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpCall").field("uri", &self.uri).finish()
    }
}

/// Ends an attempt as `sim` does, with its latency since `sent` (recovery judges it): answered
/// (`done`), or without an answer, counted as a timeout (timed out here, or dropped by a layer
/// above).
struct Pending {
    meter: Arc<Meter>,
    sent: u64,
    done: bool,
}

impl Drop for Pending {
    fn drop(&mut self) {
        let (sent, done) = (self.sent, self.done);
        self.meter.at(|r, t| {
            if !done {
                r.at(t).timeouts += 1;
            }
            r.attempt_ended(t, t.saturating_sub(sent));
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
        let first = logical
            .as_ref()
            .is_none_or(|l| l.attempts.fetch_add(1, Ordering::Relaxed) == 0);
        // Counted as `sim` counts it: per bucket, and sent before, during or after the fault.
        meter.at(|r, t| r.sent(t, first));
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
        let mut out = http::Request::new(Empty::new());
        *out.uri_mut() = self.uri.clone();
        let fut = self.client.request(out);
        Box::pin(async move {
            let mut pending = Pending {
                meter,
                sent: now,
                done: false,
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

/// A policy's layer tree with its layers configured (shared-scope state already made).
#[derive(Clone)]
enum Node {
    Call {
        ds: usize,
        timeout: Option<u64>,
        timeout_dist: Option<Arc<Sampler>>,
        node: u16,
    },
    /// A layer around `inner`: builds the service from the inner one and, for per-client state,
    /// the client's seed; `bool`: the state is shared by every client.
    Wrap(Wrap, bool, Box<Node>),
    Fallback(Vec<Node>),
}

/// Wraps a service in a configured layer, reseeded for one client when given a seed.
type Wrap = Arc<dyn Fn(Svc, Option<u64>) -> Svc + Send + Sync>;

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
/// per client (seeded per client) when the stacks are built.
fn stateful<L>(layer: L, scope: Scope, inner: Node, seed: u64) -> Node
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
    let f: Wrap = Arc::new(move |svc, seed| {
        let l = match seed {
            Some(s) => layer.clone().seeded(s),
            None => layer.clone(),
        };
        BoxCloneService::new(l.layer(svc))
    });
    Node::Wrap(f, shared, Box::new(inner))
}

/// What every stack of one run shares.
#[derive(Clone)]
pub struct Env {
    /// The HTTP client.
    pub client: Client<HttpConnector, Empty<Bytes>>,
    /// `http://127.0.0.1:port`.
    pub base: String,
    /// The run's measurements.
    pub meter: Arc<Meter>,
    /// The run's seed.
    pub seed: u64,
}

impl std::fmt::Debug for Env {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Env").field("base", &self.base).finish()
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
        Layer::Hedge { .. } | Layer::Ledger { .. } | Layer::Limit { .. } => {
            return Err(
                "the Hedge, Ledger and Limit layers cannot be emulated yet: the `reliable` crate has no hedging, ledger or limiter layers to run them with".into(),
            );
        }
        Layer::Call {
            downstream,
            timeout,
            timeout_dist,
        } => Node::Call {
            ds: crate::simface::downstreams(c)
                .iter()
                .position(|n| n == downstream)
                .ok_or_else(|| format!("unknown downstream \"{downstream}\""))?,
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
            stateful(layer, *scope, compile(inner, c, env, next)?, seed)
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
            if let Some(b) = budget {
                layer = layer.budget(*b).map_err(err)?;
            }
            stateful(layer, *budget_scope, compile(inner, c, env, next)?, seed)
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
            stateful(layer, *scope, compile(inner, c, env, next)?, seed)
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
/// local refusals, and give-ups by reason.
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

    fn on_reject(&self, _: &str, _: NotSent) {
        self.0.at(|r, t| r.at(t).local_rejections += 1);
    }

    fn on_give_up(&self, _: &str, _: u32, reason: &'static str) {
        self.0.at(|r, _| crate::simface::give_up(r, reason));
    }
}

/// A seed for `(client, node)`.
fn seed_for(env: &Env, client: u32, node: usize) -> u64 {
    reliable_core::sample::splitmix64(env.seed ^ (u64::from(client) << 20) ^ node as u64)
}

fn instantiate(n: &Node, env: &Env, client: u32, depth: usize) -> Svc {
    match n {
        Node::Call {
            ds,
            timeout,
            timeout_dist,
            node,
        } => BoxCloneService::new(HttpCall {
            client: env.client.clone(),
            uri: format!("{}/{ds}", env.base)
                .parse()
                .unwrap_or_else(|_| http::Uri::from_static("http://127.0.0.1/")),
            timeout: *timeout,
            timeout_dist: timeout_dist.clone(),
            node: *node,
            seed: env.seed,
            meter: env.meter.clone(),
        }),
        Node::Wrap(wrap, shared, inner) => {
            let inner = instantiate(inner, env, client, depth + 1);
            wrap(inner, (!shared).then(|| seed_for(env, client, depth)))
        }
        Node::Fallback(children) => {
            let mut it = children.iter().rev();
            let Some(last) = it.next() else {
                unreachable!("validation refuses an empty fallback")
            };
            let mut backup = instantiate(last, env, client, depth + 1);
            let policy = policy();
            for ch in it {
                let primary = instantiate(ch, env, client, depth + 1);
                backup = BoxCloneService::new(FallbackLayer::new(backup, policy).layer(primary));
            }
            backup
        }
    }
}

/// One stack per client for policy `p`.
pub fn build(c: &Compiled, p: usize, env: &Env) -> Result<Vec<Svc>, String> {
    let mut next = 0;
    let tree = compile(&c.scenario.policies[p].stack, c, env, &mut next)?;
    Ok((0..crate::simface::clients(c).max(1))
        .map(|client| instantiate(&tree, env, client, 0))
        .collect())
}

/// Whether a final answer is a success.
pub fn succeeded(answer: &Result<Res, BoxError>) -> bool {
    matches!(answer, Ok(res) if policy().response(res).is_none())
}

//! The downstream, for real: an HTTP/2 server on 127.0.0.1 that implements the scenario's
//! `Server` model with `sim`'s own queueing state machine, in real time.
//!
//! A request to `/{i}` is a call to downstream `i`. After the request's network delay it
//! *arrives*: a full queue rejects it with 503. Otherwise it is served by one of the workers
//! (workers lost to a capacity fault start nothing new) from a bounded FIFO queue, for a service
//! time drawn from the scenario's distribution (times any latency inflation) and slept for real.
//! Work goes on when the client has given up (its HTTP/2 stream was reset): that job's service
//! time counts as wasted, exactly as `sim` counts it. A finished job fails with the healthy error
//! rate (500), else succeeds (200), and the answer goes back after the response's network delay.
//!
//! The server plays only the faults a server makes: `CapacityLoss` and `LatencyInflation` (a
//! slower server keeps its workers busy longer, so its queue grows). What a client sees of a
//! downstream (an outage, a partition, an injected error rate, a throttle) is played on the
//! client's side by reliable's chaos `TimelineLayer` ([`crate::client::Chaos`]).

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use bytes::Bytes;
use http_body_util::Empty;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::sync::oneshot;

use tower::ServiceExt as _;

use crate::client::{Env, Logical, Req, Svc, succeeded};
use crate::graph::Plan;
use crate::meter::Meter;
use crate::simface::{Admission, Compiled, Handle, Job, Sampler, Server, Started};
use crate::simface::{Stream, StreamId, Timeline};

/// What a call gets back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reply {
    /// 200.
    Ok,
    /// 500: the job was served and failed.
    Error,
    /// 503: refused without serving (full queue, fail-fast outage).
    Unavailable,
    /// 503 with `x-should-retry: false`: a service that gave up on a required call.
    DoNotRetry,
}

/// A job's caller: where its answer goes, and the caller's deadline (virtual ns; `u64::MAX`:
/// none came).
struct Caller {
    tx: oneshot::Sender<Reply>,
    fire: u64,
}

struct DsState {
    server: Server,
    waiting: HashMap<u32, Caller>,
    next: u32,
}

/// One call of a service's handler.
struct HopCall {
    svc: Mutex<Svc>,
    required: bool,
}

/// A service's handler, built once the listeners are up.
struct Service {
    calls: Vec<HopCall>,
    parallel: bool,
    no_retry: bool,
}

struct Ds {
    state: Mutex<DsState>,
    net: (Sampler, Sampler),
    net_rng: Mutex<Stream>,
}

/// Every downstream of a scenario, each behind its own listener.
pub struct Downstreams {
    ds: Vec<Ds>,
    timeline: Timeline,
    meter: Arc<Meter>,
    /// The call graph's shape, for a scenario with services.
    plan: Option<Plan>,
    /// Per downstream: its handler (`None`: a plain server), once built.
    services: OnceLock<Vec<Option<Service>>>,
    /// Numbers of the services' own requests (for keyed timeout draws).
    hop_ids: AtomicU64,
}

impl std::fmt::Debug for Downstreams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Downstreams")
            .field("count", &self.ds.len())
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Downstreams {
    /// The scenario's downstreams, in the state `sim` starts them in for policy `p` (`plan`: its
    /// call graph, if any). Fails for a downstream that is not a `Server`.
    pub fn new(
        c: &Compiled,
        seed: u64,
        meter: Arc<Meter>,
        plan: Option<Plan>,
    ) -> Result<Arc<Self>, String> {
        crate::graph::check(c)?;
        let mut ds = Vec::new();
        for (i, d) in c.scenario.downstreams.iter().enumerate() {
            let mut server = crate::simface::server(c, i, seed).ok_or_else(|| {
                format!(
                    "downstream \"{}\": only Server downstreams can be emulated",
                    d.name
                )
            })?;
            // A downstream that honours deadlines drops queued jobs whose caller is gone.
            if plan
                .as_ref()
                .is_some_and(|p| p.margin.get(i).copied().flatten().is_some())
            {
                server.cancel_abandoned();
            }
            ds.push(Ds {
                state: Mutex::new(DsState {
                    server,
                    waiting: HashMap::new(),
                    next: 0,
                }),
                net: (
                    Sampler::new(&d.network.request),
                    Sampler::new(&d.network.response),
                ),
                net_rng: Mutex::new(Stream::new(seed, StreamId::Network(i as u16))),
            });
        }
        Ok(Arc::new(Downstreams {
            ds,
            timeline: crate::simface::timeline(c).clone(),
            meter,
            plan,
            services: OnceLock::new(),
            hop_ids: AtomicU64::new(1 << 40),
        }))
    }

    /// Builds every service's handler stacks from the scenario (`reliable::policy`'s layers, one
    /// instance per service), calling the other downstreams through `env` (whose `edge` must be
    /// false: the services' calls are not the edge's attempts).
    pub fn build_services(&self, c: &Compiled, env: &Env) -> Result<(), String> {
        let mut out = Vec::new();
        for (i, d) in c.scenario.downstreams.iter().enumerate() {
            let Some(h) = &d.handler else {
                out.push(None);
                continue;
            };
            let mut calls = Vec::new();
            for (j, call) in h.calls.iter().enumerate() {
                let env = Env {
                    seed: reliable_core::sample::splitmix64(
                        env.seed ^ ((i as u64) << 32) ^ (j as u64),
                    ),
                    ..env.clone()
                };
                let svc = crate::client::build_stack(c, &call.stack, &env)
                    .map_err(|e| format!("downstream \"{}\", call {j}: {e}", d.name))?;
                calls.push(HopCall {
                    svc: Mutex::new(svc),
                    required: call.required,
                });
            }
            out.push(Some(Service {
                calls,
                parallel: h.parallel,
                no_retry: h.no_retry_on_failure,
            }));
        }
        let _ = self.services.set(out);
        Ok(())
    }

    /// The margin downstream `i` takes off its callers' deadlines, if it honours them.
    fn margin(&self, i: usize) -> Option<u64> {
        self.plan
            .as_ref()
            .and_then(|p| p.margin.get(i).copied().flatten())
    }

    /// Whether a job at `i` whose caller's deadline is `fire` is past it at `now`.
    fn past(&self, i: usize, fire: u64, now: u64) -> bool {
        self.margin(i)
            .is_some_and(|m| fire.saturating_sub(m) <= now)
    }

    fn past_deadline(&self, i: usize, n: u64) {
        if n > 0 {
            self.meter.at(|r, _| {
                if let Some(h) = &mut r.hops {
                    h.past_deadline[i] += n;
                }
            });
        }
    }

    /// Jobs waiting and busy workers, over all downstreams.
    pub fn gauges(&self) -> (u64, u64) {
        self.ds.iter().fold((0, 0), |(q, b), d| {
            let s = lock(&d.state);
            (
                q + s.server.queue_len() as u64,
                b + u64::from(s.server.busy()),
            )
        })
    }

    fn hop(&self, i: usize, to_server: bool) -> u64 {
        let d = &self.ds[i];
        let s = if to_server { &d.net.0 } else { &d.net.1 };
        if s.is_zero() {
            0
        } else {
            s.sample(lock(&d.net_rng).rng())
        }
    }

    /// A call reaches downstream `i`: its answer now, or a receiver for a later one.
    fn arrive(self: &Arc<Self>, i: usize, fire: u64) -> Result<Reply, oneshot::Receiver<Reply>> {
        let now = self.meter.now_ns();
        let ds = i as u16;
        self.meter.at(|r, t| r.server_arrival(t, ds));
        if self.past(i, fire, now) {
            // Deadline propagation: the caller's deadline has passed.
            self.meter.at(|r, t| r.answered(t, ds, false, true));
            self.past_deadline(i, 1);
            return Ok(Reply::Unavailable);
        }
        let tl = &self.timeline;
        let (lost, factor) = if tl.has_faults(i) {
            (tl.capacity_lost(i, now), tl.latency_factor(i, now))
        } else {
            (0.0, 1.0)
        };
        let (tx, rx) = oneshot::channel();
        let mut st = lock(&self.ds[i].state);
        let id = st.next;
        st.next = st.next.wrapping_add(1);
        let job = Job {
            attempt: Handle {
                index: id,
                generation: 0,
            },
        };
        match st.server.arrive(job, lost, factor) {
            Admission::Started(s) => {
                st.waiting.insert(id, Caller { tx, fire });
                drop(st);
                self.start(i, s);
            }
            Admission::Queued => {
                st.waiting.insert(id, Caller { tx, fire });
            }
            Admission::Rejected => {
                drop(st);
                self.meter.at(|r, t| r.answered(t, ds, false, true));
                return Ok(Reply::Unavailable);
            }
        }
        Err(rx)
    }

    /// Serves a started job for its service time, for real.
    fn start(self: &Arc<Self>, i: usize, s: Started) {
        let end = self.meter.now_ns().saturating_add(s.work_ns);
        let me = self.clone();
        tokio::spawn(async move {
            me.meter.timebase().sleep_until_ns(end).await;
            me.done(i, s.job.attempt.index, s.work_ns);
        });
    }

    fn done(self: &Arc<Self>, i: usize, id: u32, work_ns: u64) {
        let ds = i as u16;
        let mut st = lock(&self.ds[i].state);
        let caller = st.waiting.remove(&id);
        let live = caller.as_ref().is_some_and(|c| !c.tx.is_closed());
        if self.is_service(i) {
            // Its worker stays busy through the handler's calls.
            drop(st);
            self.meter
                .at(|r, t| r.completion(t, ds, work_ns / 1_000, !live));
            let me = self.clone();
            tokio::spawn(async move { me.job(i, caller, live).await });
            return;
        }
        let tx = caller.map(|c| c.tx);
        st.server.finish();
        let p = st.server.error_rate;
        let failed = st.server.rng.chance(p);
        drop(st);
        self.meter.at(|r, t| {
            r.completion(t, ds, work_ns / 1_000, !live);
            r.answered(t, ds, !failed, false);
        });
        let reply = if failed { Reply::Error } else { Reply::Ok };
        if tx.is_none_or(|tx| tx.send(reply).is_err()) {
            self.meter.at(|r, _| r.late_replies += 1);
        }
        self.drain(i);
    }

    /// Starts waiting jobs on `i` while workers are free.
    pub fn drain(self: &Arc<Self>, i: usize) {
        let now = self.meter.now_ns();
        let tl = &self.timeline;
        let (lost, factor) = (tl.capacity_lost(i, now), tl.latency_factor(i, now));
        loop {
            let mut st = lock(&self.ds[i].state);
            let DsState {
                server, waiting, ..
            } = &mut *st;
            // The jobs it drops (a server that drops abandoned work asks only then): their
            // callers get no answer (they time out, as in `sim`), and are forgotten here.
            let gone = std::cell::RefCell::new(Vec::new());
            let live = |h: Handle| {
                let live = waiting
                    .get(&h.index)
                    .is_some_and(|c| !c.tx.is_closed() && !self.past(i, c.fire, now));
                if !live {
                    gone.borrow_mut().push(h.index);
                }
                live
            };
            let dropped = server.dropped;
            let next = server.next(lost, factor, live);
            let more = server.dropped - dropped;
            for id in gone.into_inner() {
                waiting.remove(&id);
            }
            drop(st);
            self.past_deadline(i, more);
            let Some(s) = next else {
                return;
            };
            self.start(i, s);
        }
    }

    fn is_service(&self, i: usize) -> bool {
        self.services
            .get()
            .is_some_and(|s| s.get(i).is_some_and(Option::is_some))
    }

    /// A service's job after its service time: its handler's calls, then its answer.
    async fn job(self: Arc<Self>, i: usize, caller: Option<Caller>, live: bool) {
        let now = self.meter.now_ns();
        let deadline = match self.margin(i) {
            Some(m) => {
                // A caller that is gone leaves no time.
                let fire = match &caller {
                    Some(c) if live => c.fire,
                    _ => now,
                };
                fire.saturating_sub(m)
            }
            None => u64::MAX,
        };
        let Some(Some(svc)) = self.services.get().and_then(|s| s.get(i)) else {
            return;
        };
        let failed = if deadline <= now {
            self.past_deadline(i, 1);
            true
        } else if svc.parallel {
            let mut set = tokio::task::JoinSet::new();
            for j in 0..svc.calls.len() {
                let me = self.clone();
                set.spawn(async move { (j, me.call(i, j, deadline).await) });
            }
            let mut failed = false;
            while let Some(r) = set.join_next().await {
                let (j, ok) = r.unwrap_or((0, false));
                failed |= !ok && svc.calls[j].required;
            }
            failed
        } else {
            let mut failed = false;
            for (j, call) in svc.calls.iter().enumerate() {
                if j > 0 && deadline <= self.meter.now_ns() {
                    // Past the deadline between two calls: stop here.
                    self.past_deadline(i, 1);
                    failed = true;
                    break;
                }
                if !self.call(i, j, deadline).await && call.required {
                    failed = true;
                    break;
                }
            }
            failed
        };
        self.end_job(i, caller.map(|c| c.tx), failed, svc.no_retry);
    }

    /// Call `j` of service `i`'s handler, within `deadline`: whether it succeeded.
    async fn call(&self, i: usize, j: usize, deadline: u64) -> bool {
        let Some(Some(svc)) = self.services.get().and_then(|s| s.get(i)) else {
            return false;
        };
        let stack = lock(&svc.calls[j].svc).clone();
        let mut req: Req = http::Request::new(Empty::new());
        let id = self.hop_ids.fetch_add(1, Ordering::Relaxed);
        req.extensions_mut().insert(Logical::new(id));
        if deadline == u64::MAX {
            return succeeded(&stack.oneshot(req).await);
        }
        req.extensions_mut().insert(reliable::tower::Deadline(
            reliable_core::Instant::from_nanos(deadline),
        ));
        let wall = self.meter.timebase().wall(deadline);
        // The whole call ends at the deadline, whatever its stack would still try.
        match tokio::time::timeout_at(wall, stack.oneshot(req)).await {
            Ok(answer) => succeeded(&answer),
            Err(_) => false,
        }
    }

    /// A service's calls are done: free its worker and answer its caller.
    fn end_job(
        self: &Arc<Self>,
        i: usize,
        tx: Option<oneshot::Sender<Reply>>,
        calls_failed: bool,
        no_retry: bool,
    ) {
        let ds = i as u16;
        let mut st = lock(&self.ds[i].state);
        st.server.finish();
        let p = st.server.error_rate;
        let failed = calls_failed || (p > 0.0 && st.server.rng.chance(p));
        drop(st);
        self.meter.at(|r, t| r.answered(t, ds, !failed, false));
        let reply = if !failed {
            Reply::Ok
        } else if calls_failed && no_retry {
            Reply::DoNotRetry
        } else {
            Reply::Error
        };
        if tx.is_none_or(|tx| tx.send(reply).is_err()) {
            self.meter.at(|r, _| r.late_replies += 1);
        }
        self.drain(i);
    }

    /// Re-checks every downstream at each fault edge (capacity coming back starts queued jobs).
    pub fn watch_edges(self: &Arc<Self>) {
        let mut edges: Vec<u64> = self.timeline.edges().iter().map(|e| e.0).collect();
        edges.dedup();
        let me = self.clone();
        tokio::spawn(async move {
            for at in edges {
                me.meter.timebase().sleep_until_ns(at).await;
                for i in 0..me.ds.len() {
                    me.drain(i);
                }
            }
        });
    }

    async fn handle(
        self: Arc<Self>,
        me: usize,
        req: &http::Request<hyper::body::Incoming>,
    ) -> http::Response<Empty<Bytes>> {
        if req.uri().path().trim_start_matches('/').parse::<usize>() != Ok(me) {
            return status(404);
        }
        let i = me;
        let tb = *self.meter.timebase();
        // The caller's deadline, as the request comes in (wall time travels; virtual here).
        let fire = req
            .headers()
            .get("grpc-timeout")
            .and_then(|v| v.to_str().ok())
            .and_then(crate::graph::parse_grpc_timeout)
            .map_or(u64::MAX, |left| {
                self.meter.now_ns().saturating_add(tb.to_virtual(left))
            });
        let d = self.hop(i, true);
        if d > 0 {
            tokio::time::sleep(tb.to_wall(d)).await;
        }
        let reply = match self.arrive(i, fire) {
            Ok(r) => r,
            Err(rx) => match rx.await {
                Ok(r) => r,
                Err(_) => std::future::pending().await,
            },
        };
        let d = self.hop(i, false);
        if d > 0 {
            tokio::time::sleep(tb.to_wall(d)).await;
        }
        match reply {
            Reply::Ok => status(200),
            Reply::Error => status(500),
            Reply::Unavailable => status(503),
            Reply::DoNotRetry => {
                let mut res = status(503);
                res.headers_mut()
                    .insert("x-should-retry", http::HeaderValue::from_static("false"));
                res
            }
        }
    }

    /// Listens on 127.0.0.1, one ephemeral port per downstream (`/{i}` on listener `i` is a call
    /// to downstream `i`), and serves until the runtime shuts down.
    pub async fn serve(self: &Arc<Self>) -> std::io::Result<Vec<SocketAddr>> {
        let mut addrs = Vec::with_capacity(self.ds.len());
        for i in 0..self.ds.len() {
            addrs.push(self.listen(i).await?);
        }
        Ok(addrs)
    }

    async fn listen(self: &Arc<Self>, i: usize) -> std::io::Result<SocketAddr> {
        let listener = tokio::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0)).await?;
        let addr = listener.local_addr()?;
        let me = self.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let _ = stream.set_nodelay(true);
                let me = me.clone();
                tokio::spawn(async move {
                    let svc = service_fn(move |req: http::Request<hyper::body::Incoming>| {
                        let me = me.clone();
                        async move { Ok::<_, Infallible>(me.handle(i, &req).await) }
                    });
                    let mut b = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
                    b.max_concurrent_streams(MAX_STREAMS)
                        .max_pending_accept_reset_streams(Some(MAX_STREAMS as usize))
                        .max_local_error_reset_streams(None);
                    let _ = b.serve_connection(TokioIo::new(stream), svc).await;
                });
            }
        });
        Ok(addr)
    }
}

/// Concurrent streams the server allows per connection: more than any run the size check admits.
pub const MAX_STREAMS: u32 = 100_000;

fn status(code: u16) -> http::Response<Empty<Bytes>> {
    http::Response::builder()
        .status(code)
        .body(Empty::new())
        .unwrap_or_else(|_| http::Response::new(Empty::new()))
}

//! The downstream, for real: an HTTP/2 server on 127.0.0.1 that implements the scenario's
//! `Server` model with `sim`'s own queueing state machine, in real time.
//!
//! A request to `/{i}` is a call to downstream `i`. After the request's network delay it
//! *arrives*: an outage fails it at once (503) or swallows it (no answer, ever: only the client's
//! timeout ends it); a throttle rejects a share of arrivals with 429 and `retry-after-ms`; a full
//! queue rejects with 503. Otherwise it is served by one of the workers (workers lost to a
//! capacity fault start nothing new) from a bounded FIFO queue, for a service time drawn from the
//! scenario's distribution (times any latency inflation) and slept for real. Work goes on when
//! the client has given up (its HTTP/2 stream was reset): that job's service time counts as
//! wasted, exactly as `sim` counts it. A finished job fails with the healthy error rate combined
//! with any injected one (500), else succeeds (200), and the answer goes back after the response's
//! network delay.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::Empty;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::sync::oneshot;

use crate::meter::Meter;
use crate::simface::{Admission, Compiled, Handle, Job, OutageMode, Sampler, Server, Started};
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
    /// 429 with this Retry-After, in virtual nanoseconds.
    Throttled(u64),
}

struct DsState {
    server: Server,
    waiting: HashMap<u32, oneshot::Sender<Reply>>,
    next: u32,
}

struct Ds {
    state: Mutex<DsState>,
    net: (Sampler, Sampler),
    net_rng: Mutex<Stream>,
    fault_rng: Mutex<Stream>,
}

/// Every downstream of a scenario, behind one listener.
pub struct Downstreams {
    ds: Vec<Ds>,
    timeline: Timeline,
    /// Throttle hints by fault index, virtual ns.
    hints: Vec<u64>,
    meter: Arc<Meter>,
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
    /// The scenario's downstreams, in the state `sim` starts them in. Fails for a downstream that
    /// is not a `Server`.
    pub fn new(c: &Compiled, seed: u64, meter: Arc<Meter>) -> Result<Arc<Self>, String> {
        let mut ds = Vec::new();
        for (i, d) in c.scenario.downstreams.iter().enumerate() {
            let server = crate::simface::server(c, i, seed).ok_or_else(|| {
                format!(
                    "downstream \"{}\": only Server downstreams can be emulated",
                    d.name
                )
            })?;
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
                fault_rng: Mutex::new(Stream::new(seed, StreamId::Faults(i as u16))),
            });
        }
        Ok(Arc::new(Downstreams {
            ds,
            timeline: crate::simface::timeline(c).clone(),
            hints: crate::simface::hints(c)
                .iter()
                .map(|h| h.as_nanos())
                .collect(),
            meter,
        }))
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

    /// A call reaches downstream `i`: its answer now, a receiver for a later one, or `None` for a
    /// call swallowed by a hanging outage.
    fn arrive(self: &Arc<Self>, i: usize) -> Option<Result<Reply, oneshot::Receiver<Reply>>> {
        let now = self.meter.now_ns();
        let ds = i as u16;
        self.meter.at(|r, t| r.server_arrival(t, ds));
        let tl = &self.timeline;
        let (lost, factor) = if tl.has_faults(i) {
            let c = tl.on_arrival(i, now);
            match c.outage {
                Some(OutageMode::FailFast) => {
                    self.meter.at(|r, t| r.answered(t, ds, false, true));
                    return Some(Ok(Reply::Unavailable));
                }
                Some(OutageMode::Hang) => {
                    self.meter.at(|r, _| r.ds[i].hung += 1);
                    return None;
                }
                None => {}
            }
            if let Some((share, fault)) = c.throttle
                && lock(&self.ds[i].fault_rng).chance(share)
            {
                self.meter.at(|r, t| r.answered(t, ds, false, true));
                let hint = self.hints.get(usize::from(fault)).copied().unwrap_or(0);
                return Some(Ok(Reply::Throttled(hint)));
            }
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
                st.waiting.insert(id, tx);
                drop(st);
                self.start(i, s);
            }
            Admission::Queued => {
                st.waiting.insert(id, tx);
            }
            Admission::Rejected => {
                drop(st);
                self.meter.at(|r, t| r.answered(t, ds, false, true));
                return Some(Ok(Reply::Unavailable));
            }
        }
        Some(Err(rx))
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
        let now = self.meter.now_ns();
        let fault_rate = self.timeline.error_rate(i, now);
        let mut st = lock(&self.ds[i].state);
        let tx = st.waiting.remove(&id);
        let live = tx.as_ref().is_some_and(|t| !t.is_closed());
        st.server.finish();
        let p = 1.0 - (1.0 - st.server.error_rate) * (1.0 - fault_rate);
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
            let live = |h: Handle| waiting.get(&h.index).is_some_and(|t| !t.is_closed());
            let Some(s) = server.next(lost, factor, live) else {
                return;
            };
            drop(st);
            self.start(i, s);
        }
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

    async fn handle(self: Arc<Self>, path: &str) -> http::Response<Empty<Bytes>> {
        let Some(i) = path
            .trim_start_matches('/')
            .parse::<usize>()
            .ok()
            .filter(|i| *i < self.ds.len())
        else {
            return status(404, None);
        };
        let tb = *self.meter.timebase();
        let d = self.hop(i, true);
        if d > 0 {
            tokio::time::sleep(tb.to_wall(d)).await;
        }
        let reply = match self.arrive(i) {
            Some(Ok(r)) => r,
            Some(Err(rx)) => match rx.await {
                Ok(r) => r,
                Err(_) => std::future::pending().await,
            },
            None => std::future::pending().await,
        };
        let d = self.hop(i, false);
        if d > 0 {
            tokio::time::sleep(tb.to_wall(d)).await;
        }
        match reply {
            Reply::Ok => status(200, None),
            Reply::Error => status(500, None),
            Reply::Unavailable => status(503, None),
            // The hint travels in wall time, as a real server's would.
            Reply::Throttled(h) => status(429, Some(tb.to_wall(h))),
        }
    }

    /// Listens on 127.0.0.1 (an ephemeral port) and serves until the runtime shuts down.
    pub async fn serve(self: &Arc<Self>) -> std::io::Result<SocketAddr> {
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
                        async move {
                            let path = req.uri().path().to_owned();
                            Ok::<_, Infallible>(me.handle(&path).await)
                        }
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

fn status(code: u16, retry_after: Option<std::time::Duration>) -> http::Response<Empty<Bytes>> {
    let mut b = http::Response::builder().status(code);
    if let Some(d) = retry_after {
        b = b
            .header("retry-after-ms", format!("{:.3}", d.as_secs_f64() * 1e3))
            .header("retry-after", d.as_secs_f64().ceil().to_string());
    }
    b.body(Empty::new())
        .unwrap_or_else(|_| http::Response::new(Empty::new()))
}

//! One emulated run of one policy: a fresh tokio runtime (2 worker threads), the downstream
//! server on 127.0.0.1, one stack per client, and the scenario's open-loop arrivals sent at their
//! scheduled instants. Everything stops at the horizon: the driver sends nothing after it, the
//! measurements ignore what happens after it, and dropping the runtime cancels every task and
//! closes every socket.

use std::sync::Arc;
use std::time::{Duration, Instant as WallClock};

use tower::ServiceExt;

use crate::client::{Chaos, Env, Logical, Req, build, http_client, succeeded};
use crate::fleet::{FleetRun, StoreFigures};
use crate::meter::Meter;
use crate::server::Downstreams;
use crate::simface::{self, Compiled, RunOutput, arrivals, finish};
use crate::timebase::Timebase;

/// How faithfully the run kept to its schedule, and what its fleet did with its stores.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct Fidelity {
    /// Arrivals sent.
    pub arrivals: u64,
    /// Send lag behind schedule, wall ms: median, 99th percentile, largest.
    pub lag_p50_ms: f64,
    /// 99th percentile.
    pub lag_p99_ms: f64,
    /// Largest.
    pub lag_max_ms: f64,
    /// Wall time of the run, seconds.
    pub wall_s: f64,
    /// A scenario with stores: what the instances did with them.
    pub store: Option<StoreFigures>,
}

/// Runs policy `p` of `c` for real under `seed`, `scale` wall seconds per scenario second.
pub fn run_policy(
    c: &Compiled,
    p: usize,
    seed: u64,
    scale: f64,
) -> Result<(RunOutput, Fidelity), String> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))?;
    let started = WallClock::now();
    let result = rt.block_on(drive(c, p, seed, scale));
    // Cancels the server, the jobs and every request still in flight.
    rt.shutdown_timeout(Duration::from_secs(2));
    let (meter, sent, store) = result?;
    let (p50, p99, max) = meter.lag_ms();
    let fidelity = Fidelity {
        arrivals: sent,
        lag_p50_ms: p50,
        lag_p99_ms: p99,
        lag_max_ms: max,
        wall_s: started.elapsed().as_secs_f64(),
        store,
    };
    let peak = meter.peak_in_flight();
    let unfinished = meter.in_flight();
    let ledgers = meter.ledger_counts();
    let rec = meter.take_recorder();
    let depth_arrivals = depth_arrivals(&rec);
    let mut out = finish(c, p, seed, rec, unfinished, peak, ledgers);
    out.depth_arrivals = depth_arrivals;
    Ok((out, fidelity))
}

/// In a call graph, per depth from 1, per bucket: arrivals at that depth and the edge's first
/// tries (the plot of amplification by depth), as `sim` reports them.
fn depth_arrivals(rec: &simface::Recorder) -> Vec<Vec<(u64, u64)>> {
    rec.hops
        .as_ref()
        .map_or_else(Vec::new, |h| h.arrivals_by_depth(&rec.buckets))
}

async fn drive(
    c: &Compiled,
    p: usize,
    seed: u64,
    scale: f64,
) -> Result<(Arc<Meter>, u64, Option<StoreFigures>), String> {
    let tb = Timebase::new(scale);
    let (horizon_ns, bucket_ns, buckets) = simface::buckets(c);
    let plan = crate::graph::plan(c, p);
    let mut rec = simface::recorder_for(c, p);
    if let Some(plan) = &plan {
        rec.hops = Some(simface::HopCounters::new(plan.depth.clone(), buckets));
    }
    let meter = Arc::new(Meter::new(tb, horizon_ns, rec));
    crate::fleet::check_scale(c, scale)?;
    // The stores' processes end with this function, on every path (their guards).
    let (fleet, _stores) = match FleetRun::start(c, seed, tb)? {
        Some((run, processes)) => (Some(run), processes),
        None => (None, Vec::new()),
    };
    let server = Downstreams::new(c, seed, meter.clone(), plan)?;
    let addrs = server
        .serve()
        .await
        .map_err(|e| format!("cannot listen on 127.0.0.1: {e}"))?;
    if let Some(addr) = addrs.iter().find(|a| !a.ip().is_loopback()) {
        return Err(format!("refusing to send traffic to {addr}: not loopback"));
    }
    server.watch_edges();
    let env = Env {
        client: http_client(),
        bases: Arc::new(addrs.iter().map(|a| format!("http://{a}")).collect()),
        meter: meter.clone(),
        seed,
        edge: true,
        balancers: Arc::new(crate::balance::Balancers::new(c, seed)),
        chaos: Chaos::new(c, seed, &meter)?,
        fleet: fleet.clone(),
    };
    // Open each listener's HTTP/2 connection before the first arrival (a 404: not a call).
    for (base, addr) in env.bases.iter().zip(&addrs) {
        let warm: Req = http::Request::get(format!("{base}/warm-up"))
            .body(http_body_util::Empty::new())
            .map_err(|e| e.to_string())?;
        env.client
            .request(warm)
            .await
            .map_err(|e| format!("cannot reach the emulated server at {addr}: {e}"))?;
    }
    // The services' calls: the same client, not counted as the edge's attempts.
    server.build_services(
        c,
        &Env {
            edge: false,
            ..env.clone()
        },
    )?;
    let stacks = build(c, p, &env)?;
    // Gauges at the end of every bucket.
    let gauges = {
        let (meter, server) = (meter.clone(), server.clone());
        let (bucket, buckets) = (bucket_ns, buckets as u64);
        tokio::spawn(async move {
            for k in 1..=buckets {
                let t = k * bucket;
                meter.timebase().sleep_until_ns(t).await;
                let (q, b) = server.gauges();
                meter.sample(t, bucket, q, b, meter.in_flight());
            }
        })
    };
    let mut src = arrivals(c, seed).ok_or("only open-loop workloads can be emulated")?;
    let mut sent = 0u64;
    while let Some((t, client)) = src.next(simface::timeline(c)) {
        tb.sleep_until_ns(t).await;
        meter.send_lag(tokio::time::Instant::now().saturating_duration_since(tb.wall(t)));
        sent += 1;
        let svc = stacks[client as usize % stacks.len()].clone();
        let meter = meter.clone();
        meter.request_started_at(t);
        let mut req: Req = http::Request::new(http_body_util::Empty::new());
        req.extensions_mut().insert(Logical::new(sent));
        tokio::spawn(async move {
            let answer = svc.oneshot(req).await;
            let ok = succeeded(&answer);
            let latency = meter.now_ns().saturating_sub(t);
            meter.request_finished(ok, latency);
        });
    }
    tb.sleep_until_ns(horizon_ns).await;
    // The gauge task writes the last bucket at the horizon: wait for it (a yield alone lost that
    // sample now and then on a loaded machine, leaving the last bucket's gauges at 0).
    let _ = tokio::time::timeout(Duration::from_secs(1), gauges).await;
    // Stores are the scenario's: a policy without a Fleet scope leaves them untouched (0 ops).
    Ok((meter, sent, fleet.map(|f| f.figures())))
}

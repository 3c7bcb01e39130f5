//! The size check: refuse a scenario this machine cannot emulate faithfully, with the numbers,
//! instead of producing noise.
//!
//! Limits (see the README's emulator section for how they were measured on 2 cores):
//! - attempts per wall second: the peak offered rate (steps and load spikes included) × the most
//!   attempts one request can make through its stack (in a call graph, with every call its
//!   attempts cause further down) ÷ the time scale;
//! - timer resolution: tokio's timers tick in milliseconds, so the mean service time and every
//!   timeout must span at least [`MIN_WALL_MS`] of wall time to stay within ~5%;
//! - jobs the server may hold (workers + queue), and the total wall time.

use crate::simface::{Compiled, DownstreamModel, Fault, Layer, Sampler, Workload};

/// Attempts per wall second the size check admits: the highest rate `emulate calibrate` drove
/// faithfully (send lag p99 within 10 ms, every request answered) on 2 cores shared with other
/// builds (load average 15-17).
pub const MAX_ATTEMPTS_PER_S: f64 = 2_000.0;
/// Shortest wall span for a mean service time or a timeout, in milliseconds.
pub const MIN_WALL_MS: f64 = 10.0;
/// Most jobs a server may hold (workers + queue capacity).
pub const MAX_JOBS: u64 = 100_000;

/// What the check computed.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Size {
    /// Peak attempts per wall second, if every request used every attempt.
    pub peak_attempts_per_s: f64,
    /// Mean service time of the fastest downstream, wall ms.
    pub min_service_ms: f64,
    /// Shortest timeout, wall ms (none: no timeout).
    pub min_timeout_ms: Option<f64>,
    /// Most jobs one server may hold (workers + queue; an unbounded queue counts every attempt
    /// the run can send).
    pub max_jobs: u64,
    /// Wall time of all the runs, seconds.
    pub wall_s: f64,
}

/// The most attempts one logical request can send through `l`, counting in a call graph the
/// calls each attempt's job makes further down (`call`: the attempts one call to a downstream
/// causes, itself included).
fn attempts(l: &Layer, call: &dyn Fn(&str) -> f64) -> f64 {
    let attempts = |l: &Layer| attempts(l, call);
    match l {
        Layer::Call { downstream, .. } => call(downstream),
        Layer::Breaker { inner, .. }
        | Layer::Throttle { inner, .. }
        | Layer::Llm { inner, .. }
        | Layer::Ledger { inner, .. }
        | Layer::Limit { inner, .. }
        | Layer::RateLimit { inner, .. } => attempts(inner),
        Layer::Hedge { config, inner, .. } => {
            (f64::from(config.max_hedges) + 1.0) * attempts(inner)
        }
        Layer::Retry { policy, inner, .. } => {
            f64::from(policy.max_attempts.unwrap_or(u32::MAX)) * attempts(inner)
        }
        Layer::Fallback(children) => children.iter().map(attempts).sum(),
    }
}

/// The attempts one call to `name` causes: itself, and its handler's calls (if a service), down
/// the graph (`sim` checked it acyclic and at most 16 hops deep; `hops` bounds it anyway).
fn per_call(c: &Compiled, name: &str, hops: u32) -> f64 {
    // A replicated downstream: its replicas share one handler (replica 0's).
    let replica0 = format!("{name}[0]");
    let Some(d) = c
        .scenario
        .downstreams
        .iter()
        .find(|d| d.name == name || d.name == replica0)
    else {
        return 1.0;
    };
    let below = match &d.handler {
        Some(h) if hops < 64 => h
            .calls
            .iter()
            .map(|call| attempts(&call.stack, &|n| per_call(c, n, hops + 1)))
            .sum(),
        _ => 0.0,
    };
    1.0 + below
}

fn timeouts(l: &Layer, out: &mut Vec<u64>) {
    match l {
        Layer::Call { timeout, .. } => out.extend(timeout.map(|t| t.as_nanos())),
        Layer::Breaker { inner, .. }
        | Layer::Throttle { inner, .. }
        | Layer::Llm { inner, .. }
        | Layer::Hedge { inner, .. }
        | Layer::Ledger { inner, .. }
        | Layer::Limit { inner, .. }
        | Layer::RateLimit { inner, .. } => timeouts(inner, out),
        Layer::Retry { policy, inner, .. } => {
            out.extend(policy.attempt_timeout.map(|t| t.as_nanos()));
            timeouts(inner, out);
        }
        Layer::Fallback(children) => children.iter().for_each(|c| timeouts(c, out)),
    }
}

/// Computes the sizes of running every policy of `c` at `scale`.
pub fn measure(c: &Compiled, scale: f64, policies: usize) -> Result<Size, String> {
    let Workload::OpenLoop { rate, steps, .. } = &c.scenario.workload else {
        return Err("only open-loop workloads can be emulated (the arrivals must not depend on the answers' timing for the comparison to be fair)".into());
    };
    let peak_rate = steps.iter().map(|s| s.rate).fold(*rate, f64::max);
    let spike: f64 = c
        .scenario
        .faults
        .iter()
        .map(|f| match f {
            Fault::LoadSpike { factor, .. } => factor.max(1.0),
            _ => 1.0,
        })
        .product();
    let most = c
        .scenario
        .policies
        .iter()
        .map(|p| attempts(&p.stack, &|n| per_call(c, n, 1)))
        .fold(1.0, f64::max);
    crate::graph::check(c)?;
    let mut min_service = f64::INFINITY;
    let mut max_jobs = 0;
    for d in &c.scenario.downstreams {
        match &d.model {
            DownstreamModel::Server {
                workers,
                queue,
                service,
                ..
            } => {
                // A service's answer time is its calls' (its own service time is a small part).
                if d.handler.is_none() {
                    min_service = min_service.min(Sampler::new(service).mean_secs() * 1e3 * scale);
                }
                // An unbounded queue holds at most every attempt of the run.
                let waiting = queue.capacity.map_or(u64::MAX, u64::from).min(
                    (peak_rate * spike * most * crate::simface::buckets(c).0 as f64 / 1e9).min(1e18)
                        as u64,
                );
                max_jobs = max_jobs.max(u64::from(*workers).saturating_add(waiting));
            }
            _ => {
                return Err(format!(
                    "downstream \"{}\": only Server downstreams can be emulated",
                    d.name
                ));
            }
        }
    }
    let mut t = Vec::new();
    c.scenario
        .policies
        .iter()
        .for_each(|p| timeouts(&p.stack, &mut t));
    for call in c
        .scenario
        .downstreams
        .iter()
        .flat_map(|d| d.handler.iter().flat_map(|h| &h.calls))
    {
        timeouts(&call.stack, &mut t);
    }
    Ok(Size {
        peak_attempts_per_s: peak_rate * spike * most / scale,
        min_service_ms: min_service,
        min_timeout_ms: t.iter().min().map(|&ns| ns as f64 / 1e6 * scale),
        max_jobs,
        wall_s: crate::simface::buckets(c).0 as f64 / 1e9 * scale * policies as f64,
    })
}

/// Refuses sizes beyond the limits, naming each number and its limit.
pub fn check(s: &Size, max_rate: f64, max_wall_s: f64) -> Result<(), String> {
    let mut why = Vec::new();
    if s.peak_attempts_per_s > max_rate {
        why.push(format!(
            "up to {:.0} attempts per wall second (peak rate × most attempts per request ÷ time scale), above the {max_rate:.0}/s two cores drive faithfully: raise --time-scale to at least {:.2}",
            s.peak_attempts_per_s,
            s.peak_attempts_per_s / max_rate
        ));
    }
    if s.min_service_ms < MIN_WALL_MS {
        why.push(format!(
            "a mean service time of {:.2} ms of wall time, below {MIN_WALL_MS} ms (timers tick in milliseconds)",
            s.min_service_ms
        ));
    }
    if let Some(t) = s.min_timeout_ms
        && t < MIN_WALL_MS
    {
        why.push(format!(
            "a timeout of {t:.2} ms of wall time, below {MIN_WALL_MS} ms"
        ));
    }
    if s.max_jobs > MAX_JOBS {
        why.push(format!(
            "a server that may hold {} jobs (workers + queue), above {MAX_JOBS}",
            s.max_jobs
        ));
    }
    if s.wall_s > max_wall_s {
        why.push(format!(
            "{:.0} s of wall time for all policies, above the {max_wall_s:.0} s allowed (--max-wall)",
            s.wall_s
        ));
    }
    if why.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "this scenario cannot be emulated faithfully on this machine:\n  - {}",
            why.join("\n  - ")
        ))
    }
}

//! The load curves of a scenario's model, over virtual time: what its servers can complete per
//! second and what an open-loop workload offers, with the fault timeline applied. The report's
//! reference lines and the conclusion read them.
//!
//! A server's capacity is what its workers can complete per second: `workers ÷ mean service
//! time` (the mean of the service distribution; with `per_in_flight`, the service time when
//! every worker is busy and the queue is empty, `mean + per_in_flight × workers`). While faults
//! are active: a `CapacityLoss` removes `ceil(share × workers)` workers, a `LatencyInflation`
//! multiplies the service time by its factor, an `Outage` makes it 0. Error-rate and throttle
//! faults leave it unchanged (jobs are still served, or refused without using a worker).
//! Network delays do not hold a worker and do not count. With several servers the capacity is
//! the sum; registers and scripted downstreams have no capacity and are left out.

use super::dist::Sampler;
use super::faults::Timeline;
use crate::scenario::{DownstreamModel, Scenario, Workload};

/// The capacity of the servers at instant `t` (ns), in jobs per second, or `None` without
/// servers. See the module docs.
pub fn capacity_at(s: &Scenario, timeline: &Timeline, t: u64) -> Option<f64> {
    let mut total = None;
    for i in 0..s.downstreams.len() {
        if let Some(cap) = capacity_of(s, timeline, i, t) {
            *total.get_or_insert(0.0) += cap;
        }
    }
    total.filter(|v: &f64| v.is_finite())
}

/// Server `i`'s capacity at `t` (ns), or `None` if downstream `i` is not a server.
fn capacity_of(s: &Scenario, timeline: &Timeline, i: usize, t: u64) -> Option<f64> {
    let DownstreamModel::Server {
        workers,
        service,
        per_in_flight,
        ..
    } = &s.downstreams.get(i)?.model
    else {
        return None;
    };
    let lost = timeline.capacity_lost(i, t);
    let gone = (f64::from(*workers) * lost).ceil();
    let left = (f64::from(*workers) - gone).max(0.0);
    let mean = Sampler::new(service).mean_secs() * timeline.latency_factor(i, t)
        + per_in_flight.as_nanos() as f64 / 1e9 * f64::from(*workers);
    let down = timeline.on_arrival(i, t).outage.is_some();
    Some(if down || mean <= 0.0 {
        if down { 0.0 } else { f64::INFINITY }
    } else {
        left / mean
    })
}

/// Little's law for the servers at `t` (ns): the calls in flight a client sees when each server
/// runs at its capacity with no queue, `capacity × (mean service time + mean network round
/// trip)` summed over the servers (the busy workers plus the calls on the wire), with the
/// faults in force; `None` without servers or with an unbounded one.
pub fn concurrency_at(s: &Scenario, timeline: &Timeline, t: u64) -> Option<f64> {
    let mut total = None;
    for (i, d) in s.downstreams.iter().enumerate() {
        let DownstreamModel::Server { .. } = &d.model else {
            continue;
        };
        let cap = capacity_of(s, timeline, i, t)?;
        let net = Sampler::new(&d.network.request).mean_secs()
            + Sampler::new(&d.network.response).mean_secs();
        let DownstreamModel::Server {
            service,
            per_in_flight,
            workers,
            ..
        } = &d.model
        else {
            continue;
        };
        let service = Sampler::new(service).mean_secs() * timeline.latency_factor(i, t)
            + per_in_flight.as_nanos() as f64 / 1e9 * f64::from(*workers);
        *total.get_or_insert(0.0) += cap * (service + net);
    }
    total.filter(|v: &f64| v.is_finite())
}

/// The open-loop offered rate at `t` (ns): the workload's rate with its steps and load spikes,
/// or `None` for other workloads.
pub fn offered_at(s: &Scenario, timeline: &Timeline, t: u64) -> Option<f64> {
    let Workload::OpenLoop {
        rate, start, steps, ..
    } = &s.workload
    else {
        return None;
    };
    if t < start.as_nanos() {
        return Some(0.0);
    }
    let base = steps
        .iter()
        .rfind(|s| s.at.as_nanos() <= t)
        .map_or(*rate, |s| s.rate);
    Some(base * timeline.load_factor(t))
}

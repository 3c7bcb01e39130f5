//! Replicas: a downstream written with `replicas: N` becomes `N` downstreams of the run, each an
//! independent server model (its own workers, queue, random streams and handler), named
//! `name[0]` .. `name[N-1]`, behind a balancer that picks one for each attempt.
//!
//! The expansion keeps every written downstream and fault at its index (replica 0 takes the
//! written one's place, the others are appended), so an error found later still points at the
//! field as written. A call naming `name` reaches the group; a fault naming `name` hits every
//! replica (one copy per replica), one naming `name[k]` hits replica `k` only. Sizes are checked
//! here, before anything is allocated for them.

use crate::scenario::{
    Balancer, Checker, DownstreamModel, Fault, OutlierDetection, Path, RetryHost, Scenario,
    ScenarioError,
};

/// Most replicas one downstream may have.
pub const MAX_REPLICAS: u32 = 1024;

/// Most downstreams a run may have, replicas included.
pub const MAX_DOWNSTREAMS: usize = 4096;

/// Most outlier-detection sweeps over a horizon (horizon ÷ interval).
pub const MAX_SWEEPS: u64 = 10_000_000;

/// One replicated downstream of a run.
#[derive(Clone, Debug)]
pub(crate) struct Group {
    /// The name calls use.
    pub name: String,
    /// The run's downstream indices of its replicas, replica 0 first.
    pub members: Vec<u16>,
    /// How an attempt picks a replica.
    pub balancer: Balancer,
    /// Outlier detection over its replicas.
    pub outlier: Option<OutlierDetection>,
    /// Where a request's later attempts go.
    pub retry_host: RetryHost,
}

/// The name of replica `k` of `name`.
pub fn replica_name(name: &str, k: u32) -> String {
    format!("{name}[{k}]")
}

/// Whether `s` writes replicas (or a balancer, outlier detection or a retry host, which
/// [`expand`] checks need them).
pub(crate) fn has_replicas(s: &Scenario) -> bool {
    s.downstreams.iter().any(|d| {
        d.replicas.is_some()
            || d.balancer.is_some()
            || d.outlier_detection.is_some()
            || d.retry_host.is_some()
    })
}

/// `s` with its replicated downstreams expanded, and the groups; `s` itself (no groups) when no
/// downstream has replicas.
pub(crate) fn expand(
    mut s: Scenario,
    text: &str,
    file: &str,
    root: &Path,
) -> Result<(Scenario, Vec<Group>), ScenarioError> {
    if !has_replicas(&s) {
        return Ok((s, Vec::new()));
    }
    let c = Checker::new(&s, text, file);
    let d = root.field("downstreams");
    let mut total = s.downstreams.len();
    for (i, ds) in s.downstreams.iter().enumerate() {
        let p = d.index(i);
        let Some(n) = ds.replicas else {
            if ds.balancer.is_some() {
                return Err(c.fail(
                    &p.field("balancer"),
                    "a balancer with no replicas: expected `replicas: N` beside it, or no balancer",
                ));
            }
            if ds.outlier_detection.is_some() {
                return Err(c.fail(
                    &p.field("outlier_detection"),
                    "outlier detection with no replicas: expected `replicas: N` beside it",
                ));
            }
            if ds.retry_host.is_some() {
                return Err(c.fail(
                    &p.field("retry_host"),
                    "a retry host with no replicas: expected `replicas: N` beside it",
                ));
            }
            continue;
        };
        if let Some(od) = &ds.outlier_detection {
            let o = p.field("outlier_detection");
            for (field, v) in [
                ("interval", od.interval),
                ("base_ejection_time", od.base_ejection_time),
                ("max_ejection_time", od.max_ejection_time),
            ] {
                c.positive(&o.field(field), v, "a duration")?;
            }
            let sweeps = s.horizon.as_nanos() / od.interval.as_nanos().max(1);
            if sweeps > MAX_SWEEPS {
                return Err(c.fail(
                    &o.field("interval"),
                    format!(
                        "{} over a horizon of {} is {sweeps} sweeps, more than {MAX_SWEEPS}: expected a longer interval",
                        od.interval, s.horizon
                    ),
                ));
            }
            if od.max_ejection_percent > 100 {
                return Err(c.fail(
                    &o.field("max_ejection_percent"),
                    format!(
                        "{}: expected a percentage in [0, 100]",
                        od.max_ejection_percent
                    ),
                ));
            }
        }
        let at = p.field("replicas");
        if n == 0 {
            return Err(c.fail(
                &at,
                "0 replicas: a balancer over no replicas has nowhere to send; expected at least 1",
            ));
        }
        if n > MAX_REPLICAS {
            return Err(c.fail(
                &at,
                format!("{n} replicas, more than {MAX_REPLICAS}: expected fewer"),
            ));
        }
        if !matches!(ds.model, DownstreamModel::Server { .. }) {
            return Err(c.fail(
                &at,
                "replicas of a model other than Server: expected a Server model",
            ));
        }
        total += n as usize - 1;
        if total > MAX_DOWNSTREAMS {
            return Err(c.fail(
                &at,
                format!(
                    "{total} downstreams with replicas counted, more than {MAX_DOWNSTREAMS}: expected fewer replicas"
                ),
            ));
        }
    }
    let written = s.downstreams.len();
    let mut groups = Vec::new();
    for i in 0..written {
        let Some(n) = s.downstreams[i].replicas.take() else {
            continue;
        };
        let balancer = s.downstreams[i].balancer.take().unwrap_or_default();
        let outlier = s.downstreams[i].outlier_detection.take();
        let retry_host = s.downstreams[i].retry_host.take().unwrap_or_default();
        let name = s.downstreams[i].name.clone();
        let mut members = vec![i as u16];
        s.downstreams[i].name = replica_name(&name, 0);
        for k in 1..n {
            let mut copy = s.downstreams[i].clone();
            copy.name = replica_name(&name, k);
            members.push(s.downstreams.len() as u16);
            s.downstreams.push(copy);
        }
        // Faults naming the group hit every replica.
        let faults = s.faults.len();
        for f in 0..faults {
            if s.faults[f].downstream() == Some(name.as_str()) {
                if s.faults.len() + n as usize - 1 > usize::from(u16::MAX) {
                    return Err(c.fail(
                        &root.field("faults").index(f).field("downstream"),
                        format!(
                            "more than {} faults with one per replica counted: expected fewer faults or replicas",
                            u16::MAX
                        ),
                    ));
                }
                set_downstream(&mut s.faults[f], replica_name(&name, 0));
                for k in 1..n {
                    let mut copy = s.faults[f].clone();
                    set_downstream(&mut copy, replica_name(&name, k));
                    s.faults.push(copy);
                }
            }
        }
        groups.push(Group {
            name,
            members,
            balancer,
            outlier,
            retry_host,
        });
    }
    Ok((s, groups))
}

fn set_downstream(f: &mut Fault, name: String) {
    match f {
        Fault::Outage { downstream, .. }
        | Fault::Partition { downstream, .. }
        | Fault::ErrorRate { downstream, .. }
        | Fault::LatencyInflation { downstream, .. }
        | Fault::CapacityLoss { downstream, .. }
        | Fault::Throttle { downstream, .. } => *downstream = name,
        Fault::LoadSpike { .. } => {}
    }
}

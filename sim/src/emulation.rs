//! What running a scenario for real needs from the simulator (the `emulate` crate): the same
//! arrivals, the same server model and fault timeline, the same recorder and summary definitions,
//! so that an emulated run differs from a simulated one only in what is real (time, sockets, the
//! client layers), and its report can be rendered by [`report`](crate::report) like any other.
//!
//! These are the simulator's own components, driven from outside in real time: the caller owns
//! the clock (virtual nanoseconds since the run's start) and calls the recorder as events happen.
//!
//! ```
//! let c = sim::load(r#"Scenario(name: "t", horizon: "2s", workload: OpenLoop(rate: 10.0),
//!     downstreams: [(name: "api", model: Server(workers: 1, service: Constant("10ms")))],
//!     policies: [(name: "p", stack: Call(downstream: "api", timeout: "1s"))])"#, "t.ron")?;
//! let mut arrivals = sim::emulation::arrivals(&c, 1).expect("an open loop");
//! let (first, _client) = arrivals.next(sim::emulation::timeline(&c)).expect("an arrival");
//! assert!(first < 2_000_000_000);
//! # Ok::<(), sim::scenario::ScenarioError>(())
//! ```

use reliable_core::Duration;
use reliable_core::budget::Denied;
use reliable_core::retry::GiveUpReason;

pub use crate::engine::{Handle, Stream, StreamId};
pub use crate::metrics::recorder::Recorder;
pub use crate::model::Sampler;
pub use crate::model::faults::Timeline;
pub use crate::model::server::{Admission, Job, Server, Started};
pub use crate::workload::OpenLoop;

/// The simulator's model of a fleet's retry budget, for a check against `reliable::fleet`'s
/// `FleetBudget` driven by the same calls (the conformance suite's): a client's state, the budgets
/// it draws from, the store it reaches.
pub mod fleet_budget {
    pub use crate::client::budgets::BudgetSlot;
    pub use crate::client::fleet::StoreSim;
    pub use crate::client::fleet_budget::{FleetBudgetClient, FleetBudgetCounters, FleetRetries};
}

use crate::compile::Compiled;
pub use crate::metrics::extra::{ByKind, ExtraCounters, LedgerCounts};
use crate::metrics::summary::{Context, percentile_curve, summarize};
use crate::run::RunOutput;
use crate::scenario::Workload;
use crate::scenario::{Balancer, OutlierDetection, RetryHost};

/// The fault timeline.
pub fn timeline(c: &Compiled) -> &Timeline {
    &c.timeline
}

/// A replicated downstream of a run: the name calls use, its replicas' downstream indices
/// (replica 0 first), how an attempt picks one, outlier detection and where later attempts go.
#[derive(Clone, Copy, Debug)]
pub struct ReplicaGroup<'a> {
    /// The name calls use.
    pub name: &'a str,
    /// The run's downstream indices of its replicas, replica 0 first.
    pub members: &'a [u16],
    /// How an attempt picks a replica.
    pub balancer: Balancer,
    /// Outlier detection over its replicas.
    pub outlier: Option<&'a OutlierDetection>,
    /// Where a request's later attempts go.
    pub retry_host: RetryHost,
}

/// The call graph's shape for policy `policy` of `c`, as a run of it sees it (`None` when no
/// downstream is a service): per downstream, its depth from the edge (`u32::MAX`: unreachable)
/// and the deadline margin it takes off its caller's deadline if it honours deadlines (ns;
/// `Some(0)`: it only receives them).
pub fn graph_shape(c: &Compiled, policy: usize) -> Option<(Vec<u32>, Vec<Option<u64>>)> {
    let stack = c.stacks.get(policy.min(c.stacks.len().saturating_sub(1)))?;
    crate::run::world::graph_shape(c, stack)
}

/// The replicated downstreams of `c`, in the order the balancers' random streams are numbered
/// (`StreamId::Balancer(g)` for group `g`).
pub fn groups(c: &Compiled) -> Vec<ReplicaGroup<'_>> {
    c.groups
        .iter()
        .map(|g| ReplicaGroup {
            name: &g.name,
            members: &g.members,
            balancer: g.balancer,
            outlier: g.outlier.as_ref(),
            retry_host: g.retry_host,
        })
        .collect()
}

/// Retry-After hints by fault index (throttle faults).
pub fn hints(c: &Compiled) -> &[Duration] {
    &c.hints
}

/// The horizon, the bucket width (both in ns) and the number of buckets.
pub fn buckets(c: &Compiled) -> (u64, u64, usize) {
    (c.horizon_ns, c.bucket_ns, c.buckets)
}

/// Downstream names, by index.
pub fn downstreams(c: &Compiled) -> &[String] {
    &c.ds_names
}

/// Clients of the workload.
pub fn clients(c: &Compiled) -> u32 {
    c.clients()
}

/// An empty recorder for a run of `c`.
pub fn recorder(c: &Compiled) -> Recorder {
    Recorder::new(c.buckets, c.bucket_ns, c.ds_names.len(), c.timeline.span())
}

/// An empty recorder for a run of policy `policy` of `c`: with hedging, ledger and limiter
/// counters when its stack has a `Hedge`, `Ledger`, `Limit` or `RateLimit` layer, as a simulated
/// run keeps.
pub fn recorder_for(c: &Compiled, policy: usize) -> Recorder {
    let mut rec = recorder(c);
    if c.stacks.get(policy).is_some_and(|s| s.counts_extra()) {
        rec.extra = Some(crate::metrics::extra::ExtraCounters::new(c.buckets));
    }
    rec
}

/// The open-loop arrivals of `c` under `seed`, exactly as a simulated run draws them (`None` for
/// other workloads).
pub fn arrivals(c: &Compiled, seed: u64) -> Option<OpenLoop> {
    match &c.scenario.workload {
        Workload::OpenLoop {
            rate,
            arrivals,
            clients,
            start,
            steps,
        } => Some(OpenLoop::new(
            seed,
            *rate,
            *arrivals,
            *clients,
            start.as_nanos(),
            steps,
            c.horizon_ns,
        )),
        _ => None,
    }
}

/// Downstream `i` as a simulated run starts it, if it is a `Server`.
pub fn server(c: &Compiled, i: usize, seed: u64) -> Option<Server> {
    Server::from_model(&c.scenario.downstreams.get(i)?.model, i as u16, seed)
}

/// Counts a retry layer giving up, by the core's reason name (`max-attempts`, `budget`, ...);
/// an unknown name counts nothing.
pub fn give_up(r: &mut Recorder, name: &str) {
    let reason = match name {
        "fatal" => GiveUpReason::Fatal,
        "dont-retry" => GiveUpReason::DontRetry,
        "timeout-not-retried" => GiveUpReason::TimeoutNotRetried,
        "refused" => GiveUpReason::Refused,
        "max-attempts" => GiveUpReason::MaxAttempts,
        "deadline" => GiveUpReason::Deadline,
        // Counted by reason, whichever budget refused.
        "budget" => GiveUpReason::Budget(Denied::Ratio),
        "finished" => GiveUpReason::Finished,
        _ => return,
    };
    r.give_up(reason);
}

/// The output of a run of policy `policy` under `seed` from its recorder, summarised by the
/// simulator's own definitions; `ledger`: the ledgers' counts summed, for a stack with a
/// `Ledger` (a stack with a `Limit` reports its limits and admitted concurrency).
pub fn finish(
    c: &Compiled,
    policy: usize,
    seed: u64,
    rec: Recorder,
    unfinished: u64,
    peak_in_flight: u64,
    ledger: Option<LedgerCounts>,
) -> RunOutput {
    let limited = c.stacks.get(policy).is_some_and(|s| !s.limits.is_empty());
    let s = &c.scenario;
    let scheduled = arrivals(c, seed).map(|src| src.scheduled(&c.timeline, c.bucket_ns, c.buckets));
    let cx = Context {
        name: &s.policies[policy].name,
        seed,
        horizon_ns: c.horizon_ns,
        bucket_ns: c.bucket_ns,
        fault: c.timeline.span(),
        threshold: s.recovery.threshold,
        relapse: s.recovery.relapse,
        settle: s.recovery.settle,
        sustain_ns: s.recovery.sustain.as_nanos(),
        unfinished,
        makespan_ns: None,
        events: 0,
        ds_names: &c.ds_names,
        register: vec![None; c.ds_names.len()],
        scheduled,
        ledger,
        limited,
    };
    let mut summary = summarize(&rec, &cx);
    summary.peak_in_flight = peak_in_flight;
    RunOutput {
        summary,
        latency_curve: percentile_curve(&rec.latency),
        far_tail: Vec::new(),
        buckets: rec.buckets,
        trace: None,
        peak_events: 0,
        peak_requests: peak_in_flight as usize,
        peak_attempts: 0,
        limits: match rec.extra {
            Some(e) if limited => e.limits,
            _ => Vec::new(),
        },
        depth_arrivals: Vec::new(),
    }
}

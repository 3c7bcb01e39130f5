//! [`Compiled`]: a validated scenario turned into what runs need, built once and shared (read-only)
//! by every (policy, seed) run, including the core policies that breakers borrow.

use reliable_core::Duration;

use crate::client::CompiledStack;
use crate::model::faults::Timeline;
use crate::scenario::{DownstreamModel, Fault, Scenario, ScriptAnswer};

/// A scenario ready to run.
#[derive(Clone, Debug)]
pub struct Compiled {
    /// The scenario.
    pub scenario: Scenario,
    /// One compiled stack per policy, in file order.
    pub stacks: Vec<CompiledStack>,
    /// Downstream names, by index.
    pub ds_names: Vec<String>,
    /// The fault timeline.
    pub timeline: Timeline,
    /// Retry-After hints by index: fault throttles (at their fault index), then scripted ones.
    pub hints: Vec<Duration>,
    /// Horizon, ns.
    pub horizon_ns: u64,
    /// Bucket width, ns.
    pub bucket_ns: u64,
    /// Number of buckets.
    pub buckets: usize,
}

impl Compiled {
    /// Compiles a scenario that passed [`validate`](crate::scenario::validate).
    pub fn new(scenario: Scenario) -> Result<Self, String> {
        let ds_names: Vec<String> = scenario
            .downstreams
            .iter()
            .map(|d| d.name.clone())
            .collect();
        let index = |n: &str| ds_names.iter().position(|x| x == n).map(|i| i as u16);
        let mut stacks = Vec::with_capacity(scenario.policies.len());
        for p in &scenario.policies {
            let mut s = CompiledStack::compile(&p.stack, &index)
                .map_err(|e| format!("policy \"{}\": {e}", p.name))?;
            s.name_calls(&ds_names);
            stacks.push(s);
        }
        let mut hints: Vec<Duration> = scenario
            .faults
            .iter()
            .map(|f| match f {
                Fault::Throttle { retry_after, .. } => *retry_after,
                _ => Duration::ZERO,
            })
            .collect();
        for d in &scenario.downstreams {
            if let DownstreamModel::Scripted { script, then, .. } = &d.model {
                for a in script.iter().chain(std::iter::once(then)) {
                    if let ScriptAnswer::Throttled(h) = a
                        && !hints.contains(h)
                    {
                        hints.push(*h);
                    }
                }
            }
        }
        if hints.len() > usize::from(u16::MAX) {
            return Err("too many distinct Retry-After hints".into());
        }
        let horizon_ns = scenario.horizon.as_nanos();
        let bucket_ns = scenario.bucket.as_nanos().max(1);
        let buckets = horizon_ns.div_ceil(bucket_ns).max(1) as usize;
        Ok(Compiled {
            timeline: Timeline::new(&scenario),
            scenario,
            stacks,
            ds_names,
            hints,
            horizon_ns,
            bucket_ns,
            buckets,
        })
    }

    /// The index of hint `d`.
    pub fn hint_index(&self, d: Duration) -> u16 {
        self.hints.iter().position(|h| *h == d).unwrap_or(0) as u16
    }

    /// Number of clients of the workload.
    pub fn clients(&self) -> u32 {
        match &self.scenario.workload {
            crate::scenario::Workload::OpenLoop { clients, .. } => *clients,
            crate::scenario::Workload::ClosedLoop { clients, .. } => *clients,
            crate::scenario::Workload::JobSet { clients, .. } => *clients,
        }
    }
}

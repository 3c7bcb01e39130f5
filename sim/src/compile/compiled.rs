//! [`Compiled`]: a checked scenario turned into what runs need, built once by
//! the compile stage and shared (read-only) by every (policy, seed) run, including the core
//! policies that breakers borrow.

use std::collections::HashSet;

use reliable_core::Duration;

use crate::client::CompiledStack;
use crate::model::capacity;
use crate::model::faults::Timeline;
use crate::scenario::{
    DownstreamModel, Fault, Path, Scenario, ScenarioError, ScriptAnswer, SweepValue, Workload,
    locate, sweep,
};

/// Most distinct Retry-After hints a scenario may use (they are indexed by `u16`).
pub(crate) const MAX_HINTS: usize = u16::MAX as usize;

/// A scenario ready to run: what [`compile_all`](super::compile_all) (and [`crate::load()`]) returns.
#[derive(Clone, Debug)]
pub struct Compiled {
    /// The scenario as written (readable by tools that run it elsewhere).
    pub scenario: Scenario,
    /// One compiled stack per policy, in file order.
    pub(crate) stacks: Vec<CompiledStack>,
    /// Downstream names, by index.
    pub(crate) ds_names: Vec<String>,
    /// The fault timeline.
    pub(crate) timeline: Timeline,
    /// Retry-After hints by index: fault throttles (at their fault index), then scripted ones.
    pub(crate) hints: Vec<Duration>,
    /// Scripted downstreams' `Status` answers by index.
    pub(crate) statuses: Vec<reliable_core::answer::Answer>,
    /// The index in `statuses` of the do-not-retry answer a service that gave up sends (503,
    /// `x-should-retry: false`), when a handler asks for it.
    pub(crate) no_retry_status: u16,
    /// Horizon, ns.
    pub(crate) horizon_ns: u64,
    /// Bucket width, ns.
    pub(crate) bucket_ns: u64,
    /// Number of buckets.
    pub(crate) buckets: usize,
    /// Where the scenario was read from, to point at fields in later errors.
    pub(crate) origin: Origin,
    /// Replicated downstreams: their replicas and balancers.
    pub(crate) groups: Vec<super::replicas::Group>,
    /// Per downstream: the index of its group in `groups`, or `u16::MAX`.
    pub(crate) group_of: Vec<u16>,
    /// The scenario before its replicas were expanded, when it has any (`scenario` otherwise):
    /// what a sweep's parameter paths name and its variants are made from.
    pub(crate) written: Option<std::sync::Arc<Scenario>>,
}

/// Where a compiled scenario came from: the file's name and text and the scenario's path in it.
#[derive(Clone, Debug, Default)]
pub(crate) struct Origin {
    /// The file, as shown in messages.
    pub file: String,
    /// Its text (empty for a scenario built in code).
    pub text: std::sync::Arc<str>,
    /// The scenario's path in the file.
    pub root: Path,
}

impl Origin {
    /// An error at `field`, with its position when the text has it.
    pub fn fail(&self, field: &Path, message: String) -> ScenarioError {
        ScenarioError::Invalid {
            path: self.file.clone(),
            position: locate(&self.text, field),
            field: field.to_string(),
            message,
        }
    }
}

/// The distinct Retry-After hints of scripted downstreams, in order of first use.
pub(crate) fn scripted_hints(scenario: &Scenario) -> Vec<Duration> {
    let mut seen = HashSet::new();
    let mut hints = Vec::new();
    for d in &scenario.downstreams {
        if let DownstreamModel::Scripted { script, then, .. } = &d.model {
            for a in script.iter().chain(std::iter::once(then)) {
                if let ScriptAnswer::Throttled(h) = a
                    && seen.insert(*h)
                {
                    hints.push(*h);
                }
            }
        }
    }
    hints
}

/// The distinct `Status` answers of scripted downstreams, in order of first use.
pub(crate) fn scripted_statuses(scenario: &Scenario) -> Vec<reliable_core::answer::Answer> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for d in &scenario.downstreams {
        if let DownstreamModel::Scripted { script, then, .. } = &d.model {
            for a in script.iter().chain(std::iter::once(then)) {
                if let Some(s) = a.status()
                    && seen.insert(s)
                {
                    out.push(s);
                }
            }
        }
    }
    out
}

impl Compiled {
    /// Puts together a scenario and the stacks the compile stage's checks compiled for it.
    pub(crate) fn build(
        scenario: Scenario,
        mut stacks: Vec<CompiledStack>,
        origin: Origin,
        groups: Vec<super::replicas::Group>,
        written: Option<Scenario>,
    ) -> Self {
        let ds_names: Vec<String> = scenario
            .downstreams
            .iter()
            .map(|d| d.name.clone())
            .collect();
        for s in &mut stacks {
            s.name_calls(&ds_names);
        }
        let mut hints: Vec<Duration> = scenario
            .faults
            .iter()
            .map(|f| match f {
                Fault::Throttle { retry_after, .. } => *retry_after,
                _ => Duration::ZERO,
            })
            .collect();
        hints.extend(scripted_hints(&scenario));
        let mut statuses = scripted_statuses(&scenario);
        // A service that gave up answers 503 with `x-should-retry: false`.
        let no_retry = ScriptAnswer::Status {
            status: 503,
            retry_after: None,
            should_retry: Some(false),
        }
        .status();
        let no_retry_status = match no_retry {
            Some(a)
                if scenario
                    .downstreams
                    .iter()
                    .any(|d| d.handler.as_ref().is_some_and(|h| h.no_retry_on_failure)) =>
            {
                if !statuses.contains(&a) {
                    statuses.push(a);
                }
                statuses.iter().position(|s| *s == a).unwrap_or(0) as u16
            }
            _ => 0,
        };
        let horizon_ns = scenario.horizon.as_nanos();
        let bucket_ns = scenario.bucket.as_nanos().max(1);
        let buckets = horizon_ns.div_ceil(bucket_ns).max(1) as usize;
        let mut group_of = vec![u16::MAX; scenario.downstreams.len()];
        for (g, group) in groups.iter().enumerate() {
            for &m in &group.members {
                group_of[usize::from(m)] = g as u16;
            }
        }
        Compiled {
            timeline: Timeline::new(&scenario),
            scenario,
            stacks,
            ds_names,
            hints,
            statuses,
            no_retry_status,
            horizon_ns,
            bucket_ns,
            buckets,
            origin,
            groups,
            group_of,
            written: written.map(std::sync::Arc::new),
        }
    }

    /// The scenario as written, before its replicas (if any) became downstreams of their own:
    /// what sweep and map paths name (`downstreams[api]` for all of `api`'s replicas).
    pub fn written(&self) -> &Scenario {
        self.written.as_deref().unwrap_or(&self.scenario)
    }

    /// This scenario with `parameter` (a path as in error messages, `downstreams[api].model.error_rate`)
    /// set to `value`, checked and compiled again: one point of a sweep.
    pub fn with_value(
        &self,
        parameter: &str,
        value: &SweepValue,
    ) -> Result<Compiled, ScenarioError> {
        let shown = format!("{} ({parameter} = {value})", self.origin.file);
        let s = sweep::variant(self.written(), parameter, value).map_err(|message| {
            ScenarioError::Invalid {
                path: shown.clone(),
                position: None,
                field: parameter.to_string(),
                message,
            }
        })?;
        super::compile(s, &shown, &super::Limits::default())
    }

    /// The capacity of the servers at instant `t` (ns), in jobs per second, or `None` without
    /// servers: the model's capacity curve with this scenario's faults.
    pub fn capacity_at(&self, t: u64) -> Option<f64> {
        capacity::capacity_at(&self.scenario, &self.timeline, t)
    }

    /// Little's law for the servers at `t` (ns): the calls in flight at capacity with no queue
    /// (capacity × (mean service time + mean network round trip), summed over the servers, with
    /// the faults in force), or `None` without servers.
    pub fn concurrency_at(&self, t: u64) -> Option<f64> {
        capacity::concurrency_at(&self.scenario, &self.timeline, t)
    }

    /// The open-loop offered rate at `t` (ns), or `None` for other workloads
    /// (the model's offered-load curve).
    pub fn offered_at(&self, t: u64) -> Option<f64> {
        capacity::offered_at(&self.scenario, &self.timeline, t)
    }

    /// The index of scripted status `a`.
    pub(crate) fn status_index(&self, a: reliable_core::answer::Answer) -> u16 {
        self.statuses.iter().position(|s| *s == a).unwrap_or(0) as u16
    }

    /// The index of hint `d`.
    pub(crate) fn hint_index(&self, d: Duration) -> u16 {
        self.hints.iter().position(|h| *h == d).unwrap_or(0) as u16
    }

    /// Number of clients of the workload.
    pub(crate) fn clients(&self) -> u32 {
        match &self.scenario.workload {
            Workload::OpenLoop { clients, .. } => *clients,
            Workload::ClosedLoop { clients, .. } => *clients,
            Workload::JobSet { clients, .. } => *clients,
        }
    }
}

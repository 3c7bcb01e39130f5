//! Running a sweep: every value of the swept parameter × every policy × every seed, and the
//! per-value, per-policy figures (rendered by [`report::sweep`](crate::report::sweep)).
//!
//! Each value is its own scenario (see [`crate::scenario::Compiled::with_value`]), run with the same seeds, so a
//! policy's arrivals are identical from one value to the next and differences between values are
//! not arrival noise. Figures are means over the seeds, with their sample standard deviation.

use crate::metrics::{PolicySummary, Verdicts};
use crate::run::{BatchOptions, run_all};
use crate::scenario::sweep::{label, variant};
use crate::scenario::{Scenario, Sweep, SweepValue};
use crate::stats::mean_sd;

/// One policy at one value, over the seeds.
#[derive(Clone, Debug, PartialEq)]
pub struct SweepCell {
    /// The policy's name.
    pub policy: String,
    /// Every seed's summary, in seed order.
    pub runs: Vec<PolicySummary>,
}

impl SweepCell {
    fn stat(&self, f: impl Fn(&PolicySummary) -> f64) -> (f64, f64) {
        mean_sd(&self.runs.iter().map(f).collect::<Vec<_>>())
    }

    /// Load: server arrivals ÷ first tries (overall amplification), mean and standard deviation.
    pub fn load(&self) -> (f64, f64) {
        self.stat(|s| s.amplification.overall)
    }

    /// Client success rate, mean and standard deviation.
    pub fn success(&self) -> (f64, f64) {
        self.stat(|s| s.success_rate)
    }

    /// Mean of a count over the seeds.
    pub fn mean_count(&self, f: impl Fn(&PolicySummary) -> u64) -> f64 {
        self.stat(|s| f(s) as f64).0
    }

    /// Job sets: the time the last job succeeded, mean and standard deviation over the seeds in
    /// which every job succeeded (`None` if none did).
    pub fn makespan(&self) -> Option<(f64, f64)> {
        let xs: Vec<f64> = self.runs.iter().filter_map(|s| s.makespan_s).collect();
        (!xs.is_empty()).then(|| mean_sd(&xs))
    }

    /// How many seeds got each verdict.
    pub fn verdicts(&self) -> Verdicts {
        Verdicts::count(self.runs.iter().map(|r| r.verdict))
    }
}

/// A finished sweep.
#[derive(Clone, Debug, PartialEq)]
pub struct SweepResult {
    /// The scenario's name.
    pub scenario: String,
    /// The swept parameter's path.
    pub parameter: String,
    /// Its short name.
    pub label: String,
    /// The seeds every value ran under.
    pub seeds: Vec<u64>,
    /// Whether the workload is a job set (then calls and makespan are the headline, not load and
    /// success).
    pub job_set: bool,
    /// Per value, in sweep order: the value and its cells, in policy order.
    pub rows: Vec<(SweepValue, Vec<SweepCell>)>,
}

/// Runs `s` once per value of `sweep`, every policy under every seed.
pub fn run_sweep(
    s: &Scenario,
    sweep: &Sweep,
    seeds: &[u64],
    opts: BatchOptions,
) -> Result<SweepResult, String> {
    let mut rows = Vec::with_capacity(sweep.values.len());
    for value in &sweep.values {
        let v = variant(s, &sweep.parameter, value)?;
        let c = crate::scenario::compile(
            v,
            &format!("{} = {value}", sweep.parameter),
            &crate::scenario::Limits::default(),
        )
        .map_err(|e| e.to_string())?;
        let results = run_all(&c, seeds, opts)?;
        let cells = (0..c.stacks.len())
            .map(|p| SweepCell {
                policy: c.scenario.policies[p].name.clone(),
                runs: results
                    .iter()
                    .filter(|r| r.policy == p)
                    .map(|r| r.output.summary.clone())
                    .collect(),
            })
            .collect();
        rows.push((value.clone(), cells));
    }
    Ok(SweepResult {
        scenario: s.name.clone(),
        parameter: sweep.parameter.clone(),
        label: label(sweep),
        seeds: seeds.to_vec(),
        job_set: matches!(s.workload, crate::scenario::Workload::JobSet { .. }),
        rows,
    })
}

impl SweepResult {
    /// The policies, in order.
    pub fn policies(&self) -> Vec<&str> {
        self.rows
            .first()
            .map(|(_, cells)| cells.iter().map(|c| c.policy.as_str()).collect())
            .unwrap_or_default()
    }

    /// The cell of `policy` at value index `i`.
    pub fn cell(&self, i: usize, policy: &str) -> Option<&SweepCell> {
        self.rows.get(i)?.1.iter().find(|c| c.policy == policy)
    }
}

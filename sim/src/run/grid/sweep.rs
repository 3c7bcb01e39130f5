//! Running a sweep: every value of the swept parameter × every policy × every seed, and the
//! per-value, per-policy figures (rendered by [`report::grid::sweep`](crate::report::grid::sweep)).
//!
//! Each value is its own scenario (see [`Compiled::with_value`]), run with the same seeds, so a
//! policy's arrivals are identical from one value to the next and differences between values are
//! not arrival noise. Figures are means over the seeds, with their sample standard deviation.

use crate::compile::Compiled;
use crate::metrics::{PolicySummary, Verdicts};
use crate::run::grid::{RawRun, run_grid, variants};
use crate::run::{BatchOptions, RunError};
use crate::scenario::sweep::label;
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

/// Runs `c` once per value of `sweep`, every policy under every seed, as one parallel batch.
pub fn run_sweep(
    c: &Compiled,
    sweep: &Sweep,
    seeds: &[u64],
    opts: BatchOptions,
) -> Result<SweepResult, RunError> {
    let axes = [sweep.clone()];
    let points = variants(c, &axes)?;
    let runs = run_grid(&points, seeds, opts)?;
    Ok(SweepResult::from_runs(&c.scenario, sweep, seeds, runs))
}

impl SweepResult {
    /// Puts together the runs of a sweep of `s` over `sweep`, ordered by value, seed, policy (as
    /// [`run_grid`] returns them and `sim merge` sorts them).
    pub(crate) fn from_runs(s: &Scenario, sweep: &Sweep, seeds: &[u64], runs: Vec<RawRun>) -> Self {
        let mut rows: Vec<(SweepValue, Vec<SweepCell>)> = sweep
            .values
            .iter()
            .map(|v| {
                let cells = s
                    .policies
                    .iter()
                    .map(|p| SweepCell {
                        policy: p.name.clone(),
                        runs: Vec::with_capacity(seeds.len()),
                    })
                    .collect();
                (v.clone(), cells)
            })
            .collect();
        for r in runs {
            if let Some(c) = rows
                .get_mut(r.point as usize)
                .and_then(|(_, cells)| cells.get_mut(r.policy as usize))
            {
                c.runs.push(r.summary);
            }
        }
        SweepResult {
            scenario: s.name.clone(),
            parameter: sweep.parameter.clone(),
            label: label(sweep),
            seeds: seeds.to_vec(),
            job_set: matches!(s.workload, crate::scenario::Workload::JobSet { .. }),
            rows,
        }
    }

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

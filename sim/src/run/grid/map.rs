//! A map: the scenario over a grid of two parameters × policies × seeds, and per cell and policy
//! the figures `sim map` draws (rendered by `report::grid::map`).
//!
//! Per cell and policy, over the seeds:
//! - **stuck share**: runs whose verdict is `stuck` ÷ runs;
//! - **recovery time**: the median of the runs' recovery times, a run that did not recover
//!   (stuck or inconclusive) counting as longer than any that did; `None` (off the scale: "not
//!   back") when fewer than half the runs recovered;
//! - load (server arrivals ÷ first tries) and success rate, means.
//!
//! The **vulnerable region** is the set of cells in which at least one seed stayed stuck: a fault
//! of that size at that load can tip the system into a state it does not leave by itself. The
//! **cliff** of a policy, per value of the first axis, is the smallest value of the second axis at
//! which at least half the seeds stay stuck.

use crate::metrics::{PolicySummary, Verdict};
use crate::run::grid::RawRun;
use crate::scenario::{Scenario, Sweep};
use crate::stats::mean;

/// One policy in one cell, over the seeds.
#[derive(Clone, Debug, PartialEq)]
pub struct MapCell {
    /// Every seed's summary, in seed order.
    pub runs: Vec<PolicySummary>,
}

impl MapCell {
    /// Runs with verdict `v`.
    pub fn count(&self, v: Verdict) -> usize {
        self.runs.iter().filter(|r| r.verdict == v).count()
    }

    /// Stuck runs ÷ runs (0 for none).
    pub fn stuck_share(&self) -> f64 {
        if self.runs.is_empty() {
            return 0.0;
        }
        self.count(Verdict::Stuck) as f64 / self.runs.len() as f64
    }

    /// The median recovery time, runs that did not recover counting as the longest; `None` when
    /// fewer than half recovered (see the module docs).
    pub fn median_recovery(&self) -> Option<f64> {
        let mut t: Vec<f64> = self
            .runs
            .iter()
            .map(|r| r.recovery_s.unwrap_or(f64::INFINITY))
            .collect();
        if t.is_empty() {
            return None;
        }
        t.sort_by(f64::total_cmp);
        let n = t.len();
        let m = if n % 2 == 1 {
            t[n / 2]
        } else {
            (t[n / 2 - 1] + t[n / 2]) / 2.0
        };
        m.is_finite().then_some(m)
    }

    /// Mean of `f` over the runs.
    pub fn mean(&self, f: impl Fn(&PolicySummary) -> f64) -> f64 {
        mean(&self.runs.iter().map(f).collect::<Vec<_>>())
    }

    /// Mean, smallest and largest recovery time of the runs that recovered.
    pub fn recovered_times(&self) -> Option<(f64, f64, f64)> {
        let t: Vec<f64> = self.runs.iter().filter_map(|r| r.recovery_s).collect();
        if t.is_empty() {
            return None;
        }
        let lo = t.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = t.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        Some((mean(&t), lo, hi))
    }
}

/// A finished map.
#[derive(Clone, Debug, PartialEq)]
pub struct MapResult {
    /// The scenario as run (for its name, description and policies).
    pub scenario: Scenario,
    /// The horizontal axis (first parameter).
    pub x: Sweep,
    /// The vertical axis (second parameter).
    pub y: Sweep,
    /// The seeds every cell ran under.
    pub seeds: Vec<u64>,
    /// Per cell (`y index × columns + x index`), per policy.
    pub cells: Vec<Vec<MapCell>>,
}

impl MapResult {
    /// Puts together the runs of a map over `x` and `y`, ordered by point, seed, policy (as
    /// [`run_grid`](crate::run::grid::run_grid) returns them and `sim merge` sorts them).
    pub fn from_runs(
        scenario: &Scenario,
        x: &Sweep,
        y: &Sweep,
        seeds: &[u64],
        runs: Vec<RawRun>,
    ) -> Self {
        let np = scenario.policies.len();
        let n = x.values.len() * y.values.len();
        let mut cells: Vec<Vec<MapCell>> = (0..n)
            .map(|_| vec![MapCell { runs: Vec::new() }; np])
            .collect();
        for r in runs {
            if let Some(c) = cells
                .get_mut(r.point as usize)
                .and_then(|c| c.get_mut(r.policy as usize))
            {
                c.runs.push(r.summary);
            }
        }
        MapResult {
            scenario: scenario.clone(),
            x: x.clone(),
            y: y.clone(),
            seeds: seeds.to_vec(),
            cells,
        }
    }

    /// The policies' names, in order.
    pub fn policies(&self) -> Vec<&str> {
        self.scenario
            .policies
            .iter()
            .map(|p| p.name.as_str())
            .collect()
    }

    /// The cell at `(xi, yi)` for policy `p`.
    pub fn cell(&self, xi: usize, yi: usize, p: usize) -> &MapCell {
        &self.cells[yi * self.x.values.len() + xi][p]
    }

    /// Per value of x, the index of the smallest y at which at least half the seeds of policy `p`
    /// stay stuck (`None`: not in this grid).
    pub fn cliff(&self, p: usize) -> Vec<Option<usize>> {
        (0..self.x.values.len())
            .map(|xi| {
                (0..self.y.values.len()).find(|&yi| self.cell(xi, yi, p).stuck_share() >= 0.5)
            })
            .collect()
    }
}

//! Grids of scenario variants: a sweep (one parameter) or a map (two), every point × policy ×
//! seed, run as one parallel batch; and the raw per-run results that sharded runs write and
//! `sim merge` reads back.
//!
//! A grid's points are numbered with the first axis fastest: a map's point `p` is `x = p mod nx`,
//! `y = p div nx`. Every point is compiled (and checked) before anything runs, then all
//! (point, seed, policy) runs go to rayon as one indexed batch, so two threads stay busy to the
//! end rather than waiting at each point, and results come back in (point, seed, policy) order
//! whatever the number of threads. Only each run's summary is kept.
//!
//! Sweeps, maps and shards are one concept, a grid, and live here together: [`sweep`] (one axis)
//! and `map` (two) are its figures, [`shard`] says which seeds of it one process runs. Their
//! axes are the scenario's ([`crate::scenario::Sweep`]); their renderings are
//! [`crate::report::grid`]'s.

pub(crate) mod map;
pub mod shard;
pub mod sweep;

use serde::{Deserialize, Serialize};

use crate::compile::Compiled;
use crate::metrics::PolicySummary;
use crate::run::{BatchOptions, RunError, parallel, run_one};
use crate::scenario::Sweep;

/// One run of a grid: which point, seed and policy, and its summary.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRun {
    /// The grid point (see the module docs).
    pub point: u32,
    /// The run's master seed.
    pub seed: u64,
    /// The policy's index in the scenario.
    pub policy: u32,
    /// What it measured.
    pub summary: PolicySummary,
}

/// The points of a grid over `axes` (first axis fastest).
pub fn points(axes: &[Sweep]) -> usize {
    axes.iter().map(|a| a.values.len()).product()
}

/// The value index on each axis of point `p`.
pub fn coords(axes: &[Sweep], mut p: usize) -> Vec<usize> {
    axes.iter()
        .map(|a| {
            let n = a.values.len().max(1);
            let i = p % n;
            p /= n;
            i
        })
        .collect()
}

/// Every point of the grid as a compiled scenario, each checked as a file would be.
pub(crate) fn variants(c: &Compiled, axes: &[Sweep]) -> Result<Vec<Compiled>, RunError> {
    (0..points(axes))
        .map(|p| {
            let mut v = c.clone();
            for (axis, i) in axes.iter().zip(coords(axes, p)) {
                v = v.with_value(&axis.parameter, &axis.values[i])?;
            }
            Ok(v)
        })
        .collect()
}

/// Runs every policy of every point under each of `seeds`, in parallel. Results are ordered by
/// point, then seed, then policy.
pub(crate) fn run_grid(
    points: &[Compiled],
    seeds: &[u64],
    opts: BatchOptions,
) -> Result<Vec<RawRun>, RunError> {
    let jobs: Vec<(usize, u64, usize)> = points
        .iter()
        .enumerate()
        .flat_map(|(p, c)| {
            seeds
                .iter()
                .flat_map(move |&s| (0..c.stacks.len()).map(move |k| (p, s, k)))
        })
        .collect();
    let total_ms: u64 = jobs
        .iter()
        .map(|&(p, ..)| (points[p].horizon_ns / 1_000_000).max(1))
        .sum();
    let name = points.first().map_or("", |c| c.scenario.name.as_str());
    parallel(&jobs, total_ms, name, opts, |&(p, seed, policy), tick| {
        // Keep only the summary: a grid can hold thousands of runs.
        let out = run_one(&points[p], policy, seed, tick)?;
        Ok(RawRun {
            point: p as u32,
            seed,
            policy: policy as u32,
            summary: out.summary,
        })
    })
}

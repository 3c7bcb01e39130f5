//! Reports: what a run leaves behind and prints.
//!
//! - [`json`]: `summary.json` (the contract other tools read; see issue 5 item 9).
//! - [`csv`]: `timeseries.csv`, one row per (policy, seed, bucket).
//! - [`table`]: the comparison table printed on the terminal.
//! - [`markdown`]: `summary.md`: description, conclusion, table, plots, parameters, definitions.
//! - [`conclusion`]: the plain-language conclusion derived from the results.
//! - [`figures`]: the report's plots (amplification, goodput, queue, latency) built from the
//!   runs, and the capacity and offered-load reference lines computed from the scenario.
//! - [`plot`]: the drawing code: line charts with bands, shaded windows and reference lines, to
//!   SVG and PNG, from plain data (reusable for any figure).
//!
//! Every writer is a pure function of the runs' results, so reports are byte-identical for the
//! same scenario and seeds whatever the thread count. Wall-clock figures never go into them.

pub mod conclusion;
pub mod csv;
pub mod figures;
pub mod json;
pub mod markdown;
pub mod plot;
pub mod table;

use std::path::Path;

use crate::metrics::PolicySummary;
use crate::run::{Compiled, RunResult};

/// Per policy: its summary (the mean over seeds when there are several) and its per-seed runs.
pub fn per_policy(c: &Compiled, results: &[RunResult]) -> Vec<(PolicySummary, Vec<PolicySummary>)> {
    (0..c.stacks.len())
        .map(|p| {
            let runs: Vec<PolicySummary> = results
                .iter()
                .filter(|r| r.policy == p)
                .map(|r| r.output.summary.clone())
                .collect();
            (json::mean_summary(&runs), runs)
        })
        .collect()
}

/// The files [`write_all`] writes, in order.
pub fn file_names() -> Vec<String> {
    let mut v: Vec<String> = ["summary.md", "summary.json", "timeseries.csv"]
        .map(String::from)
        .to_vec();
    for stem in FIGURES {
        v.push(format!("{stem}.svg"));
        v.push(format!("{stem}.png"));
    }
    v
}

/// The stems of the plots [`figures::figures`] makes, in order.
pub const FIGURES: [&str; 4] = ["amplification", "goodput", "queue", "latency"];

/// Writes `summary.json`, `summary.md`, `timeseries.csv` and the plots (SVG and PNG) into `dir`
/// (created if needed). Plots are drawn in parallel; every file depends only on the results.
pub fn write_all(
    dir: &Path,
    c: &Compiled,
    seeds: &[u64],
    results: &[RunResult],
) -> std::io::Result<()> {
    use rayon::prelude::*;
    std::fs::create_dir_all(dir)?;
    let policies = per_policy(c, results);
    let figs = figures::figures(c, seeds, results);
    std::fs::write(
        dir.join("summary.json"),
        json::summary_json(c, seeds, &policies),
    )?;
    std::fs::write(dir.join("timeseries.csv"), csv::timeseries(c, results))?;
    std::fs::write(
        dir.join("summary.md"),
        markdown::summary_md(c, seeds, &policies, &figs),
    )?;
    figs.par_iter()
        .map(|f| plot::write(&f.chart, dir, f.stem))
        .collect::<std::io::Result<Vec<()>>>()?;
    Ok(())
}

/// A file-system-safe folder name for a scenario name.
pub fn folder_name(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|ch| {
            if ch.is_ascii_alphanumeric() || ch == '-' || ch == '_' {
                ch.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    let s = s.trim_matches('-').to_string();
    if s.is_empty() { "scenario".into() } else { s }
}

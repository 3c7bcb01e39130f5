//! Running a sweep: every value of the swept parameter × every policy × every seed, and the
//! per-value, per-policy figures `sim sweep` prints and writes (`sweep.csv`).
//!
//! Each value is its own scenario (see [`crate::scenario::sweep`]), run with the same seeds, so a
//! policy's arrivals are identical from one value to the next and differences between values are
//! not arrival noise. Figures are means over the seeds, with their sample standard deviation.

use std::fmt::Write;

use crate::metrics::PolicySummary;
use crate::run::{BatchOptions, Compiled, run_all};
use crate::scenario::sweep::{label, variant};
use crate::scenario::{Scenario, Sweep, SweepValue};

/// One policy at one value, over the seeds.
#[derive(Clone, Debug, PartialEq)]
pub struct SweepCell {
    /// The policy's name.
    pub policy: String,
    /// Every seed's summary, in seed order.
    pub runs: Vec<PolicySummary>,
}

/// Mean and sample standard deviation (0 for one value).
fn mean_sd(xs: &[f64]) -> (f64, f64) {
    let n = xs.len();
    if n == 0 {
        return (0.0, 0.0);
    }
    let mean = xs.iter().sum::<f64>() / n as f64;
    if n == 1 {
        return (mean, 0.0);
    }
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    (mean, var.sqrt())
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

    /// Verdicts and their counts, as `recovered:3 stuck:1`.
    pub fn verdicts(&self) -> String {
        let mut counts: Vec<(String, usize)> = Vec::new();
        for r in &self.runs {
            match counts.iter_mut().find(|(v, _)| *v == r.verdict) {
                Some((_, n)) => *n += 1,
                None => counts.push((r.verdict.clone(), 1)),
            }
        }
        counts
            .iter()
            .map(|(v, n)| format!("{v}:{n}"))
            .collect::<Vec<_>>()
            .join(" ")
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
        crate::scenario::validate(&v, "", &format!("{} = {value}", sweep.parameter))
            .map_err(|e| e.to_string())?;
        let c = Compiled::new(v)?;
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

/// The CSV header of [`SweepResult::csv`].
pub const CSV_HEADER: &str = "parameter,value,policy,seeds,first_tries,attempts,server_arrivals,successes,load,load_sd,success_rate,success_rate_sd,goodput_per_s,amp_during_fault,makespan_s,makespan_sd,verdicts";

fn field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
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

    /// `sweep.csv`: a header, then one row per (value, policy), values in sweep order. Counts are
    /// means over the seeds; `load` and `success_rate` come with their standard deviation over
    /// the seeds; `makespan_s` (job sets only) is over the seeds in which every job succeeded;
    /// `verdicts` counts each verdict (`recovered:3 stuck:1`).
    pub fn csv(&self) -> String {
        let mut out = String::from(CSV_HEADER);
        out.push('\n');
        for (value, cells) in &self.rows {
            for c in cells {
                let (load, load_sd) = c.load();
                let (succ, succ_sd) = c.success();
                let goodput =
                    mean_sd(&c.runs.iter().map(|s| s.goodput_per_s).collect::<Vec<_>>()).0;
                let during: Vec<f64> = c
                    .runs
                    .iter()
                    .filter_map(|s| s.amplification.during_fault)
                    .collect();
                let during = if during.is_empty() {
                    String::new()
                } else {
                    format!("{}", mean_sd(&during).0)
                };
                let (makespan, makespan_sd) = match c.makespan() {
                    Some((m, sd)) => (m.to_string(), sd.to_string()),
                    None => (String::new(), String::new()),
                };
                let _ = writeln!(
                    out,
                    "{},{},{},{},{},{},{},{},{load},{load_sd},{succ},{succ_sd},{goodput},{during},{makespan},{makespan_sd},{}",
                    field(&self.parameter),
                    field(&value.to_string()),
                    field(&c.policy),
                    c.runs.len(),
                    c.mean_count(|s| s.first_tries),
                    c.mean_count(|s| s.attempts),
                    c.mean_count(|s| s.server_arrivals),
                    c.mean_count(|s| s.successes),
                    c.verdicts(),
                );
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_and_sample_sd() {
        assert_eq!(mean_sd(&[]), (0.0, 0.0));
        assert_eq!(mean_sd(&[2.0]), (2.0, 0.0));
        let (m, sd) = mean_sd(&[1.0, 2.0, 3.0]);
        assert_eq!(m, 2.0);
        assert!((sd - 1.0).abs() < 1e-12);
        assert_eq!(field("a,b"), "\"a,b\"");
    }
}

//! Running a sweep: every value of the swept parameter × every policy × every seed, and the
//! per-value, per-policy figures `sim sweep` prints and writes (`sweep.csv`).
//!
//! Each value is its own scenario (see [`crate::scenario::sweep`]), run with the same seeds, so a
//! policy's arrivals are identical from one value to the next and differences between values are
//! not arrival noise. Figures are means over the seeds, with their sample standard deviation.

use std::fmt::Write;

use crate::metrics::PolicySummary;
use crate::report::plot::{Axis, Chart, Scale, Series, TickFormat};
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

/// A figure of a sweep, and the file stem it is written under.
#[derive(Clone, Debug, PartialEq)]
pub struct SweepChart {
    /// `sweep-load`, `sweep-success`, `sweep-calls` or `sweep-makespan`.
    pub stem: &'static str,
    /// The figure.
    pub chart: Chart,
}

/// A value on a numeric axis: the number, or a duration in seconds.
fn numeric(v: &SweepValue) -> Option<f64> {
    match v {
        SweepValue::Number(x) => Some(*x),
        SweepValue::Text(t) => t
            .parse::<reliable_core::Duration>()
            .ok()
            .map(|d| d.as_secs_f64()),
    }
}

/// `(x, mean, low, high)` of `f` over the seeds, the band being the 95% interval of the mean.
fn points(
    xs: &[f64],
    cells: &[&SweepCell],
    f: &dyn Fn(&PolicySummary) -> Option<f64>,
) -> Vec<(f64, f64, f64, f64)> {
    xs.iter()
        .zip(cells)
        .filter_map(|(&x, c)| {
            let ys: Vec<f64> = c.runs.iter().filter_map(f).collect();
            if ys.is_empty() {
                return None;
            }
            let (m, sd) = mean_sd(&ys);
            let half = 1.96 * sd / (ys.len() as f64).sqrt();
            Some((x, m, m - half, m + half))
        })
        .collect()
}

impl SweepResult {
    /// The sweep's figures, one line per policy over the swept values: load and success rate, or
    /// for a job set total calls and makespan. With several seeds each line is the mean and a band
    /// its 95% interval. `None` when the values are not numbers or durations, or fewer than two.
    /// The x axis is logarithmic when the positive values span two decades or more (a value of 0
    /// is then left out, and the subtitle says so); shares in [0, 1] are written as percentages.
    pub fn charts(&self) -> Option<Vec<SweepChart>> {
        let xs: Vec<f64> = self
            .rows
            .iter()
            .map(|(v, _)| numeric(v))
            .collect::<Option<_>>()?;
        if xs.len() < 2 || xs.iter().any(|x| !x.is_finite()) {
            return None;
        }
        let durations = self
            .rows
            .iter()
            .any(|(v, _)| matches!(v, SweepValue::Text(_)));
        let positive: Vec<f64> = xs.iter().copied().filter(|x| *x > 0.0).collect();
        let (lo, hi) = positive
            .iter()
            .fold((f64::INFINITY, 0.0f64), |(a, b), &x| (a.min(x), b.max(x)));
        let log = positive.len() >= 2 && hi / lo >= 100.0;
        let share = !durations && xs.iter().all(|x| (0.0..=1.0).contains(x));
        let format = if durations {
            TickFormat::Millis
        } else if share {
            TickFormat::Percent
        } else {
            TickFormat::Number
        };
        let label = if durations {
            format!("{} ({}, ms)", self.label, self.parameter)
        } else if self.label == self.parameter {
            self.label.clone()
        } else {
            format!("{} ({})", self.label, self.parameter)
        };
        // Durations are plotted in milliseconds, which TickFormat::Millis expects.
        let xs: Vec<f64> = if durations {
            xs.iter().map(|x| x * 1e3).collect()
        } else {
            xs
        };
        let x_axis = if log {
            Axis::log(&label, format)
        } else {
            Axis {
                scale: Scale::Linear,
                include_zero: xs.contains(&0.0),
                ..Axis::linear(&label, format)
            }
        };
        let n = self.seeds.len();
        let mut subtitle = if n > 1 {
            format!("mean of {n} seeds per point, band: 95% interval")
        } else {
            "one seed per point".to_string()
        };
        if log && xs.iter().any(|x| *x <= 0.0) {
            subtitle.push_str(&format!("; {} = 0 left out of the log axis", self.label));
        }
        // Fitted to the data, not from zero: the differences between policies are the point.
        let fitted = |label: &str, format| Axis {
            include_zero: false,
            ..Axis::linear(label, format)
        };
        let chart = |title: String, y: Axis, f: &dyn Fn(&PolicySummary) -> Option<f64>| Chart {
            title: format!("{}: {title}", self.scenario),
            subtitle: subtitle.clone(),
            x: x_axis.clone(),
            y,
            series: self
                .policies()
                .iter()
                .filter_map(|p| {
                    let cells: Vec<&SweepCell> = (0..self.rows.len())
                        .filter_map(|i| self.cell(i, p))
                        .collect();
                    if cells.len() != xs.len() {
                        return None;
                    }
                    let pts: Vec<(f64, f64, f64, f64)> = points(&xs, &cells, f)
                        .into_iter()
                        .filter(|pt| !log || pt.0 > 0.0)
                        .collect();
                    let line = Series::line(p, pts.iter().map(|&(x, m, ..)| (x, m)).collect());
                    Some(if n > 1 {
                        line.with_band(pts.iter().map(|&(x, _, a, b)| (x, a, b)).collect())
                    } else {
                        line
                    })
                })
                .collect(),
            windows: Vec::new(),
            references: Vec::new(),
        };
        let l = &self.label;
        Some(if self.job_set {
            vec![
                SweepChart {
                    stem: "sweep-calls",
                    chart: chart(
                        format!("total calls vs {l}"),
                        fitted("calls to the downstream, all clients", TickFormat::Number),
                        &|s| Some(s.attempts as f64),
                    ),
                },
                SweepChart {
                    stem: "sweep-makespan",
                    chart: chart(
                        format!("time until the last job succeeded vs {l}"),
                        fitted("makespan (s)", TickFormat::Number),
                        &|s| s.makespan_s,
                    ),
                },
            ]
        } else {
            vec![
                SweepChart {
                    stem: "sweep-load",
                    chart: chart(
                        format!("load on the downstream vs {l}"),
                        fitted("server arrivals ÷ first tries", TickFormat::Times),
                        &|s| Some(s.amplification.overall),
                    ),
                },
                SweepChart {
                    stem: "sweep-success",
                    chart: chart(
                        format!("client success rate vs {l}"),
                        fitted("successful requests ÷ first tries", TickFormat::Percent),
                        &|s| Some(s.success_rate),
                    ),
                },
            ]
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(values: Vec<SweepValue>, job_set: bool) -> SweepResult {
        let summary = |amp: f64, seed: u64| {
            let mut s = crate::report::json::mean_summary(&[]);
            s.amplification.overall = amp;
            s.success_rate = 1.0 / amp;
            s.seed = seed;
            s.makespan_s = Some(amp);
            s
        };
        SweepResult {
            scenario: "s".into(),
            parameter: "downstreams[api].model.error_rate".into(),
            label: "p".into(),
            seeds: vec![1, 2],
            job_set,
            rows: values
                .into_iter()
                .enumerate()
                .map(|(i, v)| {
                    let cell = SweepCell {
                        policy: "retry".into(),
                        runs: vec![summary(1.0 + i as f64, 1), summary(1.2 + i as f64, 2)],
                    };
                    (v, vec![cell])
                })
                .collect(),
        }
    }

    #[test]
    fn charts_pick_their_axes_from_the_values() {
        let n = SweepValue::Number;
        // Shares spanning four decades, with a zero: a log axis in percent, the zero left out.
        let r = result(vec![n(0.0), n(0.0001), n(0.01), n(0.5)], false);
        let charts = r.charts().unwrap();
        assert_eq!(
            charts.iter().map(|c| c.stem).collect::<Vec<_>>(),
            ["sweep-load", "sweep-success"]
        );
        let load = &charts[0].chart;
        assert_eq!(load.x.scale, Scale::Log10);
        assert_eq!(load.x.format, TickFormat::Percent);
        assert!(
            load.subtitle.contains("p = 0 left out"),
            "{}",
            load.subtitle
        );
        assert_eq!(load.series[0].points.len(), 3);
        // Mean of 2 and 2.2 at the second value, with a 95% band around it.
        assert!((load.series[0].points[0].1 - 2.1).abs() < 1e-12);
        let (_, lo, hi) = load.series[0].band[0];
        assert!(lo < 2.1 && hi > 2.1);
        // Counts on a linear axis; a job set gets calls and makespan.
        let r = result(vec![n(50.0), n(100.0), n(150.0)], true);
        let charts = r.charts().unwrap();
        assert_eq!(charts[0].stem, "sweep-calls");
        assert_eq!(charts[0].chart.x.scale, Scale::Linear);
        assert_eq!(charts[0].chart.x.format, TickFormat::Number);
        // Durations in milliseconds.
        let t = |s: &str| SweepValue::Text(s.into());
        let r = result(vec![t("100ms"), t("1s")], false);
        let x = &r.charts().unwrap()[0].chart.series[0].points;
        assert_eq!((x[0].0, x[1].0), (100.0, 1000.0));
        // Text that is not a duration, or a single value: no plot.
        assert!(result(vec![t("fast"), t("slow")], false).charts().is_none());
        assert!(result(vec![n(1.0)], false).charts().is_none());
    }

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

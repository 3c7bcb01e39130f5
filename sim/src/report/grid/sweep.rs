//! A sweep's report: `sweep.csv`, `sweep.md`, the table `sim sweep` prints, and the plots of
//! each figure against the swept value, written atomically like a run's report.

use std::fmt::Write;
use std::path::{Path, PathBuf};

use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{CellAlignment, ContentArrangement, Table};

use crate::metrics::PolicySummary;
use crate::plot::{Axis, Chart, Scale, Series, TickFormat};
use crate::run::grid::sweep::{SweepCell, SweepResult};
use crate::scenario::SweepValue;
use crate::stats::{mean_ci95, mean_sd};

/// The CSV header of [`SweepResult::csv`].
pub const CSV_HEADER: &str = "parameter,value,policy,seeds,first_tries,attempts,server_arrivals,successes,load,load_sd,success_rate,success_rate_sd,goodput_per_s,amp_during_fault,sent_during_fault,amp_after_fault,recovery_s,recovery_sd,makespan_s,makespan_sd,verdicts";

fn field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

impl SweepResult {
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
                // Means over the seeds that have the figure (faults; recovered runs); empty if
                // none has.
                let mean_of = |f: &dyn Fn(&PolicySummary) -> Option<f64>| {
                    let xs: Vec<f64> = c.runs.iter().filter_map(f).collect();
                    if xs.is_empty() {
                        (String::new(), String::new())
                    } else {
                        let (m, sd) = mean_sd(&xs);
                        (m.to_string(), sd.to_string())
                    }
                };
                let during = mean_of(&|s| s.amplification.during_fault).0;
                let sent = mean_of(&|s| s.amplification.sent_during_fault).0;
                let after = mean_of(&|s| s.amplification.after_fault).0;
                let (recovery, recovery_sd) = mean_of(&|s| s.recovery_s);
                let (makespan, makespan_sd) = match c.makespan() {
                    Some((m, sd)) => (m.to_string(), sd.to_string()),
                    None => (String::new(), String::new()),
                };
                let _ = writeln!(
                    out,
                    "{},{},{},{},{},{},{},{},{load},{load_sd},{succ},{succ_sd},{goodput},{during},{sent},{after},{recovery},{recovery_sd},{makespan},{makespan_sd},{}",
                    field(&self.parameter),
                    field(&value.to_string()),
                    field(&c.policy),
                    c.runs.len(),
                    c.mean_count(|s| s.first_tries),
                    c.mean_count(|s| s.attempts),
                    c.mean_count(|s| s.server_arrivals),
                    c.mean_count(|s| s.successes),
                    c.verdicts()
                        .iter()
                        .map(|(v, n)| format!("{v}:{n}"))
                        .collect::<Vec<_>>()
                        .join(" "),
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
            let (m, half) = mean_ci95(&ys);
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

/// What a cell shows: load and success, or for a job set total calls and makespan.
fn cell_header(r: &SweepResult) -> &'static str {
    if r.job_set {
        "calls  makespan"
    } else {
        "load  success"
    }
}

/// One cell: `1.110x 99.99%`, or for a job set `795.5 4.91s`.
fn cell(r: &SweepResult, i: usize, policy: &str) -> String {
    let Some(c) = r.cell(i, policy) else {
        return "-".into();
    };
    if r.job_set {
        let makespan = c
            .makespan()
            .map_or("-".to_string(), |(m, _)| format!("{m:.2}s"));
        format!("{:.1} {makespan}", c.mean_count(|s| s.attempts))
    } else {
        format!("{:.3}x {:.2}%", c.load().0, 100.0 * c.success().0)
    }
}

/// The table `sim sweep` prints: one row per value, one column per policy.
pub fn table(r: &SweepResult) -> String {
    let mut t = Table::new();
    t.load_style(UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic);
    let mut header = vec![r.label.clone()];
    header.extend(
        r.policies()
            .iter()
            .map(|p| format!("{p}\n{}", cell_header(r))),
    );
    t.set_header(header);
    for (i, (value, _)) in r.rows.iter().enumerate() {
        let mut row = vec![value.to_string()];
        row.extend(r.policies().iter().map(|p| cell(r, i, p)));
        t.add_row(row);
    }
    for col in t.column_iter_mut().skip(1) {
        col.set_cell_alignment(CellAlignment::Right);
    }
    crate::scenario::escape_lines(&t.to_string()).into_owned()
}

/// `sweep.md`: the table, the command (`command`, as the user would type it), the scenario's
/// description and the plots.
pub fn markdown(
    r: &SweepResult,
    description: &str,
    command: &str,
    charts: &[SweepChart],
) -> String {
    let mut out = format!("# {}: sweep of `{}`\n\n", r.scenario, r.parameter);
    if !description.trim().is_empty() {
        out.push_str(description.trim());
        out.push_str("\n\n");
    }
    out.push_str(&format!(
        "`{command}`; {} seed(s) from {}. Each cell: {}, means over the seeds.\n\n",
        r.seeds.len(),
        r.seeds.first().copied().unwrap_or(0),
        if r.job_set {
            "total calls, and the time the last job succeeded"
        } else {
            "load (server arrivals ÷ first tries) and client success rate"
        }
    ));
    let policies = r.policies();
    out.push_str(&format!("| {} |", r.label));
    for p in &policies {
        out.push_str(&format!(" {p} |"));
    }
    out.push_str("\n|---|");
    for _ in &policies {
        out.push_str("---:|");
    }
    out.push('\n');
    for (i, (value, _)) in r.rows.iter().enumerate() {
        out.push_str(&format!("| {value} |"));
        for p in &policies {
            out.push_str(&format!(" {} |", cell(r, i, p)));
        }
        out.push('\n');
    }
    for c in charts {
        out.push_str(&format!("\n![{}]({}.svg)\n", c.chart.title, c.stem));
    }
    out
}

/// Writes `sweep.csv`, `sweep.md` and the plots (SVG and PNG) into `out/<folder name of the
/// scenario>/`, atomically, and returns the folder and the plots' stems. `command` is the
/// command line `sweep.md` quotes.
pub fn write(
    out: &Path,
    r: &SweepResult,
    description: &str,
    command: &str,
) -> std::io::Result<(PathBuf, Vec<&'static str>)> {
    let charts = r.charts().unwrap_or_default();
    let mut files = vec![("sweep.csv".to_string(), r.csv().into_bytes())];
    for c in &charts {
        files.extend(crate::plot::render(&c.chart, c.stem)?);
    }
    files.push((
        "sweep.md".into(),
        markdown(r, description, command, &charts).into_bytes(),
    ));
    let dir =
        crate::report::write::write_folder(out, &crate::scenario::folder_name(&r.scenario), files)?;
    Ok((dir, charts.iter().map(|c| c.stem).collect()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(values: Vec<SweepValue>, job_set: bool) -> SweepResult {
        let summary = |amp: f64, seed: u64| {
            let mut s = PolicySummary::empty();
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
    fn csv_fields_are_quoted() {
        assert_eq!(field("a,b"), "\"a,b\"");
        assert_eq!(field("ab"), "ab");
    }
}

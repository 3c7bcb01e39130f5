//! The comparison table: one row per policy, the same columns on the terminal and in
//! `summary.md`. With several seeds each figure is the mean with its 95% interval (`±` the
//! half-width). On the terminal the best value of each column is green and bold and the worst
//! red, when colour is on (see [`table`]).

use comfy_table::presets::UTF8_FULL_CONDENSED;
#[cfg(feature = "terminal")]
use comfy_table::{Attribute, Color};
use comfy_table::{Cell, CellAlignment, ContentArrangement, Table};

use crate::metrics::PolicySummary;
use crate::metrics::Verdict;
use crate::stats::mean_ci95 as mean_ci;

/// Formats an optional figure with `digits` decimals, `-` when absent.
fn opt(v: Option<f64>, digits: usize, unit: &str) -> String {
    match v {
        Some(x) => format!("{x:.digits$}{unit}"),
        None => "-".into(),
    }
}

/// Which of `values` are best and worst (`lower_is_better` decides), when they differ.
fn extremes(values: &[Option<f64>], lower_is_better: bool) -> (Option<f64>, Option<f64>) {
    let xs: Vec<f64> = values.iter().flatten().copied().collect();
    if xs.len() < 2 {
        return (None, None);
    }
    let min = xs.iter().copied().fold(f64::INFINITY, f64::min);
    let max = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if (max - min).abs() <= 1e-9 * max.abs().max(1.0) {
        return (None, None);
    }
    if lower_is_better {
        (Some(min), Some(max))
    } else {
        (Some(max), Some(min))
    }
}

/// One numeric column.
struct Column {
    header: &'static str,
    get: fn(&PolicySummary) -> Option<f64>,
    lower_is_better: bool,
    /// Multiplier for display (100 for shares shown in %).
    scale: f64,
    digits: usize,
    unit: &'static str,
}

const COLUMNS: [Column; 8] = [
    Column {
        header: "amp peak",
        get: |s| Some(s.amplification.peak),
        lower_is_better: true,
        scale: 1.0,
        digits: 2,
        unit: "x",
    },
    Column {
        header: "amp fault",
        get: |s| s.amplification.during_fault,
        lower_is_better: true,
        scale: 1.0,
        digits: 2,
        unit: "x",
    },
    Column {
        header: "amp after",
        get: |s| s.amplification.after_fault,
        lower_is_better: true,
        scale: 1.0,
        digits: 2,
        unit: "x",
    },
    Column {
        header: "success",
        get: |s| Some(s.success_rate),
        lower_is_better: false,
        scale: 100.0,
        digits: 1,
        unit: "%",
    },
    Column {
        header: "goodput/s",
        get: |s| Some(s.goodput_per_s),
        lower_is_better: false,
        scale: 1.0,
        digits: 1,
        unit: "",
    },
    Column {
        header: "p99 ms",
        get: |s| Some(s.latency_ms.p99),
        lower_is_better: true,
        scale: 1.0,
        digits: 1,
        unit: "",
    },
    Column {
        header: "wasted",
        get: |s| Some(s.wasted_work_share),
        lower_is_better: true,
        scale: 100.0,
        digits: 1,
        unit: "%",
    },
    Column {
        header: "recovery",
        get: |s| s.recovery_s,
        lower_is_better: true,
        scale: 1.0,
        digits: 1,
        unit: "s",
    },
];

/// The header row.
pub fn header() -> Vec<&'static str> {
    let mut h = vec!["policy"];
    h.extend(COLUMNS.iter().map(|c| c.header));
    h.push("verdict");
    h
}

/// What each column means, one line (for under the table).
pub const LEGEND: &str = "amp = server arrivals ÷ first tries (peak bucket, during the faults, after them); success = successful logical requests ÷ started; goodput = successful requests per second; p99 = 99th percentile of client-observed latency; wasted = server time spent on calls whose client had given up; recovery = time from the fault's end until goodput held its healthy level and queue and latency were back to theirs.";

/// One table cell: its text, and whether it holds the column's best or worst value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CellText {
    /// What is shown.
    pub text: String,
    /// Best of its column (among values that differ).
    pub best: bool,
    /// Worst of its column.
    pub worst: bool,
}

/// The table's rows (policy name, the numeric columns, the verdict), from each policy's summary
/// (the mean over seeds) and its per-seed runs. With several runs a figure reads `mean ±half`
/// where `half` is the 95% half-width over the runs that have the figure.
pub fn rows(policies: &[(PolicySummary, Vec<PolicySummary>)]) -> Vec<Vec<CellText>> {
    let ext: Vec<(Option<f64>, Option<f64>)> = COLUMNS
        .iter()
        .map(|col| {
            extremes(
                &policies
                    .iter()
                    .map(|(m, _)| (col.get)(m))
                    .collect::<Vec<_>>(),
                col.lower_is_better,
            )
        })
        .collect();
    policies
        .iter()
        .map(|(m, runs)| {
            let mut cells = vec![CellText {
                text: crate::scenario::escape(&m.name).into_owned(),
                best: false,
                worst: false,
            }];
            for (col, (best, worst)) in COLUMNS.iter().zip(&ext) {
                let v = (col.get)(m);
                // Compared as shown, so values that print the same are marked alike.
                let shown = |x: Option<f64>| opt(x.map(|x| x * col.scale), col.digits, col.unit);
                let (best, worst) = if shown(*best) == shown(*worst) {
                    (None, None)
                } else {
                    (*best, *worst)
                };
                let mut text = shown(v);
                let is_best = v.is_some() && best.is_some() && text == shown(best);
                let is_worst = v.is_some() && worst.is_some() && text == shown(worst);
                let xs: Vec<f64> = runs.iter().filter_map(col.get).collect();
                if runs.len() > 1 && v.is_some() && xs.len() > 1 {
                    let (_, half) = mean_ci(&xs);
                    text.push_str(&format!(
                        " ±{:.*}{}",
                        col.digits,
                        half * col.scale,
                        col.unit
                    ));
                }
                cells.push(CellText {
                    text,
                    best: is_best,
                    worst: is_worst,
                });
            }
            let n = m.verdicts.total();
            let verdict = match m.verdicts.get(m.verdict) {
                k if n > 1 => format!("{} {k}/{n}", m.verdict),
                _ => m.verdict.to_string(),
            };
            cells.push(CellText {
                best: m.verdict == Verdict::Recovered,
                worst: m.verdict == Verdict::Stuck,
                text: verdict,
            });
            cells
        })
        .collect()
}

/// The terminal table. `styled`: colour the best (green, bold) and worst (red) values of each
/// column and the verdicts; otherwise plain text, whatever the terminal.
pub fn table(policies: &[(PolicySummary, Vec<PolicySummary>)], styled: bool) -> Table {
    let mut t = Table::new();
    t.load_style(UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic);
    // Without the `terminal` feature (the WebAssembly build) tables are always plain.
    #[cfg(feature = "terminal")]
    if styled {
        t.enforce_styling();
    } else {
        t.force_no_tty();
    }
    // A terminal that reports no usable size (a pseudo-terminal without one says 0 columns) would
    // squeeze every column to one character: lay the table out as if it were wide.
    if t.width().is_some_and(|w| w < 40) {
        t.set_width(200);
    }
    #[cfg(not(feature = "terminal"))]
    let _ = styled;
    t.set_header(header());
    for row in rows(policies) {
        let cells: Vec<Cell> = row
            .into_iter()
            .enumerate()
            .map(|(i, c)| {
                let mut cell = Cell::new(&c.text);
                if i > 0 && i <= COLUMNS.len() {
                    cell = cell.set_alignment(CellAlignment::Right);
                }
                #[cfg(feature = "terminal")]
                if styled && i > 0 {
                    if c.best {
                        cell = cell.fg(Color::Green).add_attribute(Attribute::Bold);
                    } else if c.worst {
                        cell = cell.fg(Color::Red);
                    }
                }
                cell
            })
            .collect();
        t.add_row(cells);
    }
    t
}

/// The table as Markdown (best values in bold).
pub fn markdown(policies: &[(PolicySummary, Vec<PolicySummary>)]) -> String {
    let mut out = format!("| {} |\n", header().join(" | "));
    out.push_str("|---|");
    for _ in COLUMNS.iter() {
        out.push_str("--:|");
    }
    out.push_str("---|\n");
    for row in rows(policies) {
        let cells: Vec<String> = row
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let text = c.text.replace('|', "\\|");
                if i > 0 && i <= COLUMNS.len() && c.best {
                    format!("**{text}**")
                } else {
                    text
                }
            })
            .collect();
        out.push_str(&format!("| {} |\n", cells.join(" | ")));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extremes_ignore_ties_and_missing_values() {
        assert_eq!(
            extremes(&[Some(1.0), Some(3.0), None], true),
            (Some(1.0), Some(3.0))
        );
        assert_eq!(
            extremes(&[Some(1.0), Some(3.0)], false),
            (Some(3.0), Some(1.0))
        );
        assert_eq!(extremes(&[Some(2.0), Some(2.0)], true), (None, None));
        assert_eq!(extremes(&[Some(2.0), None], true), (None, None));
    }
}

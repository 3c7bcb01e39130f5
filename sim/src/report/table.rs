//! The comparison table: one row per policy, the best and worst values coloured when the terminal
//! supports colour (comfy-table styles only on a TTY, so piped output stays plain).

use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{Cell, CellAlignment, Color, ContentArrangement, Table};

use crate::metrics::PolicySummary;

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

/// The table for `rows` (one summary per policy).
pub fn table(rows: &[PolicySummary], styled: bool) -> Table {
    let mut t = Table::new();
    t.load_style(UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic);
    if !styled {
        t.force_no_tty();
    }
    t.set_header(vec![
        "policy",
        "amp peak",
        "amp fault",
        "amp after",
        "success",
        "goodput/s",
        "p99 ms",
        "wasted",
        "recovery",
        "verdict",
    ]);
    // (value getter, lower is better, formatter)
    type Col = (
        fn(&PolicySummary) -> Option<f64>,
        bool,
        fn(Option<f64>) -> String,
    );
    let cols: [Col; 8] = [
        (|s| Some(s.amplification.peak), true, |v| opt(v, 2, "x")),
        (|s| s.amplification.during_fault, true, |v| opt(v, 2, "x")),
        (|s| s.amplification.after_fault, true, |v| opt(v, 2, "x")),
        (
            |s| Some(s.success_rate),
            false,
            |v| opt(v.map(|x| x * 100.0), 1, "%"),
        ),
        (|s| Some(s.goodput_per_s), false, |v| opt(v, 1, "")),
        (|s| Some(s.latency_ms.p99), true, |v| opt(v, 1, "")),
        (
            |s| Some(s.wasted_work_share),
            true,
            |v| opt(v.map(|x| x * 100.0), 1, "%"),
        ),
        (|s| s.recovery_s, true, |v| opt(v, 1, "s")),
    ];
    let ext: Vec<(Option<f64>, Option<f64>)> = cols
        .iter()
        .map(|(get, lower, _)| extremes(&rows.iter().map(get).collect::<Vec<_>>(), *lower))
        .collect();
    for r in rows {
        let mut cells = vec![Cell::new(&r.name)];
        for ((get, _, fmt), (best, worst)) in cols.iter().zip(&ext) {
            let v = get(r);
            let mut cell = Cell::new(fmt(v)).set_alignment(CellAlignment::Right);
            if styled && v.is_some() {
                if v == *best {
                    cell = cell.fg(Color::Green);
                } else if v == *worst {
                    cell = cell.fg(Color::Red);
                }
            }
            cells.push(cell);
        }
        let runs: u64 = r.verdicts.values().sum();
        let verdict_text = match r.verdicts.get(&r.verdict) {
            Some(n) if runs > 1 => format!("{} {n}/{runs}", r.verdict),
            _ => r.verdict.clone(),
        };
        let mut verdict = Cell::new(verdict_text);
        if styled {
            verdict = verdict.fg(match r.verdict.as_str() {
                "recovered" => Color::Green,
                "stuck" => Color::Red,
                _ => Color::Reset,
            });
        }
        cells.push(verdict);
        t.add_row(cells);
    }
    t
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

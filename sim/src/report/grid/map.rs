//! A map's report: `map.csv` (every cell × policy), `map.md` (where each policy's cliff is, the
//! figures, how to read them) and two figures, as SVG and PNG: `map-stuck` (share of seeds stuck)
//! and `map-recovery` (median recovery time), one panel per policy, the vulnerable region
//! outlined, drawn with [`heatmap`](crate::plot::heatmap). Written atomically like a run's report.

use std::fmt::Write;
use std::path::{Path, PathBuf};

use crate::metrics::Verdict;
use crate::plot::heatmap::{Cell, ColorScale, Heatmap, Panel, Ramp};
use crate::report::csv::field;
use crate::run::grid::map::MapResult;
use crate::scenario::{Sweep, SweepValue};

/// The CSV header of [`csv`].
pub const CSV_HEADER: &str = "x_parameter,x,y_parameter,y,policy,seeds,stuck,recovered,inconclusive,stuck_share,recovery_median_s,recovery_mean_s,recovery_min_s,recovery_max_s,load,load_after_fault,success_rate";

fn opt(x: Option<f64>) -> String {
    x.map_or_else(String::new, |v| v.to_string())
}

/// `map.csv`: a header, then one row per (y, x, policy), x fastest, values as written in the
/// scenario. Recovery times are in seconds: the median over the seeds (a seed that did not
/// recover counting as the longest; empty when fewer than half recovered), and the mean, least
/// and most of the seeds that recovered (empty when none did). `load` (server arrivals ÷ first
/// tries), `load_after_fault` and `success_rate` are means over the seeds.
pub fn csv(m: &MapResult) -> String {
    let mut out = String::from(CSV_HEADER);
    out.push('\n');
    let policies = m.policies();
    for (yi, yv) in m.y.values.iter().enumerate() {
        for (xi, xv) in m.x.values.iter().enumerate() {
            for (p, name) in policies.iter().enumerate() {
                let c = m.cell(xi, yi, p);
                let times = c.recovered_times();
                let after: Vec<f64> = c
                    .runs
                    .iter()
                    .filter_map(|r| r.amplification.after_fault)
                    .collect();
                let _ = writeln!(
                    out,
                    "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
                    field(&m.x.parameter),
                    field(&xv.to_string()),
                    field(&m.y.parameter),
                    field(&yv.to_string()),
                    field(name),
                    c.runs.len(),
                    c.count(Verdict::Stuck),
                    c.count(Verdict::Recovered),
                    c.count(Verdict::Inconclusive),
                    c.stuck_share(),
                    opt(c.median_recovery()),
                    opt(times.map(|t| t.0)),
                    opt(times.map(|t| t.1)),
                    opt(times.map(|t| t.2)),
                    c.mean(|r| r.amplification.overall),
                    if after.is_empty() {
                        String::new()
                    } else {
                        crate::stats::mean(&after).to_string()
                    },
                    c.mean(|r| r.success_rate),
                );
            }
        }
    }
    out
}

/// `1`, `2.5`, `0.125`: a number without trailing zeros (at most 3 decimals), thousands grouped.
fn number(v: f64) -> String {
    let d = (0..=3)
        .find(|&d| ((v * 10f64.powi(d)).round() - v * 10f64.powi(d)).abs() < 1e-9)
        .unwrap_or(3) as usize;
    crate::plot::group(v, d)
}

/// An axis in the parameter's own unit: its name, unit and one tick label per value. Durations
/// are in seconds (milliseconds when every value is under a second), shares in [0, 1] in percent,
/// other numbers as written; a label ending in a unit in parentheses (`offered load (req/s)`)
/// gives the name and the unit.
pub(crate) struct AxisText {
    /// What the parameter is (`offered load`).
    pub name: String,
    /// Its unit (`req/s`, `s`, `%`), or empty.
    pub unit: String,
    /// One label per value.
    pub ticks: Vec<String>,
}

impl AxisText {
    /// `name (unit)`.
    pub fn title(&self) -> String {
        if self.unit.is_empty() {
            self.name.clone()
        } else {
            format!("{} ({})", self.name, self.unit)
        }
    }

    /// Value `i` with its unit: `75 req/s`, `1.5 s`, `20%`.
    pub fn value(&self, i: usize) -> String {
        let t = self.ticks.get(i).map_or("", String::as_str);
        match self.unit.as_str() {
            "" => t.to_string(),
            "%" => format!("{t}%"),
            u => format!("{t} {u}"),
        }
    }
}

/// The [`AxisText`] of an axis.
pub(crate) fn axis(a: &Sweep) -> AxisText {
    let label = crate::scenario::sweep::label(a);
    let (name, given) = match label.strip_suffix(')').and_then(|l| l.rsplit_once(" (")) {
        Some((n, u)) if !n.is_empty() && !u.is_empty() => (n.to_string(), u.to_string()),
        _ => (label.clone(), String::new()),
    };
    let text = |unit: &str, ticks: Vec<String>| AxisText {
        name: name.clone(),
        unit: if given.is_empty() {
            unit.to_string()
        } else {
            given.clone()
        },
        ticks,
    };
    let durations: Option<Vec<f64>> = a
        .values
        .iter()
        .map(|v| match v {
            SweepValue::Text(t) => t
                .parse::<reliable_core::Duration>()
                .ok()
                .map(|d| d.as_secs_f64()),
            SweepValue::Number(_) => None,
        })
        .collect();
    if let Some(secs) = durations {
        return if secs.iter().any(|s| *s >= 1.0) {
            text("s", secs.iter().map(|s| number(*s)).collect())
        } else {
            text("ms", secs.iter().map(|s| number(s * 1e3)).collect())
        };
    }
    let nums: Option<Vec<f64>> = a
        .values
        .iter()
        .map(|v| match v {
            SweepValue::Number(x) => Some(*x),
            SweepValue::Text(_) => None,
        })
        .collect();
    match nums {
        Some(xs)
            if given.is_empty()
                && xs.iter().all(|x| (0.0..=1.0).contains(x))
                && xs.iter().any(|x| *x > 0.0 && *x < 1.0) =>
        {
            text("%", xs.iter().map(|x| number(x * 100.0)).collect())
        }
        Some(xs) => text("", xs.iter().map(|x| number(*x)).collect()),
        None => text("", a.values.iter().map(|v| v.to_string()).collect()),
    }
}

/// The vulnerable region of policy `p`: cells where at least one seed stayed stuck.
fn region(m: &MapResult, p: usize) -> Vec<bool> {
    m.cells
        .iter()
        .map(|c| c[p].count(Verdict::Stuck) > 0)
        .collect()
}

/// The two figures: share of seeds stuck, and median recovery time.
pub fn figures(m: &MapResult) -> [(&'static str, Heatmap); 2] {
    let (ax, ay) = (axis(&m.x), axis(&m.y));
    let x = (ax.title(), ax.ticks);
    let y = (ay.title(), ay.ticks);
    let name = &m.scenario.name;
    let n = m.seeds.len();
    let subtitle = format!(
        "{n} seed{} per cell; outlined: at least one seed stayed stuck (the vulnerable region)",
        if n == 1 { "" } else { "s" }
    );
    let policies = m.policies();
    let stuck = Heatmap {
        title: format!("{name}: share of seeds stuck after the fault"),
        subtitle: subtitle.clone(),
        x: x.clone(),
        y: y.clone(),
        panels: policies
            .iter()
            .enumerate()
            .map(|(p, title)| Panel {
                title: title.to_string(),
                cells: m
                    .cells
                    .iter()
                    .map(|c| Cell::Value(c[p].stuck_share()))
                    .collect(),
                labels: m
                    .cells
                    .iter()
                    .map(|c| format!("{:.0}", 100.0 * c[p].stuck_share()))
                    .collect(),
                outline: region(m, p),
            })
            .collect(),
        scale: ColorScale::share("share of seeds stuck", Ramp::Blues),
        outline_label: "at least one seed stuck".into(),
    };
    let longest = m
        .cells
        .iter()
        .flatten()
        .filter_map(|c| c.median_recovery())
        .fold(0.0, f64::max);
    let ticks = crate::plot::nice_ticks(0.0, longest.max(1.0), 4);
    let top = ticks.last().copied().unwrap_or(1.0).max(longest).max(1.0);
    let recovery = Heatmap {
        title: format!("{name}: median time to recover after the fault"),
        subtitle,
        x,
        y,
        panels: policies
            .iter()
            .enumerate()
            .map(|(p, title)| Panel {
                title: title.to_string(),
                cells: m
                    .cells
                    .iter()
                    .map(|c| c[p].median_recovery().map_or(Cell::Beyond, Cell::Value))
                    .collect(),
                labels: m
                    .cells
                    .iter()
                    .map(|c| {
                        c[p].median_recovery()
                            .map_or(String::new(), |t| format!("{t:.0}"))
                    })
                    .collect(),
                outline: region(m, p),
            })
            .collect(),
        scale: ColorScale {
            label: "median time to recover (s): goodput, queue and latency back".into(),
            max: top,
            ticks: ticks.iter().map(|&t| (t, number(t))).collect(),
            ramp: Ramp::Oranges,
            outline: plotters::style::RGBColor(0x00, 0x72, 0xB2),
            beyond: Some((
                plotters::style::RGBColor(0x22, 0x22, 0x22),
                "not back in most seeds".into(),
            )),
        },
        outline_label: "at least one seed stuck".into(),
    };
    [("map-stuck", stuck), ("map-recovery", recovery)]
}

/// One sentence per policy on where its cliff is (see [`MapResult::cliff`]).
pub fn cliffs(m: &MapResult) -> Vec<String> {
    let (x, y) = (axis(&m.x), axis(&m.y));
    m.policies()
        .iter()
        .enumerate()
        .map(|(p, name)| {
            let cliff = m.cliff(p);
            let Some(x0) = cliff.iter().position(Option::is_some) else {
                let worst = m
                    .cells
                    .iter()
                    .map(|c| c[p].stuck_share())
                    .fold(0.0, f64::max);
                return if worst == 0.0 {
                    format!("**{name}**: recovers in every cell and seed of the grid.")
                } else {
                    format!(
                        "**{name}**: no cliff in this grid (never stuck in half the seeds; at most {:.0}% of them).",
                        100.0 * worst
                    )
                };
            };
            let y0 = cliff[x0].unwrap_or(0);
            let lowest = cliff.iter().flatten().copied().min().unwrap_or(y0);
            let x1 = cliff.iter().position(|c| *c == Some(lowest)).unwrap_or(x0);
            let mut s = format!(
                "**{name}**: stuck in at least half the seeds from {} {} with a {} of {}",
                x.name,
                x.value(x0),
                y.name,
                y.value(y0)
            );
            if lowest < y0 {
                let _ = write!(
                    s,
                    "; from {} {}, a {} of {} is enough",
                    x.name,
                    x.value(x1),
                    y.name,
                    y.value(lowest)
                );
            }
            s.push('.');
            s
        })
        .collect()
}

/// `map.md`.
pub fn markdown(m: &MapResult, command: &str) -> String {
    let (x, y) = (axis(&m.x), axis(&m.y));
    let mut out = format!(
        "# {}: map of `{}` × `{}`\n\n",
        m.scenario.name, m.x.parameter, m.y.parameter
    );
    let d = m.scenario.description.trim();
    if !d.is_empty() {
        out.push_str(d);
        out.push_str("\n\n");
    }
    let _ = writeln!(
        out,
        "`{command}`; {} seed(s) from {} per cell and policy; x: {} = {}; y: {} = {}.\n",
        m.seeds.len(),
        m.seeds.first().copied().unwrap_or(0),
        x.title(),
        x.ticks.join(", "),
        y.title(),
        y.ticks.join(", ")
    );
    out.push_str("## Where each policy's cliff is\n\n");
    for s in cliffs(m) {
        let _ = writeln!(out, "- {s}");
    }
    let _ = writeln!(
        out,
        "\nThe smallest {} after which at least half the seeds stayed stuck, per {} (`-`: none in this grid):\n",
        y.title(),
        x.title()
    );
    let _ = write!(out, "| policy |");
    for t in &x.ticks {
        let _ = write!(out, " {t} |");
    }
    out.push_str("\n|---|");
    for _ in &x.ticks {
        out.push_str("---:|");
    }
    out.push('\n');
    for (p, name) in m.policies().iter().enumerate() {
        let _ = write!(out, "| {name} |");
        for c in m.cliff(p) {
            let _ = write!(
                out,
                " {} |",
                c.map_or("-".to_string(), |yi| y.ticks[yi].clone())
            );
        }
        out.push('\n');
    }
    for (stem, fig) in figures(m) {
        let _ = write!(out, "\n![{}]({stem}.svg)\n", fig.title);
    }
    out.push_str(
        "\n**How to read it.** A run is *stuck* when goodput did not come back and stay back, or queue and latency did not return to their pre-fault level, before the horizon (see the metrics docs). Each cell of the first figure is the share of seeds stuck; the outline encloses the *vulnerable region*, where at least one seed stayed stuck: a fault of that size at that load can tip the system into a state it does not leave by itself. The second figure is the median time from the fault's end until goodput, queue and latency are all back (a seed that never got back counts as the longest); black cells: fewer than half the seeds got back. Every cell is in `map.csv`.\n",
    );
    out
}

/// Writes the map's report into `out/<scenario folder>/` (atomically); returns that folder.
pub fn write(out: &Path, m: &MapResult, command: &str) -> std::io::Result<PathBuf> {
    use crate::run::par::*;
    let mut files = vec![
        ("map.csv".to_string(), csv(m).into_bytes()),
        ("map.md".to_string(), markdown(m, command).into_bytes()),
    ];
    let figs = figures(m);
    let drawn = figs
        .par_iter()
        .map(|(stem, fig)| -> std::io::Result<Vec<(String, Vec<u8>)>> {
            Ok(vec![
                (
                    format!("{stem}.svg"),
                    crate::plot::heatmap::svg(fig)?.into_bytes(),
                ),
                (format!("{stem}.png"), crate::plot::heatmap::png(fig)?),
            ])
        })
        .collect::<std::io::Result<Vec<_>>>()?;
    files.extend(drawn.into_iter().flatten());
    crate::report::write::write_folder(out, &crate::scenario::folder_name(&m.scenario.name), files)
}

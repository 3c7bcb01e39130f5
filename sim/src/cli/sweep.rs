//! `sim sweep FILE [--param PATH --values V,...] [--seed N] [--seeds K] [--out DIR] [--jobs N]`:
//! runs a scenario once per value of one parameter and tabulates load and success per policy.
//!
//! The parameter and its values come from the scenario's `sweep` field, or from `--param` and
//! `--values` (which override it). Writes `OUT/<scenario>/sweep.csv` (one row per value and
//! policy), `sweep.md` (the table, the command, the scenario's description and the plots) and the
//! plots, as SVG and PNG: `sweep-load` and `sweep-success` (or, for a job set, `sweep-calls` and
//! `sweep-makespan`), one line per policy, drawn with [`sim::report::plot`].

use std::path::PathBuf;

use clap::Args;
use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{CellAlignment, ContentArrangement, Table};
use sim::report;
use sim::run::sweep::{SweepChart, SweepResult, run_sweep};
use sim::scenario::{self, Sweep, SweepValue};

use super::batch::BatchArgs;

/// Options of `sim sweep`.
#[derive(Debug, Args)]
pub struct SweepArgs {
    /// Scenario file (RON).
    pub file: PathBuf,
    /// Scenario to sweep, by name (required when the file holds several).
    #[arg(long)]
    pub scenario: Option<String>,
    /// The parameter to vary, as a path (`downstreams[api].model.error_rate`); overrides the
    /// scenario's `sweep`.
    #[arg(long, requires = "values")]
    pub param: Option<String>,
    /// Its values, comma-separated: numbers, or durations such as `250ms`.
    #[arg(long, value_delimiter = ',', requires = "param")]
    pub values: Vec<String>,
    /// Short name of the parameter for the table (default: the scenario's, or the path's last
    /// field).
    #[arg(long)]
    pub label: Option<String>,
    #[command(flatten)]
    pub batch: BatchArgs,
}

fn parse_value(v: &str) -> SweepValue {
    match v.trim().parse::<f64>() {
        Ok(x) => SweepValue::Number(x),
        Err(_) => SweepValue::Text(v.trim().to_string()),
    }
}

pub fn sweep(args: SweepArgs) -> Result<(), String> {
    let all = scenario::load_file_all(&args.file).map_err(|e| e.to_string())?;
    let mut s = super::trace::pick(all, args.scenario.as_deref(), &args.file)?;
    let mut sweep = match (&args.param, &s.sweep) {
        (Some(p), _) => Sweep {
            parameter: p.clone(),
            label: None,
            values: args.values.iter().map(|v| parse_value(v)).collect(),
        },
        (None, Some(sw)) => sw.clone(),
        (None, None) => {
            return Err(format!(
                "{}: scenario \"{}\" has no sweep: add `sweep: (parameter: \"...\", values: [...])` to it, or pass --param PATH --values V1,V2,...",
                args.file.display(),
                s.name
            ));
        }
    };
    if let Some(l) = &args.label {
        sweep.label = Some(l.clone());
    }
    // Check the sweep as if it were written in the file, so a bad path or value is refused before
    // anything runs, with the same messages.
    s.sweep = Some(sweep.clone());
    let shown = format!("{} (sweep)", args.file.display());
    scenario::validate(&s, "", &shown).map_err(|e| e.to_string())?;
    let seeds = args.batch.seeds(s.seed, s.seeds);
    let (k, seed) = (seeds.len(), seeds[0]);
    let result = run_sweep(&s, &sweep, &seeds, args.batch.options())?;
    let dir = args.batch.out.join(report::folder_name(&s.name));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let csv = dir.join("sweep.csv");
    std::fs::write(&csv, result.csv()).map_err(|e| format!("{}: {e}", csv.display()))?;
    let charts = result.charts().unwrap_or_default();
    for c in &charts {
        report::plot::write(&c.chart, &dir, c.stem)
            .map_err(|e| format!("{}: {e}", dir.join(c.stem).display()))?;
    }
    let md = dir.join("sweep.md");
    std::fs::write(&md, markdown(&result, &s.description, &args, &charts))
        .map_err(|e| format!("{}: {e}", md.display()))?;
    if !args.batch.quiet {
        let what = if result.job_set {
            "total calls and makespan (when the last job succeeded)"
        } else {
            "load (server arrivals ÷ first tries) and success rate"
        };
        println!("{}: {what} by {}", s.name, result.label);
        if k > 1 {
            println!("means over {k} seeds from {seed}");
        }
        println!("{}", table(&result));
    }
    if charts.is_empty() {
        println!("wrote {} and {}", csv.display(), md.display());
    } else {
        let stems: Vec<&str> = charts.iter().map(|c| c.stem).collect();
        println!(
            "wrote {}, {} and {} (SVG and PNG) in {}",
            csv.file_name()
                .map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
            md.file_name()
                .map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
            stems.join(", "),
            dir.display()
        );
    }
    Ok(())
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

fn table(r: &SweepResult) -> Table {
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
    t
}

fn markdown(r: &SweepResult, description: &str, args: &SweepArgs, charts: &[SweepChart]) -> String {
    let mut out = format!("# {}: sweep of `{}`\n\n", r.scenario, r.parameter);
    if !description.trim().is_empty() {
        out.push_str(description.trim());
        out.push_str("\n\n");
    }
    out.push_str(&format!(
        "`sim sweep {}`; {} seed(s) from {}. Each cell: {}, means over the seeds.\n\n",
        args.file.display(),
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

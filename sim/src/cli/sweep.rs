//! `sim sweep FILE [--param PATH --values V,...] [--seed N] [--seeds K] [--out DIR] [--jobs N]`:
//! runs a scenario once per value of one parameter and tabulates load and success per policy.
//!
//! The parameter and its values come from the scenario's `sweep` field, or from `--param` and
//! `--values` (which override it). Writes `OUT/<scenario>/sweep.csv` (one row per value and
//! policy), `sweep.md` (the table, the command, the scenario's description and the plots) and the
//! plots, as SVG and PNG: `sweep-load` and `sweep-success` (or, for a job set, `sweep-calls` and
//! `sweep-makespan`), one line per policy, drawn with [`crate::plot`].

use std::path::PathBuf;

use clap::Args;

use super::batch::BatchArgs;
use super::input::read_scenarios;
use crate::cli::out::outln;
use crate::report;
use crate::report::grid::shards::Kind;
use crate::run::grid::sweep::run_sweep;
use crate::run::grid::{run_grid, variants};
use crate::scenario::{Sweep, SweepValue, escape};

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
    pub shard: super::shard::ShardArg,
    #[command(flatten)]
    pub batch: BatchArgs,
}

pub(super) fn parse_value(v: &str) -> SweepValue {
    match v.trim().parse::<f64>() {
        Ok(x) => SweepValue::Number(x),
        Err(_) => SweepValue::Text(v.trim().to_string()),
    }
}

pub fn sweep(args: SweepArgs) -> Result<(), String> {
    let limits = args.batch.limits.limits();
    let shard = args.shard.resolve()?;
    let all = read_scenarios(&args.file, &limits)?;
    let c = super::trace::pick(all, args.scenario.as_deref(), &args.file)?;
    let mut sweep = match (&args.param, &c.scenario.sweep) {
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
                escape(&c.scenario.name)
            ));
        }
    };
    if let Some(l) = &args.label {
        sweep.label = Some(l.clone());
    }
    // Check the sweep as if it were written in the file, so a bad path or value is refused before
    // anything runs, with the same messages.
    // As written: with replicas, the paths name the file's downstreams, not their replicas.
    let mut s = c.written().clone();
    s.sweep = Some(sweep.clone());
    let shown = format!("{} (sweep)", args.file.display());
    let c = crate::compile::compile(s, &shown, &limits).map_err(|e| e.to_string())?;
    let seeds = args.batch.seeds(&c, sweep.values.len())?;
    // Each value makes its own scenario, which may cost more than the one in the file (a higher
    // rate, a longer horizon): estimate every one, and the sweep as a whole.
    let mut events = 0.0;
    for v in &sweep.values {
        let e = c
            .with_value(&sweep.parameter, v)
            .and_then(|cv| cv.estimate(seeds.len() as u32, 1, args.batch.threads(), &limits))
            .map_err(|e| format!("with {} = {v}: {e}", sweep.parameter))?;
        events += e.events;
    }
    if events > limits.max_events {
        return Err(format!(
            "{}: the sweep's {} values need about {events:.2e} events in all, more than the limit of {:.2e} (--max-events)",
            args.file.display(),
            sweep.values.len(),
            limits.max_events
        ));
    }
    crate::report::write::check_out(&args.batch.out)?;
    let (k, seed) = (seeds.len(), seeds[0]);
    let command = format!("sim sweep {}", args.file.display());
    if let Some(sh) = shard {
        let axes = [sweep.clone()];
        let points = variants(&c, &axes).map_err(|e| e.to_string())?;
        let runs = run_grid(&points, &sh.seeds(&seeds), args.batch.options())
            .map_err(|e| e.to_string())?;
        return super::shard::write(
            &args.batch,
            Kind::Sweep,
            &command,
            &c.scenario,
            &axes,
            &seeds,
            sh,
            &runs,
        );
    }
    let result = run_sweep(&c, &sweep, &seeds, args.batch.options()).map_err(|e| e.to_string())?;
    let (dir, stems) =
        report::grid::sweep::write(&args.batch.out, &result, &c.scenario.description, &command)
            .map_err(|e| args.batch.write_error(&c.scenario.name, e))?;
    if !args.batch.quiet {
        let what = if result.job_set {
            "total calls and makespan (when the last job succeeded)"
        } else {
            "load (server arrivals ÷ first tries) and success rate"
        };
        outln!(
            "{}: {what} by {}",
            escape(&c.scenario.name),
            escape(&result.label)
        );
        if k > 1 {
            outln!("means over {k} seeds from {seed}");
        }
        outln!("{}", report::grid::sweep::table(&result));
    }
    let dir = escape(&dir.display().to_string()).into_owned();
    if stems.is_empty() {
        outln!("wrote {dir}/sweep.csv and {dir}/sweep.md");
    } else {
        outln!(
            "wrote sweep.csv, sweep.md and {} (SVG and PNG) in {dir}",
            stems.join(", "),
        );
    }
    Ok(())
}

//! `sim map FILE [--x PATH --x-values V,... --y PATH --y-values V,...] [--shard i/n|auto] ...`:
//! runs a scenario over a grid of two parameters and draws, per policy, where it stays stuck.
//!
//! The axes come from the scenario's `map` field, or from `--x`/`--x-values` and
//! `--y`/`--y-values` (which override it). Writes `OUT/<scenario>/map.csv` (every cell and
//! policy), `map.md` (where each policy's cliff is, the figures) and the figures `map-stuck` and
//! `map-recovery` as SVG and PNG (see [`crate::report::map`]). With `--shard`, runs only the
//! shard's seeds and writes their raw results for `sim merge` instead (see
//! [`crate::report::shards`]).

use std::path::PathBuf;

use clap::Args;

use super::batch::BatchArgs;
use super::input::read_scenarios;
use crate::cli::out::outln;
use crate::report;
use crate::run::grid::map::MapResult;
use crate::run::grid::{run_grid, variants};
use crate::scenario::{Map, Sweep, escape};

/// Options of `sim map`.
#[derive(Debug, Args)]
pub struct MapArgs {
    /// Scenario file (RON).
    pub file: PathBuf,
    /// Scenario to map, by name (required when the file holds several).
    #[arg(long)]
    pub scenario: Option<String>,
    /// The horizontal parameter, as a path (`workload.rate`); overrides the scenario's `map.x`.
    #[arg(long, requires = "x_values")]
    pub x: Option<String>,
    /// Its values, comma-separated: numbers, or durations such as `250ms`.
    #[arg(long, value_delimiter = ',', requires = "x")]
    pub x_values: Vec<String>,
    /// The vertical parameter (`faults[0].duration`); overrides the scenario's `map.y`.
    #[arg(long, requires = "y_values")]
    pub y: Option<String>,
    /// Its values.
    #[arg(long, value_delimiter = ',', requires = "y")]
    pub y_values: Vec<String>,
    #[command(flatten)]
    pub shard: super::shard::ShardArg,
    #[command(flatten)]
    pub batch: BatchArgs,
}

pub fn map(args: MapArgs) -> Result<(), String> {
    let limits = args.batch.limits.limits();
    let shard = args.shard.resolve()?;
    let all = read_scenarios(&args.file, &limits)?;
    let c = super::trace::pick(all, args.scenario.as_deref(), &args.file)?;
    let axis = |p: &Option<String>, v: &[String], from: Option<&Sweep>| match p {
        Some(p) => Some(Sweep {
            parameter: p.clone(),
            label: None,
            values: v.iter().map(|v| super::sweep::parse_value(v)).collect(),
        }),
        None => from.cloned(),
    };
    let file_map = c.scenario.map.as_ref();
    let (Some(x), Some(y)) = (
        axis(&args.x, &args.x_values, file_map.map(|m| &m.x)),
        axis(&args.y, &args.y_values, file_map.map(|m| &m.y)),
    ) else {
        return Err(format!(
            "{}: scenario \"{}\" has no map: add `map: (x: (parameter: \"...\", values: [...]), y: (...))` to it, or pass --x PATH --x-values V1,V2,... --y PATH --y-values V1,V2,...",
            args.file.display(),
            escape(&c.scenario.name)
        ));
    };
    // Check the map as if it were written in the file, so a bad path or value is refused before
    // anything runs, with the same messages.
    // As written: with replicas, the paths name the file's downstreams, not their replicas.
    let mut s = c.written().clone();
    s.map = Some(Map {
        x: x.clone(),
        y: y.clone(),
    });
    let shown = format!("{} (map)", args.file.display());
    let c = crate::compile::compile(s, &shown, &limits).map_err(|e| e.to_string())?;
    let axes = [x.clone(), y.clone()];
    let seeds = args.batch.seeds(&c, crate::run::grid::points(&axes))?;
    crate::report::write::check_out(&args.batch.out)?;
    let points = variants(&c, &axes).map_err(|e| e.to_string())?;
    // Each point makes its own scenario, which may cost more than the one in the file (more
    // attempts per hop, a deeper graph): estimate every one, and the map as a whole.
    let mut events = 0.0;
    for point in &points {
        // The error names the point's values (its scenario is shown with them).
        let e = point
            .estimate(seeds.len() as u32, 1, args.batch.threads(), &limits)
            .map_err(|e| e.to_string())?;
        events += e.events;
    }
    if events > limits.max_events {
        return Err(format!(
            "{}: the map's {} points need about {events:.2e} events in all, more than the limit of {:.2e} (--max-events)",
            args.file.display(),
            points.len(),
            limits.max_events
        ));
    }
    let command = format!("sim map {}", args.file.display());
    let run_seeds = match shard {
        Some(sh) => sh.seeds(&seeds),
        None => seeds.clone(),
    };
    let runs = run_grid(&points, &run_seeds, args.batch.options()).map_err(|e| e.to_string())?;
    if let Some(sh) = shard {
        return super::shard::write(
            &args.batch,
            report::grid::shards::Kind::Map,
            &command,
            &c.scenario,
            &axes,
            &seeds,
            sh,
            &runs,
        );
    }
    let m = MapResult::from_runs(&c.scenario, &x, &y, &seeds, runs);
    let dir = report::grid::map::write(&args.batch.out, &m, &command).map_err(|e| {
        format!(
            "{}: {e}",
            args.batch
                .out
                .join(crate::scenario::folder_name(&c.scenario.name))
                .display()
        )
    })?;
    if !args.batch.quiet {
        for line in report::grid::map::cliffs(&m) {
            outln!("{}", escape(&line.replace("**", "")));
        }
    }
    let dir = escape(&dir.display().to_string()).into_owned();
    outln!("wrote map.csv, map.md and map-stuck, map-recovery (SVG and PNG) in {dir}");
    Ok(())
}

//! `sim merge DIR... [--out DIR]`: merges the shards of a sharded `sim sweep` or `sim map` into
//! the report the unsharded command writes, byte for byte, after checking that they belong to one
//! batch and cover every run exactly once (see [`crate::report::shards`]).

use std::path::PathBuf;

use clap::Args;

use crate::cli::out::outln;
use crate::report;
use crate::report::grid::shards::Kind;
use crate::run::grid::map::MapResult;
use crate::run::grid::sweep::SweepResult;
use crate::scenario::escape;

/// Options of `sim merge`.
#[derive(Debug, Args)]
pub struct MergeArgs {
    /// Shard folders (`OUT/<scenario>.shards/<i>-of-<n>`), or the folder holding them.
    #[arg(required = true)]
    pub dirs: Vec<PathBuf>,
    /// Folder for the report; it goes into OUT/<scenario name>/.
    #[arg(long, default_value = "reports")]
    pub out: PathBuf,
}

pub fn merge(args: MergeArgs) -> Result<(), String> {
    report::write::check_out(&args.out)?;
    let (m, runs) = report::grid::shards::read(&args.dirs)?;
    let n = runs.len();
    let shown = |d: &std::path::Path| escape(&d.display().to_string()).into_owned();
    let fail = |e: std::io::Error| {
        format!(
            "{}: {e}",
            args.out
                .join(crate::scenario::folder_name(&m.scenario.name))
                .display()
        )
    };
    let dir = match (m.kind, m.axes.as_slice()) {
        (Kind::Map, [x, y]) => {
            let r = MapResult::from_runs(&m.scenario, x, y, &m.seeds, runs);
            report::grid::map::write(&args.out, &r, &m.command).map_err(fail)?
        }
        (Kind::Sweep, [axis]) => {
            let r = SweepResult::from_runs(&m.scenario, axis, &m.seeds, runs);
            report::grid::sweep::write(&args.out, &r, &m.scenario.description, &m.command)
                .map_err(fail)?
                .0
        }
        _ => return Err("the manifests' kind and number of parameters disagree".into()),
    };
    outln!(
        "merged {} shards, {n} runs: wrote the report in {}",
        m.shard.count,
        shown(&dir)
    );
    Ok(())
}

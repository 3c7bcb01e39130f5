//! `--shard i/n|auto` for `sim sweep` and `sim map`, and writing a shard's raw results.

use clap::Args;

use super::batch::BatchArgs;
use crate::cli::out::outln;
use crate::report::grid::shards::{Kind, Manifest};
use crate::run::grid::RawRun;
use crate::run::grid::shard::Shard;
use crate::scenario::{Scenario, Sweep, escape};

/// Which shard to run.
#[derive(Debug, Args, Default)]
pub struct ShardArg {
    /// Run only shard i of n (`0/4` ... `3/4`: the seeds whose number mod n is i) and write raw
    /// results for `sim merge` into OUT/<scenario>.shards/<i>-of-<n>/; `auto` reads the index
    /// from the batch engine (SIM_SHARD_INDEX + SIM_SHARD_COUNT, Slurm array variables, or
    /// JOB_COMPLETION_INDEX + SIM_SHARD_COUNT).
    #[arg(long, value_name = "I/N|auto")]
    pub shard: Option<String>,
}

impl ShardArg {
    /// The shard to run, if any, checked before anything runs.
    pub fn resolve(&self) -> Result<Option<Shard>, String> {
        match self.shard.as_deref() {
            None => Ok(None),
            Some("auto") => Shard::from_env(|k| std::env::var(k).ok())
                .map(Some)
                .map_err(|e| format!("--shard auto: {e}")),
            Some(s) => s
                .parse::<Shard>()
                .map(Some)
                .map_err(|e| format!("--shard {}: {e}", escape(s))),
        }
    }
}

/// Writes shard `shard`'s runs and manifest, and says where.
#[allow(clippy::too_many_arguments)]
pub fn write(
    batch: &BatchArgs,
    kind: Kind,
    command: &str,
    scenario: &Scenario,
    axes: &[Sweep],
    seeds: &[u64],
    shard: Shard,
    runs: &[RawRun],
) -> Result<(), String> {
    let m = Manifest::new(kind, command, scenario, axes, seeds, shard, runs.len());
    let dir = crate::report::grid::shards::write(&batch.out, &m, runs)
        .map_err(|e| format!("{}: {e}", batch.out.display()))?;
    outln!(
        "shard {shard}: {} runs ({} of {} seeds) in {}; merge all {} with `sim merge {}`",
        runs.len(),
        m.shard_seeds.len(),
        seeds.len(),
        escape(&dir.display().to_string()),
        shard.count,
        escape(
            &dir.parent()
                .map_or_else(String::new, |p| p.display().to_string())
        )
    );
    Ok(())
}

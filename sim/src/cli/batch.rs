//! The options every command that runs a batch of simulations shares (`run`, `sweep`): seeds,
//! output folder, threads, quiet.

use std::path::PathBuf;

use clap::Args;
use sim::run::BatchOptions;

/// Seeds, output folder, threads and verbosity of a batch of runs.
#[derive(Debug, Args)]
pub struct BatchArgs {
    /// Master seed of the first run (default: the scenario's).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Runs per policy (and per swept value), seeds seed, seed+1, ... (default: the scenario's).
    #[arg(long)]
    pub seeds: Option<u32>,
    /// Folder for reports; each scenario writes into OUT/<scenario name>/.
    #[arg(long, default_value = "reports")]
    pub out: PathBuf,
    /// Worker threads (default: one per core). Output does not depend on it.
    #[arg(long)]
    pub jobs: Option<usize>,
    /// No progress bar and no table.
    #[arg(long, short)]
    pub quiet: bool,
}

impl Default for BatchArgs {
    fn default() -> Self {
        BatchArgs {
            seed: None,
            seeds: None,
            out: PathBuf::from("reports"),
            jobs: None,
            quiet: false,
        }
    }
}

impl BatchArgs {
    /// The seeds to run: `--seed` (or the scenario's `seed`) and the next ones, `--seeds` (or the
    /// scenario's `seeds`, at least 1) in all.
    pub fn seeds(&self, scenario_seed: u64, scenario_seeds: u32) -> Vec<u64> {
        let seed = self.seed.unwrap_or(scenario_seed);
        let k = self.seeds.unwrap_or(scenario_seeds).max(1);
        (0..u64::from(k)).map(|i| seed.wrapping_add(i)).collect()
    }

    /// Threads and progress bar for the runner.
    pub fn options(&self) -> BatchOptions {
        BatchOptions {
            jobs: self.jobs.unwrap_or(0),
            progress: !self.quiet,
        }
    }
}

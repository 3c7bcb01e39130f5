//! `sim run FILE... [--seed N] [--seeds K] [--out DIR] [--jobs N]`, and `sim` with no arguments.

use std::io::IsTerminal;
use std::path::PathBuf;

use clap::Args;
use sim::report;
use sim::run::{BatchOptions, Compiled, run_all};
use sim::scenario;

/// Options of `sim run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Scenario files (RON).
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Master seed of the first run (default: the scenario's).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Runs per policy, seeds seed, seed+1, ... (default: the scenario's).
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
    #[arg(skip)]
    embedded: bool,
}

impl RunArgs {
    /// The embedded default scenario, reports under `reports/`.
    pub fn default_scenario() -> Self {
        RunArgs {
            files: vec![PathBuf::from("default.ron")],
            seed: None,
            seeds: None,
            out: PathBuf::from("reports"),
            jobs: None,
            quiet: false,
            embedded: true,
        }
    }
}

pub fn run(args: RunArgs) -> Result<(), String> {
    for file in &args.files {
        let all = if args.embedded {
            scenario::load_all(sim::DEFAULT_SCENARIO, "default.ron (embedded)")
        } else {
            scenario::load_file_all(file)
        }
        .map_err(|e| e.to_string())?;
        for s in all {
            run_one(&args, s)?;
        }
    }
    Ok(())
}

/// Runs one scenario of a file and writes its reports.
fn run_one(args: &RunArgs, s: scenario::Scenario) -> Result<(), String> {
    {
        let seed = args.seed.unwrap_or(s.seed);
        let k = args.seeds.unwrap_or(s.seeds).max(1);
        let seeds: Vec<u64> = (0..u64::from(k)).map(|i| seed.wrapping_add(i)).collect();
        let c = Compiled::new(s)?;
        let opts = BatchOptions {
            jobs: args.jobs.unwrap_or(0),
            progress: !args.quiet,
        };
        let results = run_all(&c, &seeds, opts)?;
        let dir = args.out.join(report::folder_name(&c.scenario.name));
        report::write_all(&dir, &c, &seeds, &results)
            .map_err(|e| format!("{}: {e}", dir.display()))?;
        if !args.quiet {
            let rows: Vec<_> = report::per_policy(&c, &results)
                .into_iter()
                .map(|(m, _)| m)
                .collect();
            let first = c
                .scenario
                .description
                .trim()
                .lines()
                .next()
                .unwrap_or("")
                .trim()
                .to_string();
            println!("{}: {first}", c.scenario.name);
            if k > 1 {
                println!("means over {k} seeds from {seed}");
            }
            println!(
                "{}",
                report::table::table(&rows, std::io::stdout().is_terminal())
            );
        }
        println!("wrote {}", dir.display());
    }
    Ok(())
}

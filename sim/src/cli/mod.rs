//! Command-line interface (clap derive). Each subcommand lives in its own file.

mod batch;
mod bench;
mod check;
mod list;
mod run;
mod sweep;
mod trace;

use std::path::PathBuf;

use clap::{Parser, Subcommand};

/// Compare retry policies under a storm, deterministically.
///
/// With no command, runs the embedded default scenario and writes reports/default/.
#[derive(Debug, Parser)]
#[command(name = "sim", version, about, long_about = None)]
pub struct Cli {
    /// What to do (default: run the embedded default scenario).
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run scenarios and write their reports.
    Run(run::RunArgs),
    /// Validate scenarios without running them.
    Check {
        /// Scenario files.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// List the shipped scenarios, one line each.
    List {
        /// Folder to list (default: ./scenarios, else the one next to the sim crate).
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// Print one row per logical request of a small scenario.
    Trace(trace::TraceArgs),
    /// Run a scenario once per value of one parameter; tabulate load and success per policy.
    Sweep(sweep::SweepArgs),
    /// Measure the engine: events per second and memory.
    Bench(bench::BenchArgs),
}

/// Runs the command line; returns the process exit code.
pub fn main() -> i32 {
    let cli = Cli::parse();
    let result = match cli.command {
        None => run::run(run::RunArgs::default_scenario()),
        Some(Command::Run(args)) => run::run(args),
        Some(Command::Check { files }) => check::check(&files),
        Some(Command::List { dir }) => list::list(dir),
        Some(Command::Trace(args)) => trace::trace(args),
        Some(Command::Sweep(args)) => sweep::sweep(args),
        Some(Command::Bench(args)) => bench::bench(args),
    };
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("sim: {e}");
            1
        }
    }
}

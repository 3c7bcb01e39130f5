//! Command-line interface (clap derive). Each subcommand lives in its own file.

mod batch;
mod bench;
mod check;
mod input;
mod list;
mod map;
mod merge;
pub(crate) mod out;
mod run;
mod shard;
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
    Check(check::CheckArgs),
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
    /// Run a scenario over a grid of two parameters; map where each policy stays stuck.
    Map(map::MapArgs),
    /// Merge the shards of a sharded `sweep` or `map` into its report.
    Merge(merge::MergeArgs),
    /// Measure the engine: events per second and memory.
    Bench(bench::BenchArgs),
}

/// Runs the command line; returns the process exit code.
pub fn main() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // Help and version go to stdout, usage errors to stderr; neither may panic on a
            // closed pipe.
            let code = e.exit_code();
            let text = e.render();
            let shown = if e.use_stderr() {
                text.to_string()
            } else {
                text.ansi().to_string()
            };
            if e.use_stderr() {
                let _ = std::io::Write::write_all(&mut std::io::stderr(), shown.as_bytes());
            } else if let Err(msg) = out::line(shown.trim_end()) {
                let _ = std::io::Write::write_all(
                    &mut std::io::stderr(),
                    format!("sim: {msg}\n").as_bytes(),
                );
                return 1;
            }
            return code;
        }
    };
    let result = match cli.command {
        None => run::run(run::RunArgs::default_scenario()),
        Some(Command::Run(args)) => run::run(args),
        Some(Command::Check(args)) => check::check(&args),
        Some(Command::List { dir }) => list::list(dir),
        Some(Command::Trace(args)) => trace::trace(args),
        Some(Command::Sweep(args)) => sweep::sweep(args),
        Some(Command::Map(args)) => map::map(args),
        Some(Command::Merge(args)) => merge::merge(args),
        Some(Command::Bench(args)) => bench::bench(args),
    };
    match result {
        Ok(()) => 0,
        Err(e) => {
            // Messages quote names and values from files: escape control characters. stderr
            // errors are ignored: there is nowhere left to report them.
            let _ = std::io::Write::write_all(
                &mut std::io::stderr(),
                format!("sim: {}\n", crate::scenario::escape(&e)).as_bytes(),
            );
            1
        }
    }
}

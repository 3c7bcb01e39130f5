//! `sim run FILE... [--seed N] [--seeds K] [--out DIR] [--jobs N]`, and `sim` with no arguments.
//!
//! Everything that can be refused is refused before the first simulation: every file is read,
//! checked and estimated (with the flags), report folder names must not collide, and `--out`
//! must be writable.

use std::collections::HashMap;
use std::io::IsTerminal;
use std::path::PathBuf;

use clap::{Args, ValueEnum};

use super::batch::BatchArgs;
use super::input::read_scenarios;
use crate::cli::out::outln;
use crate::compile::Compiled;
use crate::report;
use crate::scenario::escape;

/// Options of `sim run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Scenario files (RON).
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    #[command(flatten)]
    pub batch: BatchArgs,
    /// Colour the best and worst values of the table: auto (when stdout is a terminal and
    /// NO_COLOR is unset or empty), always, never.
    #[arg(long, value_enum, default_value_t = ColorChoice::Auto)]
    pub color: ColorChoice,
    #[arg(skip)]
    embedded: bool,
}

impl RunArgs {
    /// The embedded default scenario, reports under `reports/`.
    pub fn default_scenario() -> Self {
        RunArgs {
            files: vec![PathBuf::from("default.ron")],
            batch: BatchArgs::default(),
            color: ColorChoice::Auto,
            embedded: true,
        }
    }
}

/// When to colour the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ColorChoice {
    /// When stdout is a terminal and `NO_COLOR` is unset or empty.
    Auto,
    /// Always.
    Always,
    /// Never.
    Never,
}

impl ColorChoice {
    /// Whether to colour output going to stdout.
    fn styled(self) -> bool {
        match self {
            ColorChoice::Always => true,
            ColorChoice::Never => false,
            ColorChoice::Auto => {
                std::io::stdout().is_terminal()
                    && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
            }
        }
    }
}

pub fn run(args: RunArgs) -> Result<(), String> {
    let limits = args.batch.limits.limits();
    // Read, check and estimate everything first.
    let mut all: Vec<(Compiled, Vec<u64>)> = Vec::new();
    for file in &args.files {
        let scenarios = if args.embedded {
            crate::load::load_all_with(crate::DEFAULT_SCENARIO, "default.ron (embedded)", &limits)
                .map_err(|e| e.to_string())?
        } else {
            read_scenarios(file, &limits)?
        };
        for c in scenarios {
            let seeds = args.batch.seeds(&c, 1)?;
            all.push((c, seeds));
        }
    }
    let mut folders: HashMap<String, String> = HashMap::new();
    for (c, _) in &all {
        let folder = crate::scenario::folder_name(&c.scenario.name);
        if let Some(other) = folders.insert(folder.clone(), c.scenario.name.clone()) {
            return Err(format!(
                "scenarios \"{}\" and \"{}\" would both write their report to {}: rename one",
                escape(&other),
                escape(&c.scenario.name),
                args.batch.out.join(&folder).display()
            ));
        }
    }
    crate::report::write::check_out(&args.batch.out)?;
    for (c, seeds) in &all {
        run_one(&args, c, seeds)?;
    }
    Ok(())
}

/// Runs one scenario of a file and writes its reports.
fn run_one(args: &RunArgs, c: &Compiled, seeds: &[u64]) -> Result<(), String> {
    let runs = crate::run::run(c, seeds, args.batch.options()).map_err(|e| e.to_string())?;
    let dir = report::write(&args.batch.out, &runs)
        .map_err(|e| args.batch.write_error(&c.scenario.name, e))?;
    if !args.batch.quiet {
        outln!(
            "{}",
            report::terminal(&runs, args.color.styled()).trim_end()
        );
        outln!();
    }
    let mut stems = report::FIGURES.to_vec();
    if runs.results.iter().any(|r| !r.output.limits.is_empty()) {
        stems.extend(["concurrency", "limit"]);
    }
    outln!(
        "wrote {}: summary.md (open it first), summary.json, timeseries.csv, and {} as SVG and PNG",
        escape(&dir.display().to_string()),
        stems.join(", ")
    );
    Ok(())
}

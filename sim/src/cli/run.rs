//! `sim run FILE... [--seed N] [--seeds K] [--out DIR] [--jobs N]`, and `sim` with no arguments.

use std::io::IsTerminal;
use std::path::PathBuf;

use clap::{Args, ValueEnum};
use sim::report;
use sim::run::{Compiled, run_all};

use super::batch::BatchArgs;
use sim::scenario;

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

/// Width to wrap the conclusion at: the terminal's (at most 100 columns), else 100.
fn wrap_width(table: &comfy_table::Table) -> usize {
    table.width().map_or(100, |w| usize::from(w).clamp(40, 100))
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
    let seeds = args.batch.seeds(s.seed, s.seeds);
    let (k, seed) = (seeds.len(), seeds[0]);
    let c = Compiled::new(s)?;
    let results = run_all(&c, &seeds, args.batch.options())?;
    let dir = args.batch.out.join(report::folder_name(&c.scenario.name));
    report::write_all(&dir, &c, &seeds, &results).map_err(|e| format!("{}: {e}", dir.display()))?;
    if !args.batch.quiet {
        let policies = report::per_policy(&c, &results);
        let first = c
            .scenario
            .description
            .trim()
            .lines()
            .next()
            .unwrap_or("")
            .trim()
            .to_string();
        if first.is_empty() {
            println!("{}", c.scenario.name);
        } else {
            println!("{}: {first}", c.scenario.name);
        }
        if k > 1 {
            println!("means over {k} seeds from {seed}, ± the 95% interval of the mean");
        }
        let styled = args.color.styled();
        let table = report::table::table(&policies, styled);
        println!("{table}");
        if styled {
            println!("green: best of its column, red: worst");
        }
        let text = report::conclusion::conclusion(&c, &policies, report::conclusion::Style::Plain);
        println!(
            "\n{}\n",
            report::conclusion::wrap(&text, wrap_width(&table))
        );
    }
    println!(
        "wrote {}: summary.md (open it first), summary.json, timeseries.csv, and {} as SVG and PNG",
        dir.display(),
        report::FIGURES.join(", ")
    );
    Ok(())
}

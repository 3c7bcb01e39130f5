//! `sim check FILE... [--seeds K] [--max-memory M] [--max-events E]`: parse, check, compile and
//! estimate each scenario, report every file, fail if any is bad.

use std::path::PathBuf;

use clap::Args;

use super::batch::LimitArgs;
use super::input::read_scenarios;
use crate::cli::out::outln;
use crate::scenario::escape;

/// Options of `sim check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Scenario files.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Estimate with this many seeds rather than the scenario's.
    #[arg(long)]
    pub seeds: Option<u32>,
    #[command(flatten)]
    pub limits: LimitArgs,
}

pub fn check(args: &CheckArgs) -> Result<(), String> {
    let limits = args.limits.limits();
    let mut bad = 0;
    for f in &args.files {
        let checked = read_scenarios(f, &limits).and_then(|all| {
            let mut lines = Vec::with_capacity(all.len());
            for c in &all {
                let seeds = args.seeds.unwrap_or(c.scenario.seeds);
                limits
                    .check_seeds(u64::from(seeds))
                    .map_err(|e| format!("--seeds {seeds}: {e}"))?;
                let e = c
                    .estimate(seeds, 1, rayon::current_num_threads(), &limits)
                    .map_err(|e| e.to_string())?;
                lines.push(format!(
                    "{}: ok ({}, {} policies, horizon {}; estimate for {seeds} seed(s): {:.2e} events, {:.0} MiB)",
                    escape(&f.display().to_string()),
                    escape(&c.scenario.name),
                    c.scenario.policies.len(),
                    c.scenario.horizon,
                    e.events,
                    (e.memory / 1048576.0).ceil()
                ));
            }
            Ok(lines)
        });
        match checked {
            Ok(lines) => {
                for l in lines {
                    outln!("{l}");
                }
            }
            Err(e) => {
                let _ = std::io::Write::write_all(
                    &mut std::io::stderr(),
                    format!("{}\n", escape(&e)).as_bytes(),
                );
                bad += 1;
            }
        }
    }
    if bad > 0 {
        Err(format!("{bad} of {} file(s) invalid", args.files.len()))
    } else {
        Ok(())
    }
}

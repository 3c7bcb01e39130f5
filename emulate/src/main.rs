//! `emulate`: run a `sim` scenario for real and compare it with the simulation.
//!
//! ```text
//! emulate run FILE [--time-scale X] [--policy NAME]... [--out DIR] [--strict]
//! emulate check FILE [--time-scale X]
//! emulate calibrate [--rates 250,500,1000] [--seconds 5]
//! ```
#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use emulate::compare::{
    FleetRow, Row, TIER_TOLERANCE, TOLERANCE, TierRow, fleet_markdown, markdown, tier_markdown,
};
use emulate::run::run_policy;
use emulate::simface::{self, Compiled, RunResult};
use emulate::{calibrate, size};

#[derive(Debug, Parser)]
#[command(
    name = "emulate",
    version,
    about = "Run a sim scenario on a real HTTP stack (127.0.0.1 only) and compare it with the simulation"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Debug, clap::Args)]
struct Sizing {
    /// Wall seconds per scenario second: 2 runs twice as slowly, 0.5 twice as fast.
    #[arg(long, default_value_t = 1.0)]
    time_scale: f64,
    /// Attempts per wall second allowed by the size check.
    #[arg(long, default_value_t = size::MAX_ATTEMPTS_PER_S)]
    max_rate: f64,
    /// Wall seconds allowed for all runs together.
    #[arg(long, default_value_t = 1800.0)]
    max_wall: f64,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Emulate every policy (one after the other), write reports/<name>-emulated/ and compare;
    /// in a file that holds several scenarios, each of them in turn (or the one picked).
    Run {
        /// Scenario file (RON).
        file: PathBuf,
        /// The scenario to run, in a file that holds several (default: every one).
        #[arg(long)]
        scenario: Option<String>,
        #[command(flatten)]
        sizing: Sizing,
        /// Only these policies (by name; repeatable).
        #[arg(long)]
        policy: Vec<String>,
        /// Seed (default: the scenario's).
        #[arg(long)]
        seed: Option<u64>,
        /// Where report folders go.
        #[arg(long, default_value = "reports")]
        out: PathBuf,
        /// Exit with status 2 if any verdict differs from the simulation's (in a call graph, also
        /// any tier's verdict, or a tier's amplification by more than 10%).
        #[arg(long)]
        strict: bool,
    },
    /// Only the size check.
    Check {
        /// Scenario file (RON).
        file: PathBuf,
        /// The scenario to check, in a file that holds several.
        #[arg(long)]
        scenario: Option<String>,
        #[command(flatten)]
        sizing: Sizing,
    },
    /// Measure the emulator's own overhead and the highest rate it drives faithfully.
    Calibrate {
        /// Offered rates, requests per second.
        #[arg(long, value_delimiter = ',', default_value = "250,500,1000,2000,4000")]
        rates: Vec<f64>,
        /// Seconds per rate (1 to 60).
        #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=60))]
        seconds: u64,
    },
}

fn main() -> ExitCode {
    match real_main() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn load(
    file: &std::path::Path,
    scenario: Option<&str>,
    only: &[String],
) -> Result<Compiled, String> {
    let c = simface::load(file, scenario)?;
    pick(c, file, only)
}

/// Only the policies named in `only` (all if empty).
fn pick(c: Compiled, file: &std::path::Path, only: &[String]) -> Result<Compiled, String> {
    if only.is_empty() {
        return Ok(c);
    }
    let mut s = c.scenario.clone();
    for name in only {
        if !s.policies.iter().any(|p| &p.name == name) {
            let names: Vec<&str> = s.policies.iter().map(|p| p.name.as_str()).collect();
            return Err(format!(
                "no policy \"{name}\" in {}: it has {}",
                file.display(),
                names.join(", ")
            ));
        }
    }
    s.policies.retain(|p| only.contains(&p.name));
    simface::compile(&s)
}

fn sized(c: &Compiled, sizing: &Sizing) -> Result<size::Size, String> {
    if !(sizing.time_scale.is_finite() && sizing.time_scale > 0.0 && sizing.time_scale <= 100.0) {
        return Err(format!(
            "--time-scale {}: expected a number in (0, 100]",
            sizing.time_scale
        ));
    }
    emulate::fleet::check_scale(c, sizing.time_scale)?;
    let s = size::measure(c, sizing.time_scale, c.scenario.policies.len())?;
    eprintln!(
        "size: up to {:.0} attempts/s, mean service {:.1} ms, shortest timeout {}, up to {} jobs per server, {:.0} s of wall time",
        s.peak_attempts_per_s,
        s.min_service_ms,
        s.min_timeout_ms
            .map_or("none".into(), |t| format!("{t:.0} ms")),
        s.max_jobs,
        s.wall_s
    );
    size::check(&s, sizing.max_rate, sizing.max_wall)?;
    Ok(s)
}

fn real_main() -> Result<ExitCode, String> {
    match Cli::parse().cmd {
        Cmd::Check {
            file,
            scenario,
            sizing,
        } => {
            let c = load(&file, scenario.as_deref(), &[])?;
            sized(&c, &sizing)?;
            println!("{}: can be emulated faithfully", file.display());
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Calibrate { rates, seconds } => {
            println!(
                "| offered/s | goodput/s | success | latency p50 | latency p99 | send lag p99 | CPU per request | faithful |"
            );
            println!("|---|---|---|---|---|---|---|---|");
            for rate in rates {
                if !(rate.is_finite() && rate > 0.0 && rate <= 20_000.0) {
                    return Err(format!("rate {rate}: expected a number in (0, 20000]"));
                }
                let s = calibrate::step(rate, seconds)?;
                println!(
                    "| {:.0} | {:.0} | {:.2}% | {:.3} ms | {:.3} ms | {:.3} ms | {} | {} |",
                    s.rate,
                    s.goodput,
                    s.success * 100.0,
                    s.rtt_p50_ms,
                    s.rtt_p99_ms,
                    s.lag_p99_ms,
                    s.cpu_us_per_request
                        .map_or("-".into(), |c| format!("{c:.0} µs")),
                    if s.faithful { "yes" } else { "no" }
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Run {
            file,
            scenario,
            sizing,
            policy,
            seed,
            out,
            strict,
        } => {
            let all = match scenario.as_deref() {
                Some(_) => vec![load(&file, scenario.as_deref(), &policy)?],
                None => simface::load_all(&file)?
                    .into_iter()
                    .map(|c| pick(c, &file, &policy))
                    .collect::<Result<_, _>>()?,
            };
            // Every size is checked before the first run starts.
            let sizes: Vec<size::Size> = all
                .iter()
                .map(|c| sized(c, &sizing))
                .collect::<Result<_, _>>()?;
            let total: f64 = sizes.iter().map(|s| s.wall_s).sum();
            if total > sizing.max_wall {
                return Err(format!(
                    "{total:.0} s of wall time for every scenario of {}, above the {:.0} s allowed (--max-wall)",
                    file.display(),
                    sizing.max_wall
                ));
            }
            let mut agree = true;
            for (c, size) in all.into_iter().zip(sizes) {
                agree &= run_one(c, size, &sizing, seed, &out)?;
            }
            if !agree && strict {
                return Ok(ExitCode::from(2));
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Emulates every policy of `c`, writes the report and the comparison, and says whether the
/// emulation agrees (see `--strict`).
fn run_one(
    mut c: Compiled,
    size: size::Size,
    sizing: &Sizing,
    seed: Option<u64>,
    out: &std::path::Path,
) -> Result<bool, String> {
    let seed = seed.unwrap_or(c.scenario.seed);
    let mut results = Vec::new();
    let mut fidelity = Vec::new();
    for (p, pol) in c.scenario.policies.iter().enumerate() {
        eprintln!(
            "emulating \"{}\" of \"{}\" for {:.0} s of wall time ...",
            pol.name,
            c.scenario.name,
            simface::buckets(&c).0 as f64 / 1e9 * sizing.time_scale
        );
        let (output, fid) = run_policy(&c, p, seed, sizing.time_scale)?;
        eprintln!(
            "  {} arrivals, send lag p50 {:.2} ms, p99 {:.2} ms, max {:.1} ms; verdict {}",
            fid.arrivals, fid.lag_p50_ms, fid.lag_p99_ms, fid.lag_max_ms, output.summary.verdict
        );
        fidelity.push((pol.name.clone(), fid));
        results.push(RunResult {
            policy: p,
            seed,
            output,
        });
    }
    let simulated = simface::simulate(&c, seed)?;
    // The report is the emulation's: `sim`'s files, in a folder of its own.
    let name = c.scenario.name.clone();
    c.scenario.name = format!("{}-emulated", simface::folder_name(&name));
    let runs = simface::runs(&c, seed, results);
    let dir = simface::write_report(out, &runs)
        .map_err(|e| format!("cannot write the report under {}: {e}", out.display()))?;
    println!("{}", simface::table(&runs));
    let results = runs.results;
    let rows: Vec<Row> = results
        .iter()
        .zip(&simulated)
        .map(|(e, s)| Row::new(&s.output.summary, &e.output.summary))
        .collect();
    let tiers: Vec<TierRow> = results
        .iter()
        .zip(&simulated)
        .flat_map(|(e, s)| TierRow::rows(&s.output.summary, &e.output.summary))
        .collect();
    let fleet: Vec<FleetRow> = simulated
        .iter()
        .zip(&fidelity)
        .filter_map(|(s, (_, f))| FleetRow::new(&s.output.summary, f.store.as_ref()))
        .collect();
    let table = markdown(&rows);
    println!("{table}");
    let fleet_md = if fleet.is_empty() {
        String::new()
    } else {
        let t = fleet_markdown(&fleet);
        println!("{t}");
        format!(
            "\n## The fleet's store\n\nWhat the instances did with the store: the simulator's, and the emulator's as its instances saw it over a real Redis (an operation given up at the wait bound counts as failed; an opening is a breaker generation an instance saw open). Shown, not judged.\n\n{t}"
        )
    };
    let tier_md = if tiers.is_empty() {
        String::new()
    } else {
        let t = tier_markdown(&tiers);
        println!("{t}");
        format!(
            "\n## Per tier\n\nAmplification = arrivals at the tier ÷ the edge's requests; agreement: same verdict, amplification within {:.0}%.\n\n{t}",
            TIER_TOLERANCE * 100.0
        )
    };
    let fid_md: String = fidelity
        .iter()
        .map(|(n, f)| {
            format!(
                "| {n} | {} | {:.2} | {:.2} | {:.1} | {:.1} |\n",
                f.arrivals, f.lag_p50_ms, f.lag_p99_ms, f.lag_max_ms, f.wall_s
            )
        })
        .collect();
    let md = format!(
        "# {}: simulated vs emulated\n\nSeed {seed}, time scale {}. Emulated on a real HTTP/2 stack on 127.0.0.1 (`emulate run`); simulated by `sim` with the same scenario and seed. Agreement: same verdict, and amplification during and after the fault within {:.0}%.\n\n{table}{tier_md}{fleet_md}\n## Emulator fidelity\n\n| policy | arrivals | send lag p50 (ms) | p99 (ms) | max (ms) | wall (s) |\n|---|---|---|---|---|---|\n{fid_md}",
        name,
        sizing.time_scale,
        TOLERANCE * 100.0
    );
    std::fs::write(dir.join("comparison.md"), md)
        .map_err(|e| format!("cannot write comparison.md: {e}"))?;
    let json = serde_json::json!({
        "scenario": name,
        "seed": seed,
        "time_scale": sizing.time_scale,
        "tolerance": TOLERANCE,
        "tier_tolerance": TIER_TOLERANCE,
        "size": size,
        "rows": rows,
        "tiers": tiers,
        "fleet": fleet,
        "fidelity": fidelity.iter().map(|(n, f)| serde_json::json!({"policy": n, "fidelity": f})).collect::<Vec<_>>(),
    });
    std::fs::write(
        dir.join("comparison.json"),
        serde_json::to_string_pretty(&json).unwrap_or_default() + "\n",
    )
    .map_err(|e| format!("cannot write comparison.json: {e}"))?;
    eprintln!("wrote {}", dir.display());
    let differ: Vec<String> = rows
        .iter()
        .filter(|r| !r.same_verdict())
        .map(|r| r.policy.clone())
        .chain(
            tiers
                .iter()
                .filter(|t| !t.same_verdict() || !t.amplification_agrees())
                .map(|t| format!("{} at {}", t.policy, t.tier)),
        )
        .collect();
    if !differ.is_empty() {
        eprintln!(
            "\"{name}\": verdicts (or a tier's amplification) differ for: {}",
            differ.join(", ")
        );
    }
    Ok(differ.is_empty())
}

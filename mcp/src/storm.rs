//! Storm simulations for `simulate_storm` and `list_scenarios`: every call into the simulator
//! (`sim`) is in this file.
//!
//! An agent can run a shipped scenario by name, or its own in RON, and get back the comparison
//! table, the plain-language conclusion, the summary as JSON and the amplification plot as a PNG.
//! A simulation runs on the server's CPU, so it is bounded: before running, the work is estimated
//! (logical requests × the most attempts a request can make × policies × seeds) and a scenario
//! over the operator's budget is refused with the estimate in the message.

use std::path::{Path, PathBuf};

use serde::Serialize;
use sim::report;
use sim::run::{BatchOptions, Compiled, run_all};
use sim::scenario::{self, DownstreamModel, Layer, Scenario, Workload};

mod shipped {
    include!(concat!(env!("OUT_DIR"), "/shipped.rs"));
}

/// Attempts assumed for a retry layer without `max_attempts` (bounded only by its deadline).
const UNBOUNDED_ATTEMPTS: u64 = 10;
/// Largest scenario text accepted, in bytes.
pub const MAX_RON_BYTES: usize = 256 * 1024;
/// Most seeds per policy.
pub const MAX_SEEDS: u32 = 32;

/// The operator's bounds on simulations.
#[derive(Clone, Debug)]
pub struct StormLimits {
    /// Largest estimated work (attempts over all runs) a simulation may take.
    pub max_work: u64,
    /// A folder of scenario files to offer instead of the shipped ones.
    pub dir: Option<PathBuf>,
}

impl Default for StormLimits {
    fn default() -> Self {
        StormLimits {
            max_work: 20_000_000,
            dir: None,
        }
    }
}

/// A scenario an agent can run by name.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct ScenarioInfo {
    /// The scenario's name (what `simulate_storm` takes).
    pub name: String,
    /// The file it is in.
    pub file: String,
    /// The first line of its description.
    pub description: String,
    /// Policies compared.
    pub policies: Vec<String>,
    /// Simulated time, in seconds.
    pub horizon_s: f64,
    /// Estimated work with the scenario's own seeds (see [`estimate`]).
    pub estimated_work: u64,
}

/// The scenario files on offer: the operator's folder, or the shipped ones.
fn files(limits: &StormLimits) -> Result<Vec<(String, String)>, String> {
    let Some(dir) = &limits.dir else {
        return Ok(shipped::SHIPPED
            .iter()
            .map(|&(f, t)| (f.to_string(), t.to_string()))
            .collect());
    };
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "ron"))
        .collect();
    paths.sort();
    paths
        .iter()
        .map(|p| {
            let text = std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?;
            Ok((file_name(p), text))
        })
        .collect()
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Every scenario on offer, in file order. Files that do not load are left out.
pub fn list(limits: &StormLimits) -> Result<Vec<ScenarioInfo>, String> {
    let mut out = Vec::new();
    for (file, text) in files(limits)? {
        let Ok(all) = scenario::load_all(&text, &file) else {
            continue;
        };
        for s in all {
            out.push(ScenarioInfo {
                estimated_work: estimate(&s, s.seeds.max(1)),
                description: s
                    .description
                    .trim()
                    .lines()
                    .next()
                    .unwrap_or("")
                    .trim()
                    .to_string(),
                policies: s.policies.iter().map(|p| p.name.clone()).collect(),
                horizon_s: s.horizon.as_nanos() as f64 / 1e9,
                name: s.name,
                file: file.clone(),
            });
        }
    }
    Ok(out)
}

/// The shipped (or operator's) scenario called `name` (its name, or its file name with or without
/// `.ron`).
pub fn by_name(name: &str, limits: &StormLimits) -> Result<Scenario, String> {
    let mut names = Vec::new();
    for (file, text) in files(limits)? {
        let Ok(all) = scenario::load_all(&text, &file) else {
            continue;
        };
        let stem = file.trim_end_matches(".ron");
        let single = all.len() == 1;
        for s in all {
            if s.name == name || (single && (file == name || stem == name)) {
                return Ok(s);
            }
            names.push(s.name);
        }
    }
    Err(format!(
        "no scenario named {name:?}; there are: {}",
        names.join(", ")
    ))
}

/// A scenario written by the caller in RON (one scenario; the first if the text holds several).
pub fn from_ron(text: &str) -> Result<Scenario, String> {
    if text.len() > MAX_RON_BYTES {
        return Err(format!(
            "scenario text is {} bytes, over the limit of {MAX_RON_BYTES}",
            text.len()
        ));
    }
    let mut all = scenario::load_all(text, "scenario.ron").map_err(|e| e.to_string())?;
    if all.is_empty() {
        return Err("the text holds no scenario".into());
    }
    Ok(all.swap_remove(0))
}

/// Estimated work of running every policy of `s` under `seeds` seeds: logical requests × the most
/// attempts one request can make under the policy, summed over policies, times the seeds. An
/// estimate (closed-loop clients are assumed to cycle at think time + the fastest mean service
/// time; a retry layer without an attempt limit counts as 10), good to an order of magnitude.
pub fn estimate(s: &Scenario, seeds: u32) -> u64 {
    let horizon = s.horizon.as_nanos() as f64 / 1e9;
    let requests = match &s.workload {
        Workload::OpenLoop {
            rate, steps, start, ..
        } => {
            let mut total = 0.0;
            let mut t = start.as_nanos() as f64 / 1e9;
            let mut r = *rate;
            for step in steps {
                let at = (step.at.as_nanos() as f64 / 1e9).min(horizon);
                if at > t {
                    total += r * (at - t);
                    t = at;
                }
                r = step.rate;
            }
            total + r * (horizon - t).max(0.0)
        }
        Workload::ClosedLoop { clients, think, .. } => {
            let service = s
                .downstreams
                .iter()
                .filter_map(|d| match &d.model {
                    DownstreamModel::Server { service, .. } => Some(mean_secs(service)),
                    _ => None,
                })
                .fold(f64::INFINITY, f64::min);
            let service = if service.is_finite() { service } else { 0.0 };
            let cycle = (mean_secs(think) + service).max(1e-3);
            f64::from(*clients) * horizon / cycle
        }
        Workload::JobSet { clients, .. } => f64::from(*clients),
    };
    let attempts: u64 = s.policies.iter().map(|p| attempts(&p.stack)).sum();
    let work = requests.max(0.0) * attempts as f64 * f64::from(seeds.max(1));
    if work >= u64::MAX as f64 {
        u64::MAX
    } else {
        work.ceil() as u64
    }
}

fn mean_secs(d: &scenario::Dist) -> f64 {
    sim::model::dist::Sampler::new(d).mean_secs()
}

/// The most calls one logical request can make through `layer`.
fn attempts(layer: &Layer) -> u64 {
    match layer {
        Layer::Call { .. } => 1,
        Layer::Breaker { inner, .. } | Layer::Throttle { inner, .. } => attempts(inner),
        Layer::Retry { policy, inner, .. } => policy
            .max_attempts
            .map_or(UNBOUNDED_ATTEMPTS, u64::from)
            .saturating_mul(attempts(inner)),
        Layer::Fallback(layers) => layers.iter().map(attempts).fold(0, u64::saturating_add),
    }
}

/// What a simulation returns.
#[derive(Debug)]
pub struct StormReport {
    /// The comparison table, as text.
    pub table: String,
    /// The conclusion, in plain words.
    pub conclusion: String,
    /// `summary.json`'s content.
    pub summary: serde_json::Value,
    /// The amplification plot, PNG.
    pub amplification_png: Vec<u8>,
    /// The work estimate it was admitted with.
    pub estimated_work: u64,
}

/// Runs `s` (with `seed`/`seeds` overriding the scenario's) if its estimate is within budget.
/// Blocking and CPU-bound: call it off the async runtime.
pub fn run(
    s: Scenario,
    seed: Option<u64>,
    seeds: Option<u32>,
    limits: &StormLimits,
) -> Result<StormReport, String> {
    let k = seeds.unwrap_or(s.seeds).max(1);
    if k > MAX_SEEDS {
        return Err(format!("seeds: {k} is over the limit of {MAX_SEEDS}"));
    }
    let estimated_work = estimate(&s, k);
    if estimated_work > limits.max_work {
        return Err(format!(
            "refused: scenario {:?} is estimated at {estimated_work} attempts over {} policies × {k} seeds, over this server's budget of {}; shorten the horizon, lower the rate or use fewer seeds",
            s.name,
            s.policies.len(),
            limits.max_work
        ));
    }
    let first = seed.unwrap_or(s.seed);
    let seeds: Vec<u64> = (0..u64::from(k)).map(|i| first.wrapping_add(i)).collect();
    let c = Compiled::new(s)?;
    let results = run_all(
        &c,
        &seeds,
        BatchOptions {
            jobs: 0,
            progress: false,
        },
    )?;
    let policies = report::per_policy(&c, &results);
    let table = report::table::table(&policies, false).to_string();
    let conclusion =
        report::conclusion::conclusion(&c, &policies, report::conclusion::Style::Plain);
    let summary = serde_json::from_str(&report::json::summary_json(&c, &seeds, &policies))
        .map_err(|e| format!("summary.json: {e}"))?;
    let amplification_png = report::figures::figures(&c, &seeds, &results)
        .into_iter()
        .find(|f| f.stem == "amplification")
        .ok_or("the report has no amplification plot")
        .and_then(|f| {
            report::plot::png(&f.chart).map_err(|_| "drawing the amplification plot failed")
        })?;
    Ok(StormReport {
        table,
        conclusion,
        summary,
        amplification_png,
        estimated_work,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shipped_scenario_is_listed_with_an_estimate() {
        let all = list(&StormLimits::default()).unwrap();
        assert!(
            all.iter()
                .any(|s| s.name == "default" || s.file == "default.ron"),
            "{all:?}"
        );
        assert!(all.len() >= shipped::SHIPPED.len());
        assert!(
            all.iter()
                .all(|s| s.estimated_work > 0 && !s.policies.is_empty())
        );
    }

    #[test]
    fn scenarios_are_found_by_name_or_file() {
        let l = StormLimits::default();
        let first = &list(&l).unwrap()[0];
        assert_eq!(by_name(&first.name, &l).unwrap().name, first.name);
        let err = by_name("no-such-scenario", &l).unwrap_err();
        assert!(err.contains(&first.name), "{err}");
    }

    #[test]
    fn estimate_scales_with_seeds_and_attempts() {
        let s = by_name("default", &StormLimits::default()).unwrap();
        let one = estimate(&s, 1);
        assert!(one > 0);
        assert_eq!(estimate(&s, 4), 4 * one);
    }

    #[test]
    fn over_budget_is_refused_with_the_estimate() {
        let s = by_name("default", &StormLimits::default()).unwrap();
        let e = estimate(&s, 1);
        let limits = StormLimits {
            max_work: e - 1,
            dir: None,
        };
        let err = run(s, None, Some(1), &limits).unwrap_err();
        assert!(
            err.contains(&e.to_string()) && err.contains("budget"),
            "{err}"
        );
    }

    #[test]
    fn bad_ron_is_an_error_with_a_position() {
        let err = from_ron("(name: \"x\", horizon: 12)").unwrap_err();
        assert!(err.contains(':'), "{err}");
        assert!(
            from_ron(&" ".repeat(MAX_RON_BYTES + 1))
                .unwrap_err()
                .contains("limit")
        );
    }
}

//! Storm simulations for `simulate_storm` and `list_scenarios`: every call into the simulator
//! (`sim`) is in this file.
//!
//! An agent can run a shipped scenario by name, or its own in RON, and get back the comparison
//! table, the plain-language conclusion, the summary as JSON and the amplification plot as a PNG.
//! A simulation runs on the server's CPU, so it is bounded: the simulator estimates the events a
//! batch will process before it runs ([`sim::compile::Compiled::estimate`]), and a batch over the
//! operator's budget is refused with the estimate, the limit and the field that drives it.

use std::path::{Path, PathBuf};

use serde::Serialize;
use sim::compile::{Compiled, Limits};
use std::sync::atomic::{AtomicBool, Ordering};

use sim::run::{BatchOptions, Runs};
use sim::scenario;

/// Largest scenario text accepted, in bytes.
pub const MAX_RON_BYTES: usize = 256 * 1024;
/// Most seeds per policy (a sanity bound: the event budget is what limits the work).
pub const MAX_SEEDS: u32 = 1000;

/// The operator's bounds on simulations.
#[derive(Clone, Debug)]
pub struct StormLimits {
    /// Most events (the simulator's estimate) one simulation may process.
    pub max_events: f64,
    /// A folder of scenario files to offer instead of the shipped ones.
    pub dir: Option<PathBuf>,
    /// Simulations running at once at most (each may use every core for its whole budget).
    pub max_running: usize,
}

impl Default for StormLimits {
    fn default() -> Self {
        StormLimits {
            max_events: 2e8,
            dir: None,
            max_running: 2,
        }
    }
}

impl StormLimits {
    /// The simulator's limits with this budget.
    fn sim(&self) -> Limits {
        Limits {
            max_events: self.max_events,
            max_seeds: MAX_SEEDS,
            ..Limits::default()
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
    /// Seeds it runs by default.
    pub seeds: u32,
    /// Events the simulator expects to process with those seeds (compare with the budget).
    pub estimated_events: f64,
}

/// The scenario files on offer: the operator's folder, or the shipped ones.
fn files(limits: &StormLimits) -> Result<Vec<(String, String)>, String> {
    let Some(dir) = &limits.dir else {
        return Ok(scenario::SHIPPED
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

/// Every scenario on offer, in file order, loaded without the budget (so big ones are listed
/// with their estimate). Files that do not load are left out.
fn loaded(limits: &StormLimits) -> Result<Vec<(String, Compiled)>, String> {
    let mut out = Vec::new();
    for (file, text) in files(limits)? {
        let Ok(all) = sim::load_all(&text, &file) else {
            continue;
        };
        out.extend(all.into_iter().map(|c| (file.clone(), c)));
    }
    Ok(out)
}

fn threads() -> usize {
    rayon::current_num_threads()
}

/// Every scenario on offer, with its estimate.
pub fn list(limits: &StormLimits) -> Result<Vec<ScenarioInfo>, String> {
    Ok(loaded(limits)?
        .into_iter()
        .map(|(file, c)| {
            let seeds = c.scenario.seeds.max(1);
            let estimated_events = c
                .estimate(seeds, 1, threads(), &Limits::default())
                .map_or(f64::INFINITY, |e| e.events);
            let s = &c.scenario;
            ScenarioInfo {
                name: s.name.clone(),
                file,
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
                seeds,
                estimated_events,
            }
        })
        .collect())
}

/// The scenario on offer called `name` (its name, or for a file of one scenario its file name
/// with or without `.ron`).
pub fn by_name(name: &str, limits: &StormLimits) -> Result<Compiled, String> {
    let all = loaded(limits)?;
    let mut by_file: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for (file, _) in &all {
        *by_file.entry(file.clone()).or_default() += 1;
    }
    let names: Vec<String> = all.iter().map(|(_, c)| c.scenario.name.clone()).collect();
    let found = all.into_iter().find(|(file, c)| {
        let single = by_file.get(file) == Some(&1);
        c.scenario.name == name
            || (single && (file == name || file.trim_end_matches(".ron") == name))
    });
    found.map(|(_, c)| c).ok_or_else(|| {
        format!(
            "no scenario named {}; there are: {}",
            crate::echo::quoted(name),
            names.join(", ")
        )
    })
}

/// A scenario written by the caller in RON (one scenario; the first if the text holds several),
/// checked against the budget with its own seeds.
pub fn from_ron(text: &str, limits: &StormLimits) -> Result<Compiled, String> {
    if text.len() > MAX_RON_BYTES {
        return Err(format!(
            "scenario text is {} bytes, over the limit of {MAX_RON_BYTES}",
            text.len()
        ));
    }
    let mut all =
        sim::load::load_all_with(text, "scenario.ron", &limits.sim()).map_err(|e| e.to_string())?;
    if all.is_empty() {
        return Err("the text holds no scenario".into());
    }
    Ok(all.swap_remove(0))
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
    /// The simulator's estimate of the events it would process, on which it was admitted.
    pub estimated_events: f64,
}

/// Runs `c` (with `seed`/`seeds` overriding the scenario's) if its estimate is within budget.
/// Blocking and CPU-bound: call it off the async runtime.
pub fn run(
    c: &Compiled,
    seed: Option<u64>,
    seeds: Option<u32>,
    limits: &StormLimits,
) -> Result<StormReport, String> {
    run_with(
        c,
        seed,
        seeds,
        limits,
        &mut |_, _| {},
        &AtomicBool::new(false),
    )
}

/// What a simulation stopped by its caller returns.
pub const CANCELLED: &str = "the simulation was cancelled";

/// [`run`], a few seeds at a time (as many as there are worker threads): `progress(done, total)`
/// after each group, in seeds; when `stop` is set it stops before the next group with
/// [`CANCELLED`]. Results are the same as in one batch (the simulator orders them by seed, then
/// policy, and each run depends only on its seed).
pub fn run_with(
    c: &Compiled,
    seed: Option<u64>,
    seeds: Option<u32>,
    limits: &StormLimits,
    progress: &mut dyn FnMut(u32, u32),
    stop: &AtomicBool,
) -> Result<StormReport, String> {
    let k = seeds.unwrap_or(c.scenario.seeds).max(1);
    if k > MAX_SEEDS {
        return Err(format!("seeds: {k} is over the limit of {MAX_SEEDS}"));
    }
    let estimate = c
        .estimate(k, 1, threads(), &limits.sim())
        .map_err(|e| format!("refused: {e}"))?;
    let first = seed.unwrap_or(c.scenario.seed);
    let seeds: Vec<u64> = (0..u64::from(k)).map(|i| first.wrapping_add(i)).collect();
    let mut results = Vec::with_capacity(seeds.len() * c.scenario.policies.len());
    let mut done = 0;
    for group in seeds.chunks(threads().max(1)) {
        if stop.load(Ordering::SeqCst) {
            return Err(CANCELLED.into());
        }
        let part = sim::run(
            c,
            group,
            BatchOptions {
                jobs: 0,
                progress: false,
            },
        )
        .map_err(|e| e.to_string())?;
        results.extend(part.results);
        done += group.len() as u32;
        progress(done, k);
    }
    let runs = Runs {
        compiled: c,
        seeds,
        results,
    };
    let summary = serde_json::from_str(&sim::report::summary_json(&runs))
        .map_err(|e| format!("summary.json: {e}"))?;
    let amplification_png = sim::report::figure_png(&runs, "amplification")
        .map_err(|e| format!("drawing the amplification plot failed: {e}"))?;
    Ok(StormReport {
        table: sim::report::table(&runs, false),
        conclusion: sim::report::conclusion(&runs),
        summary,
        amplification_png,
        estimated_events: estimate.events,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shipped_scenario_is_listed_with_an_estimate() {
        let all = list(&StormLimits::default()).unwrap();
        assert!(all.iter().any(|s| s.name == "default"), "{all:?}");
        assert!(all.len() >= scenario::SHIPPED.len());
        assert!(
            all.iter()
                .all(|s| s.estimated_events > 0.0 && !s.policies.is_empty())
        );
    }

    #[test]
    fn scenarios_are_found_by_name_or_file() {
        let l = StormLimits::default();
        let first = &list(&l).unwrap()[0];
        assert_eq!(by_name(&first.name, &l).unwrap().scenario.name, first.name);
        assert_eq!(by_name("default.ron", &l).unwrap().scenario.name, "default");
        let err = by_name("no-such-scenario", &l).unwrap_err();
        assert!(err.contains(&first.name), "{err}");
    }

    #[test]
    fn over_budget_is_refused_with_the_estimate() {
        let c = by_name("default", &StormLimits::default()).unwrap();
        let e = c
            .estimate(1, 1, threads(), &Limits::default())
            .unwrap()
            .events;
        let limits = StormLimits {
            max_events: e / 2.0,
            ..StormLimits::default()
        };
        let err = run(&c, None, Some(1), &limits).unwrap_err();
        assert!(
            err.starts_with("refused") && err.contains("events") && err.contains("limit"),
            "{err}"
        );
        let err = run(&c, None, Some(MAX_SEEDS + 1), &StormLimits::default()).unwrap_err();
        assert!(err.starts_with("seeds"), "{err}");
    }

    #[test]
    fn seeds_in_groups_give_the_batch_s_results_and_a_stop_stops() {
        let l = StormLimits::default();
        let c = by_name("layered-stack", &l).unwrap();
        let whole = sim::run(&c, &[7, 8, 9], BatchOptions::default()).unwrap();
        let mut steps = Vec::new();
        let grouped = run_with(
            &c,
            Some(7),
            Some(3),
            &l,
            &mut |d, t| steps.push((d, t)),
            &AtomicBool::new(false),
        )
        .unwrap();
        assert_eq!(
            grouped.summary,
            serde_json::from_str::<serde_json::Value>(&sim::report::summary_json(&whole)).unwrap()
        );
        assert_eq!(steps.last(), Some(&(3, 3)));
        let err = run_with(
            &c,
            Some(7),
            Some(3),
            &l,
            &mut |_, _| {},
            &AtomicBool::new(true),
        )
        .unwrap_err();
        assert_eq!(err, CANCELLED);
    }

    #[test]
    fn bad_ron_is_an_error_with_a_position() {
        let err = from_ron("(name: \"x\", horizon: 12)", &StormLimits::default()).unwrap_err();
        assert!(err.contains("scenario.ron:"), "{err}");
        let big = " ".repeat(MAX_RON_BYTES + 1);
        assert!(
            from_ron(&big, &StormLimits::default())
                .unwrap_err()
                .contains("limit")
        );
    }
}

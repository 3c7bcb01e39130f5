//! # sim-playground: the simulator for the storm playground's web page
//!
//! The `sim` library built without its `cli` and `parallel` features (no threads, no terminal, no
//! wall clock), for `wasm32-unknown-unknown`. The page's Web Worker loads the module with
//! `WebAssembly.instantiate` and calls the `pg_*` exports of [`ffi`]: text goes in and JSON comes
//! out through linear memory, no generated glue.
//!
//! This file is the safe part, usable on the host too (the module's behaviour is tested through
//! its real bytes: `playground/scripts/determinism.mjs` in Node, `browser-test.mjs` in Chromium): [`check`] loads a scenario
//! the way `sim run` does, under the page's [`limits`]; a [`Session`] runs its (seed, policy)
//! pairs one call at a time, so the page shows progress between them; [`Session::report`] renders
//! what `sim run` writes: `summary.json` byte for byte, `summary.md`, its verdict table and the
//! SVG plots.
#![deny(unsafe_code)]
#![deny(missing_docs)]

#[cfg(target_arch = "wasm32")]
pub mod ffi;

use serde_json::{Value, json};
use sim::compile::{Compiled, Limits};
use sim::run::{RunError, RunResult, Runs};
use sim::scenario::ScenarioError;

/// The name the page's scenario has in messages.
pub const FILE: &str = "scenario.ron";

/// What the page runs: smaller than `sim run`'s [`Limits::default`] where a browser tab has less
/// room (memory in a 32-bit address space, work a person waits for); a scenario over them is
/// refused before it runs, with the limit named.
pub fn limits() -> Limits {
    Limits {
        max_seeds: 20,
        max_memory: 1 << 30,
        max_events: 2e8,
        ..Limits::default()
    }
}

/// The limits as `sim run`'s flags would name them, so a refusal says what the page allows.
fn page_message(message: String) -> String {
    let l = limits();
    message
        .replace("this simulator accepts", "the playground accepts")
        .replace(
            "(--max-events)",
            &format!(
                "(the playground's limit; `sim run` allows {:.0e})",
                Limits::default().max_events
            ),
        )
        .replace(
            "(--max-memory)",
            &format!(
                "(the playground's limit of {} MiB; `sim run` allows {} MiB)",
                l.max_memory >> 20,
                Limits::default().max_memory >> 20
            ),
        )
}

/// A scenario loaded for the page: compiled, admitted, and the runs done so far.
#[derive(Debug)]
pub struct Session {
    compiled: Compiled,
    seeds: Vec<u64>,
    results: Vec<RunResult>,
}

/// Why the page cannot run a text.
#[derive(Debug)]
pub struct Refusal {
    /// 1-based line and column, when known.
    pub position: Option<(usize, usize)>,
    /// The field, when known.
    pub field: Option<String>,
    /// The whole message (as `sim check` prints it).
    pub message: String,
}

impl Refusal {
    fn from_scenario(e: &ScenarioError) -> Self {
        let field = match e {
            ScenarioError::Invalid { field, .. } => Some(field.clone()),
            _ => None,
        };
        Refusal {
            position: e.position(),
            field,
            message: page_message(e.to_string()),
        }
    }

    /// The refusal as the JSON the page reads.
    pub fn to_json(&self) -> Value {
        json!({
            "ok": false,
            "line": self.position.map(|p| p.0),
            "col": self.position.map(|p| p.1),
            "field": self.field,
            "message": self.message,
        })
    }
}

/// Loads `text` as `sim run` loads a file (parse, check, compile, admission), under the page's
/// [`limits`]; `seed` replaces the scenario's first seed (`sim run --seed`). Sweeps and maps are
/// refused: they are `sim sweep`'s and `sim map`'s.
pub fn check(text: &str, seed: Option<u64>) -> Result<Session, Refusal> {
    let compiled =
        sim::load::load_with(text, FILE, &limits()).map_err(|e| Refusal::from_scenario(&e))?;
    let s = &compiled.scenario;
    if s.sweep.is_some() || s.map.is_some() {
        let (what, cmd) = if s.map.is_some() {
            ("a map", "sim map")
        } else {
            ("a sweep", "sim sweep")
        };
        return Err(Refusal {
            position: None,
            field: Some(if s.map.is_some() { "map" } else { "sweep" }.into()),
            message: format!(
                "{FILE}: scenario \"{}\" is {what}: the playground runs single scenarios; run it with `{cmd} FILE`",
                s.name
            ),
        });
    }
    let first = seed.unwrap_or(s.seed);
    let seeds = (0..u64::from(s.seeds))
        .map(|i| first.wrapping_add(i))
        .collect();
    Ok(Session {
        compiled,
        seeds,
        results: Vec::new(),
    })
}

impl Session {
    /// The scenario as loaded.
    pub fn compiled(&self) -> &Compiled {
        &self.compiled
    }

    /// What the page shows before running: name, description, policies, seeds and the work.
    pub fn info(&self) -> Value {
        let s = &self.compiled.scenario;
        let estimate = self.compiled.estimate(s.seeds, 1, 1, &limits()).ok();
        json!({
            "ok": true,
            "name": s.name,
            "description": s.description,
            "policies": s.policies.iter().map(|p| p.name.clone()).collect::<Vec<_>>(),
            "seeds": self.seeds,
            "runs": self.pairs(),
            "events": estimate.as_ref().map(|e| e.events),
            "memory": estimate.as_ref().map(|e| e.memory),
            "horizon_s": s.horizon.as_secs_f64(),
            "limits": { "events": limits().max_events, "memory": limits().max_memory, "seeds": limits().max_seeds },
        })
    }

    /// Runs: one per (seed, policy), in `sim run`'s order (by seed, then policy).
    pub fn pairs(&self) -> usize {
        self.seeds.len() * self.compiled.scenario.policies.len()
    }

    /// Runs the next pair, reporting virtual time advanced (ns) to `tick`; returns what the page
    /// shows of it (policy, seed, verdict, goodput), or `None` when every pair has run.
    pub fn run_next(&mut self, tick: &(dyn Fn(u64) + Sync)) -> Result<Option<Value>, RunError> {
        let i = self.results.len();
        if i >= self.pairs() {
            return Ok(None);
        }
        let policies = self.compiled.scenario.policies.len();
        let (seed, policy) = (self.seeds[i / policies], i % policies);
        let r = sim::run::run_pair(&self.compiled, policy, seed, tick)?;
        let s = &r.output.summary;
        let shown = json!({
            "index": i,
            "policy": s.name,
            "seed": seed,
            "verdict": s.verdict,
            "goodput_per_s": s.goodput_per_s,
            "success_rate": s.success_rate,
        });
        self.results.push(r);
        Ok(Some(shown))
    }

    /// Runs every pair left.
    pub fn run_rest(&mut self) -> Result<(), RunError> {
        while self.run_next(&|_| {})?.is_some() {}
        Ok(())
    }

    /// The report of the runs done (all of them, once [`Session::run_next`] returned `None`).
    pub fn runs(&self) -> Runs<'_> {
        Runs {
            compiled: &self.compiled,
            seeds: self.seeds.clone(),
            results: self.results.clone(),
        }
    }

    /// What `sim run` writes, for the page: `summary.json` (byte for byte), `summary.md`, its
    /// verdict table, the conclusion and the SVG plots by stem.
    pub fn report(&self) -> Result<Value, String> {
        let runs = self.runs();
        let md = sim::report::summary_md(&runs);
        let mut svgs = serde_json::Map::new();
        for stem in sim::report::FIGURES {
            let svg = sim::report::figure_svg(&runs, stem).map_err(|e| e.to_string())?;
            svgs.insert(stem.to_string(), Value::String(svg));
        }
        Ok(json!({
            "ok": true,
            "summary_json": sim::report::summary_json(&runs),
            "table_md": verdict_table(&md),
            "conclusion": sim::report::conclusion(&runs),
            "summary_md": md,
            "svg": svgs,
        }))
    }
}

/// The verdict table of a `summary.md`: the first Markdown table after `## Results`.
pub fn verdict_table(summary_md: &str) -> String {
    let mut out = String::new();
    let mut in_results = false;
    for line in summary_md.lines() {
        if line.starts_with("## ") {
            if in_results && !out.is_empty() {
                break;
            }
            in_results = line == "## Results";
            continue;
        }
        if in_results {
            if line.starts_with('|') {
                out.push_str(line);
                out.push('\n');
            } else if !out.is_empty() {
                break;
            }
        }
    }
    out
}

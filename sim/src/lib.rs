//! # sim: a deterministic simulator of retry policies under storms
//!
//! Clients of a struggling service fail in bursts, and naive retries multiply the load on it just
//! when it can least take it, which can keep it down after the trigger is gone (a metastable
//! failure). This crate replays such storms in virtual time and compares client policies, built
//! from [`reliable_core`]'s own breakers, retry policies, budgets and throttles, on identical
//! traffic, so a reliability engineer can pick a policy and show why it is safe.
//!
//! # Data flow
//!
//! ```text
//! scenario text ─▶ scenario::load ─▶ Compiled ─▶ run::run ─▶ Runs ─▶ report::write / table / ...
//!   (RON)          parse, check,      (stacks     one World per      (summaries,   (summary.json,
//!                  compile, estimate   with core   (policy, seed):    buckets,       timeseries.csv,
//!                                      policies)   engine → clients   per seed)      plots, table)
//!                                                  → core → metrics
//! ```
//!
//! - [`scenario`]: the RON format. [`scenario::load`] parses, checks (every error at
//!   `file:line:col`), compiles each policy's layers into a stack with its core policies built
//!   once, and estimates the memory and work a run needs ([`scenario::Estimate`]), refusing what
//!   is over the [`scenario::Limits`]. A [`scenario::Compiled`] cannot fail to run.
//! - `engine` (private): virtual time, the event queue (a heap plus FIFO lanes for fixed timeouts),
//!   slabs with generations (lazy cancellation), seeded random streams per component.
//! - `model`, `workload` (private): downstreams (queueing server, contended register, scripted),
//!   faults, and open-loop, closed-loop and job-set clients.
//! - `client` (private): the compiled stacks and the per-client or shared state of each layer; every
//!   decision is the core's.
//! - [`mod@run`]: one world per (policy, seed), in parallel, results in a fixed order; sweeps.
//! - [`metrics`]: what is measured, the exact definitions, and the typed per-run summary
//!   ([`metrics::PolicySummary`], [`metrics::Verdict`] ordered by severity).
//! - [`stats`]: means, standard deviations and 95% intervals, the one place they are computed.
//! - [`report`]: everything rendered from results: the terminal table, the conclusion,
//!   `summary.json`, `summary.md`, `timeseries.csv`, plots (SVG and PNG), sweep tables and plots.
//!
//! Same scenario and seed give byte-identical reports whatever the number of threads.
//!
//! # Using it as a library
//!
//! ```no_run
//! let c = sim::load(sim::DEFAULT_SCENARIO, "default.ron")?;          // Compiled
//! let runs = sim::run(&c, &[1, 2, 3], sim::run::BatchOptions::default())?;
//! println!("{}", sim::report::table(&runs, false));                    // the comparison table
//! println!("{}", sim::report::conclusion(&runs));                      // the bottom line
//! let png: Vec<u8> = sim::report::figure_png(&runs, "amplification")?; // a plot, in memory
//! sim::write(std::path::Path::new("reports"), &runs)?;                // reports/default/, atomically
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! A shipped scenario loads by name with [`scenario::shipped`] (`scenario::SHIPPED` lists the
//! files). The estimate of a run's work and memory, to refuse big runs up front, is
//! [`scenario::Compiled::estimate`]; a scenario's server model, faults, workload and policy configs
//! are plain data in [`scenario::Compiled::scenario`].
//!
//! # Adding a layer
//!
//! 1. `scenario/types.rs`: a `Layer` variant holding the core's config type (serde, unknown fields
//!    refused).
//! 2. `client/stack.rs`: compile it in `CompiledStack::add` (build the core policy once, map its
//!    `ConfigError` with `config_error` so it points at the file position, count its per-client
//!    bytes), add a `NodeKind` variant and its `served_by` label.
//! 3. `client/`: its per-client or shared state, if any, cloned from a prototype built at compile
//!    time (so `World::new` cannot fail).
//! 4. `run/world/stack.rs`: what invoking the node does, and what it does with an answer going up
//!    (one arm each).
//! 5. `scenario/estimate.rs`: what it adds to attempts, events and memory per request.
//! 6. `metrics/`: any new count, with its definition in the module docs; `report/` renders it.
//! 7. Tests: a model test in `tests/models.rs`, a bad value in `tests/bad_files.rs`, and a hostile
//!    file in `tests/hostile/` if it can blow up.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod bench;
mod cli;
mod client;
mod engine;
pub mod metrics;
mod model;
pub mod report;
pub mod run;
pub mod scenario;
pub mod stats;
mod workload;

pub use report::write;
pub use run::run;
pub use scenario::load;

/// The default scenario, compiled into the binary: `sim` with no arguments runs it.
pub const DEFAULT_SCENARIO: &str = include_str!("../../scenarios/default.ron");

/// Runs the `sim` command line with the process's arguments; returns the exit code.
pub fn cli_main() -> i32 {
    cli::main()
}

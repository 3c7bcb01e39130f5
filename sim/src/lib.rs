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
//! scenario text ─▶ scenario::parse ─▶ compile ─▶ run ─▶ metrics ─▶ report
//!   (RON)          Scenario           Compiled    admission,    summaries,  summary.json,
//!                  (what it is)       (checked,   one World     means over  timeseries.csv,
//!                                     core        per (policy,  seeds       plots, table,
//!                                     policies)   seed)                     conclusion
//! ```
//!
//! Data flows one way, and so do imports: a module imports only the modules before it in this
//! order (`tests/layering.rs` reads every `use crate::…` and fails on a back-import):
//!
//! stats → plot → engine → scenario → model → client → workload → compile → metrics → run → load → report → emulation → bench → cli
//!
//! `metrics` sits before `run` in the import order because it defines what a run records; it never
//! reads a run's state.
//!
//! - [`scenario`]: what a scenario *is*: the RON format's types, parsing, the positions of fields
//!   (`file:line:col`) and the errors that point at them, the axes of sweeps and maps, the report
//!   folder's name.
//! - [`compile`]: checks a parsed scenario (ranges, cross-references, sizes within the
//!   [`compile::Limits`], the livelock guard, every sweep value) and compiles each policy's layers
//!   into a stack with its core policies built once. A [`compile::Compiled`] cannot fail to run.
//! - `engine` (private): virtual time, the event queue (a heap plus FIFO lanes for fixed timeouts),
//!   slabs with generations (lazy cancellation), seeded random streams per component.
//! - `model`, `workload` (private): downstreams (queueing server, contended register, scripted),
//!   faults, and open-loop, closed-loop and job-set clients.
//! - `client` (private): the compiled stacks and the per-client or shared state of each layer; every
//!   decision is the core's. A chain of layers the core's call engine runs is one
//!   [`reliable_core::engine`] call per request, which the world drives as its I/O.
//! - [`metrics`]: what is measured, the exact definitions, the typed per-run summary
//!   ([`metrics::PolicySummary`], [`metrics::Verdict`] ordered by severity) and how each of its
//!   figures is averaged over seeds ([`metrics::Mean`]).
//! - [`mod@run`]: admission ([`run::admission`]: the estimate of a batch's events and memory,
//!   refused over the limits), then one world per (policy, seed), in parallel, results in a fixed
//!   order; sweeps, maps and shards.
//! - [`mod@load`]: what a user loads: compile, then admission with the scenario's own seeds
//!   ([`load()`], [`load_all`], [`load_file_all`], [`shipped`]).
//! - [`stats`]: means, standard deviations and 95% intervals, the one place they are computed.
//! - [`emulation`]: the components a real-time emulation of a scenario drives from outside (the
//!   `emulate` crate): arrivals, the server model, the fault timeline, the recorder and summary.
//! - [`plot`]: line charts and heatmaps from plain data, to SVG and PNG; it imports nothing else
//!   of the crate, and `report` hands it charts.
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
//! A shipped scenario loads by name with [`shipped`] (`scenario::SHIPPED` lists the files). The
//! estimate of a run's work and memory, to refuse big runs up front, is
//! [`compile::Compiled::estimate`]; a scenario's server model, faults, workload and policy configs
//! are plain data in [`compile::Compiled::scenario`].
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
//! 4. A decision layer is the core's call engine's first (`core/src/engine`): here, the state it
//!    draws from in `run/world/call.rs` (`Shared` over the world's slots), and the chain's
//!    conditions in `client/stack.rs` (`chain_layer`, `engine_reach`). A layer that decides
//!    nothing (I/O, like `Llm`, or a composition, like `Fallback`): `run/world/stack.rs`, what
//!    invoking the node does, and what it does with an answer going up (one arm each).
//! 5. `run/admission.rs`: what it adds to attempts, events and memory per request.
//! 6. `metrics/`: any new count, with its definition in the module docs; `report/` renders it.
//! 7. Tests: a model test in `tests/models.rs`, a bad value in `tests/bad_files.rs`, and a hostile
//!    file in `tests/hostile/` if it can blow up.
#![forbid(unsafe_code)]
#![warn(missing_docs)]
// Without the command line, what only it uses (maps, shards) is unused.
#![cfg_attr(not(feature = "cli"), allow(dead_code))]

#[cfg(feature = "cli")]
mod bench;
#[cfg(feature = "cli")]
mod cli;
mod client;
pub mod compile;
pub mod emulation;
mod engine;
pub mod load;
pub mod metrics;
mod model;
pub mod plot;
pub mod report;
pub mod run;
pub mod scenario;
pub mod stats;
mod workload;

pub use load::{load, load_all, load_file_all, shipped};
pub use report::write;
pub use run::run;

/// The default scenario, compiled into the binary: `sim` with no arguments runs it.
pub const DEFAULT_SCENARIO: &str = include_str!("../../scenarios/default.ron");

/// Runs the `sim` command line with the process's arguments; returns the exit code.
#[cfg(feature = "cli")]
pub fn cli_main() -> i32 {
    cli::main()
}

//! # sim: a deterministic simulator of retry policies under storms
//!
//! Clients of a struggling service fail in bursts, and naive retries multiply the load on it just
//! when it can least take it, which can keep it down after the trigger is gone (a metastable
//! failure). This crate replays such storms in virtual time and compares client policies, built
//! from [`reliable_core`]'s own breakers, retry policies, budgets and throttles, on identical
//! traffic, so a reliability engineer can pick a policy and show why it is safe.
//!
//! - [`scenario`]: the RON scenario format, its parser and validator (errors at `file:line:col`).
//! - [`engine`]: virtual time, the event queue (a heap plus FIFO lanes for fixed timeouts), slabs
//!   with generations (lazy cancellation), and seeded random streams per component.
//! - [`model`]: downstreams (queueing server, contended register, scripted) and faults.
//! - [`workload`]: open-loop, closed-loop and job-set clients.
//! - [`client`]: policy stacks compiled from the scenario's layers.
//! - [`run`]: one run ([`run::World`]) and batches of (policy × seed) runs in parallel.
//! - [`metrics`]: what is measured and the exact definitions of every summary figure.
//! - [`report`]: the terminal table, `summary.json`, `summary.md` and `timeseries.csv`.
//!
//! Same scenario and seed give byte-identical reports whatever the number of threads.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod bench;
pub mod client;
pub mod engine;
pub mod metrics;
pub mod model;
pub mod report;
pub mod run;
pub mod scenario;
pub mod workload;

/// The default scenario, compiled into the binary: `sim` with no arguments runs it.
pub const DEFAULT_SCENARIO: &str = include_str!("../../scenarios/default.ron");

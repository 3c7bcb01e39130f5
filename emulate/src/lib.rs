//! # emulate: a `sim` scenario run for real
//!
//! The simulator predicts that one policy collapses and another recovers in 5 s; this crate checks
//! the prediction on a real stack. It starts an HTTP/2 server on 127.0.0.1 implementing the
//! scenario's `Server` model ([`server`]), sends the scenario's open-loop arrivals at their
//! scheduled instants through each policy as `reliable::policy` loads it, with the scenario's
//! own core configs ([`client`]) over a real HTTP client with real timeouts ([`run`]), measures
//! with the simulator's own recorder and definitions ([`meter`]), writes the same report as
//! `sim run`, and sets the simulated and emulated figures side by side ([`compare`]).
//!
//! Each policy is loaded by `reliable::policy`, the loader a user's program runs: its routes
//! become reliable's `ReliableLayer`s (fallback branches through `FallbackLayer`), which run
//! every nesting as the core's call engine does; the emulator keeps only its I/O ([`client`]):
//! the HTTP client, time scaling of the headers, and counting attempts, hedges, ledger draws,
//! limit refusals and admitted concurrency as `sim` counts them. What the loader refuses is
//! refused with its message, and so is `Llm` (the server implements the `Server` model only).
//! The faults a client sees (outage, partition, error rate, throttle) are played on the
//! client's side by reliable's chaos `TimelineLayer`; those only a server can make (capacity
//! loss, latency inflation of its service times, load spikes) by the server and the arrivals.
//!
//! A scenario with services (a call graph) runs as real services: one listener per downstream
//! (so per replica), each service's calls through its own stacks of the same layers, the
//! remaining deadline as a `grpc-timeout` header, replicas picked by one balancer per group
//! ([`graph`], [`balance`], [`server`]); the comparison adds a table per tier ([`compare`]).
//!
//! A scenario with `stores` runs as a fleet ([`fleet`]): each client instance its own fleet
//! state (as the loader builds it for a service) over a real `redis-server` the emulator starts
//! on 127.0.0.1, stops for the store's hangs and kills when the run ends; a client's own network
//! down fails its calls and its store operations at once.
//!
//! Everything the emulator takes from `sim` goes through [`simface`]. Time can be stretched
//! ([`timebase`]); scenarios too large for the machine are refused with the numbers ([`size`]).
//! Traffic goes only to 127.0.0.1, every loop ends at the horizon, and each run stops by itself.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod balance;
pub mod calibrate;
pub mod client;
pub mod compare;
pub mod fleet;
pub mod graph;
pub mod meter;
pub mod run;
pub mod server;
pub mod simface;
pub mod size;
pub mod timebase;

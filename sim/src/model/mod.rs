//! Downstream models and the fault timeline.
//!
//! - [`dist`]: duration distributions (service times, network hops, think times).
//! - [`server`]: a queueing server with workers, a bounded FIFO/LIFO queue and load-dependent
//!   latency; work continues after the client gave up.
//! - [`register`]: a register with optimistic concurrency (reads, conditional writes, conflicts).
//! - [`scripted`]: answers by call number, for exact tests.
//! - [`llm`]: an LLM provider: per-key rate limits (429), provider-wide overload (529), token
//!   billing.
//! - [`faults`]: what is wrong with each downstream at a given instant.

pub mod bounds;
pub mod capacity;
pub mod dist;
pub mod faults;
pub mod llm;
pub mod register;
pub mod scripted;
pub mod server;

pub use dist::Sampler;

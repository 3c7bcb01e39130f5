//! # reliable-mcp: circuit breakers, backoff and storm simulation as tools for agents
//!
//! Agents are among the most storm-prone clients there are: they call LLMs and HTTP APIs in
//! loops, and a naive agent retries whatever fails. This crate is an MCP server (on the official
//! Rust SDK, `rmcp`) that gives them this project's protection as tools:
//!
//! - `create_breaker`, `get_breaker_state`: named circuit breakers ([`breakers`]);
//! - `compute_backoff`: the retry rhythm of a backoff with jitter ([`backoff`]);
//! - `reliable_http_call`: an HTTP request through a breaker with bounded retries ([`http_call`]),
//!   which cannot be turned against the operator's network ([`ssrf`]) and never echoes
//!   credentials ([`redact`]), a bounded number at once, shared fairly between sessions
//!   ([`inflight`]);
//! - `simulate_storm`, `list_scenarios`: the simulator, bounded ([`storm`]);
//! - the resource `reliable://breaker/{name}` and the prompt `diagnose_breaker` ([`server`]).
//!
//! Everything it echoes of the caller's input is capped ([`echo`]). The binary `reliable-mcp`
//! serves it over stdio (the default; [`stdio`] answers the malformed requests the SDK cannot
//! attribute) or streamable HTTP, bounded ([`transport`]).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod args;
pub mod backoff;
pub mod breakers;
mod duration;
pub mod echo;
pub mod http_call;
pub mod inflight;
pub mod instrument;
pub mod notify;
pub mod policy_arg;
pub mod redact;
pub mod retry;
pub mod schema;
pub mod server;
pub mod ssrf;
pub mod stdio;
pub mod storm;
pub mod transport;

pub use server::{ReliableServer, Settings};

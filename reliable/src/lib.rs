//! # reliable: wrap a real call in std and async Rust
//!
//! A flaky model call behind a circuit breaker, a per-attempt timeout, retries with jittered
//! exponential backoff, and a cached answer while the breaker is open
//! (`examples/llm_client.rs`):
//!
//! ```no_run
//! use reliable::{OrOpen, Reliable};
//! use std::time::Duration;
//! # async fn complete(_: &str) -> Result<String, std::io::Error> { Ok(String::new()) }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let llm = Reliable::builder("llm")
//!     .failure_rate(0.5) // >= 50% failures over the window opens it
//!     .window(20) // the last 20 calls
//!     .cooldown(Duration::from_secs(30)) // open for 30 s (±10%)
//!     .probe(3) // then 3 successful probes in a row close it
//!     .timeout(Duration::from_secs(8)) // per attempt: a slow answer is dropped, its socket closed
//!     .attempts(5) // the first try included
//!     .base_delay(Duration::from_millis(200)) // then 0.4 s, 0.8 s, ... (factor 2)
//!     .jitter(0.1) // ±10%, so clients that failed together do not retry together
//!     .build()?;
//!
//! let prompt = "hello";
//! let call = llm.call(|| complete(prompt));
//! let answer = call.await.or_open(|_retry_after| "cached answer".to_string())?;
//! # Ok(())
//! # }
//! ```
//!
//! The same in the seed library (Python, `reliablekit`), for comparison:
//!
//! ```text
//! breaker = CircuitBreaker(failure_rate=0.5, window=20, cooldown=30.0, probe=3)
//!
//! @reliable(breaker=breaker, timeout=8.0, max_attempts=5, base_delay=0.2, jitter=0.1,
//!           on_open=lambda *a, **k: cache_fallback())
//! def call_llm(prompt: str) -> str: ...
//! ```
//!
//! What differs, and why it matters when a downstream is failing:
//!
//! - **Cancellation is real.** A timed-out async attempt is dropped, so its socket closes; the seed
//!   stops waiting while the thread keeps the connection open. A call dropped by its caller (a
//!   `select!`, a timeout around it, an aborted task) hands its breaker permit back as ignored, so
//!   a cancelled half-open probe frees its slot at once. Blocking calls get a
//!   [`CancelToken`](cancel::CancelToken) with the attempt's deadline (see [`blocking`]).
//! - **Half-open is gated and leased**: one probe at a time by default, released when it ends in
//!   any way, instead of letting every caller through to a downstream that is just recovering.
//! - **Server signals are honoured**: `Retry-After` (seconds or HTTP-date), `retry-after-ms` and
//!   `x-should-retry` through [`http`] and [`Classify`], the one classification every face reads; fatal errors are not retried and do not
//!   count against the downstream's health.
//! - **Retry storms are bounded across calls** with an optional retry budget shared by every clone
//!   ([`Builder::budget`]) and adaptive throttling ([`Builder::throttle`]).
//! - **Extra load is one bounded number.** An idempotent call may be hedged
//!   ([`Builder::hedge`]: a copy after a fixed or p95 delay, the first success wins, the losing
//!   copies are dropped and their permits settled), and retries, hedges and half-open probes can
//!   draw from one ledger ([`Builder::ledger`]); a concurrency limit (bulkhead, AIMD, gradient:
//!   [`Builder::limit`]) and a rate limit ([`Builder::rate_limit`]) refuse locally, and a refusal
//!   inside a retry ends the call at once unless the policy waits on refusals. Blocking calls
//!   take the ledger and the limits; only `call_blocking_detached` hedges (a copy needs a
//!   thread of its own).
//! - **Time, timers and randomness are injected** ([`clock`], [`sleep`], [`Builder::seed`]), so tests
//!   run minutes of retries in virtual time under `tokio::time::pause()`.
//! - **A success costs little.** Through a closed breaker it reads no clock (without a timeout),
//!   takes no lock, allocates nothing and writes no cache line that another thread writes: about a
//!   sixth of the overhead of failsafe's `call`, blocking or async (`benches/README.md`, "The std
//!   crate").
//!
//! ## The pieces
//!
//! - [`Reliable`]: one downstream's breaker, retry policy, budget, timers; clones share them.
//!   Built with [`Reliable::builder`] (std `Duration`s), from the core's configs, or a preset
//!   ([`Reliable::reliablekit`], [`Reliable::layered_exercise`]).
//! - [`Reliable::call`] (async), [`Reliable::call_blocking`] (sync); [`Error`] says what happened;
//!   [`OrOpen::or_open`] is the seed's `on_open`.
//! - [`Fallback`]: providers in order, the answer stamped with who served it (`served_by`).
//! - [`Registry`]: named instances, one per downstream, with snapshots.
//! - `llm` (feature `llm`): LLM provider signals: money limits, overload, server delays and
//!   remaining quotas (Anthropic, OpenAI, OpenRouter, Portkey, LiteLLM, the IETF draft), as the
//!   core's typed decisions.
//! - `policy` (feature `policy`): policy files. A policy written as in the simulator's scenario
//!   files (RON or JSON) loads unchanged into a builder or the tower layers, errors at
//!   `file:line:col`; what cannot run as the simulator runs it is refused, never dropped.
//! - [`chaos`]: chaos injection (fault, latency, outcome, behaviour) with run-time switches and
//!   a process-wide kill switch, and a scenario's fault timeline replayed by wall clock; a tower
//!   layer and a `reqwest-middleware` middleware.
//! - [`observer`]: hooks for logs and traces (attempts, retries, refusals, transitions, hedges,
//!   cancelled copies, ledger draws, limit moves); `Builder::metrics` under the `metrics`
//!   feature.
//!
//! ## The core's types, and two `Duration`s
//!
//! The configs and answers this crate takes from [`reliable_core`] are re-exported here:
//! [`BreakerConfig`], [`RetryConfig`], [`BackoffConfig`], [`BudgetConfig`], [`ThrottleConfig`],
//! [`ErrorClass`], [`State`], [`Transition`], [`RejectReason`], [`GiveUpReason`], [`Denied`],
//! [`Counts`].
//!
//! Everything this crate takes or returns itself is a std [`Duration`](std::time::Duration): the
//! builder's words, errors, observers, snapshots, the tower layers' `tower::Open` (feature `tower`).
//! The core is `no_std` and its configs are plain structs with the core's own
//! [`reliable_core::Duration`] (nanoseconds in a `u64`, usable in `const`); a std `Duration` goes
//! in with `.into()` (saturating past about 584 years) and comes back out the same way:
//!
//! ```
//! use std::time::Duration;
//! let mut breaker = reliable::BreakerConfig::reliablekit();
//! breaker.open.duration = Duration::from_secs(10).into(); // std → core
//! let open: Duration = breaker.open.duration.into(); // core → std
//! assert_eq!(open, Duration::from_secs(10));
//! let _llm = reliable::Reliable::builder("llm").breaker(breaker).build()?;
//! # Ok::<(), reliable::BuildError>(())
//! ```
//!
//! The builder's words ([`Builder::cooldown`], [`Builder::timeout`], ...) take std `Duration`s
//! and cover the common settings without a core config.
//!
//! Features: `tokio` (default: tokio's clock and timer inside a tokio runtime, a runtime-free timer
//! elsewhere), `metrics`, `tower`, `http` (read signals from an `http::HeaderMap`), `llm` (LLM
//! provider signals; reads JSON error bodies with `serde_json`), `reqwest` (a
//! [`reqwest-middleware`](https://docs.rs/reqwest-middleware) middleware, `middleware::ReliableMiddleware`,
//! [`ByType`] reading `reqwest::Error` and `HttpPolicy` a `reqwest::Response`), `anyhow`
//! ([`ByType`] reading `anyhow::Error`), `tracing` (a
//! span per call and, with `Builder::tracing`, events per attempt, retry, refusal and transition:
//! `traces`), `policy` (policy files in RON or JSON, with `ron` and `serde_json`).
//!
//! ## Layering
//!
//! Each module imports only itself and the modules before it (`tests/layering.rs` reads the
//! source and holds it to this line): the plain pieces, the answers' meaning, what observers
//! hear, one instance's state (`instance`: what every clone of a [`Reliable`] shares), the
//! engine's drivers, the builder, the async and blocking faces, then the handle's methods
//! (`reliable`: every method of [`Reliable`], in one `impl` after the modules it delegates to),
//! and the faces built on the handle.
//!
//! clock → rng → stats → error → sleep → cancel → http → classify → observer → breaker → metrics → traces → fleet → instance → attempt → drive → builder → call → blocking → reliable → fallback → registry → middleware → llm → tower → chaos → policy
//!
//! One edge runs back, by name only: the observer trait's `on_chaos` (and its two implementors,
//! `metrics` and `traces`) names `chaos::ChaosEvent`, the event a chaos layer above reports.
//!
//! Each type's inherent methods are in one file (`tests/layering.rs` holds that too: every
//! method of [`Reliable`] is in `reliable.rs`). A trait impl is in the later of the trait's
//! module and the type's, the only one that can name both: beside the type, or beside the trait
//! when the trait comes later (a trait of this crate for a type from elsewhere, as `Headers`
//! for `http::HeaderMap`), or later still when it needs a module after both: the tower layers'
//! [`Classify`] for `HttpPolicy` over an `http::Response` reads the layers' own errors.
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]

mod attempt;
pub mod blocking;
mod breaker;
mod builder;
mod call;
pub mod cancel;
pub mod chaos;
pub mod classify;
pub mod clock;
mod drive;
pub mod error;
pub mod fallback;
#[cfg(feature = "fleet")]
pub mod fleet;
pub mod http;
mod instance;
#[cfg(feature = "llm")]
pub mod llm;
#[cfg(feature = "metrics")]
pub mod metrics;
#[cfg(feature = "reqwest")]
pub mod middleware;
pub mod observer;
#[cfg(feature = "policy")]
pub mod policy;
pub mod registry;
mod reliable;
mod rng;
pub mod sleep;
mod stats;
#[cfg(feature = "tower")]
pub mod tower;
#[cfg(feature = "tracing")]
pub mod traces;

// The crate's README (its crates.io page) is a guide whose Rust blocks are complete programs:
// they compile and run as doctests with every feature on (CI job `reliable_crate`).
#[cfg(all(
    doctest,
    feature = "tower",
    feature = "reqwest",
    feature = "policy",
    feature = "fleet-redis"
))]
#[doc = include_str!("../README.md")]
pub struct ReliableReadmeDoctests;

pub use builder::Builder;
#[cfg(feature = "http")]
pub use classify::HttpPolicy;
pub use classify::{ByType, Classify};
pub use error::{BuildError, Error, OrOpen, ShedReason};
pub use fallback::{AllFailed, Fallback, Served};
pub use instance::{Reliable, Snapshot};
pub use registry::{Registry, RegistryError};
pub use reliable_core;
// The core's types this crate's API takes and returns, one import away and documented here.
pub use reliable_core::backoff::BackoffConfig;
pub use reliable_core::breaker::{BreakerConfig, Counts, RejectReason, State, Transition};
pub use reliable_core::budget::{BudgetConfig, Denied};
pub use reliable_core::outcome::ErrorClass;
pub use reliable_core::retry::{GiveUpReason, RetryConfig};
pub use reliable_core::throttle::ThrottleConfig;

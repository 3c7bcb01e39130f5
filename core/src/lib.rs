//! # reliable-core: the decisions that stop retry storms, with no I/O, no allocation, no panics
//!
//! ## The breaker's spec
//!
//! A circuit breaker is a state machine of five states (closed, open, half-open, forced open,
//! disabled) whose rules are one pure function of (state snapshot, event, policy) → decision. The
//! `&mut` [`breaker::CircuitBreaker`] and the lock-free [`breaker::SharedBreaker`] both apply that
//! one function and differ only in how they store state; both implement [`breaker::Breaker`]. The
//! table of states and events is in the [`breaker`] module's documentation. Every other part
//! below is a small state machine of the same shape: validated policy in, decisions out.
//!
//! ## What a retry storm is
//!
//! A client that retries each failed call up to three times sends up to four times the load to a
//! downstream exactly when the downstream is least able to take it. Stack two layers that each retry
//! three times and the factor is sixteen. The overload makes calls time out, the timeouts cause more
//! retries, and the system can stay down after whatever started it has gone away: a *metastable
//! failure*. The cure is not "never retry" but retrying under control: retries spread out in time
//! (backoff with jitter), retries limited to a share of real traffic (retry budgets), calls stopped
//! altogether while a downstream is clearly failing (circuit breakers), and load shed locally when the
//! downstream is rejecting much of it (adaptive throttling).
//!
//! ## Why sans-IO
//!
//! Every type here is a plain state machine. Nothing reads a clock, sleeps, spawns, locks or
//! allocates: the caller passes `now` (an [`Instant`]) and, where a decision is random, the randomness.
//! So the same code runs on a microcontroller with a hardware timer, in a server with
//! `std::time::Instant`, and inside a discrete-event simulator in virtual time, where thousands of
//! clients can be replayed deterministically from a seed. It also makes every behaviour testable
//! exactly: a test is a list of `(now, call)` pairs and the answers expected.
//!
//! ## How the pieces fit
//!
//! - [`time`]: `Instant` and `Duration`, `u64` nanoseconds with saturating arithmetic.
//! - [`breaker`]: circuit breakers (consecutive failures, failure rate or slow-call rate over a count
//!   or time window, growing jittered open times, leased half-open probes, slow start, manual control).
//! - [`registry`]: a fixed-capacity map of named breakers (or anything else), one per downstream.
//! - [`backoff`]: how long to wait before each retry: constant, linear or exponential delays, capped,
//!   with none, full, equal, decorrelated or proportional jitter.
//! - [`budget`]: retry budgets that bound retries as a share of real traffic (token bucket, ratio over
//!   a sliding window, quota by error class, share of requests in flight, retry breaker).
//! - [`retry`]: the retry policy of one logical request (attempts, per-attempt timeout, deadline,
//!   error classes, server delays, backoff, budget): `RetryAt(instant)` or `GiveUp(reason)`.
//! - [`throttle`]: client-side adaptive throttling (Google SRE): reject locally while the downstream
//!   rejects much of what it gets.
//! - [`ledger`]: one budget for every extra attempt: retries, hedges and half-open probes draw from
//!   one ratio budget, counted by kind, so the extra load a client adds is one bounded number.
//! - [`hedge`]: hedged requests for idempotent calls: a fixed delay or a streaming latency quantile
//!   (p95 by default, fixed memory, error under 6.25%), up to a maximum of hedges per call.
//! - [`limit`]: concurrency limits (a static bulkhead, AIMD, Gradient2) and a client-side rate
//!   limiter (GCRA).
//! - [`outcome`]: the error classes every retry decision reads (transient, timeout, throttled,
//!   fatal, don't-retry, refused locally).
//! - [`answer`]: one meaning of every answer: an HTTP-like status with its signals, a timeout, a
//!   dropped connection or a local refusal becomes a class, and each class's consequences for
//!   retries, backoff, breaker, throttle and budget, as two tables every face executes.
//! - [`spend`]: a spend breaker for LLM calls: token and cost ceilings over sliding windows,
//!   reserve-then-settle, throttling on the provider's remaining quota, open on a money limit.
//! - [`provider`]: what an LLM provider's answer means (server delay, transient, overload, money
//!   limit, don't retry) and its remaining-quota reports, as typed decisions.
//! - [`chaos`]: chaos injection decided purely: a fault, a latency, an outcome or a behaviour per
//!   attempt by rate, switch and seed, and a scenario's client-visible fault timeline by time.
//! - [`engine`]: one sans-IO machine for a whole call (the retry and its budget, the throttle,
//!   the breaker, the limits, hedging, timeouts and the deadline, in the stack's order): a plan
//!   and the shared state in, events (the time, an answer, a copy dropped, a cancel) fed to it,
//!   actions (send copy `k` with its deadline, cancel copy `k`, done) polled out. Every face
//!   drives it; with `policy`, a policy format stack reads into its plan.
//! - [`error`]: every config is validated once at construction and refused with a [`ConfigError`]
//!   naming the field; after that nothing can fail.
//! - [`sample`]: how raw random samples become delays and decisions, without floats.
//! - `policy` (feature `policy`, allocates): the policy format, a client policy as a stack of
//!   layers holding these configs, as scenario files write it and `reliable` loads it.
//! - `fault` (feature `policy`, allocates): a scenario's faults as files write them, read by the
//!   simulator (every fault) and the chaos layers (those a client can make, as [`chaos`] windows).
//!
//! Each decision carries its reason: a breaker answers with a [`breaker::Permit`] or a
//! [`breaker::Rejection`] saying why (open, with `retry_after`; probes full; forced open), and state
//! changes go to the breaker's [`breaker::Observer`] as [`breaker::Transition`] values to log or
//! export. One classification of a failure serves both sides: `breaker::Outcome::from(class)` for
//! an [`outcome::ErrorClass`]. Configs derive serde under
//! the `serde` feature, so the simulator's scenario files embed exactly the types embedded code uses.
//!
//! ## Example
//!
//! A client calling a flaky downstream through a breaker, driven by a caller-supplied clock:
//!
//! ```
//! use reliable_core::breaker::{BreakerConfig, BreakerPolicy, CircuitBreaker, Outcome, State};
//! use reliable_core::{Duration, Instant};
//!
//! let policy = BreakerPolicy::new(BreakerConfig::reliablekit())?;
//! let mut breaker = CircuitBreaker::new(&policy)?;
//!
//! let mut now = Instant::ZERO;
//! let mut served = 0;
//! for call in 0..100 {
//!     now += Duration::from_millis(100);
//!     let Ok(permit) = breaker.try_acquire(now) else { continue };
//!     // ... make the call; here every other call fails ...
//!     let outcome = if call % 2 == 0 { Outcome::Failure } else { Outcome::Success };
//!     breaker.record(permit, outcome, now);
//!     served += 1;
//! }
//! // 50% failures over 20 calls tripped it; it stays open for 30 s.
//! assert_eq!(served, 20);
//! assert_eq!(breaker.state(now), State::Open);
//! # Ok::<(), reliable_core::ConfigError>(())
//! ```
#![cfg_attr(not(test), no_std)]
#![forbid(unsafe_code)]
#![deny(missing_docs)]
// Panic-free: no unwrap, expect, panic or unchecked indexing outside tests. Arithmetic is reasoned
// about locally (saturating where inputs are unbounded) and checked by the proptests and fuzzers,
// which run with overflow checks on.
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::indexing_slicing
    )
)]

#[cfg(feature = "policy")]
extern crate alloc;

// The crate's README (its crates.io page): its Rust blocks compile and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct CoreReadmeDoctests;

pub mod answer;
pub mod backoff;
pub mod breaker;
pub mod budget;
pub mod chaos;
pub mod engine;
pub mod error;
#[cfg(feature = "policy")]
pub mod fault;
pub mod hedge;
pub mod ledger;
pub mod limit;
pub mod outcome;
#[cfg(feature = "policy")]
pub mod policy;
pub mod provider;
pub mod registry;
pub mod retry;
mod ring;
pub mod sample;
pub mod spend;
#[cfg(target_has_atomic = "64")]
mod sync;
pub mod throttle;
pub mod time;

pub use error::{ConfigError, PPM, Problem};
pub use time::{Duration, Instant, ParseDurationError};

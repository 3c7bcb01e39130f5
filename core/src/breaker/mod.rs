//! Circuit breakers: stop calling a downstream that is failing, and probe carefully before trusting
//! it again.
//!
//! # The spec
//!
//! A breaker is in one of five states and changes state only as this table says (the rules are
//! one pure function in `spec.rs`, which both breakers below apply; its module docs give the
//! table arm by arm):
//!
//! | state | on a call | on a result | leaves for |
//! |---|---|---|---|
//! | **closed** | admit (during slow start after a close: admit a rising share, shed the rest) | count it in the window and in failures in a row | **open** when failures in a row, the failure rate or the slow-call rate reach their limit (rates once `minimum_calls` are in) |
//! | **open** | reject with `retry_after` | ignore | **half-open** when the open time is up (the next call is a probe) |
//! | **half-open** | admit up to `max_in_flight` probes, each with a lease of `probe_timeout` | tally it | **closed** when the probes say so (`successes` in a row, or a `Rate` round under the limits); **open** again, for a longer jittered time, when a probe fails, is slow or its lease expires (`Consecutive`), or the round's rates reach the limits (`Rate`); with `max_wait`, a round still undecided that long after it began ends at the next call, **open** again or (`max_wait_closes`) **closed** |
//! | **forced open** | reject | ignore | **closed** on reset |
//! | **disabled** | admit | count it in the window only | **closed** on reset |
//!
//! An operator can move a breaker at any time, through the same rules: open it until an instant
//! or for a duration (`open_until`, `open_for`; then it probes as after a trip), make it half-open
//! now (`half_open`; refused while closed, which has nothing to probe), close it as successful
//! probes would (`close`), force it open, disable it, or `reset` it. A caller that measured a
//! call's latency itself reports it with `record_latency`; `retry_after` reads how long an open
//! breaker still refuses, changing nothing; `probe_round` (and the snapshot) reads the half-open
//! round's tallies; the snapshot's window `counts` split slow calls into slow failures and slow
//! successes (read only: the slow-call rate counts both).
//!
//! A new breaker starts closed, or in the policy's `initial_state` (half-open, forced open,
//! disabled).
//!
//! Every permit carries the generation it was issued in; a result from an older generation (a late
//! reply from before a trip) changes nothing. A `now` earlier than the latest one seen counts as
//! the latest, so a clock that steps back cannot re-open or shorten anything. Each open time is
//! drawn from `[1 - jitter, 1 + jitter]` of the base by a hash of the breaker's seed and its
//! generation: breakers built the same way get different seeds ([`CircuitBreaker::new`] derives
//! one per instance), so a fleet that trips together does not probe together.
//!
//! # The pieces
//!
//! - [`BreakerPolicy`]: the rules' parameters, validated once from a [`BreakerConfig`].
//! - [`CircuitBreaker`] (`&mut self`) and [`SharedBreaker`] (`&self`, lock-free atomics, on targets
//!   with 64-bit atomics, model-checked with `loom` against the `&mut` breaker: see its "Under
//!   concurrency"): the state, applying the spec. Both implement [`Breaker`]. A breaker owns
//!   its policy, or borrows it (`&BreakerPolicy`, an `Arc`: anything `Borrow<BreakerPolicy>`), so
//!   an `Arc<SharedBreaker>` is `'static + Send + Sync`; sharing one policy by reference keeps a
//!   `CircuitBreaker<&BreakerPolicy, CountWindow<64>>` at 120 bytes on 64-bit targets (`cargo run
//!   -p reliable-core --example sizes` prints them all).
//! - Windows, capacities in calls: [`NoWindow`], [`CountWindow`], [`TimeWindow`], [`AnyWindow`],
//!   and their [`AtomicWindow`] forms for the shared breaker.
//! - Shadow mode ([`BreakerConfig::shadow`]): the breaker decides and reports as if live
//!   (would-be transitions to its [`Observer`], would-be rejections to
//!   [`Observer::on_reject`], counted by [`Rejections`]) but admits every call.
//! - Answers: [`CircuitBreaker::try_acquire`] returns a [`Permit`] or a [`Rejection`] saying why;
//!   a [`Permit`] goes back to `record` with an [`Outcome`] (`Outcome::from(ErrorClass)` maps the
//!   retry side's classification). State changes come out in one place: the breaker's
//!   [`Observer`], as [`Transition`] values.
//!
//! ```
//! use reliable_core::breaker::{BreakerConfig, BreakerPolicy, CircuitBreaker, NoWindow, Outcome, RejectReason, State};
//! use reliable_core::{Duration, Instant};
//!
//! // Opens after 2 failures in a row, stays open 20 s, then lets one trial through.
//! let policy = BreakerPolicy::new(BreakerConfig::layered_exercise()).unwrap();
//! let mut breaker = CircuitBreaker::<_, NoWindow>::with_storage(&policy).unwrap();
//! let t = Instant::from_secs;
//!
//! for now in [15, 20] {
//!     let permit = breaker.try_acquire(t(now)).unwrap();
//!     breaker.record(permit, Outcome::Failure, t(now));
//! }
//! assert_eq!(breaker.state(t(20)), State::Open);
//! let rejection = breaker.try_acquire(t(25)).unwrap_err();
//! assert_eq!(rejection.reason, RejectReason::Open { retry_after: Duration::from_secs(15) });
//!
//! let trial = breaker.try_acquire(t(40)).unwrap(); // half-open: one trial
//! assert!(breaker.try_acquire(t(41)).is_err()); // the only probe slot is taken
//! breaker.record(trial, Outcome::Success, t(42));
//! assert_eq!(breaker.state(t(42)), State::Closed);
//! ```

mod any_window;
mod api;
#[cfg(target_has_atomic = "64")]
mod atomic_window;
mod circuit;
mod config;
mod count_window;
mod fleet;
mod observer;
#[cfg(target_has_atomic = "64")]
mod shared;
mod spec;
mod time_window;
mod window;

pub use any_window::AnyWindow;
pub use api::Breaker;
#[cfg(target_has_atomic = "64")]
pub use atomic_window::{AtomicAnyWindow, AtomicCountWindow, AtomicTimeWindow, AtomicWindow};
pub use circuit::CircuitBreaker;
pub use config::{
    BreakerConfig, BreakerPolicy, HalfOpenConfig, OpenConfig, ProbeRule, SlowCallRule,
    SlowStartConfig, WindowConfig,
};
pub use count_window::{CountWindow, words_for};
pub use fleet::{FLEET_MAX_PROBES, FLEET_MAX_WINDOW, FleetRefusal};
#[cfg(target_has_atomic = "64")]
pub use observer::Rejections;
pub use observer::{LastTransition, Observer};
#[cfg(target_has_atomic = "64")]
pub use shared::SharedBreaker;
pub use spec::{Outcome, Permit, ProbeRound, RejectReason, Rejection, Snapshot, State, Transition};
pub use time_window::TimeWindow;
pub use window::{Counts, NoWindow, Window, WindowSpec};

#[cfg(all(test, loom))]
mod model_check;
#[cfg(test)]
mod tests;

//! Circuit breakers: stop calling a downstream that is failing, and probe carefully before trusting
//! it again.
//!
//! A breaker sits in front of calls to one downstream. While **closed** it lets calls through and
//! watches their outcomes. When a trip rule fires (failures in a row, failure rate or slow-call rate
//! over a window, after a minimum number of calls) it **opens**: calls are rejected at once, with a
//! `retry_after`, so a struggling downstream gets no load from this client and callers do not wait on
//! it. When the open time is up it goes **half-open** and admits a few probes, each a lease that
//! expires after `probe_timeout`; their results close it again or re-open it for a (possibly longer,
//! jittered) open time. Manual controls force it open, disable it (metrics only) or reset it.
//!
//! Every answer carries its reason: [`CircuitBreaker::try_acquire`] returns a [`Permit`] or a
//! [`Rejection`]; state changes go to the breaker's [`Observer`] as [`Transition`] values, and only
//! there. Permits carry the breaker's generation, so a result that arrives after the state moved on
//! (a late reply from before the trip) cannot close or re-open it.
//!
//! The rules live in a [`BreakerPolicy`] (validated once). A breaker owns its policy, or borrows it
//! (`&BreakerPolicy`, an `Arc`: anything that is `Borrow<BreakerPolicy>`), and holds only state
//! besides, so it is small: `CircuitBreaker<&BreakerPolicy, CountWindow<64>, 1>` (64-call window,
//! one probe slot) is 120 bytes on 64-bit targets (`cargo run -p reliable-core --example sizes`
//! prints them all). Window capacities are in calls. Both breakers implement [`Breaker`].
//!
//! One breaker shared by many threads is a [`SharedBreaker`] (on targets with 64-bit atomics): the
//! same policy and decisions through `&self`, with its state packed into atomics, lock-free and
//! without `unsafe`; its windows are the [`AtomicWindow`] kinds.
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
mod observer;
#[cfg(target_has_atomic = "64")]
mod shared;
mod spec;
mod time_window;
mod window;

pub use any_window::AnyWindow;
pub use api::{Breaker, Snapshot};
#[cfg(target_has_atomic = "64")]
pub use atomic_window::{AtomicAnyWindow, AtomicCountWindow, AtomicTimeWindow, AtomicWindow};
pub use circuit::CircuitBreaker;
pub use config::{
    BreakerConfig, BreakerPolicy, HalfOpenConfig, OpenConfig, ProbeRule, SlowCallRule,
    SlowStartConfig, WindowConfig,
};
pub use count_window::{CountWindow, words_for};
pub use observer::{LastTransition, Observer};
#[cfg(target_has_atomic = "64")]
pub use shared::SharedBreaker;
pub use spec::{Outcome, Permit, RejectReason, Rejection, State, Transition};
pub use time_window::TimeWindow;
pub use window::{Counts, NoWindow, Window, WindowSpec};

#[cfg(test)]
mod tests;

//! [`Breaker`]: what every breaker answers, so code (a simulator, a std layer, a test) can drive
//! [`CircuitBreaker`] and [`SharedBreaker`](super::SharedBreaker) alike; and [`Snapshot`], a breaker's state as plain data.
//!
//! ```
//! use reliable_core::breaker::{Breaker, BreakerConfig, BreakerPolicy, CircuitBreaker, Outcome, State};
//! use reliable_core::Instant;
//!
//! fn fail_twice(b: &mut impl Breaker) {
//!     for _ in 0..2 {
//!         if let Ok(permit) = b.try_acquire(Instant::ZERO) {
//!             b.record(permit, Outcome::Failure, Instant::ZERO);
//!         }
//!     }
//! }
//! let policy = BreakerPolicy::new(BreakerConfig::layered_exercise())?;
//! let mut b = CircuitBreaker::new(&policy)?;
//! fail_twice(&mut b);
//! assert_eq!(b.snapshot(Instant::ZERO).state, State::Open);
//! # Ok::<(), reliable_core::ConfigError>(())
//! ```

use core::borrow::Borrow;

use super::circuit::CircuitBreaker;
use super::config::BreakerPolicy;
use super::observer::Observer;
use super::spec::{Outcome, Permit, Rejection, Snapshot, State};
use super::window::Window;
use crate::time::{Duration, Instant};

/// The calls every breaker answers. State changes go to the breaker's
/// [`Observer`](super::Observer), not through these answers.
///
/// [`SharedBreaker`](super::SharedBreaker) needs no `&mut`, so it implements it through a shared
/// reference: a breaker behind an `Arc` is driven with `let mut b = &*arc;`.
pub trait Breaker {
    /// Asks to make one call; on `Ok`, make it and hand the permit back to [`record`](Self::record).
    fn try_acquire(&mut self, now: Instant) -> Result<Permit, Rejection>;
    /// Reports how a permitted call ended.
    fn record(&mut self, permit: Permit, outcome: Outcome, now: Instant);
    /// Reports how a permitted call ended, with the latency the caller measured: the slow-call
    /// rule judges `latency` instead of the time from the permit to `now`.
    fn record_latency(&mut self, permit: Permit, outcome: Outcome, latency: Duration, now: Instant);
    /// The state as of `now`.
    fn state(&self, now: Instant) -> State;
    /// Everything a caller can read, as of `now`.
    fn snapshot(&self, now: Instant) -> Snapshot;
    /// The policy it follows.
    fn policy(&self) -> &BreakerPolicy;
    /// While it is open at `now`, how long until it admits a probe; `None` otherwise. Pure: it
    /// changes nothing, not even the latest time seen.
    fn retry_after(&self, now: Instant) -> Option<Duration>;
    /// A permit if it is closed and not ramping up, judged without the time (such a breaker admits
    /// every call); `None` otherwise, having changed nothing. For callers that read the clock only
    /// when they must: on `None`, read it and ask [`try_acquire`](Self::try_acquire).
    fn try_acquire_closed(&mut self) -> Option<Permit>;
    /// Opens it by hand until `until`, then it probes as after a trip.
    fn open_until(&mut self, until: Instant, now: Instant);
    /// Opens it by hand for `duration` from `now`, then it probes as after a trip.
    fn open_for(&mut self, duration: Duration, now: Instant);
    /// Half-open now, with a fresh probe round; false (nothing changed) if it is closed.
    fn half_open(&mut self, now: Instant) -> bool;
    /// Closes it by hand, as successful probes would (slow start if configured).
    fn close(&mut self, now: Instant);
    /// Opens it by hand until [`reset`](Self::reset).
    fn force_open(&mut self, now: Instant);
    /// Switches it off (admit everything, keep metrics) until [`reset`](Self::reset).
    fn disable(&mut self, now: Instant);
    /// Back to closed with nothing remembered.
    fn reset(&mut self, now: Instant);
}

impl<R: Borrow<BreakerPolicy>, W: Window, const P: usize, O: Observer> Breaker
    for CircuitBreaker<R, W, P, O>
{
    #[inline]
    fn try_acquire(&mut self, now: Instant) -> Result<Permit, Rejection> {
        CircuitBreaker::try_acquire(self, now)
    }
    #[inline]
    fn record(&mut self, permit: Permit, outcome: Outcome, now: Instant) {
        CircuitBreaker::record(self, permit, outcome, now)
    }
    fn record_latency(
        &mut self,
        permit: Permit,
        outcome: Outcome,
        latency: Duration,
        now: Instant,
    ) {
        CircuitBreaker::record_latency(self, permit, outcome, latency, now)
    }
    fn state(&self, now: Instant) -> State {
        CircuitBreaker::state(self, now)
    }
    fn snapshot(&self, now: Instant) -> Snapshot {
        Snapshot {
            state: self.state(now),
            generation: self.generation(),
            consecutive_failures: self.consecutive_failures(),
            reopens: self.reopens(),
            probes_in_flight: self.probes_in_flight(),
            counts: self.counts(now),
            probe_round: self.probe_round(),
        }
    }
    fn policy(&self) -> &BreakerPolicy {
        CircuitBreaker::policy(self)
    }
    fn retry_after(&self, now: Instant) -> Option<Duration> {
        CircuitBreaker::retry_after(self, now)
    }
    #[inline]
    fn try_acquire_closed(&mut self) -> Option<Permit> {
        CircuitBreaker::try_acquire_closed(self)
    }
    fn open_until(&mut self, until: Instant, now: Instant) {
        CircuitBreaker::open_until(self, until, now)
    }
    fn open_for(&mut self, duration: Duration, now: Instant) {
        CircuitBreaker::open_for(self, duration, now)
    }
    fn half_open(&mut self, now: Instant) -> bool {
        CircuitBreaker::half_open(self, now)
    }
    fn close(&mut self, now: Instant) {
        CircuitBreaker::close(self, now)
    }
    fn force_open(&mut self, now: Instant) {
        CircuitBreaker::force_open(self, now)
    }
    fn disable(&mut self, now: Instant) {
        CircuitBreaker::disable(self, now)
    }
    fn reset(&mut self, now: Instant) {
        CircuitBreaker::reset(self, now)
    }
}

#[cfg(target_has_atomic = "64")]
mod shared_impls {
    use super::*;
    use crate::breaker::atomic_window::AtomicWindow;
    use crate::breaker::shared::SharedBreaker;

    impl<R: Borrow<BreakerPolicy>, W: AtomicWindow, const P: usize, O: Observer> Breaker
        for &SharedBreaker<R, W, P, O>
    {
        #[inline]
        fn try_acquire(&mut self, now: Instant) -> Result<Permit, Rejection> {
            SharedBreaker::try_acquire(self, now)
        }
        #[inline]
        fn record(&mut self, permit: Permit, outcome: Outcome, now: Instant) {
            SharedBreaker::record(self, permit, outcome, now)
        }
        fn record_latency(
            &mut self,
            permit: Permit,
            outcome: Outcome,
            latency: Duration,
            now: Instant,
        ) {
            SharedBreaker::record_latency(self, permit, outcome, latency, now)
        }
        fn state(&self, now: Instant) -> State {
            SharedBreaker::state(self, now)
        }
        fn snapshot(&self, now: Instant) -> Snapshot {
            SharedBreaker::snapshot(self, now)
        }
        fn policy(&self) -> &BreakerPolicy {
            SharedBreaker::policy(self)
        }
        fn retry_after(&self, now: Instant) -> Option<Duration> {
            SharedBreaker::retry_after(self, now)
        }
        #[inline]
        fn try_acquire_closed(&mut self) -> Option<Permit> {
            SharedBreaker::try_acquire_closed(self)
        }
        fn open_until(&mut self, until: Instant, now: Instant) {
            SharedBreaker::open_until(self, until, now)
        }
        fn open_for(&mut self, duration: Duration, now: Instant) {
            SharedBreaker::open_for(self, duration, now)
        }
        fn half_open(&mut self, now: Instant) -> bool {
            SharedBreaker::half_open(self, now)
        }
        fn close(&mut self, now: Instant) {
            SharedBreaker::close(self, now)
        }
        fn force_open(&mut self, now: Instant) {
            SharedBreaker::force_open(self, now)
        }
        fn disable(&mut self, now: Instant) {
            SharedBreaker::disable(self, now)
        }
        fn reset(&mut self, now: Instant) {
            SharedBreaker::reset(self, now)
        }
    }
}

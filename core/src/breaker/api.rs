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
use super::spec::{Outcome, Permit, Rejection, State};
use super::window::{Counts, Window};
use crate::time::Instant;

/// A breaker's state as of one instant, as plain data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Snapshot {
    /// The state (an open breaker whose time is up reads as half-open).
    pub state: State,
    /// Changes on every state change; permits of an older generation are ignored.
    pub generation: u32,
    /// Failures in a row while closed.
    pub consecutive_failures: u32,
    /// Failed probe rounds since the breaker last closed.
    pub reopens: u32,
    /// Half-open probes in flight (with bounded probes; 0 otherwise).
    pub probes_in_flight: u32,
    /// Outcomes in the window.
    pub counts: Counts,
}

/// The calls every breaker answers. State changes go to the breaker's
/// [`Observer`](super::Observer), not through these answers.
///
/// [`SharedBreaker`](super::SharedBreaker) implements it both by value and by reference (`&SharedBreaker`), so a breaker
/// behind an `Arc` can be driven with `let mut b = &*arc;`.
pub trait Breaker {
    /// Asks to make one call; on `Ok`, make it and hand the permit back to [`record`](Self::record).
    fn try_acquire(&mut self, now: Instant) -> Result<Permit, Rejection>;
    /// Reports how a permitted call ended.
    fn record(&mut self, permit: Permit, outcome: Outcome, now: Instant);
    /// The state as of `now`.
    fn state(&self, now: Instant) -> State;
    /// Everything a caller can read, as of `now`.
    fn snapshot(&self, now: Instant) -> Snapshot;
    /// The policy it follows.
    fn policy(&self) -> &BreakerPolicy;
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
        }
    }
    fn policy(&self) -> &BreakerPolicy {
        CircuitBreaker::policy(self)
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
        fn state(&self, now: Instant) -> State {
            SharedBreaker::state(self, now)
        }
        fn snapshot(&self, now: Instant) -> Snapshot {
            SharedBreaker::snapshot(self, now)
        }
        fn policy(&self) -> &BreakerPolicy {
            SharedBreaker::policy(self)
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

    impl<R: Borrow<BreakerPolicy>, W: AtomicWindow, const P: usize, O: Observer> Breaker
        for SharedBreaker<R, W, P, O>
    {
        #[inline]
        fn try_acquire(&mut self, now: Instant) -> Result<Permit, Rejection> {
            SharedBreaker::try_acquire(self, now)
        }
        #[inline]
        fn record(&mut self, permit: Permit, outcome: Outcome, now: Instant) {
            SharedBreaker::record(self, permit, outcome, now)
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

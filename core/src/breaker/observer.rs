//! [`Observer`]: the one place a breaker's state changes come out.
//!
//! Every call that changes a breaker's state (an admission that turns it half-open, a result that
//! trips or closes it, an expired probe lease, a manual switch) hands the [`Transition`] to the
//! breaker's observer, at the moment it happens, and to nothing else: the call's own answer does
//! not carry it. The default observer, `()`, ignores them and costs nothing. A closure
//! `Fn(Transition)` logs or counts them; [`LastTransition`] keeps the latest one for a caller that
//! polls (a simulator, a test).
//!
//! ```
//! use reliable_core::breaker::{BreakerConfig, BreakerPolicy, CircuitBreaker, LastTransition, Outcome, State};
//! use reliable_core::Instant;
//!
//! let policy = BreakerPolicy::new(BreakerConfig::layered_exercise())?;
//! let mut b = CircuitBreaker::new(&policy)?.observe(LastTransition::default());
//! for _ in 0..2 {
//!     let permit = b.try_acquire(Instant::ZERO)?;
//!     b.record(permit, Outcome::Failure, Instant::ZERO);
//! }
//! let t = b.observer().take().expect("tripped");
//! assert_eq!((t.from, t.to), (State::Closed, State::Open));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use core::cell::Cell;

use super::spec::Transition;

/// Receives a breaker's state changes, one call per [`Transition`], from the call that made it.
///
/// It takes `&self` so that a [`SharedBreaker`](super::SharedBreaker) can report from any thread;
/// an observer of a shared breaker must be `Sync` for the breaker to be.
pub trait Observer {
    /// The breaker just made `transition`.
    fn on_transition(&self, transition: Transition);
}

/// Ignores every transition.
impl Observer for () {
    #[inline(always)]
    fn on_transition(&self, _: Transition) {}
}

/// Calls the closure.
impl<F: Fn(Transition)> Observer for F {
    #[inline]
    fn on_transition(&self, transition: Transition) {
        self(transition)
    }
}

/// Keeps the latest transition until [`take`](LastTransition::take)n. Not `Sync`: for a breaker
/// used from one thread.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LastTransition(Cell<Option<Transition>>);

impl LastTransition {
    /// The latest transition since the last `take`, if any, leaving none.
    pub fn take(&self) -> Option<Transition> {
        self.0.take()
    }
}

impl Observer for LastTransition {
    #[inline]
    fn on_transition(&self, transition: Transition) {
        self.0.set(Some(transition));
    }
}

//! Breakers as the simulator stores them: the smallest core breaker type that fits the config.
//!
//! The core's breaker is generic over its window storage and probe slots. A scenario's config is
//! only known at run time, so [`BreakerSlot`] picks, in order, a breaker with no window (consecutive
//! failures only, one probe), one with a 64-call count window and four probes, or a boxed
//! [`AnyWindow<256, 64, 4>`](reliable_core::breaker::AnyWindow) with 16 probes, whichever the core
//! accepts first. A million per-client breakers of the first kind take tens of megabytes, not
//! gigabytes. A config none of them fits is reported as a scenario error (the core's message).

use reliable_core::breaker::{
    AnyWindow, BreakerPolicy, CircuitBreaker, CountWindow, LastTransition, NoWindow, Outcome,
    Permit, Rejection, State, Transition,
};
use reliable_core::{ConfigError, Instant};

/// A breaker of whichever storage fits its policy.
#[derive(Clone, Debug)]
pub enum BreakerSlot<'p> {
    /// Consecutive-failure breakers: no window.
    Plain(Core<'p, NoWindow, 1>),
    /// Rate rules over at most 64 calls, up to 4 probes.
    Count(Core<'p, CountWindow<64>, 4>),
    /// Anything else the core supports: 256-call count windows or 64-bucket time windows, 16 probes.
    Any(Box<Core<'p, AnyWindow<256, 64, 4>, 16>>),
}

/// A core breaker sharing its scenario's policy, keeping its latest transition for the caller.
type Core<'p, W, const P: usize> = CircuitBreaker<&'p BreakerPolicy, W, P, LastTransition>;

impl<'p> BreakerSlot<'p> {
    /// A closed breaker for `policy`, its open-time jitter seeded with `seed`.
    pub fn new(policy: &'p BreakerPolicy, seed: u64) -> Result<Self, ConfigError> {
        if let Ok(b) = Core::<NoWindow, 1>::with_storage(policy)
            && !policy.needs_window()
        {
            return Ok(BreakerSlot::Plain(b.with_seed(seed)));
        }
        if let Ok(b) = Core::<CountWindow<64>, 4>::with_storage(policy) {
            return Ok(BreakerSlot::Count(b.with_seed(seed)));
        }
        let b = Core::<AnyWindow<256, 64, 4>, 16>::with_storage(policy)?;
        Ok(BreakerSlot::Any(Box::new(b.with_seed(seed))))
    }

    /// Bytes one breaker for `policy` takes, or why none fits.
    pub fn bytes_for(policy: &BreakerPolicy) -> Result<usize, ConfigError> {
        Ok(match BreakerSlot::new(policy, 0)? {
            BreakerSlot::Plain(_) | BreakerSlot::Count(_) => std::mem::size_of::<Self>(),
            BreakerSlot::Any(_) => {
                std::mem::size_of::<Self>()
                    + std::mem::size_of::<Core<'_, AnyWindow<256, 64, 4>, 16>>()
            }
        })
    }

    /// See [`CircuitBreaker::try_acquire`]; also returns the transition the call made, if any.
    #[inline]
    pub fn try_acquire(&mut self, now: Instant) -> (Result<Permit, Rejection>, Option<Transition>) {
        match self {
            BreakerSlot::Plain(b) => (b.try_acquire(now), b.observer().take()),
            BreakerSlot::Count(b) => (b.try_acquire(now), b.observer().take()),
            BreakerSlot::Any(b) => (b.try_acquire(now), b.observer().take()),
        }
    }

    /// See [`CircuitBreaker::record`]; returns the transition the call made, if any.
    #[inline]
    pub fn record(&mut self, permit: Permit, outcome: Outcome, now: Instant) -> Option<Transition> {
        match self {
            BreakerSlot::Plain(b) => {
                b.record(permit, outcome, now);
                b.observer().take()
            }
            BreakerSlot::Count(b) => {
                b.record(permit, outcome, now);
                b.observer().take()
            }
            BreakerSlot::Any(b) => {
                b.record(permit, outcome, now);
                b.observer().take()
            }
        }
    }

    /// See [`CircuitBreaker::state`].
    pub fn state(&self, now: Instant) -> State {
        match self {
            BreakerSlot::Plain(b) => b.state(now),
            BreakerSlot::Count(b) => b.state(now),
            BreakerSlot::Any(b) => b.state(now),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reliable_core::breaker::BreakerConfig;

    #[test]
    fn picks_the_smallest_storage_that_fits() {
        let plain = BreakerPolicy::new(BreakerConfig::layered_exercise()).unwrap();
        assert!(matches!(
            BreakerSlot::new(&plain, 1).unwrap(),
            BreakerSlot::Plain(_)
        ));
        let kit = BreakerPolicy::new(BreakerConfig::reliablekit()).unwrap();
        assert!(matches!(
            BreakerSlot::new(&kit, 1).unwrap(),
            BreakerSlot::Count(_)
        ));
        let r4j = BreakerPolicy::new(BreakerConfig::resilience4j()).unwrap();
        assert!(matches!(
            BreakerSlot::new(&r4j, 1).unwrap(),
            BreakerSlot::Any(_)
        ));
        // 160 bytes of breaker state, and the latest transition kept for the simulator (24).
        assert!(BreakerSlot::bytes_for(&plain).unwrap() <= 184);
    }
}

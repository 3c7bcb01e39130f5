//! The breaker a [`Reliable`](crate::Reliable) owns: a lock-free [`SharedBreaker`] with a window
//! chosen by the policy, and admission that reads the clock only when it must.

use crate::clock::Clock;
use crate::observer::Observer;
use reliable_core::ConfigError;
use reliable_core::Instant;
use reliable_core::breaker::{
    AtomicAnyWindow, BreakerPolicy, Counts, NoWindow, Outcome, Permit, Rejection, SharedBreaker,
    State, Transition,
};
use std::sync::Arc;

/// Probe slots of every breaker here: the most probes a policy may let into half-open at once.
pub(crate) const PROBE_SLOTS: usize = 8;
/// Count windows of up to 256 calls; time windows of up to 64 buckets.
type Window = AtomicAnyWindow<4, 64>;

/// A breaker without a window for consecutive-only policies (nothing to write per call but the
/// failure streak), one with a window otherwise.
// Held once per instance behind an `Arc`: boxing the large variant would only add a pointer chase
// to every call.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub(crate) enum Owned {
    Streak(SharedBreaker<'static, NoWindow, PROBE_SLOTS>),
    Windowed(SharedBreaker<'static, Window, PROBE_SLOTS>),
}

/// What one admission saw: the permit or the refusal, and the time it was judged at, when the
/// clock was read.
pub(crate) struct Admission {
    pub result: Result<Permit, Rejection>,
    pub now: Option<Instant>,
}

/// Forwards the breaker's state changes to the instance's observers.
#[derive(Debug)]
pub(crate) struct Transitions {
    pub name: Arc<str>,
    pub observers: Arc<[Arc<dyn Observer>]>,
}

impl Transitions {
    fn emit(&self, t: Option<Transition>) {
        if let Some(t) = t {
            for o in self.observers.iter() {
                o.on_transition(&self.name, t);
            }
        }
    }
}

macro_rules! each {
    ($self:expr, $b:ident => $e:expr) => {
        match $self {
            Owned::Streak($b) => $e,
            Owned::Windowed($b) => $e,
        }
    };
}

impl Owned {
    pub fn new(policy: BreakerPolicy, seed: u64) -> Result<Self, ConfigError> {
        // Until the core's breakers own their policy: one policy per Reliable, kept for the
        // life of the process.
        let policy: &'static BreakerPolicy = Box::leak(Box::new(policy));
        Ok(if policy.needs_window() {
            Owned::Windowed(SharedBreaker::new(policy)?.with_seed(seed))
        } else {
            Owned::Streak(SharedBreaker::new(policy)?.with_seed(seed))
        })
    }

    pub fn policy(&self) -> &BreakerPolicy {
        each!(self, b => b.policy())
    }

    /// Asks for a permit at `now`, or, when `now` is `None` (the instance reads the clock only
    /// when a decision needs it), first at the latest time the breaker has seen: a closed breaker
    /// admits without looking at the time. Anything else (an open breaker whose time may be up, a
    /// probe) is decided again on a fresh reading of `clock`.
    #[inline]
    pub fn acquire(&self, now: Option<Instant>, clock: &dyn Clock, t: &Transitions) -> Admission {
        if let Some(now) = now {
            return self.acquire_at(now, t);
        }
        if each!(self, b => b.state(Instant::ZERO)) == State::Closed {
            match each!(self, b => b.try_acquire(Instant::ZERO)) {
                Ok(p) if !p.is_probe() && p.transition().is_none() => {
                    return Admission {
                        result: Ok(p),
                        now: None,
                    };
                }
                // The state moved under us: hand the stale permit back unused and decide on
                // the real time.
                Ok(p) => {
                    t.emit(p.transition());
                    self.record(p, Outcome::Ignored, Instant::ZERO, t);
                }
                Err(r) => t.emit(r.transition),
            }
        }
        self.acquire_at(clock.now(), t)
    }

    fn acquire_at(&self, now: Instant, t: &Transitions) -> Admission {
        let result = each!(self, b => b.try_acquire(now));
        match &result {
            Ok(p) => t.emit(p.transition()),
            Err(r) => t.emit(r.transition),
        }
        Admission {
            result,
            now: Some(now),
        }
    }

    #[inline]
    pub fn record(&self, permit: Permit, outcome: Outcome, now: Instant, t: &Transitions) {
        let transition = each!(self, b => b.record(permit, outcome, now));
        t.emit(transition);
    }

    pub fn state(&self, now: Instant) -> State {
        each!(self, b => b.state(now))
    }

    pub fn counts(&self, now: Instant) -> Counts {
        each!(self, b => b.counts(now))
    }

    pub fn consecutive_failures(&self) -> u32 {
        each!(self, b => b.consecutive_failures())
    }
}

//! The breaker a [`Reliable`](crate::Reliable) owns: a lock-free [`SharedBreaker`] that owns its
//! policy, with a window chosen by the policy, its transitions sent to the instance's observers,
//! and admission that reads the clock only when it must.

use crate::clock::Clock;
use crate::observer::Observer;
use reliable_core::ConfigError;
use reliable_core::Instant;
use reliable_core::breaker::{
    AtomicAnyWindow, BreakerPolicy, NoWindow, Observer as Outlet, Outcome, Permit, RejectReason,
    Rejection, SharedBreaker, Snapshot, State, Transition,
};
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;

/// Probe slots of every breaker here: the most probes a policy may let into half-open at once.
pub(crate) const PROBE_SLOTS: usize = 8;
/// Count windows of up to 256 calls (4 words of 64), time windows of up to 64 buckets.
type Window = AtomicAnyWindow<256, 64, 4>;

/// A breaker without a window for consecutive-only policies (nothing to write per call but the
/// failure streak), one with a window otherwise.
// Held once per instance behind an `Arc`: boxing the large variant would only add a pointer chase
// to every call.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub(crate) enum Owned {
    Streak(SharedBreaker<BreakerPolicy, NoWindow, PROBE_SLOTS, Transitions>),
    Windowed(SharedBreaker<BreakerPolicy, Window, PROBE_SLOTS, Transitions>),
}

/// What one admission saw: the permit or the refusal, and the time it was judged at, when the
/// clock was read.
pub(crate) struct Admission {
    pub result: Result<Permit, Rejection>,
    pub now: Option<Instant>,
}

/// Sends the breaker's state changes to the instance's observers, from the call that made them,
/// and counts the calls shadow mode let through that the breaker would have rejected.
#[derive(Debug)]
pub(crate) struct Transitions {
    pub name: Arc<str>,
    pub observers: Arc<[Arc<dyn Observer>]>,
    pub would_reject: AtomicU64,
}

impl Transitions {
    pub fn new(name: Arc<str>, observers: Arc<[Arc<dyn Observer>]>) -> Self {
        Transitions {
            name,
            observers,
            would_reject: AtomicU64::new(0),
        }
    }
}

impl Outlet for Transitions {
    fn on_transition(&self, t: Transition) {
        for o in self.observers.iter() {
            o.on_transition(&self.name, t);
        }
    }
    fn on_reject(&self, reason: RejectReason, shadow: bool) {
        // Live rejections reach the observers as refused calls (`on_reject`), from the call.
        if shadow {
            self.would_reject.fetch_add(1, Relaxed);
            for o in self.observers.iter() {
                o.on_would_reject(&self.name, reason);
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
    pub fn new(policy: BreakerPolicy, seed: u64, outlet: Transitions) -> Result<Self, ConfigError> {
        Ok(if policy.needs_window() {
            Owned::Windowed(
                SharedBreaker::<_, Window, PROBE_SLOTS, ()>::with_storage(policy)?
                    .observe(outlet)
                    .with_seed(seed),
            )
        } else {
            Owned::Streak(
                SharedBreaker::<_, NoWindow, PROBE_SLOTS, ()>::with_storage(policy)?
                    .observe(outlet)
                    .with_seed(seed),
            )
        })
    }

    pub fn policy(&self) -> &BreakerPolicy {
        each!(self, b => b.policy())
    }

    /// Asks for a permit at `now`, or, when `now` is `None` (the instance reads the clock only
    /// when a decision needs it), first without the time (see [`try_closed`](Self::try_closed)),
    /// then on a fresh reading of `clock`.
    #[inline]
    pub fn acquire(&self, now: Option<Instant>, clock: &dyn Clock) -> Admission {
        if now.is_none()
            && let Some(p) = self.try_closed()
        {
            return Admission {
                result: Ok(p),
                now: None,
            };
        }
        let now = now.unwrap_or_else(|| clock.now());
        Admission {
            result: each!(self, b => b.try_acquire(now)),
            now: Some(now),
        }
    }

    /// A permit if the breaker is plainly closed (not ramping up after a close), judged without
    /// reading the clock: such a breaker admits every call. `None` changes nothing; the caller
    /// decides again on the real time.
    #[inline(always)]
    pub fn try_closed(&self) -> Option<Permit> {
        each!(self, b => b.try_acquire_closed())
    }

    #[inline(always)]
    pub fn record(&self, permit: Permit, outcome: Outcome, now: Instant) {
        each!(self, b => b.record(permit, outcome, now));
    }

    pub fn state(&self, now: Instant) -> State {
        each!(self, b => b.state(now))
    }

    pub fn snapshot(&self, now: Instant) -> Snapshot {
        each!(self, b => b.snapshot(now))
    }

    /// Calls shadow mode let through that the breaker would have rejected.
    pub fn would_reject(&self) -> u64 {
        each!(self, b => b.observer().would_reject.load(Relaxed))
    }

    /// While the breaker is open at `now`: how long until it admits a probe (`None` when it is
    /// not open, or forced open, which admits nothing until it is reset). A pure read: the
    /// breaker's own answer, with nothing asked of it and nothing changed.
    pub fn retry_after(&self, now: Instant) -> Option<std::time::Duration> {
        each!(self, b => b.retry_after(now)).map(Into::into)
    }
}

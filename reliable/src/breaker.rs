//! The breaker a [`Reliable`](crate::Reliable) owns: a lock-free [`SharedBreaker`] that owns its
//! policy, with a window chosen by the policy, driven through the core's [`Breaker`] trait, its
//! transitions sent to the instance's observers, and admission that reads the clock only when it
//! must.

use crate::observer::Observer;
use reliable_core::ConfigError;
use reliable_core::Instant;
use reliable_core::breaker::{
    AtomicAnyWindow, AtomicWindow, Breaker, BreakerPolicy, NoWindow, Observer as Outlet, Outcome,
    Permit, RejectReason, Rejection, SharedBreaker, Snapshot, State, Transition,
};
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;

/// Probe slots of every breaker here: the most probes a policy may let into half-open at once.
pub(crate) const PROBE_SLOTS: usize = 8;
/// Count windows of up to 256 calls (4 words of 64), time windows of up to 64 buckets.
type Window = AtomicAnyWindow<256, 64, 4>;

/// A lock-free breaker with window `W`, sending its transitions to the instance's observers.
type Shared<W> = SharedBreaker<BreakerPolicy, W, PROBE_SLOTS, Transitions>;

/// The instance's breaker: a [`SharedBreaker`] of the window its policy needs, none for a
/// consecutive-only policy (nothing to write per call but the failure streak). The one runtime
/// choice is which storage; every call goes through [`Owned::drive`], one `match` that hands the
/// breaker to code generic over the core's [`Breaker`] trait, so each storage's calls are
/// compiled, and inlined, for it. (A trait object instead costs an indirect call that cannot be
/// inlined: 11 to 19 more instructions per call, measured with `benches/examples/call_profile`.)
// Held once per instance behind an `Arc`: boxing the large variant would only add a pointer chase
// to every call.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub(crate) enum Owned {
    Streak(Shared<NoWindow>),
    Windowed(Shared<Window>),
}

/// One call on a breaker of either storage, made through the core's [`Breaker`] trait (which a
/// [`SharedBreaker`] implements through a shared reference): a closure generic over the breaker.
trait Drive {
    type Out;
    fn on<W: AtomicWindow>(self, b: &Shared<W>) -> Self::Out;
}

struct TryAcquire(Instant);
impl Drive for TryAcquire {
    type Out = Result<Permit, Rejection>;
    #[inline(always)]
    fn on<W: AtomicWindow>(self, b: &Shared<W>) -> Self::Out {
        Breaker::try_acquire(&mut { b }, self.0)
    }
}

struct TryAcquireClosed;
impl Drive for TryAcquireClosed {
    type Out = Option<Permit>;
    #[inline(always)]
    fn on<W: AtomicWindow>(self, b: &Shared<W>) -> Self::Out {
        Breaker::try_acquire_closed(&mut { b })
    }
}

struct Record(Permit, Outcome, Instant);
impl Drive for Record {
    type Out = ();
    #[inline(always)]
    fn on<W: AtomicWindow>(self, b: &Shared<W>) {
        Breaker::record(&mut { b }, self.0, self.1, self.2)
    }
}

/// A read as of an instant (the state, the snapshot, how long until a probe), off the hot path.
struct Read<T>(Instant, fn(&dyn Breaker, Instant) -> T);
impl<T> Drive for Read<T> {
    type Out = T;
    fn on<W: AtomicWindow>(self, b: &Shared<W>) -> T {
        (self.1)(&b, self.0)
    }
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

    /// Makes call `op` on the breaker, whatever its storage.
    #[inline(always)]
    fn drive<D: Drive>(&self, op: D) -> D::Out {
        match self {
            Owned::Streak(b) => op.on(b),
            Owned::Windowed(b) => op.on(b),
        }
    }

    /// The breaker's policy and its outlet, whatever its storage.
    fn parts(&self) -> (&BreakerPolicy, &Transitions) {
        match self {
            Owned::Streak(b) => (b.policy(), b.observer()),
            Owned::Windowed(b) => (b.policy(), b.observer()),
        }
    }

    pub fn policy(&self) -> &BreakerPolicy {
        self.parts().0
    }

    /// Asks for a permit at `now`.
    #[inline]
    pub fn acquire(&self, now: Instant) -> Result<Permit, Rejection> {
        self.drive(TryAcquire(now))
    }

    /// A permit if the breaker is plainly closed (not ramping up after a close), judged without
    /// reading the clock: such a breaker admits every call. `None` changes nothing; the caller
    /// decides again on the real time.
    #[inline(always)]
    pub fn try_closed(&self) -> Option<Permit> {
        self.drive(TryAcquireClosed)
    }

    #[inline(always)]
    pub fn record(&self, permit: Permit, outcome: Outcome, now: Instant) {
        self.drive(Record(permit, outcome, now));
    }

    pub fn state(&self, now: Instant) -> State {
        self.drive(Read(now, |b, now| b.state(now)))
    }

    pub fn snapshot(&self, now: Instant) -> Snapshot {
        self.drive(Read(now, |b, now| b.snapshot(now)))
    }

    /// Calls shadow mode let through that the breaker would have rejected.
    pub fn would_reject(&self) -> u64 {
        self.parts().1.would_reject.load(Relaxed)
    }

    /// While the breaker is open at `now`: how long until it admits a probe (`None` when it is
    /// not open, or forced open, which admits nothing until it is reset). A pure read: the
    /// breaker's own answer, with nothing asked of it and nothing changed.
    pub fn retry_after(&self, now: Instant) -> Option<std::time::Duration> {
        self.drive(Read(now, |b, now| b.retry_after(now)))
            .map(Into::into)
    }
}

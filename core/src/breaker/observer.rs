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

use super::spec::{RejectReason, Transition};

/// Receives a breaker's state changes, one call per [`Transition`], from the call that made it.
///
/// It takes `&self` so that a [`SharedBreaker`](super::SharedBreaker) can report from any thread;
/// an observer of a shared breaker must be `Sync` for the breaker to be.
pub trait Observer {
    /// The breaker just made `transition` (in shadow mode, a would-be transition).
    fn on_transition(&self, transition: Transition);
    /// The rules rejected a call for `reason`; with `shadow`, the breaker (in shadow mode)
    /// admitted it anyway: a would-be rejection. The default ignores it.
    #[inline(always)]
    fn on_reject(&self, reason: RejectReason, shadow: bool) {
        let _ = (reason, shadow);
    }
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

/// Counts the calls the rules rejected, by reason, live and in shadow mode, and passes every
/// transition on to `O`. Lock-free, so a [`SharedBreaker`](super::SharedBreaker) may use it from
/// any thread; the breaker itself keeps no counts, so a breaker without it stays as small.
///
/// ```
/// use reliable_core::breaker::{BreakerConfig, BreakerPolicy, CircuitBreaker, NoWindow, Outcome, RejectReason, Rejections};
/// use reliable_core::Instant;
///
/// let policy = BreakerPolicy::new(BreakerConfig { shadow: true, ..BreakerConfig::layered_exercise() })?;
/// let mut b = CircuitBreaker::<_, NoWindow>::with_storage(&policy)?.observe(Rejections::<()>::default());
/// for _ in 0..3 {
///     let permit = b.try_acquire(Instant::ZERO)?; // shadow mode admits every call
///     b.record(permit, Outcome::Failure, Instant::ZERO);
/// }
/// // Two failures tripped it; the third call would have been rejected.
/// assert_eq!(b.observer().shadow(RejectReason::Open { retry_after: Default::default() }), 1);
/// assert_eq!(b.observer().live_total(), 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[cfg(target_has_atomic = "64")]
#[derive(Debug, Default)]
pub struct Rejections<O = ()> {
    inner: O,
    /// By [`reason_index`]: live rejections, then would-be ones.
    counts: [core::sync::atomic::AtomicU64; 8],
}

/// The counter of `reason`: open, half-open full, forced open, slow start.
#[cfg(target_has_atomic = "64")]
const fn reason_index(reason: RejectReason) -> usize {
    match reason {
        RejectReason::Open { .. } => 0,
        RejectReason::HalfOpenFull => 1,
        RejectReason::ForcedOpen => 2,
        RejectReason::SlowStart => 3,
    }
}

#[cfg(target_has_atomic = "64")]
impl<O> Rejections<O> {
    /// Counting, and passing transitions on to `inner`.
    pub fn new(inner: O) -> Self {
        Rejections {
            inner,
            counts: Default::default(),
        }
    }
    /// The observer transitions are passed on to.
    pub fn inner(&self) -> &O {
        &self.inner
    }
    fn count(&self, i: usize) -> u64 {
        self.counts
            .get(i)
            .map_or(0, |c| c.load(core::sync::atomic::Ordering::Relaxed))
    }
    /// Calls rejected for `reason` (its kind; an `Open` rejection's `retry_after` is not read).
    pub fn live(&self, reason: RejectReason) -> u64 {
        self.count(reason_index(reason))
    }
    /// Calls shadow mode admitted that the rules rejected for `reason`.
    pub fn shadow(&self, reason: RejectReason) -> u64 {
        self.count(4 + reason_index(reason))
    }
    /// Calls rejected, every reason.
    pub fn live_total(&self) -> u64 {
        (0..4).map(|i| self.count(i)).sum()
    }
    /// Would-be rejections, every reason.
    pub fn shadow_total(&self) -> u64 {
        (4..8).map(|i| self.count(i)).sum()
    }
}

#[cfg(target_has_atomic = "64")]
impl<O: Observer> Observer for Rejections<O> {
    #[inline]
    fn on_transition(&self, transition: Transition) {
        self.inner.on_transition(transition)
    }
    fn on_reject(&self, reason: RejectReason, shadow: bool) {
        let i = reason_index(reason) + if shadow { 4 } else { 0 };
        if let Some(c) = self.counts.get(i) {
            c.fetch_add(1, core::sync::atomic::Ordering::Relaxed);
        }
        self.inner.on_reject(reason, shadow)
    }
}

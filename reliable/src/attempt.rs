//! The fast path every kind of call shares: [`FirstAttempt`], a first attempt through a plainly
//! closed breaker with no bookkeeping but its permit. A success ends the call there; a failure
//! hands the call over to the core's call engine ([`reliable_core::engine`], driven by
//! `drive::Driven`), from the attempt's start and its permit, exactly where the engine would
//! be had it sent the attempt itself.

use crate::instance::Inner;
use crate::stats::Total;
use reliable_core::Instant;
use reliable_core::breaker::{Outcome, Permit};
use reliable_core::budget::Unlimited;
use reliable_core::outcome::ErrorClass;
use reliable_core::retry::RetryState;

/// How an attempt failed: its class, and its answer: an error, or an `Ok` its classifier read as
/// a failure (`None`: it timed out).
pub(crate) type Failure<T, E> = (ErrorClass, Option<Result<T, E>>);

/// The fast path's failed first attempt, handed to the engine: its start, its breaker permit,
/// when it failed and how.
pub(crate) type HandedOver<T, E> = (Instant, Option<Permit>, Instant, Failure<T, E>);

/// The first attempt of a call on the fast path (see `Inner::fast_first`): its permit and, with a
/// timeout or a deadline, when it started and its deadline. If the attempt fails the engine
/// goes on from it (`Call::resume`), where it would be had it sent the attempt itself; if it is
/// dropped (a panic, a cancelled future), the permit goes back as ignored.
#[derive(Debug)]
pub(crate) struct FirstAttempt<'r> {
    inner: &'r Inner,
    permit: Option<Permit>,
    /// The clock's reading when it started, with a timeout or a deadline (`Inner::eager_clock`);
    /// zero otherwise.
    started: Instant,
    /// When it is up; `Instant::MAX`: never.
    deadline: Instant,
    over: bool,
}

impl<'r> FirstAttempt<'r> {
    /// `None` when the fast path does not apply (the instance needs a full run, or the breaker is
    /// not plainly closed).
    #[inline(always)]
    pub fn start(inner: &'r Inner) -> Option<Self> {
        if !inner.fast_first {
            return None;
        }
        let permit = match &inner.breaker {
            Some(b) => Some(b.try_closed()?),
            None => None,
        };
        let (started, deadline) = if inner.eager_clock {
            Self::timed(inner)
        } else {
            (Instant::ZERO, Instant::MAX)
        };
        Some(FirstAttempt {
            inner,
            permit,
            started,
            deadline,
            over: false,
        })
    }

    /// With a timeout or a deadline: the time now, and the attempt's deadline. Out of line: the
    /// clock costs more than the call.
    #[inline(never)]
    fn timed(inner: &Inner) -> (Instant, Instant) {
        let now = inner.clock.now();
        (
            now,
            inner.retry.attempt_deadline(&Self::state(inner, now), now),
        )
    }

    /// The retry state of a call started at `now`: no budget on the fast path.
    #[inline]
    fn state(inner: &Inner, now: Instant) -> RetryState {
        inner.retry.start(now, &mut Unlimited)
    }

    /// When the attempt is up, if ever.
    #[inline]
    pub fn deadline(&self) -> Option<Instant> {
        (self.deadline != Instant::MAX).then_some(self.deadline)
    }

    /// The attempt succeeded: the call is over. Nothing on the fast path reads the time of a
    /// success (see `Inner::fast_first`): it is recorded at the attempt's start.
    #[inline(always)]
    pub fn succeeded(&mut self) {
        let inner = self.inner;
        if let (Some(b), Some(p)) = (&inner.breaker, self.permit.take()) {
            b.record(p, Outcome::Success, self.started);
        }
        self.over = true;
        inner.stats.bump(Total::Succeeded);
    }

    /// The attempt failed, seen at `now`: the call goes on in the engine, from the attempt's
    /// start (`now` when the clock was not read then) and its breaker permit, handed over.
    pub fn hand_over(&mut self, now: Instant) -> (Instant, Option<Permit>) {
        self.over = true;
        let started = if self.inner.eager_clock {
            self.started
        } else {
            now
        };
        (started, self.permit.take())
    }
}

impl Drop for FirstAttempt<'_> {
    fn drop(&mut self) {
        if self.over {
            return;
        }
        let inner = self.inner;
        if let (Some(b), Some(p)) = (&inner.breaker, self.permit.take()) {
            b.record(p, Outcome::Ignored, self.started);
        }
        inner.stats.bump(Total::Cancelled);
    }
}

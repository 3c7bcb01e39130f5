//! [`Reliable`]: one logical call's walk through the breaker, the retry policy and the budget,
//! with the attempts as futures and the waits on a [`Clock`].

use core::borrow::Borrow;
use core::cell::RefCell;
use core::future::{Future, poll_fn};
use core::pin::pin;
use core::task::Poll;

use critical_section::Mutex;
use reliable_core::breaker::{Breaker, Outcome, Permit, RejectReason};
use reliable_core::budget::Budget;
use reliable_core::outcome::ErrorClass;
use reliable_core::retry::{GiveUpReason, RetryDecision, RetryPolicy, RetryState};
use reliable_core::sample::splitmix64;
use reliable_core::{Duration, Instant};

use crate::clock::Clock;

/// Why a call returned no value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error<E> {
    /// The breaker is open: nothing was sent. `retry_after` says when it lets a call through
    /// again (`None`: opened by hand, until reset).
    Open {
        /// How long until the breaker lets a call through.
        retry_after: Option<Duration>,
    },
    /// The breaker shed the call without being open: its half-open probe slots are taken, or
    /// it is ramping up after closing (slow start).
    Refused {
        /// [`RejectReason::HalfOpenFull`] or [`RejectReason::SlowStart`].
        reason: RejectReason,
    },
    /// The last attempt timed out (its future was dropped) and the policy stopped.
    Timeout {
        /// Why there was no further attempt.
        reason: GiveUpReason,
        /// Attempts sent.
        attempts: u32,
    },
    /// The last attempt failed with `last` and the policy stopped (the error was not
    /// retryable, the attempts or the deadline ran out, or the budget refused a retry).
    GaveUp {
        /// Why there was no further attempt.
        reason: GiveUpReason,
        /// The last attempt's error.
        last: E,
        /// Attempts sent.
        attempts: u32,
    },
}

impl<E> Error<E> {
    /// How long until the breaker lets a call through, when it refused this one for being open.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Error::Open { retry_after } => *retry_after,
            _ => None,
        }
    }
}

/// What the decisions change, behind one lock.
struct Shared<Br, B> {
    breaker: Br,
    budget: B,
    /// The state of the random draws (backoff jitter): SplitMix64 over this counter.
    sample: u64,
}

/// A breaker, a retry policy and a retry budget around async calls; see the [crate docs](crate).
///
/// It owns its retry policy (`R = RetryPolicy`) or borrows it (`&'static RetryPolicy`, a policy
/// in flash: a few hundred bytes less RAM).
pub struct Reliable<Br, B, C, R = RetryPolicy> {
    shared: Mutex<RefCell<Shared<Br, B>>>,
    retry: R,
    clock: C,
}

impl<Br, B, C, R> core::fmt::Debug for Reliable<Br, B, C, R> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Reliable").finish_non_exhaustive()
    }
}

impl<Br: Breaker, B: Budget, C: Clock, R: Borrow<RetryPolicy>> Reliable<Br, B, C, R> {
    /// Calls through `breaker` (any reliable-core breaker: its window and probe slots are in
    /// its type), retried as `retry` says, retries paid from `budget`
    /// ([`Unlimited`](reliable_core::budget::Unlimited) for none), on `clock`. `seed` starts
    /// the backoff's random draws: give each device its own, or their retries synchronise.
    pub fn new(breaker: Br, retry: R, budget: B, clock: C, seed: u64) -> Self {
        Reliable {
            shared: Mutex::new(RefCell::new(Shared {
                breaker,
                budget,
                sample: seed,
            })),
            retry,
            clock,
        }
    }

    /// The retry policy.
    fn retry(&self) -> &RetryPolicy {
        self.retry.borrow()
    }

    /// Runs `f` with the breaker and the budget. The lock is held only for `f`, which never
    /// waits. (An observer of the breaker that called back into this `Reliable` from inside `f`
    /// would find it borrowed, and panic: the one panic path here.)
    fn with<T>(&self, f: impl FnOnce(&mut Shared<Br, B>) -> T) -> T {
        critical_section::with(|cs| f(&mut self.shared.borrow_ref_mut(cs)))
    }

    /// Reads the breaker (its state, its counts) as of now.
    pub fn breaker<T>(&self, read: impl FnOnce(&Br) -> T) -> T {
        self.with(|s| read(&s.breaker))
    }

    /// Reads the retry budget.
    pub fn budget<T>(&self, read: impl FnOnce(&B) -> T) -> T {
        self.with(|s| read(&s.budget))
    }

    /// The clock it reads.
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// Calls `f` (`|| async { … }`) until an attempt succeeds or the policy stops; `classify`
    /// says what each error means. Each attempt gets the retry policy's per-attempt timeout (cut
    /// to what is left of its deadline): on expiry the attempt's future is dropped, which
    /// cancels whatever it was doing, and the attempt counts as [`ErrorClass::Timeout`].
    ///
    /// Dropping the returned future (a `select` that took another branch, a timeout around the
    /// whole call) hands the attempt's breaker permit back unused and returns the retry's grant
    /// to the budget.
    pub async fn call<T, E, F, Fut>(
        &self,
        classify: impl Fn(&E) -> ErrorClass,
        mut f: F,
    ) -> Result<T, Error<E>>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let mut run = Run::start(self);
        loop {
            let deadline = run.admit()?;
            let result = within(&self.clock, deadline, f()).await;
            let (class, error) = match result {
                Some(Ok(value)) => {
                    run.succeeded();
                    return Ok(value);
                }
                Some(Err(e)) => (classify(&e), Some(e)),
                None => (ErrorClass::Timeout, None),
            };
            match run.failed(class) {
                Ok(at) => self.clock.sleep_until(at).await,
                Err(reason) => {
                    let attempts = run.attempts;
                    return Err(match error {
                        Some(last) => Error::GaveUp {
                            reason,
                            last,
                            attempts,
                        },
                        None => Error::Timeout { reason, attempts },
                    });
                }
            }
        }
    }
}

/// One call in progress. Dropped unfinished (the call's future was dropped), it hands the
/// permit back as ignored and abandons the request, so the budget gets its grant back.
struct Run<'r, Br: Breaker, B: Budget, C: Clock, R: Borrow<RetryPolicy>> {
    rel: &'r Reliable<Br, B, C, R>,
    state: RetryState,
    permit: Option<Permit>,
    attempts: u32,
    finished: bool,
}

impl<'r, Br: Breaker, B: Budget, C: Clock, R: Borrow<RetryPolicy>> Run<'r, Br, B, C, R> {
    fn start(rel: &'r Reliable<Br, B, C, R>) -> Self {
        let now = rel.clock.now();
        let state = rel.with(|s| rel.retry().start(now, &mut s.budget));
        Run {
            rel,
            state,
            permit: None,
            attempts: 0,
            finished: false,
        }
    }

    /// The breaker admits the next attempt: when it must be over.
    fn admit<E>(&mut self) -> Result<Instant, Error<E>> {
        let rel = self.rel;
        let now = rel.clock.now();
        let acquired = rel.with(|s| s.breaker.try_acquire(now));
        match acquired {
            Ok(permit) => {
                self.permit = Some(permit);
                self.attempts = self.attempts.saturating_add(1);
                Ok(rel.retry().attempt_deadline(&self.state, now))
            }
            Err(rejection) => {
                self.finish(now);
                Err(match rejection.reason {
                    RejectReason::Open { retry_after } => Error::Open {
                        retry_after: Some(retry_after),
                    },
                    RejectReason::ForcedOpen => Error::Open { retry_after: None },
                    reason => Error::Refused { reason },
                })
            }
        }
    }

    fn succeeded(&mut self) {
        let rel = self.rel;
        let now = rel.clock.now();
        let permit = self.permit.take();
        rel.with(|s| {
            if let Some(permit) = permit {
                s.breaker.record(permit, Outcome::Success, now);
            }
            rel.retry().on_success(&mut self.state, now, &mut s.budget);
        });
        self.finished = true;
    }

    /// The attempt failed with `class`: when to send the next, or why not.
    fn failed(&mut self, class: ErrorClass) -> Result<Instant, GiveUpReason> {
        let rel = self.rel;
        let now = rel.clock.now();
        let permit = self.permit.take();
        let decision = rel.with(|s| {
            if let Some(permit) = permit {
                s.breaker.record(permit, Outcome::from(class), now);
            }
            s.sample = splitmix64(s.sample);
            let sample = s.sample;
            rel.retry()
                .on_failure_with(&mut self.state, class, now, &mut s.budget, sample)
        });
        match decision {
            RetryDecision::RetryAt(at) => Ok(at),
            RetryDecision::GiveUp(reason) => {
                self.finished = true;
                Err(reason)
            }
        }
    }

    /// Ends the call early: the permit back unused, the retry's grant back to the budget.
    fn finish(&mut self, now: Instant) {
        let rel = self.rel;
        let permit = self.permit.take();
        rel.with(|s| {
            if let Some(permit) = permit {
                s.breaker.record(permit, Outcome::Ignored, now);
            }
            rel.retry().abandon(&mut self.state, now, &mut s.budget);
        });
        self.finished = true;
    }
}

impl<Br: Breaker, B: Budget, C: Clock, R: Borrow<RetryPolicy>> Drop for Run<'_, Br, B, C, R> {
    fn drop(&mut self) {
        if !self.finished {
            let now = self.rel.clock.now();
            self.finish(now);
        }
    }
}

/// Runs `fut` until `deadline` on `clock`: its output, or `None` once the deadline passes, in
/// which case `fut` has been dropped (cancelled) when this returns.
async fn within<C: Clock, F: Future>(clock: &C, deadline: Instant, fut: F) -> Option<F::Output> {
    if deadline == Instant::MAX {
        return Some(fut.await);
    }
    let mut fut = pin!(fut);
    let mut timer = pin!(clock.sleep_until(deadline));
    poll_fn(|cx| {
        if let Poll::Ready(value) = fut.as_mut().poll(cx) {
            return Poll::Ready(Some(value));
        }
        timer.as_mut().poll(cx).map(|()| None)
    })
    .await
}

//! An instance's layers as the core engine's [`Shared`] state, and what a face driving the engine
//! needs around it: the engine's notes reported to the observers and counted in the stats, its
//! end turned into the call's [`Error`], and a guard that cancels a call dropped unfinished.
//!
//! The engine ([`reliable_core::engine`]) decides every step of a call; a face here only sends
//! the attempts it asks for, keeps its timers and hands the answers back.

use crate::attempt::HandedOver;
use crate::classify::Classify;
use crate::error::{Error, ShedReason};
#[cfg(feature = "fleet")]
use crate::fleet::FleetGates;
use crate::instance::{Inner, Scope};
use crate::observer::{CallEnd, CallOutcome, NotSent};
use crate::sleep::SleepFuture;
use crate::stats::Total;
use reliable_core::Instant;
use reliable_core::breaker::{Outcome, Permit, RejectReason, Rejection};
use reliable_core::budget::{Budget, Unlimited};
use reliable_core::engine::{
    Action, BreakerScope, Call, End, Ended, Input, Note, Plan, Refusal, SampleFor, Shared,
};
use reliable_core::hedge::Hedger;
use reliable_core::limit::{Limiter, RateLimiter};
use reliable_core::outcome::ErrorClass;
use reliable_core::retry::GiveUpReason;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Mutex, MutexGuard};
use std::task::Poll;

/// A poisoned lock only means another call panicked while holding it; every state is updated in
/// single steps, so it is still consistent.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// One call's view of an instance's layers: the instance's shared state, whether this face
/// hedges, and what the notes so far mean for the next one.
#[derive(Debug)]
pub(crate) struct Layers<'r> {
    pub inner: &'r Inner,
    /// The face sends hedges (an async call); a blocking call has no hedger.
    hedges: bool,
    /// The last note was a refusal: a retry noted next waits it out (it is no retry sent).
    refused: AtomicBool,
}

impl<'r> Layers<'r> {
    pub fn new(inner: &'r Inner, hedges: bool) -> Self {
        Layers {
            inner,
            hedges,
            refused: AtomicBool::new(false),
        }
    }

    /// The instance's plan for a call.
    pub fn plan(&self) -> Plan {
        self.plan_with(self.inner.retry)
    }

    /// The instance's plan for a call, with another retry policy.
    pub fn plan_with(&self, retry: reliable_core::retry::RetryPolicy) -> Plan {
        let i = self.inner;
        let plan = Plan::new(retry).scope(match i.scope {
            Scope::PerAttempt => BreakerScope::PerAttempt,
            Scope::PerCall => BreakerScope::PerCall,
        });
        match i.nesting {
            Some(n) => plan.nesting(n),
            None => plan,
        }
        .idempotency(i.idempotency)
        .copy_timeout(i.copy_timeout)
    }
}

impl Layers<'_> {
    /// The fleet's breaker and budget, when the instance has them instead of local ones (a
    /// local one is asked first: its path does not look here).
    #[inline]
    fn fleet(&self) -> Option<&FleetGates> {
        #[cfg(feature = "fleet")]
        return self.inner.fleet.as_deref();
        #[cfg(not(feature = "fleet"))]
        None
    }
}

#[cfg(not(feature = "fleet"))]
/// Without the feature: no fleet gates (the calls on it are never made).
enum FleetGates {}

#[cfg(not(feature = "fleet"))]
impl FleetGates {
    fn acquire(&self, _: Instant) -> Option<Result<Permit, Rejection>> {
        match *self {}
    }
    fn record(&self, _: Permit, _: Outcome) {
        match *self {}
    }
    fn refuses(&self) -> Option<reliable_core::Duration> {
        match *self {}
    }
    fn budget(&self) -> Option<&Mutex<Unlimited>> {
        match *self {}
    }
}

impl Shared for Layers<'_> {
    fn breaker_acquire(&self, now: Instant) -> Option<Result<Permit, Rejection>> {
        match &self.inner.breaker {
            Some(b) => Some(b.acquire(now)),
            None => self.fleet()?.acquire(now),
        }
    }
    fn breaker_record(&self, permit: Permit, outcome: Outcome, now: Instant) {
        match &self.inner.breaker {
            Some(b) => b.record(permit, outcome, now),
            None => {
                if let Some(f) = self.fleet() {
                    f.record(permit, outcome);
                }
            }
        }
    }
    fn breaker_refuses(&self, now: Instant) -> Option<reliable_core::Duration> {
        let Some(b) = self.inner.breaker.as_ref() else {
            return self.fleet()?.refuses();
        };
        match b.retry_after(now) {
            Some(after) => Some(after.into()),
            None if b.state(now) == reliable_core::breaker::State::ForcedOpen => {
                Some(reliable_core::Duration::MAX)
            }
            None => None,
        }
    }
    fn budget<R>(&self, f: impl FnOnce(&mut dyn Budget) -> R) -> R {
        let i = self.inner;
        match (&i.ledger, &i.budget) {
            (Some(l), _) if i.ledger_retries => f(&mut *lock(l)),
            (_, Some(b)) => f(&mut *lock(b)),
            (_, None) => match self.fleet().and_then(|g| g.budget()) {
                Some(b) => f(&mut *lock(b)),
                None => f(&mut Unlimited),
            },
        }
    }
    fn throttle<R>(
        &self,
        f: impl FnOnce(&mut dyn reliable_core::throttle::AnyThrottle) -> R,
    ) -> Option<R> {
        self.inner.throttle.as_ref().map(|t| f(&mut *lock(t)))
    }
    fn ledger<R>(
        &self,
        f: impl FnOnce(&mut dyn reliable_core::ledger::AnyLedger) -> R,
    ) -> Option<R> {
        self.inner.ledger.as_ref().map(|l| f(&mut *lock(l)))
    }
    fn hedger<R>(&self, f: impl FnOnce(&mut Hedger) -> R) -> Option<R> {
        let h = self.inner.hedger.as_ref().filter(|_| self.hedges)?;
        Some(f(&mut lock(h)))
    }
    fn limiter<R>(&self, f: impl FnOnce(&mut Limiter) -> R) -> Option<R> {
        self.inner.limiter.as_ref().map(|l| f(&mut lock(l)))
    }
    fn rate<R>(&self, f: impl FnOnce(&mut RateLimiter) -> R) -> Option<R> {
        self.inner.rate.as_ref().map(|r| f(&mut lock(r)))
    }
    fn sample(&self, what: SampleFor) -> u64 {
        match what {
            SampleFor::Throttle => self.inner.throttle_sample(),
            SampleFor::Backoff => self.inner.rng.next_u64(),
        }
    }
    fn note(&self, note: Note) {
        let i = self.inner;
        let name = &*i.name;
        let refused = self.refused.swap(false, Relaxed);
        match note {
            Note::Hedge { n } => {
                i.stats.bump(Total::Hedges);
                for o in i.observers.iter() {
                    o.on_hedge(name, n);
                    o.on_attempt(name, n);
                }
            }
            Note::NoHedge(r) => {
                for o in i.observers.iter() {
                    o.on_hedge_refused(name, not_sent(r));
                }
            }
            Note::Lost { n } => {
                for o in i.observers.iter() {
                    o.on_attempt_cancelled(name, n);
                }
            }
            Note::Refused(r) => {
                self.refused.store(true, Relaxed);
                for o in i.observers.iter() {
                    o.on_reject(name, not_sent(r));
                }
            }
            Note::Retry {
                after,
                class,
                attempts,
            } => {
                if !refused {
                    i.stats.bump(Total::Retries);
                }
                for o in i.observers.iter() {
                    o.on_retry(name, attempts, class, after.into());
                }
            }
            Note::Limit { from, to } => {
                for o in i.observers.iter() {
                    o.on_limit_change(name, from, to);
                }
            }
            Note::Ledger { kind, granted } => {
                for o in i.observers.iter() {
                    o.on_ledger(name, kind, granted);
                }
            }
            Note::Ended { n, class } => {
                for o in i.observers.iter() {
                    o.on_attempt_end(name, n, class);
                }
            }
            // Reported with the call's end, which knows the attempts.
            Note::GaveUp(_) => {}
        }
    }
}

/// A local refusal as the observers and errors name it.
pub(crate) fn not_sent(r: Refusal) -> NotSent {
    match r {
        Refusal::Breaker(reason) => match reason {
            RejectReason::Open { retry_after } => NotSent::Open {
                retry_after: Some(retry_after.into()),
            },
            RejectReason::ForcedOpen => NotSent::Open { retry_after: None },
            RejectReason::HalfOpenFull => NotSent::Rejected(ShedReason::HalfOpenFull),
            RejectReason::SlowStart => NotSent::Rejected(ShedReason::SlowStart),
        },
        Refusal::Throttle(shed) => NotSent::Rejected(ShedReason::Throttled {
            probability: f64::from(shed.probability_ppm) / 1e6,
        }),
        Refusal::Ledger(d) => NotSent::Rejected(ShedReason::Ledger(d)),
        Refusal::Limit(r) => NotSent::Rejected(ShedReason::Limit { limit: r.limit }),
        Refusal::Rate(r) => NotSent::Rejected(ShedReason::RateLimited {
            retry_after: r.retry_after.into(),
        }),
    }
}

/// A call driven through the engine, counted and reported when it ends; dropped unfinished (a
/// panic in the work, a future dropped), it is cancelled: what its copies hold goes back.
pub(crate) struct Driven<'a, 'r, const C: usize> {
    pub call: Call<'a, Layers<'r>, C>,
    layers: &'a Layers<'r>,
    started: Instant,
    over: bool,
    /// The current attempt's first copy, and whether a hedge of it was sent.
    primary: u32,
    raced: bool,
}

impl<'a, 'r, const C: usize> Driven<'a, 'r, C> {
    pub fn new(call: Call<'a, Layers<'r>, C>, layers: &'a Layers<'r>, started: Instant) -> Self {
        Driven {
            call,
            layers,
            started,
            over: false,
            primary: 0,
            raced: false,
        }
    }

    /// A call's start through the engine: from the first attempt the face already sent on its
    /// fast path (`first`: when the call started, its breaker permit, when the attempt failed,
    /// and how) or from nothing. Returns the driven call, the time and the first attempt's error.
    pub fn begin<T, E>(
        plan: &'a Plan,
        layers: &'a Layers<'r>,
        first: Option<HandedOver<T, E>>,
    ) -> (Self, Instant, Option<Result<T, E>>) {
        match first {
            Some((started, permit, now, (class, answer))) => {
                let call = Call::resume(plan, layers, started, permit);
                let mut run = Driven::new(call, layers, started);
                run.call.handle(
                    now,
                    Input::Classified {
                        n: 1,
                        class: Some(class),
                    },
                );
                (run, now, answer)
            }
            None => {
                let now = layers.inner.clock.now();
                (
                    Driven::new(Call::start(plan, layers, now), layers, now),
                    now,
                    None,
                )
            }
        }
    }

    /// Runs the call to its end from `now` (`latest`: the answer of a first attempt already
    /// failed): each copy the engine sends is the future `send(n, deadline)` makes, raced
    /// against the other copies of its attempt; a copy the engine cancels (it lost, or timed
    /// out) is dropped, which cancels it. Each answer is read by `classify`. Answers the
    /// engine's end and what the call returns (see [`end`](Self::end)).
    pub async fn race<T, E, K, Fut>(
        &mut self,
        now: Instant,
        latest: Option<Result<T, E>>,
        send: impl FnMut(u32, Option<Instant>) -> Fut,
        classify: &K,
    ) -> (End, Result<T, Error<E>>)
    where
        K: Classify<E, T> + ?Sized,
        Fut: Future<Output = Result<T, E>>,
    {
        self.race_within(now, latest, send, classify, None).await
    }

    /// [`race`](Self::race), taking a copy as timed out only `grace` after its deadline if
    /// nothing below answered by then (a timeout below, armed from the same deadline, reports
    /// it first).
    pub async fn race_within<T, E, K, Fut>(
        &mut self,
        mut now: Instant,
        mut latest: Option<Result<T, E>>,
        mut send: impl FnMut(u32, Option<Instant>) -> Fut,
        classify: &K,
        grace: Option<reliable_core::Duration>,
    ) -> (End, Result<T, Error<E>>)
    where
        K: Classify<E, T> + ?Sized,
        Fut: Future<Output = Result<T, E>>,
    {
        let inner = self.layers.inner;
        // The copies in flight (boxed, so that copies can come and go).
        let mut flying: Vec<(u32, Option<Instant>, Pin<Box<Fut>>)> = Vec::new();
        let mut timer: Option<(Instant, SleepFuture)> = None;
        std::future::poll_fn(|cx| {
            loop {
                while let Some(action) = self.call.poll() {
                    match action {
                        Action::Send { n, deadline, hedge } => {
                            self.sending(n, hedge);
                            flying.push((n, deadline, Box::pin(send(n, deadline))));
                        }
                        Action::Cancel { n, .. } => flying.retain(|(m, ..)| *m != n),
                        Action::Done(end) => {
                            self.race_won(end);
                            flying.clear();
                            let result = self.end(end, now, latest.take());
                            return Poll::Ready((end, result));
                        }
                    }
                }
                let answered = flying
                    .iter_mut()
                    .enumerate()
                    .find_map(|(i, (n, _, fut))| match fut.as_mut().poll(cx) {
                        Poll::Pending => None,
                        Poll::Ready(result) => Some((i, *n, result)),
                    });
                if let Some((i, n, result)) = answered {
                    flying.remove(i);
                    let class = classify.outcome(result.as_ref());
                    latest = Some(result);
                    now = inner.clock.now();
                    self.call.handle(now, Input::Classified { n, class });
                    continue;
                }
                let Some(mut wake) = self.call.poll_timeout() else {
                    return Poll::Pending;
                };
                if let Some(grace) = grace
                    && flying.iter().any(|(_, due, _)| *due == Some(wake))
                {
                    wake = wake.saturating_add(grace);
                }
                now = inner.clock.now();
                if now < wake {
                    if timer.as_ref().is_none_or(|(due, _)| *due != wake) {
                        timer = Some((wake, inner.sleep.sleep((wake - now).into())));
                    }
                    if let Some((_, t)) = &mut timer
                        && t.as_mut().poll(cx).is_pending()
                    {
                        return Poll::Pending;
                    }
                    // The timer says it is time, whatever the clock reads.
                    now = now.max(wake);
                }
                timer = None;
                // Copies past their deadline are dropped (cancelled) first, as their timers
                // fired; the engine then takes them as timeouts.
                flying.retain(|(_, due, _)| due.is_none_or(|due| now < due));
                self.call.handle(now, Input::Tick);
            }
        })
        .await
    }

    /// Copy `n` (a `hedge` of the current attempt, or its first copy) is being sent: an
    /// attempt's first copy is reported to the observers.
    pub fn sending(&mut self, n: u32, hedge: bool) {
        if !hedge {
            (self.primary, self.raced) = (n, false);
            let inner = self.layers.inner;
            for o in inner.observers.iter() {
                o.on_attempt(&inner.name, n);
            }
        }
        self.raced |= hedge;
    }

    /// The call ended `end`: if the last attempt raced a hedge, the winner is reported, and
    /// counted if it was a hedge.
    pub fn race_won(&self, end: End) {
        let inner = self.layers.inner;
        let (primary, raced) = (self.primary, self.raced);
        if let Ended::Ok { n } = end.result
            && raced
        {
            if n != primary {
                inner.stats.bump(Total::HedgesWon);
            }
            for o in inner.observers.iter() {
                o.on_hedge_won(&inner.name, n, n != primary);
            }
        }
    }

    /// The time now.
    pub fn now(&self) -> Instant {
        self.layers.inner.clock.now()
    }

    /// The call ended with `end` at `now`: counted, reported, and turned into what the call
    /// returns, `latest` being the last copy's answer: the winner's value, an error, or an `Ok`
    /// the classifier read as a failure, which a call that gives up on it returns as it came
    /// (`None` when it timed out).
    pub fn end<T, E>(
        &mut self,
        end: End,
        now: Instant,
        latest: Option<Result<T, E>>,
    ) -> Result<T, Error<E>> {
        self.over = true;
        let i = self.layers.inner;
        let attempts = end.attempts;
        let timed_out = matches!(end.last, Some((_, Some(ErrorClass::Timeout))));
        // The last answer a timeout: no answer of its own (an earlier copy's is not the last).
        let latest = if timed_out { None } else { latest };
        let (result, outcome, total) = match end.result {
            Ended::Ok { .. } => match latest {
                Some(Ok(v)) => (Ok(v), CallOutcome::Success, Total::Succeeded),
                // A success with no value: the engine never ends so.
                _ => (
                    Err(Error::Timeout { attempts }),
                    CallOutcome::Timeout,
                    Total::Failed,
                ),
            },
            Ended::GaveUp(reason) => {
                for o in i.observers.iter() {
                    o.on_give_up(&i.name, attempts, reason.name());
                }
                match (reason, latest) {
                    // The last answer an `Ok` read as a failure: the call returns it as it came
                    // (the service's last answer), counted as the failure it was.
                    (reason, Some(Ok(v))) => match reason {
                        GiveUpReason::Budget(_) => (Ok(v), CallOutcome::Rejected, Total::Refused),
                        _ => (Ok(v), CallOutcome::GaveUp, Total::Failed),
                    },
                    (_, None) => (
                        Err(Error::Timeout { attempts }),
                        CallOutcome::Timeout,
                        if matches!(reason, GiveUpReason::Budget(_)) {
                            Total::Refused
                        } else {
                            Total::Failed
                        },
                    ),
                    (GiveUpReason::Budget(d), Some(Err(last))) => (
                        Err(Error::Rejected {
                            why: ShedReason::Budget(d),
                            last: Some(last),
                        }),
                        if timed_out {
                            CallOutcome::Timeout
                        } else {
                            CallOutcome::Rejected
                        },
                        Total::Refused,
                    ),
                    (reason, Some(Err(last))) => (
                        Err(Error::GaveUp {
                            reason,
                            last,
                            attempts,
                        }),
                        if timed_out {
                            CallOutcome::Timeout
                        } else {
                            CallOutcome::GaveUp
                        },
                        Total::Failed,
                    ),
                }
            }
            Ended::Refused(r) => {
                let refusal = not_sent(r);
                let outcome = match refusal {
                    NotSent::Open { .. } => CallOutcome::Open,
                    NotSent::Rejected(_) => CallOutcome::Rejected,
                };
                let last = latest.and_then(Result::err);
                (Err(refusal.into_error(last)), outcome, Total::Refused)
            }
            Ended::Cancelled => (
                Err(Error::Timeout { attempts }),
                CallOutcome::Cancelled,
                Total::Cancelled,
            ),
        };
        i.stats.bump(total);
        self.call_end(outcome, attempts, now);
        result
    }

    fn call_end(&self, outcome: CallOutcome, attempts: u32, now: Instant) {
        let i = self.layers.inner;
        if i.observers.is_empty() {
            return;
        }
        let end = CallEnd {
            outcome,
            attempts,
            elapsed: now.saturating_duration_since(self.started).into(),
        };
        for o in i.observers.iter() {
            o.on_call_end(&i.name, &end);
        }
    }
}

impl<const C: usize> Drop for Driven<'_, '_, C> {
    fn drop(&mut self) {
        if self.over {
            return;
        }
        let now = self.now();
        self.call.handle(now, Input::Cancel);
        while self.call.poll().is_some() {}
        self.layers.inner.stats.bump(Total::Cancelled);
        self.call_end(CallOutcome::Cancelled, self.call.attempts(), now);
    }
}

//! The attempt machinery every kind of call shares: [`Run`], one logical call's walk through the
//! throttle, the breaker, the retry policy and the budget.
//!
//! A layer that sends its attempts itself (a tower service, a batch scheduler) drives one
//! directly:
//!
//! 1. [`Reliable::start`] once: with a per-call breaker, the throttle and the breaker admit it;
//! 2. [`Run::admit`] before each attempt: with a per-attempt breaker (the default), the throttle
//!    and then the breaker admit it (every attempt is a request the throttle counts, as the
//!    answers it records are; a half-open probe also draws from the ledger), then the concurrency
//!    limit and the rate limit; the answer is the time the attempt may take; a refusal ends the
//!    call unless the policy waits on refusals;
//! 3. after the attempt, [`Run::succeeded`], or [`Run::failed`] with the error's class, which
//!    answers [`Step::Retry`] (wait, then admit again) or [`Step::Stop`].
//!
//! A `Run` sends one copy of each attempt: hedging is the call engine's
//! ([`reliable_core::engine`]), which [`Reliable::call`](crate::Reliable::call) and
//! [`call_blocking`](crate::Reliable::call_blocking) drive.
//!
//! A `Run` dropped before it finished (the call future dropped by a timeout, a `select!` or an
//! abort; a panic unwinding) is a **cancelled** call: its permits go back to the breaker as
//! `Outcome::Ignored`, so a cancelled half-open probe
//! frees its slot at once, and a retry it held goes back to the budget unused.
//!
//! ```
//! use reliable::attempt::Step;
//! use reliable::Reliable;
//! use reliable_core::outcome::ErrorClass;
//!
//! let rel = Reliable::builder("svc").no_backoff().attempts(2).build()?;
//! let mut run = rel.start().expect("closed breaker");
//! run.admit().expect("admitted");
//! assert!(matches!(run.failed(ErrorClass::Transient), Step::Retry { .. }));
//! run.admit().expect("admitted");
//! run.succeeded();
//! assert_eq!(rel.snapshot().retries, 1);
//! # Ok::<(), reliable::BuildError>(())
//! ```

use crate::error::{Error, ShedReason};
use crate::observer::{CallEnd, CallOutcome, NotSent};
use crate::reliable::{Inner, Reliable, Scope};
use crate::stats::Total;
use reliable_core::Instant;
use reliable_core::answer::{Answer, Refuser};
use reliable_core::breaker::{Outcome, Permit, RejectReason};
use reliable_core::budget::Unlimited;
use reliable_core::ledger::{Draw, Extra};
use reliable_core::limit::{Completion, LimitPermit};
use reliable_core::outcome::{AttemptOutcome, ErrorClass};
use reliable_core::retry::{GiveUpReason, RetryDecision, RetryState};
use std::sync::MutexGuard;
use std::time::Duration;

/// What to do after a failed attempt.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Step {
    /// Wait `after` (it may be zero), then [`admit`](Run::admit) the next attempt.
    Retry {
        /// The wait: the backoff's, or the server's delay if longer.
        after: Duration,
    },
    /// The call is over; this is why.
    Stop(Stop),
}

/// Why a call stopped after a failed attempt.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Stop {
    /// The retry policy gave up (fatal error, "don't retry", attempt limit, deadline).
    GaveUp(GiveUpReason),
    /// The retry budget refused the retry.
    Rejected(ShedReason),
}

impl Stop {
    /// The error a call returns when it stops after an attempt that ended with `last` (`None`:
    /// the attempt timed out).
    pub fn into_error<E>(self, last: Option<E>, attempts: u32) -> Error<E> {
        match (self, last) {
            (_, None) => Error::Timeout { attempts },
            (Stop::Rejected(why), Some(e)) => Error::Rejected { why, last: Some(e) },
            (Stop::GaveUp(reason), Some(last)) => Error::GaveUp {
                reason,
                last,
                attempts,
            },
        }
    }
}

impl NotSent {
    /// The error a call returns when it is refused, `last` being the error of the attempt before
    /// (a refused retry), if any.
    pub fn into_error<E>(self, last: Option<E>) -> Error<E> {
        match self {
            NotSent::Open { retry_after } => Error::Open { retry_after },
            NotSent::Rejected(why) => Error::Rejected { why, last },
        }
    }

    /// Who refused, in the core's vocabulary.
    pub const fn refuser(self) -> Refuser {
        match self {
            NotSent::Open { .. } => Refuser::Breaker,
            NotSent::Rejected(why) => why.refuser(),
        }
    }

    fn from_breaker(reason: RejectReason) -> Self {
        match reason {
            RejectReason::Open { retry_after } => NotSent::Open {
                retry_after: Some(retry_after.into()),
            },
            RejectReason::ForcedOpen => NotSent::Open { retry_after: None },
            RejectReason::HalfOpenFull => NotSent::Rejected(ShedReason::HalfOpenFull),
            RejectReason::SlowStart => NotSent::Rejected(ShedReason::SlowStart),
        }
    }
}

/// One logical call in progress. Made by [`Reliable::start`]; see the [module docs](self).
#[derive(Debug)]
#[must_use = "a Run dropped unfinished counts as a cancelled call"]
pub struct Run<'r> {
    inner: &'r Inner,
    state: RetryState,
    /// When the call started, if the clock was read then.
    started: Option<Instant>,
    /// This call has read the clock: from now on every decision uses a fresh reading.
    timed: bool,
    /// A reading taken a moment ago that the next decision may use instead of reading again.
    fresh: Option<Instant>,
    /// The reading that admitted the current attempt.
    admitted: Option<Instant>,
    call_permit: Option<Permit>,
    attempt_permit: Option<Permit>,
    /// The attempt's slot under the concurrency limit.
    limit_permit: Option<LimitPermit>,
    /// The attempt's draw from the ledger (a probe or a hedge; retries draw through the budget).
    draw: Option<Draw>,
    /// The attempt's number.
    current: u32,
    attempts: u32,
    finished: bool,
    /// The breaker refused the next attempt and the policy waits it out: for how long.
    wait: Option<Duration>,
}

/// Runs `f` with the instance's budget (the ledger when there is one), or with no budget
/// (monomorphised for each, so the common case without a budget costs nothing).
macro_rules! with_budget {
    ($inner:expr, |$b:ident| $body:expr) => {
        match (&$inner.ledger, &$inner.budget) {
            (Some(m), _) => {
                let $b = &mut *lock(m);
                $body
            }
            (None, Some(m)) => {
                let $b = &mut *lock(m);
                $body
            }
            (None, None) => {
                let $b = &mut Unlimited;
                $body
            }
        }
    };
}

/// What an attempt holds until it ends.
#[derive(Debug)]
pub(crate) struct Sent {
    breaker: Option<Permit>,
    limit: Option<LimitPermit>,
    draw: Option<Draw>,
    at: Option<Instant>,
}

/// What a breaker records for an attempt that ended so.
fn breaker_outcome(end: AttemptOutcome) -> Outcome {
    match end {
        AttemptOutcome::Success => Outcome::Success,
        AttemptOutcome::Failed(class) => Outcome::from(class),
        AttemptOutcome::Cancelled => Outcome::Ignored,
    }
}

/// Hands back what one attempt held: its breaker permit, its slot under the limit (read through
/// the answer table's limit column) and its ledger draw; its end to the hedger (the core's rule:
/// `Hedger::copy_ended`), but for a cancelled attempt, which may never have been sent.
fn settle(inner: &Inner, sent: Sent, end: AttemptOutcome, now: Instant) {
    // The limit first: it admitted the attempt after the breaker did, so it sits inside it, and
    // an answer reaches the inner piece first (as in a tower stack and the simulator's).
    if let Some(p) = sent.limit {
        release_limit(inner, p, Completion::from(end), now);
    }
    if let (Some(b), Some(p)) = (&inner.breaker, sent.breaker) {
        b.record(p, breaker_outcome(end), now);
    }
    if let (Some(l), Some(d)) = (&inner.ledger, sent.draw) {
        lock(l).settle(d, now);
    }
    if let (Some(h), Some(at), false) = (&inner.hedger, sent.at, end == AttemptOutcome::Cancelled) {
        lock(h).copy_ended(now.saturating_duration_since(at), end);
    }
}

/// Releases a slot under the concurrency limit, reporting a move of the limit.
fn release_limit(inner: &Inner, permit: LimitPermit, completion: Completion, now: Instant) {
    let Some(l) = &inner.limiter else {
        return;
    };
    let (from, to) = {
        let mut l = lock(l);
        let from = l.limit();
        l.release(permit, completion, now);
        (from, l.limit())
    };
    if from != to {
        for o in inner.observers.iter() {
            o.on_limit_change(&inner.name, from, to);
        }
    }
}

/// Reports a ledger's answer to an extra attempt of `kind`.
fn ledger_answer(inner: &Inner, kind: Extra, granted: bool) {
    for o in inner.observers.iter() {
        o.on_ledger(&inner.name, kind, granted);
    }
}

/// A poisoned lock only means another call panicked while holding it; the budget and throttle
/// states are updated in single steps, so they are still consistent.
fn lock<T>(m: &std::sync::Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Reliable {
    /// Starts a call: with a per-call breaker, the adaptive throttle and the breaker decide
    /// whether it may go at all. Most code calls [`call`](Self::call) instead.
    #[inline]
    pub fn start(&self) -> Result<Run<'_>, NotSent> {
        let inner = &*self.inner;
        let now = inner.eager_clock.then(|| inner.clock.now());
        if inner.scope == Scope::PerCall
            && let (Some(t), Some(now)) = (&inner.throttle, now)
            && let Err(throttled) = lock(t).try_acquire_with(now, inner.throttle_sample())
        {
            let why = ShedReason::Throttled {
                probability: f64::from(throttled.probability_ppm) / 1e6,
            };
            let span = (Some(now), now);
            return Err(refuse(inner, NotSent::Rejected(why), 0, span));
        }
        let state = with_budget!(inner, |b| inner
            .retry
            .start(now.unwrap_or(Instant::ZERO), b));
        let mut run = Run {
            inner,
            state,
            started: now,
            timed: now.is_some(),
            fresh: now,
            admitted: None,
            call_permit: None,
            attempt_permit: None,
            limit_permit: None,
            draw: None,
            current: 0,
            attempts: 0,
            finished: false,
            wait: None,
        };
        if inner.scope == Scope::PerCall {
            run.call_permit = run.acquire(now)?;
        }
        Ok(run)
    }
}

/// How an attempt failed: its class, and its error (`None`: it timed out).
pub(crate) type Failure<E> = (ErrorClass, Option<E>);

/// The first attempt of a call on the fast path (see `Inner::fast_first`): its permit and, with a
/// timeout or a deadline, when it started and its deadline. If the attempt fails it becomes a
/// full [`Run`], the same one the slow path would have at that point; if it is dropped (a panic,
/// a cancelled future), the permit goes back as ignored.
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
    /// success (see `Inner::success_needs_time`): it is recorded at the attempt's start.
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

/// Counts and reports a refusal; returns it.
fn refuse(inner: &Inner, refusal: NotSent, attempts: u32, span: Span) -> NotSent {
    inner.stats.bump(Total::Refused);
    for o in inner.observers.iter() {
        o.on_reject(&inner.name, refusal);
    }
    let outcome = match refusal {
        NotSent::Open { .. } => CallOutcome::Open,
        NotSent::Rejected(_) => CallOutcome::Rejected,
    };
    end(inner, outcome, attempts, span);
    refusal
}

/// When a call started (if it read the clock then) and when it ended.
type Span = (Option<Instant>, Instant);

fn end(inner: &Inner, outcome: CallOutcome, attempts: u32, (started, now): Span) {
    if inner.observers.is_empty() {
        return;
    }
    let elapsed = match started {
        Some(t0) => (now - t0).into(),
        None => Duration::ZERO,
    };
    let end = CallEnd {
        outcome,
        attempts,
        elapsed,
    };
    for o in inner.observers.iter() {
        o.on_call_end(&inner.name, &end);
    }
}

impl Run<'_> {
    /// A fresh reading of the clock if this call uses the time, else `None`.
    #[inline]
    fn time(&mut self) -> Option<Instant> {
        if !self.timed {
            return None;
        }
        Some(self.fresh.take().unwrap_or_else(|| self.inner.clock.now()))
    }

    fn now(&mut self) -> Instant {
        self.timed = true;
        self.fresh.take().unwrap_or_else(|| self.inner.clock.now())
    }

    /// The time a success is recorded at: a fresh reading when something reads it (see
    /// `Inner::success_needs_time`) or a half-open probe ends (its lease is judged at the time it
    /// returns), else the reading that admitted the attempt, which a closed breaker without timed
    /// rules does not look at (the breaker keeps the latest time it has seen).
    #[inline]
    fn success_time(&mut self) -> Option<Instant> {
        let probe = |p: &Option<Permit>| p.as_ref().is_some_and(Permit::is_probe);
        if self.inner.success_needs_time || probe(&self.attempt_permit) || probe(&self.call_permit)
        {
            return self.time();
        }
        self.fresh.take().or(self.admitted)
    }

    /// Asks the adaptive throttle, if there is one, to admit an attempt at `now`. A refusal is a
    /// local refusal like a breaker's: waited out if the policy says so, else the call ends.
    fn throttle(&mut self, now: Option<Instant>) -> Result<(), NotSent> {
        let inner = self.inner;
        let (Some(t), Some(now)) = (&inner.throttle, now) else {
            return Ok(());
        };
        let Err(shed) = lock(t).try_acquire_with(now, inner.throttle_sample()) else {
            return Ok(());
        };
        let refusal = NotSent::Rejected(ShedReason::Throttled {
            probability: f64::from(shed.probability_ppm) / 1e6,
        });
        if self.wait_out(refusal, None, now) {
            return Err(refusal);
        }
        self.finish(now);
        Err(refuse(inner, refusal, self.attempts, (self.started, now)))
    }

    /// Asks the breaker, if there is one, at `now` (`None`: the call does not use the time).
    #[inline]
    fn acquire(&mut self, now: Option<Instant>) -> Result<Option<Permit>, NotSent> {
        let inner = self.inner;
        let Some(breaker) = &inner.breaker else {
            return Ok(None);
        };
        let admission = breaker.acquire(now, &*inner.clock);
        if admission.now.is_some() {
            self.timed = true;
        }
        let (refusal, retry_after, now) = match admission.result {
            Ok(permit) if !permit.is_probe() || inner.ledger.is_none() => return Ok(Some(permit)),
            Ok(permit) => {
                // A half-open probe is an extra attempt: it draws from the ledger.
                let now = admission.now.unwrap_or_else(|| self.now());
                let drawn = inner
                    .ledger
                    .as_ref()
                    .map(|l| lock(l).try_draw(Extra::Probe, now));
                ledger_answer(inner, Extra::Probe, !matches!(drawn, Some(Err(_))));
                match drawn {
                    Some(Err(denied)) => {
                        breaker.record(permit, Outcome::Ignored, now);
                        (NotSent::Rejected(ShedReason::Ledger(denied)), None, now)
                    }
                    draw => {
                        self.draw = draw.and_then(Result::ok);
                        return Ok(Some(permit));
                    }
                }
            }
            Err(rejection) => (
                NotSent::from_breaker(rejection.reason),
                rejection.retry_after(),
                admission.now.unwrap_or_else(|| self.now()),
            ),
        };
        Err(self.refused_locally(refusal, retry_after, now))
    }

    /// The attempt about to be sent was refused locally at `now`: hands back what it holds, and
    /// either waits it out (the policy waits on refusals and the wait fits) or ends the call.
    fn refused_locally(
        &mut self,
        refusal: NotSent,
        retry_after: Option<reliable_core::Duration>,
        now: Instant,
    ) -> NotSent {
        self.record(AttemptOutcome::Cancelled, now, false);
        if self.wait_out(refusal, retry_after, now) {
            return refusal;
        }
        self.finish(now);
        refuse(self.inner, refusal, self.attempts, (self.started, now))
    }

    /// The concurrency limit and the rate limit admit an attempt at `now`, or refuse it (with
    /// the time until the rate limit would admit one).
    fn limits(
        &mut self,
        now: Instant,
    ) -> Result<Option<LimitPermit>, (ShedReason, Option<reliable_core::Duration>)> {
        let inner = self.inner;
        let permit = match &inner.limiter {
            Some(l) => Some(
                lock(l)
                    .try_acquire(now)
                    .map_err(|r| (ShedReason::Limit { limit: r.limit }, None))?,
            ),
            None => None,
        };
        if let Some(r) = &inner.rate
            && let Err(limited) = lock(r).try_acquire(now)
        {
            if let Some(p) = permit {
                release_limit(inner, p, Completion::Ignored, now);
            }
            let why = ShedReason::RateLimited {
                retry_after: limited.retry_after.into(),
            };
            return Err((why, Some(limited.retry_after)));
        }
        Ok(permit)
    }

    /// A refusal of an attempt inside the call: with a policy that waits on refusals
    /// (`wait_on_refusal`), asks the core's retry policy, which waits only if the wait fits the
    /// deadline (and the attempt limit and budget allow another attempt). `true`: wait
    /// ([`take_wait`](Self::take_wait) says how long); `false`: the call ends with the refusal.
    fn wait_out(
        &mut self,
        refusal: NotSent,
        retry_after: Option<reliable_core::Duration>,
        now: Instant,
    ) -> bool {
        let inner = self.inner;
        if !inner.retry.config().wait_on_refusal || inner.scope != Scope::PerAttempt {
            return false;
        }
        // The refusal's class, from the core's answer table.
        let class = Answer::Refused {
            by: refusal.refuser(),
            retry_after,
        }
        .class()
        .unwrap_or(ErrorClass::Refused { retry_after });
        let sample = inner.rng.next_u64();
        let decision = with_budget!(inner, |b| {
            inner
                .retry
                .on_failure_with(&mut self.state, class, now, b, sample)
        });
        let RetryDecision::RetryAt(at) = decision else {
            return false;
        };
        let after: Duration = (at - now).into();
        for o in inner.observers.iter() {
            o.on_reject(&inner.name, refusal);
            o.on_retry(&inner.name, self.attempts, class, after);
        }
        self.wait = Some(after);
        true
    }

    /// After [`admit`](Self::admit) was refused: the wait before admitting again, if the policy
    /// waits this refusal out; `None`: the call is over.
    pub fn take_wait(&mut self) -> Option<Duration> {
        self.wait.take()
    }

    /// Attempts sent so far.
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// Admits the next attempt (the breaker asks, per attempt); answers how long it may take
    /// (`None`: no limit), the shorter of its own timeout and what is left of the deadline.
    #[inline]
    pub fn admit(&mut self) -> Result<Option<Duration>, NotSent> {
        let (now, deadline) = self.admit_until()?;
        Ok(match (now, deadline) {
            (Some(now), Some(deadline)) => Some((deadline - now).into()),
            _ => None,
        })
    }

    /// [`admit`](Self::admit), answering with the time read and the attempt's deadline. The
    /// attempt is sent once (a blocking call, a layer driving the run): it is its only copy, so
    /// a copy timeout bounds it too.
    #[inline]
    pub(crate) fn admit_until(&mut self) -> Result<(Option<Instant>, Option<Instant>), NotSent> {
        let (now, deadline) = self.admit_race()?;
        let own = now
            .zip(self.inner.copy_timeout)
            .map(|(now, t)| now.saturating_add(t));
        Ok((now, deadline.into_iter().chain(own).min()))
    }

    /// [`admit_until`](Self::admit_until) for an attempt that may be raced against its hedges:
    /// the deadline is the attempt's as a whole (each copy's own timer is the race's).
    #[inline]
    pub(crate) fn admit_race(&mut self) -> Result<(Option<Instant>, Option<Instant>), NotSent> {
        let now = self.time();
        if self.inner.scope == Scope::PerAttempt {
            self.throttle(now)?;
            self.attempt_permit = match self.acquire(now) {
                Ok(permit) => permit,
                Err(refusal) => {
                    // The throttle counted a request the breaker did not send: not accepted.
                    if let (Some(t), Some(now)) = (&self.inner.throttle, now) {
                        lock(t).record(now, false);
                    }
                    return Err(refusal);
                }
            };
        }
        let inner = self.inner;
        if let Some(now) = now
            && (inner.limiter.is_some() || inner.rate.is_some())
        {
            match self.limits(now) {
                Ok(permit) => self.limit_permit = permit,
                Err((why, after)) => {
                    return Err(self.refused_locally(NotSent::Rejected(why), after, now));
                }
            }
        }
        self.attempts = self.attempts.saturating_add(1);
        self.current = self.attempts;
        for o in inner.observers.iter() {
            o.on_attempt(&inner.name, self.attempts);
        }
        self.admitted = now;
        let Some(now) = now else {
            return Ok((None, None));
        };
        let deadline = self.inner.retry.attempt_deadline(&self.state, now);
        Ok((Some(now), (deadline != Instant::MAX).then_some(deadline)))
    }

    /// The attempt succeeded: the call is over.
    #[inline]
    pub fn succeeded(&mut self) {
        let inner = self.inner;
        for o in inner.observers.iter() {
            o.on_attempt_end(&inner.name, self.attempts, None);
        }
        let now = self.success_time();
        let at = now.unwrap_or(Instant::ZERO);
        self.record(AttemptOutcome::Success, at, true);
        if inner.budget.is_some() {
            with_budget!(inner, |b| inner.retry.on_success(&mut self.state, at, b));
        }
        if let Some(t) = &inner.throttle {
            lock(t).record(at, true);
        }
        self.finished = true;
        inner.stats.bump(Total::Succeeded);
        end(
            inner,
            CallOutcome::Success,
            self.attempts,
            (self.started, at),
        );
    }

    /// Hands the permits back: the attempt's (and its limit slot and ledger draw), and the
    /// call's when the call is over.
    #[inline]
    fn record(&mut self, end: AttemptOutcome, now: Instant, call_over: bool) {
        let inner = self.inner;
        if self.limit_permit.is_some() || self.draw.is_some() || inner.hedger.is_some() {
            let sent = self.take_sent();
            settle(inner, sent, end, now);
        } else if let (Some(b), Some(p)) = (&inner.breaker, self.attempt_permit.take()) {
            b.record(p, breaker_outcome(end), now);
        }
        if call_over && let (Some(b), Some(p)) = (&inner.breaker, self.call_permit.take()) {
            b.record(p, breaker_outcome(end), now);
        }
    }

    /// The current attempt's holdings, taken out.
    fn take_sent(&mut self) -> Sent {
        Sent {
            breaker: self.attempt_permit.take(),
            limit: self.limit_permit.take(),
            draw: self.draw.take(),
            at: self.admitted.take(),
        }
    }

    /// The attempt failed with `class`: retry (after how long) or stop (why).
    pub fn failed(&mut self, class: ErrorClass) -> Step {
        let inner = self.inner;
        for o in inner.observers.iter() {
            o.on_attempt_end(&inner.name, self.attempts, Some(class));
        }
        let now = self.now();
        // A fatal error says nothing about the downstream's health: ignored.
        let outcome = AttemptOutcome::Failed(class);
        self.record(outcome, now, false);
        if let Some(t) = &inner.throttle {
            lock(t).record(now, crate::classify::accepted(class));
        }
        let sample = inner.rng.next_u64();
        let decision = with_budget!(inner, |b| {
            inner
                .retry
                .on_failure_with(&mut self.state, class, now, b, sample)
        });
        if inner.ledger.is_some() {
            match decision {
                RetryDecision::RetryAt(_) => ledger_answer(inner, Extra::Retry, true),
                RetryDecision::GiveUp(GiveUpReason::Budget(_)) => {
                    ledger_answer(inner, Extra::Retry, false)
                }
                RetryDecision::GiveUp(_) => {}
            }
        }
        match decision {
            RetryDecision::RetryAt(at) => {
                let after: Duration = (at - now).into();
                inner.stats.bump(Total::Retries);
                for o in inner.observers.iter() {
                    o.on_retry(&inner.name, self.attempts, class, after);
                }
                Step::Retry { after }
            }
            RetryDecision::GiveUp(reason) => {
                self.record(outcome, now, true);
                self.finished = true;
                for o in inner.observers.iter() {
                    o.on_give_up(&inner.name, self.attempts, reason.name());
                }
                let (stop, outcome) = match reason {
                    GiveUpReason::Budget(d) => {
                        (Stop::Rejected(ShedReason::Budget(d)), CallOutcome::Rejected)
                    }
                    r => (Stop::GaveUp(r), CallOutcome::GaveUp),
                };
                if outcome == CallOutcome::Rejected {
                    inner.stats.bump(Total::Refused);
                } else {
                    inner.stats.bump(Total::Failed);
                }
                let outcome = if class == ErrorClass::Timeout {
                    CallOutcome::Timeout
                } else {
                    outcome
                };
                end(inner, outcome, self.attempts, (self.started, now));
                Step::Stop(stop)
            }
        }
    }

    /// Ends the call early (refused, or dropped): permits back unused, budget grant returned.
    fn finish(&mut self, now: Instant) {
        self.record(AttemptOutcome::Cancelled, now, true);
        let inner = self.inner;
        with_budget!(inner, |b| inner.retry.abandon(&mut self.state, now, b));
        self.finished = true;
    }
}

impl Drop for Run<'_> {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        let now = self.inner.clock.now();
        self.finish(now);
        self.inner.stats.bump(Total::Cancelled);
        end(
            self.inner,
            CallOutcome::Cancelled,
            self.attempts,
            (self.started, now),
        );
    }
}

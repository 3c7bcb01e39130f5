//! Blocking calls: [`Reliable::call_blocking`] and its variants.
//!
//! The work runs on the caller's thread, so nothing is spawned and nothing allocated per call.
//! A per-attempt timeout cannot interrupt it (no one can stop a blocking thread from outside);
//! instead the attempt's deadline is handed to the work as a [`CancelToken`] (the `_cancellable`
//! variants) to pass on to its own client's timeout. An answer that comes after the deadline is
//! taken as it comes, as every face hands the engine a late answer: a **success** is the call's
//! (the work was not interrupted: throwing it away to retry would only add load), a failure is
//! what its error says. Only an answer of work that was told its time was up
//! ([`CancelToken::is_cancelled`]) is a timeout: it stopped because of the timer. The call engine
//! ([`reliable_core::engine`]) decides every step; this face runs the attempts and sleeps the
//! waits.
//! [`call_blocking_detached`](Reliable::call_blocking_detached) keeps the seed's semantics
//! exactly: each attempt runs on a thread of its own and the caller **stops waiting** at the
//! deadline; the thread runs on (nothing can kill it) until the work checks its token or ends,
//! and its late answer is dropped. That costs a thread and a few allocations per attempt. The
//! waits between attempts use [`Sleep::sleep_blocking`](crate::sleep::Sleep::sleep_blocking).
//!
//! The ledger, the concurrency limit and the rate limit apply as they do to async calls (each
//! attempt takes a slot and a token, a refusal ends the call unless the policy waits on
//! refusals). Hedging needs a thread per copy: `call_blocking` and its `_with` and
//! `_cancellable` variants, which run on the caller's thread alone, never hedge, whatever
//! [`Builder::hedge`](crate::Builder::hedge) says; `call_blocking_detached` hedges as an async
//! call does, each copy on a thread of its own, the losers told to stop (their token
//! cancelled) and no longer waited for.

// The methods are `reliable.rs`'s (the handle's one `impl`); here are the functions they run.

use crate::attempt::{FirstAttempt, HandedOver};
use crate::cancel::CancelToken;
use crate::classify::{ByType, Classify};
use crate::drive::{Driven, Layers};
use crate::error::Error;
use crate::instance::Reliable;
use reliable_core::Instant;
use reliable_core::engine::{Action, Input};
use reliable_core::outcome::ErrorClass;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::mpsc::{self, RecvTimeoutError, Sender};

/// [`Reliable::call_blocking_detached`]: each copy on a thread of its own, the caller waiting
/// for the first answer, a deadline or a hedge's delay; each answer read by [`ByType`].
pub(crate) fn detached<T, E, F>(rel: &Reliable, f: F) -> Result<T, Error<E>>
where
    T: Send + 'static,
    E: Send + 'static,
    ByType: Classify<E, T>,
    F: Fn(CancelToken<'static>) -> Result<T, E> + Send + Sync + 'static,
{
    #[cfg(feature = "tracing")]
    let _span = crate::traces::call_span(&rel.inner.name).entered();
    let inner = &*rel.inner;
    let layers = Layers::new(inner, true);
    let plan = layers.plan();
    let (mut run, mut now, mut latest) = Driven::<4>::begin::<T, E>(&plan, &layers, None);
    let f = Arc::new(f);
    let (tx, rx) = mpsc::channel();
    // The copies in flight and their tokens.
    let mut flying: Vec<(u32, CancelToken<'static>)> = Vec::new();
    loop {
        while let Some(action) = run.call.poll() {
            match action {
                Action::Send { n, deadline, hedge } => {
                    run.sending(n, hedge);
                    let token = CancelToken::detached(inner.clock.clone(), deadline);
                    flying.push((n, token.clone()));
                    spawn_copy(&f, n, token, tx.clone());
                }
                // It lost, or timed out: the caller stops waiting for it, and tells it.
                Action::Cancel { n, .. } => {
                    if let Some(i) = flying.iter().position(|(m, _)| *m == n) {
                        flying.swap_remove(i).1.abandon();
                    }
                }
                Action::Done(end) => {
                    run.race_won(end);
                    abandon_all(&mut flying);
                    return run.end(end, now, latest.take());
                }
            }
        }
        let wake = run.call.poll_timeout();
        if flying.is_empty()
            && let Some(at) = wake
        {
            // A wait between attempts, slept as every blocking wait is.
            if at > now {
                inner.sleep.sleep_blocking((at - now).into());
            }
            now = inner.clock.now().max(at);
            run.call.handle(now, Input::Tick);
            continue;
        }
        let got = match wake {
            Some(at) => rx.recv_timeout(at.saturating_duration_since(now).into()),
            None if !flying.is_empty() => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
            // Nothing in flight and nothing to wait for: never so, but never stuck either.
            None => {
                run.call.handle(now, Input::Cancel);
                continue;
            }
        };
        now = inner.clock.now();
        let (n, answer) = match got {
            Ok(got) => got,
            // The timer: the engine times copies out and sends hedges as they are due.
            Err(_) => {
                if let Some(at) = wake {
                    now = now.max(at);
                }
                run.call.handle(now, Input::Tick);
                continue;
            }
        };
        // A copy already cancelled answered late: dropped.
        let Some(i) = flying.iter().position(|(m, _)| *m == n) else {
            continue;
        };
        let (_, token) = flying.swap_remove(i);
        let class = match answer {
            // A panic in `f` comes out of this call unchanged, the other copies told to
            // stop (dropping `run` cancels the call: what its copies hold goes back).
            Err(payload) => {
                abandon_all(&mut flying);
                std::panic::resume_unwind(payload);
            }
            // At or after its deadline the caller had stopped waiting: a timeout.
            Ok(_) if token.is_cancelled() => {
                token.abandon();
                Some(ErrorClass::Timeout)
            }
            Ok(answer) => {
                let class = ByType.outcome(answer.as_ref());
                latest = Some(answer);
                class
            }
        };
        run.call.handle(now, Input::Classified { n, class });
    }
}

/// The fast path: a first attempt through a plainly closed breaker, reading the clock only
/// for a timeout (to know when the attempt is up) or a failure, with nothing else on the
/// stack. A failure, or an instance the fast path does not fit (see `Inner::fast_first`), goes
/// on in the engine, out of line, so that this stays a handful of instructions around `f`.
/// `classify` reads each answer: an `Ok` it reads as a failure is one to the engine, and comes
/// back as it came if the call gives up on it.
#[inline]
pub(crate) fn blocking<T, E, C: Classify<E, T>>(
    rel: &Reliable,
    classify: &C,
    mut f: impl FnMut(&CancelToken<'_>) -> Result<T, E>,
) -> Result<T, Error<E>> {
    #[cfg(feature = "tracing")]
    let _span = crate::traces::call_span(&rel.inner.name).entered();
    let inner = &*rel.inner;
    let Some(mut first) = FirstAttempt::start(inner) else {
        return blocking_rest(rel, classify, f, None);
    };
    let deadline = first.deadline();
    // A success is the call's, even after the deadline, unless the work was told its time
    // was up (then it was interrupted: a timeout).
    let token = CancelToken::new(&*inner.clock, deadline);
    match f(&token) {
        // Without a deadline the work is never told its time is up.
        Ok(value) if (deadline.is_none() || !token.was_told()) && classify.ok(&value).is_none() => {
            first.succeeded();
            Ok(value)
        }
        result => blocking_failed(rel, classify, f, first, result, &token),
    }
}

/// The fast path's first attempt did not succeed: the call goes on in the engine from it.
#[inline(never)]
fn blocking_failed<T, E, C: Classify<E, T>>(
    rel: &Reliable,
    classify: &C,
    f: impl FnMut(&CancelToken<'_>) -> Result<T, E>,
    mut first: FirstAttempt<'_>,
    result: Result<T, E>,
    token: &CancelToken<'_>,
) -> Result<T, Error<E>> {
    let now = rel.inner.clock.now();
    let (started, permit) = first.hand_over(now);
    let (class, answer) = answered(classify, result, token);
    // Not a success, so a class: a timeout if the classifier had none to give.
    let failure = (class.unwrap_or(ErrorClass::Timeout), answer);
    blocking_rest(rel, classify, f, Some((started, permit, now, failure)))
}

/// Everything after the fast path: the engine drives the call, going on from the fast
/// path's failed first attempt if there was one.
#[inline(never)]
fn blocking_rest<T, E, C: Classify<E, T>>(
    rel: &Reliable,
    classify: &C,
    mut f: impl FnMut(&CancelToken<'_>) -> Result<T, E>,
    first: Option<HandedOver<T, E>>,
) -> Result<T, Error<E>> {
    let inner = &*rel.inner;
    drive_blocking(rel, first, |deadline| {
        let token = CancelToken::new(&*inner.clock, deadline);
        answered(classify, f(&token), &token)
    })
}

/// Drives the engine for a blocking call: `attempt(deadline)` runs one attempt on this
/// thread and answers its class (`None`: a success) and its answer (`None`: it timed out); the
/// waits sleep it. `first`: the fast path's first attempt (its start, its breaker permit, when
/// it failed and how).
fn drive_blocking<T, E>(
    rel: &Reliable,
    first: Option<HandedOver<T, E>>,
    mut attempt: impl FnMut(Option<Instant>) -> (Option<ErrorClass>, Option<Result<T, E>>),
) -> Result<T, Error<E>> {
    let inner = &*rel.inner;
    let layers = Layers::new(inner, false);
    let plan = layers.plan();
    let (mut run, mut now, mut latest) = Driven::<1>::begin(&plan, &layers, first);
    loop {
        while let Some(action) = run.call.poll() {
            match action {
                Action::Send { n, deadline, .. } => {
                    for o in inner.observers.iter() {
                        o.on_attempt(&inner.name, n);
                    }
                    let (class, answer) = attempt(deadline);
                    latest = answer;
                    now = inner.clock.now();
                    run.call.handle(now, Input::Classified { n, class });
                }
                // A blocking attempt has answered before the engine hears of it.
                Action::Cancel { .. } => {}
                Action::Done(end) => return run.end(end, now, latest.take()),
            }
        }
        match run.call.poll_timeout() {
            Some(at) => {
                if at > now {
                    inner.sleep.sleep_blocking((at - now).into());
                }
                now = inner.clock.now();
                run.call.handle(now, Input::Tick);
            }
            // Nothing in flight and nothing to wait for: never so, but never stuck either.
            None => run.call.handle(now, Input::Cancel),
        }
    }
}

/// What an attempt's answer is: an answer of work that was told its time was up is a timeout
/// (the timer stopped it, whatever it answered); else `classify` reads it, late or not (the
/// engine takes a late answer as it comes, in every face). Its class (`None`: a success) and
/// the answer (`None`: it timed out).
fn answered<T, E>(
    classify: &impl Classify<E, T>,
    result: Result<T, E>,
    token: &CancelToken<'_>,
) -> (Option<ErrorClass>, Option<Result<T, E>>) {
    if token.was_told() {
        return (Some(ErrorClass::Timeout), None);
    }
    (classify.outcome(result.as_ref()), Some(result))
}

/// What a copy on a thread of its own sends back: its number and its answer, or its panic.
type CopyAnswer<T, E> = (u32, std::thread::Result<Result<T, E>>);

/// Runs copy `n`, `f(token)`, on a new thread that sends its answer (or its panic) on `tx`; on
/// this thread if a thread cannot be spawned.
fn spawn_copy<T: Send + 'static, E: Send + 'static>(
    f: &Arc<impl Fn(CancelToken<'static>) -> Result<T, E> + Send + Sync + 'static>,
    n: u32,
    token: CancelToken<'static>,
    tx: Sender<CopyAnswer<T, E>>,
) {
    let run = {
        let f = f.clone();
        move |token: CancelToken<'static>, tx: Sender<CopyAnswer<T, E>>| {
            let answer = std::panic::catch_unwind(AssertUnwindSafe(|| f(token)));
            // The receiver is gone once the call is over: nothing to tell.
            let _ = tx.send((n, answer));
        }
    };
    let spawned = std::thread::Builder::new()
        .name("reliable-attempt".into())
        .spawn({
            let (run, token, tx) = (run.clone(), token.clone(), tx.clone());
            move || run(token, tx)
        });
    if spawned.is_err() {
        run(token, tx);
    }
}

/// The call is over: every copy still in flight is told to stop, and no longer waited for.
// `inline` keeps it out of this crate's object code unless a caller is: compiled here on its
// own, it made the token's drop a function of this crate, and the blocking fast path (which
// makes a token it never uses) stopped optimizing the token away: 112 → 137 instructions a
// call (`call_profile reliable_blocking`, callgrind).
#[inline]
fn abandon_all(flying: &mut Vec<(u32, CancelToken<'static>)>) {
    for (_, token) in flying.drain(..) {
        token.abandon();
    }
}

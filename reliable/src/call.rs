//! Async calls: [`Reliable::call`] and [`Reliable::call_with`].
//!
//! Each attempt is a future made by the caller's closure. A timed-out attempt's future is
//! **dropped**, which is how Rust cancels: whatever it owned (a socket, a request body, a stream)
//! is closed there and then, unlike the seed library's thread that keeps running after its caller
//! stopped waiting. Dropping the call's own future (a `tokio::time::timeout` around it, a
//! `select!` that picked another branch, an aborted task) cancels the attempt in flight the same
//! way, and hands its breaker permit back as ignored: see [`attempt`](crate::attempt).

use crate::attempt::{Failure, FirstAttempt, Run};
use crate::classify::Classify;
use crate::error::Error;
use crate::reliable::Inner;
use crate::reliable::Reliable;
use crate::sleep::SleepFuture;
use reliable_core::Instant;
use reliable_core::outcome::ErrorClass;
use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

impl Reliable {
    /// Calls `f` (an async closure: `|| async { … }`) until an attempt succeeds or the policy
    /// stops, with the error type's [`Classify`] deciding what each failure means.
    ///
    /// ```
    /// use reliable::Reliable;
    /// use std::sync::atomic::{AtomicU32, Ordering};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let rel = Reliable::builder("inventory").build()?;
    /// let tries = AtomicU32::new(0);
    /// let stock = rel
    ///     .call(|| async {
    ///         match tries.fetch_add(1, Ordering::Relaxed) {
    ///             0 => Err(std::io::Error::from(std::io::ErrorKind::ConnectionReset)),
    ///             _ => Ok(17),
    ///         }
    ///     })
    ///     .await?;
    /// assert_eq!((stock, tries.load(Ordering::Relaxed)), (17, 2));
    /// # Ok(())
    /// # }
    /// ```
    pub fn call<T, E, F, Fut>(&self, f: F) -> impl Future<Output = Result<T, Error<E>>>
    where
        E: Classify,
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        self.call_with(|e: &E| e.classify(), f)
    }

    /// [`call`](Self::call) with a classifier of your own, for error types that do not implement
    /// [`Classify`] (`anyhow::Error`, a client library's error). With the `tracing` feature the
    /// call runs in a `reliable.call` span (see the `traces` module, feature `tracing`).
    pub fn call_with<T, E, C, F, Fut>(
        &self,
        classify: C,
        f: F,
    ) -> impl Future<Output = Result<T, Error<E>>>
    where
        C: Fn(&E) -> ErrorClass,
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let call = self.attempts(classify, f);
        #[cfg(feature = "tracing")]
        let call = tracing::Instrument::instrument(call, crate::traces::call_span(self.name()));
        call
    }

    async fn attempts<T, E, C, F, Fut>(&self, classify: C, mut f: F) -> Result<T, Error<E>>
    where
        C: Fn(&E) -> ErrorClass,
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        // The fast path: a first attempt through a plainly closed breaker, reading the clock only
        // for a timeout. The guard hands the permit back if this future is dropped during the
        // attempt. The rest of the call is boxed, so the future of a call that succeeds at once
        // stays small.
        let mut first = FirstAttempt::start(&self.inner);
        let failed = match &mut first {
            Some(first) => {
                let result = match first.deadline() {
                    None => Some(f().await),
                    Some(deadline) => within(deadline, f(), &self.inner).await,
                };
                let failure = match result {
                    Some(Ok(value)) => {
                        first.succeeded();
                        return Ok(value);
                    }
                    Some(Err(e)) => (classify(&e), Some(e)),
                    None => (ErrorClass::Timeout, None),
                };
                Some((first.continue_as_run(None), failure))
            }
            None => None,
        };
        Box::pin(self.rest(classify, f, failed)).await
    }

    /// Everything after the fast path: a full run, starting from the fast path's failed first
    /// attempt if there was one.
    async fn rest<T, E, C, F, Fut>(
        &self,
        classify: C,
        mut f: F,
        failed: Option<(Run<'_>, Failure<E>)>,
    ) -> Result<T, Error<E>>
    where
        C: Fn(&E) -> ErrorClass,
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let inner = &*self.inner;
        let (mut run, mut failure) = match failed {
            Some((run, failure)) => (run, Some(failure)),
            None => (self.start().map_err(|r| r.into_error(None))?, None),
        };
        let mut last: Option<E> = None;
        loop {
            let (class, error) = match failure.take() {
                Some(failed) => failed,
                None => {
                    let (_, deadline) = match run.admit_race() {
                        Ok(admitted) => admitted,
                        Err(refusal) => match run.take_wait() {
                            Some(wait) => {
                                inner.sleep.sleep(wait).await;
                                continue;
                            }
                            None => return Err(refusal.into_error(last.take())),
                        },
                    };
                    let result = if run.hedging() {
                        let race = race(&mut run, &mut f, &classify, inner);
                        match deadline {
                            None => Some(race.await),
                            Some(deadline) => within(deadline, race, inner).await,
                        }
                    } else {
                        let attempt = async { f().await.map_err(|e| (classify(&e), Some(e))) };
                        match deadline {
                            None => Some(attempt.await),
                            Some(deadline) => within(deadline, attempt, inner).await,
                        }
                    };
                    match result {
                        Some(Ok(value)) => {
                            run.succeeded();
                            return Ok(value);
                        }
                        Some(Err(failure)) => failure,
                        None => (ErrorClass::Timeout, None),
                    }
                }
            };
            let wait = run.next(class, error, &mut last)?;
            if !wait.is_zero() {
                inner.sleep.sleep(wait).await;
            }
        }
    }
}

/// One attempt of an idempotent call, raced against its hedges: each hedge is sent when the
/// hedging rules, the breaker, the limits and the ledger allow it (see `Run::try_hedge`), and the
/// first **success** wins. The copies still in flight are then dropped (cancelled) as this
/// returns, after the run has settled their permits and draws. A copy that fails while others
/// are in flight is settled and the race goes on; when the last one fails, so does the attempt.
/// With a copy timeout, each copy is timed from its own send: one not answered by then is
/// dropped and fails as a timeout, like any failed copy. The caller's timer (the attempt's
/// timeout, the call's deadline) bounds the whole race: dropped, it leaves the run to settle the
/// copies.
async fn race<T, E, C, F, Fut>(
    run: &mut Run<'_>,
    f: &mut F,
    classify: &C,
    inner: &Inner,
) -> Result<T, Failure<E>>
where
    C: Fn(&E) -> ErrorClass,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    run.begin_race();
    // (copy index in the run, when it times out, its future); boxed so that copies can come
    // and go.
    let mut flying: Vec<(usize, Option<Instant>, Pin<Box<Fut>>)> =
        vec![(0, run.copy_deadline(0), Box::pin(f()))];
    let mut timer: Option<(Instant, SleepFuture)> = None;
    std::future::poll_fn(|cx| {
        loop {
            let mut i = 0;
            while let Some((slot, _, fut)) = flying.get_mut(i) {
                let slot = *slot;
                match fut.as_mut().poll(cx) {
                    Poll::Pending => i += 1,
                    Poll::Ready(Ok(value)) => {
                        run.end_race(slot, true);
                        return Poll::Ready(Ok(value));
                    }
                    Poll::Ready(Err(e)) => {
                        let class = classify(&e);
                        flying.remove(i);
                        if flying.is_empty() {
                            run.end_race(slot, false);
                            return Poll::Ready(Err((class, Some(e))));
                        }
                        run.copy_failed(slot, class);
                    }
                }
            }
            let copy_due = flying.iter().filter_map(|(_, due, _)| *due).min();
            let hedge_due = run.hedge_due();
            let Some(wake) = copy_due.into_iter().chain(hedge_due).min() else {
                return Poll::Pending;
            };
            let now = inner.clock.now();
            if copy_due.is_some_and(|due| now >= due) {
                // Copies past their own timer: dropped (cancelled) here, failed as timeouts.
                let (late, live): (Vec<_>, Vec<_>) = std::mem::take(&mut flying)
                    .into_iter()
                    .partition(|(_, due, _)| due.is_some_and(|due| now >= due));
                flying = live;
                let last = late.len();
                for (k, (slot, _, fut)) in late.into_iter().enumerate() {
                    drop(fut);
                    if flying.is_empty() && k + 1 == last {
                        run.end_race(slot, false);
                        return Poll::Ready(Err((ErrorClass::Timeout, None)));
                    }
                    run.copy_failed(slot, ErrorClass::Timeout);
                }
                continue;
            }
            if hedge_due.is_some_and(|at| now >= at) {
                timer = None;
                if let Some(slot) = run.try_hedge(now) {
                    flying.push((slot, run.copy_deadline(slot), Box::pin(f())));
                }
                continue;
            }
            if timer.as_ref().is_none_or(|(due, _)| *due != wake) {
                timer = Some((wake, inner.sleep.sleep((wake - now).into())));
            }
            if let Some((_, t)) = &mut timer
                && t.as_mut().poll(cx).is_pending()
            {
                return Poll::Pending;
            }
        }
    })
    .await
}

/// Runs `fut` until `deadline` on the instance's clock: its output, or `None` once the timer
/// fires, in which case `fut` is dropped (cancelled) before this returns.
///
/// The timer is made when `fut` first has to wait, for the time left then: an answer ready at
/// once (a cache hit, a buffered reply) costs no timer, and a slow first poll still counts
/// against the deadline.
async fn within<F: Future>(deadline: Instant, fut: F, inner: &Inner) -> Option<F::Output> {
    let mut fut = std::pin::pin!(fut);
    let mut timer: Option<SleepFuture> = None;
    std::future::poll_fn(|cx| {
        if let Poll::Ready(v) = fut.as_mut().poll(cx) {
            return Poll::Ready(Some(v));
        }
        let timer = timer.get_or_insert_with(|| {
            let left = deadline.saturating_duration_since(inner.clock.now());
            inner.sleep.sleep(left.into())
        });
        timer.as_mut().poll(cx).map(|()| None)
    })
    .await
}

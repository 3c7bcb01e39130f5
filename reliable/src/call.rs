//! Async calls: [`Reliable::call`] and [`Reliable::call_with`].
//!
//! Each attempt is a future made by the caller's closure. A timed-out attempt's future is
//! **dropped**, which is how Rust cancels: whatever it owned (a socket, a request body, a stream)
//! is closed there and then, unlike the seed library's thread that keeps running after its caller
//! stopped waiting. Dropping the call's own future (a `tokio::time::timeout` around it, a
//! `select!` that picked another branch, an aborted task) cancels the attempt in flight the same
//! way, and hands its breaker permit back as ignored: see [`attempt`](crate::attempt).

use crate::attempt::{Failure, FirstAttempt};
use crate::classify::Classify;
use crate::drive::{Driven, Layers};
use crate::error::Error;
use crate::instance::Inner;
use crate::instance::Reliable;
use crate::sleep::SleepFuture;
use reliable_core::Instant;
use reliable_core::breaker::Permit;
use reliable_core::outcome::ErrorClass;
use std::future::Future;
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
                let now = self.inner.clock.now();
                let (started, permit) = first.hand_over(now);
                Some((started, permit, now, failure))
            }
            None => None,
        };
        Box::pin(self.rest(classify, f, failed)).await
    }

    /// Everything after the fast path: the engine drives the call, going on from the fast
    /// path's failed first attempt if there was one (its start, its breaker permit, when it
    /// failed and how). Each copy the engine sends is a future of `f`, raced against the others
    /// of its attempt; a copy it cancels (it lost, or timed out) is dropped, which cancels it.
    async fn rest<T, E, C, F, Fut>(
        &self,
        classify: C,
        mut f: F,
        first: Option<(Instant, Option<Permit>, Instant, Failure<E>)>,
    ) -> Result<T, Error<E>>
    where
        C: Fn(&E) -> ErrorClass,
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let inner = &*self.inner;
        let layers = Layers::new(inner, true);
        let plan = layers.plan();
        let (mut run, now, last) = Driven::<4>::begin(&plan, &layers, first);
        run.race(now, last, |_, _| f(), classify).await.1
    }
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

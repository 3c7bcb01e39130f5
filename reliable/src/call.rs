//! The async face: what [`Reliable::call`] and [`Reliable::call_with`] run (the methods
//! themselves are in `reliable.rs`, the handle's one `impl`).
//!
//! Each attempt is a future made by the caller's closure. A timed-out attempt's future is
//! **dropped**, which is how Rust cancels: whatever it owned (a socket, a request body, a stream)
//! is closed there and then, unlike the seed library's thread that keeps running after its caller
//! stopped waiting. Dropping the call's own future (a `tokio::time::timeout` around it, a
//! `select!` that picked another branch, an aborted task) cancels the attempt in flight the same
//! way, and hands its breaker permit back as ignored: see [`attempt`](crate::attempt).

use crate::attempt::{FirstAttempt, HandedOver};
use crate::classify::Classify;
use crate::drive::{Driven, Layers};
use crate::error::Error;
use crate::instance::{Inner, Reliable};
use crate::sleep::SleepFuture;
use reliable_core::Instant;
use reliable_core::outcome::ErrorClass;
use std::future::Future;
use std::task::Poll;

/// A call of `f` on `rel` until an attempt succeeds or the policy stops, `classify` deciding what
/// each outcome means: [`Reliable::call_with`], and [`Reliable::call`] with
/// [`ByType`](crate::ByType). An `Ok` the classifier reads as a failure is one to the engine, and
/// comes back as it came if the call gives up on it. With the `tracing` feature the call runs in
/// a `reliable.call` span.
pub(crate) fn call_with<T, E, C, F, Fut>(
    rel: &Reliable,
    classify: C,
    f: F,
) -> impl Future<Output = Result<T, Error<E>>>
where
    C: Classify<E, T>,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let call = attempts(rel, classify, f);
    #[cfg(feature = "tracing")]
    let call = tracing::Instrument::instrument(call, crate::traces::call_span(&rel.inner.name));
    call
}

async fn attempts<T, E, C, F, Fut>(rel: &Reliable, classify: C, mut f: F) -> Result<T, Error<E>>
where
    C: Classify<E, T>,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    // The fast path: a first attempt through a plainly closed breaker, reading the clock only
    // for a timeout. The guard hands the permit back if this future is dropped during the
    // attempt. The rest of the call is boxed, so the future of a call that succeeds at once
    // stays small.
    let mut first = FirstAttempt::start(&rel.inner);
    let failed = match &mut first {
        Some(first) => {
            let result = match first.deadline() {
                None => Some(f().await),
                Some(deadline) => within(deadline, f(), &rel.inner).await,
            };
            let failure = match result {
                Some(Ok(value)) => match classify.ok(&value) {
                    None => {
                        first.succeeded();
                        return Ok(value);
                    }
                    Some(class) => (class, Some(Ok(value))),
                },
                Some(Err(e)) => (classify.error(&e), Some(Err(e))),
                None => (ErrorClass::Timeout, None),
            };
            let now = rel.inner.clock.now();
            let (started, permit) = first.hand_over(now);
            Some((started, permit, now, failure))
        }
        None => None,
    };
    Box::pin(rest(rel, classify, f, failed)).await
}

/// Everything after the fast path: the engine drives the call, going on from the fast
/// path's failed first attempt if there was one (its start, its breaker permit, when it
/// failed and how). Each copy the engine sends is a future of `f`, raced against the others
/// of its attempt; a copy it cancels (it lost, or timed out) is dropped, which cancels it.
async fn rest<T, E, C, F, Fut>(
    rel: &Reliable,
    classify: C,
    mut f: F,
    first: Option<HandedOver<T, E>>,
) -> Result<T, Error<E>>
where
    C: Classify<E, T>,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let inner = &*rel.inner;
    let layers = Layers::new(inner, true);
    let plan = layers.plan();
    let (mut run, now, latest) = Driven::<4>::begin(&plan, &layers, first);
    run.race(now, latest, |_, _| f(), &classify).await.1
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

//! What a [`Reliable`] can do: its one `impl`, every method of the handle, each with its full
//! documentation and a short delegation to the module that does the work:
//!
//! | methods | the work |
//! |---|---|
//! | [`builder`](Reliable::builder), [`reliablekit`](Reliable::reliablekit), [`layered_exercise`](Reliable::layered_exercise) | `builder.rs`: the builder and its presets |
//! | [`name`](Reliable::name), [`label`](Reliable::label), [`state`](Reliable::state), `fleet_sync` (feature `fleet`), [`snapshot`](Reliable::snapshot) | `instance.rs`: the state every clone shares |
//! | [`call`](Reliable::call), [`call_with`](Reliable::call_with) | `call.rs`: the async face |
//! | [`call_blocking`](Reliable::call_blocking), [`call_blocking_with`](Reliable::call_blocking_with), [`call_blocking_cancellable`](Reliable::call_blocking_cancellable), [`call_blocking_detached`](Reliable::call_blocking_detached) | `blocking.rs`: the blocking face |
//!
//! This module comes after those in the crate's layering (`tests/layering.rs`), which is why the
//! struct is not here: the builder makes one and the faces run calls on its state before this
//! module, so `instance.rs` holds it. No method of `Reliable` is anywhere else: an
//! `impl Reliable` in another file fails `tests/layering.rs` with its file and line.
//!
//! Every method is `#[inline]`: a delegation adds no call to the path of a call. The async and
//! blocking fast paths are the faces' (`call::call_with`, `blocking::blocking`), reached in as
//! many steps as when these methods held them.

use crate::blocking;
use crate::builder::Builder;
use crate::call;
use crate::cancel::CancelToken;
use crate::classify::{ByType, Classify};
use crate::error::Error;
use crate::instance::{Reliable, Snapshot};
use reliable_core::breaker::State;
use std::future::Future;

impl Reliable {
    // Making one: the builder and the presets (`builder.rs`).

    /// A builder with the defaults: the seed library's numbers, except that half-open admits
    /// **one probe at a time** (leased for 10 s) rather than every call, and open times are
    /// spread by ±10%. Each builder method changes only its own setting:
    ///
    /// | setting | method | default |
    /// |---|---|---|
    /// | failure rate that trips the breaker | [`failure_rate`](Builder::failure_rate) | 0.5 (inclusive) |
    /// | window | [`window`](Builder::window), [`time_window`](Builder::time_window) | the last 20 calls |
    /// | calls before a rate decides | [`minimum_calls`](Builder::minimum_calls) | 20 |
    /// | failures in a row that trip it | [`consecutive_failures`](Builder::consecutive_failures) | off |
    /// | slow calls that trip it | [`slow_call`](Builder::slow_call) | off |
    /// | open time | [`cooldown`](Builder::cooldown), [`open_jitter`](Builder::open_jitter) | 30 s, ±10% |
    /// | probe successes in a row that close it | [`probe`](Builder::probe) | 3 |
    /// | probes in flight while half-open | [`probes_in_flight`](Builder::probes_in_flight) | 1, each leased for 10 s |
    /// | attempts, the first included | [`attempts`](Builder::attempts) | 5 |
    /// | per-attempt timeout | [`timeout`](Builder::timeout) | 8 s |
    /// | backoff before retry `k` | [`base_delay`](Builder::base_delay), [`factor`](Builder::factor), [`jitter`](Builder::jitter), [`backoff`](Builder::backoff) (with a cap) | `0.2 s·2^(k−1)`, no cap, ±10% |
    /// | longest `Retry-After` honoured | [`max_server_delay`](Builder::max_server_delay) | 30 s |
    /// | deadline of a whole call | [`deadline`](Builder::deadline) | none |
    /// | retry budget, adaptive throttle | [`budget`](Builder::budget), [`throttle`](Builder::throttle) | none |
    /// | breaker verdicts | [`breaker_per_call`](Builder::breaker_per_call) | one per attempt |
    /// | hedging of idempotent calls | [`hedge`](Builder::hedge), [`idempotent`](Builder::idempotent) | none; calls not idempotent |
    /// | one ledger for retries, hedges and probes | [`ledger`](Builder::ledger) | none |
    /// | concurrency limit, rate limit | [`limit`](Builder::limit), [`bulkhead`](Builder::bulkhead), [`rate_limit`](Builder::rate_limit) | none |
    #[inline]
    pub fn builder(name: &str) -> Builder {
        Builder::new(name)
    }

    /// The seed library's semantics exactly (`reliablekit` 0.1), including its ungated half-open.
    #[inline]
    pub fn reliablekit(name: &str) -> Builder {
        Builder::reliablekit(name)
    }

    /// The layered-stack exercise's primary: `breaker(retry(name))`, 2 attempts with no wait, a
    /// breaker that opens after 2 failed calls in a row for 20 s and then lets one trial through.
    /// For the exercise's backup, add [`no_breaker`](Builder::no_breaker).
    #[inline]
    pub fn layered_exercise(name: &str) -> Builder {
        Builder::layered_exercise(name)
    }

    // What it is and how it stands (`instance.rs`: the state every clone shares).

    /// The instance's name (a metrics label: keep it low-cardinality, a downstream, not a URL).
    #[inline]
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The layers a call goes through, outermost first: `breaker(retry(primary))`,
    /// `retry(breaker(llm))`, `retry(backup)`. A [`Fallback`](crate::Fallback) stamps answers with it.
    #[inline]
    pub fn label(&self) -> &str {
        &self.inner.label
    }

    /// The breaker's state now, `None` without a breaker.
    #[inline]
    pub fn state(&self) -> Option<State> {
        self.inner.state()
    }

    /// Sends the results the fleet breaker kept since its last refresh and reads the fleet's
    /// state now, waiting for the store at most its `wait` (nothing without a fleet breaker):
    /// for a service whose calls are rare (a tool server), so that each call decides on the
    /// store's state and its result reaches the store before the next one, wherever it runs.
    #[cfg(feature = "fleet")]
    #[inline]
    pub async fn fleet_sync(&self) {
        self.inner.fleet_sync().await
    }

    /// The state and totals now.
    #[inline]
    pub fn snapshot(&self) -> Snapshot {
        self.inner.snapshot()
    }

    // Async calls (`call.rs`: the async face).

    /// Calls `f` (an async closure: `|| async { … }`) until an attempt succeeds or the policy
    /// stops, [`ByType`] deciding what each failure means (the error type's rule; every `Ok` a
    /// success).
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
    #[inline]
    pub fn call<T, E, F, Fut>(&self, f: F) -> impl Future<Output = Result<T, Error<E>>>
    where
        ByType: Classify<E, T>,
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        call::call_with(self, ByType, f)
    }

    /// [`call`](Self::call) with a [`Classify`] of your own: a closure or function
    /// `Fn(&E) -> ErrorClass` for an error type [`ByType`] has no rule for (a client library's
    /// error), or a classifier that reads `Ok` values too, such as
    /// `HttpPolicy` (feature `http`) for a `reqwest::Response` (a 503 handed back as `Ok` is
    /// then retried, and returned as it came if the call gives up on it). With the `tracing`
    /// feature the call runs in a `reliable.call` span (see the `traces` module, feature
    /// `tracing`).
    #[inline]
    pub fn call_with<T, E, C, F, Fut>(
        &self,
        classify: C,
        f: F,
    ) -> impl Future<Output = Result<T, Error<E>>>
    where
        C: Classify<E, T>,
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        call::call_with(self, classify, f)
    }

    // Blocking calls (`blocking.rs`: the blocking face).

    /// Calls `f` on this thread until an attempt succeeds or the policy stops.
    ///
    /// **The per-attempt timeout does not bound how long an attempt takes.** Nothing can stop a
    /// blocking function from outside: `f` runs to its end. Its answer is taken as it comes, even
    /// after the attempt's deadline: a success is the call's (it is never thrown away and
    /// retried), a failure is classified as any other. To bound latency:
    /// - [`call_blocking_cancellable`](Self::call_blocking_cancellable) hands `f` a
    ///   [`CancelToken`] with the attempt's deadline, to pass on to its own client's timeout
    ///   (`token.remaining()`), or to check while it works: bounded, no thread, no allocation;
    /// - [`call_blocking_detached`](Self::call_blocking_detached) runs each attempt on a thread of
    ///   its own and stops waiting at the deadline (the seed's semantics): bounded for the caller,
    ///   at a thread per attempt, while the abandoned work runs on.
    ///
    /// This one stays the default because it is the only one that adds nothing per call and never
    /// leaves work running behind the caller's back; use it when `f` has its own timeout.
    ///
    /// ```
    /// use reliable::Reliable;
    ///
    /// let rel = Reliable::builder("disk").no_breaker().attempts(1).build()?;
    /// let err = rel
    ///     .call_blocking(|| std::fs::read_to_string("/no/such/file"))
    ///     .unwrap_err();
    /// assert!(matches!(err, reliable::Error::GaveUp { attempts: 1, .. })); // NotFound is fatal
    /// # Ok::<(), reliable::BuildError>(())
    /// ```
    #[inline]
    pub fn call_blocking<T, E>(&self, mut f: impl FnMut() -> Result<T, E>) -> Result<T, Error<E>>
    where
        ByType: Classify<E, T>,
    {
        blocking::blocking(self, &ByType, |_| f())
    }

    /// [`call_blocking`](Self::call_blocking) with a classifier of your own.
    #[inline]
    pub fn call_blocking_with<T, E>(
        &self,
        classify: impl Classify<E, T>,
        mut f: impl FnMut() -> Result<T, E>,
    ) -> Result<T, Error<E>> {
        blocking::blocking(self, &classify, |_| f())
    }

    /// [`call_blocking`](Self::call_blocking), handing each attempt a [`CancelToken`] with its
    /// deadline.
    #[inline]
    pub fn call_blocking_cancellable<T, E>(
        &self,
        f: impl FnMut(&CancelToken<'_>) -> Result<T, E>,
    ) -> Result<T, Error<E>>
    where
        ByType: Classify<E, T>,
    {
        blocking::blocking(self, &ByType, f)
    }

    /// The seed's "stop waiting": each attempt runs on a new thread, and the caller returns to
    /// its retry loop at the attempt's deadline while the thread runs on, its token cancelled.
    /// With [`Builder::hedge`](crate::Builder::hedge), a hedge of a slow attempt runs on a
    /// thread of its own too; the first success wins and the other copies' tokens are
    /// cancelled. A panic in `f` comes out of this call unchanged. If a thread cannot be
    /// spawned, the copy runs on the caller's thread.
    ///
    /// ```
    /// use reliable::{Error, Reliable};
    /// use std::time::{Duration, Instant};
    ///
    /// let rel = Reliable::builder("legacy")
    ///     .clock(reliable::clock::SystemClock::new())
    ///     .attempts(1)
    ///     .timeout(Duration::from_millis(50))
    ///     .build()?;
    /// let t0 = Instant::now();
    /// let err = rel
    ///     .call_blocking_detached(|token| {
    ///         // Stuck in a call that ignores timeouts, checking the token now and then.
    ///         while !token.is_cancelled() {
    ///             std::thread::sleep(Duration::from_millis(5));
    ///         }
    ///         Ok::<_, std::io::Error>(())
    ///     })
    ///     .unwrap_err();
    /// assert!(matches!(err, Error::Timeout { attempts: 1 }));
    /// assert!(t0.elapsed() < Duration::from_secs(5));
    /// # Ok::<(), reliable::BuildError>(())
    /// ```
    #[inline]
    pub fn call_blocking_detached<T, E, F>(&self, f: F) -> Result<T, Error<E>>
    where
        T: Send + 'static,
        E: Send + 'static,
        ByType: Classify<E, T>,
        F: Fn(CancelToken<'static>) -> Result<T, E> + Send + Sync + 'static,
    {
        blocking::detached(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_is_shareable_across_threads_and_tasks() {
        fn shareable<T: Clone + Send + Sync + 'static>() {}
        fn send<T: Send>(_: &T) {}
        shareable::<Reliable>();
        let rel = Reliable::builder("x").build().unwrap();
        // A call's future is Send when the work's future is: it can be spawned.
        send(&rel.call(|| async { Ok::<_, std::io::Error>(1) }));
    }
}

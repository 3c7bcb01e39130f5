//! Blocking calls: [`Reliable::call_blocking`] and its variants.
//!
//! The work runs on the caller's thread, so nothing is spawned and nothing allocated per call.
//! A per-attempt timeout cannot interrupt it (no one can stop a blocking thread from outside);
//! instead the attempt's deadline is handed to the work as a [`CancelToken`] (the `_cancellable`
//! variants) to pass on to its own client's timeout, and an answer that comes after the deadline
//! **counts as a timeout**, exactly as if the caller had stopped waiting for it as the seed
//! library does: the breaker and the retry policy see the same history either way.
//! [`call_blocking_detached`](Reliable::call_blocking_detached) keeps the seed's semantics
//! exactly: each attempt runs on a thread of its own and the caller **stops waiting** at the
//! deadline; the thread runs on (nothing can kill it) until the work checks its token or ends,
//! and its late answer is dropped. That costs a thread and a few allocations per attempt. The
//! waits between attempts use [`Sleep::sleep_blocking`](crate::sleep::Sleep::sleep_blocking).
//!
//! The ledger, the concurrency limit and the rate limit apply as they do to async calls (each
//! attempt takes a slot and a token, a refusal ends the call unless the policy waits on
//! refusals); hedging does not: a copy of a blocking attempt would need a thread of its own, so a
//! blocking call is never hedged, whatever [`Builder::hedge`](crate::Builder::hedge) says.

use crate::attempt::{Failure, FirstAttempt, Run};
use crate::cancel::CancelToken;
use crate::classify::Classify;
use crate::error::Error;
use crate::reliable::Reliable;
use reliable_core::outcome::ErrorClass;
use std::sync::Arc;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::Duration;

impl Reliable {
    /// Calls `f` on this thread until an attempt succeeds or the policy stops.
    ///
    /// **The per-attempt timeout does not bound how long an attempt takes.** Nothing can stop a
    /// blocking function from outside: `f` runs to its end, and an answer that comes after the
    /// attempt's deadline counts as a timeout (a late success is dropped and retried), so the
    /// breaker and the retry policy see what they would see had the caller stopped waiting. To
    /// bound latency:
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
    pub fn call_blocking<T, E: Classify>(
        &self,
        mut f: impl FnMut() -> Result<T, E>,
    ) -> Result<T, Error<E>> {
        self.blocking(|e: &E| e.classify(), |_| f())
    }

    /// [`call_blocking`](Self::call_blocking) with a classifier of your own.
    pub fn call_blocking_with<T, E>(
        &self,
        classify: impl Fn(&E) -> ErrorClass,
        mut f: impl FnMut() -> Result<T, E>,
    ) -> Result<T, Error<E>> {
        self.blocking(classify, |_| f())
    }

    /// [`call_blocking`](Self::call_blocking), handing each attempt a [`CancelToken`] with its
    /// deadline.
    pub fn call_blocking_cancellable<T, E: Classify>(
        &self,
        f: impl FnMut(&CancelToken<'_>) -> Result<T, E>,
    ) -> Result<T, Error<E>> {
        self.blocking(|e: &E| e.classify(), f)
    }

    /// The seed's "stop waiting": each attempt runs on a new thread, and the caller returns to
    /// its retry loop at the attempt's deadline while the thread runs on, its token cancelled.
    /// A panic in `f` comes out of this call unchanged. If a thread cannot be spawned, the
    /// attempt runs on the caller's thread.
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
    pub fn call_blocking_detached<T, E, F>(&self, f: F) -> Result<T, Error<E>>
    where
        T: Send + 'static,
        E: Classify + Send + 'static,
        F: Fn(CancelToken<'static>) -> Result<T, E> + Send + Sync + 'static,
    {
        let inner = &*self.inner;
        let f = Arc::new(f);
        let mut run = self.start().map_err(|r| r.into_error(None))?;
        let mut last: Option<E> = None;
        loop {
            let (now, deadline) = match run.admit_until() {
                Ok(admitted) => admitted,
                Err(refusal) => match run.take_wait() {
                    Some(wait) => {
                        inner.sleep.sleep_blocking(wait);
                        continue;
                    }
                    None => return Err(refusal.into_error(last.take())),
                },
            };
            let limit = now.zip(deadline).map(|(now, d)| (d - now).into());
            let token = CancelToken::detached(inner.clock.clone(), deadline);
            let (class, error) = match detach(&f, token.clone(), limit) {
                // An answer at or after the deadline is a timeout, as on the other paths.
                Detached::Done(_) if token.is_cancelled() => {
                    token.abandon();
                    (ErrorClass::Timeout, None)
                }
                Detached::Done(Ok(value)) => {
                    run.succeeded();
                    return Ok(value);
                }
                Detached::Done(Err(e)) => (e.classify(), Some(e)),
                Detached::TimedOut => {
                    token.abandon();
                    (ErrorClass::Timeout, None)
                }
            };
            let wait = run.next(class, error, &mut last)?;
            if !wait.is_zero() {
                inner.sleep.sleep_blocking(wait);
            }
        }
    }

    /// The fast path: a first attempt through a plainly closed breaker, reading the clock only
    /// for a timeout (before, and after to check the answer came in time), with nothing else on
    /// the stack. Anything else (a failure, an instance that needs the time of a success, a
    /// breaker that is not plainly closed) goes on in [`blocking_rest`](Self::blocking_rest), out
    /// of line, so that this stays a handful of instructions around `f`.
    #[inline]
    fn blocking<T, E>(
        &self,
        classify: impl Fn(&E) -> ErrorClass,
        mut f: impl FnMut(&CancelToken<'_>) -> Result<T, E>,
    ) -> Result<T, Error<E>> {
        #[cfg(feature = "tracing")]
        let _span = crate::traces::call_span(self.name()).entered();
        let inner = &*self.inner;
        let Some(mut first) = FirstAttempt::start(inner) else {
            return self.blocking_rest(classify, f, None);
        };
        let deadline = first.deadline();
        let result = f(&CancelToken::new(&*inner.clock, deadline));
        // An answer at or after the deadline is a timeout, as on the slow path.
        let (late, now) = match deadline {
            Some(d) => {
                let now = inner.clock.now();
                (now >= d, Some(now))
            }
            None => (false, None),
        };
        let failed = match result {
            _ if late => (ErrorClass::Timeout, None),
            Ok(value) => {
                first.succeeded();
                return Ok(value);
            }
            Err(e) => (classify(&e), Some(e)),
        };
        self.blocking_rest(classify, f, Some((first.continue_as_run(now), failed)))
    }

    /// Everything after the fast path: a full run, starting from the fast path's failed first
    /// attempt if there was one.
    #[inline(never)]
    fn blocking_rest<T, E>(
        &self,
        classify: impl Fn(&E) -> ErrorClass,
        mut f: impl FnMut(&CancelToken<'_>) -> Result<T, E>,
        failed: Option<(Run<'_>, Failure<E>)>,
    ) -> Result<T, Error<E>> {
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
                    let (_, deadline) = match run.admit_until() {
                        Ok(admitted) => admitted,
                        Err(refusal) => match run.take_wait() {
                            Some(wait) => {
                                inner.sleep.sleep_blocking(wait);
                                continue;
                            }
                            None => return Err(refusal.into_error(last.take())),
                        },
                    };
                    let token = CancelToken::new(&*inner.clock, deadline);
                    let result = f(&token);
                    let late = deadline.is_some_and(|d| {
                        let now = inner.clock.now();
                        run.observed(now);
                        now >= d
                    });
                    match result {
                        _ if late => (ErrorClass::Timeout, None),
                        Ok(value) => {
                            run.succeeded();
                            return Ok(value);
                        }
                        Err(e) => (classify(&e), Some(e)),
                    }
                }
            };
            let wait = run.next(class, error, &mut last)?;
            if !wait.is_zero() {
                inner.sleep.sleep_blocking(wait);
            }
        }
    }
}

enum Detached<R> {
    Done(R),
    TimedOut,
}

/// Runs `f(token)` on a new thread and waits for it at most `limit`.
fn detach<R: Send + 'static>(
    f: &Arc<impl Fn(CancelToken<'static>) -> R + Send + Sync + 'static>,
    token: CancelToken<'static>,
    limit: Option<Duration>,
) -> Detached<R> {
    let (tx, rx) = mpsc::sync_channel(1);
    let work = f.clone();
    let spawned = std::thread::Builder::new()
        .name("reliable-attempt".into())
        .spawn({
            let token = token.clone();
            move || {
                // The receiver is gone once the caller stopped waiting: nothing to tell.
                let _ = tx.send(work(token));
            }
        });
    let handle = match spawned {
        Ok(handle) => handle,
        Err(_) => return Detached::Done(f(token)),
    };
    let answer = match limit {
        Some(limit) => rx.recv_timeout(limit),
        None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
    };
    match answer {
        Ok(r) => Detached::Done(r),
        Err(RecvTimeoutError::Timeout) => Detached::TimedOut,
        // The sender went without sending: `f` panicked. Pass the panic on unchanged.
        Err(RecvTimeoutError::Disconnected) => match handle.join() {
            Err(payload) => std::panic::resume_unwind(payload),
            // Unreachable in practice (a thread that returns has sent); treat as a timeout.
            Ok(()) => Detached::TimedOut,
        },
    }
}

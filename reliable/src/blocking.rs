//! Blocking calls: [`Reliable::call_blocking`] and its variants.
//!
//! The work runs on the caller's thread, so nothing is spawned and nothing allocated per call.
//! A per-attempt timeout cannot interrupt it (no one can stop a blocking thread from outside);
//! instead the attempt's deadline is handed to the work as a [`CancelToken`] (the `_cancellable`
//! variants) to pass on to its own client's timeout, and an answer that comes after the deadline
//! **counts as a timeout**, exactly as if the caller had stopped waiting for it as the seed
//! library does: the breaker and the retry policy see the same history either way. The waits
//! between attempts use [`Sleep::sleep_blocking`](crate::sleep::Sleep::sleep_blocking).

use crate::attempt::Step;
use crate::cancel::CancelToken;
use crate::classify::Classify;
use crate::error::Error;
use crate::reliable::Reliable;
use reliable_core::outcome::ErrorClass;

impl Reliable {
    /// Calls `f` on this thread until an attempt succeeds or the policy stops.
    ///
    /// ```
    /// use reliable::Reliable;
    ///
    /// let rel = Reliable::builder("disk").no_breaker().attempts(1).build()?;
    /// let err = rel
    ///     .call_blocking(|| std::fs::read_to_string("/no/such/file"))
    ///     .unwrap_err();
    /// assert!(matches!(err, reliable::Error::GaveUp { attempts: 1, .. })); // NotFound is fatal
    /// # Ok::<(), reliable::ConfigError>(())
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

    fn blocking<T, E>(
        &self,
        classify: impl Fn(&E) -> ErrorClass,
        mut f: impl FnMut(&CancelToken<'_>) -> Result<T, E>,
    ) -> Result<T, Error<E>> {
        let inner = &*self.inner;
        let mut run = self.start().map_err(|r| r.into_error(None))?;
        let mut last: Option<E> = None;
        loop {
            let limit = run.admit().map_err(|r| r.into_error(last.take()))?;
            let deadline = limit.map(|l| inner.clock.now() + l.into());
            let token = CancelToken::new(&*inner.clock, deadline);
            let result = f(&token);
            let (class, error) = match result {
                _ if token.is_cancelled() => (ErrorClass::Timeout, None),
                Ok(value) => {
                    run.succeeded();
                    return Ok(value);
                }
                Err(e) => (classify(&e), Some(e)),
            };
            match run.failed(class) {
                Step::Retry { after } => {
                    last = error;
                    if !after.is_zero() {
                        inner.sleep.sleep_blocking(after);
                    }
                }
                Step::Stop(stop) => return Err(stop.into_error(error, run.attempts())),
            }
        }
    }
}

//! [`Clock`]: where the layers read `now` and how they wait, injected so tests can run in paused
//! virtual time and an emulator can run a scenario slower or faster than written.

use std::future::Future;
use std::pin::Pin;

use reliable_core::Instant;

/// A boxed wait, as [`Clock::sleep_until`] returns it.
pub type Sleep = Pin<Box<dyn Future<Output = ()> + Send>>;

/// A source of `now` in the core's time base, and a way to wait until an instant of it.
pub trait Clock: Clone + Send + Sync + 'static {
    /// The current instant.
    fn now(&self) -> Instant;
    /// A future that completes at `at` (at once if it has passed).
    fn sleep_until(&self, at: Instant) -> Sleep;
}

/// tokio's clock (`tokio::time::Instant`), measured from when this value was made: follows
/// `tokio::time::pause()` and `advance()`, so tests run in virtual time.
#[derive(Clone, Copy, Debug)]
pub struct TokioClock {
    origin: tokio::time::Instant,
}

impl TokioClock {
    /// A clock whose `Instant::ZERO` is now.
    pub fn new() -> Self {
        TokioClock {
            origin: tokio::time::Instant::now(),
        }
    }
}

impl Default for TokioClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for TokioClock {
    fn now(&self) -> Instant {
        let d = self.origin.elapsed();
        Instant::from_nanos(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
    }

    fn sleep_until(&self, at: Instant) -> Sleep {
        let since = std::time::Duration::from_nanos(at.as_nanos());
        let wake = self.origin.checked_add(since);
        Box::pin(async move {
            match wake {
                Some(w) => tokio::time::sleep_until(w).await,
                // Beyond what tokio can represent: never.
                None => std::future::pending().await,
            }
        })
    }
}

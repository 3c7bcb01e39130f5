//! [`Time`]: the crate's injected [`Clock`] and [`Sleep`] as the layers use them, with waits
//! until an instant (deadlines are absolute, so the layers of one stack agree on them).

use std::sync::Arc;

use reliable_core::Instant;

use crate::clock::Clock;
use crate::sleep::{Sleep, SleepFuture};

/// A clock and a timer.
#[derive(Clone, Debug)]
pub(crate) struct Time {
    clock: Arc<dyn Clock>,
    sleep: Arc<dyn Sleep>,
}

impl Time {
    /// tokio's clock and timer (they follow `tokio::time::pause()`).
    pub(crate) fn tokio() -> Self {
        Time::new(crate::clock::TokioClock::new(), crate::sleep::TokioSleep)
    }

    pub(crate) fn new(clock: impl Clock, sleep: impl Sleep) -> Self {
        Time {
            clock: Arc::new(clock),
            sleep: Arc::new(sleep),
        }
    }

    pub(crate) fn now(&self) -> Instant {
        self.clock.now()
    }

    /// Completes at `at` on this clock (never for `Instant::MAX`).
    pub(crate) fn sleep_until(&self, at: Instant) -> SleepFuture {
        if at == Instant::MAX {
            return Box::pin(std::future::pending());
        }
        let left = at.saturating_duration_since(self.now());
        self.sleep.sleep(left.into())
    }
}

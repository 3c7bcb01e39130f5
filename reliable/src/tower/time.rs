//! [`Time`]: the crate's injected [`Clock`] as the single-layer adapters read it (their
//! `with_time` also takes a [`Sleep`](crate::sleep::Sleep), which only the engine-driven layers
//! wait on).

use std::sync::Arc;

use reliable_core::Instant;

use crate::clock::Clock;

/// A clock.
#[derive(Clone, Debug)]
pub(crate) struct Time {
    clock: Arc<dyn Clock>,
}

impl Time {
    /// tokio's clock (it follows `tokio::time::pause()`).
    pub(crate) fn tokio() -> Self {
        Time::new(crate::clock::TokioClock::new())
    }

    pub(crate) fn new(clock: impl Clock) -> Self {
        Time {
            clock: Arc::new(clock),
        }
    }

    pub(crate) fn now(&self) -> Instant {
        self.clock.now()
    }
}

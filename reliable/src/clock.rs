//! Where `now` comes from: the [`Clock`] trait and three clocks.
//!
//! The core never reads a clock; this crate reads one through a `Clock` so that time is an input
//! here too, as in the seed library (`clock=` on its breaker). Pick:
//!
//! - [`SystemClock`]: `std::time::Instant`, for production without tokio;
//! - `TokioClock` (feature `tokio`): `tokio::time::Instant`, which stands still under
//!   `tokio::time::pause()` and moves with `tokio::time::advance`, so a test of minutes of retries
//!   and open breakers runs in microseconds of real time;
//! - [`ManualClock`]: set and advanced by hand (and by [`ManualSleep`](crate::sleep::ManualSleep)),
//!   for synchronous tests.
//!
//! Every clock counts from its own origin (when it was made), as a [`reliable_core::Instant`].
//!
//! ```
//! use reliable::clock::{Clock, ManualClock};
//! use std::time::Duration;
//!
//! let clock = ManualClock::new();
//! let t0 = clock.now();
//! clock.advance(Duration::from_secs(5));
//! assert_eq!(clock.now() - t0, Duration::from_secs(5).into());
//! ```

use reliable_core::{Duration, Instant};
use std::fmt::Debug;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// A source of the current time, shared by every clone of a [`Reliable`](crate::Reliable).
pub trait Clock: Send + Sync + Debug + 'static {
    /// The current time, measured from this clock's origin. Never goes backwards for one clock
    /// (the core treats an earlier `now` as the latest seen anyway).
    fn now(&self) -> Instant;
}

fn nanos(d: std::time::Duration) -> Instant {
    Instant::from_nanos(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// Monotonic wall time from `std::time::Instant`, counted from when the clock was made.
#[derive(Clone, Copy, Debug)]
pub struct SystemClock {
    origin: std::time::Instant,
}

impl SystemClock {
    /// A clock whose origin is now.
    pub fn new() -> Self {
        SystemClock {
            origin: std::time::Instant::now(),
        }
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        SystemClock::new()
    }
}

impl Clock for SystemClock {
    #[inline]
    fn now(&self) -> Instant {
        nanos(self.origin.elapsed())
    }
}

/// tokio's clock (`tokio::time::Instant`): the system clock, except in a runtime whose time is
/// paused (`tokio::time::pause()`, `#[tokio::test(start_paused = true)]`), where it moves only when
/// the runtime auto-advances or a test calls `tokio::time::advance`.
#[cfg(feature = "tokio")]
#[derive(Clone, Copy, Debug)]
pub struct TokioClock {
    origin: tokio::time::Instant,
}

#[cfg(feature = "tokio")]
impl TokioClock {
    /// A clock whose origin is tokio's now. Make it inside the runtime whose clock it should read
    /// when that clock is paused.
    pub fn new() -> Self {
        TokioClock {
            origin: tokio::time::Instant::now(),
        }
    }
}

#[cfg(feature = "tokio")]
impl Default for TokioClock {
    fn default() -> Self {
        TokioClock::new()
    }
}

#[cfg(feature = "tokio")]
impl Clock for TokioClock {
    #[inline]
    fn now(&self) -> Instant {
        nanos(tokio::time::Instant::now().saturating_duration_since(self.origin))
    }
}

/// A clock that moves only when told to. Clones share the same time.
#[derive(Clone, Debug, Default)]
pub struct ManualClock {
    nanos: Arc<AtomicU64>,
}

impl ManualClock {
    /// A clock at its origin.
    pub fn new() -> Self {
        ManualClock::default()
    }

    /// Moves the clock forward by `d` (saturating).
    pub fn advance(&self, d: std::time::Duration) {
        let d = Duration::from(d).as_nanos();
        // fetch_update cannot fail with a closure that always returns Some.
        let _ = self
            .nanos
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                Some(n.saturating_add(d))
            });
    }

    /// Sets the time since the origin. A time earlier than the current one is ignored: the clock
    /// is monotonic, like the others.
    pub fn set(&self, since_origin: std::time::Duration) {
        self.nanos
            .fetch_max(Duration::from(since_origin).as_nanos(), Ordering::AcqRel);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Instant {
        Instant::from_nanos(self.nanos.load(Ordering::Acquire))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration as Std;

    #[test]
    fn manual_clock_is_shared_and_monotonic() {
        let a = ManualClock::new();
        let b = a.clone();
        a.advance(Std::from_millis(1500));
        assert_eq!(b.now(), Instant::from_millis(1500));
        b.set(Std::from_secs(1));
        assert_eq!(
            a.now(),
            Instant::from_millis(1500),
            "set never moves it back"
        );
        b.set(Std::from_secs(3));
        assert_eq!(a.now(), Instant::from_secs(3));
        a.advance(Std::MAX);
        assert_eq!(a.now(), Instant::MAX, "saturates");
    }

    #[test]
    fn system_clock_moves_forward() {
        let c = SystemClock::new();
        let t0 = c.now();
        std::thread::sleep(Std::from_millis(2));
        assert!(c.now() - t0 >= Duration::from_millis(2));
    }

    #[cfg(feature = "tokio")]
    #[tokio::test(start_paused = true)]
    async fn tokio_clock_follows_paused_time() {
        let c = TokioClock::new();
        let t0 = c.now();
        tokio::time::advance(Std::from_secs(90)).await;
        assert_eq!(c.now() - t0, Duration::from_secs(90));
    }
}

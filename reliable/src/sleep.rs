//! How a retry waits: the [`Sleep`] trait, and sleeps for tokio, for any runtime, and for tests.
//!
//! The wait between attempts and the per-attempt timer both come from a `Sleep`, so the async
//! code is not tied to tokio: implement `Sleep` for another runtime's timer (or use
//! [`TimerSleep`], which runs on a thread of its own and works under any executor). The blocking
//! path uses [`Sleep::sleep_blocking`].
//!
//! | sleep | async wait | blocking wait | for |
//! |---|---|---|---|
//! | `RuntimeSleep` (feature `tokio`, the default) | tokio's inside a tokio runtime, else `futures-timer` | `std::thread::sleep` | any executor |
//! | `TokioSleep` (feature `tokio`) | `tokio::time::sleep` | `std::thread::sleep` | tokio services and paused-time tests |
//! | [`TimerSleep`] | `futures-timer` (a timer thread) | `std::thread::sleep` | other runtimes |
//! | [`ManualSleep`] | advances a [`ManualClock`], returns at once | same | deterministic tests |
//!
//! ```
//! use reliable::clock::{Clock, ManualClock};
//! use reliable::sleep::{ManualSleep, Sleep};
//! use std::time::Duration;
//!
//! let clock = ManualClock::new();
//! let sleep = ManualSleep::new(clock.clone());
//! sleep.sleep_blocking(Duration::from_millis(200));
//! assert_eq!(clock.now(), reliable_core::Instant::from_millis(200));
//! ```

use crate::clock::ManualClock;
use std::fmt::Debug;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

/// A boxed sleep future, as [`Sleep::sleep`] returns it.
pub type SleepFuture = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// A timer. One is shared by every clone of a [`Reliable`](crate::Reliable).
///
/// The async wait is boxed so that a `Reliable` can hold any `Sleep` without a type parameter;
/// it is made only when a call waits (a retry's backoff, a per-attempt timeout), never on a call
/// that succeeds at once without a timeout.
pub trait Sleep: Send + Sync + Debug + 'static {
    /// A future that completes after `duration`.
    fn sleep(&self, duration: Duration) -> SleepFuture;

    /// Blocks the current thread for `duration`.
    fn sleep_blocking(&self, duration: Duration) {
        std::thread::sleep(duration);
    }
}

/// tokio's timer. Needs a tokio runtime with the time driver enabled when its future is polled;
/// under `tokio::time::pause()` it waits in virtual time.
#[cfg(feature = "tokio")]
#[derive(Clone, Copy, Debug, Default)]
pub struct TokioSleep;

#[cfg(feature = "tokio")]
impl Sleep for TokioSleep {
    fn sleep(&self, duration: Duration) -> SleepFuture {
        Box::pin(tokio::time::sleep(duration))
    }
}

/// The default timer with the `tokio` feature: tokio's when the sleep is made inside a tokio
/// runtime (so `tokio::time::pause()` works), [`TimerSleep`] otherwise, so a `Reliable` built
/// with default features also retries under another executor (`futures::executor::block_on`,
/// smol, async-std) instead of panicking with "there is no reactor running".
///
/// Inside tokio, the runtime needs its time driver (`#[tokio::main]` and `enable_all()` have it).
#[cfg(feature = "tokio")]
#[derive(Clone, Copy, Debug, Default)]
pub struct RuntimeSleep;

#[cfg(feature = "tokio")]
impl Sleep for RuntimeSleep {
    fn sleep(&self, duration: Duration) -> SleepFuture {
        match tokio::runtime::Handle::try_current() {
            Ok(_) => TokioSleep.sleep(duration),
            Err(_) => TimerSleep.sleep(duration),
        }
    }
}

/// A runtime-independent timer (`futures-timer`: one global timer thread), for executors other
/// than tokio.
#[derive(Clone, Copy, Debug, Default)]
pub struct TimerSleep;

impl Sleep for TimerSleep {
    fn sleep(&self, duration: Duration) -> SleepFuture {
        // The timer adds the duration to `Instant::now()`, which panics past the end of time:
        // a wait that long never ends.
        let margin = Duration::from_secs(1);
        match std::time::Instant::now().checked_add(duration.saturating_add(margin)) {
            Some(_) => Box::pin(futures_timer::Delay::new(duration)),
            None => Box::pin(std::future::pending()),
        }
    }
}

/// Sleeping moves a [`ManualClock`] forward and returns at once (the seed's `NoSleep` plus its
/// clock), so retry schedules can be checked exactly without waiting.
///
/// For blocking calls, and async calls without a per-attempt timeout. An async attempt timer
/// built on it fires at once, so an attempt that is not ready at its first poll times out: for
/// async timeouts in virtual time use tokio's paused clock (`TokioSleep` and
/// `TokioClock`).
#[derive(Clone, Debug)]
pub struct ManualSleep {
    clock: ManualClock,
}

impl ManualSleep {
    /// A sleep that advances `clock`.
    pub fn new(clock: ManualClock) -> Self {
        ManualSleep { clock }
    }
}

impl Sleep for ManualSleep {
    fn sleep(&self, duration: Duration) -> SleepFuture {
        self.clock.advance(duration);
        Box::pin(std::future::ready(()))
    }

    fn sleep_blocking(&self, duration: Duration) {
        self.clock.advance(duration);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::Clock;

    #[test]
    fn manual_sleep_advances_its_clock() {
        let clock = ManualClock::new();
        let s = ManualSleep::new(clock.clone());
        s.sleep_blocking(Duration::from_secs(2));
        futures_lite_block_on(s.sleep(Duration::from_secs(3)));
        assert_eq!(clock.now(), reliable_core::Instant::from_secs(5));
    }

    /// Polls a future that is ready at once.
    fn futures_lite_block_on(mut f: SleepFuture) {
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        assert!(f.as_mut().poll(&mut cx).is_ready());
    }

    #[test]
    fn an_endless_timer_sleep_does_not_panic() {
        let mut f = TimerSleep.sleep(Duration::MAX);
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        assert!(f.as_mut().poll(&mut cx).is_pending());
    }

    #[tokio::test]
    async fn timer_sleep_waits() {
        let t0 = std::time::Instant::now();
        TimerSleep.sleep(Duration::from_millis(5)).await;
        assert!(t0.elapsed() >= Duration::from_millis(5));
    }
}

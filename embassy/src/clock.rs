//! [`Clock`]: where a [`Reliable`](crate::Reliable) reads the time and how it waits.

use core::future::Future;

use reliable_core::Instant;

/// A monotonic clock and a way to wait on it: all a [`Reliable`](crate::Reliable) needs from a
/// runtime. [`EmbassyClock`] is embassy-time's; implement it for any other timer.
pub trait Clock {
    /// The time now, in the clock's own epoch (the core only compares and subtracts).
    fn now(&self) -> Instant;
    /// Completes at or after `at`. Dropping it cancels the wait.
    fn sleep_until(&self, at: Instant) -> impl Future<Output = ()>;
}

/// embassy-time's clock ([`embassy_time::Instant::now`]) and timers ([`embassy_time::Timer`]),
/// at the resolution of its tick.
#[cfg(feature = "embassy")]
#[derive(Clone, Copy, Debug, Default)]
pub struct EmbassyClock;

#[cfg(feature = "embassy")]
impl Clock for EmbassyClock {
    fn now(&self) -> Instant {
        let ticks = u128::from(embassy_time::Instant::now().as_ticks());
        let nanos = ticks * 1_000_000_000 / u128::from(embassy_time::TICK_HZ);
        Instant::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    }

    fn sleep_until(&self, at: Instant) -> impl Future<Output = ()> {
        // Rounded up to the next tick, so a wait never ends before `at`.
        let ticks =
            (u128::from(at.as_nanos()) * u128::from(embassy_time::TICK_HZ)).div_ceil(1_000_000_000);
        let ticks = u64::try_from(ticks).unwrap_or(u64::MAX);
        embassy_time::Timer::at(embassy_time::Instant::from_ticks(ticks))
    }
}

//! [`Timebase`]: the scenario's virtual time on the wall clock, stretched by `--time-scale`.
//!
//! Virtual instant `v` (nanoseconds since the run's start) happens at wall instant
//! `start + v × scale`. Everything in the emulation (service times, network delays, client
//! timeouts, backoff, breaker open times, Retry-After hints) is written in the scenario's units
//! and converted here, so `scale = 2` runs a scenario twice as slowly, with every ratio kept.

use std::time::Duration as StdDuration;

use reliable::clock::Clock;
use reliable::sleep::{Sleep, SleepFuture};
use reliable_core::Instant;

/// Virtual time on tokio's clock.
#[derive(Clone, Copy, Debug)]
pub struct Timebase {
    start: tokio::time::Instant,
    scale: f64,
}

impl Timebase {
    /// Virtual zero is now; `scale` wall seconds per virtual second (> 0).
    pub fn new(scale: f64) -> Self {
        Timebase {
            start: tokio::time::Instant::now(),
            scale,
        }
    }

    /// Wall seconds per virtual second.
    pub fn scale(&self) -> f64 {
        self.scale
    }

    /// Virtual nanoseconds since the start.
    pub fn now_ns(&self) -> u64 {
        (self.start.elapsed().as_nanos() as f64 / self.scale) as u64
    }

    /// The wall instant of virtual instant `v_ns`.
    pub fn wall(&self, v_ns: u64) -> tokio::time::Instant {
        self.start + self.to_wall(v_ns)
    }

    /// A virtual span as a wall duration.
    pub fn to_wall(&self, v_ns: u64) -> StdDuration {
        StdDuration::from_nanos((v_ns as f64 * self.scale).min(1e18) as u64)
    }

    /// A wall duration as virtual nanoseconds.
    pub fn to_virtual(&self, wall: StdDuration) -> u64 {
        (wall.as_nanos() as f64 / self.scale) as u64
    }

    /// Waits until virtual instant `v_ns`.
    pub async fn sleep_until_ns(&self, v_ns: u64) {
        tokio::time::sleep_until(self.wall(v_ns)).await;
    }
}

impl Clock for Timebase {
    fn now(&self) -> Instant {
        Instant::from_nanos(self.now_ns())
    }
}

/// Waits a virtual duration (stretched by the scale).
impl Sleep for Timebase {
    fn sleep(&self, duration: StdDuration) -> SleepFuture {
        let wall = self.to_wall(u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX));
        Box::pin(tokio::time::sleep(wall))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn virtual_time_runs_at_the_scale() {
        let tb = Timebase::new(2.0);
        tokio::time::advance(StdDuration::from_secs(4)).await;
        assert_eq!(tb.now_ns(), 2_000_000_000);
        assert_eq!(tb.to_wall(1_000_000), StdDuration::from_millis(2));
        assert_eq!(tb.to_virtual(StdDuration::from_millis(10)), 5_000_000);
        Sleep::sleep(&tb, StdDuration::from_secs(1)).await;
        assert_eq!(tb.now_ns(), 3_000_000_000);
        assert_eq!(Clock::now(&tb), Instant::from_nanos(3_000_000_000));
    }
}

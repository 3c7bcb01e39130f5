//! [`Meter`]: the simulator's [`Recorder`] filled by real events, stamped with virtual time.
//!
//! Client and server run in one process, so one recorder behind a mutex sees both sides, and the
//! summary is computed by `sim`'s own definitions. Events at or after the horizon are not
//! recorded, as in `sim`. The meter also keeps what only an emulation has: how late each
//! arrival was sent compared with its schedule (the emulator's own fidelity).

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use hdrhistogram::Histogram;

use crate::simface::Recorder;
use crate::timebase::Timebase;

/// Shared measurements of one emulated run.
#[derive(Debug)]
pub struct Meter {
    tb: Timebase,
    horizon_ns: u64,
    rec: Mutex<Recorder>,
    in_flight: AtomicU64,
    peak_in_flight: AtomicU64,
    /// Send lag of arrivals (wall microseconds after their scheduled instant).
    lag_us: Mutex<Histogram<u64>>,
}

impl Meter {
    /// A meter for a run of `horizon_ns` on `tb` recording into `rec`.
    pub fn new(tb: Timebase, horizon_ns: u64, rec: Recorder) -> Self {
        Meter {
            tb,
            horizon_ns,
            rec: Mutex::new(rec),
            in_flight: AtomicU64::new(0),
            peak_in_flight: AtomicU64::new(0),
            lag_us: Mutex::new(
                Histogram::new_with_bounds(1, 3_600_000_000, 3)
                    .unwrap_or_else(|_| unreachable!("valid bounds")),
            ),
        }
    }

    /// The timebase.
    pub fn timebase(&self) -> &Timebase {
        &self.tb
    }

    /// Virtual now.
    pub fn now_ns(&self) -> u64 {
        self.tb.now_ns()
    }

    /// Runs `f` on the recorder at virtual now, unless the horizon has passed.
    pub fn at(&self, f: impl FnOnce(&mut Recorder, u64)) {
        let t = self.tb.now_ns();
        if t < self.horizon_ns {
            f(&mut self.lock(), t);
        }
    }

    /// A logical request scheduled at virtual `t` started.
    pub fn request_started_at(&self, t: u64) {
        let n = self.in_flight.fetch_add(1, Ordering::Relaxed) + 1;
        self.peak_in_flight.fetch_max(n, Ordering::Relaxed);
        if t < self.horizon_ns {
            self.lock().first_try(t);
        }
    }

    /// Gauges at the end of the bucket holding `t - 1`.
    pub fn sample(&self, t: u64, queue_len: u64, busy: u64, in_flight: u64) {
        if t <= self.horizon_ns {
            self.lock().sample(t, queue_len, busy, in_flight);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Recorder> {
        self.rec.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A logical request ended after `latency_ns` of virtual time.
    pub fn request_finished(&self, ok: bool, latency_ns: u64) {
        self.in_flight.fetch_sub(1, Ordering::Relaxed);
        self.at(|r, t| r.finish(t, ok, latency_ns));
    }

    /// Logical requests in flight.
    pub fn in_flight(&self) -> u64 {
        self.in_flight.load(Ordering::Relaxed)
    }

    /// Most logical requests in flight at once.
    pub fn peak_in_flight(&self) -> u64 {
        self.peak_in_flight.load(Ordering::Relaxed)
    }

    /// An arrival was sent `lag` (wall) after its scheduled instant.
    pub fn send_lag(&self, lag: std::time::Duration) {
        let us = (lag.as_micros() as u64).max(1);
        let mut h = self.lag_us.lock().unwrap_or_else(|e| e.into_inner());
        h.saturating_record(us);
    }

    /// Send lag percentiles in wall milliseconds: (p50, p99, max).
    pub fn lag_ms(&self) -> (f64, f64, f64) {
        let h = self.lag_us.lock().unwrap_or_else(|e| e.into_inner());
        if h.is_empty() {
            return (0.0, 0.0, 0.0);
        }
        let q = |p: f64| h.value_at_quantile(p) as f64 / 1e3;
        (q(0.5), q(0.99), h.max() as f64 / 1e3)
    }

    /// Takes the recorder out, once the run is over (an empty one is left behind).
    pub fn take_recorder(&self) -> Recorder {
        let empty = Recorder::new(1, 1, 0, None);
        std::mem::replace(&mut *self.lock(), empty)
    }
}

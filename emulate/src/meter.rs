//! [`Meter`]: the simulator's [`Recorder`] filled by real events, stamped with virtual time.
//!
//! Client and server run in one process, so one recorder behind a mutex sees both sides, and the
//! summary is computed by `sim`'s own definitions. Events at or after the horizon are not
//! recorded, as in `sim`. The meter also keeps what only an emulation has: how late each
//! arrival was sent compared with its schedule (the emulator's own fidelity).
//!
//! For stacks with hedging, a ledger or limits, the recorder keeps `sim`'s extra counters: the
//! meter holds the run's instances with a ledger (their draws by kind are read at the end from
//! each instance's snapshot) and with a limit (their limits summed at each bucket's end), and
//! counts the calls in flight through the limiters.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use hdrhistogram::Histogram;
use reliable::Reliable;

use crate::simface::{ByKind, LedgerCounts, Recorder};
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
    /// Every instance of the run with a ledger (one per client, or one shared).
    ledgers: Mutex<Vec<Reliable>>,
    /// Every instance of the run with a concurrency limit.
    limiters: Mutex<Vec<Reliable>>,
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
            ledgers: Mutex::default(),
            limiters: Mutex::default(),
        }
    }

    /// An instance of the run with a ledger, whose draws the summary reports.
    pub fn add_ledger(&self, instance: Reliable) {
        relock(&self.ledgers).push(instance);
    }

    /// An instance of the run with a concurrency limit, whose limit the gauges sum.
    pub fn add_limiter(&self, instance: Reliable) {
        relock(&self.limiters).push(instance);
    }

    /// The ledgers' draws granted and refused by kind (retry, hedge, probe: the order of
    /// `reliable_core::ledger::Extra::ALL`), summed (`None`: the run has none).
    pub fn ledger_counts(&self) -> Option<LedgerCounts> {
        let ledgers = relock(&self.ledgers);
        let (mut drawn, mut denied) = ([0u64; 3], [0u64; 3]);
        for l in ledgers.iter() {
            let s = l.snapshot();
            for k in 0..3 {
                drawn[k] += s.ledger_drawn[k];
                denied[k] += s.ledger_denied[k];
            }
        }
        (!ledgers.is_empty()).then(|| LedgerCounts {
            drawn: ByKind::from_array(drawn),
            denied: ByKind::from_array(denied),
        })
    }

    /// A limiter admitted a call (`true`), or a call it admitted ended (`false`).
    pub fn admitted(&self, up: bool) {
        self.at(|r, t| {
            if let Some(e) = &mut r.extra {
                e.admitted(t, up);
            }
        });
    }

    /// Runs `f` on the extra counters (hedges, limits), if the stack keeps them.
    pub fn extra(&self, f: impl FnOnce(&mut crate::simface::ExtraCounters)) {
        self.at(|r, _| {
            if let Some(e) = &mut r.extra {
                f(e);
            }
        });
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

    /// Gauges at the end of the bucket holding `t - 1`, `bucket_ns` wide: the server's, and the
    /// limits summed over every limiter, as `sim` samples them.
    pub fn sample(&self, t: u64, bucket_ns: u64, queue_len: u64, busy: u64, in_flight: u64) {
        if t > self.horizon_ns {
            return;
        }
        let limit = relock(&self.limiters)
            .iter()
            .map(|l| u64::from(l.snapshot().limit.unwrap_or(0)))
            .sum();
        let mut r = self.lock();
        r.sample(t, queue_len, busy, in_flight);
        if let Some(e) = &mut r.extra {
            let w = bucket_ns.max(1);
            e.sample((t.saturating_sub(1) / w) as usize, t, w, limit);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Recorder> {
        relock(&self.rec)
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
        relock(&self.lag_us).saturating_record(us);
    }

    /// Send lag percentiles in wall milliseconds: (p50, p99, max).
    pub fn lag_ms(&self) -> (f64, f64, f64) {
        let h = relock(&self.lag_us);
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

fn relock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

//! How many times a successful call reads the clock (each reading of the system clock costs about
//! 20 ns here, more than the rest of the call): none without a timeout, deadline, budget,
//! throttle, observer or timed breaker rule; with a timeout, one for the attempt's deadline (and,
//! on the blocking path, one more to check the answer came in time; on the async path, one more
//! to set the timer if the attempt has to wait); a reading for the success itself only when
//! something reads it.

use reliable::clock::{Clock, ManualClock};
use reliable::observer::Observer;
use reliable::sleep::ManualSleep;
use reliable::{Builder, Reliable};
use reliable_core::budget::{BudgetConfig, RatioConfig};
use reliable_core::{Duration as D, Instant};
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

/// A manual clock that counts its readings.
#[derive(Clone, Debug, Default)]
struct Counting {
    time: ManualClock,
    reads: Arc<AtomicU64>,
}

impl Clock for Counting {
    fn now(&self) -> Instant {
        self.reads.fetch_add(1, Ordering::Relaxed);
        self.time.now()
    }
}

#[derive(Debug)]
struct Quiet;
impl Observer for Quiet {}

fn ok() -> Result<u32, std::io::Error> {
    Ok(1)
}

/// Polls a future that is ready at once.
fn now_or_never<F: Future>(f: F) -> F::Output {
    let mut f = std::pin::pin!(f);
    match f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(v) => v,
        Poll::Pending => panic!("every call here is ready at once"),
    }
}

/// Clock readings of one successful blocking call and one async call, after a warm-up call.
fn reads(configure: impl FnOnce(Builder) -> Builder) -> (u64, u64) {
    let clock = Counting::default();
    let builder = Reliable::builder("x")
        .no_timeout()
        .clock(clock.clone())
        .sleep(ManualSleep::new(clock.time.clone()));
    let rel = configure(builder).build().unwrap();
    rel.call_blocking(ok).unwrap();
    let count = |call: &dyn Fn()| {
        let before = clock.reads.load(Ordering::Relaxed);
        call();
        clock.reads.load(Ordering::Relaxed) - before
    };
    let blocking = count(&|| assert_eq!(rel.call_blocking(ok).unwrap(), 1));
    let asynchronous = count(&|| assert_eq!(now_or_never(rel.call(|| async { ok() })).unwrap(), 1));
    (blocking, asynchronous)
}

#[test]
fn a_plain_success_reads_no_clock() {
    assert_eq!(reads(|b| b), (0, 0));
    assert_eq!(reads(|b| b.no_breaker()), (0, 0));
}

#[test]
fn a_timeout_costs_one_reading() {
    let timeout = |b: Builder| b.timeout(Duration::from_secs(8));
    // The deadline. Blocking: a success is kept even after it (nothing interrupted the work), so
    // it is not read again. Async: the timer enforces it, and the success needs no time of its
    // own.
    assert_eq!(reads(timeout), (1, 1));
    // An overall deadline bounds the attempt the same way.
    let deadline = |b: Builder| b.deadline(Duration::from_secs(30));
    assert_eq!(reads(deadline), (1, 1));
}

#[test]
fn a_success_is_timed_when_something_reads_its_time() {
    let budget = BudgetConfig::Ratio(RatioConfig {
        ratio: 1.0,
        min_per_sec: 100,
        ttl: D::from_secs(10),
        slots: 10,
    });
    // Start, and the success the budget is told about.
    assert_eq!(reads(|b| b.budget(budget)), (2, 2));
    // An observer is told how long the call took, on the same reading.
    assert_eq!(reads(|b| b.observer(Quiet)), (2, 2));
}

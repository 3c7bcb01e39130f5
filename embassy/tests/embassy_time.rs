//! `Reliable` on embassy-time (its mock time driver): the timeout is embassy's timer, the
//! attempt's future is dropped when it fires, and the backoff waits on embassy's timers. One test
//! in this binary: the mock driver's time is global.

use std::cell::Cell;
use std::future::Future;
use std::pin::pin;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Wake, Waker};

use embassy_time::{MockDriver, Timer};
use reliable_core::backoff::BackoffConfig;
use reliable_core::breaker::{BreakerConfig, BreakerPolicy, CircuitBreaker, CountWindow};
use reliable_core::budget::Unlimited;
use reliable_core::engine::Plan;
use reliable_core::outcome::ErrorClass;
use reliable_core::retry::{RetryConfig, RetryPolicy};
use reliable_core::{Duration, Instant};
use reliable_embassy::{Clock, EmbassyClock, Reliable, State};

struct DropCounter(Rc<Cell<u32>>);
impl Drop for DropCounter {
    fn drop(&mut self) {
        self.0.set(self.0.get() + 1);
    }
}

/// Records that the task asked to be polled again.
struct Woken(AtomicBool);

impl Wake for Woken {
    fn wake(self: Arc<Self>) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// Polls `fut`: again at once when it asked to be (a call's copies start at the poll after the
/// engine asks for them), else after moving the mock clock 1 ms; returns its output and the
/// time it took.
fn run_on_mock_time<F: Future>(fut: F) -> (F::Output, embassy_time::Duration) {
    let driver = MockDriver::get();
    let start = embassy_time::Instant::now();
    let woken = Arc::new(Woken(AtomicBool::new(false)));
    let waker = Waker::from(Arc::clone(&woken));
    let mut fut = pin!(fut);
    let mut cx = Context::from_waker(&waker);
    for _ in 0..100_000 {
        woken.0.store(false, Ordering::SeqCst);
        if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return (v, embassy_time::Instant::now() - start);
        }
        if !woken.0.load(Ordering::SeqCst) {
            driver.advance(embassy_time::Duration::from_millis(1));
        }
    }
    panic!("the call did not finish in 100 s of mock time");
}

#[test]
fn timeouts_and_backoff_run_on_embassy_timers() {
    let policy = RetryPolicy::new(RetryConfig {
        max_attempts: Some(3),
        attempt_timeout: Some(Duration::from_millis(100)),
        ..RetryConfig::new(BackoffConfig::constant(Duration::from_millis(50)))
    })
    .unwrap();
    let breaker = CircuitBreaker::<_, CountWindow<20>>::with_storage(
        BreakerPolicy::new(BreakerConfig::reliablekit()).unwrap(),
    )
    .unwrap();
    let rel: Reliable<_, _> = Reliable::new(
        State::new(breaker, Unlimited, 1),
        Plan::new(policy),
        EmbassyClock,
    );
    let (dropped, tries) = (Rc::new(Cell::new(0)), Cell::new(0));
    let call = rel.call(
        |_: &()| ErrorClass::Transient,
        || {
            tries.set(tries.get() + 1);
            // The first two attempts would take a second; the third answers in 10 ms.
            let takes = if tries.get() < 3 { 1_000 } else { 10 };
            let guard = DropCounter(Rc::clone(&dropped));
            async move {
                let _guard = guard;
                Timer::after_millis(takes).await;
                Ok::<_, ()>(takes)
            }
        },
    );
    let (result, took) = run_on_mock_time(call);
    assert_eq!(result, Ok(10));
    // Two timeouts of 100 ms, two waits of 50 ms, then 10 ms.
    assert_eq!(took, embassy_time::Duration::from_millis(310));
    // All three futures are gone: two dropped by their timeouts, the third after it answered.
    assert_eq!((tries.get(), dropped.get()), (3, 3));
    // The clock the core reads is embassy's.
    let now = EmbassyClock.now();
    assert_eq!(
        now,
        Instant::from_micros(embassy_time::Instant::now().as_micros())
    );
}

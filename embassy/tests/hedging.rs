//! Hedging on embassy-time (its mock driver): the engine asks for a second copy while the first
//! is unanswered, both run inside the call's future, the first success wins and the loser's
//! future is dropped at once. One test in this binary: the mock driver's time is global.

use std::cell::Cell;
use std::future::Future;
use std::pin::pin;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Wake, Waker};

use embassy_time::{MockDriver, Timer};
use reliable_core::Duration;
use reliable_core::backoff::BackoffConfig;
use reliable_core::budget::Unlimited;
use reliable_core::engine::Plan;
use reliable_core::hedge::{HedgeConfig, HedgeDelay, HedgePolicy, Hedger, Idempotency};
use reliable_core::outcome::ErrorClass;
use reliable_core::retry::{RetryConfig, RetryPolicy};
use reliable_embassy::{EmbassyClock, Extras, NoBreaker, Reliable, State};

/// A `Reliable` (its state in critical-section cells, its plan in flash) can sit in a `static`
/// shared by tasks of several priorities: it is `Sync`.
const _: fn() = || {
    use reliable_core::breaker::{BreakerPolicy, CircuitBreaker, CountWindow};
    use reliable_core::budget::TokenBucket;
    fn sync<T: Sync>() {}
    type Breaker = CircuitBreaker<&'static BreakerPolicy, CountWindow<8>>;
    sync::<Reliable<State<Breaker, TokenBucket, Extras>, EmbassyClock, &'static Plan, 2>>();
};

struct DropCounter(Rc<Cell<u32>>);
impl Drop for DropCounter {
    fn drop(&mut self) {
        self.0.set(self.0.get() + 1);
    }
}

struct Woken(AtomicBool);
impl Wake for Woken {
    fn wake(self: Arc<Self>) {
        self.0.store(true, Ordering::SeqCst);
    }
}

#[test]
fn a_hedge_wins_and_the_first_copy_is_dropped_when_it_does() {
    let plan = Plan::new(
        RetryPolicy::new(RetryConfig {
            max_attempts: Some(1),
            attempt_timeout: Some(Duration::from_secs(2)),
            ..RetryConfig::new(BackoffConfig::constant(Duration::from_millis(50)))
        })
        .unwrap(),
    )
    .idempotency(Idempotency::Idempotent);
    let hedger = Hedger::new(
        HedgePolicy::new(HedgeConfig {
            delay: HedgeDelay::Fixed(Duration::from_millis(50)),
            max_hedges: 1,
        })
        .unwrap(),
    );
    let state = State::with_extra(NoBreaker, Unlimited, 1, Extras::new().with_hedger(hedger));
    let rel: Reliable<_, _, _, 2> = Reliable::new(state, plan, EmbassyClock);

    let (sent, dropped) = (Cell::new(0u32), Rc::new(Cell::new(0u32)));
    let call = rel.call(
        |_: &()| ErrorClass::Transient,
        || {
            sent.set(sent.get() + 1);
            // The first copy would take a second; the hedge answers in 10 ms.
            let takes = if sent.get() == 1 { 1_000 } else { 10 };
            let guard = DropCounter(Rc::clone(&dropped));
            async move {
                let _guard = guard;
                Timer::after_millis(takes).await;
                Ok::<_, ()>(takes)
            }
        },
    );

    let driver = MockDriver::get();
    let start = embassy_time::Instant::now();
    let woken = Arc::new(Woken(AtomicBool::new(false)));
    let waker = Waker::from(Arc::clone(&woken));
    let mut cx = Context::from_waker(&waker);
    let mut call = pin!(call);
    let mut result = None;
    for _ in 0..10_000 {
        woken.0.store(false, Ordering::SeqCst);
        if let Poll::Ready(v) = call.as_mut().poll(&mut cx) {
            result = Some(v);
            break;
        }
        if !woken.0.load(Ordering::SeqCst) {
            driver.advance(embassy_time::Duration::from_millis(1));
        }
    }
    // The hedge went out at 50 ms and answered at 60 ms.
    assert_eq!(result, Some(Ok(10)));
    assert_eq!(
        embassy_time::Instant::now() - start,
        embassy_time::Duration::from_millis(60)
    );
    // Both copies are gone when the call returns: the loser (a second of work) was dropped.
    assert_eq!((sent.get(), dropped.get()), (2, 2));
}

//! The blocking path allocates nothing per call: a success through a closed breaker, a retried
//! failure, with a budget and a timeout, on the system clock. Nor does an async call whose answer
//! is ready at once, timeout or not (its timer is made only if the attempt has to wait). The
//! counter is the core's per-thread counting allocator; the last test is its negative control.

#[path = "../../core/tests/support/counting_alloc.rs"]
mod counting_alloc;

use counting_alloc::counted;
use reliable::Reliable;
use reliable::clock::{ManualClock, SystemClock};
use reliable_core::Duration as D;
use reliable_core::budget::{BudgetConfig, RatioConfig};
use std::time::Duration;

fn ok() -> Result<u64, std::io::Error> {
    Ok(std::hint::black_box(7))
}

/// Calls `f` once to warm up, then 1,000 times, counting allocations.
fn allocations(rel: &Reliable, mut f: impl FnMut() -> Result<u64, std::io::Error>) -> u64 {
    assert_eq!(rel.call_blocking(&mut f).unwrap(), 7);
    let ((), n) = counted(|| {
        for _ in 0..1_000 {
            assert_eq!(rel.call_blocking(&mut f).unwrap(), 7);
        }
    });
    n
}

#[test]
fn a_successful_blocking_call_allocates_nothing() {
    let rel = Reliable::builder("x")
        .clock(SystemClock::new())
        .no_timeout()
        .build()
        .unwrap();
    assert_eq!(allocations(&rel, ok), 0);
}

#[test]
fn with_a_timeout_a_budget_and_retries_it_still_allocates_nothing() {
    let clock = ManualClock::new();
    let rel = Reliable::builder("x")
        .timeout(Duration::from_secs(1))
        .budget(BudgetConfig::Ratio(RatioConfig {
            ratio: 1.0,
            min_per_sec: 100,
            ttl: D::from_secs(10),
            slots: 10,
        }))
        .manual_time(clock)
        .build()
        .unwrap();
    assert_eq!(allocations(&rel, ok), 0);
    // Every third attempt fails and is retried after a (manual) backoff wait; a third of the
    // attempts failing keeps the breaker (50% over 20 calls) closed.
    let mut n = 0u32;
    let flaky = move || {
        n += 1;
        if n.is_multiple_of(3) {
            Err(std::io::Error::from(std::io::ErrorKind::ConnectionReset))
        } else {
            ok()
        }
    };
    assert_eq!(allocations(&rel, flaky), 0);
    assert!(rel.snapshot().retries >= 400, "{:?}", rel.snapshot());
}

#[test]
fn an_async_call_answered_at_once_allocates_nothing() {
    use std::future::Future;
    use std::task::{Context, Poll, Waker};
    fn poll_once<F: Future>(f: F) -> Option<F::Output> {
        let mut f = std::pin::pin!(f);
        match f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(v) => Some(v),
            Poll::Pending => None,
        }
    }
    for timeout in [None, Some(Duration::from_secs(8))] {
        let mut b = Reliable::builder("x")
            .clock(SystemClock::new())
            .no_timeout();
        if let Some(t) = timeout {
            b = b.timeout(t);
        }
        let rel = b.build().unwrap();
        let call = || poll_once(rel.call(|| async { ok() })).map(Result::unwrap);
        assert_eq!(call(), Some(7));
        let ((), n) = counted(|| {
            for _ in 0..1_000 {
                assert_eq!(call(), Some(7));
            }
        });
        assert_eq!(n, 0, "timeout {timeout:?}");
    }
}

#[test]
fn negative_control_an_allocating_closure_is_seen() {
    let rel = Reliable::builder("x")
        .clock(SystemClock::new())
        .build()
        .unwrap();
    let n = allocations(&rel, || Ok(std::hint::black_box(vec![7u64])[0]));
    assert_eq!(n, 1_000);
}

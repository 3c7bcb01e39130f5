//! A `Reliable` built with the default features (tokio's timer) runs under an executor that is not
//! tokio: its backoff waits fall back to a runtime-free timer instead of panicking.

use reliable::Reliable;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

#[test]
fn retries_with_backoff_under_futures_block_on() {
    let rel = Reliable::builder("outside-tokio")
        .attempts(3)
        .base_delay(Duration::from_millis(20))
        .jitter(0.0)
        .no_breaker()
        .build()
        .unwrap();
    let calls = AtomicU32::new(0);
    let start = Instant::now();
    let result = futures_executor::block_on(rel.call(|| {
        let n = calls.fetch_add(1, Ordering::SeqCst) + 1;
        async move {
            if n < 3 {
                Err(std::io::Error::other("flaky"))
            } else {
                Ok(n)
            }
        }
    }));
    assert_eq!(result.unwrap(), 3);
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    // The two waits (20 ms, then 40 ms) really happened.
    assert!(start.elapsed() >= Duration::from_millis(60));
}

#[test]
fn times_out_an_attempt_under_futures_block_on() {
    let rel = Reliable::builder("outside-tokio-timeout")
        .attempts(1)
        .timeout(Duration::from_millis(20))
        .no_breaker()
        .build()
        .unwrap();
    let result: Result<(), _> = futures_executor::block_on(
        rel.call(|| async { std::future::pending::<Result<(), std::io::Error>>().await }),
    );
    assert!(result.is_err(), "{result:?}");
}

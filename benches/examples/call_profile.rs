//! Runs one kind of successful call many times, for instruction counts under callgrind
//! (repeatable, unlike wall time on a shared machine):
//!
//! ```sh
//! cargo build -p reliable-benches --example call_profile --profile bench
//! valgrind --tool=callgrind target/release/examples/call_profile reliable_blocking 1000000
//! ```
//!
//! Kinds: `bare`, `reliable_blocking`, `reliable_blocking_consecutive`, `reliable_async`,
//! `failsafe_default`, `failsafe_consecutive`, `backon_blocking`.

use reliable::Reliable;
use reliable::clock::SystemClock;
use reliable_core::breaker::BreakerConfig;
use std::future::Future;
use std::hint::black_box;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

fn ok() -> Result<u64, std::io::Error> {
    Ok(black_box(1))
}

fn poll_once<F: Future>(f: F) -> Option<F::Output> {
    let mut f = std::pin::pin!(f);
    match f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(v) => Some(v),
        Poll::Pending => None,
    }
}

fn ours(consecutive: bool) -> Reliable {
    let b = Reliable::builder("profile")
        .clock(SystemClock::new())
        .no_timeout();
    let b = if consecutive {
        b.breaker(BreakerConfig {
            consecutive_failures: Some(3),
            ..BreakerConfig::new()
        })
    } else {
        b
    };
    b.build().expect("valid")
}

fn main() {
    let mut args = std::env::args().skip(1);
    let kind = args.next().unwrap_or_default();
    let n: u64 = args
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let mut sum = 0u64;
    match kind.as_str() {
        "bare" => (0..n).for_each(|_| sum += ok().unwrap_or(0)),
        "reliable_blocking" | "reliable_blocking_consecutive" => {
            let rel = ours(kind.ends_with("consecutive"));
            (0..n).for_each(|_| sum += rel.call_blocking(ok).unwrap_or(0));
        }
        "reliable_async" => {
            let rel = ours(false);
            (0..n).for_each(|_| {
                sum += poll_once(rel.call(|| async { ok() }))
                    .and_then(Result::ok)
                    .unwrap_or(0)
            });
        }
        "failsafe_default" => {
            let fs = failsafe::Config::new().build();
            (0..n).for_each(|_| sum += failsafe::CircuitBreaker::call(&fs, ok).unwrap_or(0));
        }
        "failsafe_consecutive" => {
            let fs = failsafe::Config::new()
                .failure_policy(failsafe::failure_policy::consecutive_failures(
                    3,
                    failsafe::backoff::constant(Duration::from_secs(30)),
                ))
                .build();
            (0..n).for_each(|_| sum += failsafe::CircuitBreaker::call(&fs, ok).unwrap_or(0));
        }
        "backon_blocking" => {
            use backon::{BlockingRetryable, ExponentialBuilder};
            (0..n).for_each(|_| {
                sum += ok
                    .retry(ExponentialBuilder::default().with_jitter())
                    .sleep(std::thread::sleep)
                    .call()
                    .unwrap_or(0)
            });
        }
        _ => {
            eprintln!(
                "kinds: bare reliable_blocking reliable_blocking_consecutive reliable_async failsafe_default failsafe_consecutive backon_blocking"
            );
            std::process::exit(2);
        }
    }
    println!("{kind}: {n} calls, sum {sum}");
}

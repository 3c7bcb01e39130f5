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
//!
//! `call_profile time [ROUNDS] [CALLS]` instead times every kind, interleaved, `ROUNDS` times
//! (default 30) over `CALLS` calls (default 200,000), and prints each kind's fastest round in ns
//! per call: the minimum discards rounds slowed by other processes, which on a shared machine is
//! most of the noise in a mean or median.

use reliable::Reliable;
use reliable::clock::SystemClock;
use reliable_core::Instant;
use reliable_core::breaker::{BreakerConfig, BreakerPolicy, NoWindow, Outcome, SharedBreaker};
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

fn consecutive3() -> BreakerConfig {
    BreakerConfig {
        consecutive_failures: Some(3),
        ..BreakerConfig::new()
    }
}

fn ours(consecutive: bool) -> Reliable {
    let b = Reliable::builder("profile")
        .clock(SystemClock::new())
        .no_timeout();
    let b = if consecutive {
        b.breaker(consecutive3())
    } else {
        b
    };
    b.build().expect("valid")
}

/// A kind of call, and a closure that makes `n` of them.
type Kind = (&'static str, Box<dyn FnMut(u64) -> u64>);

/// Every kind.
fn kinds() -> Vec<Kind> {
    let blocking = ours(false);
    let consecutive = ours(true);
    let asynchronous = ours(false);
    let fs_default = failsafe::Config::new().build();
    let fs_consecutive = failsafe::Config::new()
        .failure_policy(failsafe::failure_policy::consecutive_failures(
            3,
            failsafe::backoff::constant(Duration::from_secs(30)),
        ))
        .build();
    let breaker = SharedBreaker::<_, NoWindow, 8, ()>::with_storage(
        BreakerPolicy::new(consecutive3()).expect("valid"),
    )
    .expect("fits");
    vec![
        (
            "core_shared_breaker_consecutive",
            // reliable-core's breaker alone, as a closed fast path uses it: acquire + record.
            Box::new(move |n| {
                (0..n)
                    .map(|_| {
                        let Ok(p) = breaker.try_acquire(Instant::ZERO) else {
                            return 0;
                        };
                        breaker.record(p, Outcome::Success, Instant::ZERO);
                        ok().unwrap_or(0)
                    })
                    .sum()
            }),
        ),
        (
            "bare",
            Box::new(|n| (0..n).map(|_| ok().unwrap_or(0)).sum()),
        ),
        (
            "reliable_blocking",
            Box::new(move |n| {
                (0..n)
                    .map(|_| blocking.call_blocking(ok).unwrap_or(0))
                    .sum()
            }),
        ),
        (
            "reliable_blocking_consecutive",
            Box::new(move |n| {
                (0..n)
                    .map(|_| consecutive.call_blocking(ok).unwrap_or(0))
                    .sum()
            }),
        ),
        (
            "reliable_async",
            Box::new(move |n| {
                (0..n)
                    .map(|_| {
                        poll_once(asynchronous.call(|| async { ok() }))
                            .and_then(Result::ok)
                            .unwrap_or(0)
                    })
                    .sum()
            }),
        ),
        (
            "bare_async",
            Box::new(|n| {
                (0..n)
                    .map(|_| poll_once(async { ok() }).and_then(Result::ok).unwrap_or(0))
                    .sum()
            }),
        ),
        (
            "backon_retry_async",
            Box::new(|n| {
                use backon::{ExponentialBuilder, Retryable};
                (0..n)
                    .map(|_| {
                        poll_once(
                            (|| async { ok() })
                                .retry(ExponentialBuilder::default().with_jitter())
                                .sleep(tokio::time::sleep),
                        )
                        .and_then(Result::ok)
                        .unwrap_or(0)
                    })
                    .sum()
            }),
        ),
        (
            "failsafe_call_default",
            Box::new(move |n| {
                (0..n)
                    .map(|_| failsafe::CircuitBreaker::call(&fs_default, ok).unwrap_or(0))
                    .sum()
            }),
        ),
        (
            "failsafe_call_consecutive",
            Box::new(move |n| {
                (0..n)
                    .map(|_| failsafe::CircuitBreaker::call(&fs_consecutive, ok).unwrap_or(0))
                    .sum()
            }),
        ),
        (
            "backon_retry_blocking",
            Box::new(|n| {
                use backon::{BlockingRetryable, ExponentialBuilder};
                (0..n)
                    .map(|_| {
                        ok.retry(ExponentialBuilder::default().with_jitter())
                            .sleep(std::thread::sleep)
                            .call()
                            .unwrap_or(0)
                    })
                    .sum()
            }),
        ),
    ]
}

fn time(rounds: u32, calls: u64) {
    let mut kinds = kinds();
    let mut best = vec![f64::INFINITY; kinds.len()];
    for _ in 0..rounds {
        for (i, (_, run)) in kinds.iter_mut().enumerate() {
            let t0 = std::time::Instant::now();
            black_box(run(black_box(calls)));
            let ns = t0.elapsed().as_nanos() as f64 / calls as f64;
            best[i] = best[i].min(ns);
        }
    }
    println!("fastest of {rounds} rounds of {calls} calls, ns per call");
    for ((name, _), ns) in kinds.iter().zip(&best) {
        println!("{name:<32} {ns:>8.2}");
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let kind = args.next().unwrap_or_default();
    if kind == "time" {
        let rounds = args.next().and_then(|s| s.parse().ok()).unwrap_or(30);
        let calls = args.next().and_then(|s| s.parse().ok()).unwrap_or(200_000);
        return time(rounds, calls);
    }
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

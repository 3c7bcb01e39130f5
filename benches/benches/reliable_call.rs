//! The cost of making a call reliable: a successful call through `reliable::Reliable`, blocking and
//! async, against the bare call, failsafe 1.3's `CircuitBreaker::call` and backon 1.6's `retry`,
//! in one group and one run. Overhead = a figure minus `bare`.
//!
//! `cargo bench -p reliable-benches --bench reliable_call`; see `benches/README.md`.
//!
//! - The call itself returns `Ok(black_box(1))`: all that is measured is the wrapping.
//! - Ours use the **system clock** (`SystemClock`) and the default builder: a breaker that trips at
//!   50% failures over 20 calls (a count window, written on every call), 5 attempts with jittered
//!   backoff. Without a timeout, deadline, budget or observer, a success through a closed breaker
//!   does not read the clock at all; `_timeout` adds the default builder's 8 s per-attempt
//!   timeout, which reads it twice per blocking call (for the attempt's deadline, then to check
//!   it) and once per async call (for the deadline: an async attempt that answers at once needs
//!   no timer, so the tokio sleep is never made here).
//! - `_consecutive`: a breaker that opens after 3 failures in a row, like failsafe's
//!   `consecutive_failures(3)`. The fair comparison is the matched one: ours by default (a failure
//!   rate over a window) against `failsafe_call_default` (a success rate over a time window, or 5
//!   in a row), ours `_consecutive` against `failsafe_call_consecutive`.
//! - Async figures poll the call's future once with a no-op waker, no runtime: the inner future is
//!   ready at once, so this is the wrapping alone. backon's async retry is polled the same way.
//! - failsafe has no retries and backon no breaker; ours do both.
//! - `reliable_call_success_two_threads`: the same calls on two threads at once, one instance
//!   shared by both (ours lock-free, failsafe's behind its mutex): time per call on each thread.

use criterion::{Criterion, criterion_group, criterion_main};
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

/// Polls a future that must be ready at once.
fn poll_once<F: Future>(f: F) -> F::Output {
    let mut f = std::pin::pin!(f);
    match f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(v) => v,
        Poll::Pending => unreachable!("every call here succeeds at once"),
    }
}

fn ours(timeout: bool, consecutive: bool) -> Reliable {
    let mut b = Reliable::builder("bench")
        .clock(SystemClock::new())
        .no_timeout();
    if timeout {
        b = b.timeout(Duration::from_secs(8));
    }
    if consecutive {
        b = b.breaker(BreakerConfig {
            consecutive_failures: Some(3),
            ..BreakerConfig::new()
        });
    }
    b.build().expect("valid")
}

fn successful_call(c: &mut Criterion) {
    let mut g = c.benchmark_group("reliable_call_success");

    g.bench_function("bare", |b| b.iter(|| black_box(ok())));
    for (name, rel) in [
        ("reliable_blocking", ours(false, false)),
        ("reliable_blocking_consecutive", ours(false, true)),
        ("reliable_blocking_timeout", ours(true, false)),
    ] {
        g.bench_function(name, |b| b.iter(|| black_box(rel.call_blocking(ok))));
    }

    let fs = failsafe::Config::new().build();
    g.bench_function("failsafe_call_default", |b| {
        b.iter(|| black_box(failsafe::CircuitBreaker::call(&fs, ok)))
    });
    let fs = failsafe::Config::new()
        .failure_policy(failsafe::failure_policy::consecutive_failures(
            3,
            failsafe::backoff::constant(Duration::from_secs(30)),
        ))
        .build();
    g.bench_function("failsafe_call_consecutive", |b| {
        b.iter(|| black_box(failsafe::CircuitBreaker::call(&fs, ok)))
    });
    g.bench_function("backon_retry_blocking", |b| {
        use backon::{BlockingRetryable, ExponentialBuilder};
        b.iter(|| {
            black_box(
                ok.retry(ExponentialBuilder::default().with_jitter())
                    .sleep(std::thread::sleep)
                    .call(),
            )
        })
    });

    g.bench_function("bare_async", |b| {
        b.iter(|| black_box(poll_once(async { ok() })))
    });
    for (name, rel) in [
        ("reliable_async", ours(false, false)),
        ("reliable_async_consecutive", ours(false, true)),
        ("reliable_async_timeout", ours(true, false)),
    ] {
        g.bench_function(name, |b| {
            b.iter(|| black_box(poll_once(rel.call(|| async { ok() }))))
        });
    }
    g.bench_function("backon_retry_async", |b| {
        use backon::{ExponentialBuilder, Retryable};
        b.iter(|| {
            black_box(poll_once(
                (|| async { ok() })
                    .retry(ExponentialBuilder::default().with_jitter())
                    .sleep(tokio::time::sleep),
            ))
        })
    });
    g.finish();
}

/// `iters` calls of `call` on each of two threads at once: the time per call when two cores
/// call one shared instance.
fn two_threads(iters: u64, call: &(dyn Fn() + Sync)) -> Duration {
    let start = std::time::Instant::now();
    std::thread::scope(|s| {
        s.spawn(|| (0..iters).for_each(|_| call()));
        (0..iters).for_each(|_| call());
    });
    start.elapsed()
}

fn successful_call_two_threads(c: &mut Criterion) {
    let mut g = c.benchmark_group("reliable_call_success_two_threads");
    for (name, rel) in [
        ("reliable_blocking", ours(false, false)),
        ("reliable_blocking_consecutive", ours(false, true)),
    ] {
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                two_threads(iters, &|| {
                    black_box(rel.call_blocking(ok)).ok();
                })
            })
        });
    }
    let fs = failsafe::Config::new().build();
    g.bench_function("failsafe_call_default", |b| {
        b.iter_custom(|iters| {
            two_threads(iters, &|| {
                black_box(failsafe::CircuitBreaker::call(&fs, ok)).ok();
            })
        })
    });
    let fs = failsafe::Config::new()
        .failure_policy(failsafe::failure_policy::consecutive_failures(
            3,
            failsafe::backoff::constant(Duration::from_secs(30)),
        ))
        .build();
    g.bench_function("failsafe_call_consecutive", |b| {
        b.iter_custom(|iters| {
            two_threads(iters, &|| {
                black_box(failsafe::CircuitBreaker::call(&fs, ok)).ok();
            })
        })
    });
    g.finish();
}

criterion_group!(benches, successful_call, successful_call_two_threads);
criterion_main!(benches);

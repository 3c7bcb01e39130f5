//! Runs one kind of successful call many times, for instruction counts under callgrind
//! (repeatable, unlike wall time on a shared machine):
//!
//! ```sh
//! cargo build -p reliable-benches --example call_profile --profile bench
//! valgrind --tool=callgrind target/release/examples/call_profile reliable_blocking 1000000
//! ```
//!
//! Per-call figures: the difference between a run of `2N` and one of `N` calls, over `N` (it
//! leaves out the setup). Run it without a kind for the list of kinds.
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

/// Ours on the system clock: the default builder's breaker (50% of 20 calls) or one that opens
/// after 3 failures in a row; without a timeout, or with the default builder's 8 s.
fn ours(consecutive: bool, timeout: bool) -> Reliable {
    let mut b = Reliable::builder("profile")
        .clock(SystemClock::new())
        .no_timeout();
    if consecutive {
        b = b.breaker(consecutive3());
    }
    if timeout {
        b = b.timeout(Duration::from_secs(8));
    }
    b.build().expect("valid")
}

/// Ours with the default breaker and a 10% ratio retry budget: every call through the engine.
fn engine() -> Reliable {
    Reliable::builder("profile")
        .clock(SystemClock::new())
        .no_timeout()
        .budget(reliable_core::budget::BudgetConfig::Ratio(
            reliable_core::budget::RatioConfig::percent(0.1),
        ))
        .build()
        .expect("valid")
}

/// A timer that never fires and costs nothing to make (a boxed zero-sized future does not
/// allocate): what the async wrapping costs with a timeout, without any runtime's timer.
#[derive(Debug)]
struct NeverFires;

impl reliable::sleep::Sleep for NeverFires {
    fn sleep(&self, _: Duration) -> reliable::sleep::SleepFuture {
        Box::pin(std::future::pending())
    }
}

/// reliable-core's lock-free breaker alone, opening after 3 failures in a row.
fn core_breaker() -> SharedBreaker<BreakerPolicy, NoWindow, 8, ()> {
    SharedBreaker::with_storage(BreakerPolicy::new(consecutive3()).expect("valid")).expect("fits")
}

/// `n` blocking calls through `rel`.
fn blocking(rel: Reliable) -> Box<dyn FnMut(u64) -> u64> {
    Box::new(move |n| (0..n).map(|_| rel.call_blocking(ok).unwrap_or(0)).sum())
}

/// `n` async calls through `rel`, each polled once.
fn asynchronous(rel: Reliable) -> Box<dyn FnMut(u64) -> u64> {
    Box::new(move |n| {
        (0..n)
            .map(|_| {
                poll_once(rel.call(|| async { ok() }))
                    .and_then(Result::ok)
                    .unwrap_or(0)
            })
            .sum()
    })
}

/// `n` blocking calls through `rel` on each of two threads at once (one instance, shared), for
/// what calls on different cores cost each other.
fn blocking_two_threads(rel: Reliable) -> Box<dyn FnMut(u64) -> u64> {
    Box::new(move |n| {
        // A closure of its own, not `ok`: a second caller of the same instance of `call_blocking`
        // would change how the single-thread kinds are inlined.
        let each = |rel: &Reliable| {
            (0..n)
                .map(|_| {
                    rel.call_blocking(|| Ok::<u64, std::io::Error>(black_box(1)))
                        .unwrap_or(0)
                })
                .sum()
        };
        std::thread::scope(|s| {
            let other = s.spawn(|| each(&rel));
            each(&rel) + other.join().unwrap_or(0)
        })
    })
}

/// `n` calls through failsafe's breaker.
fn failsafe_calls(fs: impl failsafe::CircuitBreaker + 'static) -> Box<dyn FnMut(u64) -> u64> {
    Box::new(move |n| (0..n).map(|_| fs.call(ok).unwrap_or(0)).sum())
}

/// A tower service answering at once, for what a layer around it costs.
#[derive(Clone, Copy)]
struct Ready;

impl tower::Service<u64> for Ready {
    type Response = u64;
    type Error = std::io::Error;
    type Future = std::future::Ready<Result<u64, std::io::Error>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: u64) -> Self::Future {
        std::future::ready(Ok(black_box(req)))
    }
}

/// Answers for the chaos layer over `u64` (never used while it is switched off).
#[derive(Clone, Copy)]
struct Numbers;

impl reliable::chaos::tower::Inject<u64> for Numbers {
    fn inject(&self, _: reliable_core::answer::Answer) -> Result<u64, reliable::tower::BoxError> {
        Ok(0)
    }

    fn success(&self, _: &u64) -> bool {
        true
    }
}

/// `n` calls of `svc` (ready, then called, the answer polled once).
fn tower_calls<S>(mut svc: S) -> Box<dyn FnMut(u64) -> u64>
where
    S: tower::Service<u64, Response = u64> + 'static,
{
    Box::new(move |n| {
        let mut cx = Context::from_waker(Waker::noop());
        (0..n)
            .map(|i| {
                if svc.poll_ready(&mut cx).is_pending() {
                    return 0;
                }
                poll_once(svc.call(i)).and_then(Result::ok).unwrap_or(0)
            })
            .sum()
    })
}

/// A chaos layer with a fault armed but switched off, around [`Ready`].
fn chaos_off() -> impl tower::Service<u64, Response = u64> {
    use reliable::chaos::ChaosSwitch;
    use reliable_core::chaos::{ChaosConfig, FaultConfig, Injected};
    use tower::Layer;
    let switch = ChaosSwitch::new(
        "profile",
        ChaosConfig {
            fault: Some(FaultConfig {
                rate: 0.5,
                enabled: false,
                seed: 1,
                answer: Injected::Reset,
            }),
            ..ChaosConfig::OFF
        },
    )
    .expect("valid");
    reliable::chaos::tower::ChaosLayer::new(switch, Numbers).layer(Ready)
}

/// A kind of call, and a closure that makes `n` of them.
type Kind = (&'static str, Box<dyn FnMut(u64) -> u64>);

/// Every kind.
fn kinds() -> Vec<Kind> {
    let breaker = core_breaker();
    vec![
        (
            "bare",
            Box::new(|n| (0..n).map(|_| ok().unwrap_or(0)).sum()),
        ),
        (
            // reliable-core's breaker alone, as a closed fast path uses it: acquire + record.
            "core_shared_breaker_consecutive",
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
        ("reliable_blocking", blocking(ours(false, false))),
        ("reliable_blocking_consecutive", blocking(ours(true, false))),
        // With a retry budget a success needs the time: every call runs through the engine
        // (the breaker and the budget asked through its shared state), not the fast path.
        ("reliable_blocking_engine", blocking(engine())),
        ("reliable_async_engine", asynchronous(engine())),
        ("reliable_blocking_timeout", blocking(ours(false, true))),
        (
            "reliable_blocking_two_threads",
            blocking_two_threads(ours(false, false)),
        ),
        ("reliable_async", asynchronous(ours(false, false))),
        (
            "reliable_async_consecutive",
            asynchronous(ours(true, false)),
        ),
        (
            "reliable_async_timeout",
            asynchronous(
                Reliable::builder("profile")
                    .clock(SystemClock::new())
                    .sleep(NeverFires)
                    .timeout(Duration::from_secs(8))
                    .build()
                    .expect("valid"),
            ),
        ),
        (
            "bare_async",
            Box::new(|n| {
                (0..n)
                    .map(|_| poll_once(async { ok() }).and_then(Result::ok).unwrap_or(0))
                    .sum()
            }),
        ),
        ("tower_bare", tower_calls(Ready)),
        ("tower_chaos_off", tower_calls(chaos_off())),
        (
            "failsafe_call_default",
            failsafe_calls(failsafe::Config::new().build()),
        ),
        (
            "failsafe_call_consecutive",
            failsafe_calls(
                failsafe::Config::new()
                    .failure_policy(failsafe::failure_policy::consecutive_failures(
                        3,
                        failsafe::backoff::constant(Duration::from_secs(30)),
                    ))
                    .build(),
            ),
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
    let mut kinds = kinds();
    let Some((_, run)) = kinds.iter_mut().find(|(name, _)| *name == kind) else {
        let names: Vec<&str> = kinds.iter().map(|(name, _)| *name).collect();
        eprintln!("kinds: time {}", names.join(" "));
        std::process::exit(2);
    };
    let sum = run(black_box(n));
    println!("{kind}: {n} calls, sum {sum}");
}

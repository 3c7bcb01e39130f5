//! One breaker shared by two threads, each making calls that succeed as fast as it can: the
//! figure is wall time per call (both threads together), so lower is more throughput.
//!
//! `SharedBreaker` gets `now` passed in, advancing on both threads (so its latest-`now` word is
//! written by both); `shared_*_clock` read `Instant::now()` per call as a server would. failsafe
//! keeps its state behind a mutex; recloser behind a crossbeam-epoch pointer with a spin lock on
//! its ring buffer. Yardsticks: two threads doing `fetch_add` on one shared atomic, and two threads
//! reading the clock twice per call (what `shared_rate100_clock` adds to `shared_rate100`).

use std::hint::black_box;
use std::sync::Barrier;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration as StdDuration, Instant as StdInstant};

use criterion::Criterion;
use failsafe::{backoff, failure_policy::consecutive_failures};
use recloser::Recloser;
use reliable_core::breaker::{
    AtomicCountWindow, BreakerConfig, BreakerPolicy, NoWindow, OpenConfig, Outcome, SharedBreaker,
    WindowConfig,
};
use reliable_core::{Duration, Instant};

const THREADS: u64 = 2;

/// Runs `iters` calls of `call(thread, i)` split over two threads (this one and one spawned),
/// and returns the wall time from the start signal until both are done.
fn on_two_threads<F: Fn(u64, u64) + Sync>(iters: u64, call: F) -> StdDuration {
    let start = Barrier::new(THREADS as usize);
    let per_thread = iters.div_ceil(THREADS);
    std::thread::scope(|s| {
        let (start, call) = (&start, &call);
        s.spawn(move || {
            start.wait();
            for i in 0..per_thread {
                call(1, i);
            }
        });
        start.wait();
        let t0 = StdInstant::now();
        for i in 0..per_thread {
            call(0, i);
        }
        // Leaving the scope joins the other thread: it is inside the measurement.
        t0
    })
    .elapsed()
}

fn leak(config: BreakerConfig) -> &'static BreakerPolicy {
    Box::leak(Box::new(BreakerPolicy::new(config).expect("valid config")))
}

fn open() -> OpenConfig {
    OpenConfig {
        duration: Duration::from_secs(30),
        growth: 1.0,
        max: None,
        jitter: 0.0,
        strictly_after: false,
    }
}

pub fn two_threads(c: &mut Criterion) {
    let mut g = c.benchmark_group("breaker_shared_2_threads");
    let consecutive = leak(BreakerConfig {
        consecutive_failures: Some(3),
        open: open(),
        ..BreakerConfig::new()
    });
    let rate100 = leak(BreakerConfig {
        failure_rate: Some(0.5),
        minimum_calls: 100,
        window: WindowConfig::Count { calls: 100 },
        open: open(),
        ..BreakerConfig::new()
    });
    // `now` per call: thread t's i-th call is at 2·i + t (ns), so both threads advance it.
    let at = |t: u64, i: u64| Instant::from_nanos(1_000 + THREADS * i + t);

    let b = SharedBreaker::<_, NoWindow>::with_storage(consecutive).expect("fits");
    g.bench_function("shared_consecutive", |bench| {
        bench.iter_custom(|iters| {
            on_two_threads(iters, |t, i| {
                let now = black_box(at(t, i));
                if let Ok(p) = b.try_acquire(now) {
                    black_box(&b.record(p, black_box(Outcome::Success), now));
                }
            })
        })
    });
    let b = SharedBreaker::<_, AtomicCountWindow<100, 2>>::with_storage(rate100).expect("fits");
    g.bench_function("shared_rate100", |bench| {
        bench.iter_custom(|iters| {
            on_two_threads(iters, |t, i| {
                let now = black_box(at(t, i));
                if let Ok(p) = b.try_acquire(now) {
                    black_box(&b.record(p, black_box(Outcome::Success), now));
                }
            })
        })
    });
    let origin = StdInstant::now();
    let clock = || Instant::from_nanos(origin.elapsed().as_nanos() as u64);
    let b = SharedBreaker::<_, AtomicCountWindow<100, 2>>::with_storage(rate100).expect("fits");
    g.bench_function("shared_rate100_clock", |bench| {
        bench.iter_custom(|iters| {
            on_two_threads(iters, |_, _| {
                if let Ok(p) = b.try_acquire(clock()) {
                    black_box(&b.record(p, black_box(Outcome::Success), clock()));
                }
            })
        })
    });

    let fs = failsafe::Config::new()
        .failure_policy(consecutive_failures(
            3,
            backoff::constant(StdDuration::from_secs(30)),
        ))
        .build();
    g.bench_function("failsafe_consecutive", |bench| {
        bench.iter_custom(|iters| {
            on_two_threads(iters, |_, _| {
                if black_box(&fs).is_call_permitted() {
                    fs.on_success();
                }
            })
        })
    });
    let fs = failsafe::Config::new().build();
    g.bench_function("failsafe_default", |bench| {
        bench.iter_custom(|iters| {
            on_two_threads(iters, |_, _| {
                if black_box(&fs).is_call_permitted() {
                    fs.on_success();
                }
            })
        })
    });
    let r = Recloser::custom().build();
    g.bench_function("recloser_default", |bench| {
        bench.iter_custom(|iters| {
            on_two_threads(iters, |_, _| {
                black_box(&black_box(&r).call(|| Ok::<(), ()>(())));
            })
        })
    });
    g.bench_function("clock_2_reads", |bench| {
        bench.iter_custom(|iters| {
            on_two_threads(iters, |_, _| {
                black_box(clock());
                black_box(clock());
            })
        })
    });
    let counter = AtomicU64::new(0);
    g.bench_function("atomic_fetch_add", |bench| {
        bench.iter_custom(|iters| {
            on_two_threads(iters, |_, _| {
                black_box(&counter).fetch_add(1, Ordering::Relaxed);
            })
        })
    });
    g.bench_function("atomic_fetch_add_clock_2_reads", |bench| {
        bench.iter_custom(|iters| {
            on_two_threads(iters, |_, _| {
                black_box(clock());
                black_box(&counter).fetch_add(1, Ordering::Relaxed);
                black_box(clock());
            })
        })
    });
    g.finish();
}

//! Circuit breakers: acquire + record while closed, an open breaker's rejection, a half-open probe.
//!
//! Two configurations of ours, each matched to the peers that do the same work:
//! - `consecutive`: opens after 3 failures in a row (`NoWindow`), like failsafe's
//!   `consecutive_failures(3, ..)`;
//! - `rate100`: opens at a failure rate of 50% over the last 100 calls, deciding once 100 are in,
//!   like recloser's default (`error_rate(0.5)`, `closed_len(100)`).
//!
//! failsafe's default policy (success rate over 30 s, or 5 failures in a row) is measured as well,
//! since it is what `failsafe::Config::new()` gives. Both of ours come as `CircuitBreaker` (`&mut`)
//! and as `SharedBreaker` (`&self`, atomics) on one thread.

use std::hint::black_box;
use std::time::Duration as StdDuration;

use criterion::{BenchmarkGroup, Criterion, measurement::WallTime};
use failsafe::{backoff, failure_policy::consecutive_failures};
use recloser::Recloser;
use reliable_core::breaker::{
    AtomicCountWindow, BreakerConfig, BreakerPolicy, CircuitBreaker, CountWindow, HalfOpenConfig,
    NoWindow, OpenConfig, Outcome, ProbeRule, SharedBreaker, WindowConfig,
};
use reliable_core::{Duration, Instant};

/// How far `now` moves per iteration in the closed-state benchmarks: a fresh clock reading.
const STEP: Duration = Duration::from_nanos(25);

fn leak(config: BreakerConfig) -> &'static BreakerPolicy {
    Box::leak(Box::new(BreakerPolicy::new(config).expect("valid config")))
}

fn open_for(d: Duration) -> OpenConfig {
    OpenConfig {
        duration: d,
        growth: 1.0,
        max: None,
        jitter: 0.0,
        strictly_after: false,
    }
}

/// Opens after `n` failures in a row; open for `open`.
fn consecutive(n: u32, open: Duration) -> &'static BreakerPolicy {
    leak(BreakerConfig {
        consecutive_failures: Some(n),
        open: open_for(open),
        half_open: HalfOpenConfig {
            max_in_flight: Some(1),
            rule: ProbeRule::Consecutive { successes: 1 },
            probe_timeout: Duration::from_secs(10),
            decide_at_minimum: false,
            max_wait: None,
            max_wait_closes: false,
        },
        ..BreakerConfig::new()
    })
}

/// Opens at >= 50% failures over the last 100 calls, once 100 are in (recloser's default).
fn rate100() -> &'static BreakerPolicy {
    leak(BreakerConfig {
        failure_rate: Some(0.5),
        minimum_calls: 100,
        window: WindowConfig::Count { calls: 100 },
        open: open_for(Duration::from_secs(30)),
        ..BreakerConfig::new()
    })
}

fn failsafe_consecutive(
    n: u32,
    open: StdDuration,
) -> failsafe::StateMachine<failsafe::failure_policy::ConsecutiveFailures<backoff::Constant>, ()> {
    failsafe::Config::new()
        .failure_policy(consecutive_failures(n, backoff::constant(open)))
        .build()
}

/// Every `EVERY`-th call fails; `EVERY == 0`: none does. The answer goes through `black_box`, so
/// no side knows it in advance.
#[derive(Clone, Copy, Default)]
struct Pattern<const EVERY: u32> {
    i: u32,
}

impl<const EVERY: u32> Pattern<EVERY> {
    #[inline(always)]
    fn next_fails(&mut self) -> bool {
        if EVERY == 0 {
            return black_box(false);
        }
        self.i += 1;
        if self.i == EVERY {
            self.i = 0;
        }
        black_box(self.i == 0)
    }
    #[inline(always)]
    fn outcome(&mut self) -> Outcome {
        if self.next_fails() {
            Outcome::Failure
        } else {
            Outcome::Success
        }
    }
}

/// Runs `iters` calls of `body` and times them. The loop's own state (the pattern, `now`) lives in
/// locals, so it stays in registers: captured by reference in a closure, it would sit in memory and
/// add a store-to-load round trip to every iteration of whichever side carries it.
#[inline(always)]
fn timed<S>(iters: u64, state: &mut S, mut body: impl FnMut(&mut S)) -> std::time::Duration
where
    S: Copy,
{
    let mut local = *state;
    let start = std::time::Instant::now();
    for _ in 0..iters {
        body(&mut local);
    }
    let elapsed = start.elapsed();
    *state = local;
    elapsed
}

/// The closed-state benchmarks, with every `EVERY`-th call failing.
fn closed<const EVERY: u32>(g: &mut BenchmarkGroup<'_, WallTime>) {
    macro_rules! ours {
        ($name:literal, $breaker:expr) => {{
            let b = $breaker;
            let mut state = (Instant::from_secs(1), Pattern::<EVERY>::default());
            g.bench_function($name, |bench| {
                bench.iter_custom(|iters| {
                    timed(iters, &mut state, |(now, p)| {
                        *now += black_box(STEP);
                        if let Ok(permit) = b.try_acquire(black_box(*now)) {
                            black_box(&b.record(permit, p.outcome(), black_box(*now)));
                        }
                    })
                })
            });
        }};
    }
    #[allow(unused_mut)]
    {
        let mut b =
            CircuitBreaker::<_, NoWindow>::with_storage(consecutive(3, Duration::from_secs(30)))
                .expect("fits");
        ours!("reliable_consecutive", &mut b);
        let mut b =
            CircuitBreaker::<_, CountWindow<100, 2>>::with_storage(rate100()).expect("fits");
        ours!("reliable_rate100", &mut b);
        let b = SharedBreaker::<_, NoWindow>::with_storage(consecutive(3, Duration::from_secs(30)))
            .expect("fits");
        ours!("shared_consecutive", &b);
        let b =
            SharedBreaker::<_, AtomicCountWindow<100, 2>>::with_storage(rate100()).expect("fits");
        ours!("shared_rate100", &b);
    }

    // failsafe's two policies are different types with the same inherent methods.
    macro_rules! failsafe {
        ($name:literal, $fs:expr) => {{
            let fs = $fs;
            let mut p = Pattern::<EVERY>::default();
            g.bench_function($name, |bench| {
                bench.iter_custom(|iters| {
                    timed(iters, &mut p, |p| {
                        if black_box(&fs).is_call_permitted() {
                            if p.next_fails() {
                                fs.on_error();
                            } else {
                                fs.on_success();
                            }
                        }
                    })
                })
            });
        }};
    }
    failsafe!(
        "failsafe_consecutive",
        failsafe_consecutive(3, StdDuration::from_secs(30))
    );
    failsafe!("failsafe_default", failsafe::Config::new().build());
    let r = Recloser::custom().build();
    let mut p = Pattern::<EVERY>::default();
    g.bench_function("recloser_default", |bench| {
        bench.iter_custom(|iters| {
            timed(iters, &mut p, |p| {
                let fails = p.next_fails();
                black_box(&black_box(&r).call(|| if fails { Err(()) } else { Ok(()) }));
            })
        })
    });
}

pub fn closed_success(c: &mut Criterion) {
    let mut g = c.benchmark_group("breaker_closed_success");
    closed::<0>(&mut g);
    g.finish();
}

pub fn closed_every_fifth_fails(c: &mut Criterion) {
    let mut g = c.benchmark_group("breaker_closed_every_5th_fails");
    closed::<5>(&mut g);
    g.finish();
}

pub fn open_rejection(c: &mut Criterion) {
    let mut g = c.benchmark_group("breaker_open_rejection");
    let hour = Duration::from_secs(3_600);
    macro_rules! ours {
        ($name:literal, $breaker:expr) => {{
            let b = $breaker;
            let mut now = Instant::from_secs(1);
            for _ in 0..3 {
                let permit = b.try_acquire(now).expect("closed");
                b.record(permit, Outcome::Failure, now);
            }
            assert!(b.try_acquire(now).is_err(), "open");
            g.bench_function($name, |bench| {
                bench.iter_custom(|iters| {
                    timed(iters, &mut now, |now| {
                        *now += black_box(STEP);
                        black_box(&b.try_acquire(black_box(*now)));
                    })
                })
            });
        }};
    }
    #[allow(unused_mut)]
    {
        let mut b =
            CircuitBreaker::<_, NoWindow>::with_storage(consecutive(3, hour)).expect("fits");
        ours!("reliable_consecutive", &mut b);
        let b = SharedBreaker::<_, NoWindow>::with_storage(consecutive(3, hour)).expect("fits");
        ours!("shared_consecutive", &b);
    }

    let fs = failsafe_consecutive(3, StdDuration::from_secs(3_600));
    for _ in 0..3 {
        assert!(fs.is_call_permitted());
        fs.on_error();
    }
    assert!(!fs.is_call_permitted(), "open");
    g.bench_function("failsafe_consecutive", |bench| {
        bench.iter(|| black_box(black_box(&fs).is_call_permitted()))
    });
    let r = Recloser::custom()
        .closed_len(1)
        .open_wait(StdDuration::from_secs(3_600))
        .build();
    // recloser decides once its ring is full and one more call comes in.
    for _ in 0..2 {
        let _ = r.call(|| Err::<(), ()>(()));
    }
    assert!(matches!(
        r.call(|| Ok::<(), ()>(())),
        Err(recloser::Error::Rejected)
    ));
    g.bench_function("recloser", |bench| {
        bench.iter(|| {
            black_box(&black_box(&r).call(|| Ok::<(), ()>(())));
        })
    });
    g.finish();
}

/// A breaker whose open time is up: the call becomes a probe, fails, and re-opens it; the next
/// iteration's `now` is past the open time again. One probe per iteration.
pub fn half_open_probe(c: &mut Criterion) {
    let mut g = c.benchmark_group("breaker_half_open_probe");
    let ms = Duration::from_millis(1);
    macro_rules! ours {
        ($name:literal, $breaker:expr) => {{
            let b = $breaker;
            let mut now = Instant::from_secs(1);
            let permit = b.try_acquire(now).expect("closed");
            b.record(permit, Outcome::Failure, now);
            g.bench_function($name, |bench| {
                bench.iter_custom(|iters| {
                    timed(iters, &mut now, |now| {
                        *now += black_box(ms);
                        if let Ok(probe) = b.try_acquire(black_box(*now)) {
                            black_box(&b.record(
                                probe,
                                black_box(Outcome::Failure),
                                black_box(*now),
                            ));
                        }
                    })
                })
            });
            assert!(b.try_acquire(now + ms).is_ok_and(|p| p.is_probe()));
        }};
    }
    #[allow(unused_mut)]
    {
        let mut b = CircuitBreaker::<_, NoWindow>::with_storage(consecutive(1, ms)).expect("fits");
        ours!("reliable_consecutive", &mut b);
        let b = SharedBreaker::<_, NoWindow>::with_storage(consecutive(1, ms)).expect("fits");
        ours!("shared_consecutive", &b);
    }

    // The peers read the clock, so their open time is 1 ns: it is always up by the next call.
    let fs = failsafe_consecutive(1, StdDuration::from_nanos(1));
    fs.is_call_permitted();
    fs.on_error();
    g.bench_function("failsafe_consecutive", |bench| {
        bench.iter(|| {
            if black_box(&fs).is_call_permitted() {
                fs.on_error();
            }
        })
    });
    let r = Recloser::custom()
        .closed_len(1)
        .half_open_len(1)
        .open_wait(StdDuration::from_nanos(1))
        .build();
    for _ in 0..2 {
        let _ = r.call(|| Err::<(), ()>(()));
    }
    g.bench_function("recloser", |bench| {
        bench.iter(|| {
            black_box(&black_box(&r).call(|| Err::<(), ()>(())));
        })
    });
    g.finish();
}

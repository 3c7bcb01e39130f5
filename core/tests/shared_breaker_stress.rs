//! `SharedBreaker` hammered by several threads at once.
//!
//! The reference-model test shows that the shared breaker decides like the `&mut` one for every
//! sequential history. This file checks what must hold when calls really race:
//! - the half-open probe limit is never exceeded, counted from outside (permits held per generation)
//!   and from inside (`probes_in_flight`);
//! - every transition is reported exactly once: the reported transitions chain from the initial
//!   state to the final one;
//! - counts add up: calls admitted = results recorded, no call is lost by the window or by the
//!   consecutive-failure count, and the window's counts stay consistent;
//! - afterwards the breaker is in a valid state and still works.
//!
//! Time is a shared virtual clock that every call moves forward, so the breaker cycles through
//! closed, open and half-open many times during a run.

use std::sync::Barrier;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};

use reliable_core::breaker::{
    AtomicAnyWindow, AtomicCountWindow, AtomicTimeWindow, AtomicWindow, BreakerConfig,
    BreakerPolicy, Counts, HalfOpenConfig, NoWindow, Observer, OpenConfig, Outcome, ProbeRule,
    SharedBreaker, SlowCallRule, SlowStartConfig, State, Transition, WindowConfig,
};
use reliable_core::sample::splitmix64;
use reliable_core::{Duration, Instant};

const THREADS: u64 = 6;
const SLOTS: usize = 4;
/// Probes held, per generation (modulo this many), to count them from outside.
const GENERATIONS: usize = 1 << 16;

fn state_index(s: State) -> usize {
    match s {
        State::Closed => 0,
        State::Open => 1,
        State::HalfOpen => 2,
        State::ForcedOpen => 3,
        State::Disabled => 4,
    }
}

/// Transitions reported, by (from, to): the observer of the breakers under test.
#[derive(Debug, Default)]
struct Ledger {
    by_pair: [[AtomicU64; 5]; 5],
}

impl Observer for Ledger {
    fn on_transition(&self, t: Transition) {
        self.note(Some(t));
    }
}

/// A breaker under test: its transitions go to its `Ledger`.
type Breaker<'p, W, const P: usize = SLOTS> = SharedBreaker<&'p BreakerPolicy, W, P, Ledger>;

impl Ledger {
    fn note(&self, t: Option<Transition>) {
        if let Some(t) = t {
            assert_ne!(t.from, t.to, "a transition changes the state");
            self.by_pair[state_index(t.from)][state_index(t.to)].fetch_add(1, Relaxed);
        }
    }

    fn total(&self) -> u64 {
        self.by_pair.iter().flatten().map(|n| n.load(Relaxed)).sum()
    }

    /// Whether the reported transitions form one chain from closed to `last`: into each state as
    /// often as out of it, except one more into `last` (or one more out of closed).
    fn chains_to(&self, last: State) -> bool {
        (0..5).all(|s| {
            let into: u64 = (0..5).map(|f| self.by_pair[f][s].load(Relaxed)).sum();
            let out: u64 = (0..5).map(|t| self.by_pair[s][t].load(Relaxed)).sum();
            let want = i64::from(s == state_index(last)) - i64::from(s == 0);
            into as i64 - out as i64 == want
        })
    }
}

struct Run {
    admitted: AtomicU64,
    recorded: AtomicU64,
    probes: AtomicU64,
    rejected: AtomicU64,
    most_probes_seen: AtomicU32,
}

/// Several threads call one breaker with a shared virtual clock; outcomes fail in bursts so the
/// breaker keeps tripping and recovering. Returns the ledger and the run's tallies.
fn hammer<W: AtomicWindow>(
    breaker: &Breaker<'_, W>,
    max_in_flight: u32,
    probes_expire: bool,
    calls_per_thread: u64,
    seed: u64,
) -> Run {
    let ledger = breaker.observer();
    let run = Run {
        admitted: AtomicU64::new(0),
        recorded: AtomicU64::new(0),
        probes: AtomicU64::new(0),
        rejected: AtomicU64::new(0),
        most_probes_seen: AtomicU32::new(0),
    };
    let held: Vec<AtomicU32> = (0..GENERATIONS).map(|_| AtomicU32::new(0)).collect();
    let clock = AtomicU64::new(1);
    let start = Barrier::new(THREADS as usize);
    std::thread::scope(|s| {
        for thread in 0..THREADS {
            let (run, held, clock, start) = (&run, &held, &clock, &start);
            s.spawn(move || {
                let mut x = seed ^ thread.wrapping_mul(0x9E37_79B9);
                start.wait();
                for _ in 0..calls_per_thread {
                    x = splitmix64(x);
                    // 1-8 µs per call, shared: time moves with the calls of every thread.
                    let now = Instant::from_nanos(clock.fetch_add(1_000 + x % 7_000, Relaxed));
                    match x % 4_096 {
                        0 => breaker.force_open(now),
                        1 => breaker.disable(now),
                        2..=9 => breaker.reset(now),
                        _ => {}
                    }
                    let permit = match breaker.try_acquire(now) {
                        Ok(p) => p,
                        Err(_) => {
                            run.rejected.fetch_add(1, Relaxed);
                            continue;
                        }
                    };
                    run.admitted.fetch_add(1, Relaxed);
                    let gen_slot = permit.generation() as usize % GENERATIONS;
                    if permit.is_probe() {
                        run.probes.fetch_add(1, Relaxed);
                        let n = held[gen_slot].fetch_add(1, Relaxed) + 1;
                        run.most_probes_seen.fetch_max(n, Relaxed);
                        if !probes_expire {
                            assert!(n <= max_in_flight, "{n} probes of one round in flight");
                        }
                    }
                    assert!(breaker.probes_in_flight() <= max_in_flight);
                    // Hold the permit a little, so that calls overlap; a probe is held across a
                    // yield, so that other threads try for a slot meanwhile.
                    for _ in 0..x % 64 {
                        std::hint::spin_loop();
                    }
                    if permit.is_probe() {
                        std::thread::yield_now();
                    }
                    // Failures come in bursts: the downstream is down for ~2 ms in every ~6 ms.
                    let down = (now.as_nanos() / 2_000_000).is_multiple_of(3);
                    let outcome = match (x >> 20) % 10 {
                        0 => Outcome::Ignored,
                        n if down && n < 9 => Outcome::Failure,
                        1 => Outcome::Failure,
                        _ => Outcome::Success,
                    };
                    let end = Instant::from_nanos(clock.load(Relaxed));
                    if permit.is_probe() {
                        held[gen_slot].fetch_sub(1, Relaxed);
                    }
                    breaker.record(permit, outcome, end);
                    run.recorded.fetch_add(1, Relaxed);
                }
            });
        }
    });
    eprintln!(
        "{} threads: {} admitted ({} probes, at most {} of one round held at once), {} rejected, {} transitions",
        THREADS,
        run.admitted.load(Relaxed),
        run.probes.load(Relaxed),
        run.most_probes_seen.load(Relaxed),
        run.rejected.load(Relaxed),
        ledger.total()
    );
    run
}

/// After the threads are done: a valid state, consistent counts, the transitions chained, and a
/// breaker that still trips and recovers when driven by one thread.
fn check_quiet<W: AtomicWindow>(breaker: &Breaker<'_, W>, run: &Run, window: u64) {
    let ledger = breaker.observer();
    assert_eq!(
        run.admitted.load(Relaxed),
        run.recorded.load(Relaxed),
        "every admitted call reported once"
    );
    let latest = Instant::ZERO; // queries use the latest time seen
    let state = breaker.state(latest);
    // `state` reports an open breaker whose time is up as half-open.
    let chained =
        ledger.chains_to(state) || (state == State::HalfOpen && ledger.chains_to(State::Open));
    assert!(chained, "transitions do not chain to {state}");
    let c = breaker.counts(latest);
    assert!(
        c.failures <= c.calls && c.slow <= c.calls && c.calls <= window,
        "{c:?}"
    );
    // Every probe was recorded: none of the current round is in flight.
    assert_eq!(breaker.probes_in_flight(), 0);
    if state == State::Closed {
        assert!(breaker.consecutive_failures() < 3);
    }

    // Still works: reset, trip by three failures, wait the open time out, probe, close.
    let far = Instant::from_secs(1_000_000);
    breaker.reset(far);
    assert_eq!(breaker.state(far), State::Closed);
    assert_eq!(breaker.counts(far).calls, 0);
    for _ in 0..3 {
        let p = breaker.try_acquire(far).expect("closed admits");
        breaker.record(p, Outcome::Failure, far);
    }
    assert_eq!(breaker.state(far), State::Open);
    let later = far + Duration::from_secs(3_600);
    let probe = breaker
        .try_acquire(later)
        .expect("a probe after the open time");
    assert!(probe.is_probe());
    breaker.record(probe, Outcome::Success, later);
    // A Consecutive { successes: 2 } or Rate round needs more probes.
    while breaker.state(later) != State::Closed {
        let p = breaker.try_acquire(later).expect("another probe");
        breaker.record(p, Outcome::Success, later);
    }
    assert_eq!(breaker.state(later), State::Closed);
}

fn config(rule: ProbeRule, max_in_flight: u32, probe_timeout: Duration) -> BreakerConfig {
    BreakerConfig {
        consecutive_failures: Some(3),
        failure_rate: Some(0.5),
        slow_calls: Some(SlowCallRule {
            threshold: Duration::from_micros(20),
            rate: 0.8,
        }),
        minimum_calls: 10,
        window: WindowConfig::Count { calls: 20 },
        open: OpenConfig {
            duration: Duration::from_micros(200),
            growth: 2.0,
            max: Some(Duration::from_millis(2)),
            jitter: 0.2,
            strictly_after: false,
        },
        half_open: HalfOpenConfig {
            max_in_flight: Some(max_in_flight),
            rule,
            probe_timeout,
            decide_at_minimum: false,
            max_wait: None,
            max_wait_closes: false,
        },
        slow_start: Some(SlowStartConfig {
            ramp: Duration::from_micros(300),
            initial: 0.3,
        }),
        shadow: false,
        initial_state: State::Closed,
    }
}

#[test]
fn probe_limit_holds_and_every_transition_is_reported_once() {
    let rules = [
        (ProbeRule::Consecutive { successes: 1 }, 1),
        (ProbeRule::Consecutive { successes: 2 }, 3),
        (ProbeRule::Rate { calls: 5 }, 2),
        (ProbeRule::Rate { calls: 4 }, 4),
    ];
    for (i, (rule, max)) in rules.into_iter().enumerate() {
        let policy = BreakerPolicy::new(config(rule, max, Duration::MAX)).unwrap();
        let breaker = Breaker::<AtomicCountWindow<64>>::with_storage(&policy)
            .unwrap()
            .with_seed(i as u64);
        let run = hammer(&breaker, max, false, 25_000, i as u64);
        // The run really went through many rounds and filled them.
        let ledger = breaker.observer();
        assert!(
            ledger.total() > 100,
            "{rule:?}: {} transitions",
            ledger.total()
        );
        assert!(run.probes.load(Relaxed) > 50, "{rule:?}: too few probes");
        assert!(run.rejected.load(Relaxed) > 1_000);
        check_quiet(&breaker, &run, 20);
    }
}

#[test]
fn expiring_leases_keep_the_limit() {
    // Leases of 30 µs of virtual time: probes expire while they are still being held.
    for (i, (rule, max)) in [
        (ProbeRule::Consecutive { successes: 2 }, 2),
        (ProbeRule::Rate { calls: 6 }, 3),
    ]
    .into_iter()
    .enumerate()
    {
        let policy = BreakerPolicy::new(config(rule, max, Duration::from_micros(30))).unwrap();
        let breaker = Breaker::<AtomicCountWindow<64>>::with_storage(&policy)
            .unwrap()
            .with_seed(7 + i as u64);
        let run = hammer(&breaker, max, true, 25_000, 100 + i as u64);
        assert!(breaker.observer().total() > 100);
        check_quiet(&breaker, &run, 20);
    }
}

#[test]
fn time_windows_and_unbounded_probes_stay_consistent() {
    let mut c = config(ProbeRule::Rate { calls: 8 }, 1, Duration::MAX);
    c.window = WindowConfig::Time {
        span: Duration::from_micros(400),
        buckets: 8,
    };
    c.half_open.max_in_flight = None;
    let policy = BreakerPolicy::new(c).unwrap();
    let breaker = Breaker::<AtomicAnyWindow<64, 8>>::with_storage(&policy).unwrap();
    let run = hammer(&breaker, u32::MAX, false, 25_000, 9);
    assert!(breaker.observer().total() > 100);
    check_quiet(&breaker, &run, u64::MAX);
}

/// A disabled breaker admits every call and only records: no call may be lost.
fn counts_of_disabled<W: AtomicWindow>(window: WindowConfig, last: Instant) -> Counts {
    let policy = BreakerPolicy::new(BreakerConfig {
        slow_calls: Some(SlowCallRule {
            threshold: Duration::from_millis(1),
            rate: 1.0,
        }),
        minimum_calls: 1,
        window,
        ..BreakerConfig::reliablekit()
    })
    .unwrap();
    let breaker = Breaker::<W, 1>::with_storage(&policy).unwrap();
    breaker.disable(Instant::ZERO);
    let phase = Barrier::new(THREADS as usize);
    std::thread::scope(|s| {
        for thread in 0..THREADS {
            let (breaker, phase) = (&breaker, &phase);
            s.spawn(move || {
                let outcome = |i: u64| {
                    // Every 4th call fails.
                    if (i + thread).is_multiple_of(4) {
                        Outcome::Failure
                    } else {
                        Outcome::Success
                    }
                };
                // 100 slow calls: admitted at 0 by every thread, reported 2 ms later. (Slowness is
                // measured against the latest time any thread reported, so phases keep it exact.)
                let slow: Vec<_> = (0..100)
                    .map(|_| breaker.try_acquire(Instant::ZERO).expect("disabled admits"))
                    .collect();
                phase.wait();
                for (i, p) in (0..).zip(slow) {
                    breaker.record(p, outcome(i), Instant::from_millis(2));
                }
                phase.wait();
                // 900 calls that take no time.
                for i in 100..1_000u64 {
                    let p = breaker.try_acquire(Instant::ZERO).expect("disabled admits");
                    breaker.record(p, outcome(i), Instant::ZERO);
                }
            });
        }
    });
    assert_eq!(breaker.state(last), State::Disabled);
    assert_eq!(breaker.observer().total(), 1, "only the switch to disabled");
    breaker.counts(last)
}

#[test]
fn no_call_is_lost_by_either_window() {
    let want = Counts {
        calls: 1_000 * THREADS,
        failures: 250 * THREADS,
        slow: 100 * THREADS,
        // Of each thread's 100 slow calls, every 4th failed.
        slow_failures: 25 * THREADS,
    };
    let count = counts_of_disabled::<AtomicCountWindow<6_016, 94>>(
        WindowConfig::Count { calls: 6_000 },
        Instant::ZERO,
    );
    assert_eq!(count, want);
    let time = counts_of_disabled::<AtomicTimeWindow<10>>(
        WindowConfig::Time {
            span: Duration::from_secs(10),
            buckets: 10,
        },
        Instant::from_secs(3),
    );
    assert_eq!(time, want);
}

#[test]
fn the_ring_ends_with_the_last_calls_of_every_thread() {
    // All threads record failures, then (after a barrier) at least a window's worth of successes
    // each: every position was overwritten by a success, whatever the interleaving.
    let policy = BreakerPolicy::new(BreakerConfig {
        minimum_calls: 1,
        window: WindowConfig::Count { calls: 50 },
        ..BreakerConfig::reliablekit()
    })
    .unwrap();
    let breaker = SharedBreaker::<_, AtomicCountWindow<64>>::with_storage(&policy).unwrap();
    breaker.disable(Instant::ZERO);
    let phase = Barrier::new(THREADS as usize);
    std::thread::scope(|s| {
        for _ in 0..THREADS {
            let (breaker, phase) = (&breaker, &phase);
            s.spawn(move || {
                for outcome in [Outcome::Failure, Outcome::Success] {
                    for _ in 0..500 {
                        let p = breaker.try_acquire(Instant::ZERO).unwrap();
                        breaker.record(p, outcome, Instant::ZERO);
                    }
                    phase.wait();
                }
            });
        }
    });
    let c = breaker.counts(Instant::ZERO);
    assert_eq!((c.calls, c.failures, c.slow), (50, 0, 0));
}

#[test]
fn consecutive_failures_lose_no_increment() {
    let policy = BreakerPolicy::new(BreakerConfig {
        consecutive_failures: Some(1_000_000),
        ..BreakerConfig::layered_exercise()
    })
    .unwrap();
    let breaker = Breaker::<NoWindow, 1>::with_storage(&policy).unwrap();
    std::thread::scope(|s| {
        for _ in 0..THREADS {
            s.spawn(|| {
                for i in 0..10_000u64 {
                    let now = Instant::from_nanos(i);
                    let p = breaker.try_acquire(now).unwrap();
                    breaker.record(p, Outcome::Failure, now);
                }
            });
        }
    });
    assert_eq!(breaker.observer().total(), 0);
    assert_eq!(breaker.consecutive_failures(), 10_000 * THREADS as u32);
    let p = breaker.try_acquire(Instant::ZERO).unwrap();
    breaker.record(p, Outcome::Success, Instant::ZERO);
    assert_eq!(breaker.consecutive_failures(), 0);
    assert_eq!(breaker.state(Instant::ZERO), State::Closed);
}

#[test]
fn exactly_one_thread_trips_it() {
    // Many threads fail at once: one transition to open, reported once, one generation later.
    for round in 0..50u64 {
        let policy = BreakerPolicy::new(BreakerConfig::layered_exercise()).unwrap();
        let breaker = Breaker::<NoWindow, 1>::with_storage(&policy).unwrap();
        let ledger = breaker.observer();
        let start = Barrier::new(THREADS as usize);
        std::thread::scope(|s| {
            for thread in 0..THREADS {
                let (breaker, start) = (&breaker, &start);
                s.spawn(move || {
                    let now = Instant::from_millis(round * 10 + thread);
                    let permits: Vec<_> = (0..3)
                        .filter_map(|_| breaker.try_acquire(now).ok())
                        .collect();
                    start.wait();
                    for p in permits {
                        breaker.record(p, Outcome::Failure, now);
                    }
                });
            }
        });
        assert_eq!(ledger.total(), 1);
        assert!(ledger.chains_to(State::Open));
        assert_eq!(breaker.generation(), 1);
        assert_eq!(breaker.state(Instant::ZERO), State::Open);
    }
}

//! Model checks of the lock-free breaker: `loom` runs each test below under every interleaving of
//! its threads (up to a bound on preemptions), with the atomics of [`SharedBreaker`] and its
//! windows swapped for loom's (`crate::sync`), which also lets a load see any store the memory
//! model allows it to.
//!
//! Run with
//! `RUSTFLAGS="--cfg loom" cargo test -p reliable-core --release --lib model_check --target-dir target/loom`
//! (CI job `loom`). `LOOM_MAX_PREEMPTIONS` bounds the preemptions per execution (default here: 3).
//!
//! Each breaker test runs a few threads, each a short script of calls on one breaker, and checks:
//! - **linearizable to the spec**: the answers every call got, the transitions reported and the
//!   final snapshot are exactly those of *some* interleaving of the same scripts (each thread's
//!   calls in its order) run one call at a time on a [`CircuitBreaker`] with the same policy and
//!   seed, every such interleaving being tried;
//! - **the probe limit**: probes held at once (counted from outside, by generation) never exceed
//!   `max_in_flight`;
//! - no outcome lost or counted twice, and a late result of an older generation changes nothing:
//!   both follow from the first (the `&mut` breaker counts every result once and ignores late
//!   ones), and the window tests check them on the windows alone.
#![allow(clippy::unwrap_used)]

use std::sync::atomic::{AtomicU64 as StdAtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc as StdArc, Mutex};
use std::vec::Vec;

use loom::sync::Arc;

use super::atomic_window::{AtomicCountWindow, AtomicTimeWindow, AtomicWindow};
use super::*;
use crate::time::{Duration, Instant};

/// Runs `f` under loom, every interleaving with at most `bound` preemptions (`LOOM_MAX_PREEMPTIONS`
/// overrides it); returns the executions run.
fn explore(bound: usize, f: impl Fn() + Sync + Send + 'static) -> usize {
    let runs = StdArc::new(AtomicUsize::new(0));
    let counted = StdArc::clone(&runs);
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(bound);
    }
    let bound = builder.preemption_bound;
    let start = std::time::Instant::now();
    builder.check(move || {
        counted.fetch_add(1, Relaxed);
        f();
    });
    let runs = runs.load(Relaxed);
    std::println!(
        "loom: {runs} executions, preemption bound {bound:?}, {:.1?}",
        start.elapsed()
    );
    runs
}

/// One call of a thread's script. A `Record` hands back the thread's latest permit, if its latest
/// acquire got one (otherwise it does nothing).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Call {
    Acquire(u64),
    Record(Outcome, u64),
    Close(u64),
    ForceOpen(u64),
}

/// What a call answered: for an acquire, the permit's generation and whether it is a probe, or
/// the rejection.
type Answer = Result<(u32, bool), RejectReason>;

fn ms(n: u64) -> Instant {
    Instant::from_millis(n)
}

fn apply(b: &mut impl Breaker, call: Call, held: &mut Option<Permit>) -> Option<Answer> {
    match call {
        Call::Acquire(t) => {
            let answer = b.try_acquire(ms(t));
            let seen = answer
                .as_ref()
                .map(|p| (p.generation(), p.is_probe()))
                .map_err(|r| r.reason);
            *held = answer.ok();
            Some(seen)
        }
        Call::Record(outcome, t) => {
            if let Some(p) = held.take() {
                b.record(p, outcome, ms(t));
            }
            None
        }
        Call::Close(t) => {
            b.close(ms(t));
            None
        }
        Call::ForceOpen(t) => {
            b.force_open(ms(t));
            None
        }
    }
}

/// The transitions an observer heard, as (from, to, at) sorted: racing threads report theirs in
/// either order.
#[derive(Debug, Default)]
struct Heard(Mutex<Vec<(u8, u8, u64)>>);

impl Heard {
    fn sorted(&self) -> Vec<(u8, u8, u64)> {
        let mut v = self.0.lock().unwrap().clone();
        v.sort_unstable();
        v
    }
}

impl Observer for Heard {
    fn on_transition(&self, t: Transition) {
        self.0
            .lock()
            .unwrap()
            .push((t.from as u8, t.to as u8, t.at.as_nanos()));
    }
}

/// Probes held at once, by generation, counted from outside.
#[derive(Debug, Default)]
struct Held([StdAtomicU64; 8]);

impl Held {
    fn take(&self, generation: u32, limit: u32) {
        let n = self.0[generation as usize % 8].fetch_add(1, Relaxed) + 1;
        assert!(
            n <= u64::from(limit),
            "{n} probes held at once in generation {generation}; the limit is {limit}"
        );
    }
    fn give_back(&self, generation: u32) {
        self.0[generation as usize % 8].fetch_sub(1, Relaxed);
    }
}

/// What a run observed: each thread's answers, the transitions heard, the final snapshot.
type Observed = (Vec<Vec<Answer>>, Vec<(u8, u8, u64)>, Snapshot);

/// A scenario: a policy, the calls that bring a fresh breaker to the starting state (one at a
/// time), each thread's script, and the time of the final snapshot.
struct Scenario {
    policy: BreakerPolicy,
    setup: &'static [Call],
    threads: &'static [&'static [Call]],
    end: u64,
}

const SEED: u64 = 7;

impl Scenario {
    /// Every interleaving of the threads' scripts, each run on a fresh `&mut` breaker after the
    /// setup: what each observed. Each call is two steps (an acquire's first is the spec's
    /// "open, open time over → half-open", when it applies; the others' first does nothing),
    /// so that other calls may come between the two steps of an acquire, as in the spec's table.
    fn sequential<W: Window, const P: usize>(&self) -> Vec<Observed> {
        let mut all = Vec::new();
        let mut order = Vec::new();
        self.interleave(
            &mut std::vec![0; self.threads.len()],
            &mut order,
            &mut |order| {
                let mut b = CircuitBreaker::<_, W, P>::with_storage(&self.policy)
                    .unwrap()
                    .with_seed(SEED)
                    .observe(Heard::default());
                let mut held = None;
                for &call in self.setup {
                    apply(&mut b, call, &mut held);
                }
                let setup_heard = b.observer().0.lock().unwrap().len();
                let mut held: Vec<Option<Permit>> = self.threads.iter().map(|_| None).collect();
                let mut answers: Vec<Vec<Answer>> = std::vec![Vec::new(); self.threads.len()];
                let mut next = std::vec![0; self.threads.len()];
                for &t in order.iter() {
                    let step = next[t];
                    next[t] += 1;
                    let call = self.threads[t][step / 2];
                    if step.is_multiple_of(2) {
                        // The spec's first step of an acquire: an open breaker whose time is up
                        // turns half-open (the same change as an operator's `half_open`).
                        if let Acquire(now) = call
                            && b.stored_state() == State::Open
                            && b.state(ms(now)) == State::HalfOpen
                        {
                            b.half_open(ms(now));
                        }
                    } else if let Some(a) = apply(&mut b, call, &mut held[t]) {
                        answers[t].push(a);
                    }
                }
                let heard = b.observer().0.lock().unwrap().split_off(setup_heard);
                let mut heard: Vec<_> = heard;
                heard.sort_unstable();
                all.push((answers, heard, b.snapshot(ms(self.end))));
            },
        );
        all
    }

    fn interleave(
        &self,
        next: &mut Vec<usize>,
        order: &mut Vec<usize>,
        f: &mut impl FnMut(&[usize]),
    ) {
        let mut any = false;
        for t in 0..self.threads.len() {
            if next[t] < 2 * self.threads[t].len() {
                any = true;
                next[t] += 1;
                order.push(t);
                self.interleave(next, order, f);
                order.pop();
                next[t] -= 1;
            }
        }
        if !any {
            f(order);
        }
    }

    /// Runs the threads on one `SharedBreaker` under loom and checks each execution against
    /// every sequential interleaving; returns the executions explored.
    fn check<W: AtomicWindow + Send + 'static, M: Window, const P: usize>(self) -> usize {
        let allowed = self.sequential::<M, P>();
        // Two preemptions keep each to seconds (three: tens of seconds to minutes).
        let bound = 2;
        let this = StdArc::new(self);
        explore(bound, move || {
            let s = &*this;
            let b = SharedBreaker::<_, W, P, ()>::with_storage(s.policy)
                .unwrap()
                .with_seed(SEED)
                .observe(Heard::default());
            let mut held = None;
            for &call in s.setup {
                apply(&mut &b, call, &mut held);
            }
            b.observer().0.lock().unwrap().clear();
            let b = Arc::new((b, Held::default()));
            let limit = s.policy.max_in_flight;
            let handles: Vec<_> = (0..s.threads.len())
                .map(|t| {
                    let b = Arc::clone(&b);
                    let this = StdArc::clone(&this);
                    loom::thread::spawn(move || {
                        let (b, probes) = &*b;
                        let mut held: Option<Permit> = None;
                        let mut answers = Vec::new();
                        for &call in this.threads[t] {
                            if let (Call::Record(..), Some(p)) = (call, &held)
                                && p.is_probe()
                            {
                                probes.give_back(p.generation());
                            }
                            if let Some(a) = apply(&mut &*b, call, &mut held) {
                                answers.push(a);
                            }
                            if let Some(p) = &held
                                && matches!(call, Call::Acquire(_))
                                && p.is_probe()
                            {
                                probes.take(p.generation(), limit);
                            }
                        }
                        answers
                    })
                })
                .collect();
            let answers: Vec<Vec<Answer>> =
                handles.into_iter().map(|h| h.join().unwrap()).collect();
            let (b, _) = &*b;
            let seen = (answers, b.observer().sorted(), b.snapshot(ms(s.end)));
            assert!(
                allowed.contains(&seen),
                "no sequential order of the calls explains this concurrent history:\n{seen:#?}\n\
                 sequential orders give:\n{allowed:#?}"
            );
        })
    }
}

fn policy(config: BreakerConfig) -> BreakerPolicy {
    BreakerPolicy::new(config).unwrap()
}

/// Two failures in a row trip it for 20 s; one probe; a probe's success closes it.
fn consecutive() -> BreakerPolicy {
    policy(BreakerConfig::layered_exercise())
}

use Call::*;
use Outcome::{Failure, Success};

/// Tripped at 0 ms, open until 20 s.
const TRIPPED: &[Call] = &[
    Acquire(0),
    Record(Failure, 0),
    Acquire(0),
    Record(Failure, 0),
];

#[test]
fn model_check_closed_failures_race_to_trip() {
    // Three threads fail at once against a limit of two in a row: one trip, reported once.
    Scenario {
        policy: consecutive(),
        setup: &[],
        threads: &[
            &[Acquire(1), Record(Failure, 1)],
            &[Acquire(1), Record(Failure, 1)],
            &[Acquire(1), Record(Success, 1)],
        ],
        end: 1,
    }
    .check::<NoWindow, NoWindow, 1>();
}

#[test]
fn model_check_one_probe_of_two_callers() {
    // The open time is up: both callers race to turn it half-open and take the one probe slot.
    Scenario {
        policy: consecutive(),
        setup: TRIPPED,
        threads: &[
            &[Acquire(20_000), Record(Success, 20_000)],
            &[Acquire(20_000), Record(Failure, 20_000)],
        ],
        end: 20_000,
    }
    .check::<NoWindow, NoWindow, 1>();
}

#[test]
fn model_check_late_result_of_an_older_generation() {
    // One failure already counted; a permit taken before the trip reports after it, or not.
    Scenario {
        policy: consecutive(),
        setup: &[Acquire(0), Record(Failure, 0)],
        threads: &[
            &[Acquire(1), Record(Success, 1)],
            &[Acquire(1), Record(Failure, 1), Acquire(1)],
        ],
        end: 1,
    }
    .check::<NoWindow, NoWindow, 1>();
}

#[test]
fn model_check_operator_races_a_probe() {
    // An operator closes the breaker (or forces it open) while a probe is being decided.
    const PROBE: &[Call] = &[Acquire(20_000), Record(Failure, 20_000)];
    for threads in [&[PROBE, &[Close(20_000)]], &[PROBE, &[ForceOpen(20_000)]]] {
        Scenario {
            policy: consecutive(),
            setup: TRIPPED,
            threads,
            end: 20_000,
        }
        .check::<NoWindow, NoWindow, 1>();
    }
}

/// A failure rate of 50% over the last 4 calls (at least 2) trips it; half-open, a round of 2
/// probes decides by the same rate.
fn rate_round() -> BreakerPolicy {
    policy(BreakerConfig {
        failure_rate: Some(0.5),
        minimum_calls: 2,
        window: WindowConfig::Count { calls: 4 },
        half_open: HalfOpenConfig {
            max_in_flight: Some(2),
            rule: ProbeRule::Rate { calls: 2 },
            probe_timeout: Duration::MAX,
            decide_at_minimum: false,
            max_wait: None,
            max_wait_closes: false,
        },
        ..BreakerConfig::layered_exercise()
    })
}

#[test]
fn model_check_rate_round() {
    // The two probes of a round of two are admitted and report at once: both tallied once, one
    // verdict.
    Scenario {
        policy: rate_round(),
        setup: TRIPPED,
        threads: &[
            &[Acquire(20_000), Record(Success, 20_000)],
            &[Acquire(20_000), Record(Failure, 20_000)],
        ],
        end: 20_000,
    }
    .check::<AtomicCountWindow<4>, CountWindow<4>, 2>();
}

#[test]
fn model_check_window_rate_trip() {
    // Two failures recorded at once into a window of 4 that decides from 2 calls.
    Scenario {
        policy: policy(BreakerConfig {
            consecutive_failures: None,
            ..*rate_round().config()
        }),
        setup: &[],
        threads: &[
            &[Acquire(1), Record(Failure, 1)],
            &[Acquire(1), Record(Failure, 1)],
        ],
        end: 2,
    }
    .check::<AtomicCountWindow<4>, CountWindow<4>, 2>();
}

/// The counts a window of `size` calls holds after `calls` recorded one at a time in some order.
fn sequential_counts(size: u64, calls: &[(bool, bool)]) -> Vec<Counts> {
    let n = calls.len();
    let mut all = Vec::new();
    let mut perm: Vec<usize> = (0..n).collect();
    // Heap's algorithm over the (few) calls.
    fn heap(k: usize, perm: &mut Vec<usize>, f: &mut impl FnMut(&[usize])) {
        if k <= 1 {
            return f(perm);
        }
        for i in 0..k {
            heap(k - 1, perm, f);
            let j = if k.is_multiple_of(2) { i } else { 0 };
            perm.swap(j, k - 1);
        }
    }
    heap(n, &mut perm, &mut |p| {
        let kept = &p[n.saturating_sub(size as usize)..];
        all.push(Counts {
            calls: kept.len() as u64,
            failures: kept.iter().filter(|&&i| calls[i].0).count() as u64,
            slow: kept.iter().filter(|&&i| calls[i].1).count() as u64,
            slow_failures: kept.iter().filter(|&&i| calls[i].0 && calls[i].1).count() as u64,
        });
    });
    all
}

/// Three calls, (failed, slow), recorded at once into a count window of `size`: the counts must
/// be those of some order of them.
fn three_calls_into(size: u32, calls: [(bool, bool); 3]) -> usize {
    let allowed = sequential_counts(u64::from(size), &calls);
    explore(2, move || {
        let w = Arc::new(AtomicCountWindow::<4>::new(WindowSpec::Count { calls: size }).unwrap());
        let handles: Vec<_> = calls
            .iter()
            .map(|&(f, s)| {
                let w = Arc::clone(&w);
                loom::thread::spawn(move || {
                    w.record(Instant::ZERO, f, s);
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        let c = w.counts(Instant::ZERO);
        assert!(
            allowed.contains(&c),
            "window of {size}: {c:?}, not one of {allowed:?}"
        );
    })
}

/// A failure, a slow call and a good one.
const MIXED: [(bool, bool); 3] = [(true, false), (false, true), (false, false)];

#[test]
fn model_check_count_window_loses_no_call() {
    three_calls_into(4, MIXED);
}

#[test]
fn model_check_count_window_splits_slow_calls() {
    // Slow failures are the positions with both bits set: each counted once, and never more than
    // the failures or the slow calls read beside them.
    three_calls_into(4, [(true, true), (false, true), (true, true)]);
}

/// The documented limit of the atomic bit ring: two calls a lap apart writing one position at
/// once (more calls than the window holds, recorded while one call is being written) may
/// interleave their bits: one call's failure and the other's slowness land together, a slow
/// failure that never happened (or both outcomes are lost). The checker finds it.
#[test]
#[should_panic(
    expected = "window of 2: Counts { calls: 2, failures: 1, slow: 1, slow_failures: 1 }"
)]
fn model_check_finds_the_lapped_window_race() {
    three_calls_into(2, MIXED);
}

#[test]
fn model_check_good_call_shortcut_races_a_failure() {
    // A good call takes the clear-window shortcut while another call's failure is set: the
    // failure is never lost, and the good call is counted once.
    let allowed = sequential_counts(2, &[(true, false), (false, false), (false, false)]);
    explore(3, move || {
        let w = Arc::new(AtomicCountWindow::<4>::new(WindowSpec::Count { calls: 2 }).unwrap());
        w.record(Instant::ZERO, false, false);
        let w2 = Arc::clone(&w);
        let failing = loom::thread::spawn(move || {
            w2.record(Instant::ZERO, true, false);
        });
        if !w.record_good_if_clear(Instant::ZERO) {
            w.record(Instant::ZERO, false, false);
        }
        failing.join().unwrap();
        let c = w.counts(Instant::ZERO);
        assert!(allowed.contains(&c), "{c:?}, not one of {allowed:?}");
    });
}

#[test]
fn model_check_time_window_loses_no_call() {
    // Two slow failures in one bucket and a good call that moves the window a bucket on: a
    // window of two buckets holds all three, and both slow failures (the counter written only
    // for them, bumped by both at once).
    explore(2, || {
        let w = Arc::new(
            AtomicTimeWindow::<2>::new(WindowSpec::Time {
                width: Duration::from_secs(1),
                buckets: 2,
            })
            .unwrap(),
        );
        let at = [(0u64, true, true), (0, true, true), (1_000, false, false)];
        let handles: Vec<_> = at
            .iter()
            .map(|&(t, f, s)| {
                let w = Arc::clone(&w);
                loom::thread::spawn(move || {
                    w.record(ms(t), f, s);
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        let c = w.counts(ms(1_000));
        assert_eq!(
            (c.calls, c.failures, c.slow, c.slow_failures),
            (3, 2, 2, 2),
            "{c:?}"
        );
    });
}

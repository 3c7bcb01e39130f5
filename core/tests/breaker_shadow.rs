//! Shadow mode decides exactly as the live breaker does: on the same run (the same calls at the
//! same times, the same downstream answers), a breaker in shadow mode admits every call, and its
//! would-be rejections and would-be transitions are the live breaker's rejections and transitions,
//! one for one. Both breakers, several profiles, seeded random runs.

use std::cell::RefCell;
use std::rc::Rc;

use reliable_core::breaker::{
    AnyWindow, AtomicAnyWindow, Breaker, BreakerConfig, BreakerPolicy, CircuitBreaker,
    HalfOpenConfig, Observer, Outcome, ProbeRule, RejectReason, Rejections, SharedBreaker,
    SlowStartConfig, Snapshot, Transition,
};
use reliable_core::sample::splitmix64;
use reliable_core::{Duration, Instant};

/// Every transition, in order.
#[derive(Clone, Debug, Default)]
struct Log(Rc<RefCell<Vec<Transition>>>);

impl Observer for Log {
    fn on_transition(&self, t: Transition) {
        self.0.borrow_mut().push(t);
    }
}

/// What a run saw: every transition, the calls rejected (live) or rejected-but-admitted
/// (shadow) by number, and those counted by reason: open, half-open full, slow start.
#[derive(Debug, PartialEq)]
struct Seen {
    transitions: Vec<Transition>,
    refused: Vec<usize>,
    by_reason: [u64; 3],
    /// The breaker at the end of the run.
    end: Snapshot,
}

/// Each call's answer by number (a shadow permit: `Ok(true)`), and the breaker at the end.
type Answers = (Vec<(usize, Result<bool, RejectReason>)>, Snapshot);

/// One run: `calls` calls, a call every few ms; the downstream fails in stretches and is slow at
/// times. A call's answer depends only on its number and time, so live and shadow runs see the
/// same downstream. A shadow run makes every call; a live run only the admitted ones.
fn run(b: &mut dyn Breaker, seed: u64, calls: usize) -> Answers {
    let mut answers = Vec::new();
    let mut now = Instant::from_secs(1);
    let mut x = seed;
    let mut held = Vec::new();
    for i in 0..calls {
        x = splitmix64(x);
        now += Duration::from_millis(1 + x % 400);
        // The downstream is down for 2,000 calls in every 5,000, and in shorter bursts.
        let failing = (i / 2_000) % 5 == 1 || (i / 700) % 9 == 4 || (i / 97) % 7 == 3;
        let outcome = match x % 100 {
            0..=4 => Outcome::Ignored,
            n if failing && n < 90 => Outcome::Failure,
            n if !failing && n < 8 => Outcome::Failure,
            _ => Outcome::Success,
        };
        let took = Duration::from_millis(if (x >> 20).is_multiple_of(10) {
            3_000
        } else {
            20
        });
        match b.try_acquire(now) {
            Ok(permit) => {
                answers.push((i, Ok(permit.is_shadow())));
                // Some calls overlap: held over to the next call.
                if (x >> 30).is_multiple_of(4) {
                    held.push((permit, outcome, took));
                } else {
                    b.record_latency(permit, outcome, took, now);
                }
            }
            Err(r) => answers.push((i, Err(r.reason))),
        }
        // Held calls report together now and then, whichever calls were admitted.
        if (x >> 40).is_multiple_of(3) {
            for (p, o, t) in held.drain(..) {
                b.record_latency(p, o, t, now);
            }
        }
        if i == calls / 2 {
            // An operator's forced open and reset halfway: forced open is obeyed in shadow mode.
            b.force_open(now);
            answers.push((
                usize::MAX,
                b.try_acquire(now)
                    .map(|p| p.is_shadow())
                    .map_err(|r| r.reason),
            ));
            b.reset(now);
        }
    }
    (answers, b.snapshot(now))
}

/// Runs `config` live and in shadow mode on both breakers, and compares what each saw.
fn live_and_shadow(config: BreakerConfig, seed: u64) {
    let mut seen = Vec::new();
    for shadow in [false, true] {
        let policy = BreakerPolicy::new(BreakerConfig { shadow, ..config }).unwrap();
        let log = Log::default();
        let mut m = CircuitBreaker::<_, AnyWindow<128, 32, 2>, 10>::with_storage(&policy)
            .unwrap()
            .with_seed(seed)
            .observe(Rejections::new(log.clone()));
        let answers = run(&mut m, seed, 12_000);
        seen.push(summary(answers, &log, m.observer(), shadow));
        let log = Log::default();
        let s = SharedBreaker::<_, AtomicAnyWindow<128, 32, 2>, 10>::with_storage(&policy)
            .unwrap()
            .with_seed(seed)
            .observe(Rejections::new(log.clone()));
        let answers = run(&mut &s, seed, 12_000);
        seen.push(summary(answers, &log, s.observer(), shadow));
    }
    let [live, shared_live, shadow, shared_shadow] = &seen[..] else {
        unreachable!()
    };
    assert_eq!(live, shared_live, "CircuitBreaker and SharedBreaker live");
    assert_eq!(
        shadow, shared_shadow,
        "CircuitBreaker and SharedBreaker in shadow mode"
    );
    assert!(
        !live.refused.is_empty() && live.transitions.len() > 4,
        "the run exercises the breaker: {} rejections, {} transitions",
        live.refused.len(),
        live.transitions.len()
    );
    assert_eq!(shadow.transitions, live.transitions, "would-be transitions");
    assert_eq!(shadow.refused, live.refused, "would-be rejections");
}

fn summary((answers, end): Answers, log: &Log, counts: &Rejections<Log>, shadow: bool) -> Seen {
    let forced = RejectReason::ForcedOpen;
    let mut refused = Vec::new();
    for (i, answer) in answers {
        match answer {
            // The operator's forced open rejects in both modes.
            Err(reason) if i == usize::MAX => assert_eq!(reason, forced),
            Ok(_) if i == usize::MAX => panic!("forced open admitted a call"),
            Err(reason) => {
                assert!(!shadow, "shadow mode rejected call {i}: {reason:?}");
                refused.push(i);
            }
            Ok(true) => {
                assert!(shadow, "a live breaker handed out a shadow permit");
                refused.push(i);
            }
            Ok(false) => {}
        }
    }
    let reasons = [
        RejectReason::Open {
            retry_after: Duration::ZERO,
        },
        RejectReason::HalfOpenFull,
        RejectReason::SlowStart,
    ];
    let by_reason = reasons.map(|r| {
        if shadow {
            counts.shadow(r)
        } else {
            counts.live(r)
        }
    });
    // The observer heard of every one, and of the forced open's, which is never shadowed.
    assert_eq!(by_reason.iter().sum::<u64>(), refused.len() as u64);
    assert_eq!(counts.live(forced), 1);
    if shadow {
        assert_eq!(counts.live_total(), 1);
    } else {
        assert_eq!(counts.shadow_total(), 0);
    }
    Seen {
        transitions: log.0.borrow().clone(),
        refused,
        by_reason,
        end,
    }
}

#[test]
fn shadow_mode_decides_as_the_live_breaker_with_the_seed_profile() {
    for seed in 1..=3 {
        live_and_shadow(BreakerConfig::reliablekit(), seed);
    }
}

#[test]
fn shadow_mode_decides_as_the_live_breaker_with_the_layered_exercise() {
    for seed in 1..=3 {
        live_and_shadow(BreakerConfig::layered_exercise(), seed);
    }
}

#[test]
fn shadow_mode_decides_as_the_live_breaker_with_resilience4j_probes_and_slow_start() {
    let config = BreakerConfig {
        minimum_calls: 20,
        window: reliable_core::breaker::WindowConfig::Count { calls: 50 },
        half_open: HalfOpenConfig {
            max_in_flight: Some(4),
            rule: ProbeRule::Rate { calls: 6 },
            probe_timeout: Duration::from_secs(2),
            ..BreakerConfig::resilience4j().half_open
        },
        slow_start: Some(SlowStartConfig {
            ramp: Duration::from_secs(120),
            initial: 0.0,
        }),
        open: reliable_core::breaker::OpenConfig {
            duration: Duration::from_secs(10),
            ..BreakerConfig::resilience4j().open
        },
        slow_calls: Some(reliable_core::breaker::SlowCallRule {
            threshold: Duration::from_secs(2),
            rate: 0.5,
        }),
        ..BreakerConfig::resilience4j()
    };
    for seed in 1..=3 {
        live_and_shadow(config, seed);
    }
}

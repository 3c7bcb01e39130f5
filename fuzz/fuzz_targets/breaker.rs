//! Fuzzes the circuit breaker: arbitrary configs and operation sequences (time steps forwards,
//! backwards and huge, acquire, record, manual controls), checking the design's invariants after
//! every step, and that the lock-free `SharedBreaker`, driven through the same history one call at
//! a time, gives exactly the same answers as the `&mut` `CircuitBreaker`.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use reliable_core::breaker::{
    AnyWindow, AtomicAnyWindow, Breaker, BreakerConfig, BreakerPolicy, CircuitBreaker,
    HalfOpenConfig, LastTransition, OpenConfig, Outcome, Permit, ProbeRule, RejectReason,
    SharedBreaker, SlowCallRule, SlowStartConfig, State, WindowConfig,
};
use reliable_core::{Duration, Instant};

#[derive(Arbitrary, Debug)]
struct Input {
    config: RawConfig,
    seed: u64,
    ops: Vec<Op>,
}

#[derive(Arbitrary, Debug)]
struct RawConfig {
    consecutive: Option<u8>,
    failure_rate: Option<u32>,
    slow: Option<(u32, u32)>,
    minimum_calls: u8,
    window: RawWindow,
    open_ms: u32,
    growth: u8,
    max_mult: u16,
    jitter: u32,
    max_in_flight: Option<u8>,
    rate_rule: bool,
    decide: u8,
    probe_timeout_ms: Option<u32>,
    slow_start: Option<(u32, u32)>,
}

#[derive(Arbitrary, Debug)]
enum RawWindow {
    Count(u8),
    Time(u32, u8),
}

#[derive(Arbitrary, Debug)]
enum Op {
    Acquire(Step),
    Record { pick: u8, outcome: u8, step: Step },
    Wait(Step),
    ForceOpen,
    Disable,
    Reset,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Step {
    Millis(u16),
    Seconds(u16),
    Back(u16),
    Huge(u64),
}

/// Maps raw fuzz bytes onto configs, mostly valid ones (invalid ones must be refused cleanly too).
fn config(r: &RawConfig) -> BreakerConfig {
    let frac = |x: u32| f64::from(x) / f64::from(u32::MAX);
    BreakerConfig {
        consecutive_failures: r.consecutive.map(u32::from),
        failure_rate: r.failure_rate.map(frac),
        slow_calls: r.slow.map(|(ms, rate)| SlowCallRule {
            threshold: Duration::from_millis(u64::from(ms % 10_000)),
            rate: frac(rate),
        }),
        minimum_calls: u32::from(r.minimum_calls),
        window: match r.window {
            RawWindow::Count(c) => WindowConfig::Count {
                calls: u32::from(c),
            },
            RawWindow::Time(ms, b) => WindowConfig::Time {
                span: Duration::from_millis(u64::from(ms % 100_000)),
                buckets: u32::from(b % 20),
            },
        },
        open: OpenConfig {
            duration: Duration::from_millis(u64::from(r.open_ms % 3_600_000)),
            growth: 1.0 + f64::from(r.growth) / 16.0,
            max: Some(Duration::from_millis(
                u64::from(r.open_ms % 3_600_000) * u64::from(r.max_mult),
            )),
            jitter: frac(r.jitter),
            strictly_after: false,
        },
        half_open: HalfOpenConfig {
            max_in_flight: r.max_in_flight.map(|n| u32::from(n % 20)),
            rule: if r.rate_rule {
                ProbeRule::Rate {
                    calls: u32::from(r.decide),
                }
            } else {
                ProbeRule::Consecutive {
                    successes: u32::from(r.decide),
                }
            },
            probe_timeout: r
                .probe_timeout_ms
                .map_or(Duration::MAX, |ms| Duration::from_millis(u64::from(ms))),
            decide_at_minimum: false,
            max_wait: None,
            max_wait_closes: false,
        },
        slow_start: r.slow_start.map(|(ms, init)| SlowStartConfig {
            ramp: Duration::from_millis(u64::from(ms)),
            initial: frac(init),
        }),
        shadow: false,
        initial_state: State::Closed,
    }
}

/// The shared breaker under test.
type Shared<'p> = SharedBreaker<&'p BreakerPolicy, AtomicAnyWindow<256, 16, 4>, 16, LastTransition>;

fuzz_target!(|input: Input| {
    let Ok(policy) = BreakerPolicy::new(config(&input.config)) else {
        return;
    };
    let Ok(breaker) = CircuitBreaker::<_, AnyWindow<256, 16, 4>, 16>::with_storage(&policy) else {
        return;
    };
    let mut b = breaker
        .with_seed(input.seed)
        .observe(LastTransition::default());
    // The shared breaker refuses a few configs the `&mut` one takes (packing limits, each a
    // documented ConfigError); where it accepts one, it must agree call for call.
    let shared = SharedBreaker::<_, AtomicAnyWindow<256, 16, 4>, 16>::with_storage(&policy)
        .ok()
        .map(|s| s.with_seed(input.seed).observe(LastTransition::default()));
    // Every call through both breakers, with the transition it reported to its observer.
    let taken = |s: &Option<Shared<'_>>| s.as_ref().and_then(|s| s.observer().take());
    let max_open = policy.max_open_time();
    // Each permit with its twin from the shared breaker (when there is one).
    let mut permits: Vec<(Permit, u32, Option<Permit>)> = Vec::new();
    let mut clock = 0u64;
    for op in input.ops.iter().take(1_000) {
        let step = match op {
            Op::Acquire(s) | Op::Wait(s) | Op::Record { step: s, .. } => Some(*s),
            _ => None,
        };
        clock = match step {
            Some(Step::Millis(ms)) => clock.saturating_add(u64::from(ms) * 1_000_000),
            Some(Step::Seconds(s)) => clock.saturating_add(u64::from(s) * 1_000_000_000),
            Some(Step::Back(ms)) => clock.saturating_sub(u64::from(ms) * 1_000_000),
            Some(Step::Huge(n)) => clock.saturating_add(n),
            None => clock,
        };
        let now = Instant::from_nanos(clock);
        match op {
            Op::Acquire(_) => {
                let seen = b.state(now);
                let answer = b.try_acquire(now);
                let t = b.observer().take();
                let twin = shared.as_ref().map(|s| s.try_acquire(now));
                if let Some(twin) = &twin {
                    let same = match (&answer, twin) {
                        (Ok(p), Ok(q)) => p.is_probe() == q.is_probe(),
                        (Err(r), Err(q)) => r == q,
                        _ => false,
                    };
                    assert!(
                        same && taken(&shared) == t,
                        "shared breaker disagrees on acquire: {answer:?} vs {twin:?}"
                    );
                }
                match answer {
                    Ok(p) => {
                        // An open breaker admits nothing until its time is up.
                        assert!(
                            !matches!(seen, State::Open | State::ForcedOpen),
                            "admitted while {seen}"
                        );
                        permits.push((p, b.generation(), twin.and_then(Result::ok)));
                    }
                    Err(r) => {
                        if let RejectReason::Open { retry_after } = r.reason {
                            assert!(
                                retry_after <= max_open,
                                "retry_after {retry_after} above the maximum {max_open}"
                            );
                        }
                    }
                }
            }
            Op::Record { pick, outcome, .. } if !permits.is_empty() => {
                let (p, generation, twin) = permits.swap_remove(usize::from(*pick) % permits.len());
                let outcome = match outcome % 3 {
                    0 => Outcome::Success,
                    1 => Outcome::Failure,
                    _ => Outcome::Ignored,
                };
                let before = (b.state(now), b.generation());
                b.record(p, outcome, now);
                let t = b.observer().take();
                if let (Some(s), Some(q)) = (&shared, twin) {
                    s.record(q, outcome, now);
                    assert_eq!(taken(&shared), t, "shared breaker disagrees on record");
                }
                if generation != before.1 {
                    // A stale permit changes nothing.
                    assert!(t.is_none());
                    assert_eq!((b.state(now), b.generation()), before);
                }
            }
            Op::ForceOpen | Op::Disable | Op::Reset => {
                let manual = |b: &mut dyn Breaker| match op {
                    Op::ForceOpen => b.force_open(now),
                    Op::Disable => b.disable(now),
                    _ => b.reset(now),
                };
                manual(&mut b);
                let t = b.observer().take();
                if let Some(s) = &shared {
                    manual(&mut &*s);
                    assert_eq!(taken(&shared), t, "shared breaker disagrees on {op:?}");
                }
            }
            _ => {}
        }
        if let Some(s) = &shared {
            assert_eq!(
                s.state(now),
                b.state(now),
                "shared breaker disagrees on the state"
            );
            assert_eq!(
                s.counts(now),
                b.counts(now),
                "shared breaker disagrees on the counts"
            );
            assert_eq!(s.probes_in_flight(), b.probes_in_flight());
        }
        if let Some(max) = policy.max_in_flight() {
            assert!(b.probes_in_flight() <= max);
        }
    }
});

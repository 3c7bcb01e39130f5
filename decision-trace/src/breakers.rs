//! The breaker part of the script: a count-window breaker and a time-window breaker, each driven
//! through the same steps from an ordinary start and from near the end of time.

use core::hint::black_box;

use reliable_core::breaker::{
    Breaker, BreakerConfig, BreakerPolicy, CircuitBreaker, CountWindow, HalfOpenConfig, OpenConfig,
    Outcome, Permit, ProbeRule, RejectReason, SlowCallRule, SlowStartConfig, State, TimeWindow,
    Window, WindowConfig,
};
use reliable_core::{Duration, Instant};

use crate::Trace;

/// The steps, a quarter second apart: `S` a success (5 ms), `L` a slow success (300 ms), `F` a
/// failure, `X` a fatal error (ignored), `H` a call held open, `R` the held calls succeed, `.` a
/// second without calls. It trips on the failure rate, is refused while open, fills the half-open
/// probe slots, closes and ramps up (slow start), trips on slow calls, reopens after a failed
/// probe and after a probe's lease expires (each time for longer), and trips again.
pub const BREAKER_SCRIPT: &str = concat!(
    "SSFSFFSFFFSFF....HHSR",
    "SSSSSSSSSSSSSSSS",
    "LLLLLLLLLL",
    "...F......H.........HR........SS",
    "SSSSXXXXFFFFFF",
);

const STEP: Duration = Duration::from_millis(250);
const PAUSE: Duration = Duration::from_secs(1);

/// Where each breaker's run starts: one second in, and 30 s before the end of time.
pub const STARTS: [Instant; 2] = [
    Instant::from_secs(1),
    Instant::MAX.saturating_sub(Duration::from_secs(30)),
];

/// Rates over the last 10 calls, slow calls, growing jittered open times, two leased probes that
/// must both succeed, slow start.
const COUNT: BreakerConfig = BreakerConfig {
    consecutive_failures: None,
    failure_rate: Some(0.5),
    slow_calls: Some(SlowCallRule {
        threshold: Duration::from_millis(200),
        rate: 0.6,
    }),
    minimum_calls: 6,
    window: WindowConfig::Count { calls: 10 },
    open: OpenConfig {
        duration: Duration::from_secs(2),
        growth: 2.0,
        max: Some(Duration::from_secs(16)),
        jitter: 0.25,
        strictly_after: false,
    },
    half_open: HalfOpenConfig {
        max_in_flight: Some(2),
        rule: ProbeRule::Consecutive { successes: 2 },
        probe_timeout: Duration::from_secs(1),
        decide_at_minimum: false,
        max_wait: None,
        max_wait_closes: false,
    },
    slow_start: Some(SlowStartConfig {
        ramp: Duration::from_secs(4),
        initial: 0.25,
    }),
    shadow: false,
    initial_state: State::Closed,
};

/// Failures in a row and a rate over 5 s in 5 buckets, a round of three probes judged by rate.
const TIME: BreakerConfig = BreakerConfig {
    consecutive_failures: Some(3),
    failure_rate: Some(0.4),
    slow_calls: None,
    minimum_calls: 4,
    window: WindowConfig::Time {
        span: Duration::from_secs(5),
        buckets: 5,
    },
    open: OpenConfig {
        duration: Duration::from_secs(1),
        growth: 1.5,
        max: Some(Duration::from_secs(10)),
        jitter: 0.5,
        strictly_after: false,
    },
    half_open: HalfOpenConfig {
        max_in_flight: Some(3),
        rule: ProbeRule::Rate { calls: 3 },
        probe_timeout: Duration::from_secs(1),
        decide_at_minimum: false,
        max_wait: None,
        max_wait_closes: false,
    },
    slow_start: None,
    shadow: false,
    initial_state: State::Closed,
};

/// Each breaker's jitter seed (fixed: the trace must not depend on build order).
pub const SEED: u64 = 0x5EED_B4EA_CE55;

/// Runs the script on a breaker with window storage `W` from each of [`STARTS`].
type Runs = fn(&mut Trace<'_>, &str, &BreakerPolicy);

/// The script's breakers: a name, a config, and the storage its window needs (16 calls, or 8
/// buckets; 4 probe slots).
const BREAKERS: [(&str, BreakerConfig, Runs); 2] = [
    ("count", COUNT, from_each_start::<CountWindow<16>>),
    ("time", TIME, from_each_start::<TimeWindow<8>>),
];

pub(crate) fn all(t: &mut Trace<'_>) {
    for (name, config, runs) in BREAKERS {
        // Validated at run time (black_box): the target's own f64 arithmetic converts the rates.
        match BreakerPolicy::new(black_box(config)) {
            Ok(policy) => runs(t, name, &policy),
            Err(e) => t.refused(name, e),
        }
    }
}

fn from_each_start<W: Window>(t: &mut Trace<'_>, name: &str, policy: &BreakerPolicy) {
    for t0 in STARTS {
        match CircuitBreaker::<_, W, 4>::with_storage(policy) {
            Ok(breaker) => drive_breaker(t, name, t0, &mut breaker.with_seed(SEED)),
            Err(e) => t.refused(name, e),
        }
    }
}

/// Runs [`BREAKER_SCRIPT`] on `breaker` from `t0`, a line per call.
pub(crate) fn drive_breaker(
    t: &mut Trace<'_>,
    name: &str,
    t0: Instant,
    breaker: &mut impl Breaker,
) {
    let mut now = t0;
    let mut held: [Option<Permit>; 2] = [None, None];
    for (i, step) in BREAKER_SCRIPT.bytes().enumerate() {
        if step == b'.' {
            now += PAUSE;
            continue;
        }
        t.s("breaker ").s(name).kv("from", t0.as_nanos());
        t.kv("i", i as u64).kv("t", now.as_nanos()).s(" ");
        t.s(match step {
            b'S' => "S",
            b'L' => "L",
            b'F' => "F",
            b'X' => "X",
            b'H' => "H",
            _ => "R",
        });
        let mut end = now;
        if step == b'R' {
            for permit in held.iter_mut().filter_map(Option::take) {
                breaker.record(permit, Outcome::Success, now);
            }
            t.s(" released -> ").s(breaker.state(now).name());
        } else {
            match breaker.try_acquire(now) {
                Ok(permit) => {
                    t.kv("gen", u64::from(permit.generation()));
                    t.kv("probe", u64::from(permit.is_probe()));
                    let (outcome, latency) = match step {
                        b'S' => (Outcome::Success, Duration::from_millis(5)),
                        b'L' => (Outcome::Success, Duration::from_millis(300)),
                        b'X' => (Outcome::Ignored, Duration::from_millis(5)),
                        _ => (Outcome::Failure, Duration::from_millis(5)),
                    };
                    if step == b'H' {
                        match held.iter_mut().find(|slot| slot.is_none()) {
                            Some(slot) => *slot = Some(permit),
                            None => breaker.record(permit, Outcome::Ignored, now),
                        }
                        t.s(" held");
                    } else {
                        end = now + latency;
                        breaker.record(permit, outcome, end);
                    }
                    t.s(" -> ").s(breaker.state(end).name());
                }
                Err(rejection) => {
                    t.s(" reject ").s(match rejection.reason {
                        RejectReason::Open { .. } => "open",
                        RejectReason::HalfOpenFull => "half-open-full",
                        RejectReason::ForcedOpen => "forced-open",
                        RejectReason::SlowStart => "slow-start",
                    });
                    if let Some(after) = rejection.retry_after() {
                        t.kv("retry_after", after.as_nanos());
                    }
                    t.s(" state=").s(breaker.state(now).name());
                }
            }
        }
        let snapshot = breaker.snapshot(end);
        t.kv("calls", snapshot.counts.calls);
        t.kv("failures", snapshot.counts.failures);
        t.kv("slow", snapshot.counts.slow);
        t.kv("in_a_row", u64::from(snapshot.consecutive_failures));
        t.kv("reopens", u64::from(snapshot.reopens)).end();
        now += STEP;
    }
}

#[cfg(all(test, target_has_atomic = "64"))]
mod tests {
    use super::*;
    use reliable_core::breaker::{
        AtomicCountWindow, AtomicTimeWindow, AtomicWindow, SharedBreaker,
    };

    fn both<W: Window, A: AtomicWindow>(policy: &BreakerPolicy, name: &str, t0: Instant) {
        let (mut plain, mut shared) = (Vec::new(), Vec::new());
        let mut a = CircuitBreaker::<_, W, 4>::with_storage(policy)
            .expect("fits")
            .with_seed(SEED);
        let b = SharedBreaker::<_, A, 4>::with_storage(policy)
            .expect("fits")
            .with_seed(SEED);
        drive_breaker(&mut Trace::new(&mut plain), name, t0, &mut a);
        drive_breaker(&mut Trace::new(&mut shared), name, t0, &mut &b);
        let (plain, shared) = (String::from_utf8(plain), String::from_utf8(shared));
        assert_eq!(plain, shared, "{name} from {t0:?}");
    }

    /// The lock-free breaker (64-bit atomics: not on a Cortex-M) decides as the `&mut` one does.
    #[test]
    fn the_shared_breaker_prints_the_same_trace() {
        for t0 in STARTS {
            let count = BreakerPolicy::new(COUNT).expect("valid");
            both::<CountWindow<16>, AtomicCountWindow<16>>(&count, "count", t0);
            let time = BreakerPolicy::new(TIME).expect("valid");
            both::<TimeWindow<8>, AtomicTimeWindow<8>>(&time, "time", t0);
        }
    }
}

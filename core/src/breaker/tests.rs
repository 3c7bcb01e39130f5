//! Timelines of the named breakers and the behaviours the module docs promise.

use super::*;
use crate::{Duration, Instant};

fn t(secs: u64) -> Instant {
    Instant::from_secs(secs)
}
fn ms(millis: u64) -> Instant {
    Instant::from_millis(millis)
}
fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// The breaker of these tests: it borrows its policy and keeps its latest transition.
type Cb<'p, W = CountWindow<64>, const P: usize = 1> =
    CircuitBreaker<&'p BreakerPolicy, W, P, LastTransition>;

/// Each call with the transition it made, taken from the observer.
trait Traced {
    fn acquire_t(&mut self, now: Instant) -> (Result<Permit, Rejection>, Option<Transition>);
    fn record_t(&mut self, permit: Permit, outcome: Outcome, now: Instant) -> Option<Transition>;
    fn force_open_t(&mut self, now: Instant) -> Option<Transition>;
    fn reset_t(&mut self, now: Instant) -> Option<Transition>;
}

impl<W: Window, const P: usize> Traced for Cb<'_, W, P> {
    fn acquire_t(&mut self, now: Instant) -> (Result<Permit, Rejection>, Option<Transition>) {
        self.observer().take();
        let r = self.try_acquire(now);
        (r, self.observer().take())
    }
    fn record_t(&mut self, permit: Permit, outcome: Outcome, now: Instant) -> Option<Transition> {
        self.observer().take();
        self.record(permit, outcome, now);
        self.observer().take()
    }
    fn force_open_t(&mut self, now: Instant) -> Option<Transition> {
        self.observer().take();
        self.force_open(now);
        self.observer().take()
    }
    fn reset_t(&mut self, now: Instant) -> Option<Transition> {
        self.observer().take();
        self.reset(now);
        self.observer().take()
    }
}

fn call<W: Window, const P: usize>(
    b: &mut Cb<'_, W, P>,
    outcome: Outcome,
    now: Instant,
) -> Option<Transition> {
    let permit = b.try_acquire(now).expect("admitted");
    b.record_t(permit, outcome, now)
}

fn open_for(r: Result<Permit, Rejection>) -> Duration {
    match r {
        Err(Rejection {
            reason: RejectReason::Open { retry_after },
        }) => retry_after,
        other => panic!("expected an open rejection, got {other:?}"),
    }
}

/// The layered-stack exercise's breaker (seed 001), one call every 5 s.
#[test]
fn layered_exercise_timeline() {
    let policy = BreakerPolicy::new(BreakerConfig::layered_exercise()).unwrap();
    let mut b = Cb::<NoWindow, 1>::with_storage(&policy).unwrap();
    for now in [5, 10] {
        assert_eq!(call(&mut b, Outcome::Success, t(now)), None);
    }
    assert_eq!(call(&mut b, Outcome::Failure, t(15)), None);
    assert_eq!(b.state(t(15)), State::Closed);
    let opened = call(&mut b, Outcome::Failure, t(20)).unwrap();
    assert_eq!(
        opened,
        Transition {
            from: State::Closed,
            to: State::Open,
            at: t(20)
        }
    );
    for (now, left) in [(25, 15), (30, 10), (35, 5)] {
        assert_eq!(b.state(t(now)), State::Open);
        assert_eq!(open_for(b.try_acquire(t(now))), secs(left), "at {now}s");
    }
    assert_eq!(b.state(t(40)), State::HalfOpen);
    let (trial, entered) = b.acquire_t(t(40));
    let trial = trial.unwrap();
    assert!(trial.is_probe());
    assert_eq!(
        entered.map(|t| (t.from, t.to)),
        Some((State::Open, State::HalfOpen))
    );
    let reopened = b.record_t(trial, Outcome::Failure, t(40)).unwrap();
    assert_eq!((reopened.from, reopened.to), (State::HalfOpen, State::Open));
    for (now, left) in [(45, 15), (50, 10), (55, 5)] {
        assert_eq!(open_for(b.try_acquire(t(now))), secs(left), "at {now}s");
    }
    let trial = b.try_acquire(t(60)).unwrap();
    let closed = b.record_t(trial, Outcome::Success, t(60)).unwrap();
    assert_eq!(
        closed,
        Transition {
            from: State::HalfOpen,
            to: State::Closed,
            at: t(60)
        }
    );
    assert_eq!(b.state(t(65)), State::Closed);
}

/// The seed library's breaker (reliablekit, seed 000).
#[test]
fn reliablekit_timeline() {
    let policy = BreakerPolicy::new(BreakerConfig::reliablekit()).unwrap();
    let mut b: Cb<'_> = Cb::with_storage(&policy).unwrap();
    // 19 failures: the window is not full yet, so no decision.
    for i in 0..19 {
        assert_eq!(call(&mut b, Outcome::Failure, ms(i)), None);
    }
    // The 20th call fills the window: 19/20 >= 50%.
    assert!(call(&mut b, Outcome::Success, ms(19)).is_some());
    assert_eq!(open_for(b.try_acquire(ms(19))), secs(30));
    // Half-open at 30 s: no concurrency gate, every call is a probe.
    let t0 = ms(19) + secs(30);
    let probes: std::vec::Vec<_> = (0..5).map(|_| b.try_acquire(t0).unwrap()).collect();
    assert!(probes.iter().all(Permit::is_probe));
    let mut probes = probes.into_iter();
    assert_eq!(
        b.record_t(probes.next().unwrap(), Outcome::Success, t0),
        None
    );
    assert_eq!(
        b.record_t(probes.next().unwrap(), Outcome::Success, t0),
        None
    );
    // Any failure re-opens and restarts the 30 s from now.
    let reopen = b
        .record_t(probes.next().unwrap(), Outcome::Failure, t0 + secs(1))
        .unwrap();
    assert_eq!(reopen.to, State::Open);
    assert_eq!(open_for(b.try_acquire(t0 + secs(1))), secs(30));
    // The remaining probes are stale now and change nothing.
    for p in probes {
        assert_eq!(b.record_t(p, Outcome::Success, t0 + secs(2)), None);
    }
    let t1 = t0 + secs(31);
    assert_eq!(call(&mut b, Outcome::Success, t1), None);
    assert_eq!(call(&mut b, Outcome::Success, t1), None);
    let closed = call(&mut b, Outcome::Success, t1).unwrap();
    assert_eq!((closed.from, closed.to), (State::HalfOpen, State::Closed));
    // Closing cleared the window: 10 failures then 10 successes trip only at the 20th call.
    assert_eq!(b.counts(t1).calls, 0);
    for i in 0..10 {
        assert_eq!(
            call(&mut b, Outcome::Failure, t1 + Duration::from_millis(i)),
            None
        );
    }
    for i in 10..19 {
        assert_eq!(
            call(&mut b, Outcome::Success, t1 + Duration::from_millis(i)),
            None
        );
    }
    assert!(
        call(&mut b, Outcome::Success, t1 + Duration::from_millis(19)).is_some(),
        "10/20 is >= 50%: inclusive"
    );
}

/// A window sliding past old failures: 9 of the last 20 never trips the seed breaker.
#[test]
fn reliablekit_window_slides() {
    let policy = BreakerPolicy::new(BreakerConfig::reliablekit()).unwrap();
    let mut b: Cb<'_> = Cb::with_storage(&policy).unwrap();
    for i in 0..1_000u64 {
        // Failure on 9 of every 20 calls, spread out.
        let outcome = if i % 20 < 9 {
            Outcome::Failure
        } else {
            Outcome::Success
        };
        assert_eq!(call(&mut b, outcome, ms(i)), None, "call {i}");
    }
}

/// resilience4j's defaults.
#[test]
fn resilience4j_timeline() {
    let policy = BreakerPolicy::new(BreakerConfig::resilience4j()).unwrap();
    assert!(
        Cb::<CountWindow<64>, 10>::with_storage(&policy).is_err(),
        "100 calls need CountWindow<100, 2>"
    );
    assert!(
        Cb::<CountWindow<128, 2>, 9>::with_storage(&policy).is_err(),
        "10 permits need 10 slots"
    );
    let mut b = Cb::<CountWindow<128, 2>, 10>::with_storage(&policy).unwrap();
    // 99 failures: under the minimum of 100 calls.
    for i in 0..99 {
        assert_eq!(call(&mut b, Outcome::Failure, ms(i)), None);
    }
    let opened = call(&mut b, Outcome::Success, ms(99)).unwrap();
    assert_eq!(opened.to, State::Open);
    // Open until strictly after the 60 s: 1 ns more.
    let ns = Duration::from_nanos(1);
    assert_eq!(
        open_for(b.try_acquire(ms(100))),
        Duration::from_millis(59_999) + ns
    );
    // Half-open: exactly 10 permitted calls, evaluated together.
    let t0 = ms(99) + secs(60) + ns;
    let mut permits: std::vec::Vec<_> = (0..10).map(|_| b.try_acquire(t0).unwrap()).collect();
    assert_eq!(
        b.try_acquire(t0).unwrap_err().reason,
        RejectReason::HalfOpenFull
    );
    assert_eq!(b.probes_in_flight(), 10);
    // 5 of 10 fail: 50% >= 50%, so it re-opens, but only once all 10 are in.
    for (i, p) in permits.drain(..).enumerate() {
        let outcome = if i < 5 {
            Outcome::Failure
        } else {
            Outcome::Success
        };
        let t = b.record_t(p, outcome, t0);
        assert_eq!(
            t.map(|t| t.to),
            if i == 9 { Some(State::Open) } else { None }
        );
    }
    // Next round: 4 of 10 fail, so it closes.
    let t1 = t0 + secs(60) + ns;
    let permits: std::vec::Vec<_> = (0..10).map(|_| b.try_acquire(t1).unwrap()).collect();
    let mut last = None;
    for (i, p) in permits.into_iter().enumerate() {
        last = b.record_t(
            p,
            if i < 4 {
                Outcome::Failure
            } else {
                Outcome::Success
            },
            t1,
        );
    }
    assert_eq!(last.map(|t| t.to), Some(State::Closed));
    // Slow calls: 100 calls all slower than 60 s trip at the 100% slow-rate threshold.
    let t2 = t1 + secs(1);
    for i in 0..100u64 {
        let start = t2 + secs(1_000 * i);
        let p = b.try_acquire(start).unwrap();
        let t = b.record_t(p, Outcome::Success, start + Duration::from_millis(60_001));
        assert_eq!(t.is_some(), i == 99, "call {i}");
    }
}

#[test]
fn probe_lease_expiry_reopens_instead_of_wedging() {
    let config = BreakerConfig {
        half_open: HalfOpenConfig {
            probe_timeout: secs(5),
            ..BreakerConfig::layered_exercise().half_open
        },
        ..BreakerConfig::layered_exercise()
    };
    let policy = BreakerPolicy::new(config).unwrap();
    let mut b = Cb::<NoWindow, 1>::with_storage(&policy).unwrap();
    call(&mut b, Outcome::Failure, t(0));
    call(&mut b, Outcome::Failure, t(0));
    let lost = b.try_acquire(t(20)).unwrap(); // the probe that never returns
    assert_eq!(
        b.try_acquire(t(24)).unwrap_err().reason,
        RejectReason::HalfOpenFull
    );
    let (r, caused) = b.acquire_t(t(25));
    let r = r.unwrap_err();
    assert_eq!(
        caused.map(|t| (t.from, t.to)),
        Some((State::HalfOpen, State::Open))
    );
    assert_eq!(r.retry_after(), Some(secs(20)));
    // The lost probe's late answer is stale.
    assert_eq!(b.record_t(lost, Outcome::Success, t(26)), None);
    assert_eq!(b.state(t(26)), State::Open);
    let probe = b.try_acquire(t(45)).unwrap();
    assert_eq!(
        b.record_t(probe, Outcome::Success, t(46)).map(|t| t.to),
        Some(State::Closed)
    );
}

#[test]
fn stale_permits_from_before_a_trip_change_nothing() {
    let policy = BreakerPolicy::new(BreakerConfig::layered_exercise()).unwrap();
    let mut b = Cb::<NoWindow, 1>::with_storage(&policy).unwrap();
    let early = b.try_acquire(t(0)).unwrap();
    let early2 = b.try_acquire(t(0)).unwrap();
    call(&mut b, Outcome::Failure, t(1));
    call(&mut b, Outcome::Failure, t(1));
    let probe = b.try_acquire(t(21)).unwrap();
    b.record_t(probe, Outcome::Success, t(21));
    assert_eq!(b.state(t(21)), State::Closed);
    // Late failures from the first generation must not count towards a new trip.
    assert_eq!(b.record_t(early, Outcome::Failure, t(22)), None);
    assert_eq!(b.record_t(early2, Outcome::Failure, t(22)), None);
    assert_eq!(b.consecutive_failures(), 0);
}

#[test]
fn a_clock_stepping_back_counts_as_no_time() {
    let policy = BreakerPolicy::new(BreakerConfig::layered_exercise()).unwrap();
    let mut b = Cb::<NoWindow, 1>::with_storage(&policy).unwrap();
    call(&mut b, Outcome::Failure, t(100));
    call(&mut b, Outcome::Failure, t(100));
    // A clock that jumps back cannot extend or shorten the open time.
    assert_eq!(open_for(b.try_acquire(t(5))), secs(20));
    assert_eq!(open_for(b.try_acquire(t(110))), secs(10));
    assert_eq!(open_for(b.try_acquire(t(0))), secs(10));
    assert_eq!(b.state(Instant::ZERO), State::Open);
    // Huge jumps saturate instead of overflowing.
    assert!(b.try_acquire(Instant::MAX).is_ok());
}

#[test]
fn growth_and_jitter_never_exceed_the_cap() {
    let config = BreakerConfig {
        open: OpenConfig {
            duration: secs(1),
            growth: 3.0,
            max: Some(secs(20)),
            jitter: 0.5,
            strictly_after: false,
        },
        ..BreakerConfig::layered_exercise()
    };
    let policy = BreakerPolicy::new(config).unwrap();
    for seed in 0..50 {
        let mut b = Cb::<NoWindow, 1>::with_storage(&policy)
            .unwrap()
            .with_seed(seed);
        call(&mut b, Outcome::Failure, t(0));
        call(&mut b, Outcome::Failure, t(0));
        let mut now = t(0);
        let mut seen = std::vec::Vec::new();
        for round in 0..8 {
            let left = open_for(b.try_acquire(now));
            assert!(left <= secs(20), "seed {seed} round {round}: {left}");
            let nominal = policy.open_time_before_jitter(round).as_nanos();
            assert!(
                left.as_nanos() >= nominal / 2,
                "at least (1 - jitter) of nominal"
            );
            seen.push(left);
            now += left;
            let probe = b.try_acquire(now).unwrap();
            b.record_t(probe, Outcome::Failure, now);
        }
        assert_eq!(b.reopens(), 8);
        assert!(seen.windows(2).any(|w| w[0] != w[1]));
    }
    // Different seeds spread the first open time.
    let firsts: std::collections::BTreeSet<_> = (0..20)
        .map(|seed| {
            let mut b = Cb::<NoWindow, 1>::with_storage(&policy)
                .unwrap()
                .with_seed(seed);
            call(&mut b, Outcome::Failure, t(0));
            call(&mut b, Outcome::Failure, t(0));
            open_for(b.try_acquire(t(0)))
        })
        .collect();
    assert!(firsts.len() > 15, "jitter spreads open times: {firsts:?}");
}

#[test]
fn slow_start_admits_a_rising_share() {
    let config = BreakerConfig {
        slow_start: Some(SlowStartConfig {
            ramp: secs(10),
            initial: 0.0,
        }),
        ..BreakerConfig::layered_exercise()
    };
    let policy = BreakerPolicy::new(config).unwrap();
    let mut b = Cb::<NoWindow, 1>::with_storage(&policy).unwrap();
    // No ramp for a new breaker.
    for _ in 0..10 {
        assert!(b.try_acquire(t(0)).is_ok());
    }
    call(&mut b, Outcome::Failure, t(0));
    call(&mut b, Outcome::Failure, t(0));
    let probe = b.try_acquire(t(20)).unwrap();
    b.record_t(probe, Outcome::Success, t(20));
    // 1,000 calls per second over the 10 s ramp: the admitted share in each second follows it.
    let mut admitted_per_sec = [0u32; 11];
    for i in 0..11_000u64 {
        let now = t(20) + Duration::from_millis(i);
        match b.try_acquire(now) {
            Ok(p) => {
                admitted_per_sec[(i / 1_000) as usize] += 1;
                b.record_t(p, Outcome::Ignored, now);
            }
            Err(r) => assert_eq!(r.reason, RejectReason::SlowStart),
        }
    }
    for (sec, &n) in admitted_per_sec.iter().enumerate().take(10) {
        // Share rises from sec/10 to (sec+1)/10: about 50 + 100*sec admitted in that second.
        let expect = 50 + 100 * sec as u32;
        assert!(
            n.abs_diff(expect) <= 2,
            "second {sec}: {n} admitted, expected about {expect}"
        );
    }
    assert_eq!(admitted_per_sec[10], 1_000);
    // A reset starts without a ramp.
    b.force_open(t(40));
    b.reset(t(40));
    assert!((0..100).all(|i| b.try_acquire(t(40) + Duration::from_millis(i)).is_ok()));
}

#[test]
fn manual_controls() {
    let policy = BreakerPolicy::new(BreakerConfig::reliablekit()).unwrap();
    let mut b: Cb<'_> = Cb::with_storage(&policy).unwrap();
    let before = b.try_acquire(t(0)).unwrap();
    let forced = b.force_open_t(t(1)).unwrap();
    assert_eq!((forced.from, forced.to), (State::Closed, State::ForcedOpen));
    assert_eq!(
        b.try_acquire(t(1_000)).unwrap_err().reason,
        RejectReason::ForcedOpen
    );
    assert_eq!(b.record_t(before, Outcome::Failure, t(2)), None);
    // Disabled: everything admitted, outcomes only feed metrics.
    b.disable(t(3));
    for i in 0..100 {
        assert_eq!(
            call(&mut b, Outcome::Failure, t(3) + Duration::from_millis(i)),
            None
        );
    }
    assert_eq!(b.state(t(4)), State::Disabled);
    assert_eq!(b.counts(t(4)).failures, 20);
    let reset = b.reset_t(t(5)).unwrap();
    assert_eq!((reset.from, reset.to), (State::Disabled, State::Closed));
    assert_eq!(b.counts(t(5)), Counts::default());
    assert_eq!(b.reset_t(t(6)), None, "already closed: no transition");
}

#[test]
fn time_window_trips_on_rate_and_forgets_old_failures() {
    let config = BreakerConfig {
        failure_rate: Some(0.5),
        minimum_calls: 4,
        window: WindowConfig::Time {
            span: secs(10),
            buckets: 10,
        },
        ..BreakerConfig::new()
    };
    let policy = BreakerPolicy::new(config).unwrap();
    assert!(Cb::<CountWindow<64>, 1>::with_storage(&policy).is_err());
    assert!(Cb::<NoWindow, 1>::with_storage(&policy).is_err());
    let mut b = Cb::<TimeWindow<10>, 1>::with_storage(&policy).unwrap();
    call(&mut b, Outcome::Failure, t(0));
    call(&mut b, Outcome::Failure, t(1));
    // 12 s later those failures are gone: 1 failure of 4 does not trip.
    for now in [13, 13, 13] {
        assert_eq!(call(&mut b, Outcome::Success, t(now)), None);
    }
    assert_eq!(call(&mut b, Outcome::Failure, t(14)), None);
    assert_eq!(call(&mut b, Outcome::Failure, t(14)), None);
    // 3 of 6 in the window: trips.
    assert_eq!(
        call(&mut b, Outcome::Failure, t(15)).map(|t| t.to),
        Some(State::Open)
    );
    // AnyWindow picks the kind from the policy.
    assert!(Cb::<AnyWindow<64, 10>, 1>::with_storage(&policy).is_ok());
}

#[test]
fn ignored_outcomes_free_probe_slots_without_deciding() {
    let config = BreakerConfig {
        half_open: HalfOpenConfig {
            max_in_flight: Some(1),
            rule: ProbeRule::Consecutive { successes: 2 },
            probe_timeout: secs(5),
            decide_at_minimum: false,
            max_wait: None,
            max_wait_closes: false,
        },
        ..BreakerConfig::layered_exercise()
    };
    let policy = BreakerPolicy::new(config).unwrap();
    let mut b = Cb::<NoWindow, 2>::with_storage(&policy).unwrap();
    call(&mut b, Outcome::Failure, t(0));
    call(&mut b, Outcome::Failure, t(0));
    let p = b.try_acquire(t(20)).unwrap();
    assert_eq!(b.record_t(p, Outcome::Ignored, t(20)), None);
    assert_eq!(b.probes_in_flight(), 0);
    assert_eq!(call(&mut b, Outcome::Success, t(21)), None);
    assert_eq!(
        call(&mut b, Outcome::Success, t(21)).map(|t| t.to),
        Some(State::Closed)
    );
}

#[test]
fn sizes_stay_small() {
    // A breaker sharing its policy, with a 64-call window and one probe slot: 120 bytes.
    assert_eq!(
        core::mem::size_of::<CircuitBreaker<&BreakerPolicy, CountWindow<64>, 1>>(),
        120
    );
    assert_eq!(core::mem::size_of::<Permit>(), 16);
    assert!(core::mem::size_of::<CircuitBreaker<&BreakerPolicy, NoWindow, 1>>() <= 96);
    // The shared one, with the same window: four cache lines.
    #[cfg(not(loom))]
    assert_eq!(
        core::mem::size_of::<SharedBreaker<&BreakerPolicy, AtomicCountWindow<64>, 1>>(),
        256
    );
}

/// Found by the reference-model test: the late answer of a probe whose lease expired must neither
/// free the slot leased again since nor count a second time.
#[test]
fn late_answer_of_an_expired_probe_is_ignored() {
    let config = BreakerConfig {
        half_open: HalfOpenConfig {
            max_in_flight: Some(1),
            rule: ProbeRule::Rate { calls: 3 },
            probe_timeout: secs(1),
            decide_at_minimum: false,
            max_wait: None,
            max_wait_closes: false,
        },
        failure_rate: Some(1.0),
        window: WindowConfig::Count { calls: 2 },
        minimum_calls: 2,
        ..BreakerConfig::new()
    };
    let policy = BreakerPolicy::new(config).unwrap();
    let mut b = Cb::<CountWindow<64>, 1>::with_storage(&policy).unwrap();
    call(&mut b, Outcome::Failure, t(0));
    call(&mut b, Outcome::Failure, t(0));
    let late = b.try_acquire(t(30)).unwrap();
    // Its lease runs out at 31 s: counted as one failed probe of three, and the slot is leased again.
    let second = b.try_acquire(t(31)).unwrap();
    assert_eq!(b.probes_in_flight(), 1);
    assert_eq!(b.record_t(late, Outcome::Failure, t(31)), None);
    assert_eq!(
        b.probes_in_flight(),
        1,
        "the second probe still holds its slot"
    );
    assert_eq!(
        b.try_acquire(t(31)).unwrap_err().reason,
        RejectReason::HalfOpenFull
    );
    assert_eq!(b.record_t(second, Outcome::Success, t(31)), None);
    // Round: 1 failure (expired), 1 success, one more to come; 2 successes of 3 -> 33% < 100%: close.
    let third = b.try_acquire(t(31)).unwrap();
    assert_eq!(
        b.record_t(third, Outcome::Success, t(31)).map(|t| t.to),
        Some(State::Closed)
    );
}

/// Found by the reference-model test: a close caused by expired leases must be reported even when
/// slow start then rejects the call that caused it.
#[test]
fn a_close_is_reported_even_when_slow_start_rejects_the_call() {
    let config = BreakerConfig {
        half_open: HalfOpenConfig {
            max_in_flight: Some(2),
            rule: ProbeRule::Rate { calls: 2 },
            probe_timeout: secs(1),
            decide_at_minimum: false,
            max_wait: None,
            max_wait_closes: false,
        },
        failure_rate: Some(1.0),
        window: WindowConfig::Count { calls: 1 },
        minimum_calls: 1,
        slow_start: Some(SlowStartConfig {
            ramp: secs(10),
            initial: 0.0,
        }),
        ..BreakerConfig::new()
    };
    let policy = BreakerPolicy::new(config).unwrap();
    let mut b = Cb::<CountWindow<64>, 2>::with_storage(&policy).unwrap();
    call(&mut b, Outcome::Failure, t(0));
    let ok = b.try_acquire(t(30)).unwrap();
    let _lost = b.try_acquire(t(30)).unwrap();
    assert_eq!(b.record_t(ok, Outcome::Success, t(30)), None);
    // At 31 s the lost probe's lease has expired: 1 failure of 2 is under 100%, so the breaker
    // closes, and slow start (0% admitted at first) rejects this very call.
    let (r, caused) = b.acquire_t(t(31));
    let r = r.unwrap_err();
    assert_eq!(r.reason, RejectReason::SlowStart);
    assert_eq!(
        caused.map(|t| (t.from, t.to)),
        Some((State::HalfOpen, State::Closed))
    );
}

/// A half-open round that outlives `max_wait` ends at the next call: re-opened (a failed round,
/// that call rejected as open) or, with `max_wait_closes`, closed; the round's tallies read as it
/// goes. On both breakers.
#[test]
fn half_open_max_wait_ends_an_undecided_round() {
    fn run(b: &mut impl Breaker, closes: bool) {
        for _ in 0..2 {
            let p = b.try_acquire(t(0)).unwrap();
            b.record(p, Outcome::Failure, t(0));
        }
        assert_eq!(b.state(t(0)), State::Open);
        assert_eq!(b.snapshot(t(0)).probe_round, ProbeRound::default());
        // Half-open at 20 s: one probe succeeds, the other never reports.
        let first = b.try_acquire(t(20)).unwrap();
        let _stuck = b.try_acquire(t(20)).unwrap();
        b.record(first, Outcome::Success, t(21));
        let round = ProbeRound {
            successes: 1,
            failures: 0,
            slow: 0,
            issued: 2,
        };
        assert_eq!(b.snapshot(t(21)).probe_round, round);
        // Within the wait: the round goes on, full.
        let full = b.try_acquire(ms(24_999)).unwrap_err();
        assert_eq!(full.reason, RejectReason::HalfOpenFull);
        // 5 s after the round began, it ends undecided.
        let at = b.try_acquire(t(25));
        let s = b.snapshot(t(25));
        if closes {
            assert!(at.is_ok());
            assert_eq!((s.state, s.reopens), (State::Closed, 0));
        } else {
            let r = at.unwrap_err().reason;
            assert_eq!(
                r,
                RejectReason::Open {
                    retry_after: secs(20)
                }
            );
            assert_eq!((s.state, s.reopens), (State::Open, 1));
        }
        assert_eq!(s.probe_round, ProbeRound::default());
    }
    for closes in [false, true] {
        let p = BreakerPolicy::new(BreakerConfig {
            failure_rate: Some(0.5),
            minimum_calls: 2,
            window: WindowConfig::Count { calls: 4 },
            half_open: HalfOpenConfig {
                max_in_flight: Some(2),
                rule: ProbeRule::Rate { calls: 2 },
                probe_timeout: Duration::MAX,
                decide_at_minimum: false,
                max_wait: Some(secs(5)),
                max_wait_closes: closes,
            },
            ..BreakerConfig::layered_exercise()
        })
        .unwrap();
        run(
            &mut CircuitBreaker::<_, CountWindow<4>, 2>::with_storage(&p).unwrap(),
            closes,
        );
        #[cfg(not(loom))]
        run(
            &mut &SharedBreaker::<_, AtomicCountWindow<4>, 2>::with_storage(&p).unwrap(),
            closes,
        );
    }
    // A zero wait is refused.
    let zero = BreakerPolicy::new(BreakerConfig {
        half_open: HalfOpenConfig {
            max_wait: Some(Duration::ZERO),
            ..HalfOpenConfig::default()
        },
        ..BreakerConfig::layered_exercise()
    });
    assert_eq!(zero.unwrap_err().field, "half_open.max_wait");
}

/// A new breaker starts in its policy's initial state, on both breakers; open is refused.
#[test]
fn initial_state_from_the_policy() {
    fn first_call(b: &mut impl Breaker) -> (State, Result<bool, RejectReason>) {
        let s = b.state(t(1));
        (
            s,
            b.try_acquire(t(1))
                .map(|p| p.is_probe())
                .map_err(|r| r.reason),
        )
    }
    let cases = [
        (State::Closed, Ok(false)),
        (State::HalfOpen, Ok(true)),
        (State::ForcedOpen, Err(RejectReason::ForcedOpen)),
        (State::Disabled, Ok(false)),
    ];
    for (initial_state, answer) in cases {
        let p = BreakerPolicy::new(BreakerConfig {
            initial_state,
            ..BreakerConfig::layered_exercise()
        })
        .unwrap();
        let mut mutable = CircuitBreaker::<_, NoWindow>::with_storage(&p).unwrap();
        assert_eq!(first_call(&mut mutable), (initial_state, answer));
        assert_eq!(mutable.generation(), 0);
        #[cfg(not(loom))]
        {
            let shared = SharedBreaker::<_, NoWindow>::with_storage(&p).unwrap();
            assert_eq!(first_call(&mut &shared), (initial_state, answer));
            assert_eq!(shared.generation(), 0);
        }
    }
    let open = BreakerPolicy::new(BreakerConfig {
        initial_state: State::Open,
        ..BreakerConfig::layered_exercise()
    });
    assert_eq!(open.unwrap_err().field, "initial_state");
}

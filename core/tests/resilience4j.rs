//! resilience4j's own circuit-breaker tests, translated, on both breakers.
//!
//! Each test names the Java test it comes from (resilience4j's `CircuitBreakerStateMachineTest`,
//! `CircuitBreakerAutoTransitionStateMachineTest`, `FixedSizeSlidingWindowMetricsTest` and
//! `SlidingTimeWindowMetricsTest`, or a method of its `CircuitBreakerStateMachine` /
//! `CircuitBreakerMetrics` where a test states a boundary of the source) and runs the same steps
//! on [`CircuitBreaker`] and on [`SharedBreaker`], through the [`Breaker`] trait. The facts were
//! read from the Java; the code is this project's.
//!
//! How resilience4j's calls map here:
//! - `tryAcquirePermission()` is [`Breaker::try_acquire`]; the permit is held until the next
//!   `onSuccess` / `onError` / `releasePermission`, which hands it back (resilience4j's results
//!   need no permit: a result without one held acquires one first, as a call would).
//! - `onSuccess(d)` / `onError(d)` are [`Breaker::record_latency`] with the duration `d`; an
//!   ignored exception (`NumberFormatException` in the Java set-up) and `releasePermission()` are
//!   [`Outcome::Ignored`].
//! - `transitionToOpenState()` opens for the configured wait: [`Breaker::open_for`];
//!   `transitionToOpenStateFor` / `Until` are `open_for` / [`Breaker::open_until`];
//!   `transitionToHalfOpenState()`, `transitionToClosedState()`, `transitionToForcedOpenState()`,
//!   `transitionToDisabledState()` and `reset()` are [`Breaker::half_open`], [`Breaker::close`],
//!   [`Breaker::force_open`], [`Breaker::disable`] and [`Breaker::reset`].
//! - Window metrics (`getNumberOfBufferedCalls`, failed, slow) are the snapshot's
//!   [`Counts`]; `getNumberOfSlowSuccessfulCalls` and `getNumberOfSlowFailedCalls` are
//!   [`Counts::slow_successes`] and [`Counts::slow_failures`]. The sliding-window tests run on a
//!   disabled breaker, which records every call in its window and never trips.
//! - The mock clock is the `now` every call takes.
//!
//! Deliberate differences are asserted as such, in tests named `differs_*`; the profile's docs
//! ([`BreakerConfig::resilience4j`]) list them.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

use reliable_core::breaker::{
    AnyWindow, AtomicAnyWindow, Breaker, BreakerConfig, BreakerPolicy, CircuitBreaker, CountWindow,
    Counts, HalfOpenConfig, Observer, OpenConfig, Outcome, Permit, ProbeRule, RejectReason,
    Rejection, SharedBreaker, SlowCallRule, State, Transition, WindowConfig,
};
use reliable_core::{Duration, Instant};

const SLOTS: usize = 10;
type Mutable<'p> = CircuitBreaker<&'p BreakerPolicy, AnyWindow<128, 32, 2>, SLOTS, Recorder>;
type Shared<'p> = SharedBreaker<&'p BreakerPolicy, AtomicAnyWindow<128, 32, 2>, SLOTS>;

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}
fn millis(ms: u64) -> Duration {
    Duration::from_millis(ms)
}

/// Keeps every transition, as resilience4j's state-transition event consumer does.
#[derive(Clone, Default)]
struct Recorder(Rc<RefCell<Vec<Transition>>>);

impl Observer for Recorder {
    fn on_transition(&self, t: Transition) {
        self.0.borrow_mut().push(t);
    }
}

/// One breaker under test, with its mock clock, the permits its calls hold and its transitions.
struct Cb<'b> {
    b: &'b mut dyn Breaker,
    kind: &'static str,
    now: Instant,
    held: VecDeque<Permit>,
    log: Recorder,
}

impl Cb<'_> {
    fn advance(&mut self, d: Duration) {
        self.now += d;
    }
    /// `tryAcquirePermission()`: the permit is held for the next result.
    fn try_acquire(&mut self) -> Result<(), Rejection> {
        let permit = self.b.try_acquire(self.now)?;
        self.held.push_back(permit);
        Ok(())
    }
    fn permitted(&mut self) -> bool {
        self.try_acquire().is_ok()
    }
    fn rejected(&mut self) -> RejectReason {
        match self.try_acquire() {
            Err(r) => r.reason,
            Ok(()) => panic!("{}: admitted at {:?}", self.kind, self.now),
        }
    }
    /// A result with the duration the call took, for the oldest held permit (or a fresh one).
    fn result(&mut self, outcome: Outcome, took: Duration) {
        let permit = match self.held.pop_front() {
            Some(p) => p,
            None => self
                .b
                .try_acquire(self.now)
                .unwrap_or_else(|r| panic!("{}: a result with no call admitted: {r}", self.kind)),
        };
        self.b.record_latency(permit, outcome, took, self.now);
    }
    fn on_success(&mut self, took: Duration) {
        self.result(Outcome::Success, took)
    }
    fn on_error(&mut self, took: Duration) {
        self.result(Outcome::Failure, took)
    }
    /// An ignored exception, or `releasePermission()`.
    fn on_ignored(&mut self) {
        self.result(Outcome::Ignored, Duration::ZERO)
    }
    /// A call whose body advances the clock by `took` (resilience4j's `decorateConsumer`).
    fn call_taking(&mut self, took: Duration, outcome: Outcome) {
        let permit = self.b.try_acquire(self.now).expect("admitted");
        self.advance(took);
        self.b.record(permit, outcome, self.now);
    }
    fn state(&self) -> State {
        self.b.state(self.now)
    }
    fn counts(&self) -> Counts {
        self.b.snapshot(self.now).counts
    }
    fn transitions(&self) -> usize {
        self.log.0.borrow().len()
    }
    fn expect_state(&self, want: State) {
        assert_eq!(self.state(), want, "{} at {:?}", self.kind, self.now);
    }
    /// (calls, failures, slow) in the window.
    fn expect_counts(&self, calls: u64, failures: u64, slow: u64) {
        let c = self.counts();
        assert_eq!(
            (c.calls, c.failures, c.slow),
            (calls, failures, slow),
            "{} at {:?}",
            self.kind,
            self.now
        );
    }
    /// (`getNumberOfSlowSuccessfulCalls`, `getNumberOfSlowFailedCalls`) in the window.
    fn expect_slow(&self, successes: u64, failures: u64) {
        let c = self.counts();
        assert_eq!(
            (c.slow_successes(), c.slow_failures),
            (successes, failures),
            "{}: slow successes and slow failures at {:?}",
            self.kind,
            self.now
        );
        assert_eq!(c.slow, successes + failures, "{}", self.kind);
    }
    /// resilience4j's `transitionToOpenState()`: open for the configured wait.
    fn transition_to_open_state(&mut self) {
        let wait = self.b.policy().config().open.duration;
        self.b.open_for(wait, self.now);
    }
    fn transition_to_half_open_state(&mut self) -> bool {
        self.b.half_open(self.now)
    }
}

/// Runs `test` on a `CircuitBreaker` and on a `SharedBreaker` built from `config`.
fn on_both(config: BreakerConfig, test: impl Fn(&mut Cb<'_>)) {
    let policy = BreakerPolicy::new(config).expect("a valid config");
    let start = Instant::from_secs(1_000);
    let log = Recorder::default();
    let mut mutable = Mutable::with_storage(&policy)
        .expect("fits")
        .with_seed(7)
        .observe(log.clone());
    test(&mut Cb {
        b: &mut mutable,
        kind: "CircuitBreaker",
        now: start,
        held: VecDeque::new(),
        log,
    });
    let log = Recorder::default();
    let shared = Shared::with_storage(&policy)
        .expect("fits")
        .with_seed(7)
        .observe(log.clone());
    test(&mut Cb {
        b: &mut &shared,
        kind: "SharedBreaker",
        now: start,
        held: VecDeque::new(),
        log,
    });
}

/// `CircuitBreakerStateMachineTest.setUp`: failure rate 50%, 4 permitted half-open calls, slow
/// calls over 4 s at a 50% rate, a 20 s time window with at least 5 calls, a 5 s wait.
fn state_machine_test() -> BreakerConfig {
    let r4j = BreakerConfig::resilience4j();
    BreakerConfig {
        failure_rate: Some(0.5),
        slow_calls: Some(SlowCallRule {
            threshold: secs(4),
            rate: 0.5,
        }),
        minimum_calls: 5,
        window: WindowConfig::Time {
            span: secs(20),
            buckets: 20,
        },
        open: OpenConfig {
            duration: secs(5),
            ..r4j.open
        },
        half_open: HalfOpenConfig {
            max_in_flight: Some(4),
            rule: ProbeRule::Rate { calls: 4 },
            ..r4j.half_open
        },
        ..r4j
    }
}

/// The same with a count window of 5 calls and an exponential wait (5 s, × 1.5), as the Java
/// tests that build their own `intervalCircuitBreaker` use.
fn interval_test() -> BreakerConfig {
    BreakerConfig {
        window: WindowConfig::Count { calls: 5 },
        slow_calls: None,
        open: OpenConfig {
            duration: secs(5),
            growth: 1.5,
            max: Some(secs(3_600)),
            ..BreakerConfig::resilience4j().open
        },
        ..state_machine_test()
    }
}

/// `CircuitBreakerAutoTransitionStateMachineTest.setUp`: a 5-call count window, 3 permitted
/// half-open calls, a 2 s wait.
fn auto_transition_test() -> BreakerConfig {
    BreakerConfig {
        window: WindowConfig::Count { calls: 5 },
        slow_calls: None,
        open: OpenConfig {
            duration: secs(2),
            ..BreakerConfig::resilience4j().open
        },
        half_open: HalfOpenConfig {
            max_in_flight: Some(3),
            rule: ProbeRule::Rate { calls: 3 },
            ..BreakerConfig::resilience4j().half_open
        },
        ..state_machine_test()
    }
}

/// A breaker to read window metrics from: slow over 1 s; disabled, so it records every call and
/// never trips.
fn metrics_window(window: WindowConfig) -> BreakerConfig {
    BreakerConfig {
        window,
        minimum_calls: 1,
        slow_calls: Some(SlowCallRule {
            threshold: secs(1),
            rate: 1.0,
        }),
        ..state_machine_test()
    }
}
/// `FixedSizeSlidingWindowMetrics(calls)`.
fn count_window(calls: u32) -> BreakerConfig {
    metrics_window(WindowConfig::Count { calls })
}
/// `SlidingTimeWindowMetrics(5)`: five 1 s buckets.
fn time_window() -> BreakerConfig {
    metrics_window(WindowConfig::Time {
        span: secs(5),
        buckets: 5,
    })
}
const FAST: Duration = Duration::from_millis(100);
const SLOW: Duration = Duration::from_secs(10);

// ---------------------------------------------------------------------------------------------
// CircuitBreakerStateMachineTest
// ---------------------------------------------------------------------------------------------

/// `shouldThrowCallNotPermittedExceptionWhenStateIsOpen`.
#[test]
fn should_throw_call_not_permitted_exception_when_state_is_open() {
    on_both(state_machine_test(), |cb| {
        cb.transition_to_open_state();
        // Strictly after the 5 s wait: 1 ns more.
        let wait = secs(5) + Duration::from_nanos(1);
        assert_eq!(cb.rejected(), RejectReason::Open { retry_after: wait });
    });
}

/// `shouldThrowCallNotPermittedExceptionWhenStateIsForcedOpen`.
#[test]
fn should_throw_call_not_permitted_exception_when_state_is_forced_open() {
    on_both(state_machine_test(), |cb| {
        cb.b.force_open(cb.now);
        assert_eq!(cb.rejected(), RejectReason::ForcedOpen);
    });
}

/// `shouldIncreaseCounterOnReleasePermission`.
#[test]
fn should_increase_counter_on_release_permission() {
    on_both(state_machine_test(), |cb| {
        cb.transition_to_open_state();
        assert!(cb.transition_to_half_open_state());
        for _ in 0..4 {
            assert!(cb.permitted(), "{}", cb.kind);
        }
        assert!(!cb.permitted());
        assert!(!cb.permitted());
        cb.on_ignored(); // releasePermission()
        assert!(cb.permitted(), "{}", cb.kind);
    });
}

/// `shouldThrowCallNotPermittedExceptionWhenNotFurtherTestCallsArePermitted`.
#[test]
fn should_throw_call_not_permitted_exception_when_not_further_test_calls_are_permitted() {
    on_both(state_machine_test(), |cb| {
        cb.transition_to_open_state();
        cb.transition_to_half_open_state();
        for _ in 0..4 {
            assert!(cb.permitted());
        }
        assert_eq!(cb.rejected(), RejectReason::HalfOpenFull);
    });
}

/// `shouldOnlyPermitFourCallsInHalfOpenState`.
#[test]
fn should_only_permit_four_calls_in_half_open_state() {
    on_both(state_machine_test(), |cb| {
        cb.expect_counts(0, 0, 0);
        for _ in 0..2 {
            cb.transition_to_open_state();
            cb.transition_to_half_open_state();
            cb.expect_state(State::HalfOpen);
            let admitted: Vec<bool> = (0..6).map(|_| cb.permitted()).collect();
            assert_eq!(
                admitted,
                [true, true, true, true, false, false],
                "{}",
                cb.kind
            );
            cb.held.clear(); // their permits are of a round that the next open ends
        }
    });
}

/// `shouldOpenAfterFailureRateThresholdExceeded2`: a time window; 3 of 6 calls failed is 50%.
#[test]
fn should_open_after_failure_rate_threshold_exceeded_2() {
    on_both(state_machine_test(), |cb| {
        for outcome in [Outcome::Success, Outcome::Success, Outcome::Success] {
            cb.result(outcome, Duration::ZERO);
            cb.advance(secs(1));
        }
        cb.on_error(Duration::ZERO);
        cb.advance(secs(1));
        cb.on_error(Duration::ZERO);
        cb.expect_state(State::Closed);
        cb.advance(secs(1));
        cb.expect_state(State::Closed);
        cb.on_error(Duration::ZERO);
        cb.expect_state(State::Open);
    });
}

/// `shouldOpenAfterFailureRateThresholdExceeded`: 3 failures of 5 calls (60%) trip it.
#[test]
fn should_open_after_failure_rate_threshold_exceeded() {
    on_both(state_machine_test(), |cb| {
        assert!(cb.permitted());
        cb.held.clear(); // the Java test never reports this first call
        cb.expect_state(State::Closed);
        cb.expect_counts(0, 0, 0);
        for n in 1..=3 {
            assert!(cb.permitted());
            cb.on_error(Duration::ZERO);
            cb.expect_state(State::Closed);
            cb.expect_counts(n, n, 0);
        }
        assert!(cb.permitted());
        cb.on_success(Duration::ZERO);
        cb.expect_state(State::Closed);
        cb.expect_counts(4, 3, 0);
        cb.on_success(Duration::ZERO);
        cb.expect_state(State::Open);
        // The metrics that tripped it stay readable while open.
        cb.expect_counts(5, 3, 0);
        assert_eq!(cb.transitions(), 1);
        assert!(!cb.permitted());
    });
}

/// `shouldOpenAfterSlowCallRateThresholdExceeded`: 3 slow calls of 5 (60%) trip it, though only
/// 2 failed.
#[test]
fn should_open_after_slow_call_rate_threshold_exceeded() {
    on_both(state_machine_test(), |cb| {
        cb.expect_state(State::Closed);
        cb.expect_counts(0, 0, 0);
        let calls = [
            (Outcome::Failure, secs(5)),
            (Outcome::Success, secs(5)),
            (Outcome::Failure, millis(100)),
            (Outcome::Success, millis(100)),
        ];
        for (outcome, took) in calls {
            assert!(cb.permitted());
            cb.result(outcome, took);
            cb.expect_state(State::Closed);
        }
        cb.on_success(secs(5));
        cb.expect_state(State::Open);
        cb.expect_counts(5, 2, 3);
        // Not read by the Java test: of the 3 slow calls, the first failed.
        cb.expect_slow(2, 1);
    });
}

/// `CircuitBreakerMetrics.onError` records a slow failed call as `SLOW_ERROR`, which
/// `AbstractAggregation.record` counts as a slow call, a failed call and a slow failed call: the
/// slow-call rate counts slow failures with slow successes. Here 2 slow failures, 1 slow success
/// and 2 fast successes trip the breaker on the slow-call rate (60%), with the failure rate (40%)
/// below its threshold and the slow successes alone (20%) too.
#[test]
fn slow_call_rate_counts_slow_failures() {
    on_both(state_machine_test(), |cb| {
        cb.on_error(secs(5));
        cb.on_error(secs(5));
        cb.on_success(secs(5));
        cb.on_success(FAST);
        cb.expect_state(State::Closed);
        cb.on_success(FAST);
        cb.expect_state(State::Open);
        cb.expect_counts(5, 2, 3);
        cb.expect_slow(1, 2);
    });
}

/// `shouldOpenAfterSlowCallRateThresholdExceededUsingMockClock`: calls that take clock time.
#[test]
fn should_open_after_slow_call_rate_threshold_exceeded_using_mock_clock() {
    on_both(state_machine_test(), |cb| {
        let calls = [(5, 1, 1), (5, 2, 2), (1, 3, 2), (1, 4, 2)];
        for (took, calls, slow) in calls {
            cb.call_taking(secs(took), Outcome::Success);
            cb.expect_counts(calls, 0, slow);
            cb.expect_state(State::Closed);
        }
        cb.call_taking(secs(5), Outcome::Success);
        cb.expect_state(State::Open);
        cb.expect_counts(5, 0, 3);
    });
}

/// `shouldTransitionToHalfOpenAfterWaitDuration`.
#[test]
fn should_transition_to_half_open_after_wait_duration() {
    on_both(state_machine_test(), |cb| {
        cb.transition_to_open_state();
        cb.expect_counts(0, 0, 0);
        cb.expect_state(State::Open);
        assert!(!cb.permitted());
        cb.advance(secs(3));
        cb.expect_state(State::Open);
        assert!(!cb.permitted());
        cb.advance(secs(3));
        assert!(cb.permitted());
        cb.expect_state(State::HalfOpen);
        cb.expect_counts(0, 0, 0);
    });
}

/// `shouldTransitionToHalfOpenAfterPassedWaitDuration`: `transitionToOpenStateFor(2 h)`.
#[test]
fn should_transition_to_half_open_after_passed_wait_duration() {
    on_both(state_machine_test(), |cb| {
        cb.b.open_for(secs(7_200), cb.now);
        cb.expect_state(State::Open);
        assert!(!cb.permitted());
        cb.advance(secs(3_600));
        cb.expect_state(State::Open);
        assert!(!cb.permitted());
        cb.advance(secs(3_600) + secs(1));
        assert!(cb.permitted());
        cb.expect_state(State::HalfOpen);
    });
}

/// `shouldTransitionToHalfOpenAfterPassedWaitUntil`: `transitionToOpenStateUntil(now + 30 min)`.
#[test]
fn should_transition_to_half_open_after_passed_wait_until() {
    on_both(state_machine_test(), |cb| {
        let wait_until = cb.now + secs(1_800);
        cb.b.open_until(wait_until, cb.now);
        cb.expect_state(State::Open);
        assert!(!cb.permitted());
        cb.advance(secs(900));
        cb.expect_state(State::Open);
        assert!(!cb.permitted());
        cb.now = wait_until + secs(1);
        assert!(cb.permitted());
        cb.expect_state(State::HalfOpen);
    });
}

/// `shouldTransitionToHalfOpenAfterWaitInterval`: the wait grows 5 s, 7.5 s (exponential backoff,
/// multiplier 1.5). resilience4j's second `transitionToOpenState()` from half-open counts a second
/// attempt; here a failed probe round re-opens it, which counts the same.
#[test]
fn should_transition_to_half_open_after_wait_interval() {
    on_both(interval_test(), |cb| {
        for _ in 0..5 {
            cb.on_error(Duration::ZERO);
        }
        cb.expect_state(State::Open);
        assert!(!cb.permitted());
        cb.advance(secs(3));
        cb.expect_state(State::Open);
        assert!(!cb.permitted());
        cb.advance(secs(3));
        assert!(cb.permitted());
        cb.expect_state(State::HalfOpen);
        for _ in 0..4 {
            cb.on_error(Duration::ZERO);
        }
        cb.expect_state(State::Open);
        cb.advance(secs(6));
        // Still open: the new wait is 7.5 s.
        cb.expect_state(State::Open);
        assert!(!cb.permitted());
        cb.advance(secs(5));
        assert!(cb.permitted());
        cb.expect_state(State::HalfOpen);
    });
}

/// `shouldTransitionBackToOpenStateWhenFailureRateIsAboveThreshold`: 3 of 4 probes failed.
#[test]
fn should_transition_back_to_open_state_when_failure_rate_is_above_threshold() {
    on_both(state_machine_test(), |cb| {
        cb.transition_to_open_state();
        cb.transition_to_half_open_state();
        cb.expect_state(State::HalfOpen);
        for outcome in [Outcome::Failure, Outcome::Failure, Outcome::Success] {
            assert!(cb.permitted());
            cb.result(outcome, Duration::ZERO);
            cb.expect_state(State::HalfOpen);
        }
        assert!(cb.permitted());
        cb.on_error(Duration::ZERO);
        cb.expect_state(State::Open);
    });
}

/// `shouldTransitionBackToOpenStateWhenSlowCallRateIsAboveThreshold`: 3 of 4 probes slow.
#[test]
fn should_transition_back_to_open_state_when_slow_call_rate_is_above_threshold() {
    on_both(state_machine_test(), |cb| {
        cb.transition_to_open_state();
        cb.transition_to_half_open_state();
        for took in [5, 5, 5] {
            assert!(cb.permitted());
            cb.on_success(secs(took));
        }
        assert!(cb.permitted());
        cb.on_success(secs(1));
        cb.expect_state(State::Open);
    });
}

/// `shouldTransitionBackToClosedStateWhenFailureIsBelowThreshold`: 1 of 4 probes failed closes
/// it, with an empty window.
#[test]
fn should_transition_back_to_closed_state_when_failure_is_below_threshold() {
    on_both(state_machine_test(), |cb| {
        cb.transition_to_open_state();
        cb.transition_to_half_open_state();
        cb.expect_counts(0, 0, 0);
        let probes = [
            Outcome::Failure,
            Outcome::Success,
            Outcome::Success,
            Outcome::Success,
        ];
        for outcome in probes {
            assert!(cb.permitted());
            cb.result(outcome, Duration::ZERO);
        }
        assert!(cb.permitted());
        cb.expect_state(State::Closed);
        cb.expect_counts(0, 0, 0);
        cb.on_success(Duration::ZERO);
        cb.expect_counts(1, 0, 0);
    });
}

/// `shouldResetMetrics`.
#[test]
fn should_reset_metrics() {
    on_both(state_machine_test(), |cb| {
        cb.expect_state(State::Closed);
        cb.on_success(Duration::ZERO);
        cb.on_error(Duration::ZERO);
        cb.expect_counts(2, 1, 0);
        cb.b.reset(cb.now);
        cb.expect_counts(0, 0, 0);
    });
}

/// `shouldForceOpenCircuitBreaker`: forced open stays open past the wait.
#[test]
fn should_force_open_circuit_breaker() {
    on_both(state_machine_test(), |cb| {
        cb.b.force_open(cb.now);
        cb.expect_state(State::ForcedOpen);
        assert!(!cb.permitted());
        cb.advance(secs(6));
        assert!(!cb.permitted());
        cb.expect_state(State::ForcedOpen);
        cb.expect_counts(0, 0, 0);
    });
}

/// `shouldReleasePermissionWhenExceptionIgnored`: an ignored probe frees its place in the round.
#[test]
fn should_release_permission_when_exception_ignored() {
    on_both(state_machine_test(), |cb| {
        cb.transition_to_open_state();
        cb.transition_to_half_open_state();
        for _ in 0..3 {
            assert!(cb.permitted());
            cb.on_success(Duration::ZERO);
            cb.expect_state(State::HalfOpen);
        }
        assert!(cb.permitted());
        cb.on_ignored();
        cb.expect_state(State::HalfOpen);
        assert!(cb.permitted());
        cb.on_error(Duration::ZERO);
        cb.expect_state(State::Closed);
        cb.expect_counts(0, 0, 0);
    });
}

/// `shouldIgnoreExceptionsAndThenTransitionToClosed`.
#[test]
fn should_ignore_exceptions_and_then_transition_to_closed() {
    on_both(state_machine_test(), |cb| {
        cb.transition_to_open_state();
        cb.transition_to_half_open_state();
        for _ in 0..4 {
            assert!(cb.permitted());
            cb.on_ignored();
            cb.expect_state(State::HalfOpen);
        }
        for _ in 0..3 {
            assert!(cb.permitted());
            cb.on_success(Duration::ZERO);
            cb.expect_state(State::HalfOpen);
        }
        assert!(cb.permitted());
        cb.on_success(Duration::ZERO);
        cb.expect_state(State::Closed);
        cb.expect_counts(0, 0, 0);
    });
}

/// `shouldNotAllowTransitionFromClosedToHalfOpen`: refused, and nothing changes.
#[test]
fn should_not_allow_transition_from_closed_to_half_open() {
    on_both(state_machine_test(), |cb| {
        let generation = cb.b.snapshot(cb.now).generation;
        assert!(!cb.transition_to_half_open_state());
        cb.expect_state(State::Closed);
        assert_eq!(cb.b.snapshot(cb.now).generation, generation);
        assert_eq!(cb.transitions(), 0);
    });
}

/// `shouldResetToClosedState`.
#[test]
fn should_reset_to_closed_state() {
    on_both(state_machine_test(), |cb| {
        cb.transition_to_open_state();
        cb.b.reset(cb.now);
        cb.expect_state(State::Closed);
    });
}

/// `shouldResetClosedState`.
#[test]
fn should_reset_closed_state() {
    on_both(state_machine_test(), |cb| {
        cb.on_success(Duration::ZERO);
        cb.on_success(Duration::ZERO);
        cb.expect_counts(2, 0, 0);
        cb.b.reset(cb.now);
        cb.expect_state(State::Closed);
        cb.expect_counts(0, 0, 0);
    });
}

/// `shouldRecordMetricsInMetricsOnlyState`, on the disabled state (which admits every call and
/// keeps the window's metrics): 3 failures of 5 calls are counted and nothing trips.
#[test]
fn should_record_metrics_in_metrics_only_state() {
    on_both(state_machine_test(), |cb| {
        cb.b.disable(cb.now);
        assert!(cb.permitted());
        cb.held.clear();
        cb.expect_state(State::Disabled);
        cb.expect_counts(0, 0, 0);
        let before = cb.transitions();
        for n in 1..=3 {
            assert!(cb.permitted());
            cb.on_error(Duration::ZERO);
            cb.expect_state(State::Disabled);
            cb.expect_counts(n, n, 0);
        }
        assert!(cb.permitted());
        cb.on_success(Duration::ZERO);
        cb.expect_counts(4, 3, 0);
        cb.on_success(Duration::ZERO);
        cb.expect_state(State::Disabled);
        cb.expect_counts(5, 3, 0);
        cb.on_error(Duration::ZERO);
        cb.expect_state(State::Disabled);
        assert_eq!(cb.transitions(), before, "{}: no state transition", cb.kind);
    });
}

/// Puts a fresh breaker in `state` by the operator's commands.
fn enter(cb: &mut Cb<'_>, state: State) {
    match state {
        State::Closed => {}
        State::Open => cb.transition_to_open_state(),
        State::HalfOpen => {
            cb.transition_to_open_state();
            cb.transition_to_half_open_state();
        }
        State::ForcedOpen => cb.b.force_open(cb.now),
        State::Disabled => cb.b.disable(cb.now),
    }
    cb.expect_state(state);
}

const STATES: [State; 5] = [
    State::Closed,
    State::Open,
    State::HalfOpen,
    State::ForcedOpen,
    State::Disabled,
];

/// `allCircuitBreakerStatesAllowTransitionToMetricsOnlyMode`, to the disabled state.
#[test]
fn all_circuit_breaker_states_allow_transition_to_metrics_only_mode() {
    for from in STATES {
        on_both(state_machine_test(), |cb| {
            enter(cb, from);
            cb.b.disable(cb.now);
            cb.expect_state(State::Disabled);
        });
    }
}

/// `allCircuitBreakerStatesAllowTransitionToItsOwnState`: allowed, and reported as no transition.
#[test]
fn all_circuit_breaker_states_allow_transition_to_its_own_state() {
    for state in STATES {
        on_both(state_machine_test(), |cb| {
            enter(cb, state);
            let before = cb.transitions();
            match state {
                State::Closed => cb.b.close(cb.now),
                State::Open => cb.transition_to_open_state(),
                State::HalfOpen => assert!(cb.transition_to_half_open_state()),
                State::ForcedOpen => cb.b.force_open(cb.now),
                State::Disabled => cb.b.disable(cb.now),
            }
            cb.expect_state(state);
            assert_eq!(cb.transitions(), before, "{} {state}", cb.kind);
        });
    }
}

/// `circuitBreakerDoesNotPublishStateTransitionEventsForInternalTransitions`.
#[test]
fn circuit_breaker_does_not_publish_state_transition_events_for_internal_transitions() {
    on_both(state_machine_test(), |cb| {
        let mut published = Vec::new();
        for _ in 0..2 {
            cb.transition_to_open_state();
            published.push(cb.transitions());
        }
        for _ in 0..2 {
            cb.transition_to_half_open_state();
            published.push(cb.transitions());
        }
        for _ in 0..2 {
            cb.b.disable(cb.now);
            published.push(cb.transitions());
        }
        for _ in 0..2 {
            cb.b.close(cb.now);
            published.push(cb.transitions());
        }
        assert_eq!(published, [1, 1, 2, 2, 3, 3, 4, 4], "{}", cb.kind);
    });
}

// ---------------------------------------------------------------------------------------------
// CircuitBreakerAutoTransitionStateMachineTest: there is no scheduler here (the core is sans-IO);
// the state an open breaker reports turns half-open by itself once the wait is over.
// ---------------------------------------------------------------------------------------------

/// `testAutoTransition`: the transition is due after the 2 s wait, and reads as half-open then.
#[test]
fn test_auto_transition() {
    on_both(auto_transition_test(), |cb| {
        cb.transition_to_open_state();
        let due = cb.b.retry_after(cb.now).expect("open");
        assert_eq!(due, secs(2) + Duration::from_nanos(1), "{}", cb.kind);
        cb.advance(due);
        cb.expect_state(State::HalfOpen);
    });
}

/// `shouldCancelAutoTransition`: forcing it open cancels the move to half-open.
#[test]
fn should_cancel_auto_transition() {
    on_both(auto_transition_test(), |cb| {
        cb.transition_to_open_state();
        cb.b.force_open(cb.now);
        assert_eq!(cb.b.retry_after(cb.now), None);
        cb.advance(secs(3));
        cb.expect_state(State::ForcedOpen);
    });
}

// ---------------------------------------------------------------------------------------------
// FixedSizeSlidingWindowMetricsTest and SlidingTimeWindowMetricsTest, on a disabled breaker.
// ---------------------------------------------------------------------------------------------

/// Runs `test` on a disabled breaker with `config`'s window.
fn on_window(config: BreakerConfig, test: impl Fn(&mut Cb<'_>)) {
    on_both(config, |cb| {
        cb.b.disable(cb.now);
        test(cb)
    });
}

/// `FixedSizeSlidingWindowMetricsTest.checkInitialBucketCreation`.
#[test]
fn count_window_check_initial_bucket_creation() {
    on_window(count_window(5), |cb| {
        cb.expect_counts(0, 0, 0);
        cb.expect_slow(0, 0);
    });
}

/// `SlidingTimeWindowMetricsTest.checkInitialBucketCreation`.
#[test]
fn time_window_check_initial_bucket_creation() {
    on_window(time_window(), |cb| {
        cb.expect_counts(0, 0, 0);
        cb.expect_slow(0, 0);
    });
}

/// `FixedSizeSlidingWindowMetricsTest.testRecordSuccess`.
#[test]
fn count_window_test_record_success() {
    on_window(count_window(5), |cb| {
        cb.on_success(FAST);
        cb.expect_counts(1, 0, 0);
        cb.expect_slow(0, 0);
    });
}

/// `SlidingTimeWindowMetricsTest.testRecordSuccess`.
#[test]
fn time_window_test_record_success() {
    on_window(time_window(), |cb| {
        cb.on_success(FAST);
        cb.expect_counts(1, 0, 0);
        cb.expect_slow(0, 0);
    });
}

/// `FixedSizeSlidingWindowMetricsTest.testRecordError`.
#[test]
fn count_window_test_record_error() {
    on_window(count_window(5), |cb| {
        cb.on_error(FAST);
        cb.expect_counts(1, 1, 0);
        cb.expect_slow(0, 0);
    });
}

/// `SlidingTimeWindowMetricsTest.testRecordError`.
#[test]
fn time_window_test_record_error() {
    on_window(time_window(), |cb| {
        cb.on_error(FAST);
        cb.expect_counts(1, 1, 0);
        cb.expect_slow(0, 0);
    });
}

/// `FixedSizeSlidingWindowMetricsTest.testRecordSlowSuccess`.
#[test]
fn count_window_test_record_slow_success() {
    on_window(count_window(5), |cb| {
        cb.on_success(SLOW);
        cb.expect_counts(1, 0, 1);
        cb.expect_slow(1, 0);
    });
}

/// `SlidingTimeWindowMetricsTest.testRecordSlowSuccess`.
#[test]
fn time_window_test_record_slow_success() {
    on_window(time_window(), |cb| {
        cb.on_success(SLOW);
        cb.expect_counts(1, 0, 1);
        cb.expect_slow(1, 0);
    });
}

/// The calls of `testSlowCallsPercentage`: a slow success, a slow error, three fast successes:
/// 5 calls, 1 failed, 2 slow (40%): 1 slow success and 1 slow failure.
fn slow_calls_percentage(cb: &mut Cb<'_>) {
    cb.on_success(SLOW);
    cb.on_error(SLOW);
    for _ in 0..3 {
        cb.on_success(FAST);
    }
    cb.expect_counts(5, 1, 2);
    cb.expect_slow(1, 1);
}

/// `FixedSizeSlidingWindowMetricsTest.testSlowCallsPercentage`.
#[test]
fn count_window_test_slow_calls_percentage() {
    on_window(count_window(5), slow_calls_percentage);
}

/// `SlidingTimeWindowMetricsTest.testSlowCallsPercentage`.
#[test]
fn time_window_test_slow_calls_percentage() {
    on_window(time_window(), slow_calls_percentage);
}

/// `FixedSizeSlidingWindowMetricsTest.testSlidingWindowMetrics`: a 4-call window drops the
/// oldest call.
#[test]
fn count_window_test_sliding_window_metrics() {
    on_window(count_window(4), |cb| {
        cb.on_error(FAST);
        cb.expect_counts(1, 1, 0);
        for calls in 2..=4 {
            cb.on_success(FAST);
            cb.expect_counts(calls, 1, 0);
        }
        cb.on_success(FAST);
        cb.expect_counts(4, 0, 0);
    });
}

/// `FixedSizeSlidingWindowMetricsTest.testSlidingWindowMetricsWithSlowCalls`: a 2-call window.
#[test]
fn count_window_test_sliding_window_metrics_with_slow_calls() {
    on_window(count_window(2), |cb| {
        cb.on_error(SLOW);
        cb.expect_counts(1, 1, 1);
        cb.expect_slow(0, 1);
        cb.on_success(SLOW);
        cb.expect_counts(2, 1, 2);
        cb.expect_slow(1, 1);
        // The slow failure leaves the window.
        cb.on_success(FAST);
        cb.expect_counts(2, 0, 1);
        cb.expect_slow(1, 0);
        cb.on_success(FAST);
        cb.expect_counts(2, 0, 0);
        cb.expect_slow(0, 0);
        cb.on_success(FAST);
        cb.expect_counts(2, 0, 0);
        cb.expect_slow(0, 0);
    });
}

/// `SlidingTimeWindowMetricsTest.shouldClearSlidingTimeWindowMetrics`: calls leave the 5 s window
/// a whole bucket at a time.
#[test]
fn time_window_should_clear_sliding_time_window_metrics() {
    on_window(time_window(), |cb| {
        cb.on_error(FAST);
        cb.expect_counts(1, 1, 0);
        cb.advance(millis(100));
        cb.on_success(FAST);
        cb.expect_counts(2, 1, 0);
        cb.advance(millis(700));
        cb.on_error(secs(1) + millis(1));
        cb.expect_counts(3, 2, 1);
        cb.expect_slow(0, 1);
        cb.advance(secs(4));
        cb.expect_counts(3, 2, 1);
        cb.expect_slow(0, 1);
        // The bucket with the slow failure ages out.
        cb.advance(secs(1));
        cb.expect_counts(0, 0, 0);
        cb.expect_slow(0, 0);
        cb.advance(millis(100));
        cb.on_success(FAST);
        cb.expect_counts(1, 0, 0);
        cb.expect_slow(0, 0);
        cb.advance(secs(5));
        cb.on_success(FAST);
        cb.expect_counts(1, 0, 0);
        cb.expect_slow(0, 0);
    });
}

/// `SlidingTimeWindowMetricsTest.testSlidingTimeWindowMetrics`.
#[test]
fn time_window_test_sliding_time_window_metrics() {
    on_window(time_window(), |cb| {
        cb.on_error(FAST);
        cb.expect_counts(1, 1, 0);
        let steps = [
            (millis(100), Outcome::Success, (2, 1)),
            (millis(100), Outcome::Success, (3, 1)),
            (secs(1), Outcome::Success, (4, 1)),
            (secs(1), Outcome::Success, (5, 1)),
            (secs(1), Outcome::Failure, (6, 2)),
            (secs(1), Outcome::Success, (7, 2)),
            (secs(1), Outcome::Success, (5, 1)),
            (secs(1), Outcome::Success, (5, 1)),
            (secs(5), Outcome::Success, (1, 0)),
        ];
        for (wait, outcome, (calls, failures)) in steps {
            cb.advance(wait);
            cb.result(outcome, FAST);
            cb.expect_counts(calls, failures, 0);
        }
    });
}

// ---------------------------------------------------------------------------------------------
// Boundaries of resilience4j's source, and the policy fields that choose them.
// ---------------------------------------------------------------------------------------------

/// A breaker tripped at T with a 5 s wait, probed at exactly T + 5 s.
fn probe_at_the_end_of_the_wait(strictly_after: bool, admitted_at_end: bool) {
    let config = BreakerConfig {
        open: OpenConfig {
            strictly_after,
            ..interval_test().open
        },
        ..interval_test()
    };
    on_both(config, |cb| {
        for _ in 0..5 {
            cb.on_error(Duration::ZERO);
        }
        let tripped = cb.now;
        cb.now = tripped + secs(5);
        assert_eq!(cb.permitted(), admitted_at_end, "{}", cb.kind);
        if !admitted_at_end {
            cb.expect_state(State::Open);
            let one = Duration::from_nanos(1);
            assert_eq!(cb.b.retry_after(cb.now), Some(one));
            cb.advance(one);
            assert!(cb.permitted(), "{}", cb.kind);
        }
        cb.expect_state(State::HalfOpen);
    });
}

/// `CircuitBreakerStateMachine.OpenState.tryAcquirePermission` admits only
/// `clock.instant().isAfter(retryAfterWaitDuration)`: with the profile's `strictly_after`, a call
/// at exactly the end of the wait is rejected, with 1 ns left.
#[test]
fn open_state_admits_strictly_after_the_wait() {
    assert!(BreakerConfig::resilience4j().open.strictly_after);
    probe_at_the_end_of_the_wait(true, false);
}

/// The same boundary under the project's own rule (`strictly_after: false`, every other
/// profile): the first call at the end of the wait is a probe.
#[test]
fn differs_by_policy_open_state_admits_at_the_end_of_the_wait() {
    assert!(!BreakerConfig::reliablekit().open.strictly_after);
    assert!(!BreakerConfig::layered_exercise().open.strictly_after);
    probe_at_the_end_of_the_wait(false, true);
}

/// Minimum 2 calls and 4 permitted half-open calls: good probes until the breaker leaves
/// half-open, and the state it leaves for.
fn half_open_round(decide_at_minimum: bool, probes: usize) {
    let config = BreakerConfig {
        minimum_calls: 2,
        half_open: HalfOpenConfig {
            decide_at_minimum,
            ..state_machine_test().half_open
        },
        ..state_machine_test()
    };
    on_both(config, |cb| {
        cb.transition_to_open_state();
        cb.transition_to_half_open_state();
        for _ in 0..4 {
            assert!(cb.permitted());
        }
        for n in 1..=probes {
            cb.on_success(Duration::ZERO);
            let want = if n < probes {
                State::HalfOpen
            } else {
                State::Closed
            };
            cb.expect_state(want);
        }
        // The round's probes still out when it decided are of an older generation: ignored.
        while !cb.held.is_empty() {
            cb.on_error(Duration::ZERO);
        }
        cb.expect_state(State::Closed);
        cb.expect_counts(0, 0, 0);
    });
}

/// `CircuitBreakerMetrics.forHalfOpen` builds a window of `permittedNumberOfCallsInHalfOpenState`
/// calls whose minimum is `min(minimumNumberOfCalls, permitted)`: two good probes of four close it
/// (`decide_at_minimum`, set by the profile).
#[test]
fn half_open_state_decides_at_the_minimum_number_of_calls() {
    assert!(BreakerConfig::resilience4j().half_open.decide_at_minimum);
    half_open_round(true, 2);
}

/// The same round under the project's own rule (`decide_at_minimum: false`): all four probes
/// report before it decides.
#[test]
fn differs_by_policy_half_open_state_decides_after_every_permitted_call() {
    half_open_round(false, 4);
}

/// `BreakerConfig::resilience4j()` is `CircuitBreakerConfig.ofDefaults()` and fits the storage
/// its docs name: a `CountWindow<100, 2>` and 10 probe slots (a `CountWindow<2>` is refused).
#[test]
fn of_defaults_fits_the_storage_the_profile_names() {
    let policy = BreakerPolicy::new(BreakerConfig::resilience4j()).unwrap();
    assert!(CircuitBreaker::<_, CountWindow<100, 2>, 10>::with_storage(&policy).is_ok());
    assert!(CircuitBreaker::<_, CountWindow<2>, 10>::with_storage(&policy).is_err());
    assert!(
        SharedBreaker::<_, reliable_core::breaker::AtomicCountWindow<100, 2>, 10>::with_storage(
            &policy
        )
        .is_ok()
    );
    let c = policy.config();
    assert_eq!(
        (c.failure_rate, c.minimum_calls, c.open.duration),
        (Some(0.5), 100, secs(60))
    );
    assert_eq!(c.half_open.rule, ProbeRule::Rate { calls: 10 });
}

// ---------------------------------------------------------------------------------------------
// Deliberate differences, asserted as such.
// ---------------------------------------------------------------------------------------------

/// `shouldDisableCircuitBreaker`: resilience4j's disabled state records nothing (its metrics stay
/// reset); this breaker's disabled state keeps the window's metrics, as resilience4j's
/// metrics-only state does.
#[test]
fn differs_should_disable_circuit_breaker() {
    on_both(state_machine_test(), |cb| {
        cb.b.disable(cb.now);
        cb.expect_state(State::Disabled);
        cb.expect_counts(0, 0, 0);
        cb.on_success(Duration::ZERO);
        for _ in 0..4 {
            cb.on_error(Duration::ZERO);
        }
        cb.expect_state(State::Disabled);
        // resilience4j: 0 calls.
        cb.expect_counts(5, 4, 0);
    });
}

/// `CircuitBreakerStateMachine.onError` / `onSuccess` record a result in whatever state the
/// breaker is in when it arrives; here a result whose permit was issued before a state change is
/// ignored (the permit's generation is stale).
#[test]
fn differs_late_results_are_ignored() {
    on_both(interval_test(), |cb| {
        assert!(cb.permitted()); // a call admitted while closed...
        cb.transition_to_open_state();
        cb.advance(secs(6));
        assert!(cb.b.half_open(cb.now) || cb.state() == State::HalfOpen);
        cb.on_error(Duration::ZERO); // ...reports in half-open: ignored
        cb.expect_counts(0, 0, 0);
        cb.expect_state(State::HalfOpen);
    });
}

/// `shouldTransitionToHalfOpenAfterWaitDuration` reads `OPEN` until a call (or the scheduler)
/// moves the breaker; here `state()` reads half-open as soon as the wait is over, since the next
/// call will be a probe.
#[test]
fn differs_state_reads_half_open_once_the_wait_is_over() {
    on_both(state_machine_test(), |cb| {
        cb.transition_to_open_state();
        cb.advance(secs(6));
        let generation = cb.b.snapshot(cb.now).generation;
        cb.expect_state(State::HalfOpen);
        // Only read: no transition was made.
        assert_eq!(cb.b.snapshot(cb.now).generation, generation);
        assert_eq!(cb.transitions(), 1);
    });
}

/// `CircuitBreakerStateMachine.HalfOpenState` reads its metrics (slow successes and slow failures
/// included) from a fresh window of the round's calls; here the snapshot's window keeps the
/// calls of the closed state that tripped (cleared when the breaker closes), and the round's
/// tallies are [`Snapshot::probe_round`](reliable_core::breaker::Snapshot::probe_round), whose
/// slow probes are not split.
#[test]
fn differs_half_open_slow_calls_are_the_rounds_unsplit() {
    on_both(state_machine_test(), |cb| {
        for _ in 0..2 {
            cb.on_error(secs(5));
        }
        for _ in 0..3 {
            cb.on_success(secs(5));
        }
        cb.expect_state(State::Open);
        cb.advance(secs(6));
        // A slow failed probe and a slow successful one: 2 of 4, the round is undecided.
        cb.on_error(secs(5));
        cb.on_success(secs(5));
        cb.expect_state(State::HalfOpen);
        // resilience4j: 2 calls, 1 slow success, 1 slow failure (the round's window).
        cb.expect_counts(5, 2, 5);
        cb.expect_slow(3, 2);
        let round = cb.b.snapshot(cb.now).probe_round;
        assert_eq!((round.successes, round.failures, round.slow), (1, 1, 2));
    });
}

/// `CircuitBreakerMetrics` lowers `minimumNumberOfCalls` to a count window's size; here a
/// minimum larger than the window is refused when the policy is built, naming the field.
#[test]
fn differs_minimum_calls_above_the_window_is_refused() {
    let config = BreakerConfig {
        minimum_calls: 6,
        ..interval_test()
    };
    assert_eq!(
        BreakerPolicy::new(config).unwrap_err().field,
        "minimum_calls"
    );
}

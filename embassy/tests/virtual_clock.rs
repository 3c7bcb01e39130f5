//! `Reliable` on a virtual clock (the runtime-free path): time jumps to a timer when the timer is
//! polled, so every test is exact and instant.

use std::cell::Cell;
use std::future::{Future, pending};
use std::pin::pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use reliable_core::backoff::{BackoffConfig, Jitter};
use reliable_core::breaker::{
    BreakerConfig, BreakerPolicy, CircuitBreaker, CountWindow, HalfOpenConfig, NoWindow,
    OpenConfig, State,
};
use reliable_core::budget::Budget;
use reliable_core::budget::{
    ConcurrencyBudget, ConcurrencyConfig, ConcurrencyPolicy, Quota, QuotaConfig, QuotaPolicy,
    Unlimited,
};
use reliable_core::engine::Plan;
use reliable_core::outcome::ErrorClass;
use reliable_core::retry::{GiveUpReason, RetryConfig, RetryDecision, RetryPolicy};
use reliable_core::sample::splitmix64;
use reliable_core::{Duration, Instant};
use reliable_embassy::{Clock, Error, MaybeBreaker, Reliable, State as Shared};

/// A clock that stands still until a timer is polled, then jumps to it.
#[derive(Default)]
struct VirtualClock {
    now: Cell<Instant>,
}

impl Clock for &VirtualClock {
    fn now(&self) -> Instant {
        self.now.get()
    }
    fn sleep_until(&self, at: Instant) -> impl Future<Output = ()> {
        std::future::poll_fn(move |_| {
            self.now.set(self.now.get().max(at));
            Poll::Ready(())
        })
    }
}

/// Polls `fut` to completion (a bounded number of times: the clock never blocks).
fn run<F: Future>(fut: F) -> F::Output {
    let mut fut = pin!(fut);
    let mut cx = Context::from_waker(Waker::noop());
    for _ in 0..10_000 {
        if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return v;
        }
    }
    panic!("the call did not finish");
}

#[derive(Debug, PartialEq)]
struct Flaky;

fn transient(_: &Flaky) -> ErrorClass {
    ErrorClass::Transient
}

/// A `Reliable` with a breaker, a retry policy and a budget, on `clock`.
fn reliable<Br: MaybeBreaker, B: Budget>(
    breaker: Br,
    policy: RetryPolicy,
    budget: B,
    clock: &VirtualClock,
    seed: u64,
) -> Reliable<Shared<Br, B>, &VirtualClock> {
    Reliable::new(Shared::new(breaker, budget, seed), Plan::new(policy), clock)
}

fn retry(config: RetryConfig) -> RetryPolicy {
    RetryPolicy::new(config).expect("valid")
}

const BACKOFF: BackoffConfig = BackoffConfig::exponential(
    Duration::from_millis(100),
    2.0,
    Duration::from_secs(2),
    Jitter::Full,
);

fn breaker(config: BreakerConfig) -> CircuitBreaker<BreakerPolicy, CountWindow<20>> {
    CircuitBreaker::with_storage(BreakerPolicy::new(config).expect("valid")).expect("fits")
}

#[test]
fn retries_wait_exactly_what_the_core_decides() {
    let clock = VirtualClock::default();
    let policy = retry(RetryConfig {
        max_attempts: Some(5),
        ..RetryConfig::new(BACKOFF)
    });
    let rel = reliable(
        breaker(BreakerConfig::reliablekit()),
        policy,
        Unlimited,
        &clock,
        7,
    );
    let sent = Rc::new(std::cell::RefCell::new(Vec::new()));
    let value = run(rel.call(transient, || {
        let sent = Rc::clone(&sent);
        let now = clock.now.get();
        async move {
            sent.borrow_mut().push(now);
            if sent.borrow().len() < 4 {
                Err(Flaky)
            } else {
                Ok(42)
            }
        }
    }));
    assert_eq!(value, Ok(42));

    // The same request driven through the core by hand, with the same draws.
    let mut state = policy.start(Instant::ZERO, &mut Unlimited);
    let (mut now, mut sample, mut want) = (Instant::ZERO, 7, vec![Instant::ZERO]);
    for _ in 0..3 {
        sample = splitmix64(sample);
        match policy.on_failure_with(
            &mut state,
            ErrorClass::Transient,
            now,
            &mut Unlimited,
            sample,
        ) {
            RetryDecision::RetryAt(at) => now = at,
            RetryDecision::GiveUp(reason) => panic!("gave up: {reason}"),
        }
        want.push(now);
    }
    assert_eq!(*sent.borrow(), want);
    assert!(want[3] > want[2], "the retries waited");
}

/// Counts the futures dropped.
struct DropCounter(Rc<Cell<u32>>);
impl Drop for DropCounter {
    fn drop(&mut self) {
        self.0.set(self.0.get() + 1);
    }
}

#[test]
fn a_timed_out_attempt_is_dropped_before_the_next_starts() {
    let clock = VirtualClock::default();
    let policy = retry(RetryConfig {
        max_attempts: Some(3),
        attempt_timeout: Some(Duration::from_millis(250)),
        ..RetryConfig::new(BackoffConfig::constant(Duration::from_millis(100)))
    });
    let rel = reliable(
        breaker(BreakerConfig::reliablekit()),
        policy,
        Unlimited,
        &clock,
        1,
    );
    let (dropped, calls) = (Rc::new(Cell::new(0)), Cell::new(0));
    let result: Result<(), Error<Flaky>> = run(rel.call(transient, || {
        // Every earlier attempt is gone by the time the next is made.
        assert_eq!(dropped.get(), calls.get());
        calls.set(calls.get() + 1);
        let guard = DropCounter(Rc::clone(&dropped));
        async move {
            let _guard = guard;
            pending::<Result<(), Flaky>>().await
        }
    }));
    assert_eq!(
        result,
        Err(Error::Timeout {
            reason: GiveUpReason::MaxAttempts,
            attempts: 3
        })
    );
    assert_eq!((calls.get(), dropped.get()), (3, 3));
    // Three timeouts of 250 ms and two waits of 100 ms.
    assert_eq!(clock.now.get(), Instant::from_millis(3 * 250 + 2 * 100));
}

#[test]
fn an_open_breaker_refuses_without_calling_and_says_when_to_come_back() {
    let clock = VirtualClock::default();
    // Opens after 2 failures in a row, for 20 s.
    let rel = reliable(
        breaker(BreakerConfig::layered_exercise()),
        retry(RetryConfig {
            max_attempts: Some(1),
            ..RetryConfig::new(BACKOFF)
        }),
        Unlimited,
        &clock,
        1,
    );
    let calls = Cell::new(0);
    let call = || {
        calls.set(calls.get() + 1);
        async { Err::<(), _>(Flaky) }
    };
    for _ in 0..2 {
        let gave_up = run(rel.call(transient, call));
        assert!(matches!(
            gave_up,
            Err(Error::GaveUp {
                reason: GiveUpReason::MaxAttempts,
                ..
            })
        ));
    }
    clock.now.set(Instant::from_secs(5));
    let refused = run(rel.call(transient, call));
    assert_eq!(
        refused,
        Err(Error::Open {
            retry_after: Some(Duration::from_secs(15)),
            last: None
        })
    );
    assert_eq!(
        refused.unwrap_err().retry_after(),
        Some(Duration::from_secs(15))
    );
    assert_eq!(calls.get(), 2, "the refused call was not made");
    assert_eq!(
        rel.shared().breaker(|b| b.state(clock.now.get())),
        Some(State::Open)
    );
}

#[test]
fn the_budget_refuses_the_retry_it_cannot_pay_for() {
    let clock = VirtualClock::default();
    // 12 tokens, 5 a retry: two retries, then the budget says no.
    let quota = Quota::new(
        QuotaPolicy::new(QuotaConfig {
            capacity: 12,
            ..QuotaConfig::aws_standard()
        })
        .expect("valid"),
    );
    let policy = retry(RetryConfig {
        max_attempts: Some(10),
        ..RetryConfig::new(BACKOFF)
    });
    let rel = reliable(
        breaker(BreakerConfig::reliablekit()),
        policy,
        quota,
        &clock,
        3,
    );
    let calls = Cell::new(0);
    let result = run(rel.call(transient, || {
        calls.set(calls.get() + 1);
        async { Err::<(), _>(Flaky) }
    }));
    assert!(
        matches!(
            result,
            Err(Error::GaveUp {
                reason: GiveUpReason::Budget(_),
                attempts: 3,
                ..
            })
        ),
        "{result:?}"
    );
    assert_eq!(calls.get(), 3);
}

#[test]
fn a_dropped_call_hands_its_half_open_probe_back() {
    let clock = VirtualClock::default();
    // One failure opens it for 1 s; then one probe at a time, with a 60 s lease.
    let config = BreakerConfig {
        consecutive_failures: Some(1),
        open: OpenConfig {
            duration: Duration::from_secs(1),
            ..OpenConfig::default()
        },
        half_open: HalfOpenConfig {
            max_in_flight: Some(1),
            probe_timeout: Duration::from_secs(60),
            ..HalfOpenConfig::default()
        },
        ..BreakerConfig::new()
    };
    let breaker = CircuitBreaker::<_, NoWindow>::with_storage(BreakerPolicy::new(config).unwrap());
    let policy = retry(RetryConfig {
        max_attempts: Some(1),
        ..RetryConfig::new(BACKOFF)
    });
    let rel = reliable(breaker.unwrap(), policy, Unlimited, &clock, 1);
    let _ = run(rel.call(transient, || async { Err::<(), _>(Flaky) }));
    clock.now.set(Instant::from_secs(2));

    // The probe's call hangs, and its caller gives up on it (a select, a timeout around it).
    {
        let mut probe = pin!(rel.call(transient, pending::<Result<(), Flaky>>));
        let mut cx = Context::from_waker(Waker::noop());
        assert!(probe.as_mut().poll(&mut cx).is_pending());
        assert_eq!(rel.shared().breaker(|b| b.probes_in_flight()), Some(1));
    }
    // The slot is free again at once, not when the lease runs out in 60 s.
    assert_eq!(rel.shared().breaker(|b| b.probes_in_flight()), Some(0));
    assert_eq!(
        run(rel.call(transient, || async { Ok::<_, Flaky>(1) })),
        Ok(1)
    );
    assert_eq!(
        rel.shared().breaker(|b| b.state(clock.now.get())),
        Some(State::Closed)
    );
}

#[test]
fn a_dropped_call_gives_its_retry_back_to_the_budget() {
    let clock = VirtualClock::default();
    let budget =
        ConcurrencyBudget::new(ConcurrencyPolicy::new(ConcurrencyConfig::envoy()).unwrap());
    let policy = retry(RetryConfig {
        max_attempts: Some(3),
        ..RetryConfig::new(BackoffConfig::constant(Duration::from_secs(1)))
    });
    let rel = reliable(
        breaker(BreakerConfig::reliablekit()),
        policy,
        budget,
        &clock,
        1,
    );
    let in_flight = || {
        rel.shared()
            .budget(|b| (b.requests_in_flight(), b.retries_in_flight()))
    };
    {
        // The first attempt fails, the retry is granted and sent, and it hangs; then the caller
        // drops the call.
        let tries = Cell::new(0);
        let mut call = pin!(rel.call(transient, || {
            tries.set(tries.get() + 1);
            let first = tries.get() == 1;
            async move {
                if first {
                    Err(Flaky)
                } else {
                    pending::<Result<(), Flaky>>().await
                }
            }
        }));
        let mut cx = Context::from_waker(Waker::noop());
        // A copy starts in its slot at the poll after the engine asks for it.
        for _ in 0..10 {
            assert!(call.as_mut().poll(&mut cx).is_pending());
            if tries.get() == 2 {
                break;
            }
        }
        assert_eq!(tries.get(), 2, "the retry was sent");
        assert_eq!(in_flight(), Some((1, 1)));
    }
    assert_eq!(in_flight(), Some((0, 0)));
}

#[test]
fn an_attempt_whose_failure_opens_the_breaker_ends_the_call_with_its_error() {
    let clock = VirtualClock::default();
    // Opens after 2 failures in a row, for 20 s; five attempts would be allowed.
    let rel = reliable(
        breaker(BreakerConfig::layered_exercise()),
        retry(RetryConfig {
            max_attempts: Some(5),
            ..RetryConfig::new(BACKOFF)
        }),
        Unlimited,
        &clock,
        1,
    );
    let calls = Cell::new(0);
    let result = run(rel.call(transient, || {
        calls.set(calls.get() + 1);
        async { Err::<(), _>(Flaky) }
    }));
    // The second failure opened it: the call ends there, with that failure, and waits nothing.
    assert_eq!(
        result,
        Err(Error::Open {
            retry_after: Some(Duration::from_secs(20)),
            last: Some(Flaky)
        })
    );
    assert_eq!(calls.get(), 2);
    let backoff = clock.now.get();
    assert!(backoff < Instant::from_secs(3), "it waited {backoff:?}");
}

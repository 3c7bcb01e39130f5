use core::cell::RefCell;

use super::*;
use crate::answer::Signals;
use crate::backoff::{BackoffConfig, Jitter, Shape};
use crate::breaker::{BreakerConfig, BreakerPolicy, CircuitBreaker, NoWindow};
use crate::hedge::{HedgeConfig, HedgeDelay, HedgePolicy};
use crate::limit::LimiterConfig;
use crate::retry::RetryConfig;
use crate::throttle::AdaptiveThrottle;

fn t(ms: u64) -> Instant {
    Instant::from_millis(ms)
}

fn retry(attempts: u32, timeout_ms: Option<u64>) -> RetryPolicy {
    RetryPolicy::new(RetryConfig {
        max_attempts: Some(attempts),
        attempt_timeout: timeout_ms.map(Duration::from_millis),
        deadline: None,
        backoff: BackoffConfig {
            shape: Shape::Constant {
                delay: Duration::from_millis(100),
            },
            cap: None,
            jitter: Jitter::None,
            first_exponent: 0,
        },
        throttled_backoff: None,
        max_server_delay: Duration::from_secs(30),
        retry_timeouts: true,
        wait_on_refusal: false,
    })
    .unwrap()
}

#[derive(Default)]
struct Parts {
    breaker: Option<RefCell<CircuitBreaker<BreakerPolicy, NoWindow>>>,
    hedger: Option<RefCell<Hedger>>,
    throttle: Option<RefCell<AdaptiveThrottle>>,
    limiter: Option<RefCell<Limiter>>,
    notes: RefCell<std::vec::Vec<Note>>,
}

impl Shared for Parts {
    fn breaker_acquire(&self, now: Instant) -> Option<Result<Permit, Rejection>> {
        self.breaker
            .as_ref()
            .map(|b| b.borrow_mut().try_acquire(now))
    }
    fn breaker_record(&self, permit: Permit, outcome: Outcome, now: Instant) {
        if let Some(b) = &self.breaker {
            b.borrow_mut().record(permit, outcome, now);
        }
    }
    fn breaker_refuses(&self, now: Instant) -> Option<Duration> {
        self.breaker
            .as_ref()
            .and_then(|b| b.borrow().retry_after(now))
    }
    fn hedger<R>(&self, f: impl FnOnce(&mut Hedger) -> R) -> Option<R> {
        self.hedger.as_ref().map(|h| f(&mut h.borrow_mut()))
    }
    fn throttle<R>(&self, f: impl FnOnce(&mut dyn crate::throttle::AnyThrottle) -> R) -> Option<R> {
        self.throttle.as_ref().map(|t| f(&mut *t.borrow_mut()))
    }
    fn limiter<R>(&self, f: impl FnOnce(&mut Limiter) -> R) -> Option<R> {
        self.limiter.as_ref().map(|l| f(&mut l.borrow_mut()))
    }
    fn sample(&self, _: SampleFor) -> u64 {
        u64::MAX
    }
    fn note(&self, note: Note) {
        self.notes.borrow_mut().push(note);
    }
}

fn actions<S: Shared>(call: &mut Call<'_, S>) -> std::vec::Vec<Action> {
    core::iter::from_fn(|| call.poll()).collect()
}

const OK: Answer = Answer::status(200, Signals::NONE);
const E500: Answer = Answer::status(500, Signals::NONE);

/// A call's state is what a task awaiting a call keeps (on a microcontroller, most of a call's
/// RAM): its queue of actions holds small entries, not whole `Action`s (an `Action` is as big as
/// the `End` it may carry). With whole `Action`s queued a one-copy call was 1,200 bytes on a
/// 64-bit target, 1,376 for the embassy wrapper's call future on Cortex-M4F (792 now).
#[test]
fn a_call_state_stays_small() {
    assert!(size_of::<Queued>() <= 16, "{}", size_of::<Queued>());
    let one = size_of::<CallState<1>>();
    assert!(one <= 640, "a one-copy call's state is {one} bytes");
    let four = size_of::<CallState<4>>();
    assert!(four <= 900, "a four-copy call's state is {four} bytes");
    // The least queue a one-copy call may have (`C + 4`) saves 11 actions of 16 bytes.
    let least = size_of::<CallState<1, 5>>();
    assert!(least <= one - 11 * 16, "{least} against {one}");
}

#[test]
fn a_failure_is_retried_after_the_backoff_then_succeeds() {
    let plan = Plan::new(retry(3, Some(1000)));
    let parts = Parts::default();
    let mut call: Call<'_, Parts> = Call::start(&plan, &parts, t(0));
    let send = |n, at: u64| Action::Send {
        n,
        deadline: Some(t(at + 1000)),
        hedge: false,
    };
    assert_eq!(actions(&mut call), [send(1, 0)]);
    call.handle(t(10), Input::Answer { n: 1, answer: E500 });
    assert_eq!(actions(&mut call), []);
    assert_eq!(call.poll_timeout(), Some(t(110)));
    call.handle(t(50), Input::Tick);
    assert_eq!(actions(&mut call), [], "not before the wait is over");
    call.handle(t(110), Input::Tick);
    assert_eq!(actions(&mut call), [send(2, 110)]);
    call.handle(t(120), Input::Answer { n: 2, answer: OK });
    let end = End {
        result: Ended::Ok { n: 2 },
        attempts: 2,
        last: Some((2, None)),
    };
    assert_eq!(actions(&mut call), [Action::Done(end)]);
    assert!(call.is_done());
    assert_eq!(call.poll_timeout(), None);
}

#[test]
fn a_call_resumed_from_a_sent_first_attempt_goes_on_as_a_started_one() {
    // A face's fast path sent copy 1 at 0 on its own; it failed at 10.
    let plan = Plan::new(retry(3, Some(1000)));
    let parts = Parts::default();
    let mut call: Call<'_, Parts> = Call::resume(&plan, &parts, t(0), None);
    assert_eq!(actions(&mut call), [], "copy 1 is already out");
    assert_eq!(call.poll_timeout(), Some(t(1000)), "its deadline is kept");
    call.handle(t(10), Input::Answer { n: 1, answer: E500 });
    assert_eq!(call.poll_timeout(), Some(t(110)));
    call.handle(t(110), Input::Tick);
    assert_eq!(
        actions(&mut call),
        [Action::Send {
            n: 2,
            deadline: Some(t(1110)),
            hedge: false,
        }]
    );
    call.handle(t(120), Input::Answer { n: 2, answer: OK });
    let end = End {
        result: Ended::Ok { n: 2 },
        attempts: 2,
        last: Some((2, None)),
    };
    assert_eq!(actions(&mut call), [Action::Done(end)]);
}

#[test]
fn a_late_success_is_a_success() {
    // A face that cannot interrupt its work hands in a success after the deadline.
    let plan = Plan::new(retry(3, Some(300)));
    let parts = Parts::default();
    let mut call: Call<'_, Parts> = Call::start(&plan, &parts, t(0));
    let _ = actions(&mut call);
    call.handle(t(1000), Input::Answer { n: 1, answer: OK });
    assert!(matches!(
        actions(&mut call)[..],
        [Action::Done(End {
            result: Ended::Ok { n: 1 },
            attempts: 1,
            ..
        })]
    ));
}

#[test]
fn the_engine_times_a_copy_out_when_the_face_does_not() {
    let plan = Plan::new(retry(1, Some(300)));
    let parts = Parts::default();
    let mut call: Call<'_, Parts> = Call::start(&plan, &parts, t(0));
    let _ = actions(&mut call);
    assert_eq!(call.poll_timeout(), Some(t(300)));
    call.handle(t(300), Input::Tick);
    assert_eq!(
        actions(&mut call),
        [
            Action::Cancel {
                n: 1,
                why: Cancelled::TimedOut
            },
            Action::Done(End {
                result: Ended::GaveUp(GiveUpReason::MaxAttempts),
                attempts: 1,
                last: Some((1, Some(ErrorClass::Timeout))),
            })
        ]
    );
}

#[test]
fn a_hedge_wins_and_the_first_copy_is_cancelled() {
    let plan = Plan::new(retry(3, Some(1000))).idempotency(Idempotency::Idempotent);
    let hedge = HedgeConfig {
        delay: HedgeDelay::Fixed(Duration::from_millis(50)),
        max_hedges: 1,
    };
    let parts = Parts {
        hedger: Some(RefCell::new(Hedger::new(HedgePolicy::new(hedge).unwrap()))),
        ..Parts::default()
    };
    let mut call: Call<'_, Parts> = Call::start(&plan, &parts, t(0));
    let _ = actions(&mut call);
    assert_eq!(call.poll_timeout(), Some(t(50)));
    call.handle(t(50), Input::Tick);
    assert_eq!(
        actions(&mut call),
        [Action::Send {
            n: 2,
            deadline: Some(t(1000)),
            hedge: true
        }]
    );
    call.handle(t(60), Input::Answer { n: 2, answer: OK });
    let got = actions(&mut call);
    assert_eq!(
        got[0],
        Action::Cancel {
            n: 1,
            why: Cancelled::Lost
        }
    );
    assert!(matches!(
        got[1],
        Action::Done(End {
            result: Ended::Ok { n: 2 },
            ..
        })
    ));
    assert!(parts.notes.borrow().contains(&Note::Lost { n: 1 }));
}

#[test]
fn cancelling_hands_the_breaker_permit_back() {
    let mut c = BreakerConfig::new();
    c.consecutive_failures = Some(1);
    let policy = BreakerPolicy::new(c).unwrap();
    let parts = Parts {
        breaker: Some(RefCell::new(CircuitBreaker::with_storage(policy).unwrap())),
        ..Parts::default()
    };
    let plan = Plan::new(retry(3, None));
    let mut call: Call<'_, Parts> = Call::start(&plan, &parts, t(0));
    let _ = actions(&mut call);
    call.handle(t(5), Input::Cancel);
    assert_eq!(
        actions(&mut call),
        [
            Action::Cancel {
                n: 1,
                why: Cancelled::CallOver
            },
            Action::Done(End {
                result: Ended::Cancelled,
                attempts: 1,
                last: None
            })
        ]
    );
    // Ignored, not a failure: the breaker is still closed.
    assert_eq!(parts.breaker_refuses(t(6)), None);
}

#[test]
fn an_answer_that_opens_the_breaker_ends_the_call_at_once() {
    let mut c = BreakerConfig::new();
    c.consecutive_failures = Some(1);
    let policy = BreakerPolicy::new(c).unwrap();
    let parts = Parts {
        breaker: Some(RefCell::new(CircuitBreaker::with_storage(policy).unwrap())),
        ..Parts::default()
    };
    let plan = Plan::new(retry(5, None));
    let mut call: Call<'_, Parts> = Call::start(&plan, &parts, t(0));
    let _ = actions(&mut call);
    let e503 = Answer::status(
        503,
        Signals {
            retry_after: Some(Duration::from_secs(1)),
            ..Signals::NONE
        },
    );
    call.handle(t(10), Input::Answer { n: 1, answer: e503 });
    let end = refused_by_an_open_breaker(&mut call);
    // The 503 that opened it is the last answer, at 10 ms: no sleep of its Retry-After first.
    assert!(matches!(
        end.last,
        Some((1, Some(ErrorClass::Throttled { .. })))
    ));
}

/// The one action `call` has: its end, refused by an open breaker.
fn refused_by_an_open_breaker<S: Shared>(call: &mut Call<'_, S>) -> End {
    let got = actions(call);
    let [Action::Done(end)] = got[..] else {
        panic!("{got:?}")
    };
    assert!(matches!(
        end.result,
        Ended::Refused(Refusal::Breaker(RejectReason::Open { .. }))
    ));
    end
}

/// Runs a call whose attempts answer `answers` in turn, each at once; how it ended.
fn run_answers(plan: &Plan, parts: &Parts, answers: &[Answer]) -> End {
    let mut call: Call<'_, Parts> = Call::start(plan, parts, t(0));
    let mut now = 0;
    let mut next = answers.iter();
    loop {
        for a in actions(&mut call) {
            match a {
                Action::Send { n, .. } => {
                    let answer = *next.next().unwrap();
                    call.handle(t(now), Input::Answer { n, answer });
                }
                Action::Done(end) => return end,
                Action::Cancel { .. } => {}
            }
        }
        if let Some(at) = call.poll_timeout() {
            now = at.as_nanos() / 1_000_000;
            call.handle(t(now), Input::Tick);
        }
    }
}

fn throttle() -> Option<RefCell<AdaptiveThrottle>> {
    let policy =
        crate::throttle::ThrottlePolicy::new(crate::throttle::ThrottleConfig::google_sre());
    Some(RefCell::new(
        AdaptiveThrottle::new(policy.unwrap()).unwrap(),
    ))
}

#[test]
fn a_throttle_outside_the_retry_counts_the_call_once_and_hears_its_end() {
    let outside = Nesting::new(&[Gate::Throttle], 0, &[]).unwrap();
    let inside = Nesting::new(&[], 0, &[Gate::Throttle]).unwrap();
    for (nesting, counts) in [(outside, (1, 1)), (inside, (3, 3))] {
        let plan = Plan::new(retry(3, None)).nesting(nesting);
        let parts = Parts {
            throttle: throttle(),
            ..Parts::default()
        };
        let end = run_answers(&plan, &parts, &[E500, E500, OK]);
        assert_eq!(end.result, Ended::Ok { n: 3 });
        let got = parts.throttle.as_ref().unwrap().borrow().counts(t(1000));
        assert_eq!(got, counts, "{nesting:?}");
    }
}

#[test]
fn a_limit_outside_the_retry_holds_one_slot_for_the_whole_call() {
    let plan = Plan::new(retry(3, None)).nesting(Nesting::new(&[Gate::Limit], 0, &[]).unwrap());
    let limiter =
        Limiter::new(crate::limit::LimiterPolicy::new(LimiterConfig::bulkhead(1)).unwrap());
    let parts = Parts {
        limiter: Some(RefCell::new(limiter)),
        ..Parts::default()
    };
    let mut call: Call<'_, Parts> = Call::start(&plan, &parts, t(0));
    assert_eq!(parts.limiter.as_ref().unwrap().borrow().in_flight(), 1);
    call.handle(t(5), Input::Answer { n: 1, answer: E500 });
    // Waiting for the retry: the call still holds its slot.
    let _ = actions(&mut call);
    assert_eq!(parts.limiter.as_ref().unwrap().borrow().in_flight(), 1);
    call.handle(t(105), Input::Tick);
    call.handle(t(110), Input::Answer { n: 2, answer: OK });
    assert!(call.is_done());
    assert_eq!(parts.limiter.as_ref().unwrap().borrow().in_flight(), 0);
}

#[test]
fn a_nesting_names_each_gate_once() {
    assert_eq!(
        Nesting::new(&[Gate::Breaker], 0, &[Gate::Breaker]),
        Err(Twice(Gate::Breaker))
    );
    let n = Nesting::new(&[Gate::Rate, Gate::Throttle], 5, &[Gate::Limit]).unwrap();
    assert_eq!(n.outside(), [Gate::Rate, Gate::Throttle]);
    assert_eq!(n.inside(), [Gate::Limit]);
    assert_eq!(n.ledger_at(), 2);
    assert!(n.per_call(Gate::Throttle) && n.per_attempt(Gate::Limit));
    assert!(!n.per_call(Gate::Breaker) && !n.per_attempt(Gate::Breaker));
}

#[cfg(feature = "policy")]
mod stack {
    use super::super::{BreakerScope, Gate, Nesting, Stack, Twice};
    use crate::hedge::Idempotency;
    use crate::policy::{Layer, Scope};

    const RETRY: &str = "policy: (max_attempts: 2, backoff: (shape: Exponential(base: \"100ms\", \
                         factor: 2.0), cap: \"1s\"))";

    fn read(text: &str) -> Result<Stack, String> {
        let text = format!("#![enable(implicit_some)]\n{text}");
        let layer: Layer<()> = ron::from_str(&text).map_err(|e| e.to_string())?;
        Stack::from_layer(&layer).map_err(|e| e.to_string())
    }

    #[test]
    fn the_whole_order_per_attempt() {
        let s = read(&format!(
            "Ledger(config: (ratio: 0.5, min_per_sec: 0, ttl: \"10s\"), scope: Shared, inner: \
             Retry({RETRY}, inner: Throttle(inner: Breaker(config: (consecutive_failures: 3), \
             inner: Limit(config: (rule: Fixed, initial: 4, min: 1, max: 4), inner: \
             RateLimit(config: (rate: 10, period: \"1s\", burst: 2), inner: Hedge(config: \
             (delay: Fixed(\"50ms\"), max_hedges: 1), idempotent: true, inner: \
             Call(downstream: \"api\", timeout: \"200ms\"))))))))"
        ))
        .unwrap();
        assert_eq!(s.downstream, "api");
        assert_eq!(s.plan.breaker_scope(), BreakerScope::PerAttempt);
        assert_eq!(s.plan.idempotency, Idempotency::Idempotent);
        assert_eq!(s.plan.copy_timeout, Some(crate::Duration::from_millis(200)));
        assert_eq!(s.plan.retry().config().max_attempts, Some(2));
        assert_eq!(s.ledger.map(|l| l.1), Some(Scope::Shared));
        assert!(s.throttle.is_some() && s.breaker.is_some() && s.limit.is_some());
        assert!(s.rate.is_some() && s.hedge.is_some() && s.budget.is_none());
    }

    #[test]
    fn a_breaker_per_host_is_refused_where_it_may_sit_and_by_the_engine_everywhere() {
        // Around a Call: a valid stack, which the engine (one host per downstream) refuses.
        let e = read(&format!(
            "Retry({RETRY}, inner: Breaker(config: (consecutive_failures: 3), scope: PerHost, \
             inner: Call(downstream: \"api\")))"
        ))
        .unwrap_err();
        assert_eq!(
            e,
            format!("stack.inner.scope: {}", crate::policy::PER_HOST_ONE_HOST)
        );
        // Around anything else, or on another layer: refused by the nesting rule.
        let e = read(&format!(
            "Breaker(config: (consecutive_failures: 3), scope: PerHost, inner: Retry({RETRY}, \
             inner: Call(downstream: \"api\")))"
        ))
        .unwrap_err();
        assert_eq!(
            e,
            format!("stack.scope: {}", crate::policy::PER_HOST_BREAKER)
        );
        let e = read(&format!(
            "Retry({RETRY}, budget_scope: PerHost, inner: Call(downstream: \"api\"))"
        ))
        .unwrap_err();
        assert!(e.starts_with("stack.budget_scope: scope PerHost"), "{e}");
        assert_eq!(Scope::PerHost.name(), "PerHost");
    }

    #[test]
    fn a_throttle_and_breaker_outside_the_retry_judge_the_call() {
        let s = read(&format!(
            "Throttle(inner: Breaker(config: (consecutive_failures: 3), inner: Retry({RETRY}, \
             inner: Call(downstream: \"api\"))))"
        ))
        .unwrap();
        assert_eq!(s.plan.breaker_scope(), BreakerScope::PerCall);
        assert_eq!(s.plan.gates().outside(), [Gate::Throttle, Gate::Breaker]);
        assert!(s.throttle.is_some());
    }

    #[test]
    fn each_gate_has_the_scope_its_place_gives() {
        let s = read(&format!(
            "Limit(config: (rule: Fixed, initial: 4, min: 1, max: 4), inner: Ledger(config: \
             (ratio: 0.5, min_per_sec: 0, ttl: \"10s\"), inner: Throttle(inner: Retry({RETRY}, \
             inner: RateLimit(config: (rate: 10, period: \"1s\", burst: 2), inner: \
             Breaker(config: (consecutive_failures: 3), inner: Call(downstream: \"a\")))))))"
        ))
        .unwrap();
        let g = s.plan.gates();
        assert_eq!(g.outside(), [Gate::Limit, Gate::Throttle]);
        assert_eq!(g.ledger_at(), 1);
        assert_eq!(g.inside(), [Gate::Rate, Gate::Breaker]);
        // Without a Retry, every gate judges the call.
        let s = read(
            "Breaker(config: (consecutive_failures: 3), inner: Limit(config: (rule: Fixed, \
             initial: 4, min: 1, max: 4), inner: Call(downstream: \"a\")))",
        )
        .unwrap();
        assert_eq!(s.plan.gates().outside(), [Gate::Breaker, Gate::Limit]);
        assert!(s.plan.gates().inside().is_empty());
    }

    #[test]
    fn other_shapes_are_refused_where_they_go_wrong() {
        let cases = [
            (
                format!(
                    "Retry({RETRY}, inner: Throttle(inner: Retry({RETRY}, inner: \
                     Call(downstream: \"a\"))))"
                ),
                "stack.inner.inner: a second Retry on the route",
            ),
            (
                format!("Retry({RETRY}, inner: Hedge(config: (delay: Fixed(\"50ms\"), max_hedges: 1), inner: Limit(config: (rule: Fixed, initial: 1, min: 1, max: 1), inner: Call(downstream: \"a\"))))"),
                "stack.inner.inner: a Hedge sends copies of one call",
            ),
            (
                format!("Retry({RETRY}, inner: Ledger(config: (ratio: 0.5, min_per_sec: 0, ttl: \"10s\"), inner: Call(downstream: \"a\")))"),
                "stack.inner: a Ledger inside a Retry",
            ),
            (
                "Retry(policy: (max_attempts: 0, backoff: (shape: Constant(delay: \"1s\"))), inner: Call(downstream: \"a\"))".into(),
                "stack: max_attempts: must not be zero",
            ),
            (
                "Fallback([Call(downstream: \"a\"), Call(downstream: \"b\")])".into(),
                "stack: the engine does not run a Fallback yet",
            ),
        ];
        for (text, want) in cases {
            let e = read(&text).unwrap_err();
            assert!(e.starts_with(want), "{text}\n{e}");
        }
    }

    #[test]
    fn a_route_s_nesting_is_the_stack_s_and_passes_what_places_no_gate() {
        let layer = |text: &str| -> Layer<()> {
            ron::from_str(&format!("#![enable(implicit_some)]\n{text}")).unwrap()
        };
        let text = format!(
            "Limit(config: (rule: Fixed, initial: 4, min: 1, max: 4), inner: Ledger(config: \
             (ratio: 0.5, min_per_sec: 0, ttl: \"10s\"), inner: Throttle(inner: Retry({RETRY}, \
             inner: RateLimit(config: (rate: 10, period: \"1s\", burst: 2), inner: \
             Breaker(config: (consecutive_failures: 3), inner: Call(downstream: \"a\")))))))"
        );
        let n = Nesting::of_route(&layer(&text)).unwrap();
        assert_eq!(Ok(n), read(&text).map(|s| *s.plan.gates()));
        assert_eq!(n.outside(), [Gate::Limit, Gate::Throttle]);
        assert_eq!(
            (n.ledger_at(), n.inside()),
            (1, &[Gate::Rate, Gate::Breaker][..])
        );
        // An Llm layer (which the engine's Stack does not run) places no gate; a Fallback ends
        // the route.
        let n = Nesting::of_route(&layer(&format!(
            "Breaker(config: (consecutive_failures: 3), inner: Llm(downstream: \"a\", signals: \
             true, inner: Retry({RETRY}, inner: Throttle(inner: Fallback([Limit(config: (rule: \
             Fixed, initial: 4, min: 1, max: 4), inner: Call(downstream: \"a\"))])))))"
        )))
        .unwrap();
        assert_eq!(
            (n.outside(), n.inside()),
            (&[Gate::Breaker][..], &[Gate::Throttle][..])
        );
        assert_eq!(n.ledger_at(), 1);
        let twice = layer(&format!(
            "Breaker(config: (consecutive_failures: 3), inner: Retry({RETRY}, inner: \
             Breaker(config: (consecutive_failures: 3), inner: Call(downstream: \"a\"))))"
        ));
        assert_eq!(Nesting::of_route(&twice), Err(Twice(Gate::Breaker)));
    }
}

/// Drives calls of `C` copies with a queue of `Q` actions through random inputs (answers of live
/// copies, copies dropped, the time passing to every deadline and hedge, the caller cancelling),
/// polling after every input as a face does: the queue never fills, so no action is ever lost.
fn queue_never_fills<const C: usize, const Q: usize>() {
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64 ^ (C as u64);
    let mut next = move |n: u64| {
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (seed >> 33) % n.max(1)
    };
    let hedge = HedgePolicy::new(HedgeConfig {
        delay: HedgeDelay::Fixed(Duration::from_millis(1)),
        max_hedges: (C as u32 - 1).max(1),
    })
    .unwrap();
    let plan = Plan::new(retry(5, Some(300)))
        .idempotency(Idempotency::Idempotent)
        .copy_timeout(Some(Duration::from_millis(100)));
    let mut most = 0;
    for _ in 0..200 {
        let parts = Parts {
            breaker: Some(RefCell::new(
                CircuitBreaker::with_storage(
                    BreakerPolicy::new(BreakerConfig {
                        consecutive_failures: Some(3),
                        ..BreakerConfig::default()
                    })
                    .unwrap(),
                )
                .unwrap(),
            )),
            hedger: (C > 1).then(|| RefCell::new(Hedger::new(hedge))),
            limiter: Some(RefCell::new(Limiter::new(
                crate::limit::LimiterPolicy::new(LimiterConfig::aimd()).unwrap(),
            ))),
            ..Parts::default()
        };
        let mut now = next(1_000);
        let mut st: CallState<C, Q> = CallState::start(&plan, &parts, t(now));
        let mut live: std::vec::Vec<u32> = std::vec::Vec::new();
        for _ in 0..60 {
            most = most.max(st.queued());
            assert!(st.queued() < Q, "{} of {Q} actions queued", st.queued());
            while let Some(a) = st.poll() {
                match a {
                    Action::Send { n, .. } => live.push(n),
                    Action::Cancel { n, .. } => live.retain(|&c| c != n),
                    Action::Done(_) => live.clear(),
                }
            }
            if st.is_done() {
                break;
            }
            let input = match next(10) {
                0..=4 if !live.is_empty() => {
                    let n = live.remove(next(live.len() as u64) as usize);
                    let answer = [OK, E500, Answer::Timeout][next(3) as usize];
                    Input::Answer { n, answer }
                }
                5 if !live.is_empty() => Input::Dropped {
                    n: live.remove(next(live.len() as u64) as usize),
                },
                6 if next(20) == 0 => Input::Cancel,
                _ => {
                    now = st
                        .poll_timeout(&parts)
                        .map_or(now + next(200), |at| at.as_nanos() / 1_000_000 + next(2));
                    Input::Tick
                }
            };
            st.handle(&plan, &parts, t(now), input);
        }
    }
    assert!(
        most >= C,
        "the drive never queued a cancel per copy ({most})"
    );
}

#[test]
fn the_least_queue_of_actions_never_fills() {
    queue_never_fills::<1, 5>();
    queue_never_fills::<2, 6>();
    queue_never_fills::<4, 8>();
    queue_never_fills::<9, 13>();
}

#[test]
fn a_state_restarted_in_place_decides_as_a_fresh_start() {
    // A state left mid-call (copy 2 out, attempts counted) is restarted for another call: it
    // keeps nothing of the first.
    let plan = Plan::new(retry(3, Some(1000)));
    let parts = Parts::default();
    let mut st: CallState = CallState::start(&plan, &parts, t(0));
    st.handle(&plan, &parts, t(10), Input::Answer { n: 1, answer: E500 });
    st.handle(&plan, &parts, t(110), Input::Tick);
    assert_eq!(st.attempts(), 2);
    st.restart(&plan, &parts, t(500));
    let fresh: CallState = CallState::start(&plan, &parts, t(500));
    assert_eq!(st.attempts(), fresh.attempts());
    assert_eq!(st.queued(), fresh.queued());
    assert_eq!(st.poll_timeout(&parts), fresh.poll_timeout(&parts));
    assert_eq!(
        st.poll(),
        Some(Action::Send {
            n: 1,
            deadline: Some(t(1500)),
            hedge: false,
        })
    );
    st.handle(&plan, &parts, t(520), Input::Answer { n: 1, answer: OK });
    assert!(matches!(
        st.poll(),
        Some(Action::Done(End {
            result: Ended::Ok { n: 1 },
            attempts: 1,
            ..
        }))
    ));
}

/// A breaker kept in a store, decided exactly: asked for an attempt (or the call), it answers
/// later, and the test hands in the answer (its `parts.breaker`'s); a hedge asks it at once.
struct Store {
    parts: Parts,
    asked: core::cell::Cell<u32>,
}

impl Store {
    fn new(parts: Parts) -> Self {
        Store {
            parts,
            asked: core::cell::Cell::new(0),
        }
    }
    /// The store's answer: its breaker's decision at `now`.
    fn answer(&self, now: Instant) -> Result<Permit, Rejection> {
        self.parts.breaker_acquire(now).unwrap()
    }
    fn in_flight(&self) -> u32 {
        self.parts.limiter.as_ref().unwrap().borrow().in_flight()
    }
}

impl Shared for Store {
    fn breaker_ask(&self, _: Instant) -> Option<Asked> {
        self.asked.set(self.asked.get() + 1);
        Some(Asked::Later)
    }
    fn breaker_acquire(&self, now: Instant) -> Option<Result<Permit, Rejection>> {
        self.parts.breaker_acquire(now)
    }
    fn breaker_record(&self, permit: Permit, outcome: Outcome, now: Instant) {
        self.parts.breaker_record(permit, outcome, now);
    }
    fn breaker_refuses(&self, now: Instant) -> Option<Duration> {
        self.parts.breaker_refuses(now)
    }
    fn limiter<R>(&self, f: impl FnOnce(&mut Limiter) -> R) -> Option<R> {
        self.parts.limiter(f)
    }
    fn note(&self, note: Note) {
        self.parts.note(note);
    }
}

fn store_parts(failures: u32) -> Parts {
    let mut c = BreakerConfig::new();
    c.consecutive_failures = Some(failures);
    c.open.duration = Duration::from_secs(1);
    let limiter =
        Limiter::new(crate::limit::LimiterPolicy::new(LimiterConfig::bulkhead(4)).unwrap());
    Parts {
        breaker: Some(RefCell::new(
            CircuitBreaker::with_storage(BreakerPolicy::new(c).unwrap()).unwrap(),
        )),
        limiter: Some(RefCell::new(limiter)),
        ..Parts::default()
    }
}

#[test]
fn an_attempt_waits_for_a_breaker_that_answers_later_and_goes_on_from_it() {
    let plan = Plan::new(retry(3, Some(1000)));
    let store = Store::new(store_parts(1));
    let mut call: Call<'_, Store> = Call::start(&plan, &store, t(0));
    // Asked, not answered: nothing sent, no timer, and the limit after the breaker not asked.
    assert_eq!(actions(&mut call), []);
    assert!(call.st.is_asking());
    assert_eq!(call.poll_timeout(), None);
    assert_eq!(store.in_flight(), 0);
    call.handle(t(1), Input::Tick);
    assert_eq!(actions(&mut call), [], "the time passing changes nothing");
    // The store's answer comes at 2 ms: the limit is asked and the attempt sent from then on.
    call.breaker_decided(t(2), store.answer(t(2)));
    let send = Action::Send {
        n: 1,
        deadline: Some(t(1002)),
        hedge: false,
    };
    assert_eq!(actions(&mut call), [send]);
    assert_eq!(store.in_flight(), 1);
    // Its failure opens the breaker (one failure): the call ends refused at once.
    call.handle(t(10), Input::Answer { n: 1, answer: E500 });
    let got = actions(&mut call);
    let [Action::Done(end)] = got[..] else {
        panic!("{got:?}")
    };
    assert!(matches!(end.result, Ended::Refused(Refusal::Breaker(_))));
    assert_eq!(store.in_flight(), 0);
    assert_eq!(store.asked.get(), 1);
}

#[test]
fn a_refusal_that_comes_later_ends_the_call_refused() {
    // The breaker already open: its later answer is a refusal.
    let parts = store_parts(1);
    let p = parts.breaker_acquire(t(0)).unwrap().unwrap();
    parts.breaker_record(p, Outcome::Failure, t(0));
    let store = Store::new(parts);
    let plan = Plan::new(retry(3, Some(1000)));
    let mut call: Call<'_, Store> = Call::start(&plan, &store, t(0));
    call.breaker_decided(t(2), store.answer(t(2)));
    let end = refused_by_an_open_breaker(&mut call);
    assert_eq!(end.attempts, 0);
    assert_eq!(store.in_flight(), 0);
}

#[test]
fn a_call_cancelled_while_asking_gives_back_what_it_held_and_the_late_permit() {
    // The limit outside the breaker, both per attempt: the limit's slot is held while asking.
    let nesting = Nesting::new(&[], 0, &[Gate::Limit, Gate::Breaker]).unwrap();
    let plan = Plan::new(retry(3, None)).nesting(nesting);
    let store = Store::new(store_parts(1));
    let mut call: Call<'_, Store> = Call::start(&plan, &store, t(0));
    assert_eq!(store.in_flight(), 1);
    call.handle(t(1), Input::Cancel);
    let end = End {
        result: Ended::Cancelled,
        attempts: 0,
        last: None,
    };
    assert_eq!(actions(&mut call), [Action::Done(end)]);
    assert_eq!(store.in_flight(), 0);
    // The store's permit comes after: back unused (ignored, not a failure that would open it).
    call.breaker_decided(t(2), store.answer(t(2)));
    assert_eq!(actions(&mut call), []);
    assert_eq!(store.breaker_refuses(t(3)), None);
    let b = store.parts.breaker.as_ref().unwrap().borrow();
    assert_eq!(b.state(t(3)), crate::breaker::State::Closed);
}

#[test]
fn a_breaker_outside_the_retry_that_answers_later_admits_the_whole_call() {
    // Before the budget starts (ledger_at 1) and after it (0): asked once, for the call.
    for ledger_at in [0, 1] {
        let nesting = Nesting::new(&[Gate::Breaker], ledger_at, &[Gate::Limit]).unwrap();
        let plan = Plan::new(retry(3, None)).nesting(nesting);
        let store = Store::new(store_parts(5));
        let mut call: Call<'_, Store> = Call::start(&plan, &store, t(0));
        assert_eq!(actions(&mut call), []);
        assert!(call.st.is_asking());
        call.breaker_decided(t(2), store.answer(t(2)));
        let got = actions(&mut call);
        assert!(matches!(got[..], [Action::Send { n: 1, .. }]), "{got:?}");
        call.handle(t(5), Input::Answer { n: 1, answer: E500 });
        call.handle(t(105), Input::Tick);
        let got = actions(&mut call);
        assert!(matches!(got[..], [Action::Send { n: 2, .. }]), "{got:?}");
        call.handle(t(110), Input::Answer { n: 2, answer: OK });
        assert!(call.is_done());
        assert_eq!(store.asked.get(), 1, "ledger_at {ledger_at}");
        assert_eq!(store.in_flight(), 0);
    }
}

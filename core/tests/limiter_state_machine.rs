//! The concurrency limiter on random sequences of acquires, releases (with every completion and
//! random RTTs) and time steps, with random configs of each rule; and the rate limiter on random
//! call times.
//!
//! Invariants: the limit stays within `[min, max]`; a call is admitted exactly when fewer than the
//! limit are in flight, so the calls in flight never exceed the limit they were admitted under; a
//! bulkhead's limit never moves; AIMD and the gradient match a plain model of their formulas
//! (× backoff on a drop, + increase on a success while in use; the gradient step in exact
//! integer arithmetic). The rate limiter never admits more than `burst + span / interval` calls
//! in any span, and a refused call is admitted exactly `retry_after` later.
//!
//! `PROPTEST_CASES=5000 cargo test -p reliable-core --test limiter_state_machine` is CI's long
//! pass.

use proptest::prelude::*;
use proptest::strategy::Union;
use proptest_state_machine::{ReferenceStateMachine, StateMachineTest, prop_state_machine};
use reliable_core::limit::{
    Completion, LimitPermit, LimitRule, Limiter, LimiterConfig, LimiterPolicy, RateConfig,
    RateLimiter, RatePolicy,
};
use reliable_core::{Duration, Instant};

const M: u128 = 1_000_000;

#[derive(Clone, Debug)]
enum Op {
    Wait(u64),
    Acquire,
    Release(usize, Completion),
}

#[derive(Clone, Debug)]
struct Model {
    config: LimiterConfig,
    now: u64,
    /// The limit in millionths of a call.
    limit: u128,
    /// The gradient's long-term RTT.
    long: u128,
    /// Calls in flight when each outstanding permit was admitted, and when, in the real permits'
    /// order.
    permits: Vec<(u32, u64)>,
    answer: Option<bool>,
}

fn rule() -> impl Strategy<Value = LimitRule> {
    prop_oneof![
        Just(LimitRule::Fixed),
        (1..1_000_000u32, 1..5u32).prop_map(|(b, increase)| LimitRule::Aimd {
            backoff: f64::from(b) / 1e6,
            increase
        }),
        (1.0..4.0f64, 1..=1_000_000u32, 1..700u32, 0..10u32).prop_map(|(t, s, w, q)| {
            LimitRule::Gradient {
                tolerance: t,
                smoothing: f64::from(s) / 1e6,
                long_window: w,
                queue: q,
            }
        }),
    ]
}

fn completion() -> impl Strategy<Value = Completion> {
    prop_oneof![
        6 => Just(Completion::Success),
        3 => Just(Completion::Dropped),
        1 => Just(Completion::Ignored),
    ]
}

struct Limits;

impl ReferenceStateMachine for Limits {
    type State = Model;
    type Transition = Op;

    fn init_state() -> BoxedStrategy<Model> {
        (rule(), 1..30u32, 0..30u32, 0..30u32)
            .prop_map(|(rule, min, span, start)| {
                let max = min + span;
                let config = LimiterConfig {
                    rule,
                    initial: min + start.min(span),
                    min,
                    max,
                };
                Model {
                    config,
                    now: 0,
                    limit: u128::from(config.initial) * M,
                    long: 0,
                    permits: Vec::new(),
                    answer: None,
                }
            })
            .boxed()
    }

    fn transitions(s: &Model) -> BoxedStrategy<Op> {
        let mut ops = vec![
            (3, (0..50_000_000u64).prop_map(Op::Wait).boxed()),
            (1, Just(Op::Wait(u64::MAX / 4)).boxed()),
            (6, Just(Op::Acquire).boxed()),
        ];
        if !s.permits.is_empty() {
            ops.push((
                6,
                (0..s.permits.len(), completion())
                    .prop_map(|(i, c)| Op::Release(i, c))
                    .boxed(),
            ));
        }
        Union::new_weighted(ops).boxed()
    }

    // Shrinking may drop the `Acquire` a later op refers to.
    fn preconditions(s: &Model, op: &Op) -> bool {
        !matches!(*op, Op::Release(i, _) if i >= s.permits.len())
    }

    fn apply(mut s: Model, op: &Op) -> Model {
        s.answer = None;
        match *op {
            Op::Wait(d) => s.now = s.now.saturating_add(d),
            Op::Acquire => {
                let ok = (s.permits.len() as u128) < s.limit / M;
                if ok {
                    s.permits.push((s.permits.len() as u32 + 1, s.now));
                }
                s.answer = Some(ok);
            }
            Op::Release(i, completion) => {
                let (in_flight, sent) = s.permits.swap_remove(i);
                let rtt = u128::from(s.now.saturating_sub(sent).max(1));
                let (min, max) = (u128::from(s.config.min) * M, u128::from(s.config.max) * M);
                let l = s.limit;
                let used = 2 * u128::from(in_flight) * M >= l;
                let ppm = |x: f64| (x * 1e6 + 0.5) as u128;
                let next = match (s.config.rule, completion) {
                    (_, Completion::Ignored) | (LimitRule::Fixed, _) => l,
                    (LimitRule::Aimd { backoff, .. }, Completion::Dropped) => {
                        l * ppm(backoff) / M / M * M
                    }
                    (LimitRule::Aimd { increase, .. }, Completion::Success) if used => {
                        l + u128::from(increase) * M
                    }
                    (LimitRule::Aimd { .. }, _) => l,
                    (
                        LimitRule::Gradient {
                            tolerance,
                            smoothing,
                            long_window,
                            queue,
                        },
                        _,
                    ) => {
                        let alpha = 2 * M / (u128::from(long_window) + 1);
                        s.long = if s.long == 0 {
                            rtt
                        } else {
                            let next = if rtt >= s.long {
                                s.long + (rtt - s.long) * alpha / M
                            } else {
                                s.long - (s.long - rtt) * alpha / M
                            };
                            if next / 2 > rtt {
                                next - next / 20
                            } else {
                                next
                            }
                        };
                        if completion == Completion::Success && !used {
                            l
                        } else {
                            let g = match completion {
                                Completion::Dropped => M / 2,
                                _ => (ppm(tolerance) * s.long / rtt).clamp(M / 2, M),
                            };
                            let target = l * g / M + u128::from(queue) * M;
                            let sm = ppm(smoothing);
                            (l * (M - sm) + target * sm) / M
                        }
                    }
                };
                s.limit = next.clamp(min, max);
            }
        }
        s
    }
}

#[derive(Debug)]
struct Sut {
    limiter: Limiter,
    permits: Vec<LimitPermit>,
}

impl StateMachineTest for Limits {
    type SystemUnderTest = Sut;
    type Reference = Limits;

    fn init_test(s: &Model) -> Sut {
        Sut {
            limiter: Limiter::new(LimiterPolicy::new(s.config).unwrap()),
            permits: Vec::new(),
        }
    }

    fn apply(mut sut: Sut, s: &Model, op: Op) -> Sut {
        let now = Instant::from_nanos(s.now);
        match op {
            Op::Wait(_) => {}
            Op::Acquire => {
                let (limit, before) = (sut.limiter.limit(), sut.limiter.in_flight());
                let got = sut.limiter.try_acquire(now);
                assert_eq!(
                    got.is_ok(),
                    before < limit,
                    "{before} in flight, limit {limit}"
                );
                assert_eq!(Some(got.is_ok()), s.answer);
                match got {
                    Ok(p) => {
                        assert!(sut.limiter.in_flight() <= limit);
                        sut.permits.push(p);
                    }
                    Err(r) => assert_eq!(r.limit, limit),
                }
            }
            Op::Release(i, completion) => {
                let p = sut.permits.swap_remove(i);
                sut.limiter.release(p, completion, now);
            }
        }
        sut
    }

    fn check_invariants(sut: &Sut, s: &Model) {
        let l = &sut.limiter;
        assert!(
            s.config.min <= l.limit() && l.limit() <= s.config.max,
            "limit {} outside [{}, {}]",
            l.limit(),
            s.config.min,
            s.config.max
        );
        assert!(l.micro_limit() <= u64::from(s.config.max) * 1_000_000);
        assert_eq!(l.in_flight() as usize, s.permits.len());
        assert_eq!(sut.permits.len(), s.permits.len());
        assert_eq!(u128::from(l.micro_limit()), s.limit);
        if s.config.rule == LimitRule::Fixed {
            assert_eq!(l.limit(), s.config.initial);
        }
    }
}

prop_state_machine! {
    #[test]
    fn limiter_stays_in_bounds_and_matches_the_model(sequential 1..200 => Limits);
}

proptest! {
    #[test]
    fn rate_limiter_never_admits_more_than_burst_plus_rate(
        rate in 1..50u32,
        period_ms in 1..2_000u64,
        burst in 1..10u32,
        steps in proptest::collection::vec(0..200_000_000u64, 1..300),
    ) {
        let config = RateConfig { rate, period: Duration::from_millis(period_ms), burst };
        let policy = RatePolicy::new(config).unwrap();
        let interval = policy.interval().as_nanos();
        let mut limiter = RateLimiter::new(policy);
        let (mut now, mut admitted) = (0u64, Vec::new());
        for step in steps {
            now += step % 3 * (step / 3); // many calls at the same instant
            match limiter.try_acquire(Instant::from_nanos(now)) {
                Ok(()) => admitted.push(now),
                Err(refused) => {
                    prop_assert!(refused.retry_after > Duration::ZERO);
                    let mut probe = limiter.clone();
                    let at = now + refused.retry_after.as_nanos();
                    prop_assert!(probe.try_acquire(Instant::from_nanos(at - 1)).is_err());
                    prop_assert!(probe.try_acquire(Instant::from_nanos(at)).is_ok());
                }
            }
        }
        for (i, &from) in admitted.iter().enumerate() {
            for (j, &to) in admitted.iter().enumerate().skip(i) {
                let calls = (j - i + 1) as u64;
                prop_assert!(
                    calls <= u64::from(burst) + (to - from) / interval,
                    "{calls} calls in {} ns at one per {interval} ns, burst {burst}",
                    to - from
                );
            }
        }
    }
}

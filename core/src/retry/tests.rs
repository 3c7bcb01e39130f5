use super::*;
use crate::backoff::{Jitter, Shape};
use crate::budget::{
    AnyBudget, BudgetConfig, ConcurrencyBudget, ConcurrencyConfig, ConcurrencyPolicy, Quota,
    QuotaConfig, QuotaPolicy, Unlimited,
};
use ErrorClass::{DontRetry, Fatal, Timeout, Transient};

fn secs(n: u64) -> Instant {
    Instant::from_secs(n)
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn policy(config: RetryConfig) -> RetryPolicy {
    RetryPolicy::new(config).unwrap()
}

/// One response of an AWS-style table test.
#[derive(Clone, Copy, Debug)]
enum Response {
    /// 500/502/503: a transient error.
    Error,
    /// A throttling error (400 `Throttling`, 429).
    Throttle,
    /// The attempt timed out.
    TimedOut,
    /// 200.
    Ok,
}

/// What the SDK should do after the response.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Expect {
    Retry { quota: u32, delay_ms: u64 },
    Success { quota: u32 },
    MaxAttempts { quota: u32 },
    QuotaExceeded { quota: u32 },
}

/// Runs an AWS retry-spec table: a new request starts after each success; jitter is pinned to its
/// maximum (`exponential_base: 1` in the spec), so delays are exact.
fn aws_table(config: RetryConfig, quota: QuotaConfig, steps: &[(Response, Expect)]) {
    let policy = policy(config);
    let mut budget = Quota::new(QuotaPolicy::new(quota).unwrap());
    let mut now = secs(1);
    let mut request = policy.start(now, &mut budget);
    for (i, &(response, expect)) in steps.iter().enumerate() {
        if request.is_finished() {
            request = policy.start(now, &mut budget);
        }
        let class = match response {
            Response::Error => Transient,
            Response::Throttle => ErrorClass::Throttled { retry_after: None },
            Response::TimedOut => Timeout,
            Response::Ok => {
                policy.on_success(&mut request, now, &mut budget);
                assert_eq!(
                    expect,
                    Expect::Success {
                        quota: budget.available()
                    },
                    "step {i}"
                );
                continue;
            }
        };
        let got = match policy.on_failure_with(&mut request, class, now, &mut budget, u64::MAX) {
            RetryDecision::RetryAt(at) => {
                let delay_ms = at.saturating_duration_since(now).as_millis();
                now = at;
                Expect::Retry {
                    quota: budget.available(),
                    delay_ms,
                }
            }
            RetryDecision::GiveUp(GiveUpReason::MaxAttempts) => Expect::MaxAttempts {
                quota: budget.available(),
            },
            RetryDecision::GiveUp(GiveUpReason::Budget(Denied::Quota)) => Expect::QuotaExceeded {
                quota: budget.available(),
            },
            other => panic!("step {i}: unexpected {other:?}"),
        };
        assert_eq!(got, expect, "step {i}: {response:?}");
    }
}

fn with_initial(initial: u32, config: QuotaConfig) -> QuotaConfig {
    QuotaConfig {
        initial: Some(initial),
        ..config
    }
}

#[test]
fn aws_standard_mode_spec_tables() {
    use Expect::*;
    use Response::*;
    let std = RetryConfig::aws_standard();
    let quota = QuotaConfig::aws_standard();
    // Retry eventually succeeds.
    aws_table(
        std,
        quota,
        &[
            (
                Error,
                Retry {
                    quota: 495,
                    delay_ms: 1_000,
                },
            ),
            (
                Error,
                Retry {
                    quota: 490,
                    delay_ms: 2_000,
                },
            ),
            (Ok, Success { quota: 495 }),
        ],
    );
    // Fail due to max attempts reached.
    aws_table(
        std,
        quota,
        &[
            (
                Error,
                Retry {
                    quota: 495,
                    delay_ms: 1_000,
                },
            ),
            (
                Error,
                Retry {
                    quota: 490,
                    delay_ms: 2_000,
                },
            ),
            (Error, MaxAttempts { quota: 490 }),
        ],
    );
    // Retry quota reached after a single retry.
    aws_table(
        std,
        with_initial(5, quota),
        &[
            (
                Error,
                Retry {
                    quota: 0,
                    delay_ms: 1_000,
                },
            ),
            (Error, QuotaExceeded { quota: 0 }),
        ],
    );
    // No retries at all if the retry quota is 0.
    aws_table(
        std,
        with_initial(0, quota),
        &[(Error, QuotaExceeded { quota: 0 })],
    );
    // Verifying exponential backoff timing.
    let five = RetryConfig {
        max_attempts: Some(5),
        ..std
    };
    aws_table(
        five,
        quota,
        &[
            (
                Error,
                Retry {
                    quota: 495,
                    delay_ms: 1_000,
                },
            ),
            (
                Error,
                Retry {
                    quota: 490,
                    delay_ms: 2_000,
                },
            ),
            (
                Error,
                Retry {
                    quota: 485,
                    delay_ms: 4_000,
                },
            ),
            (
                Error,
                Retry {
                    quota: 480,
                    delay_ms: 8_000,
                },
            ),
            (Error, MaxAttempts { quota: 480 }),
        ],
    );
    // Verify max backoff time (max_backoff_time: 3 s).
    let capped = RetryConfig {
        backoff: BackoffConfig {
            cap: Some(Duration::from_secs(3)),
            ..std.backoff
        },
        ..five
    };
    aws_table(
        capped,
        quota,
        &[
            (
                Error,
                Retry {
                    quota: 495,
                    delay_ms: 1_000,
                },
            ),
            (
                Error,
                Retry {
                    quota: 490,
                    delay_ms: 2_000,
                },
            ),
            (
                Error,
                Retry {
                    quota: 485,
                    delay_ms: 3_000,
                },
            ),
            (
                Error,
                Retry {
                    quota: 480,
                    delay_ms: 3_000,
                },
            ),
            (Error, MaxAttempts { quota: 480 }),
        ],
    );
    // Timeouts cost 10; a success refunds the last retry's cost only; +1 without retries.
    aws_table(
        std,
        quota,
        &[
            (
                Error,
                Retry {
                    quota: 495,
                    delay_ms: 1_000,
                },
            ),
            (
                TimedOut,
                Retry {
                    quota: 485,
                    delay_ms: 2_000,
                },
            ),
            (Ok, Success { quota: 495 }),
            (Ok, Success { quota: 496 }),
            (
                Throttle,
                Retry {
                    quota: 491,
                    delay_ms: 1_000,
                },
            ),
            (Ok, Success { quota: 496 }),
        ],
    );
}

#[test]
fn aws_2026_spec_tables() {
    use Expect::*;
    use Response::*;
    let new = RetryConfig::aws_2026();
    let quota = QuotaConfig::aws_2026();
    // Retry eventually succeeds.
    aws_table(
        new,
        quota,
        &[
            (
                Error,
                Retry {
                    quota: 486,
                    delay_ms: 50,
                },
            ),
            (
                Error,
                Retry {
                    quota: 472,
                    delay_ms: 100,
                },
            ),
            (Ok, Success { quota: 486 }),
        ],
    );
    // Fail due to max attempts reached.
    aws_table(
        new,
        quota,
        &[
            (
                Error,
                Retry {
                    quota: 486,
                    delay_ms: 50,
                },
            ),
            (
                Error,
                Retry {
                    quota: 472,
                    delay_ms: 100,
                },
            ),
            (Error, MaxAttempts { quota: 472 }),
        ],
    );
    // Retry quota reached after a single retry.
    aws_table(
        new,
        with_initial(14, quota),
        &[
            (
                Error,
                Retry {
                    quota: 0,
                    delay_ms: 50,
                },
            ),
            (Error, QuotaExceeded { quota: 0 }),
        ],
    );
    // No retries at all if the retry quota is 0.
    aws_table(
        new,
        with_initial(0, quota),
        &[(Error, QuotaExceeded { quota: 0 })],
    );
    // Verifying exponential backoff timing.
    let five = RetryConfig {
        max_attempts: Some(5),
        ..new
    };
    aws_table(
        five,
        quota,
        &[
            (
                Error,
                Retry {
                    quota: 486,
                    delay_ms: 50,
                },
            ),
            (
                Error,
                Retry {
                    quota: 472,
                    delay_ms: 100,
                },
            ),
            (
                Error,
                Retry {
                    quota: 458,
                    delay_ms: 200,
                },
            ),
            (
                Error,
                Retry {
                    quota: 444,
                    delay_ms: 400,
                },
            ),
            (Error, MaxAttempts { quota: 444 }),
        ],
    );
    // Retry stops after retry quota exhaustion.
    aws_table(
        five,
        with_initial(20, quota),
        &[
            (
                Error,
                Retry {
                    quota: 6,
                    delay_ms: 50,
                },
            ),
            (Error, QuotaExceeded { quota: 6 }),
        ],
    );
    // Retry quota recovery after successful responses.
    aws_table(
        five,
        with_initial(30, quota),
        &[
            (
                Error,
                Retry {
                    quota: 16,
                    delay_ms: 50,
                },
            ),
            (
                Error,
                Retry {
                    quota: 2,
                    delay_ms: 100,
                },
            ),
            (Ok, Success { quota: 16 }),
            (
                Error,
                Retry {
                    quota: 2,
                    delay_ms: 50,
                },
            ),
            (Ok, Success { quota: 16 }),
        ],
    );
    // Throttling error: 5 tokens and a 1,000 ms backoff.
    aws_table(
        new,
        quota,
        &[
            (
                Throttle,
                Retry {
                    quota: 495,
                    delay_ms: 1_000,
                },
            ),
            (Ok, Success { quota: 500 }),
        ],
    );
    // Timeouts are transient errors now: 14.
    aws_table(
        new,
        quota,
        &[(
            TimedOut,
            Retry {
                quota: 486,
                delay_ms: 50,
            },
        )],
    );
}

#[test]
fn error_classes_decide_first() {
    let p = policy(RetryConfig::new(BackoffConfig::immediate()));
    let no_timeouts = policy(RetryConfig {
        retry_timeouts: false,
        ..RetryConfig::new(BackoffConfig::immediate())
    });
    for (p, class, want) in [
        (&p, Fatal, GiveUpReason::Fatal),
        (&p, DontRetry, GiveUpReason::DontRetry),
        (&no_timeouts, Timeout, GiveUpReason::TimeoutNotRetried),
    ] {
        let mut budget =
            ConcurrencyBudget::new(ConcurrencyPolicy::new(ConcurrencyConfig::envoy()).unwrap());
        let mut r = p.start(secs(1), &mut budget);
        assert_eq!(budget.requests_in_flight(), 1);
        assert_eq!(
            p.on_failure_with(&mut r, class, secs(1), &mut budget, 0),
            RetryDecision::GiveUp(want)
        );
        assert!(r.is_finished());
        assert_eq!(
            budget.requests_in_flight(),
            0,
            "the request end reached the budget"
        );
        // Nothing more happens to a finished request.
        assert_eq!(
            p.on_failure_with(&mut r, Transient, secs(2), &mut budget, 0),
            RetryDecision::GiveUp(GiveUpReason::Finished)
        );
        p.on_success(&mut r, secs(2), &mut budget);
        p.abandon(&mut r, secs(2), &mut budget);
        assert_eq!(budget.requests_in_flight(), 0);
    }
    let mut r = no_timeouts.start(secs(1), &mut Unlimited);
    assert!(matches!(
        no_timeouts.on_failure_with(&mut r, Transient, secs(1), &mut Unlimited, 0),
        RetryDecision::RetryAt(_)
    ));
}

#[test]
fn server_delays_are_honoured_and_clamped() {
    let p = policy(RetryConfig {
        max_attempts: None,
        max_server_delay: Duration::from_secs(10),
        ..RetryConfig::new(BackoffConfig::constant(Duration::from_secs(2)))
    });
    let mut r = p.start(secs(0), &mut Unlimited);
    let throttled = |s| ErrorClass::Throttled {
        retry_after: Some(Duration::from_secs(s)),
    };
    let mut at = |class| match p.on_failure_with(&mut r, class, secs(100), &mut Unlimited, 0) {
        RetryDecision::RetryAt(t) => t.saturating_duration_since(secs(100)).as_secs(),
        other => panic!("{other:?}"),
    };
    assert_eq!(at(throttled(5)), 5, "longer than the backoff: honoured");
    assert_eq!(at(throttled(1)), 2, "shorter than the backoff: the backoff");
    assert_eq!(at(throttled(3_600)), 10, "clamped to max_server_delay");
    assert_eq!(at(ErrorClass::Throttled { retry_after: None }), 2);
    assert_eq!(at(Transient), 2);
    // Zero ignores server delays.
    let deaf = policy(RetryConfig {
        max_server_delay: Duration::ZERO,
        ..*p.config()
    });
    let mut r = deaf.start(secs(0), &mut Unlimited);
    assert_eq!(
        deaf.on_failure_with(&mut r, throttled(60), secs(0), &mut Unlimited, 0),
        RetryDecision::RetryAt(secs(2))
    );
}

#[test]
fn the_deadline_bounds_retries_and_attempts() {
    let p = policy(RetryConfig {
        max_attempts: None,
        attempt_timeout: Some(Duration::from_secs(3)),
        deadline: Some(Duration::from_secs(10)),
        ..RetryConfig::new(BackoffConfig::constant(Duration::from_secs(2)))
    });
    let mut r = p.start(secs(100), &mut Unlimited);
    assert_eq!(r.deadline(), Some(secs(110)));
    assert_eq!(p.attempt_deadline(&r, secs(100)), secs(103));
    assert_eq!(
        p.attempt_deadline(&r, secs(109)),
        secs(110),
        "the deadline comes first"
    );
    // A retry at 107 + 2 = 109 starts before 110: scheduled.
    assert_eq!(
        p.on_failure_with(&mut r, Transient, secs(107), &mut Unlimited, 0),
        RetryDecision::RetryAt(secs(109))
    );
    // One at 108 + 2 = 110 would start at the deadline: not scheduled.
    assert_eq!(
        p.on_failure_with(&mut r, Transient, secs(108), &mut Unlimited, 0),
        RetryDecision::GiveUp(GiveUpReason::Deadline)
    );
    // A server delay past the deadline gives up too.
    let mut r = p.start(secs(0), &mut Unlimited);
    let long = ErrorClass::Throttled {
        retry_after: Some(Duration::from_secs(15)),
    };
    assert_eq!(
        p.on_failure_with(&mut r, long, secs(1), &mut Unlimited, 0),
        RetryDecision::GiveUp(GiveUpReason::Deadline)
    );
    // Without timeouts: no attempt deadline, and a retry at the end of time is still scheduled.
    let open = policy(RetryConfig::new(BackoffConfig::constant(Duration::MAX)));
    let mut r = open.start(secs(1), &mut Unlimited);
    assert_eq!(r.deadline(), None);
    assert_eq!(open.attempt_deadline(&r, secs(1)), Instant::MAX);
    assert_eq!(
        open.on_failure_with(&mut r, Transient, secs(1), &mut Unlimited, 0),
        RetryDecision::RetryAt(Instant::MAX)
    );
}

#[test]
fn the_budget_is_asked_last_and_sees_every_event() {
    // A concurrency budget with room for one retry in flight.
    let mut budget = ConcurrencyBudget::new(
        ConcurrencyPolicy::new(ConcurrencyConfig {
            ratio: 0.0,
            min_concurrency: 1,
        })
        .unwrap(),
    );
    let p = policy(RetryConfig {
        max_attempts: Some(2),
        ..RetryConfig::new(BackoffConfig::immediate())
    });
    let mut a = p.start(secs(1), &mut budget);
    let mut b = p.start(secs(1), &mut budget);
    assert!(matches!(
        p.on_failure_with(&mut a, Transient, secs(1), &mut budget, 0),
        RetryDecision::RetryAt(_)
    ));
    assert_eq!(budget.retries_in_flight(), 1);
    assert_eq!(
        p.on_failure_with(&mut b, Transient, secs(1), &mut budget, 0),
        RetryDecision::GiveUp(GiveUpReason::Budget(Denied::Concurrency))
    );
    // a's retry fails: it is the last attempt, so the limit gives up before the budget is asked,
    // and the retry's slot is freed.
    assert_eq!(
        p.on_failure_with(&mut a, Transient, secs(2), &mut budget, 0),
        RetryDecision::GiveUp(GiveUpReason::MaxAttempts)
    );
    assert_eq!(
        (budget.requests_in_flight(), budget.retries_in_flight()),
        (0, 0)
    );
    // A scheduled retry that is abandoned frees its slot; a success after a retry frees it too.
    let mut c = p.start(secs(3), &mut budget);
    assert!(matches!(
        p.on_failure_with(&mut c, Transient, secs(3), &mut budget, 0),
        RetryDecision::RetryAt(_)
    ));
    p.abandon(&mut c, secs(3), &mut budget);
    assert_eq!(
        (budget.requests_in_flight(), budget.retries_in_flight()),
        (0, 0)
    );
    let mut d = p.start(secs(4), &mut budget);
    assert!(matches!(
        p.on_failure_with(&mut d, Transient, secs(4), &mut budget, 0),
        RetryDecision::RetryAt(_)
    ));
    p.on_success(&mut d, secs(5), &mut budget);
    assert_eq!(
        (budget.requests_in_flight(), budget.retries_in_flight()),
        (0, 0)
    );
    assert_eq!(d.attempts(), 2);
}

#[test]
fn throttled_backoff_and_decorrelated_state_are_per_request() {
    let p = policy(RetryConfig {
        max_attempts: None,
        throttled_backoff: Some(BackoffConfig::constant(Duration::from_secs(7))),
        ..RetryConfig::new(BackoffConfig::brooker_2015(Jitter::Decorrelated))
    });
    let mut r = p.start(secs(0), &mut Unlimited);
    let mut next = |class| match p.on_failure_with(&mut r, class, secs(0), &mut Unlimited, u64::MAX)
    {
        RetryDecision::RetryAt(t) => t.since_origin().as_millis(),
        other => panic!("{other:?}"),
    };
    // Decorrelated at the top of its range: 15, 45 ms; a throttle: the constant 7 s (which then
    // becomes "prev"); then min(cap 2 s, 3 * 7 s).
    assert_eq!(next(Transient), 15);
    assert_eq!(next(Transient), 45);
    assert_eq!(next(ErrorClass::Throttled { retry_after: None }), 7_000);
    assert_eq!(next(Transient), 2_000);
    // A fresh request starts from the base again.
    let mut fresh = p.start(secs(0), &mut Unlimited);
    assert_eq!(
        p.on_failure_with(&mut fresh, Transient, secs(0), &mut Unlimited, u64::MAX),
        RetryDecision::RetryAt(Instant::from_millis(15))
    );
}

#[test]
fn the_rng_is_drawn_only_when_a_delay_is_needed() {
    use rand_core::{Rng, SeedableRng};
    let p = policy(RetryConfig::new(BackoffConfig::aws_standard()));
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(9);
    let mut twin = rng.clone();
    let mut r = p.start(secs(0), &mut Unlimited);
    // Fatal: no draw.
    p.on_failure(&mut r, Fatal, secs(0), &mut Unlimited, &mut rng);
    let mut r = p.start(secs(0), &mut Unlimited);
    let d = p.on_failure(&mut r, Transient, secs(0), &mut Unlimited, &mut rng);
    let want = p
        .backoff_for(Transient)
        .delay(1, Duration::ZERO, twin.next_u64());
    assert_eq!(d, RetryDecision::RetryAt(secs(0) + want));
    assert_eq!(rng.next_u64(), twin.next_u64(), "exactly one draw each");
}

#[test]
fn extreme_inputs_do_not_panic() {
    let p = policy(RetryConfig {
        max_attempts: None,
        attempt_timeout: Some(Duration::MAX),
        deadline: Some(Duration::MAX),
        max_server_delay: Duration::MAX,
        ..RetryConfig::new(BackoffConfig {
            shape: Shape::Exponential {
                base: Duration::from_nanos(1),
                factor: 65_536.0,
            },
            cap: Some(Duration::MAX),
            jitter: Jitter::Decorrelated,
            first_exponent: u32::MAX,
        })
    });
    let mut budget: AnyBudget = AnyBudget::from_config(BudgetConfig::Unlimited).unwrap();
    let mut r = p.start(Instant::MAX, &mut budget);
    let huge = ErrorClass::Throttled {
        retry_after: Some(Duration::MAX),
    };
    for i in 0..200u64 {
        let class = if i % 2 == 0 { huge } else { Transient };
        let _ = p.on_failure_with(
            &mut r,
            class,
            Instant::from_nanos(u64::MAX - i),
            &mut budget,
            i.wrapping_mul(u64::MAX / 7),
        );
    }
    assert_eq!(p.attempt_deadline(&r, Instant::MAX), Instant::MAX);
    // A billion attempts and counting: saturating, never wrapping.
    r.attempts = u32::MAX - 1;
    let _ = p.on_failure_with(&mut r, Transient, Instant::ZERO, &mut budget, 0);
    assert_eq!(
        p.on_failure_with(&mut r, Transient, Instant::ZERO, &mut budget, 0),
        RetryDecision::GiveUp(GiveUpReason::MaxAttempts)
    );
}

#[test]
fn rejects_each_bad_field_by_name() {
    let base = RetryConfig::aws_2026();
    let field = |c| RetryPolicy::new(c).unwrap_err().field;
    assert_eq!(
        field(RetryConfig {
            max_attempts: Some(0),
            ..base
        }),
        "max_attempts"
    );
    assert_eq!(
        field(RetryConfig {
            attempt_timeout: Some(Duration::ZERO),
            ..base
        }),
        "attempt_timeout"
    );
    assert_eq!(
        field(RetryConfig {
            deadline: Some(Duration::ZERO),
            ..base
        }),
        "deadline"
    );
    let bad_base = BackoffConfig {
        shape: Shape::Exponential {
            base: Duration::ZERO,
            factor: 2.0,
        },
        ..base.backoff
    };
    let bad_factor = BackoffConfig {
        shape: Shape::Exponential {
            base: ms(1),
            factor: 0.0,
        },
        ..base.backoff
    };
    let bad_cap = BackoffConfig {
        cap: None,
        ..base.backoff
    };
    let bad_jitter = BackoffConfig {
        jitter: Jitter::Proportional { fraction: 2.0 },
        ..base.backoff
    };
    for (backoff, name) in [
        (bad_base, "shape.base"),
        (bad_factor, "shape.factor"),
        (bad_cap, "cap"),
        (bad_jitter, "jitter.fraction"),
    ] {
        let plain = field(RetryConfig { backoff, ..base });
        assert_eq!(plain.strip_prefix("backoff."), Some(name));
        let throttled = field(RetryConfig {
            throttled_backoff: Some(backoff),
            ..base
        });
        assert_eq!(throttled.strip_prefix("throttled_backoff."), Some(name));
    }
    for c in [
        RetryConfig::reliablekit(),
        RetryConfig::aws_standard(),
        RetryConfig::aws_2026(),
    ] {
        policy(c);
    }
    assert_eq!(
        GiveUpReason::Budget(Denied::Ratio).to_string(),
        "budget (ratio)"
    );
    assert_eq!(GiveUpReason::MaxAttempts.to_string(), "max-attempts");
}

#[test]
fn the_state_is_small() {
    assert!(core::mem::size_of::<RetryState>() <= 32);
}

#[test]
fn a_local_refusal_ends_the_call_unless_the_policy_waits_and_the_wait_fits() {
    let open = ErrorClass::Refused {
        retry_after: Some(Duration::from_secs(30)),
    };
    let base = RetryConfig {
        max_attempts: Some(5),
        ..RetryConfig::new(BackoffConfig::constant(ms(100)))
    };
    // By default: at once, whatever the deadline.
    let p = policy(base);
    let mut budget = Quota::new(QuotaPolicy::new(QuotaConfig::aws_standard()).unwrap());
    let mut r = p.start(secs(0), &mut budget);
    let d = p.on_failure_with(&mut r, open, secs(0), &mut budget, 0);
    assert_eq!(d, RetryDecision::GiveUp(GiveUpReason::Refused));
    assert_eq!(budget.available(), 500, "a refusal is not charged");
    // Waiting, with no deadline: the refuser's retry_after (clamped to max_server_delay).
    let p = policy(RetryConfig {
        wait_on_refusal: true,
        max_server_delay: Duration::from_secs(20),
        ..base
    });
    let mut r = p.start(secs(0), &mut Unlimited);
    let d = p.on_failure_with(&mut r, open, secs(0), &mut Unlimited, 0);
    assert_eq!(d, RetryDecision::RetryAt(secs(20)));
    // Waiting, but the wait does not fit the deadline: the call ends.
    let p = policy(RetryConfig {
        wait_on_refusal: true,
        deadline: Some(Duration::from_secs(10)),
        ..base
    });
    let mut r = p.start(secs(0), &mut Unlimited);
    let d = p.on_failure_with(&mut r, open, secs(0), &mut Unlimited, 0);
    assert_eq!(d, RetryDecision::GiveUp(GiveUpReason::Deadline));
}

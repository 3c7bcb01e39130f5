//! Fuzzes every retry-budget kind: arbitrary configs and request histories (first tries, attempt
//! ends with every outcome, retry requests by error class, request ends, time steps forwards,
//! backwards and huge), checking each kind's invariant after every step.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use reliable_core::budget::{
    AnyBudget, Budget, BudgetConfig, BudgetPolicy, Calls, ConcurrencyConfig, Grant, QuotaConfig,
    RateWindow, RatioConfig, RetryBreakerConfig, Threshold, TokenBucketConfig,
};
use reliable_core::outcome::{AttemptOutcome, ErrorClass};
use reliable_core::{Duration, Instant};

#[derive(Arbitrary, Debug)]
enum RawConfig {
    Unlimited,
    TokenBucket {
        max: u16,
        initial: Option<u16>,
        first: u8,
        success: u8,
        retried: Option<u8>,
        failure: u8,
        retry: u8,
        above: bool,
        threshold: u16,
    },
    Ratio {
        ratio: u32,
        min_per_sec: u8,
        ttl_s: u8,
        slots: u8,
    },
    Quota {
        capacity: u16,
        initial: Option<u16>,
        retry: u8,
        timeout: u8,
        throttle: u8,
        success: u8,
    },
    Concurrency {
        ratio: u32,
        min: u8,
    },
    RetryBreaker {
        above: bool,
        threshold: u32,
        attempts: bool,
        window: Option<(u16, u8)>,
        minimum: u8,
    },
}

#[derive(Arbitrary, Debug)]
enum Op {
    FirstTry,
    End { pick: u8, outcome: u8 },
    Retry { class: u8 },
    RequestEnd,
    Step(u16),
    Back(u16),
    Huge(u64),
}

fn frac(x: u32) -> f64 {
    f64::from(x) / f64::from(u32::MAX)
}

fn config(r: &RawConfig) -> BudgetConfig {
    match *r {
        RawConfig::Unlimited => BudgetConfig::Unlimited,
        RawConfig::TokenBucket {
            max,
            initial,
            first,
            success,
            retried,
            failure,
            retry,
            above,
            threshold,
        } => {
            let t = f64::from(threshold) / 100.0;
            BudgetConfig::TokenBucket(TokenBucketConfig {
                max_tokens: f64::from(max) / 10.0,
                initial_tokens: initial.map(|i| f64::from(i) / 10.0),
                first_try_credit: f64::from(first) / 100.0,
                success_credit: f64::from(success) / 100.0,
                retried_success_credit: retried.map(|x| f64::from(x) / 100.0),
                failure_cost: f64::from(failure) / 10.0,
                retry_cost: f64::from(retry) / 10.0,
                retry_when: if above {
                    Threshold::Above(t)
                } else {
                    Threshold::AtLeast(t)
                },
            })
        }
        RawConfig::Ratio {
            ratio,
            min_per_sec,
            ttl_s,
            slots,
        } => BudgetConfig::Ratio(RatioConfig {
            ratio: frac(ratio) * 2.0,
            min_per_sec: u32::from(min_per_sec),
            ttl: Duration::from_secs(u64::from(ttl_s)),
            slots: u32::from(slots),
        }),
        RawConfig::Quota {
            capacity,
            initial,
            retry,
            timeout,
            throttle,
            success,
        } => BudgetConfig::Quota(QuotaConfig {
            capacity: u32::from(capacity),
            initial: initial.map(u32::from),
            retry_cost: u32::from(retry),
            timeout_cost: u32::from(timeout),
            throttle_cost: u32::from(throttle),
            success_increment: u32::from(success),
        }),
        RawConfig::Concurrency { ratio, min } => BudgetConfig::Concurrency(ConcurrencyConfig {
            ratio: frac(ratio),
            min_concurrency: u32::from(min),
        }),
        RawConfig::RetryBreaker {
            above,
            threshold,
            attempts,
            window,
            minimum,
        } => BudgetConfig::RetryBreaker(RetryBreakerConfig {
            stop_when: if above {
                Threshold::Above(frac(threshold))
            } else {
                Threshold::AtLeast(frac(threshold))
            },
            calls: if attempts {
                Calls::Attempts
            } else {
                Calls::FirstTries
            },
            window: window.map_or(RateWindow::Cumulative, |(ms, b)| RateWindow::Time {
                span: Duration::from_millis(u64::from(ms)),
                buckets: u32::from(b),
            }),
            minimum_calls: u32::from(minimum),
        }),
    }
}

fn class(c: u8) -> ErrorClass {
    match c % 5 {
        0 => ErrorClass::Transient,
        1 => ErrorClass::Timeout,
        2 => ErrorClass::Throttled { retry_after: None },
        3 => ErrorClass::Throttled {
            retry_after: Some(Duration::from_millis(u64::from(c))),
        },
        _ => ErrorClass::Fatal,
    }
}

fuzz_target!(|input: (RawConfig, Vec<Op>)| {
    let (raw, ops) = input;
    let cfg = config(&raw);
    let Ok(policy) = BudgetPolicy::new(cfg) else {
        return;
    };
    let Ok(mut budget) = AnyBudget::<16>::new(&policy) else {
        return;
    };
    let mut clock = 0u64;
    let mut grants: Vec<Grant> = Vec::new();
    let (mut first_tries, mut granted) = (0u64, 0u64);
    for op in ops.iter().take(5_000) {
        let now = Instant::from_nanos(clock);
        match *op {
            Op::FirstTry => {
                budget.on_first_try(now);
                first_tries += 1;
            }
            Op::End { pick, outcome } => {
                let grant = if grants.is_empty() || pick % 2 == 0 {
                    None
                } else {
                    Some(grants.swap_remove(usize::from(pick) % grants.len()))
                };
                let outcome = match outcome % 3 {
                    0 => AttemptOutcome::Success,
                    1 => AttemptOutcome::Failed(class(outcome)),
                    _ => AttemptOutcome::Cancelled,
                };
                budget.on_attempt_end(outcome, grant, now);
            }
            Op::Retry { class: c } => {
                // What each kind must check before granting, observed just before asking.
                let before = match &budget {
                    AnyBudget::TokenBucket(b) => Some(b.micro_tokens() as i128),
                    AnyBudget::Quota(b) => Some(i128::from(b.available())),
                    AnyBudget::Concurrency(b) => Some(
                        i128::from(b.policy().limit(b.requests_in_flight()))
                            - i128::from(b.retries_in_flight()),
                    ),
                    AnyBudget::RetryBreaker(b) => Some(i128::from(b.allows_retry(now))),
                    AnyBudget::Ratio(b) => Some(b.micro_balance(now)),
                    AnyBudget::Unlimited(_) => None,
                };
                if let Ok(g) = budget.try_retry(class(c), now) {
                    granted += 1;
                    match (&budget, before) {
                        (AnyBudget::Quota(_), Some(avail)) => {
                            assert!(i128::from(g.cost()) <= avail, "quota overdrawn")
                        }
                        (AnyBudget::Concurrency(_), Some(room)) => {
                            assert!(room > 0, "concurrency limit passed")
                        }
                        (AnyBudget::RetryBreaker(_), Some(allowed)) => {
                            assert_eq!(allowed, 1, "retry breaker open")
                        }
                        (AnyBudget::Ratio(_), Some(balance)) => {
                            assert!(balance >= 1_000_000, "ratio budget overdrawn: {balance}")
                        }
                        (AnyBudget::TokenBucket(_), Some(tokens)) => assert!(tokens >= 0),
                        _ => {}
                    }
                    grants.push(g);
                }
            }
            Op::RequestEnd => budget.on_request_end(now),
            Op::Step(ms) => clock = clock.saturating_add(u64::from(ms) * 1_000_000),
            Op::Back(ms) => clock = clock.saturating_sub(u64::from(ms) * 1_000_000),
            Op::Huge(n) => clock = clock.saturating_add(n),
        }
        match &budget {
            AnyBudget::Quota(b) => assert!(b.available() <= b.policy().config().capacity),
            AnyBudget::TokenBucket(b) => {
                if let BudgetConfig::TokenBucket(c) = cfg {
                    assert!(
                        b.tokens() <= c.max_tokens + 1e-6,
                        "{} tokens above the capacity {}",
                        b.tokens(),
                        c.max_tokens
                    );
                }
            }
            _ => {}
        }
        // Without a reserve, a ratio budget never grants more than ratio x first tries.
        if let BudgetConfig::Ratio(RatioConfig {
            ratio,
            min_per_sec: 0,
            ..
        }) = cfg
        {
            assert!(
                granted as f64 <= ratio * first_tries as f64 + 1e-6,
                "{granted} retries for {first_tries} first tries at {ratio}"
            );
        }
    }
});

//! The retry part of the script: one retry policy (attempt limit, per-attempt timeout, deadline,
//! a separate backoff after throttling, server delays) under each retry budget, over a list of
//! requests whose attempts end as scripted.

use core::hint::black_box;

use reliable_core::backoff::{BackoffConfig, Jitter};
use reliable_core::budget::{
    AnyBudget, BudgetConfig, ConcurrencyConfig, QuotaConfig, RatioConfig, RetryBreakerConfig,
    TokenBucketConfig,
};
use reliable_core::outcome::ErrorClass;
use reliable_core::retry::{GiveUpReason, RetryConfig, RetryDecision, RetryPolicy};
use reliable_core::sample::splitmix64;
use reliable_core::{Duration, Instant};

use crate::Trace;

/// The retry policy every request runs under.
pub const RETRY: RetryConfig = RetryConfig {
    max_attempts: Some(4),
    attempt_timeout: Some(Duration::from_millis(800)),
    deadline: Some(Duration::from_secs(3)),
    backoff: BackoffConfig::exponential(
        Duration::from_millis(100),
        2.0,
        Duration::from_secs(1),
        Jitter::Full,
    ),
    throttled_backoff: Some(BackoffConfig {
        jitter: Jitter::Equal,
        ..BackoffConfig::constant(Duration::from_millis(500))
    }),
    max_server_delay: Duration::from_secs(2),
    retry_timeouts: true,
    wait_on_refusal: false,
};

/// The budgets, by name; small enough that the script spends them.
pub const BUDGETS: [(&str, BudgetConfig); 6] = [
    ("unlimited", BudgetConfig::Unlimited),
    (
        "token-bucket",
        BudgetConfig::TokenBucket(TokenBucketConfig::brooker_2022()),
    ),
    ("ratio", BudgetConfig::Ratio(RatioConfig::percent(0.2))),
    (
        "quota",
        BudgetConfig::Quota(QuotaConfig {
            capacity: 40,
            ..QuotaConfig::aws_standard()
        }),
    ),
    (
        "concurrency",
        BudgetConfig::Concurrency(ConcurrencyConfig::envoy()),
    ),
    (
        "retry-breaker",
        BudgetConfig::RetryBreaker(RetryBreakerConfig::brooker_2022()),
    ),
];

/// The requests, used in turn: each letter is an attempt's end. `S` success, `T` transient
/// error, `O` timeout, `H` throttled with a 1.5 s server delay, `h` throttled without one, `X`
/// fatal, `D` "don't retry". A request whose letters run out while a retry is due is abandoned.
pub const REQUESTS: [&str; 15] = [
    "S", "TS", "TTS", "TTTT", "OOS", "HS", "HHS", "hTS", "X", "D", "TTTTTT", "OOOO", "S", "T", "TS",
];

/// Requests per budget (each pattern three times).
const ROUNDS: usize = 3 * REQUESTS.len();

pub(crate) fn all(t: &mut Trace<'_>) {
    let policy = match RetryPolicy::new(black_box(RETRY)) {
        Ok(policy) => policy,
        Err(e) => return t.refused("retry", e),
    };
    for (name, config) in BUDGETS {
        match AnyBudget::<10>::from_config(black_box(config)) {
            Ok(mut budget) => requests(t, name, &policy, &mut budget),
            Err(e) => t.refused(name, e),
        }
    }
}

fn requests(t: &mut Trace<'_>, name: &str, policy: &RetryPolicy, budget: &mut AnyBudget<10>) {
    let mut now = Instant::from_secs(1);
    let mut x = 0x02E7_21E5;
    for (r, request) in REQUESTS.iter().cycle().take(ROUNDS).enumerate() {
        let mut state = policy.start(now, budget);
        let mut over = false;
        for (a, step) in request.bytes().enumerate() {
            let sent = now;
            t.s("retry ")
                .s(name)
                .kv("req", r as u64)
                .kv("attempt", a as u64 + 1);
            t.kv("at", sent.as_nanos()).s(" ").s(letter(step));
            let class = match step {
                b'T' => ErrorClass::Transient,
                b'O' => ErrorClass::Timeout,
                b'H' => ErrorClass::Throttled {
                    retry_after: Some(Duration::from_millis(1500)),
                },
                b'h' => ErrorClass::Throttled { retry_after: None },
                b'X' => ErrorClass::Fatal,
                b'D' => ErrorClass::DontRetry,
                _ => {
                    now = sent + Duration::from_millis(50);
                    policy.on_success(&mut state, now, budget);
                    t.s(" -> success").end();
                    over = true;
                    break;
                }
            };
            now = match class {
                ErrorClass::Timeout => policy.attempt_deadline(&state, sent),
                _ => sent + Duration::from_millis(50),
            };
            x = splitmix64(x);
            match policy.on_failure_with(&mut state, class, now, budget, x) {
                RetryDecision::RetryAt(at) => {
                    t.s(" -> retry-at ").n(at.as_nanos()).end();
                    now = at;
                }
                RetryDecision::GiveUp(reason) => {
                    t.s(" -> give-up ").s(reason.name());
                    if let GiveUpReason::Budget(denied) = reason {
                        t.s(" ").s(denied.name());
                    }
                    t.end();
                    over = true;
                    break;
                }
            }
        }
        if !over {
            policy.abandon(&mut state, now, budget);
            t.s("retry ")
                .s(name)
                .kv("req", r as u64)
                .kv("at", now.as_nanos());
            t.s(" abandoned").end();
        }
        now += Duration::from_millis(100);
    }
}

fn letter(step: u8) -> &'static str {
    match step {
        b'T' => "T",
        b'O' => "O",
        b'H' => "H",
        b'h' => "h",
        b'X' => "X",
        b'D' => "D",
        _ => "S",
    }
}

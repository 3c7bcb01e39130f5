//! Backoff, every budget kind, the retry policy and the throttle never allocate: 100,000 mixed
//! operations under a counting global allocator.
//!
//! Allocations are counted per thread (see `support/counting_alloc.rs`).

use rand_core::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use reliable_core::backoff::{BackoffConfig, BackoffPolicy, Jitter};
use reliable_core::budget::{
    AnyBudget, BudgetConfig, BudgetPolicy, ConcurrencyConfig, QuotaConfig, RatioConfig,
    RetryBreakerConfig, TokenBucketConfig,
};
use reliable_core::outcome::ErrorClass;
use reliable_core::retry::{GiveUpReason, RetryConfig, RetryDecision, RetryPolicy, RetryState};
use reliable_core::throttle::{AdaptiveThrottle, ThrottleConfig, ThrottlePolicy};
use reliable_core::{Duration, Instant};

#[path = "support/counting_alloc.rs"]
mod counting_alloc;
use counting_alloc::counted;

#[test]
fn the_counter_sees_allocations() {
    // Negative control: the counter is live, so a zero below means something.
    let (_, n) = counted(|| std::hint::black_box(vec![1u8; 16]));
    assert_eq!(n, 1);
}

#[derive(Default, Debug)]
struct Tally {
    retries: u64,
    denied: u64,
    gave_up: u64,
    successes: u64,
    throttled: u64,
    delays: u64,
}

#[test]
fn one_hundred_thousand_policy_operations_allocate_nothing() {
    let backoffs = [
        BackoffConfig::immediate(),
        BackoffConfig::reliablekit(),
        BackoffConfig::aws_2026(),
        BackoffConfig::brooker_2015(Jitter::Equal),
        BackoffConfig::brooker_2015(Jitter::Decorrelated),
    ]
    .map(|c| BackoffPolicy::new(c).unwrap());
    let budget_configs = [
        BudgetConfig::Unlimited,
        BudgetConfig::TokenBucket(TokenBucketConfig::grpc(10.0, 0.1)),
        BudgetConfig::TokenBucket(TokenBucketConfig::brooker_2022()),
        BudgetConfig::Ratio(RatioConfig::percent(0.1)),
        BudgetConfig::Quota(QuotaConfig::aws_2026()),
        BudgetConfig::Concurrency(ConcurrencyConfig::envoy()),
        BudgetConfig::RetryBreaker(RetryBreakerConfig::brooker_2022()),
        BudgetConfig::RetryBreaker(RetryBreakerConfig::yandex_2024()),
    ];
    let mut budgets: Vec<AnyBudget> = budget_configs
        .iter()
        .map(|c| AnyBudget::new(&BudgetPolicy::new(*c).unwrap()).unwrap())
        .collect();
    let retry_policies = [
        RetryConfig::reliablekit(),
        RetryConfig::aws_standard(),
        RetryConfig::aws_2026(),
        RetryConfig {
            max_attempts: None,
            deadline: Some(Duration::from_secs(20)),
            attempt_timeout: Some(Duration::from_secs(2)),
            ..RetryConfig::new(BackoffConfig::brooker_2015(Jitter::Decorrelated))
        },
    ]
    .map(|c| RetryPolicy::new(c).unwrap());
    let mut throttle: AdaptiveThrottle =
        AdaptiveThrottle::new(ThrottlePolicy::new(ThrottleConfig::google_sre()).unwrap()).unwrap();
    // In-flight requests: (which budget, which policy, state), 32 slots per budget.
    let mut slots: Vec<Option<(usize, usize, RetryState)>> = (0..256).map(|_| None).collect();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(2026);

    let (tally, allocations) = counted(|| {
        let mut t = Tally::default();
        let mut now = Instant::from_secs(1);
        let mut seqs = backoffs.each_ref().map(|b| b.backoff());
        for i in 0..100_000u64 {
            let x = rng.next_u64();
            now += Duration::from_micros(x % 50_000);
            if x % 997 == 0 {
                now = now - Duration::from_secs(3); // a clock that steps back
            }
            match (x >> 8) % 8 {
                // Backoff on its own.
                0 => {
                    let seq = &mut seqs[(i % 5) as usize];
                    if seq.retries() > 12 {
                        seq.reset();
                    }
                    t.delays += seq.next_delay(&mut rng).as_nanos() % 2;
                }
                // The throttle.
                1 => match throttle.try_acquire(now, &mut rng) {
                    // Healthy for the first half, then the downstream accepts only a quarter.
                    Ok(()) => throttle.record(
                        now,
                        if i < 50_000 {
                            x >> 20 & 3 != 0
                        } else {
                            x >> 20 & 3 == 0
                        },
                    ),
                    Err(_) => t.throttled += 1,
                },
                // Requests through the retry policy and a budget.
                _ => {
                    let slot = &mut slots[(x >> 16) as usize % 256];
                    match slot.take() {
                        None => {
                            let b = (x >> 24) as usize % budgets.len();
                            let p = (x >> 32) as usize % retry_policies.len();
                            let state = retry_policies[p].start(now, &mut budgets[b]);
                            *slot = Some((b, p, state));
                        }
                        Some((b, p, mut state)) => {
                            let (policy, budget) = (&retry_policies[p], &mut budgets[b]);
                            let class = match x >> 40 & 15 {
                                0 => ErrorClass::Fatal,
                                1 => ErrorClass::DontRetry,
                                2 | 3 => ErrorClass::Timeout,
                                4 => ErrorClass::Throttled {
                                    retry_after: Some(Duration::from_millis(x >> 48)),
                                },
                                5..=9 => ErrorClass::Transient,
                                10 => {
                                    policy.abandon(&mut state, now, budget);
                                    continue;
                                }
                                _ => {
                                    policy.on_success(&mut state, now, budget);
                                    t.successes += 1;
                                    continue;
                                }
                            };
                            match policy.on_failure(&mut state, class, now, budget, &mut rng) {
                                RetryDecision::RetryAt(_) => {
                                    t.retries += 1;
                                    *slot = Some((b, p, state));
                                }
                                RetryDecision::GiveUp(GiveUpReason::Budget(_)) => t.denied += 1,
                                RetryDecision::GiveUp(_) => t.gave_up += 1,
                            }
                        }
                    }
                }
            }
        }
        // Finish what is left, so every budget sees its request ends.
        for (b, p, mut state) in slots.iter_mut().filter_map(Option::take) {
            retry_policies[p].abandon(&mut state, now, &mut budgets[b]);
        }
        t
    });
    assert_eq!(allocations, 0, "{tally:?}");
    // The loop really exercised everything.
    assert!(
        tally.retries > 5_000
            && tally.denied > 500
            && tally.gave_up > 5_000
            && tally.successes > 5_000
            && tally.throttled > 100
            && tally.delays > 1_000,
        "{tally:?}"
    );
    // Every concurrency budget is back to nothing in flight.
    for b in &budgets {
        if let AnyBudget::Concurrency(c) = b {
            assert_eq!((c.requests_in_flight(), c.retries_in_flight()), (0, 0));
        }
    }
}

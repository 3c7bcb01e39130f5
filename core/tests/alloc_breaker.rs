//! The breakers never allocate: 100,000 mixed operations on `CircuitBreaker`s and on
//! `SharedBreaker`s under a counting global allocator.
//!
//! Allocations are counted per thread (see `support/counting_alloc.rs`).

use std::cell::Cell;

use reliable_core::breaker::{
    AnyWindow, AtomicAnyWindow, Breaker, BreakerConfig, BreakerPolicy, CircuitBreaker,
    HalfOpenConfig, OpenConfig, Outcome, Permit, SharedBreaker, SlowStartConfig, Transition,
    WindowConfig,
};
use reliable_core::sample::splitmix64;
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

thread_local! {
    /// Transitions this thread's breakers reported to their observer.
    static TRANSITIONS: Cell<u64> = const { Cell::new(0) };
}

/// The observer of the breakers under test: counts, so the test can check the loop changed states.
fn count(_: Transition) {
    TRANSITIONS.with(|n| n.set(n.get() + 1));
}

fn configs() -> [BreakerConfig; 4] {
    [
        BreakerConfig::reliablekit(),
        BreakerConfig::layered_exercise(),
        BreakerConfig::resilience4j(),
        BreakerConfig {
            failure_rate: Some(0.3),
            minimum_calls: 5,
            window: WindowConfig::Time {
                span: Duration::from_secs(10),
                buckets: 10,
            },
            open: OpenConfig {
                duration: Duration::from_secs(1),
                growth: 2.0,
                max: Some(Duration::from_secs(30)),
                jitter: 0.2,
                strictly_after: false,
            },
            half_open: HalfOpenConfig {
                max_in_flight: Some(3),
                ..HalfOpenConfig::default()
            },
            slow_start: Some(SlowStartConfig {
                ramp: Duration::from_secs(5),
                initial: 0.2,
            }),
            ..BreakerConfig::new()
        },
    ]
}

/// 100,000 mixed operations on four breakers; asserts that none allocated and that the loop
/// really exercised them.
fn mixed_operations_allocate_nothing(breakers: &mut [impl Breaker; 4]) {
    let mut permits: [Option<Permit>; 64] = [const { None }; 64];
    let ((admitted, transitions), allocations) = counted(|| {
        let mut now = Instant::ZERO;
        let mut x = 42u64;
        let mut admitted = 0u64;
        let before = TRANSITIONS.with(Cell::get);
        for i in 0..100_000u64 {
            x = splitmix64(x);
            let b = &mut breakers[(i % 4) as usize];
            now += Duration::from_millis(x % 300);
            let slot = (x >> 8) as usize % permits.len();
            match x >> 60 {
                0..=8 => {
                    if let Ok(p) = b.try_acquire(now) {
                        admitted += 1;
                        permits[slot] = Some(p);
                    }
                }
                9..=13 => {
                    if let Some(p) = permits[slot].take() {
                        let outcome = if x & 3 == 0 {
                            Outcome::Success
                        } else {
                            Outcome::Failure
                        };
                        b.record(p, outcome, now);
                    }
                }
                14 => now = now - Duration::from_secs(5),
                _ => match x & 7 {
                    0 => b.force_open(now),
                    1 => b.disable(now),
                    _ => b.reset(now),
                },
            }
        }
        (admitted, TRANSITIONS.with(Cell::get) - before)
    });
    assert_eq!(allocations, 0);
    assert!(
        admitted > 10_000 && transitions > 1_000,
        "admitted {admitted}, transitions {transitions}"
    );
}

#[test]
fn one_hundred_thousand_breaker_operations_allocate_nothing() {
    // Each breaker owns its policy.
    let mut seed = 0;
    let mut breakers = configs().map(|c| {
        seed += 1;
        CircuitBreaker::<_, AnyWindow<128, 16, 2>, 16>::with_storage(BreakerPolicy::new(c).unwrap())
            .unwrap()
            .with_seed(seed)
            .observe(count)
    });
    mixed_operations_allocate_nothing(&mut breakers);
}

#[test]
fn one_hundred_thousand_shared_breaker_operations_allocate_nothing() {
    // The breakers share their policies by reference.
    let policies = configs().map(|c| BreakerPolicy::new(c).unwrap());
    let mut seed = 0;
    let breakers = policies.each_ref().map(|p| {
        seed += 1;
        SharedBreaker::<_, AtomicAnyWindow<128, 16, 2>, 16>::with_storage(p)
            .unwrap()
            .with_seed(seed)
            .observe(count)
    });
    // Driven through `Breaker` for `&SharedBreaker`.
    mixed_operations_allocate_nothing(&mut breakers.each_ref());
}

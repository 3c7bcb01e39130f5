//! The spend breaker never allocates: 100,000 mixed operations (reserve, settle, cancel, provider
//! quota reports, money signals, resets) over months of virtual time, under a counting allocator.

use rand_core::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use reliable_core::provider::{QuotaKind, QuotaUpdate};
use reliable_core::spend::{
    Ceiling, Price, Reservation, SpendBreaker, SpendConfig, SpendPolicy, Tokens,
};
use reliable_core::{Duration, Instant};

#[path = "support/counting_alloc.rs"]
mod counting_alloc;
use counting_alloc::counted;

#[test]
fn the_counter_sees_allocations() {
    let (_, n) = counted(|| std::hint::black_box(vec![1u8; 16]));
    assert_eq!(n, 1);
}

#[test]
fn one_hundred_thousand_spend_operations_allocate_nothing() {
    let policy = SpendPolicy::new(SpendConfig {
        price: Price::per_million_tokens(3_000_000, 15_000_000),
        minute: Some(Ceiling::tokens(200_000)),
        day: Some(Ceiling::cost(20_000_000).with_buckets(24)),
        month: Some(Ceiling {
            tokens: Some(2_000_000_000),
            cost: Some(300_000_000),
            buckets: 30,
        }),
        ..SpendConfig::new()
    })
    .unwrap();
    let mut breaker: SpendBreaker<&SpendPolicy> = SpendBreaker::new(&policy).unwrap();
    // Room for the reservations in flight, made before counting.
    let mut held: Vec<Reservation> = Vec::with_capacity(64);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
    let mut now = Instant::ZERO;
    let (mut admitted, mut refused, mut transitions) = (0u64, 0u64, 0u64);
    let ((), allocations) = counted(|| {
        for _ in 0..100_000 {
            now += Duration::from_millis(rng.next_u64() % 2_000);
            let x = rng.next_u64();
            let tokens = Tokens {
                input: x % 8_000,
                output: (x >> 20) % 4_000,
            };
            match x >> 60 {
                0..=7 if held.len() < 64 => match breaker.reserve(now, tokens) {
                    Ok(r) => {
                        admitted += 1;
                        transitions += u64::from(r.transition().is_some());
                        held.push(r);
                    }
                    Err(no) => {
                        refused += 1;
                        transitions += u64::from(no.transition.is_some());
                    }
                },
                0..=11 if !held.is_empty() => {
                    let r = held.swap_remove((x as usize >> 8) % held.len());
                    let s = breaker.settle(now, r, tokens);
                    transitions += u64::from(s.transition.is_some());
                }
                12 if !held.is_empty() => {
                    let r = held.swap_remove(0);
                    let _ = breaker.cancel(now, r, (x & 1 == 0).then_some(tokens));
                }
                13 => {
                    let kind = QuotaKind::ALL[(x >> 8) as usize % 4];
                    let update = QuotaUpdate {
                        kind,
                        limit: Some(100_000),
                        remaining: (x >> 12) % 100_000,
                        reset: now + Duration::from_secs(x % 60),
                    };
                    transitions += u64::from(breaker.observe(now, update).is_some());
                }
                14 if x % 64 == 0 => {
                    let _ = breaker.money_signal(now, Some(Duration::from_secs(x % 600)));
                }
                15 => {
                    let _ = breaker.reset(now);
                }
                _ => now += Duration::from_secs(3_600),
            }
        }
    });
    assert_eq!(allocations, 0);
    // The run exercised both answers and state changes, so the zero above covers them.
    assert!(
        admitted > 1_000 && refused > 1_000 && transitions > 100,
        "{admitted} {refused} {transitions}"
    );
}

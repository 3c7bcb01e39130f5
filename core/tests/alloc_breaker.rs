//! The breakers never allocate: 100,000 mixed operations on `CircuitBreaker`s and on
//! `SharedBreaker`s under a counting global allocator.
//!
//! Allocations are counted per thread (see `support/counting_alloc.rs`).

use reliable_core::breaker::{
    AnyWindow, AtomicAnyWindow, AtomicWindow, BreakerConfig, BreakerPolicy, CircuitBreaker,
    HalfOpenConfig, OpenConfig, Outcome, Permit, Rejection, SharedBreaker, SlowStartConfig,
    Transition, Window, WindowConfig,
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

/// The operations the loop makes, for either breaker.
trait Ops {
    fn try_acquire(&mut self, now: Instant) -> Result<Permit, Rejection>;
    fn record(&mut self, permit: Permit, outcome: Outcome, now: Instant) -> Option<Transition>;
    fn force_open(&mut self, now: Instant) -> Option<Transition>;
    fn disable(&mut self, now: Instant) -> Option<Transition>;
    fn reset(&mut self, now: Instant) -> Option<Transition>;
}

impl<W: Window, const P: usize> Ops for CircuitBreaker<'_, W, P> {
    fn try_acquire(&mut self, now: Instant) -> Result<Permit, Rejection> {
        CircuitBreaker::try_acquire(self, now)
    }
    fn record(&mut self, permit: Permit, outcome: Outcome, now: Instant) -> Option<Transition> {
        CircuitBreaker::record(self, permit, outcome, now)
    }
    fn force_open(&mut self, now: Instant) -> Option<Transition> {
        CircuitBreaker::force_open(self, now)
    }
    fn disable(&mut self, now: Instant) -> Option<Transition> {
        CircuitBreaker::disable(self, now)
    }
    fn reset(&mut self, now: Instant) -> Option<Transition> {
        CircuitBreaker::reset(self, now)
    }
}

impl<W: AtomicWindow, const P: usize> Ops for SharedBreaker<'_, W, P> {
    fn try_acquire(&mut self, now: Instant) -> Result<Permit, Rejection> {
        SharedBreaker::try_acquire(self, now)
    }
    fn record(&mut self, permit: Permit, outcome: Outcome, now: Instant) -> Option<Transition> {
        SharedBreaker::record(self, permit, outcome, now)
    }
    fn force_open(&mut self, now: Instant) -> Option<Transition> {
        SharedBreaker::force_open(self, now)
    }
    fn disable(&mut self, now: Instant) -> Option<Transition> {
        SharedBreaker::disable(self, now)
    }
    fn reset(&mut self, now: Instant) -> Option<Transition> {
        SharedBreaker::reset(self, now)
    }
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
fn mixed_operations_allocate_nothing(breakers: &mut [impl Ops; 4]) {
    let mut permits: [Option<Permit>; 64] = [const { None }; 64];
    let ((admitted, transitions), allocations) = counted(|| {
        let mut now = Instant::ZERO;
        let mut x = 42u64;
        let (mut admitted, mut transitions) = (0u64, 0u64);
        for i in 0..100_000u64 {
            x = splitmix64(x);
            let b = &mut breakers[(i % 4) as usize];
            now += Duration::from_millis(x % 300);
            let slot = (x >> 8) as usize % permits.len();
            match x >> 60 {
                0..=8 => {
                    if let Ok(p) = b.try_acquire(now) {
                        admitted += 1;
                        transitions += u64::from(p.transition().is_some());
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
                        transitions += u64::from(b.record(p, outcome, now).is_some());
                    }
                }
                14 => now = now - Duration::from_secs(5),
                _ => match x & 7 {
                    0 => transitions += u64::from(b.force_open(now).is_some()),
                    1 => transitions += u64::from(b.disable(now).is_some()),
                    _ => transitions += u64::from(b.reset(now).is_some()),
                },
            }
        }
        (admitted, transitions)
    });
    assert_eq!(allocations, 0);
    assert!(
        admitted > 10_000 && transitions > 1_000,
        "admitted {admitted}, transitions {transitions}"
    );
}

#[test]
fn one_hundred_thousand_breaker_operations_allocate_nothing() {
    let policies = configs().map(|c| BreakerPolicy::new(c).unwrap());
    let mut seed = 0;
    let mut breakers = policies.each_ref().map(|p| {
        seed += 1;
        CircuitBreaker::<'_, AnyWindow<2, 16>, 16>::new(p)
            .unwrap()
            .with_seed(seed)
    });
    mixed_operations_allocate_nothing(&mut breakers);
}

#[test]
fn one_hundred_thousand_shared_breaker_operations_allocate_nothing() {
    let policies = configs().map(|c| BreakerPolicy::new(c).unwrap());
    let mut seed = 0;
    let mut breakers = policies.each_ref().map(|p| {
        seed += 1;
        SharedBreaker::<'_, AtomicAnyWindow<2, 16>, 16>::new(p)
            .unwrap()
            .with_seed(seed)
    });
    mixed_operations_allocate_nothing(&mut breakers);
}

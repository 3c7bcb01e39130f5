//! The breaker never allocates: 100,000 mixed operations under a counting global allocator.
//!
//! Counts are kept per thread, so tests running in parallel (and the harness's own threads) cannot
//! disturb each other's figures.
// A `GlobalAlloc` impl is unsafe by definition; this test file is the only place it is allowed.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use reliable_core::breaker::{
    AnyWindow, BreakerConfig, BreakerPolicy, CircuitBreaker, HalfOpenConfig, OpenConfig, Outcome,
    Permit, SlowStartConfig, WindowConfig,
};
use reliable_core::sample::splitmix64;
use reliable_core::{Duration, Instant};

struct Counting;
thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // `try_with`: the slot may be gone while the thread is being torn down.
        let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn counted<R>(f: impl FnOnce() -> R) -> (R, u64) {
    let before = ALLOCATIONS.with(Cell::get);
    let r = f();
    (r, ALLOCATIONS.with(Cell::get) - before)
}

#[test]
fn the_counter_sees_allocations() {
    // Negative control: the counter is live, so a zero below means something.
    let (_, n) = counted(|| std::hint::black_box(vec![1u8; 16]));
    assert_eq!(n, 1);
}

#[test]
fn one_hundred_thousand_breaker_operations_allocate_nothing() {
    let configs = [
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
    ];
    let policies = configs.map(|c| BreakerPolicy::new(c).unwrap());
    let mut breakers: Vec<CircuitBreaker<'_, AnyWindow<2, 16>, 16>> = policies
        .iter()
        .enumerate()
        .map(|(i, p)| CircuitBreaker::new(p).unwrap().with_seed(i as u64))
        .collect();
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
    // The loop really exercised the breakers.
    assert!(
        admitted > 10_000 && transitions > 1_000,
        "admitted {admitted}, transitions {transitions}"
    );
}

//! Adaptive throttling (Google SRE): the decision for one request and the record of its answer,
//! with the random draw inside (from a `SplitMix64` generator). No peer crate offers it.

use std::hint::black_box;

use criterion::Criterion;
use rand_xoshiro::SplitMix64;
use rand_xoshiro::rand_core::SeedableRng;
use reliable_core::throttle::{AdaptiveThrottle, ThrottleConfig, ThrottlePolicy};
use reliable_core::{Duration, Instant};

const STEP: Duration = Duration::from_nanos(25);

pub fn decide_and_record(c: &mut Criterion) {
    let mut g = c.benchmark_group("throttle_decide_record");
    let policy = ThrottlePolicy::new(ThrottleConfig::google_sre()).expect("valid");
    let mut throttle = AdaptiveThrottle::<12>::new(policy).expect("fits");
    let mut rng = SplitMix64::seed_from_u64(7);
    let mut now = Instant::from_secs(1);
    let mut i = 0u32;
    g.bench_function("reliable_adaptive", |bench| {
        bench.iter(|| {
            now += black_box(STEP);
            // The downstream accepts 1 request in 3: the throttle rejects about a third locally.
            i = i.wrapping_add(1);
            let t = black_box(&mut throttle);
            if t.try_acquire(black_box(now), &mut rng).is_ok() {
                t.record(now, black_box(i.is_multiple_of(3)));
            }
        })
    });
    g.finish();
}

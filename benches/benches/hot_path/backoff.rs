//! Backoff: the next delay of a request's retry sequence, for each jitter kind.
//!
//! Both sides compute exponential delays (100 ms base, factor 2, 10 s cap) over a request of 8
//! retries: each iteration is one delay, and every 8th starts a new sequence (ours: `reset`;
//! backon: `build` from its builder, as a new request would). Both draw their randomness inside
//! the call: ours from a `SplitMix64` generator passed in, backon from its own `fastrand`
//! generator. backon's only jitter adds `U[0, d)` to `d` (in `f32`).

use std::hint::black_box;
use std::time::Duration as StdDuration;

use backon::{BackoffBuilder, ExponentialBuilder};
use criterion::Criterion;
use rand_xoshiro::SplitMix64;
use rand_xoshiro::rand_core::SeedableRng;
use reliable_core::Duration;
use reliable_core::backoff::{BackoffConfig, BackoffPolicy, Jitter};

const RETRIES: u32 = 8;

pub fn next_delay(c: &mut Criterion) {
    let mut g = c.benchmark_group("backoff_next_delay");
    let jitters = [
        ("reliable_none", Jitter::None),
        ("reliable_full", Jitter::Full),
        ("reliable_equal", Jitter::Equal),
        ("reliable_decorrelated", Jitter::Decorrelated),
        (
            "reliable_proportional",
            Jitter::Proportional { fraction: 0.1 },
        ),
    ];
    for (name, jitter) in jitters {
        let policy = BackoffPolicy::new(BackoffConfig::exponential(
            Duration::from_millis(100),
            2.0,
            Duration::from_secs(10),
            jitter,
        ))
        .expect("valid");
        let mut rng = SplitMix64::seed_from_u64(42);
        let mut backoff = policy.backoff();
        g.bench_function(name, |b| {
            b.iter(|| {
                if backoff.retries() == black_box(RETRIES) {
                    backoff.reset();
                }
                black_box(backoff.next_delay(&mut rng))
            })
        });
    }
    for (name, jitter) in [("backon_none", false), ("backon_jitter", true)] {
        let mut builder = ExponentialBuilder::new()
            .with_min_delay(StdDuration::from_millis(100))
            .with_factor(2.0)
            .with_max_delay(StdDuration::from_secs(10))
            .with_max_times(RETRIES as usize)
            .with_jitter_seed(42);
        if jitter {
            builder = builder.with_jitter();
        }
        let mut backoff = builder.build();
        g.bench_function(name, |b| {
            b.iter(|| match backoff.next() {
                Some(d) => black_box(d),
                None => {
                    backoff = black_box(builder).build();
                    black_box(backoff.next().unwrap_or_default())
                }
            })
        });
    }
    g.finish();
}

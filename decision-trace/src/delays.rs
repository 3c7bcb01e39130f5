//! The backoff part of the script: every jitter over an exponential shape, plus linear, constant
//! and a shape that overflows, each asked for delays from raw samples (the extremes included).

use core::hint::black_box;

use reliable_core::Duration;
use reliable_core::backoff::{BackoffConfig, BackoffPolicy, Jitter, Shape};
use reliable_core::sample::splitmix64;

use crate::Trace;

const fn exponential(jitter: Jitter) -> BackoffConfig {
    BackoffConfig::exponential(
        Duration::from_millis(100),
        2.0,
        Duration::from_secs(5),
        jitter,
    )
}

/// The policies, by name.
pub const BACKOFFS: [(&str, BackoffConfig); 8] = [
    ("exponential-none", exponential(Jitter::None)),
    ("exponential-full", exponential(Jitter::Full)),
    ("exponential-equal", exponential(Jitter::Equal)),
    (
        "exponential-decorrelated",
        exponential(Jitter::Decorrelated),
    ),
    (
        "exponential-proportional",
        exponential(Jitter::Proportional { fraction: 0.2 }),
    ),
    (
        "linear-full",
        BackoffConfig {
            shape: Shape::Linear {
                base: Duration::from_millis(50),
                step: Duration::from_millis(100),
            },
            cap: Some(Duration::from_secs(1)),
            jitter: Jitter::Full,
            first_exponent: 0,
        },
    ),
    (
        "constant-equal",
        BackoffConfig {
            jitter: Jitter::Equal,
            ..BackoffConfig::constant(Duration::from_millis(300))
        },
    ),
    (
        "overflowing-full",
        BackoffConfig {
            first_exponent: 1,
            ..BackoffConfig::exponential(Duration::from_secs(1), 10.0, Duration::MAX, Jitter::Full)
        },
    ),
];

/// The retry numbers asked for: the first dozen, then far out where shapes overflow.
const RETRIES: [u32; 16] = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 40, 70, 200, u32::MAX];

pub(crate) fn all(t: &mut Trace<'_>) {
    for (name, config) in BACKOFFS {
        // Validated at run time: the factor and fraction go through the target's f64 code.
        let policy = match BackoffPolicy::new(black_box(config)) {
            Ok(policy) => policy,
            Err(e) => {
                t.refused(name, e);
                continue;
            }
        };
        let mut prev = Duration::ZERO;
        let mut x = 0x0BAC_0FF5;
        for (i, retry) in RETRIES.into_iter().enumerate() {
            x = splitmix64(x);
            // The extremes of the sample range, then ordinary draws.
            let sample = match i {
                0 => 0,
                1 => u64::MAX,
                _ => x,
            };
            let delay = policy.delay(retry, prev, sample);
            t.s("backoff ").s(name).kv("retry", u64::from(retry));
            t.kv("prev", prev.as_nanos()).kv("sample", sample);
            t.kv("delay", delay.as_nanos()).end();
            prev = delay;
        }
    }
}

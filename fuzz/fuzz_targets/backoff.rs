//! Fuzzes backoff: arbitrary shapes, caps and jitter kinds, and arbitrary random samples; every
//! delay must lie within its documented bounds and never above the cap.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use reliable_core::Duration;
use reliable_core::backoff::{BackoffConfig, BackoffPolicy, Jitter, Shape};

#[derive(Arbitrary, Debug)]
struct Input {
    shape: u8,
    base: u64,
    step_or_factor: u32,
    cap: Option<u64>,
    jitter: u8,
    fraction: u32,
    first_exponent: u8,
    samples: Vec<u64>,
}

fuzz_target!(|i: Input| {
    let base = Duration::from_nanos(i.base);
    let config = BackoffConfig {
        shape: match i.shape % 3 {
            0 => Shape::Constant { delay: base },
            1 => Shape::Linear {
                base,
                step: Duration::from_nanos(u64::from(i.step_or_factor)),
            },
            _ => Shape::Exponential {
                base,
                factor: 1.0 + f64::from(i.step_or_factor) / 65_536.0,
            },
        },
        cap: i.cap.map(Duration::from_nanos),
        jitter: match i.jitter % 5 {
            0 => Jitter::None,
            1 => Jitter::Full,
            2 => Jitter::Equal,
            3 => Jitter::Decorrelated,
            _ => Jitter::Proportional {
                fraction: f64::from(i.fraction) / f64::from(u32::MAX),
            },
        },
        first_exponent: u32::from(i.first_exponent),
    };
    let Ok(policy) = BackoffPolicy::new(config) else {
        return;
    };
    let decorrelated = matches!(config.jitter, Jitter::Decorrelated);
    let mut backoff = policy.backoff();
    let mut prev = Duration::ZERO;
    for (k, &sample) in i.samples.iter().take(10_000).enumerate() {
        let retry = k as u32 + 1;
        let (lo, hi) = policy.bounds(retry, prev);
        let d = backoff.next_delay_with(sample);
        assert!(
            d <= policy.cap(),
            "delay {d} above the cap {}",
            policy.cap()
        );
        assert!(
            lo <= d && d <= hi,
            "retry {retry}: {d} outside [{lo}, {hi}]"
        );
        if decorrelated {
            let start = if prev.is_zero() { policy.base() } else { prev };
            assert!(
                d >= policy.base().min(policy.cap())
                    && d <= start
                        .saturating_mul(3)
                        .min(policy.cap())
                        .max(policy.base().min(policy.cap()))
            );
        } else {
            assert!(d <= policy.delay_before_jitter(retry).max(hi));
        }
        // The pure form gives the same delay for the same inputs.
        assert_eq!(policy.delay(retry, prev, sample), d);
        prev = d;
    }
    // Extreme attempt numbers neither panic nor pass the cap.
    for retry in [0, 1, 64, 1_000_000_000, u32::MAX] {
        assert!(policy.delay(retry, prev, u64::MAX) <= policy.cap());
    }
});

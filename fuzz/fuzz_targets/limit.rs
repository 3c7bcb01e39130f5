//! Fuzzes the concurrency limiter (bulkhead, AIMD, gradient) and the rate limiter: arbitrary
//! configs and histories (acquires, releases with every completion in any order, time steps
//! forwards, backwards and huge), checking that the limit stays within its bounds, calls in flight
//! never pass the limit they were admitted under, and the rate limiter's refusals are exact.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use reliable_core::limit::{
    Completion, LimitPermit, LimitRule, Limiter, LimiterConfig, LimiterPolicy, RateConfig,
    RateLimiter, RatePolicy,
};
use reliable_core::{Duration, Instant};

#[derive(Arbitrary, Debug)]
enum RawRule {
    Fixed,
    Aimd {
        backoff: u32,
        increase: u8,
    },
    Gradient {
        tolerance: u16,
        smoothing: u32,
        long_window: u16,
        queue: u8,
    },
}

#[derive(Arbitrary, Debug)]
enum Op {
    Acquire,
    Release { pick: u8, completion: u8 },
    Rate,
    Step(u32),
    Back(u32),
    Huge(u64),
}

fuzz_target!(|input: (RawRule, u16, u16, u16, (u8, u16, u8), Vec<Op>)| {
    let (raw, initial, min, max, (rate, period_ms, burst), ops) = input;
    let rule = match raw {
        RawRule::Fixed => LimitRule::Fixed,
        RawRule::Aimd { backoff, increase } => LimitRule::Aimd {
            backoff: f64::from(backoff) / f64::from(u32::MAX),
            increase: u32::from(increase),
        },
        RawRule::Gradient {
            tolerance,
            smoothing,
            long_window,
            queue,
        } => LimitRule::Gradient {
            tolerance: 1.0 + f64::from(tolerance) / 100.0,
            smoothing: f64::from(smoothing) / f64::from(u32::MAX),
            long_window: u32::from(long_window),
            queue: u32::from(queue),
        },
    };
    let config = LimiterConfig {
        rule,
        initial: u32::from(initial),
        min: u32::from(min),
        max: u32::from(max),
    };
    let rate_config = RateConfig {
        rate: u32::from(rate),
        period: Duration::from_millis(u64::from(period_ms)),
        burst: u32::from(burst),
    };
    let mut rate_limiter = RatePolicy::new(rate_config).ok().map(RateLimiter::new);
    let Ok(policy) = LimiterPolicy::new(config) else {
        return;
    };
    let mut limiter = Limiter::new(policy);
    let mut permits: Vec<LimitPermit> = Vec::new();
    let mut clock = 0u64;
    for op in ops.iter().take(5_000) {
        let now = Instant::from_nanos(clock);
        match *op {
            Op::Acquire => {
                let (limit, before) = (limiter.limit(), limiter.in_flight());
                match limiter.try_acquire(now) {
                    Ok(p) => {
                        assert!(before < limit);
                        permits.push(p);
                    }
                    Err(r) => assert!(before >= limit && r.limit == limit),
                }
            }
            Op::Release { pick, completion } => {
                if !permits.is_empty() {
                    let p = permits.swap_remove(usize::from(pick) % permits.len());
                    let completion = match completion % 3 {
                        0 => Completion::Success,
                        1 => Completion::Dropped,
                        _ => Completion::Ignored,
                    };
                    limiter.release(p, completion, now);
                }
            }
            Op::Rate => {
                if let Some(r) = rate_limiter.as_mut() {
                    if let Err(refused) = r.try_acquire(now) {
                        assert!(refused.retry_after > Duration::ZERO);
                        let mut later = r.clone();
                        assert!(later.try_acquire(now + refused.retry_after).is_ok());
                    }
                }
            }
            Op::Step(ns) => clock = clock.saturating_add(u64::from(ns)),
            Op::Back(ns) => clock = clock.saturating_sub(u64::from(ns)),
            Op::Huge(n) => clock = clock.saturating_add(n),
        }
        assert!(config.min <= limiter.limit() && limiter.limit() <= config.max);
        assert_eq!(limiter.in_flight() as usize, permits.len());
        if rule == LimitRule::Fixed {
            assert_eq!(limiter.limit(), config.initial);
        }
    }
});

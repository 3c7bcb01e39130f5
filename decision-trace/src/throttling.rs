//! The adaptive-throttle part of the script: requests 50 ms apart to a downstream that accepts
//! for two seconds, then rejects for two, over and over; the throttle sheds locally in
//! proportion (its arithmetic is 64- and 128-bit integer work, the part a 32-bit core does
//! through compiler-builtins).

use core::hint::black_box;

use reliable_core::sample::splitmix64;
use reliable_core::throttle::{AdaptiveThrottle, ThrottleConfig, ThrottlePolicy};
use reliable_core::{Duration, Instant};

use crate::Trace;

/// `K = 1.5` over 10 s in 5 slots, shedding at most 90%.
pub const THROTTLE: ThrottleConfig = ThrottleConfig {
    k: 1.5,
    window: Duration::from_secs(10),
    buckets: 5,
    max_rejection: Some(0.9),
};

const REQUESTS: u64 = 240;

pub(crate) fn all(t: &mut Trace<'_>) {
    // Validated at run time: K and the cap go through the target's f64 code.
    let throttle = ThrottlePolicy::new(black_box(THROTTLE)).and_then(AdaptiveThrottle::<8>::new);
    let mut throttle = match throttle {
        Ok(throttle) => throttle,
        Err(e) => return t.refused("throttle", e),
    };
    let mut x = 0x7412_0771;
    for i in 0..REQUESTS {
        let now = Instant::from_millis(1_000 + 50 * i);
        let accepting = (i / 40) % 2 == 0;
        x = splitmix64(x);
        t.s("throttle").kv("i", i).kv("t", now.as_nanos());
        match throttle.try_acquire_with(now, x) {
            Ok(()) => {
                throttle.record(now + Duration::from_millis(10), accepting);
                t.s(if accepting {
                    " sent accepted"
                } else {
                    " sent rejected"
                });
            }
            Err(shed) => {
                t.s(" shed").kv("p_ppm", u64::from(shed.probability_ppm));
            }
        }
        let (requests, accepts) = throttle.counts(now);
        t.kv("requests", requests).kv("accepts", accepts).end();
    }
}

use super::*;
use proptest::prelude::*;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn policy(config: BackoffConfig) -> BackoffPolicy {
    BackoffPolicy::new(config).unwrap()
}

fn err(config: BackoffConfig) -> ConfigError {
    BackoffPolicy::new(config).unwrap_err()
}

const MID: u64 = 1 << 63;

#[test]
fn shapes_follow_their_formulas() {
    let constant = policy(BackoffConfig::constant(ms(250)));
    assert_eq!(constant.cap(), ms(250));
    for k in [0, 1, 2, 1_000_000_000, u32::MAX] {
        assert_eq!(constant.delay_before_jitter(k), ms(250));
    }
    let linear = policy(BackoffConfig {
        shape: Shape::Linear {
            base: ms(100),
            step: ms(50),
        },
        cap: Some(ms(300)),
        ..BackoffConfig::immediate()
    });
    let seq: [u64; 6] =
        core::array::from_fn(|i| linear.delay_before_jitter(i as u32 + 1).as_millis());
    assert_eq!(seq, [100, 150, 200, 250, 300, 300]);
    let expo = policy(BackoffConfig::exponential(
        ms(10),
        3.0,
        ms(1_000),
        Jitter::None,
    ));
    let seq: [u64; 6] =
        core::array::from_fn(|i| expo.delay_before_jitter(i as u32 + 1).as_millis());
    assert_eq!(seq, [10, 30, 90, 270, 810, 1_000]);
    // `0` counts as the first retry.
    assert_eq!(expo.delay_before_jitter(0), ms(10));
    // A fractional factor, exact in binary.
    let slow = policy(BackoffConfig::exponential(
        ms(100),
        1.5,
        ms(10_000),
        Jitter::None,
    ));
    assert_eq!(slow.delay_before_jitter(3), ms(225));
}

#[test]
fn first_exponent_shifts_the_sequence() {
    // Brooker 2015: expo(k) = min(cap, base * 2^k) after the k-th failure.
    let brooker = policy(BackoffConfig::brooker_2015(Jitter::None));
    for k in 1..=8u32 {
        assert_eq!(brooker.delay_before_jitter(k), ms(5 << k), "k = {k}");
    }
    assert_eq!(brooker.delay_before_jitter(9), ms(2_000));
    // The metastable-collapse case: before retry k = 1, 2 wait U[0, 10 s * 2^k].
    let collapse = policy(BackoffConfig {
        first_exponent: 1,
        ..BackoffConfig::exponential(
            Duration::from_secs(10),
            2.0,
            Duration::from_secs(40),
            Jitter::Full,
        )
    });
    assert_eq!(
        collapse.bounds(1, Duration::ZERO),
        (Duration::ZERO, Duration::from_secs(20))
    );
    assert_eq!(
        collapse.bounds(2, Duration::ZERO),
        (Duration::ZERO, Duration::from_secs(40))
    );
    assert_eq!(
        collapse.delay(2, Duration::ZERO, u64::MAX),
        Duration::from_secs(40)
    );
}

#[test]
fn jitters_follow_their_formulas_with_pinned_samples() {
    let with = |jitter| policy(BackoffConfig::exponential(ms(100), 2.0, ms(1_000), jitter));
    // Retry 3: d = 400 ms.
    let none = with(Jitter::None);
    assert_eq!(
        [0, MID, u64::MAX].map(|s| none.delay(3, Duration::ZERO, s)),
        [ms(400); 3]
    );
    assert!(!none.is_random());
    let full = with(Jitter::Full);
    assert_eq!(full.delay(3, Duration::ZERO, 0), Duration::ZERO);
    assert_eq!(full.delay(3, Duration::ZERO, MID), ms(200));
    assert_eq!(full.delay(3, Duration::ZERO, u64::MAX), ms(400));
    let equal = with(Jitter::Equal);
    assert_eq!(equal.delay(3, Duration::ZERO, 0), ms(200));
    assert_eq!(equal.delay(3, Duration::ZERO, MID), ms(300));
    assert_eq!(equal.delay(3, Duration::ZERO, u64::MAX), ms(400));
    let prop = with(Jitter::Proportional { fraction: 0.25 });
    assert_eq!(prop.delay(3, Duration::ZERO, 0), ms(300));
    assert_eq!(prop.delay(3, Duration::ZERO, MID), ms(400));
    assert_eq!(prop.delay(3, Duration::ZERO, u64::MAX), ms(500));
    // Near the cap the draw is over [d(1-f), cap]: d = 1 s, range [750 ms, 1 s], no pile-up.
    assert_eq!(prop.bounds(10, Duration::ZERO), (ms(750), ms(1_000)));
    assert_eq!(prop.delay(10, Duration::ZERO, MID), ms(875));
    // Decorrelated: min(cap, U[base, 3 * prev]), prev = base at first; the retry number is ignored.
    let dec = with(Jitter::Decorrelated);
    assert_eq!(dec.bounds(1, Duration::ZERO), (ms(100), ms(300)));
    assert_eq!(dec.delay(7, Duration::ZERO, 0), ms(100));
    assert_eq!(dec.delay(7, Duration::ZERO, u64::MAX), ms(300));
    assert_eq!(dec.delay(1, ms(300), u64::MAX), ms(900));
    assert_eq!(dec.delay(1, ms(900), u64::MAX), ms(1_000), "capped");
    assert_eq!(dec.delay(1, ms(900), MID), ms(1_000), "min(cap, 1.4 s)");
    assert_eq!(dec.delay(1, ms(900), 0), ms(100));
}

#[test]
fn the_seed_librarys_exp_backoff_is_reproduced() {
    // exp_backoff(attempt, base=0.2, factor=2, jitter=0.1, rng) = 0.2 * 2^(attempt-1) * U[0.9, 1.1].
    let seed = policy(BackoffConfig::reliablekit());
    for attempt in 1..=5u32 {
        let d = 200u64 << (attempt - 1);
        let want = [d * 9 / 10, d, d * 11 / 10].map(ms);
        let got = [0, MID, u64::MAX].map(|s| seed.delay(attempt, Duration::ZERO, s));
        assert_eq!(got, want, "attempt {attempt}");
        // Any sample u (as a fraction of 2^64) gives d * (0.9 + 0.2 u), to the nanosecond.
        for s in [1u64 << 60, 0x1234_5678_9abc_def0, 0xdead_beef_0000_0000] {
            let u = s as f64 / 18_446_744_073_709_551_616.0;
            let float_ns = (d as f64 * 1e6) * (0.9 + 0.2 * u);
            let got = seed.delay(attempt, Duration::ZERO, s).as_nanos() as f64;
            assert!(
                (got - float_ns).abs() <= 1.0,
                "attempt {attempt}: {got} vs {float_ns}"
            );
        }
    }
}

#[test]
fn a_backoff_sequence_remembers_the_previous_delay() {
    let dec = policy(BackoffConfig::brooker_2015(Jitter::Decorrelated));
    let mut b = dec.backoff();
    // Always the top of the range: 15 ms, 45 ms, 135 ms, ... capped at 2 s.
    let seq: [u64; 6] = core::array::from_fn(|_| b.next_delay_with(u64::MAX).as_millis());
    assert_eq!(seq, [15, 45, 135, 405, 1_215, 2_000]);
    assert_eq!(b.retries(), 6);
    b.reset();
    assert_eq!(b.next_delay_with(0), ms(5));
    // With an Rng: a no-jitter policy draws nothing.
    let mut rng = CountingRng(0);
    let aws = policy(BackoffConfig::aws_standard());
    aws.backoff().next_delay(&mut rng);
    assert_eq!(rng.0, 1);
    let fixed = policy(BackoffConfig::constant(ms(3)));
    fixed.backoff().next_delay(&mut rng);
    assert_eq!(rng.0, 1, "no jitter, no draw");
}

/// Counts draws; always returns the maximum.
struct CountingRng(u32);
impl rand_core::TryRng for CountingRng {
    type Error = core::convert::Infallible;
    fn try_next_u32(&mut self) -> Result<u32, Self::Error> {
        self.0 += 1;
        Ok(u32::MAX)
    }
    fn try_next_u64(&mut self) -> Result<u64, Self::Error> {
        self.0 += 1;
        Ok(u64::MAX)
    }
    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Self::Error> {
        dst.fill(0xff);
        Ok(())
    }
}

#[test]
fn rejects_each_bad_field_by_name() {
    let expo = |base, factor| BackoffConfig {
        shape: Shape::Exponential { base, factor },
        ..BackoffConfig::aws_standard()
    };
    assert_eq!(err(expo(Duration::ZERO, 2.0)).field, "shape.base");
    for factor in [0.5, f64::NAN, f64::INFINITY, 1e6] {
        assert_eq!(err(expo(ms(1), factor)).field, "shape.factor");
    }
    // The cap is required when delays grow, and may not be below the base delay.
    let uncapped = BackoffConfig {
        cap: None,
        ..BackoffConfig::aws_standard()
    };
    assert_eq!(err(uncapped).field, "cap");
    let linear = BackoffConfig {
        shape: Shape::Linear {
            base: ms(1),
            step: ms(1),
        },
        cap: None,
        ..BackoffConfig::immediate()
    };
    assert_eq!(err(linear).field, "cap");
    let below = BackoffConfig {
        cap: Some(ms(10)),
        ..BackoffConfig::constant(ms(11))
    };
    assert_eq!(err(below).field, "cap");
    for fraction in [-0.1, 1.5, f64::NAN] {
        let config = BackoffConfig {
            jitter: Jitter::Proportional { fraction },
            ..BackoffConfig::aws_standard()
        };
        let e = err(config);
        assert_eq!(e.field, "jitter.fraction");
        assert!(matches!(e.problem, Problem::NotAFraction { .. }));
    }
    // Not growing: no cap needed. A factor of exactly 1 does not grow.
    policy(BackoffConfig {
        cap: None,
        ..BackoffConfig::exponential(ms(5), 1.0, ms(5), Jitter::Full)
    });
    policy(BackoffConfig::immediate());
}

#[test]
fn named_profiles_are_valid_and_say_what_they_claim() {
    let aws = policy(BackoffConfig::aws_2026());
    let d: [u64; 4] = core::array::from_fn(|i| {
        aws.delay(i as u32 + 1, Duration::ZERO, u64::MAX)
            .as_millis()
    });
    assert_eq!(d, [50, 100, 200, 400]);
    assert_eq!(aws.delay_before_jitter(40), Duration::from_secs(20));
    let throttled = policy(BackoffConfig::aws_2026_throttled());
    assert_eq!(
        throttled.delay(1, Duration::ZERO, u64::MAX),
        Duration::from_secs(1)
    );
    assert_eq!(
        policy(BackoffConfig::immediate()).delay(9, ms(5), u64::MAX),
        Duration::ZERO
    );
}

#[test]
fn full_jitter_spreads_over_the_whole_range() {
    use rand_core::{Rng, SeedableRng};
    // d = 2 s for retry 9 and later (capped); 20 buckets over [0, d].
    let p = policy(BackoffConfig::brooker_2015(Jitter::Full));
    let d = p.delay_before_jitter(12).as_nanos();
    assert_eq!(d, 2_000_000_000);
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(2015);
    let mut buckets = [0u32; 20];
    let mut at_cap = 0;
    let n = 20_000;
    for _ in 0..n {
        let x = p.delay(12, Duration::ZERO, rng.next_u64()).as_nanos();
        assert!(x <= d);
        at_cap += u32::from(x == d);
        buckets[(x * 20 / (d + 1)) as usize] += 1;
    }
    // Uniform: about 1,000 per bucket; none empty, none more than 20% off.
    for (i, b) in buckets.iter().enumerate() {
        assert!((800..1_200).contains(b), "bucket {i}: {b}");
    }
    assert!(at_cap <= 1, "no point mass at the cap: {at_cap}");
}

fn any_config() -> impl Strategy<Value = BackoffConfig> {
    let shape = prop_oneof![
        (0..u64::MAX).prop_map(|d| Shape::Constant {
            delay: Duration::from_nanos(d)
        }),
        (0..1u64 << 40, 0..u64::MAX).prop_map(|(b, s)| Shape::Linear {
            base: Duration::from_nanos(b),
            step: Duration::from_nanos(s)
        }),
        (1..u64::MAX, 1.0..65_536.0f64).prop_map(|(b, f)| Shape::Exponential {
            base: Duration::from_nanos(b),
            factor: f
        }),
    ];
    let jitter = prop_oneof![
        Just(Jitter::None),
        Just(Jitter::Full),
        Just(Jitter::Equal),
        Just(Jitter::Decorrelated),
        (0.0..=1.0f64).prop_map(|fraction| Jitter::Proportional { fraction }),
    ];
    (shape, any::<u64>(), jitter, any::<u32>()).prop_map(|(shape, cap, jitter, first_exponent)| {
        let base = match shape {
            Shape::Constant { delay } => delay,
            Shape::Linear { base, .. } | Shape::Exponential { base, .. } => base,
        };
        BackoffConfig {
            shape,
            // Any cap at or above the base, up to 584 years.
            cap: Some(Duration::from_nanos(
                base.as_nanos()
                    .saturating_add(cap % (u64::MAX - base.as_nanos()).max(1)),
            )),
            jitter,
            first_exponent: first_exponent % 4,
        }
    })
}

proptest! {
    #[test]
    fn every_delay_is_within_its_bounds_and_the_cap(
        config in any_config(),
        retry in prop_oneof![0..64u32, Just(1_000_000_000u32), Just(u32::MAX)],
        prev in prop_oneof![Just(0u64), any::<u64>(), Just(u64::MAX)],
        sample in any::<u64>(),
    ) {
        let p = BackoffPolicy::new(config).unwrap();
        let prev = Duration::from_nanos(prev);
        let d = p.delay(retry, prev, sample);
        let (lo, hi) = p.bounds(retry, prev);
        prop_assert!(lo <= d && d <= hi, "{lo:?} <= {d:?} <= {hi:?}");
        prop_assert!(hi <= p.cap());
        prop_assert!(p.delay_before_jitter(retry) <= p.cap());
        // The lower bound is the one each formula promises.
        let before = p.delay_before_jitter(retry).as_nanos();
        let floor = match config.jitter {
            Jitter::None => before,
            Jitter::Full => 0,
            Jitter::Equal => before / 2,
            Jitter::Decorrelated => p.base().as_nanos(),
            Jitter::Proportional { fraction } => {
                let ppm = (fraction * 1e6 + 0.5) as u128;
                before - (u128::from(before) * ppm / 1_000_000) as u64
            }
        };
        prop_assert_eq!(lo.as_nanos(), floor);
    }

    #[test]
    fn decorrelated_stays_between_base_and_three_times_prev(
        base in 1..1u64 << 40,
        cap_extra in 0..1u64 << 50,
        samples in proptest::collection::vec(any::<u64>(), 1..40),
    ) {
        let p = BackoffPolicy::new(BackoffConfig {
            shape: Shape::Exponential { base: Duration::from_nanos(base), factor: 2.0 },
            cap: Some(Duration::from_nanos(base + cap_extra)),
            jitter: Jitter::Decorrelated,
            first_exponent: 0,
        }).unwrap();
        let mut b = p.backoff();
        let mut prev = base;
        for s in samples {
            let d = b.next_delay_with(s).as_nanos();
            prop_assert!(d >= base && d <= p.cap().as_nanos().min(prev.saturating_mul(3)), "{d} prev {prev}");
            prev = d;
        }
    }

    #[test]
    fn exponential_growth_matches_floating_point(base in 1..1u64 << 30, k in 1..60u32, cap in 1u64 << 30..u64::MAX) {
        let p = BackoffPolicy::new(BackoffConfig::exponential(Duration::from_nanos(base), 2.0, Duration::from_nanos(cap.max(base)), Jitter::None)).unwrap();
        let want = (base as f64 * 2f64.powi(k as i32 - 1)).min(cap.max(base) as f64);
        let got = p.delay_before_jitter(k).as_nanos() as f64;
        prop_assert!((got - want).abs() <= want * 1e-12 + 1.0, "{got} vs {want}");
    }
}

/// `grow`'s shift for factors of 2^k gives exactly what the square-and-multiply loop gives.
#[test]
fn power_of_two_factors_shift_exactly_as_the_loop_multiplies() {
    let mut x = 2015u64;
    for i in 0..200_000u64 {
        x = crate::sample::splitmix64(x);
        let k = 1 + (x % 16) as u32;
        let factor_fp = 1u64 << (FP_SHIFT + k);
        let base = match i % 4 {
            0 => 1 + (x >> 40) % 1_000,
            1 => 1 + (x >> 20) % 10_000_000_000,
            2 => x >> (x % 64) | 1,
            _ => u64::MAX >> (x % 8),
        };
        let cap = match i % 3 {
            0 => base,
            1 => base.saturating_add(x >> 3),
            _ => u64::MAX,
        };
        let n = match i % 5 {
            0 => (x >> 7) as u32 % 8,
            1 => (x >> 7) as u32 % 70,
            2 => (x >> 7) as u32,
            3 => u32::MAX,
            _ => 64 / k,
        };
        let p = policy(BackoffConfig::exponential(
            Duration::from_nanos(base),
            (1u64 << k) as f64,
            Duration::from_nanos(cap),
            Jitter::None,
        ));
        assert_eq!(p.factor_fp, factor_fp);
        assert_eq!(p.shift, k);
        assert_eq!(
            p.grow(n),
            grow_by_squaring(base, factor_fp, n, cap),
            "base {base} factor 2^{k} n {n} cap {cap}"
        );
    }
}

/// The iterator carries the last delay before jitter and shifts it for factors of 2^k; each delay
/// must still be exactly what the pure `delay` gives for the same retry, previous delay and sample,
/// including where the retry count saturates at `u32::MAX`.
#[test]
fn the_iterator_gives_what_the_pure_function_gives() {
    let mut x = 7u64;
    for i in 0..20_000u64 {
        x = crate::sample::splitmix64(x);
        let base = 1 + (x >> (x % 64));
        let cap = base.saturating_add(x.rotate_left(17) >> (x % 61));
        let factor = [2.0, 4.0, 65_536.0, 1.5, 1.0, 3.0][(i % 6) as usize];
        let jitter = [
            Jitter::None,
            Jitter::Full,
            Jitter::Equal,
            Jitter::Decorrelated,
            Jitter::Proportional { fraction: 0.1 },
        ][(i % 5) as usize];
        let first_exponent = [0, 1, 63, u32::MAX - 3][(i % 4) as usize];
        let p = policy(BackoffConfig {
            first_exponent,
            ..BackoffConfig::exponential(
                Duration::from_nanos(base),
                factor,
                Duration::from_nanos(cap),
                jitter,
            )
        });
        let mut b = p.backoff();
        let mut prev = Duration::ZERO;
        for retry in 1..=70u32 {
            let sample = crate::sample::splitmix64(x ^ u64::from(retry));
            let d = b.next_delay_with(sample);
            assert_eq!(d, p.delay(retry, prev, sample), "{p:?} retry {retry}");
            prev = d;
        }
        // Far along: a count stuck at u32::MAX.
        b.retries = u32::MAX - 1;
        b.next_before_jitter = p.delay_before_jitter(u32::MAX).as_nanos();
        for _ in 0..3 {
            let d = b.next_delay_with(x);
            assert_eq!(d, p.delay(u32::MAX, prev, x), "{p:?} at u32::MAX");
            prev = d;
        }
        b.reset();
        assert_eq!(b.next_delay_with(x), p.delay(1, Duration::ZERO, x));
    }
}

//! Backoff with jitter: how long to wait before each retry.
//!
//! Waiting before a retry gives a struggling downstream time to recover, and growing the wait with
//! each failure lets a client back away from a downstream that stays down. On its own, though,
//! backoff synchronises: clients that failed together (one overloaded instant) retry together, in
//! waves that hit the downstream at the same moments. **Jitter** breaks the waves up. Brooker's
//! simulation of clients contending for one resource ("Exponential Backoff and Jitter", 2015) found
//! that full jitter needs the fewest calls and finishes soonest; exponential backoff without jitter
//! is barely better than none. (Backoff does little for *open-loop* load, where new requests keep
//! arriving whatever the retries do: that is what [retry budgets](crate::budget) are for.)
//!
//! A [`BackoffConfig`] is plain data; [`BackoffPolicy::new`] validates it once into fixed point (a
//! `const fn`, so firmware can do that in the compiler). The delay before retry `k` (counting from
//! 1), with `n = k − 1 + first_exponent`, is
//!
//! | step | formula |
//! |---|---|
//! | shape | `delay` · `base + step·n` · `base·factorⁿ` |
//! | cap (before jitter) | `d = min(cap, shape(n))` |
//! | [`Jitter::None`] | `d` |
//! | [`Jitter::Full`] | `U[0, d]` |
//! | [`Jitter::Equal`] | `d/2 + U[0, d/2]` |
//! | [`Jitter::Decorrelated`] | `min(cap, U[base, 3·prev])`, `prev` = the previous delay, `base` at first |
//! | [`Jitter::Proportional`] | `d·U[1−f, 1+f]`, drawn over `[d·(1−f), min(cap, d·(1+f))]` |
//!
//! No delay ever exceeds the cap. Durations are nanoseconds (sub-millisecond resolution), growth is
//! computed in 32.32 fixed point with saturation, so attempt 10⁹ or a cap of 584 years cannot
//! overflow. Randomness is an input: a [`rand_core::Rng`], or a raw `u64` sample for pinned tests.
//!
//! `first_exponent` makes the exponent's starting point explicit, since published formulas differ:
//! the seed library, gRPC and AWS wait `base` before the first retry (`first_exponent: 0`); Brooker
//! waits `base·2^k` after the k-th failure, so `base·2` before the first retry (`first_exponent: 1`).
//!
//! ```
//! use reliable_core::backoff::{BackoffConfig, BackoffPolicy, Jitter, Shape};
//! use reliable_core::Duration;
//!
//! // Brooker 2015: after the k-th failure wait U[0, min(2 s, 5 ms·2^k)].
//! let policy = BackoffPolicy::new(BackoffConfig::brooker_2015(Jitter::Full))?;
//! assert_eq!(policy.delay_before_jitter(1), Duration::from_millis(10));
//! assert_eq!(policy.delay_before_jitter(3), Duration::from_millis(40));
//! assert_eq!(policy.delay_before_jitter(30), Duration::from_secs(2)); // capped
//!
//! // Randomness is an input; a pinned sample gives an exact answer.
//! assert_eq!(policy.delay(3, Duration::ZERO, u64::MAX), Duration::from_millis(40));
//! assert_eq!(policy.delay(3, Duration::ZERO, 0), Duration::ZERO);
//!
//! // A per-request sequence of delays, drawing from any `rand_core::Rng`.
//! let seed_lib = BackoffPolicy::new(BackoffConfig::reliablekit())?;
//! let mut backoff = seed_lib.backoff();
//! assert_eq!(backoff.next_delay_with(u64::MAX / 2), Duration::from_millis(200)); // the middle of ±10%
//! assert_eq!(backoff.next_delay_with(u64::MAX), Duration::from_millis(440)); // 400 ms + 10%
//! assert_eq!(backoff.next_delay_with(0), Duration::from_millis(720)); // 800 ms - 10%
//! # Ok::<(), reliable_core::ConfigError>(())
//! ```

mod config;

pub use config::{BackoffConfig, Jitter, Shape};

use crate::error::{ConfigError, PpmMultiplier, Problem, fraction_ppm, in_range, tri};
use crate::sample::{uniform_between, uniform_inclusive};
use crate::time::Duration;

/// Fixed-point scale of growth factors: 32 fractional bits.
const FP_SHIFT: u32 = 32;
const FP_ONE: u64 = 1 << FP_SHIFT;

/// The names of the fields [`BackoffPolicy::new`] checks, in the order `with_fields` takes them.
const FIELDS: [&str; 4] = ["shape.base", "shape.factor", "cap", "jitter.fraction"];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum JitterKind {
    None,
    Full,
    Equal,
    Decorrelated,
    Proportional,
}

/// A validated [`BackoffConfig`] in fixed point. Computing a delay is integer-only and cannot fail.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BackoffPolicy {
    /// The shape's first delay (`delay` or `base`), in ns; never above `cap`.
    base: u64,
    /// Linear step, in ns.
    step: u64,
    /// Exponential factor in 32.32 fixed point; `FP_ONE` for constant and linear shapes.
    factor_fp: u64,
    cap: u64,
    /// `k` when the factor is `2^k` (`k >= 1`): each retry's delay is then the previous one shifted
    /// left by `k`, capped. `0` otherwise.
    shift: u32,
    /// How [`Backoff`] gets the next delay before jitter from the last one `d`: if `d <= step_limit`,
    /// `d << shift`, else the cap. `cap >> shift` for a factor of `2^k`; `u64::MAX` where the delay
    /// never changes (or decorrelated jitter, which does not read it).
    step_limit: u64,
    /// Otherwise the iterator computes each delay from the shape's formula.
    recompute: bool,
    /// `delay_before_jitter(1)`, where every [`Backoff`] starts.
    first: u64,
    first_exponent: u32,
    jitter: JitterKind,
    /// Proportional jitter's fraction, applied as a multiplication.
    spread: PpmMultiplier,
    config: BackoffConfig,
}

impl BackoffPolicy {
    /// Validates `config`. Errors name the field: `shape.base`, `shape.factor`, `cap`,
    /// `jitter.fraction`.
    ///
    /// A `const fn`: a policy built in a `const` or `static` item is checked by the compiler, and
    /// neither the check nor its floating-point arithmetic is left in the program.
    ///
    /// ```
    /// use reliable_core::backoff::{BackoffConfig, BackoffPolicy, Jitter};
    /// use reliable_core::Duration;
    ///
    /// const BACKOFF: BackoffPolicy = match BackoffPolicy::new(BackoffConfig::exponential(
    ///     Duration::from_millis(10),
    ///     2.0,
    ///     Duration::from_secs(1),
    ///     Jitter::Full,
    /// )) {
    ///     Ok(policy) => policy,
    ///     Err(_) => panic!("invalid backoff"), // a compile error, not a run-time panic
    /// };
    /// assert_eq!(BACKOFF.cap(), Duration::from_secs(1));
    /// ```
    ///
    /// An invalid config in a `const` item does not compile:
    ///
    /// ```compile_fail
    /// use reliable_core::backoff::{BackoffConfig, BackoffPolicy, Jitter};
    /// use reliable_core::Duration;
    ///
    /// const BACKOFF: BackoffPolicy = match BackoffPolicy::new(BackoffConfig::exponential(
    ///     Duration::from_millis(10),
    ///     0.5, // a factor below 1
    ///     Duration::from_secs(1),
    ///     Jitter::Full,
    /// )) {
    ///     Ok(policy) => policy,
    ///     Err(_) => panic!("invalid backoff"),
    /// };
    /// ```
    pub const fn new(config: BackoffConfig) -> Result<Self, ConfigError> {
        Self::with_fields(config, &FIELDS)
    }

    /// [`new`](Self::new), naming the fields of errors from `names` (for a backoff nested in a
    /// bigger config): `[shape.base, shape.factor, cap, jitter.fraction]`.
    pub(crate) const fn with_fields(
        config: BackoffConfig,
        names: &[&'static str; 4],
    ) -> Result<Self, ConfigError> {
        let (base, step, factor_fp, grows) = match config.shape {
            Shape::Constant { delay } => (delay.as_nanos(), 0, FP_ONE, false),
            Shape::Linear { base, step } => {
                (base.as_nanos(), step.as_nanos(), FP_ONE, !step.is_zero())
            }
            Shape::Exponential { base, factor } => {
                if base.is_zero() {
                    return Err(ConfigError::new(names[0], Problem::Zero));
                }
                let factor = tri!(in_range(names[1], factor, 1.0, 65_536.0));
                let factor_fp = (factor * FP_ONE as f64 + 0.5) as u64;
                (base.as_nanos(), 0, factor_fp, factor_fp > FP_ONE)
            }
        };
        let cap = match config.cap {
            Some(cap) if cap.as_nanos() < base => {
                return Err(ConfigError::new(
                    names[2],
                    Problem::Inconsistent("shorter than the shape's base delay"),
                ));
            }
            Some(cap) => cap.as_nanos(),
            None if grows => {
                return Err(ConfigError::new(
                    names[2],
                    Problem::Inconsistent(
                        "required when the delay grows (factor > 1 or step > 0), or delays grow without bound",
                    ),
                ));
            }
            None => base,
        };
        // A factor of exactly 2^k (k >= 1) in 32.32 fixed point.
        let shift = if factor_fp.is_power_of_two() && factor_fp > FP_ONE {
            factor_fp.trailing_zeros() - FP_SHIFT
        } else {
            0
        };
        let (step_limit, recompute) = if shift != 0 {
            (cap >> shift, false)
        } else if !grows || matches!(config.jitter, Jitter::Decorrelated) {
            (u64::MAX, false)
        } else {
            (u64::MAX, true)
        };
        let (jitter, jitter_ppm) = match config.jitter {
            Jitter::None => (JitterKind::None, 0),
            Jitter::Full => (JitterKind::Full, 0),
            Jitter::Equal => (JitterKind::Equal, 0),
            Jitter::Decorrelated => (JitterKind::Decorrelated, 0),
            Jitter::Proportional { fraction } => (
                JitterKind::Proportional,
                tri!(fraction_ppm(names[3], fraction, true, true)),
            ),
        };
        let mut policy = BackoffPolicy {
            base,
            step,
            factor_fp,
            cap,
            shift,
            step_limit,
            recompute,
            first: 0,
            first_exponent: config.first_exponent,
            jitter,
            spread: PpmMultiplier::new(jitter_ppm),
            config,
        };
        policy.first = policy.grow(config.first_exponent);
        Ok(policy)
    }

    /// The config this policy was built from.
    pub fn config(&self) -> &BackoffConfig {
        &self.config
    }

    /// The longest delay this policy can produce.
    pub fn cap(&self) -> Duration {
        Duration::from_nanos(self.cap)
    }

    /// The shape's first delay (`delay` or `base`); decorrelated jitter starts from it.
    pub fn base(&self) -> Duration {
        Duration::from_nanos(self.base)
    }

    /// `d(k) = min(cap, shape(n))` for retry `k` (from 1; `0` counts as 1), before jitter.
    #[inline]
    pub fn delay_before_jitter(&self, retry: u32) -> Duration {
        let n = retry.saturating_sub(1).saturating_add(self.first_exponent);
        Duration::from_nanos(self.grow(n))
    }

    /// `min(cap, shape(n))`. (`const`: [`new`](Self::new) computes the first delay with it.)
    #[inline]
    const fn grow(&self, n: u32) -> u64 {
        if self.step != 0 {
            min(
                self.base.saturating_add(self.step.saturating_mul(n as u64)),
                self.cap,
            )
        } else if self.shift != 0 {
            // base·2^(k·n), every product exact: a shift, or the cap once it would overflow (the
            // base of an exponential shape is not zero).
            let shift = self.shift as u64 * n as u64;
            match self
                .base
                .checked_shl(if shift < 64 { shift as u32 } else { 64 })
            {
                Some(d) if shift < 64 && d >> shift == self.base => min(d, self.cap),
                _ => self.cap,
            }
        } else if self.factor_fp == FP_ONE || n == 0 {
            min(self.base, self.cap)
        } else {
            grow_by_squaring(self.base, self.factor_fp, n, self.cap)
        }
    }

    /// `delay_before_jitter(retry + 1)` from `d = delay_before_jitter(retry)` (only used where that
    /// is what decorrelated jitter reads). For a factor of `2^k` it is `min(cap, d·2^k)`: exact, and
    /// once at the cap it stays there, so a saturated retry count agrees too.
    #[inline]
    fn next_before_jitter(&self, d: u64, retry: u32) -> u64 {
        if self.recompute {
            self.delay_before_jitter(retry.saturating_add(1)).as_nanos()
        } else if d <= self.step_limit {
            d << self.shift
        } else {
            self.cap
        }
    }

    /// The smallest and largest delay [`delay`](Self::delay) can return for retry `retry` after a
    /// previous delay `prev` (only decorrelated jitter looks at `prev`; zero means "no previous
    /// delay"). The upper end never exceeds the cap.
    pub fn bounds(&self, retry: u32, prev: Duration) -> (Duration, Duration) {
        let d = self.delay_before_jitter(retry).as_nanos();
        let (lo, hi) = match self.jitter {
            JitterKind::None => (d, d),
            JitterKind::Full => (0, d),
            JitterKind::Equal => (d / 2, d),
            JitterKind::Decorrelated => {
                let (lo, hi) = self.decorrelated_range(prev);
                (lo.min(self.cap), hi.max(lo).min(self.cap))
            }
            JitterKind::Proportional => self.proportional_range(d),
        };
        (Duration::from_nanos(lo), Duration::from_nanos(hi))
    }

    fn decorrelated_range(&self, prev: Duration) -> (u64, u64) {
        let prev = if prev.is_zero() {
            self.base
        } else {
            prev.as_nanos()
        };
        (self.base, prev.saturating_mul(3))
    }

    #[inline]
    fn proportional_range(&self, d: u64) -> (u64, u64) {
        let (lo, width) = self.proportional_draw(d);
        (lo, lo + width)
    }

    /// `[d·(1−f), min(cap, d·(1+f))]` as its start and width. The spread is at most `d`, so
    /// `d - spread` cannot underflow, and `min(cap, d + spread) = d + min(spread, cap - d)`
    /// cannot overflow (`d <= cap`).
    #[inline]
    fn proportional_draw(&self, d: u64) -> (u64, u64) {
        let spread = self.spread.apply(d);
        let above = if spread < self.cap - d {
            spread
        } else {
            self.cap - d
        };
        (d - spread, spread + above)
    }

    /// The delay before retry `retry` (from 1), given the previous delay `prev` (zero before the
    /// first retry; only decorrelated jitter reads it) and a uniform random `sample`. Pure: the same
    /// inputs give the same delay. Never above the cap.
    #[inline]
    pub fn delay(&self, retry: u32, prev: Duration, sample: u64) -> Duration {
        let d = if self.jitter == JitterKind::Decorrelated {
            0 // not used
        } else {
            self.delay_before_jitter(retry).as_nanos()
        };
        Duration::from_nanos(self.jitter(d, prev, sample))
    }

    /// Jitter applied to `d = delay_before_jitter(retry)`.
    #[inline]
    fn jitter(&self, d: u64, prev: Duration, sample: u64) -> u64 {
        match self.jitter {
            JitterKind::None => d,
            JitterKind::Full => uniform_inclusive(sample, d),
            JitterKind::Equal => d / 2 + uniform_inclusive(sample, d - d / 2),
            JitterKind::Decorrelated => self.decorrelated(prev, sample),
            JitterKind::Proportional => {
                let (lo, width) = self.proportional_draw(d);
                lo + uniform_inclusive(sample, width)
            }
        }
    }

    /// `min(cap, U[base, 3·prev])`.
    #[inline]
    fn decorrelated(&self, prev: Duration, sample: u64) -> u64 {
        let (lo, hi) = self.decorrelated_range(prev);
        uniform_between(sample, lo, hi).min(self.cap)
    }

    /// Whether [`delay`](Self::delay) uses its sample at all (no jitter: it does not).
    pub fn is_random(&self) -> bool {
        self.jitter != JitterKind::None
    }

    /// A fresh sequence of delays for one request.
    pub fn backoff(&self) -> Backoff<'_> {
        Backoff {
            policy: self,
            retries: 0,
            next_before_jitter: self.first,
            prev: Duration::ZERO,
        }
    }
}

/// `min(cap, base·factor^n)` in 32.32 fixed point: square-and-multiply that stops once past the cap.
const fn grow_by_squaring(base: u64, factor_fp: u64, n: u32, cap: u64) -> u64 {
    let cap_fp = (cap as u128) << FP_SHIFT;
    // Once the factor alone passes the cap, any product with it does too (result >= 1.0).
    let factor_limit = if cap_fp > 2 << FP_SHIFT {
        cap_fp
    } else {
        2 << FP_SHIFT
    };
    let mut result = (base as u128) << FP_SHIFT;
    let mut factor = factor_fp as u128;
    let mut n = n;
    while n > 0 && result < cap_fp {
        if n & 1 == 1 {
            result = min128(result.saturating_mul(factor) >> FP_SHIFT, cap_fp);
        }
        n >>= 1;
        if n > 0 {
            factor = min128(factor.saturating_mul(factor) >> FP_SHIFT, factor_limit);
        }
    }
    (min128(result, cap_fp) >> FP_SHIFT) as u64
}

/// `Ord::min`, which is not `const`.
const fn min(a: u64, b: u64) -> u64 {
    if a < b { a } else { b }
}

/// `Ord::min` on `u128`, which is not `const`.
const fn min128(a: u128, b: u128) -> u128 {
    if a < b { a } else { b }
}

/// The delays of one request in order: retry 1, 2, 3, … Holds the retry count, the next delay
/// before jitter (so a factor of 2 costs a shift per retry, not a power) and the previous delay
/// (for decorrelated jitter); 32 bytes on 64-bit targets. Each delay equals
/// [`BackoffPolicy::delay`] for the same retry, previous delay and sample.
#[derive(Clone, Debug, PartialEq)]
pub struct Backoff<'p> {
    policy: &'p BackoffPolicy,
    retries: u32,
    /// `delay_before_jitter(retries + 1)`.
    next_before_jitter: u64,
    prev: Duration,
}

impl Backoff<'_> {
    /// The delay before the next retry, drawing one `u64` from `rng` (none without jitter).
    #[inline]
    pub fn next_delay<R: rand_core::Rng + ?Sized>(&mut self, rng: &mut R) -> Duration {
        let sample = if self.policy.is_random() {
            rng.next_u64()
        } else {
            0
        };
        self.next_delay_with(sample)
    }

    /// The delay before the next retry, from a given uniform sample.
    #[inline]
    pub fn next_delay_with(&mut self, sample: u64) -> Duration {
        let p = self.policy;
        self.retries = self.retries.saturating_add(1);
        let delay = if p.jitter == JitterKind::Decorrelated {
            // The only kind that ignores the shape's growth: nothing to carry.
            p.decorrelated(self.prev, sample)
        } else {
            let d = self.next_before_jitter;
            self.next_before_jitter = p.next_before_jitter(d, self.retries);
            p.jitter(d, self.prev, sample)
        };
        let delay = Duration::from_nanos(delay);
        self.prev = delay;
        delay
    }

    /// Delays handed out so far.
    pub fn retries(&self) -> u32 {
        self.retries
    }

    /// Starts over, as for a new request.
    pub fn reset(&mut self) {
        self.retries = 0;
        self.next_before_jitter = self.policy.first;
        self.prev = Duration::ZERO;
    }
}

#[cfg(test)]
mod tests;

//! [`ConfigError`]: why a configuration was refused.
//!
//! Every policy in the core is validated once, when it is built; after that nothing can fail or panic.
//! The error names the field (as a dotted path such as `"half_open.max_in_flight"`) and what was wrong,
//! so a scenario file or a settings page can point at the exact spot.
//!
//! ```
//! use reliable_core::breaker::{BreakerConfig, BreakerPolicy};
//! use reliable_core::{ConfigError, Problem};
//!
//! let mut config = BreakerConfig::reliablekit();
//! config.failure_rate = Some(1.5);
//! let err = BreakerPolicy::new(config).unwrap_err();
//! assert_eq!(err.field, "failure_rate");
//! assert!(matches!(err.problem, Problem::NotAFraction { .. }));
//! assert_eq!(err.to_string(), "failure_rate: 1.5 is not a fraction in (0, 1]");
//! ```

use core::fmt;

/// A configuration was refused at construction. `field` is a dotted path to the offending field.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ConfigError {
    /// The field, as a dotted path relative to the config being built (e.g. `"open.max"`).
    pub field: &'static str,
    /// What was wrong with it.
    pub problem: Problem,
}

/// What was wrong with a configuration field.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum Problem {
    /// A fraction (rate, ratio, jitter) outside its allowed range.
    NotAFraction {
        /// The value given.
        value: f64,
        /// Whether 0 is allowed.
        zero_ok: bool,
        /// Whether 1 is allowed.
        one_ok: bool,
    },
    /// A number that must be finite and at least `min` (and at most `max`) was not.
    OutOfRange {
        /// The value given.
        value: f64,
        /// The smallest allowed value.
        min: f64,
        /// The largest allowed value.
        max: f64,
    },
    /// A count or duration that must not be zero was zero.
    Zero,
    /// A size larger than the compile-time capacity of the type that should hold it.
    ExceedsCapacity {
        /// The size asked for.
        requested: u64,
        /// The capacity of the type (its const generic).
        capacity: u64,
    },
    /// Two fields contradict each other; the text says how.
    Inconsistent(&'static str),
}

impl ConfigError {
    /// A new error for `field`.
    pub const fn new(field: &'static str, problem: Problem) -> Self {
        ConfigError { field, problem }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.field)?;
        match self.problem {
            Problem::NotAFraction {
                value,
                zero_ok,
                one_ok,
            } => {
                let open = if zero_ok { '[' } else { '(' };
                let close = if one_ok { ']' } else { ')' };
                write!(f, "{value} is not a fraction in {open}0, 1{close}")
            }
            Problem::OutOfRange { value, min, max } => {
                if max == f64::INFINITY {
                    write!(f, "{value} must be a finite number >= {min}")
                } else {
                    write!(f, "{value} must be a finite number in [{min}, {max}]")
                }
            }
            Problem::Zero => f.write_str("must not be zero"),
            Problem::ExceedsCapacity {
                requested,
                capacity,
            } => write!(
                f,
                "{requested} exceeds the capacity {capacity} of this type; pick a larger const generic"
            ),
            Problem::Inconsistent(why) => f.write_str(why),
        }
    }
}

impl core::error::Error for ConfigError {}

/// Fixed-point scale for fractions: parts per million. Decimal fractions with up to six digits
/// (`0.5`, `0.1`, `0.125`) are exact, so inclusive thresholds behave as written.
pub const PPM: u32 = 1_000_000;

/// `x · ppm / PPM` rounded down, exactly, for `ppm <= PPM`, without a 128-bit division: with
/// `x = q·PPM + r`, it is `q·ppm + r·ppm / PPM`, and neither product can overflow.
#[inline]
pub(crate) const fn mul_ppm(x: u64, ppm: u32) -> u64 {
    let (p, j) = (PPM as u64, ppm as u64);
    x / p * j + x % p * j / p
}

/// `x · ppm / PPM` rounded down, exactly like [`mul_ppm`], as one 64×85-bit multiplication instead
/// of divisions: for a hot path that applies the same fraction again and again.
///
/// With `m = ⌈2⁸⁴·ppm / PPM⌉`, `m·PPM = 2⁸⁴·ppm + e` for some `e < PPM < 2²⁰`, so
/// `x·m / 2⁸⁴ = x·ppm / PPM + x·e / (PPM·2⁸⁴)`, and for `x < 2⁶⁴` the second term is below
/// `1 / PPM`. The fractional part of `x·ppm / PPM` is a multiple of `1 / PPM`, so adding less than
/// that never reaches the next integer: the floors are equal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PpmMultiplier {
    /// `m mod 2⁶⁴`.
    lo: u64,
    /// `⌊m / 2⁶⁴⌋`, at most `2²⁰`.
    hi: u64,
}

impl PpmMultiplier {
    /// For `ppm <= PPM`.
    pub(crate) const fn new(ppm: u32) -> Self {
        let m = ((ppm as u128) << 84).div_ceil(PPM as u128);
        PpmMultiplier {
            lo: m as u64,
            hi: (m >> 64) as u64,
        }
    }

    /// `⌊x · ppm / PPM⌋`, at most `x`.
    #[inline]
    pub(crate) const fn apply(self, x: u64) -> u64 {
        // ⌊x·m / 2⁸⁴⌋ = ⌊(x·hi + ⌊x·lo / 2⁶⁴⌋) / 2²⁰⌋; x·hi < 2⁸⁴, no overflow.
        let low = (x as u128 * self.lo as u128) >> 64;
        ((x as u128 * self.hi as u128 + low) >> 20) as u64
    }
}

/// `?` for `const fn`s, where the `Try` trait is not available: the value of `Ok`, or returns the
/// `Err`.
macro_rules! tri {
    ($result:expr) => {
        match $result {
            Ok(value) => value,
            Err(e) => return Err(e),
        }
    };
}
pub(crate) use tri;

/// Converts a fraction to parts per million, validating its range.
pub(crate) const fn fraction_ppm(
    field: &'static str,
    value: f64,
    zero_ok: bool,
    one_ok: bool,
) -> Result<u32, ConfigError> {
    let bad = ConfigError::new(
        field,
        Problem::NotAFraction {
            value,
            zero_ok,
            one_ok,
        },
    );
    // NaN fails every comparison, so it lands in `bad`.
    let in_range =
        (value > 0.0 || (zero_ok && value == 0.0)) && (value < 1.0 || (one_ok && value == 1.0));
    if !in_range {
        return Err(bad);
    }
    Ok((value * PPM as f64 + 0.5) as u32)
}

/// Validates a finite real number in `[min, max]`.
pub(crate) const fn in_range(
    field: &'static str,
    value: f64,
    min: f64,
    max: f64,
) -> Result<f64, ConfigError> {
    if value.is_finite() && value >= min && value <= max {
        Ok(value)
    } else {
        Err(ConfigError::new(
            field,
            Problem::OutOfRange { value, min, max },
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ppm_multiplier_rounds_exactly_like_the_division() {
        let mut x = 1u64;
        let ppms = [0, 1, 3, 7, 100_000, 123_457, 333_333, 499_999, 999_999, PPM];
        for i in 0..200_000u64 {
            x = crate::sample::splitmix64(x);
            let ppm = if i % 2 == 0 {
                ppms[(i / 2 % ppms.len() as u64) as usize]
            } else {
                (x >> 40) as u32 % (PPM + 1)
            };
            // Multiples of PPM / gcd and their neighbours are where a rounding error would show.
            let v = match i % 4 {
                0 => x,
                1 => x >> (x % 64),
                2 => ((x % (u64::MAX / u64::from(PPM))) * u64::from(PPM)).wrapping_sub(i % 3),
                _ => u64::MAX - (x % 1_000),
            };
            let exact = (u128::from(v) * u128::from(ppm) / u128::from(PPM)) as u64;
            assert_eq!(PpmMultiplier::new(ppm).apply(v), exact, "{v} * {ppm}");
            assert_eq!(mul_ppm(v, ppm), exact);
        }
    }
}

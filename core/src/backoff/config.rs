//! [`BackoffConfig`]: plain data (serde), with its [`Shape`] and [`Jitter`].

use crate::time::Duration;

/// How long to wait before each retry: a [`Shape`] gives the delay `d(k)` before retry `k`, the
/// `cap` bounds it, then [`Jitter`] spreads it. The cap applies before jitter, and no delay ever
/// exceeds it.
///
/// With `n = k - 1 + first_exponent` (retry `k` counts from 1):
/// `d(k) = min(cap, shape(n))`, where `shape(n)` is `delay`, `base + step·n` or `base·factorⁿ`.
///
/// In RON (the simulator's scenario files), with the defaults filled in:
///
/// ```text
/// (shape: Exponential(base: "5ms", factor: 2.0), cap: Some("2s"), jitter: Full, first_exponent: 1)
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
pub struct BackoffConfig {
    /// How the delay grows with the retry number.
    pub shape: Shape,
    /// No delay exceeds this. Required when the shape grows (`factor > 1` or `step > 0`); defaults to
    /// the shape's base delay otherwise.
    #[cfg_attr(feature = "serde", serde(default))]
    pub cap: Option<Duration>,
    /// How the delay is randomised. Default [`Jitter::None`].
    #[cfg_attr(feature = "serde", serde(default))]
    pub jitter: Jitter,
    /// The exponent `n` of the first retry. `0` (the default): the first retry waits `base`, as in
    /// the seed library (`base·factor^(attempt−1)`), gRPC and the AWS SDKs. `1`: the first retry
    /// waits `base·factor`, as in Brooker's "Exponential Backoff and Jitter" (`base·2^k` after the
    /// k-th failure).
    #[cfg_attr(feature = "serde", serde(default))]
    pub first_exponent: u32,
}

/// How the delay before retry `k` grows, before the cap and jitter; `n = k - 1 + first_exponent`.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
pub enum Shape {
    /// The same delay every time (`"0s"`: retry at once).
    Constant {
        /// The delay.
        delay: Duration,
    },
    /// `base + step·n`.
    Linear {
        /// The first delay.
        base: Duration,
        /// Added per retry.
        step: Duration,
    },
    /// `base·factorⁿ`.
    Exponential {
        /// The first delay; not zero.
        base: Duration,
        /// Growth per retry, in [1, 65536]. Default 2.
        #[cfg_attr(feature = "serde", serde(default = "default_factor"))]
        factor: f64,
    },
}

/// How a delay `d` (already capped) is randomised. The formulas of Brooker's "Exponential Backoff
/// and Jitter" (2015), plus proportional jitter.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
pub enum Jitter {
    /// `d`: no randomness. Clients that fail together retry together.
    #[default]
    None,
    /// `U[0, d]`: the best spread, and the fewest calls under contention.
    Full,
    /// `d/2 + U[0, d/2]`: never shorter than half the delay.
    Equal,
    /// `min(cap, U[base, 3·prev])`, `prev` being the previous delay (the base before the first retry).
    /// Ignores the shape's growth (only its base is used): the delay random-walks upwards on its own.
    Decorrelated,
    /// `d·U[1−f, 1+f]`. Where `d·(1+f)` would pass the cap, the draw is over
    /// `[d·(1−f), cap]` instead, so no probability piles up at the cap (a pile-up there would
    /// re-synchronise clients). The seed library's ±10% is `fraction: 0.1`; gRPC's ±20% is `0.2`.
    Proportional {
        /// `f`, in [0, 1].
        fraction: f64,
    },
}

#[cfg(feature = "serde")]
fn default_factor() -> f64 {
    2.0
}

impl BackoffConfig {
    /// Exponential backoff `min(cap, base·factorⁿ)` with the given jitter, first retry waiting `base`.
    pub const fn exponential(base: Duration, factor: f64, cap: Duration, jitter: Jitter) -> Self {
        BackoffConfig {
            shape: Shape::Exponential { base, factor },
            cap: Some(cap),
            jitter,
            first_exponent: 0,
        }
    }

    /// The same delay before every retry, no jitter.
    pub const fn constant(delay: Duration) -> Self {
        BackoffConfig {
            shape: Shape::Constant { delay },
            cap: None,
            jitter: Jitter::None,
            first_exponent: 0,
        }
    }

    /// No backoff at all: every retry goes at once (the "naive retries" of storm studies).
    pub const fn immediate() -> Self {
        BackoffConfig::constant(Duration::ZERO)
    }

    /// The seed library's `exp_backoff(attempt, base=0.2 s, factor=2, jitter=0.1)`: before the retry
    /// that follows failed attempt `a`, wait `0.2 s · 2^(a−1) · U[0.9, 1.1]`. The seed has no cap;
    /// this profile's cap is [`Duration::MAX`] so the formula is reproduced exactly (with the seed's
    /// 5 attempts the longest base delay is 1.6 s).
    pub const fn reliablekit() -> Self {
        BackoffConfig {
            shape: Shape::Exponential {
                base: Duration::from_millis(200),
                factor: 2.0,
            },
            cap: Some(Duration::MAX),
            jitter: Jitter::Proportional { fraction: 0.1 },
            first_exponent: 0,
        }
    }

    /// Brooker's "Exponential Backoff and Jitter" (2015) set-up: after the k-th failure wait
    /// `min(2 s, 5 ms·2^k)` with the given jitter (`first_exponent: 1`).
    pub const fn brooker_2015(jitter: Jitter) -> Self {
        BackoffConfig {
            shape: Shape::Exponential {
                base: Duration::from_millis(5),
                factor: 2.0,
            },
            cap: Some(Duration::from_secs(2)),
            jitter,
            first_exponent: 1,
        }
    }

    /// AWS SDK standard retry mode (before 2026): `U[0, 1]·min(1 s·2^i, 20 s)` for the i-th retry
    /// (from 0).
    pub const fn aws_standard() -> Self {
        BackoffConfig::exponential(
            Duration::from_secs(1),
            2.0,
            Duration::from_secs(20),
            Jitter::Full,
        )
    }

    /// AWS SDK standard retry mode, 2026 defaults, for non-throttling errors:
    /// `U[0, 1]·min(50 ms·2^i, 20 s)`.
    pub const fn aws_2026() -> Self {
        BackoffConfig::exponential(
            Duration::from_millis(50),
            2.0,
            Duration::from_secs(20),
            Jitter::Full,
        )
    }

    /// AWS SDK standard retry mode, 2026 defaults, for throttling errors:
    /// `U[0, 1]·min(1 s·2^i, 20 s)`.
    pub const fn aws_2026_throttled() -> Self {
        BackoffConfig::aws_standard()
    }
}

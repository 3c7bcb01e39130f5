//! [`SpendConfig`] (plain data, serde) and [`SpendPolicy`] (validated once, shared by reference).
//!
//! ```
//! use reliable_core::spend::{Ceiling, Price, SpendConfig, SpendPolicy};
//!
//! // $3 / $15 per million input / output tokens; at most 400k tokens a minute and $50 a day.
//! let config = SpendConfig {
//!     price: Price::per_million_tokens(3_000_000, 15_000_000),
//!     minute: Some(Ceiling::tokens(400_000)),
//!     day: Some(Ceiling::cost(50_000_000)),
//!     ..SpendConfig::new()
//! };
//! let policy = SpendPolicy::new(config)?;
//! assert_eq!(policy.cost(1_000, 500), 10_500); // 0.3 ¢ + 0.75 ¢, in micro-dollars
//! # Ok::<(), reliable_core::ConfigError>(())
//! ```

use crate::error::{ConfigError, PPM, Problem, fraction_ppm};
use crate::time::Duration;

/// Prices in integer micro-units of money (micro-dollars, say) per million tokens, so fractions of
/// a cent per token stay exact.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
pub struct Price {
    /// Micro-units per million input tokens ($3 / Mtok is `3_000_000`).
    pub input_per_mtok: u64,
    /// Micro-units per million output tokens.
    pub output_per_mtok: u64,
}

impl Price {
    /// A price per million input and output tokens, in micro-units.
    pub const fn per_million_tokens(input: u64, output: u64) -> Self {
        Price {
            input_per_mtok: input,
            output_per_mtok: output,
        }
    }
}

/// The ceilings of one sliding window: tokens (input + output) and cost (micro-units). Either may
/// be absent. The window is cut into `buckets`; usage leaves it a bucket at a time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
pub struct Ceiling {
    /// At most this many tokens in the window.
    #[cfg_attr(feature = "serde", serde(default))]
    pub tokens: Option<u64>,
    /// At most this much cost (micro-units) in the window.
    #[cfg_attr(feature = "serde", serde(default))]
    pub cost: Option<u64>,
    /// Buckets the window is cut into; at most the breaker's const generic for this window.
    /// Default 6.
    #[cfg_attr(feature = "serde", serde(default = "default_buckets"))]
    pub buckets: u32,
}

#[cfg(feature = "serde")]
fn default_buckets() -> u32 {
    DEFAULT_BUCKETS
}

const DEFAULT_BUCKETS: u32 = 6;

impl Ceiling {
    /// A token ceiling only.
    pub const fn tokens(tokens: u64) -> Self {
        Ceiling {
            tokens: Some(tokens),
            cost: None,
            buckets: DEFAULT_BUCKETS,
        }
    }
    /// A cost ceiling only (micro-units).
    pub const fn cost(cost: u64) -> Self {
        Ceiling {
            tokens: None,
            cost: Some(cost),
            buckets: DEFAULT_BUCKETS,
        }
    }
    /// The same ceiling cut into `buckets` buckets.
    pub const fn with_buckets(mut self, buckets: u32) -> Self {
        self.buckets = buckets;
        self
    }
}

/// What a [`SpendBreaker`](super::SpendBreaker) enforces.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
pub struct SpendConfig {
    /// What tokens cost. Default: free (only token ceilings bite).
    #[cfg_attr(feature = "serde", serde(default))]
    pub price: Price,
    /// Ceilings over the last minute.
    #[cfg_attr(feature = "serde", serde(default))]
    pub minute: Option<Ceiling>,
    /// Ceilings over the last 24 hours.
    #[cfg_attr(feature = "serde", serde(default))]
    pub day: Option<Ceiling>,
    /// Ceilings over the last 30 days.
    #[cfg_attr(feature = "serde", serde(default))]
    pub month: Option<Ceiling>,
    /// Throttle once less than this share of any ceiling or provider quota is left, in [0, 1).
    /// Default 0.1.
    #[cfg_attr(feature = "serde", serde(default = "default_throttle_below"))]
    pub throttle_below: f64,
    /// How long a money signal opens the breaker when the provider gives no reset. Default 1 h.
    #[cfg_attr(feature = "serde", serde(default = "default_money_open"))]
    pub money_open: Duration,
}

#[cfg(feature = "serde")]
fn default_throttle_below() -> f64 {
    0.1
}
#[cfg(feature = "serde")]
fn default_money_open() -> Duration {
    Duration::from_secs(3_600)
}

impl SpendConfig {
    /// No ceilings, free tokens, throttling below 10% left, money signals open it for an hour.
    pub const fn new() -> Self {
        SpendConfig {
            price: Price::per_million_tokens(0, 0),
            minute: None,
            day: None,
            month: None,
            throttle_below: 0.1,
            money_open: Duration::from_secs(3_600),
        }
    }
}

impl Default for SpendConfig {
    fn default() -> Self {
        Self::new()
    }
}

/// The three windows, by length.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "kebab-case"))]
pub enum Span {
    /// The last 60 s.
    Minute,
    /// The last 24 h.
    Day,
    /// The last 30 days.
    Month,
}

impl Span {
    /// The three spans, shortest first.
    pub const ALL: [Span; 3] = [Span::Minute, Span::Day, Span::Month];

    /// How long the window is.
    pub const fn length(self) -> Duration {
        match self {
            Span::Minute => Duration::from_secs(60),
            Span::Day => Duration::from_secs(86_400),
            Span::Month => Duration::from_secs(30 * 86_400),
        }
    }

    /// `minute`, `day` or `month`.
    pub const fn name(self) -> &'static str {
        match self {
            Span::Minute => "minute",
            Span::Day => "day",
            Span::Month => "month",
        }
    }
}

/// A validated [`SpendConfig`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SpendPolicy {
    config: SpendConfig,
    pub(crate) throttle_ppm: u32,
}

impl SpendPolicy {
    /// Validates `config`: a ceiling needs at least one limit and at least one bucket, the bucket
    /// width must divide into whole nanoseconds, `throttle_below` is in [0, 1), `money_open` is not
    /// zero.
    pub fn new(config: SpendConfig) -> Result<Self, ConfigError> {
        for (span, ceiling) in Span::ALL.into_iter().zip(ceilings(&config)) {
            let Some(c) = ceiling else { continue };
            let (field, buckets_field) = match span {
                Span::Minute => ("minute", "minute.buckets"),
                Span::Day => ("day", "day.buckets"),
                Span::Month => ("month", "month.buckets"),
            };
            if c.tokens.is_none() && c.cost.is_none() {
                return Err(ConfigError::new(
                    field,
                    Problem::Inconsistent("a ceiling needs `tokens`, `cost` or both"),
                ));
            }
            if c.buckets == 0 {
                return Err(ConfigError::new(buckets_field, Problem::Zero));
            }
            if span.length().as_nanos() % u64::from(c.buckets) != 0 {
                return Err(ConfigError::new(
                    buckets_field,
                    Problem::Inconsistent("the window must divide into whole nanoseconds"),
                ));
            }
        }
        let throttle_ppm = fraction_ppm("throttle_below", config.throttle_below, true, false)?;
        if config.money_open.is_zero() {
            return Err(ConfigError::new("money_open", Problem::Zero));
        }
        Ok(SpendPolicy {
            config,
            throttle_ppm,
        })
    }

    /// The config this policy was built from.
    pub fn config(&self) -> &SpendConfig {
        &self.config
    }

    /// The ceiling of `span`, if any.
    pub fn ceiling(&self, span: Span) -> Option<Ceiling> {
        match span {
            Span::Minute => self.config.minute,
            Span::Day => self.config.day,
            Span::Month => self.config.month,
        }
    }

    /// The cost of `input` and `output` tokens in micro-units, rounded up (a fraction of a
    /// micro-unit is still spent), saturating.
    pub fn cost(&self, input: u64, output: u64) -> u64 {
        let p = self.config.price;
        // Each product fits in a u128 (both factors are below 2^64); only the sum can overflow.
        let micro = (u128::from(input) * u128::from(p.input_per_mtok))
            .saturating_add(u128::from(output) * u128::from(p.output_per_mtok));
        u64::try_from(micro.div_ceil(1_000_000)).unwrap_or(u64::MAX)
    }

    /// Whether `left` of `limit` is below the throttle threshold.
    pub(crate) fn is_low(&self, left: u64, limit: u64) -> bool {
        u128::from(left) * u128::from(PPM) < u128::from(self.throttle_ppm) * u128::from(limit)
    }
}

fn ceilings(c: &SpendConfig) -> [Option<Ceiling>; 3] {
    [c.minute, c.day, c.month]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_bad_configs_naming_the_field() {
        let bad = |c: SpendConfig| SpendPolicy::new(c).unwrap_err().field;
        let empty = Ceiling {
            tokens: None,
            cost: None,
            buckets: 6,
        };
        assert_eq!(
            bad(SpendConfig {
                day: Some(empty),
                ..SpendConfig::new()
            }),
            "day"
        );
        assert_eq!(
            bad(SpendConfig {
                minute: Some(Ceiling::tokens(1).with_buckets(0)),
                ..SpendConfig::new()
            }),
            "minute.buckets"
        );
        assert_eq!(
            bad(SpendConfig {
                month: Some(Ceiling::cost(1).with_buckets(7)),
                ..SpendConfig::new()
            }),
            "month.buckets"
        );
        for t in [1.0, -0.1, f64::NAN] {
            assert_eq!(
                bad(SpendConfig {
                    throttle_below: t,
                    ..SpendConfig::new()
                }),
                "throttle_below"
            );
        }
        assert_eq!(
            bad(SpendConfig {
                money_open: Duration::ZERO,
                ..SpendConfig::new()
            }),
            "money_open"
        );
    }

    #[test]
    fn cost_rounds_up_and_saturates() {
        let p = SpendPolicy::new(SpendConfig {
            price: Price::per_million_tokens(150_000, 600_000),
            ..SpendConfig::new()
        })
        .unwrap();
        assert_eq!(p.cost(0, 0), 0);
        assert_eq!(p.cost(1, 0), 1); // 0.15 micro-units is still spent
        assert_eq!(p.cost(1_000_000, 1_000_000), 750_000);
        let dear = SpendPolicy::new(SpendConfig {
            price: Price::per_million_tokens(u64::MAX, u64::MAX),
            ..SpendConfig::new()
        })
        .unwrap();
        assert_eq!(dear.cost(u64::MAX, u64::MAX), u64::MAX);
    }
}

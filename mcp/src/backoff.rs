//! `compute_backoff`: the delays a retry policy would wait, computed by reliable-core's backoff so
//! an agent can see its retry rhythm before it commits to one.
//!
//! Randomness is a seed: retry `k`'s sample is `splitmix64(seed + k)`, so the same arguments give
//! the same delays, and each delay comes with the range jitter could have put it in.

use reliable_core::Duration;
use reliable_core::backoff::{BackoffConfig, BackoffPolicy, Jitter, Shape};
use reliable_core::sample::splitmix64;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::duration::{ms, parse_duration};

/// Retries computed at most.
pub const MAX_RETRIES: u32 = 100;

/// How delays are randomised.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "snake_case")]
pub enum JitterKind {
    /// No randomness: clients that fail together retry together.
    None,
    /// Uniform in [0, d]: the best spread (Brooker 2015).
    #[default]
    Full,
    /// d/2 + uniform in [0, d/2].
    Equal,
    /// min(cap, uniform in [base, 3 × previous delay]).
    Decorrelated,
    /// d × uniform in [1 − fraction, 1 + fraction] (the seed library's ±10% is fraction 0.1).
    Proportional,
}

/// The backoff between attempts: `min(cap, base × factor^(k−1))` before retry k, then jitter.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct BackoffSpec {
    /// First delay, e.g. "200ms" or "1s". Default "200ms".
    #[serde(default)]
    pub base: Option<String>,
    /// Growth per retry, in [1, 65536]. Default 2.
    #[serde(default)]
    pub factor: Option<f64>,
    /// Longest delay, e.g. "10s". Default "10s".
    #[serde(default)]
    pub cap: Option<String>,
    /// Jitter kind. Default full.
    #[serde(default)]
    pub jitter: Option<JitterKind>,
    /// For proportional jitter: the fraction, in [0, 1]. Default 0.1.
    #[serde(default)]
    pub jitter_fraction: Option<f64>,
}

impl BackoffSpec {
    /// The core's config, or an error naming the field.
    pub fn config(&self) -> Result<BackoffConfig, String> {
        let base = parse_duration("base", self.base.as_deref(), Duration::from_millis(200))?;
        let cap = parse_duration("cap", self.cap.as_deref(), Duration::from_secs(10))?;
        let jitter = match self.jitter.unwrap_or_default() {
            JitterKind::None => Jitter::None,
            JitterKind::Full => Jitter::Full,
            JitterKind::Equal => Jitter::Equal,
            JitterKind::Decorrelated => Jitter::Decorrelated,
            JitterKind::Proportional => Jitter::Proportional {
                fraction: self.jitter_fraction.unwrap_or(0.1),
            },
        };
        Ok(BackoffConfig {
            shape: Shape::Exponential {
                base,
                factor: self.factor.unwrap_or(2.0),
            },
            cap: Some(cap),
            jitter,
            first_exponent: 0,
        })
    }

    /// The validated policy, or an error naming the field.
    pub fn policy(&self) -> Result<BackoffPolicy, String> {
        BackoffPolicy::new(self.config()?).map_err(|e| format!("backoff.{e}"))
    }
}

/// Arguments of `compute_backoff`.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BackoffArgs {
    /// Retries to compute, 1 to 100 (attempt k+1 waits the k-th delay).
    pub retries: u32,
    /// The backoff; every field has a default.
    #[serde(default)]
    pub backoff: Option<BackoffSpec>,
    /// Seed of the jitter; the same seed gives the same delays. Default 0.
    #[serde(default)]
    pub seed: Option<u64>,
}

/// One retry's delay.
#[derive(Clone, Debug, Serialize, JsonSchema, PartialEq)]
pub struct Delay {
    /// The retry, from 1 (it is attempt `retry + 1`).
    pub retry: u32,
    /// The delay before it, in milliseconds.
    pub delay_ms: f64,
    /// The smallest delay jitter could have given, in milliseconds.
    pub min_ms: f64,
    /// The largest delay jitter could have given, in milliseconds.
    pub max_ms: f64,
    /// Time waited in all up to and including this delay, in milliseconds.
    pub cumulative_ms: f64,
}

/// What `compute_backoff` returns.
#[derive(Clone, Debug, Serialize, JsonSchema, PartialEq)]
pub struct BackoffReport {
    /// The delays in order.
    pub delays: Vec<Delay>,
    /// Their sum, in milliseconds.
    pub total_ms: f64,
    /// The formula, in words.
    pub formula: String,
}

/// Computes the delays, or says which argument is wrong.
pub fn compute(args: &BackoffArgs) -> Result<BackoffReport, String> {
    if !(1..=MAX_RETRIES).contains(&args.retries) {
        return Err(format!(
            "retries: {} is outside 1..={MAX_RETRIES}",
            args.retries
        ));
    }
    let spec = args.backoff.clone().unwrap_or_default();
    let policy = spec.policy()?;
    let seed = args.seed.unwrap_or(0);
    let mut prev = Duration::ZERO;
    let mut total = Duration::ZERO;
    let mut delays = Vec::with_capacity(args.retries as usize);
    for retry in 1..=args.retries {
        let (lo, hi) = policy.bounds(retry, prev);
        let d = policy.delay(retry, prev, splitmix64(seed.wrapping_add(u64::from(retry))));
        total += d;
        delays.push(Delay {
            retry,
            delay_ms: ms(d),
            min_ms: ms(lo),
            max_ms: ms(hi),
            cumulative_ms: ms(total),
        });
        prev = d;
    }
    let c = policy.config();
    let formula = match c.shape {
        Shape::Exponential { base, factor } => format!(
            "min({}, {base} × {factor}^(k−1)) before retry k, then {:?} jitter",
            policy.cap(),
            c.jitter
        ),
        _ => format!("{c:?}"),
    };
    Ok(BackoffReport {
        delays,
        total_ms: ms(total),
        formula,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(retries: u32, spec: BackoffSpec, seed: u64) -> BackoffArgs {
        BackoffArgs {
            retries,
            backoff: Some(spec),
            seed: Some(seed),
        }
    }

    #[test]
    fn no_jitter_doubles_up_to_the_cap() {
        let spec = BackoffSpec {
            base: Some("100ms".into()),
            cap: Some("1s".into()),
            jitter: Some(JitterKind::None),
            ..BackoffSpec::default()
        };
        let r = compute(&args(6, spec, 7)).unwrap();
        let d: Vec<f64> = r.delays.iter().map(|d| d.delay_ms).collect();
        assert_eq!(d, [100.0, 200.0, 400.0, 800.0, 1000.0, 1000.0]);
        assert_eq!(r.total_ms, 3500.0);
    }

    #[test]
    fn jittered_delays_stay_in_their_bounds_and_depend_only_on_the_seed() {
        let spec = BackoffSpec::default();
        let a = compute(&args(20, spec.clone(), 1)).unwrap();
        assert_eq!(a, compute(&args(20, spec.clone(), 1)).unwrap());
        assert_ne!(a, compute(&args(20, spec, 2)).unwrap());
        for d in &a.delays {
            assert!(d.min_ms <= d.delay_ms && d.delay_ms <= d.max_ms, "{d:?}");
            assert!(d.max_ms <= 10_000.0);
        }
    }

    #[test]
    fn bad_arguments_name_the_field() {
        let e = |spec: BackoffSpec, retries| compute(&args(retries, spec, 0)).unwrap_err();
        assert!(e(BackoffSpec::default(), 0).starts_with("retries"));
        assert!(e(BackoffSpec::default(), 101).starts_with("retries"));
        let bad_factor = BackoffSpec {
            factor: Some(0.5),
            ..BackoffSpec::default()
        };
        assert!(
            e(bad_factor, 3).contains("backoff.shape.factor"),
            "{}",
            e(
                BackoffSpec {
                    factor: Some(0.5),
                    ..BackoffSpec::default()
                },
                3
            )
        );
        let bad_base = BackoffSpec {
            base: Some("soon".into()),
            ..BackoffSpec::default()
        };
        assert!(e(bad_base, 3).starts_with("base"));
        let cap_below_base = BackoffSpec {
            base: Some("2s".into()),
            cap: Some("1s".into()),
            ..BackoffSpec::default()
        };
        assert!(e(cap_below_base, 3).contains("backoff.cap"));
        let bad_fraction = BackoffSpec {
            jitter: Some(JitterKind::Proportional),
            jitter_fraction: Some(2.0),
            ..BackoffSpec::default()
        };
        assert!(e(bad_fraction, 3).contains("jitter.fraction"));
    }
}

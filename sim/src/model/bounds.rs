//! Shortest, mean and longest times of distributions and backoffs, in seconds: what the compile
//! stage's livelock guard and the admission estimate reason with, before anything is sampled.

use reliable_core::backoff::{BackoffConfig, Jitter, Shape};

use crate::scenario::Dist;

/// Shortest time of a distribution, seconds.
pub(crate) fn min_s(d: &Dist) -> f64 {
    match d {
        Dist::Constant(v) => v.as_secs_f64(),
        Dist::Uniform { low, .. } => low.as_secs_f64(),
        Dist::Choice(v) => v
            .iter()
            .map(|d| d.as_secs_f64())
            .fold(f64::INFINITY, f64::min),
        Dist::Bimodal { fast, slow, .. } => min_s(fast).min(min_s(slow)),
        Dist::Exponential { .. } | Dist::LogNormal { .. } | Dist::Normal { .. } => 0.0,
    }
}

/// Mean time of a distribution, seconds.
pub(crate) fn mean_s(d: &Dist) -> f64 {
    super::Sampler::new(d).mean_secs()
}

/// The shortest wait a backoff can give, and its first wait before jitter, seconds.
pub(crate) fn backoff_s(b: &BackoffConfig) -> (f64, f64) {
    let base = match b.shape {
        Shape::Constant { delay } => delay,
        Shape::Linear { base, .. } => base,
        Shape::Exponential { base, .. } => base,
    };
    let base = match b.cap {
        Some(cap) => base.min(cap),
        None => base,
    }
    .as_secs_f64();
    let lo = match b.jitter {
        Jitter::None => base,
        Jitter::Equal => base / 2.0,
        Jitter::Proportional { fraction } => base * (1.0 - fraction.clamp(0.0, 1.0)),
        Jitter::Full | Jitter::Decorrelated => 0.0,
    };
    (lo, base)
}

/// Longest time of a distribution, seconds (infinite for unbounded ones).
pub(crate) fn max_s(d: &Dist) -> f64 {
    match d {
        Dist::Constant(v) => v.as_secs_f64(),
        Dist::Uniform { high, .. } => high.as_secs_f64(),
        Dist::Choice(v) => v.iter().map(|d| d.as_secs_f64()).fold(0.0, f64::max),
        Dist::Bimodal { fast, slow, .. } => max_s(fast).max(max_s(slow)),
        Dist::Exponential { .. } | Dist::LogNormal { .. } | Dist::Normal { .. } => f64::INFINITY,
    }
}

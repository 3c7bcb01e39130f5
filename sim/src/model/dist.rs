//! [`Sampler`]: a scenario [`Dist`] ready to draw nanoseconds from.
//!
//! Draws use rand_distr; results are rounded to whole nanoseconds and clamped to `[0, 2^62]`, so a
//! heavy tail cannot overflow virtual time.

use rand::Rng;
use rand_distr::{Distribution, Exp, LogNormal, Normal};

use crate::scenario::Dist;

const MAX_NS: f64 = (1u64 << 62) as f64;

/// A compiled distribution of durations.
#[derive(Clone, Debug)]
pub enum Sampler {
    /// Always this many nanoseconds.
    Constant(u64),
    /// Exponential, in nanoseconds.
    Exponential {
        /// The distribution.
        dist: Exp<f64>,
        /// Its mean, in nanoseconds.
        mean_ns: f64,
    },
    /// `scale_ns × LogNormal`.
    LogNormal {
        /// Nanoseconds multiplied by the variate.
        scale_ns: f64,
        /// The variate.
        dist: LogNormal<f64>,
        /// The mean of the variate, `exp(mu + sigma² / 2)`.
        mean_factor: f64,
    },
    /// `|Normal|`, in nanoseconds.
    AbsNormal(Normal<f64>),
    /// Uniform integer nanoseconds in `[low, high]`.
    Uniform {
        /// Lowest.
        low: u64,
        /// Highest.
        high: u64,
    },
    /// One of these, uniformly.
    Choice(Vec<u64>),
    /// `slow` with probability `p`, else `fast`.
    Bimodal {
        /// Probability of the slow branch.
        p: f64,
        /// Fast branch.
        fast: Box<Sampler>,
        /// Slow branch.
        slow: Box<Sampler>,
    },
}

impl Sampler {
    /// Compiles `d`. Invalid parameters (which validation rejects) fall back to a constant 0.
    pub fn new(d: &Dist) -> Self {
        match d {
            Dist::Constant(c) => Sampler::Constant(c.as_nanos()),
            Dist::Exponential { mean } => {
                let m = mean.as_nanos() as f64;
                match Exp::new(1.0 / m) {
                    Ok(dist) if m > 0.0 => Sampler::Exponential { dist, mean_ns: m },
                    _ => Sampler::Constant(0),
                }
            }
            Dist::LogNormal { scale, mu, sigma } => match LogNormal::new(*mu, *sigma) {
                Ok(dist) => Sampler::LogNormal {
                    scale_ns: scale.as_nanos() as f64,
                    dist,
                    mean_factor: (mu + sigma * sigma / 2.0).exp(),
                },
                Err(_) => Sampler::Constant(0),
            },
            Dist::Normal { mean, std_dev } => {
                match Normal::new(mean.as_nanos() as f64, std_dev.as_nanos() as f64) {
                    Ok(n) => Sampler::AbsNormal(n),
                    Err(_) => Sampler::Constant(mean.as_nanos()),
                }
            }
            Dist::Uniform { low, high } => Sampler::Uniform {
                low: low.as_nanos(),
                high: high.as_nanos().max(low.as_nanos()),
            },
            Dist::Choice(values) if values.is_empty() => Sampler::Constant(0),
            Dist::Choice(values) if values.len() == 1 => Sampler::Constant(values[0].as_nanos()),
            Dist::Choice(values) => Sampler::Choice(values.iter().map(|v| v.as_nanos()).collect()),
            Dist::Bimodal {
                slow_share,
                fast,
                slow,
            } => Sampler::Bimodal {
                p: *slow_share,
                fast: Box::new(Sampler::new(fast)),
                slow: Box::new(Sampler::new(slow)),
            },
        }
    }

    /// Whether every draw is zero without drawing (lets callers skip an event).
    pub fn is_zero(&self) -> bool {
        matches!(self, Sampler::Constant(0))
    }

    /// The values a draw can take, if there are few of them (a constant or a choice): callers
    /// give each its own FIFO timer lane.
    pub fn values(&self) -> Option<&[u64]> {
        match self {
            Sampler::Constant(c) => Some(std::slice::from_ref(c)),
            Sampler::Choice(v) => Some(v),
            _ => None,
        }
    }

    /// The mean, in seconds (for reports and capacity estimates).
    pub fn mean_secs(&self) -> f64 {
        let ns = match self {
            Sampler::Constant(c) => *c as f64,
            Sampler::Exponential { mean_ns, .. } => *mean_ns,
            Sampler::LogNormal {
                scale_ns,
                mean_factor,
                ..
            } => scale_ns * mean_factor,
            // Mean of |N| is close to the mean of N when mean >> sd, which is how it is used.
            Sampler::AbsNormal(n) => n.mean().abs(),
            Sampler::Uniform { low, high } => (*low as f64 + *high as f64) / 2.0,
            Sampler::Choice(values) => {
                values.iter().map(|&v| v as f64).sum::<f64>() / values.len().max(1) as f64
            }
            Sampler::Bimodal { p, fast, slow } => {
                return (1.0 - p) * fast.mean_secs() + p * slow.mean_secs();
            }
        };
        ns / 1e9
    }

    /// One draw, in nanoseconds.
    #[inline]
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> u64 {
        let ns = match self {
            Sampler::Constant(c) => return *c,
            Sampler::Exponential { dist, .. } => dist.sample(rng),
            Sampler::LogNormal { scale_ns, dist, .. } => scale_ns * dist.sample(rng),
            Sampler::AbsNormal(n) => n.sample(rng).abs(),
            Sampler::Uniform { low, high } => {
                let span = high - low;
                if span == 0 {
                    return *low;
                }
                let r = rng.next_u64();
                let off = if span == u64::MAX {
                    r
                } else {
                    ((u128::from(r) * (u128::from(span) + 1)) >> 64) as u64
                };
                return low + off;
            }
            Sampler::Choice(values) => {
                let n = values.len() as u64;
                let i = ((u128::from(rng.next_u64()) * u128::from(n)) >> 64) as usize;
                return values.get(i).copied().unwrap_or(0);
            }
            Sampler::Bimodal { p, fast, slow } => {
                let u = (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64);
                return if u < *p {
                    slow.sample(rng)
                } else {
                    fast.sample(rng)
                };
            }
        };
        if ns.is_nan() || ns <= 0.0 {
            0
        } else if ns >= MAX_NS {
            MAX_NS as u64
        } else {
            ns.round() as u64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{Stream, StreamId};
    use reliable_core::Duration;

    fn mean_of(s: &Sampler, n: usize) -> f64 {
        let mut rng = Stream::new(11, StreamId::Test);
        (0..n).map(|_| s.sample(rng.rng()) as f64).sum::<f64>() / n as f64 / 1e9
    }

    #[test]
    fn sample_means_match_the_stated_means() {
        let ms = Duration::from_millis;
        let cases = [
            Dist::Exponential { mean: ms(100) },
            Dist::LogNormal {
                scale: ms(10),
                mu: 0.0,
                sigma: 0.25,
            },
            Dist::Normal {
                mean: ms(10),
                std_dev: ms(2),
            },
            Dist::Uniform {
                low: ms(10),
                high: ms(30),
            },
            Dist::Bimodal {
                slow_share: 0.1,
                fast: Box::new(Dist::Constant(ms(10))),
                slow: Box::new(Dist::Constant(ms(500))),
            },
            Dist::Choice(vec![ms(100), ms(200), ms(300)]),
        ];
        for d in &cases {
            let s = Sampler::new(d);
            let got = mean_of(&s, 200_000);
            let want = s.mean_secs();
            assert!((got - want).abs() / want < 0.01, "{d:?}: {got} vs {want}");
        }
        assert_eq!(
            Sampler::new(&Dist::Constant(ms(3)))
                .sample(&mut Stream::new(1, StreamId::Test).rng().clone()),
            3_000_000
        );
    }
}

//! Client-side adaptive throttling (Google SRE book, "Handling Overload"): when the downstream
//! rejects much of what it is sent, reject locally, before sending.
//!
//! Over a window (two minutes by default) the client counts `requests` (every request the
//! application asked for, including those this throttle rejected) and `accepts` (requests the
//! downstream accepted, i.e. did not reject for overload). Each new request is rejected locally with
//! probability
//!
//! ```text
//! p = max(0, (requests − K·accepts) / (requests + 1))
//! ```
//!
//! With `K = 2` nothing is rejected while the downstream accepts at least half of what it gets;
//! past that, the client sends roughly `K·accepts`, so the downstream spends its capacity on work
//! it can do rather than on refusing. `K` closer to 1 is more aggressive, larger is more lenient.
//! An optional cap on `p` keeps a trickle of requests going, so the throttle notices recovery
//! promptly even under a total outage.
//!
//! The decision is exact: `p` is a ratio of integers, and a request is rejected when a uniform
//! sample falls under it, with no floating point. The window is kept in `buckets` slots and moves a
//! slot at a time.
//!
//! ```
//! use reliable_core::throttle::{AdaptiveThrottle, ThrottleConfig, ThrottlePolicy};
//! use reliable_core::Instant;
//!
//! let mut throttle: AdaptiveThrottle = AdaptiveThrottle::new(ThrottlePolicy::new(ThrottleConfig::google_sre())?)?;
//! let now = Instant::from_secs(1);
//! // 100 requests, of which the downstream accepted 20.
//! for i in 0..100 {
//!     throttle.try_acquire_with(now, u64::MAX).unwrap(); // a sample that never rejects
//!     throttle.record(now, i < 20);
//! }
//! // p = (100 − 2·20) / 101
//! assert!((throttle.rejection_probability(now) - 60.0 / 101.0).abs() < 1e-12);
//! assert!(throttle.try_acquire_with(now, 0).is_err()); // the smallest sample is rejected
//! # Ok::<(), reliable_core::ConfigError>(())
//! ```

use crate::error::{ConfigError, PPM, Problem, fraction_ppm, in_range};
use crate::ring::Ring;
use crate::sample::uniform_inclusive;
use crate::time::{Duration, Instant};

/// Adaptive throttling. Every field has a default (Google's), so `()` in RON is the book's throttle.
///
/// In RON: `(k: 2.0, window: "2m", buckets: 12, max_rejection: Some(0.9))`.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields, default))]
pub struct ThrottleConfig {
    /// The multiplier `K` on accepts, in [1, 1000]. Default 2.
    pub k: f64,
    /// How far back requests and accepts count. Default 2 minutes.
    pub window: Duration,
    /// Slots the window is kept in. Default 12 (10 s each).
    pub buckets: u32,
    /// The largest rejection probability, in [0, 1]. Default (`None`): no cap (the formula's own
    /// bound, just under 1).
    pub max_rejection: Option<f64>,
}

impl ThrottleConfig {
    /// The SRE book's throttle: `K = 2` over two minutes, no cap.
    pub const fn google_sre() -> Self {
        ThrottleConfig {
            k: 2.0,
            window: Duration::from_secs(120),
            buckets: 12,
            max_rejection: None,
        }
    }
}

impl Default for ThrottleConfig {
    /// [`ThrottleConfig::google_sre`].
    fn default() -> Self {
        ThrottleConfig::google_sre()
    }
}

/// A validated [`ThrottleConfig`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ThrottlePolicy {
    k_ppm: u64,
    width: u64,
    buckets: u32,
    max_ppm: u32,
}

impl ThrottlePolicy {
    /// Validates `config`. Errors name the field: `k`, `window`, `buckets`, `max_rejection`.
    pub fn new(config: ThrottleConfig) -> Result<Self, ConfigError> {
        let k = in_range("k", config.k, 1.0, 1_000.0)?;
        if config.buckets == 0 {
            return Err(ConfigError::new("buckets", Problem::Zero));
        }
        let width = config.window.as_nanos() / u64::from(config.buckets);
        if width == 0 {
            return Err(ConfigError::new(
                "window",
                Problem::Inconsistent("shorter than one nanosecond per bucket"),
            ));
        }
        let max_ppm = match config.max_rejection {
            Some(m) => fraction_ppm("max_rejection", m, true, true)?,
            None => PPM,
        };
        Ok(ThrottlePolicy {
            k_ppm: (k * f64::from(PPM) + 0.5) as u64,
            width,
            buckets: config.buckets,
            max_ppm,
        })
    }
}

/// A request the throttle shed locally, before it reached the downstream. (Not to be confused with
/// [`ErrorClass::Throttled`](crate::outcome::ErrorClass::Throttled), the downstream's own refusal.)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shed {
    /// The rejection probability at the time, in parts per million (rounded down).
    pub probability_ppm: u32,
}

/// Client-side adaptive throttling; `N` is the slot capacity (at least the policy's `buckets`).
/// Decisions take the randomness as an input: an [`rand_core::Rng`] or a raw sample.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdaptiveThrottle<const N: usize = 12> {
    policy: ThrottlePolicy,
    /// `a`: requests, `b`: accepts.
    ring: Ring<N>,
}

impl<const N: usize> AdaptiveThrottle<N> {
    /// A throttle that has seen nothing (rejects nothing). Fails if `N < buckets`.
    pub fn new(policy: ThrottlePolicy) -> Result<Self, ConfigError> {
        Ok(AdaptiveThrottle {
            ring: Ring::new(policy.width, policy.buckets, "buckets", "window")?,
            policy,
        })
    }

    /// The policy.
    pub fn policy(&self) -> &ThrottlePolicy {
        &self.policy
    }

    /// Requests and accepts in the window as of `now`.
    pub fn counts(&self, now: Instant) -> (u64, u64) {
        let t = self.ring.totals(now);
        (t.a, t.b)
    }

    /// The rejection probability as the exact fraction `numerator / denominator`, both scaled so
    /// the denominator fits in a `u64`.
    #[inline]
    fn fraction(&self, now: Instant) -> (u128, u128) {
        let (requests, accepts) = self.counts(now);
        fraction(requests, accepts, self.policy.k_ppm, self.policy.max_ppm)
    }

    /// The probability that a request at `now` is rejected:
    /// `min(cap, max(0, (requests − K·accepts) / (requests + 1)))`.
    pub fn rejection_probability(&self, now: Instant) -> f64 {
        let (num, den) = self.fraction(now);
        num as f64 / den as f64
    }

    /// Asks to send one request, drawing one `u64` from `rng`. Counts the request either way.
    pub fn try_acquire<R: rand_core::Rng + ?Sized>(
        &mut self,
        now: Instant,
        rng: &mut R,
    ) -> Result<(), Shed> {
        self.try_acquire_with(now, rng.next_u64())
    }

    /// Asks to send one request, with a given uniform sample (rejected when
    /// `sample / 2⁶⁴ < p`, so `u64::MAX` is never rejected and `0` is whenever `p > 0`). Counts the
    /// request either way.
    pub fn try_acquire_with(&mut self, now: Instant, sample: u64) -> Result<(), Shed> {
        let (num, den) = self.fraction(now);
        self.ring.add(now, 1, 0);
        // den - 1 < 2^64 by construction.
        let draw = uniform_inclusive(sample, (den - 1) as u64);
        if u128::from(draw) < num {
            // num <= den < 2^64: u64 arithmetic when num * PPM fits. den >= num > draw >= 0
            // here; `max(1)` says so to the compiler (no division-by-zero panic path).
            let probability_ppm = match (num as u64).checked_mul(u64::from(PPM)) {
                Some(scaled) if num < 1 << 64 => (scaled / (den as u64).max(1)) as u32,
                _ => (num * u128::from(PPM) / den.max(1)) as u32,
            };
            Err(Shed { probability_ppm })
        } else {
            Ok(())
        }
    }

    /// Reports the downstream's answer to a request that was sent: `accepted` unless it rejected
    /// the request for overload (throttled, 503, `RESOURCE_EXHAUSTED`). Other errors count as
    /// accepted: the downstream did take the request.
    pub fn record(&mut self, now: Instant, accepted: bool) {
        self.ring.add(now, 0, u32::from(accepted));
    }
}

/// An adaptive throttle of any window (any slot capacity `N`), as the call engine asks it: what
/// [`Shared::throttle`](crate::engine::Shared::throttle) hands over, so that a face keeping
/// throttles of several windows (a simulator's) hands each as it is.
pub trait AnyThrottle {
    /// See [`AdaptiveThrottle::try_acquire_with`].
    fn try_acquire_with(&mut self, now: Instant, sample: u64) -> Result<(), Shed>;
    /// See [`AdaptiveThrottle::record`].
    fn record(&mut self, now: Instant, accepted: bool);
}

impl<const N: usize> AnyThrottle for AdaptiveThrottle<N> {
    #[inline]
    fn try_acquire_with(&mut self, now: Instant, sample: u64) -> Result<(), Shed> {
        AdaptiveThrottle::try_acquire_with(self, now, sample)
    }
    #[inline]
    fn record(&mut self, now: Instant, accepted: bool) {
        AdaptiveThrottle::record(self, now, accepted);
    }
}

/// `min(max, (requests − K·accepts) / (requests + 1))` as `(numerator, denominator)`, both scaled
/// so the denominator fits in a `u64` (`k_ppm`, `max_ppm`: K and the cap in ppm).
#[inline]
fn fraction(requests: u64, accepts: u64, k_ppm: u64, max_ppm: u32) -> (u128, u128) {
    if requests < 1 << 32 && accepts < 1 << 32 {
        // The same arithmetic in u64: every product is below 2^62 (K <= 1000) and den below 2^52,
        // so nothing overflows and no shift is needed.
        let ppm = u64::from(PPM);
        let excess = (requests * ppm).saturating_sub(k_ppm * accepts);
        let den = (requests + 1) * ppm;
        let num = excess.min(u64::from(max_ppm) * (requests + 1));
        return (u128::from(num), u128::from(den));
    }
    fraction_u128(requests, accepts, k_ppm, max_ppm)
}

fn fraction_u128(requests: u64, accepts: u64, k_ppm: u64, max_ppm: u32) -> (u128, u128) {
    let ppm = u128::from(PPM);
    let excess =
        (u128::from(requests) * ppm).saturating_sub(u128::from(k_ppm) * u128::from(accepts));
    let den = (u128::from(requests) + 1) * ppm;
    let num = excess.min(u128::from(max_ppm) * (u128::from(requests) + 1));
    // den <= (2^64) * 10^6 < 2^84: shift both down until den fits in 64 bits.
    let shift = (128 - den.leading_zeros()).saturating_sub(64);
    (num >> shift, (den >> shift).max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn u64_fraction_equals_the_u128_one() {
        let mut x = 12u64;
        for i in 0..100_000u64 {
            x = crate::sample::splitmix64(x);
            let requests = if i % 2 == 0 { x >> 32 } else { x % 1_000 };
            let accepts = crate::sample::splitmix64(x) >> (32 + i % 32);
            let k_ppm = 1_000_000 + (x >> 7) % 999_000_001;
            let max_ppm = if i % 3 == 0 {
                PPM
            } else {
                (x % u64::from(PPM)) as u32
            };
            assert_eq!(
                fraction(requests, accepts, k_ppm, max_ppm),
                fraction_u128(requests, accepts, k_ppm, max_ppm)
            );
        }
    }

    fn throttle(config: ThrottleConfig) -> AdaptiveThrottle {
        AdaptiveThrottle::new(ThrottlePolicy::new(config).unwrap()).unwrap()
    }

    #[test]
    fn table_of_probabilities_step_by_step() {
        let mut t = throttle(ThrottleConfig::google_sre());
        let now = Instant::from_secs(1);
        // (requests to add, accepts to add, p after as (numerator, denominator))
        let steps: [(u64, u64, (u64, u64)); 5] = [
            (0, 0, (0, 1)),
            (10, 10, (0, 1)),   // all accepted
            (10, 0, (0, 1)),    // 20 requests, 10 accepts: 20 - 2*10 = 0
            (10, 0, (10, 31)),  // 30 - 20 = 10, over 31
            (69, 0, (79, 100)), // 99 - 20 = 79, over 100
        ];
        for (i, (requests, accepts, (num, den))) in steps.into_iter().enumerate() {
            for _ in 0..requests {
                t.try_acquire_with(now, u64::MAX).unwrap();
            }
            for _ in 0..accepts {
                t.record(now, true);
            }
            let p = t.rejection_probability(now);
            assert!((p - num as f64 / den as f64).abs() < 1e-15, "step {i}: {p}");
        }
        assert_eq!(t.counts(now), (99, 10));
        // The exact draw: a sample is rejected when sample / 2^64 < 79/100.
        let edge = (79u128 << 64) / 100;
        let mut probe = t.clone();
        assert_eq!(
            probe.try_acquire_with(now, (edge - 1) as u64),
            Err(Shed {
                probability_ppm: 790_000
            })
        );
        let mut probe = t.clone();
        assert!(probe.try_acquire_with(now, (edge + 1) as u64).is_ok());
        // Rejected requests count as requests.
        assert!(t.try_acquire_with(now, 0).is_err());
        assert_eq!(t.counts(now), (100, 10));
        // Two minutes later the window is empty again.
        let later = now + Duration::from_secs(120);
        assert_eq!(t.counts(later), (0, 0));
        assert_eq!(t.rejection_probability(later), 0.0);
    }

    #[test]
    fn the_cap_and_k_shape_the_probability() {
        let mut capped = throttle(ThrottleConfig {
            max_rejection: Some(0.5),
            ..ThrottleConfig::google_sre()
        });
        let mut lenient = throttle(ThrottleConfig {
            k: 1.5,
            ..ThrottleConfig::google_sre()
        });
        let now = Instant::ZERO;
        for i in 0..1_000u32 {
            for t in [&mut capped, &mut lenient] {
                let _ = t.try_acquire_with(now, u64::MAX);
                t.record(now, i % 10 == 0);
            }
        }
        assert_eq!(capped.rejection_probability(now), 0.5);
        let want = (1_000.0 - 1.5 * 100.0) / 1_001.0;
        assert!((lenient.rejection_probability(now) - want).abs() < 1e-12);
        // Under a total outage the uncapped probability approaches but never reaches 1.
        let mut outage = throttle(ThrottleConfig::google_sre());
        for _ in 0..100_000 {
            let _ = outage.try_acquire_with(now, u64::MAX);
        }
        assert!(outage.try_acquire_with(now, u64::MAX).is_ok());
        assert!(outage.rejection_probability(now) < 1.0);
    }

    #[test]
    fn rejects_each_bad_field_by_name() {
        let base = ThrottleConfig::google_sre();
        let field = |c| ThrottlePolicy::new(c).unwrap_err().field;
        assert_eq!(field(ThrottleConfig { k: 0.5, ..base }), "k");
        assert_eq!(
            field(ThrottleConfig {
                k: f64::NAN,
                ..base
            }),
            "k"
        );
        assert_eq!(field(ThrottleConfig { buckets: 0, ..base }), "buckets");
        assert_eq!(
            field(ThrottleConfig {
                window: Duration::from_nanos(3),
                ..base
            }),
            "window"
        );
        assert_eq!(
            field(ThrottleConfig {
                max_rejection: Some(1.5),
                ..base
            }),
            "max_rejection"
        );
        let many = ThrottlePolicy::new(ThrottleConfig {
            buckets: 13,
            ..base
        })
        .unwrap();
        assert_eq!(
            AdaptiveThrottle::<12>::new(many).unwrap_err().field,
            "buckets"
        );
        assert_eq!(ThrottleConfig::default(), base);
    }

    proptest::proptest! {
        #[test]
        fn no_panic_on_extreme_inputs(
            k in 1.0..=1_000.0f64,
            cap in proptest::option::of(0.0..=1.0f64),
            ops in proptest::collection::vec(
                (proptest::prop_oneof![
                    proptest::strategy::Just(0u64),
                    proptest::strategy::Just(u64::MAX),
                    proptest::prelude::any::<u64>(),
                ], proptest::prelude::any::<u64>(), proptest::prelude::any::<bool>()),
                1..300,
            ),
        ) {
            let mut t = throttle(ThrottleConfig { k, max_rejection: cap, window: Duration::MAX, buckets: 12 });
            for (at, sample, accepted) in ops {
                let now = Instant::from_nanos(at);
                if t.try_acquire_with(now, sample).is_ok() {
                    t.record(now, accepted);
                }
                let p = t.rejection_probability(now);
                proptest::prop_assert!((0.0..1.0).contains(&p));
            }
        }
    }
}

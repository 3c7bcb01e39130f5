//! The open-loop source: arrivals at a rate, whatever happened to earlier requests.
//!
//! The rate is piecewise constant: the base rate, its steps, times the load factor of any active
//! load spike. Poisson arrivals are drawn exactly for such a rate: one unit-exponential draw `E` per
//! arrival is spent across segments (in a segment of rate `r` and length `L`, `r·L` of `E` is used
//! up), so a rate change mid-gap is honoured without thinning. Constant arrivals spend exactly 1
//! per arrival the same way, so with a fixed rate the gaps are exactly `1 / rate`, and the first
//! arrival is at `start`.
//!
//! Each arrival then draws its client uniformly from `clients`. Both draws come from the workload
//! stream only, so arrivals are identical for every policy.

use rand_distr::{Distribution, Exp1};

use crate::engine::{Stream, StreamId};
use crate::model::faults::Timeline;
use crate::scenario::{Arrivals, RateStep};

/// The aggregate open-loop source.
#[derive(Clone, Debug)]
pub struct OpenLoop {
    rng: Stream,
    poisson: bool,
    clients: u32,
    /// `(from ns, base rate per second)`, in time order, the first at 0.
    base: Vec<(u64, f64)>,
    /// Where the next gap starts (the previous arrival).
    t: u64,
    /// No arrival before this.
    start: u64,
    first: bool,
    horizon: u64,
}

impl OpenLoop {
    /// A source for the given parameters under master seed `seed`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        seed: u64,
        rate: f64,
        arrivals: Arrivals,
        clients: u32,
        start: u64,
        steps: &[RateStep],
        horizon: u64,
    ) -> Self {
        let mut base = vec![(0, rate)];
        base.extend(steps.iter().map(|s| (s.at.as_nanos(), s.rate)));
        OpenLoop {
            rng: Stream::new(seed, StreamId::Workload),
            poisson: arrivals == Arrivals::Poisson,
            clients: clients.max(1),
            base,
            t: start,
            start,
            first: true,
            horizon,
        }
    }

    fn rate_at(&self, t: u64, faults: &Timeline) -> f64 {
        let base = self
            .base
            .iter()
            .rev()
            .find(|(from, _)| *from <= t)
            .map_or(0.0, |(_, r)| *r);
        base * faults.load_factor(t)
    }

    fn next_change(&self, t: u64, faults: &Timeline) -> u64 {
        let step = self
            .base
            .iter()
            .map(|(from, _)| *from)
            .find(|&from| from > t)
            .unwrap_or(u64::MAX);
        step.min(faults.next_load_change(t).unwrap_or(u64::MAX))
    }

    /// The arrivals each of `buckets` buckets of `bucket_ns` is scheduled to get: the integral of
    /// the rate (steps and load spikes included, zero before `start`) over the bucket.
    pub fn scheduled(&self, faults: &Timeline, bucket_ns: u64, buckets: usize) -> Vec<f64> {
        let end = (bucket_ns as u128 * buckets as u128).min(u128::from(u64::MAX)) as u64;
        let mut cuts: Vec<u64> = vec![self.start, end];
        cuts.extend(self.base.iter().map(|(from, _)| *from));
        let mut t = 0;
        while let Some(next) = faults.next_load_change(t) {
            cuts.push(next);
            t = next;
        }
        cuts.extend((1..buckets as u64).map(|k| k * bucket_ns));
        cuts.retain(|&c| c >= self.start && c <= end);
        cuts.sort_unstable();
        cuts.dedup();
        let mut out = vec![0.0; buckets];
        for pair in cuts.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            let i = ((a / bucket_ns.max(1)) as usize).min(buckets.saturating_sub(1));
            if let Some(slot) = out.get_mut(i) {
                *slot += self.rate_at(a, faults) * (b - a) as f64 / 1e9;
            }
        }
        out
    }

    /// The next arrival: its time and client, or `None` if there is none before the horizon.
    pub fn next(&mut self, faults: &Timeline) -> Option<(u64, u32)> {
        let mut budget: f64 = if !self.poisson && self.first {
            0.0
        } else if self.poisson {
            Exp1.sample(self.rng.rng())
        } else {
            1.0
        };
        self.first = false;
        let mut t = self.t;
        loop {
            if t >= self.horizon {
                self.t = t;
                return None;
            }
            let rate = self.rate_at(t, faults);
            let change = self.next_change(t, faults);
            if rate > 0.0 {
                let gap_ns = budget / rate * 1e9;
                if (t as f64 + gap_ns) < change as f64 {
                    let at = t
                        .saturating_add(gap_ns.round() as u64)
                        .min(change.saturating_sub(1).max(t));
                    self.t = at;
                    if at >= self.horizon {
                        return None;
                    }
                    let client = self.rng.below(u64::from(self.clients)) as u32;
                    return Some((at, client));
                }
                budget -= rate * (change.saturating_sub(t)) as f64 / 1e9;
                if budget < 0.0 {
                    budget = 0.0;
                }
            }
            if change == u64::MAX {
                self.t = u64::MAX;
                return None;
            }
            t = change;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::{Fault, Scenario};
    use reliable_core::Duration;

    fn timeline_with_spike(from: u64, until: u64, factor: f64) -> Timeline {
        let text = format!(
            "Scenario(name: \"t\", horizon: \"100s\", workload: OpenLoop(rate: 1.0), downstreams: [], policies: [], faults: [LoadSpike(from: \"{from}s\", until: \"{until}s\", factor: {factor})])"
        );
        let s: Scenario = crate::scenario::parse::parse(&text, "t").unwrap();
        assert!(matches!(s.faults[0], Fault::LoadSpike { .. }));
        Timeline::new(&s)
    }

    #[test]
    fn constant_arrivals_are_exact() {
        let mut src = OpenLoop::new(
            1,
            0.2,
            Arrivals::Constant,
            1,
            5_000_000_000,
            &[],
            61_000_000_000,
        );
        let none = Timeline::default();
        let times: Vec<u64> = std::iter::from_fn(|| src.next(&none))
            .map(|(t, _)| t / 1_000_000_000)
            .collect();
        assert_eq!(times, (1..=12).map(|k| k * 5).collect::<Vec<_>>());
    }

    #[test]
    fn poisson_counts_follow_steps_and_spikes() {
        let steps = [RateStep {
            at: Duration::from_secs(50),
            rate: 2_000.0,
        }];
        let spike = timeline_with_spike(20, 30, 3.0);
        let mut src = OpenLoop::new(
            9,
            1_000.0,
            Arrivals::Poisson,
            10,
            0,
            &steps,
            100_000_000_000,
        );
        let mut per_window = [0u64; 3];
        let mut clients = [0u64; 10];
        while let Some((t, c)) = src.next(&spike) {
            let s = t / 1_000_000_000;
            if s < 20 {
                per_window[0] += 1;
            } else if s < 30 {
                per_window[1] += 1;
            } else if s >= 50 {
                per_window[2] += 1;
            }
            clients[c as usize] += 1;
        }
        let near = |got: u64, want: f64| (got as f64 - want).abs() < 4.0 * want.sqrt() + 1.0;
        assert!(near(per_window[0], 20_000.0), "{per_window:?}");
        assert!(near(per_window[1], 30_000.0), "{per_window:?}");
        assert!(near(per_window[2], 100_000.0), "{per_window:?}");
        assert!(clients.iter().all(|&n| n > 10_000), "{clients:?}");
    }

    #[test]
    fn scheduled_arrivals_integrate_steps_spikes_and_start() {
        let steps = [RateStep {
            at: Duration::from_millis(2_500),
            rate: 20.0,
        }];
        let spike = timeline_with_spike(3, 4, 2.0);
        let src = OpenLoop::new(
            1,
            10.0,
            Arrivals::Poisson,
            1,
            500_000_000,
            &steps,
            5_000_000_000,
        );
        let got = src.scheduled(&spike, 1_000_000_000, 5);
        assert_eq!(got, vec![5.0, 10.0, 15.0, 40.0, 20.0]);
    }

    #[test]
    fn same_seed_same_arrivals() {
        let none = Timeline::default();
        let run = |seed| {
            let mut s = OpenLoop::new(seed, 50.0, Arrivals::Poisson, 3, 0, &[], 10_000_000_000);
            std::iter::from_fn(|| s.next(&none)).collect::<Vec<_>>()
        };
        assert_eq!(run(4), run(4));
        assert_ne!(run(4), run(5));
    }
}

//! [`Timeline`]: the scenario's faults, answering "what is wrong with downstream `d` at `t`?".
//!
//! Faults are windows `[from, until)`. Overlapping faults combine: error rates as independent
//! chances (`1 − Π(1 − p)`), latency factors and load factors multiply, capacity losses take the
//! largest share, an outage wins over everything, the first active throttle applies. Queries scan
//! the few faults of one downstream, in file order, so the answer never depends on hashing. The
//! error-rate and latency combinations are the core's (`reliable_core::chaos`), which a client's
//! chaos layer replaying the same faults uses too.

use crate::scenario::{Fault, OutageMode, Scenario};
use reliable_core::chaos::{combined_error_rate, combined_latency_factor};

/// One compiled fault.
#[derive(Clone, Debug)]
struct Entry {
    index: u16,
    from: u64,
    until: u64,
    fault: Fault,
}

/// The fault timeline of a scenario.
#[derive(Clone, Debug, Default)]
pub struct Timeline {
    /// Per downstream index, its faults.
    by_ds: Vec<Vec<Entry>>,
    /// Load spikes.
    load: Vec<Entry>,
    /// Start and end of every fault window, for edge events.
    edges: Vec<(u64, u16)>,
    /// The union's outer bounds: first start, last end.
    span: Option<(u64, u64)>,
}

/// What an arriving call meets at a downstream.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Conditions {
    /// An outage, and how it fails.
    pub outage: Option<OutageMode>,
    /// A throttle: share rejected and the fault's index (for its Retry-After).
    pub throttle: Option<(f64, u16)>,
}

impl Timeline {
    /// Compiles the faults of `s` (names must be valid).
    pub fn new(s: &Scenario) -> Self {
        let mut t = Timeline {
            by_ds: vec![Vec::new(); s.downstreams.len()],
            ..Default::default()
        };
        for (i, f) in s.faults.iter().enumerate() {
            let (from, until) = f.window();
            let e = Entry {
                index: i as u16,
                from: from.as_nanos(),
                until: until.as_nanos(),
                fault: f.clone(),
            };
            t.edges.push((e.from, e.index));
            t.edges.push((e.until, e.index));
            t.span = Some(match t.span {
                None => (e.from, e.until),
                Some((a, b)) => (a.min(e.from), b.max(e.until)),
            });
            match f.downstream() {
                Some(name) => {
                    if let Some(d) = s.downstreams.iter().position(|d| d.name == name) {
                        t.by_ds[d].push(e);
                    }
                }
                None => t.load.push(e),
            }
        }
        t.edges.sort_unstable();
        t
    }

    /// Instants at which some fault starts or ends, with the fault's index, in time order.
    pub fn edges(&self) -> &[(u64, u16)] {
        &self.edges
    }

    /// `[first start, last end)` over all faults, or `None` without faults.
    pub fn span(&self) -> Option<(u64, u64)> {
        self.span
    }

    #[inline]
    fn active(&self, ds: usize, t: u64) -> impl Iterator<Item = &Entry> {
        self.by_ds
            .get(ds)
            .into_iter()
            .flatten()
            .filter(move |e| e.from <= t && t < e.until)
    }

    /// Whether downstream `ds` has any fault at all (lets the hot path skip queries).
    #[inline]
    pub fn has_faults(&self, ds: usize) -> bool {
        self.by_ds.get(ds).is_some_and(|v| !v.is_empty())
    }

    /// Outage and throttle at arrival.
    pub fn on_arrival(&self, ds: usize, t: u64) -> Conditions {
        let mut c = Conditions {
            outage: None,
            throttle: None,
        };
        for e in self.active(ds, t) {
            match &e.fault {
                Fault::Outage { mode, .. } => {
                    // Hang wins over fail-fast if both are active: nothing comes back.
                    c.outage = Some(match (c.outage, mode) {
                        (Some(OutageMode::Hang), _) | (_, OutageMode::Hang) => OutageMode::Hang,
                        _ => OutageMode::FailFast,
                    });
                }
                Fault::Throttle { share, .. } if c.throttle.is_none() => {
                    c.throttle = Some((*share, e.index));
                }
                _ => {}
            }
        }
        c
    }

    /// If a partition of downstream `ds` is active at `t`: when traffic held at `t` is delivered
    /// (the latest end among the active partitions).
    #[inline]
    pub fn held_until(&self, ds: usize, t: u64) -> Option<u64> {
        self.active(ds, t)
            .filter(|e| matches!(e.fault, Fault::Partition { .. }))
            .map(|e| e.until)
            .max()
    }

    /// The combined injected error rate at `t`.
    pub fn error_rate(&self, ds: usize, t: u64) -> f64 {
        combined_error_rate(self.active(ds, t).filter_map(|e| match e.fault {
            Fault::ErrorRate { rate, .. } => Some(rate),
            _ => None,
        }))
    }

    /// The combined latency factor at `t` (1 when none).
    pub fn latency_factor(&self, ds: usize, t: u64) -> f64 {
        combined_latency_factor(self.active(ds, t).filter_map(|e| match e.fault {
            Fault::LatencyInflation { factor, .. } => Some(factor),
            _ => None,
        }))
    }

    /// The largest share of workers lost at `t` (0 when none).
    pub fn capacity_lost(&self, ds: usize, t: u64) -> f64 {
        self.active(ds, t)
            .filter_map(|e| match e.fault {
                Fault::CapacityLoss { share, .. } => Some(share),
                _ => None,
            })
            .fold(0.0, f64::max)
    }

    /// The combined load factor at `t` (1 when none).
    pub fn load_factor(&self, t: u64) -> f64 {
        self.load
            .iter()
            .filter(|e| e.from <= t && t < e.until)
            .filter_map(|e| match e.fault {
                Fault::LoadSpike { factor, .. } => Some(factor),
                _ => None,
            })
            .product()
    }

    /// Instants after `t` at which the load factor changes, earliest first.
    pub fn next_load_change(&self, t: u64) -> Option<u64> {
        self.load
            .iter()
            .flat_map(|e| [e.from, e.until])
            .filter(|&x| x > t)
            .min()
    }

    /// Downstreams that fault `index` hits (for capacity re-checks at its edges).
    pub fn downstream_of(&self, index: u16) -> Option<usize> {
        self.by_ds
            .iter()
            .position(|v| v.iter().any(|e| e.index == index))
    }
}

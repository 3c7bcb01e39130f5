//! Figures per hop of a call graph (scenarios whose downstreams include services: a `handler`
//! that calls other downstreams).
//!
//! - **depth** of a downstream: the fewest hops from the edge (the workload's stack calls depth
//!   1; a service at depth d calls depth d + 1). A downstream no path reaches has none.
//! - **amplification** of a downstream = its arrivals ÷ the edge's first tries (logical requests);
//!   per bucket for the plot of amplification by depth over time (arrivals at every downstream
//!   of that depth ÷ first tries in the bucket). With every call failing and no other limit, a
//!   leaf's amplification is the product of the attempts at each hop above it.
//! - In a call graph the run's own `server_arrivals` (and so its amplification, overall, peak,
//!   during and after the fault) counts the arrivals at depth 1 only: the load the edge sends.
//!   The per-downstream counts (`downstreams`) keep every arrival.
//! - **goodput** of a downstream: its successful answers per second of the run.
//! - **latency**: the mean time from a caller's send to the answer (or the caller's timeout), over
//!   the attempts that reached an end, in milliseconds.
//! - **wasted share**: service time on jobs whose caller had already given up when the job's
//!   service ended ÷ the downstream's service time (a service's handler calls are made whatever
//!   happened to its caller unless deadlines propagate).
//! - **past deadline**: with deadline propagation, jobs refused on arrival or dropped from the
//!   queue because their caller's deadline (less the margin) had passed, and handlers that
//!   stopped before their calls for the same reason.
//! - **verdict** of a downstream: its successful answers per bucket judged like the edge's
//!   goodput (see the parent module: threshold, relapse and sustain against its pre-fault mean
//!   per bucket), without the queue and latency condition.

use serde::{Deserialize, Serialize};

use super::summary::{Judged, recovery};
use super::{Bucket, Mean, Verdict};

/// Per-hop counters of one run over a call graph.
#[derive(Clone, Debug, Default)]
pub struct HopCounters {
    /// Per downstream: its depth (`u32::MAX`: unreachable).
    pub depth: Vec<u32>,
    /// Per downstream, per bucket: arrivals.
    pub arrivals: Vec<Vec<u32>>,
    /// Per downstream, per bucket: successful answers.
    pub ok: Vec<Vec<u32>>,
    /// Per downstream: attempts that ended (answered or timed out) and their latency, µs.
    pub ended: Vec<(u64, u64)>,
    /// Per downstream: jobs refused, dropped or stopped past their caller's deadline.
    pub past_deadline: Vec<u64>,
}

impl HopCounters {
    /// Counters for `depth.len()` downstreams and `buckets` buckets.
    pub fn new(depth: Vec<u32>, buckets: usize) -> Self {
        let n = depth.len();
        HopCounters {
            depth,
            arrivals: vec![vec![0; buckets.max(1)]; n],
            ok: vec![vec![0; buckets.max(1)]; n],
            ended: vec![(0, 0); n],
            past_deadline: vec![0; n],
        }
    }

    /// Whether downstream `ds` is at depth 1 (called by the edge).
    #[inline]
    pub fn is_edge(&self, ds: u16) -> bool {
        self.depth.get(ds as usize) == Some(&1)
    }

    /// Deepest reachable depth.
    pub fn max_depth(&self) -> u32 {
        self.depth
            .iter()
            .copied()
            .filter(|&d| d != u32::MAX)
            .max()
            .unwrap_or(0)
    }

    /// Per depth (1 to the deepest), per bucket: the arrivals at every downstream of that depth
    /// and the edge's first tries in the bucket, for the plot of amplification by depth over time.
    pub fn arrivals_by_depth(&self, buckets: &[Bucket]) -> Vec<Vec<(u64, u64)>> {
        (1..=self.max_depth())
            .map(|d| {
                buckets
                    .iter()
                    .enumerate()
                    .map(|(b, bucket)| {
                        let arrived = (0..self.depth.len())
                            .filter(|&i| self.depth[i] == d)
                            .map(|i| u64::from(self.arrivals[i].get(b).copied().unwrap_or(0)))
                            .sum();
                        (arrived, bucket.first_tries)
                    })
                    .collect()
            })
            .collect()
    }
}

/// One downstream's figures in a call graph (see the module docs).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HopSummary {
    /// Its name.
    pub name: String,
    /// Fewest hops from the edge; `null` if no path reaches it.
    pub depth: Option<u32>,
    /// Calls arriving.
    pub arrivals: u64,
    /// Arrivals ÷ the edge's first tries.
    pub amplification: f64,
    /// Successful answers per second.
    pub goodput_per_s: f64,
    /// Mean caller-observed latency of an attempt, ms.
    pub latency_ms: f64,
    /// Service time on jobs whose caller had given up ÷ all its service time.
    pub wasted_share: f64,
    /// Jobs refused, dropped or stopped past their caller's deadline.
    pub past_deadline: u64,
    /// Its goodput judged like the edge's.
    pub verdict: Verdict,
}

/// What [`summarize`] needs besides the counters.
#[derive(Debug)]
pub struct HopContext<'a> {
    /// Downstream names.
    pub names: &'a [String],
    /// Per downstream: arrivals, service time and wasted service time (µs).
    pub totals: Vec<(u64, u64, u64)>,
    /// The edge's first tries.
    pub first_tries: u64,
    /// Horizon, ns.
    pub horizon_ns: u64,
    /// Bucket width, ns.
    pub bucket_ns: u64,
    /// The fault span.
    pub fault: Option<(u64, u64)>,
    /// Recovery threshold, relapse and sustain (ns).
    pub rule: (f64, f64, u64),
}

/// Per-downstream figures of one run.
pub fn summarize(h: &HopCounters, cx: &HopContext<'_>) -> Vec<HopSummary> {
    let horizon_s = cx.horizon_ns as f64 / 1e9;
    (0..h.depth.len())
        .map(|i| {
            let (arrivals, work, wasted) = cx.totals.get(i).copied().unwrap_or_default();
            let ok: u64 = h.ok[i].iter().map(|&x| u64::from(x)).sum();
            let (ended, lat) = h.ended[i];
            let verdict = match cx.fault {
                None => Verdict::NoFault,
                Some((start, end)) => {
                    let w = cx.bucket_ns.max(1);
                    let buckets: Vec<Bucket> = h.ok[i]
                        .iter()
                        .map(|&x| Bucket {
                            successes: u64::from(x),
                            ..Bucket::default()
                        })
                        .collect();
                    let whole = ((start / w) as usize).min(buckets.len());
                    let from = usize::from(whole >= 2);
                    let pre = &buckets[from.min(whole)..whole];
                    let base = if pre.is_empty() {
                        0.0
                    } else {
                        pre.iter().map(|b| b.successes).sum::<u64>() as f64 / pre.len() as f64
                    };
                    let healthy = vec![base; buckets.len()];
                    let (threshold, relapse, sustain) = cx.rule;
                    match recovery(&buckets, &healthy, w, end, threshold, relapse, sustain) {
                        Judged::Recovered(_) => Verdict::Recovered,
                        Judged::Stuck => Verdict::Stuck,
                        Judged::Inconclusive => Verdict::Inconclusive,
                    }
                }
            };
            HopSummary {
                name: cx.names.get(i).cloned().unwrap_or_default(),
                depth: (h.depth[i] != u32::MAX).then_some(h.depth[i]),
                arrivals,
                amplification: if cx.first_tries == 0 {
                    0.0
                } else {
                    arrivals as f64 / cx.first_tries as f64
                },
                goodput_per_s: if horizon_s > 0.0 {
                    ok as f64 / horizon_s
                } else {
                    0.0
                },
                latency_ms: if ended == 0 {
                    0.0
                } else {
                    lat as f64 / ended as f64 / 1e3
                },
                wasted_share: if work == 0 {
                    0.0
                } else {
                    wasted as f64 / work as f64
                },
                past_deadline: h.past_deadline[i],
                verdict,
            }
        })
        .collect()
}

impl Mean for HopSummary {
    fn mean(runs: &[&Self]) -> Self {
        let verdicts = super::Verdicts::count(runs.iter().map(|r| r.verdict));
        let col = |f: fn(&HopSummary) -> f64| {
            let v: Vec<f64> = runs.iter().map(|r| f(r)).collect();
            let refs: Vec<&f64> = v.iter().collect();
            f64::mean(&refs)
        };
        let counts = |f: fn(&HopSummary) -> u64| {
            let v: Vec<u64> = runs.iter().map(|r| f(r)).collect();
            let refs: Vec<&u64> = v.iter().collect();
            u64::mean(&refs)
        };
        HopSummary {
            name: runs[0].name.clone(),
            depth: runs[0].depth,
            arrivals: counts(|h| h.arrivals),
            amplification: col(|h| h.amplification),
            goodput_per_s: col(|h| h.goodput_per_s),
            latency_ms: col(|h| h.latency_ms),
            wasted_share: col(|h| h.wasted_share),
            past_deadline: counts(|h| h.past_deadline),
            verdict: verdicts.most_common().unwrap_or(runs[0].verdict),
        }
    }
}

impl Mean for Option<Vec<HopSummary>> {
    fn mean(runs: &[&Self]) -> Self {
        let present: Vec<&Vec<HopSummary>> = runs.iter().filter_map(|x| x.as_ref()).collect();
        let first = present.first()?;
        Some(
            (0..first.len())
                .map(|i| {
                    let col: Vec<&HopSummary> = present.iter().filter_map(|v| v.get(i)).collect();
                    HopSummary::mean(&col)
                })
                .collect(),
        )
    }
}

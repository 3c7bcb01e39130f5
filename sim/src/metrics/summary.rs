//! [`PolicySummary`]: one run's headline numbers (the `summary.json` contract), computed from a
//! [`Recorder`] by the rules in the [module docs](super).

use serde::{Deserialize, Serialize};

use super::recorder::{Bucket, Recorder};
use super::{GiveUps, Verdict, Verdicts};

/// Amplification figures.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Amplification {
    /// Server arrivals ÷ first tries, whole run.
    pub overall: f64,
    /// Largest per-bucket ratio.
    pub peak: f64,
    /// While faults are active; `null` without faults.
    pub during_fault: Option<f64>,
    /// After the last fault ends; `null` without faults.
    pub after_fault: Option<f64>,
    /// Attempts sent ÷ first tries while faults are active (what clients sent, whether or not it
    /// arrived: a partition or a hanging outage keeps it from the server); `null` without faults.
    #[serde(default)]
    pub sent_during_fault: Option<f64>,
}

/// Latency percentiles in milliseconds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// Mean.
    pub mean: f64,
    /// Samples.
    pub count: u64,
}

/// One downstream's totals.
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct DownstreamSummary {
    /// Its name.
    pub name: String,
    /// Calls arriving.
    pub arrivals: u64,
    /// Successful answers.
    pub ok: u64,
    /// Error answers.
    pub errors: u64,
    /// Refused without serving.
    pub rejections: u64,
    /// Swallowed by a hanging outage (sent, never arrived).
    pub hung: u64,
    /// Calls and answers held by a partition until it healed.
    #[serde(default)]
    pub held: u64,
    /// Jobs served.
    pub completions: u64,
    /// Busy time in seconds.
    pub work_s: f64,
    /// Wasted busy time in seconds.
    pub wasted_s: f64,
    /// Register: committed writes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commits: Option<u64>,
    /// Register: conflicting writes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conflicts: Option<u64>,
    /// A replica whose balancer detects outliers: times it was ejected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ejections: Option<u64>,
}

/// The summary of one (policy, seed) run. The first fields are the `summary.json` contract.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PolicySummary {
    /// The policy's name.
    pub name: String,
    /// Logical requests started.
    pub first_tries: u64,
    /// Calls sent.
    pub attempts: u64,
    /// Calls reaching a downstream.
    pub server_arrivals: u64,
    /// Logical requests that succeeded.
    pub successes: u64,
    /// Successes ÷ first tries.
    pub success_rate: f64,
    /// Successes per second.
    pub goodput_per_s: f64,
    /// Amplification.
    pub amplification: Amplification,
    /// Latency of finished requests.
    pub latency_ms: Latency,
    /// Wasted service time ÷ all service time.
    pub wasted_work_share: f64,
    /// Time from the last fault's end to recovery (goodput back and staying back, queue and
    /// latency back to their pre-fault level), or `null`.
    pub recovery_s: Option<f64>,
    /// Time from the last fault's end until goodput alone was back for good, or `null`.
    #[serde(default)]
    pub goodput_recovery_s: Option<f64>,
    /// How the run ended up after its faults; over several seeds, the most common verdict, a tie
    /// going to the more severe.
    pub verdict: Verdict,
    /// With several seeds: how many runs got each verdict (empty for a single run).
    #[serde(default, skip_serializing_if = "Verdicts::is_empty")]
    pub verdicts: Verdicts,
    /// The seed of this run.
    pub seed: u64,
    /// Attempts after the first of their request.
    pub retries: u64,
    /// Logical requests that failed.
    pub failures: u64,
    /// Logical requests still in flight at the horizon.
    pub unfinished: u64,
    /// Attempts timed out.
    pub timeouts: u64,
    /// Calls refused by downstreams.
    pub server_rejections: u64,
    /// Calls refused by client layers.
    pub local_rejections: u64,
    /// Replies that came after their attempt had ended.
    pub late_replies: u64,
    /// Successful answers ÷ server arrivals.
    pub server_success_rate: f64,
    /// Latency of successful requests.
    pub success_latency_ms: Latency,
    /// Pre-fault goodput per second that recovery is judged against (`null` without faults).
    pub baseline_goodput_per_s: Option<f64>,
    /// Job sets: when the last job finished successfully, if all did.
    pub makespan_s: Option<f64>,
    /// Breaker state changes.
    pub breaker_transitions: u64,
    /// Retry layers that gave up, by reason (`max-attempts`, `budget`, `deadline`, ...).
    pub give_ups: GiveUps,
    /// Most logical requests in flight at once.
    pub peak_in_flight: u64,
    /// Events processed.
    pub events: u64,
    /// Per downstream.
    pub downstreams: Vec<DownstreamSummary>,
    /// Tokens and money, for scenarios with an LLM provider.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub llm: Option<super::llm::LlmSummary>,
    /// What the policy's breakers in shadow mode would have done, for a policy with one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shadow: Option<ShadowSummary>,
    /// How a fleet breaker (`Fleet` scope) decided and what its store did, for a policy with one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fleet: Option<FleetSummary>,
    /// How a fleet retry budget (`budget_scope: Fleet`) decided and what its store did, for a
    /// policy with one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fleet_budget: Option<FleetBudgetSummary>,
    /// Hedges, extra attempts by kind and limits, for stacks with a `Hedge`, `Ledger` or `Limit`
    /// layer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extra: Option<super::extra::ExtraSummary>,
    /// Per downstream of a call graph (a scenario with services): depth, amplification, goodput,
    /// latency, waste and verdict (see [`super::hops`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hops: Option<Vec<super::hops::HopSummary>>,
}

/// What a policy's breakers in shadow mode (`shadow: true` in a breaker's config) would have
/// done: they admit every call, so the policy sends as without them, and report their would-be
/// decisions here instead of in `local_rejections` and `breaker_transitions`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ShadowSummary {
    /// Calls they admitted that they would have rejected.
    pub would_reject: u64,
    /// Their would-be state changes.
    pub transitions: u64,
    /// Of which openings.
    pub opens: u64,
    /// When one first would have opened, seconds from the start; `null` if none would have.
    pub first_open_s: Option<f64>,
    /// When one first would have rejected a call, seconds from the start; `null` if none would
    /// have.
    pub first_reject_s: Option<f64>,
}

/// How a policy's fleet breakers decided and what their store did in one run (see
/// `client::fleet` for the rules): counts of calls by who decided them, the waits for the store,
/// the results replayed after it failed, and the fleet breaker's openings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FleetSummary {
    /// Operations sent to the store.
    pub store_ops: u64,
    /// Of which failed (timed out, refused, the client's network down).
    pub store_failures: u64,
    /// Calls decided by the store.
    pub by_store: u64,
    /// Calls decided on a cached view of the store's state.
    pub by_cache: u64,
    /// Calls decided by the client's own breaker (the store failed, rested, or the view was too
    /// old).
    pub by_local: u64,
    /// Calls refused because the store failed and the scope fails closed.
    pub store_refusals: u64,
    /// Results replayed into the fleet's breaker when the store answered again.
    pub reconciled: u64,
    /// Mean wait for the store of a decision that waited, ms.
    pub mean_wait_ms: f64,
    /// Longest wait for the store, ms.
    pub longest_wait_ms: f64,
    /// Times the fleet's breaker opened.
    pub fleet_opens: u64,
    /// When it first opened, seconds from the start; `null` if it never did.
    pub first_fleet_open_s: Option<f64>,
}

impl FleetSummary {
    fn new(c: &crate::client::fleet::FleetCounters) -> Self {
        FleetSummary {
            store_ops: c.store_ops,
            store_failures: c.store_failures,
            by_store: c.by_store,
            by_cache: c.by_cache,
            by_local: c.by_local,
            store_refusals: c.store_refusals,
            reconciled: c.reconciled,
            mean_wait_ms: if c.waits == 0 {
                0.0
            } else {
                c.wait_ns as f64 / c.waits as f64 / 1e6
            },
            longest_wait_ms: c.longest_wait_ns as f64 / 1e6,
            fleet_opens: c.fleet_opens,
            first_fleet_open_s: c.first_fleet_open_ns.map(|n| n as f64 / 1e9),
        }
    }
}

/// How a policy's fleet retry budgets decided and what their store did in one run (see
/// `client::fleet_budget` for the rules).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FleetBudgetSummary {
    /// Operations sent to the store.
    pub store_ops: u64,
    /// Of which failed (timed out, refused, the client's network down).
    pub store_failures: u64,
    /// Retries granted on the allowance taken from the fleet.
    pub granted: u64,
    /// Retries refused with no grant left (the fleet's ratio spent, or the allowance not back).
    pub refused: u64,
    /// Retries decided by the client's own budget while the store failed.
    pub by_local: u64,
    /// Retries refused because the store failed and the scope fails closed.
    pub store_refusals: u64,
    /// Grants the store gave (withdrawn from the fleet's window; some lapse unused).
    pub grants_taken: u64,
}

impl FleetBudgetSummary {
    fn new(c: &crate::client::fleet_budget::FleetBudgetCounters) -> Self {
        FleetBudgetSummary {
            store_ops: c.store_ops,
            store_failures: c.store_failures,
            granted: c.granted,
            refused: c.refused,
            by_local: c.by_local,
            store_refusals: c.store_refusals,
            grants_taken: c.grants_taken,
        }
    }
}

impl ShadowSummary {
    fn new(c: &super::recorder::ShadowCounters) -> Self {
        ShadowSummary {
            would_reject: c.would_reject,
            transitions: c.transitions,
            opens: c.opens,
            first_open_s: c.first_open_ns.map(|n| n as f64 / 1e9),
            first_reject_s: c.first_reject_ns.map(|n| n as f64 / 1e9),
        }
    }
}

/// What [`summarize`] needs besides the recorder.
#[derive(Clone, Debug)]
pub struct Context<'a> {
    /// Policy name.
    pub name: &'a str,
    /// Seed.
    pub seed: u64,
    /// Horizon, ns.
    pub horizon_ns: u64,
    /// Bucket width, ns.
    pub bucket_ns: u64,
    /// `[first start, last end)` of the faults.
    pub fault: Option<(u64, u64)>,
    /// Recovery threshold.
    pub threshold: f64,
    /// Relapse threshold (see [`recovery`]).
    pub relapse: f64,
    /// Queue and latency tolerance (see [`settled_from`]).
    pub settle: f64,
    /// Recovery sustain, ns.
    pub sustain_ns: u64,
    /// Requests in flight at the end.
    pub unfinished: u64,
    /// Makespan if a job set finished.
    pub makespan_ns: Option<u64>,
    /// Events processed.
    pub events: u64,
    /// Downstream names.
    pub ds_names: &'a [String],
    /// Register commits and conflicts per downstream (None for other models).
    pub register: Vec<Option<(u64, u64)>>,
    /// Open loops: the arrivals each bucket is scheduled to get (rate × width, steps and load
    /// spikes included), which recovery is judged against.
    pub scheduled: Option<Vec<f64>>,
    /// The ledgers' counts, for stacks with a ledger.
    pub ledger: Option<super::extra::LedgerCounts>,
    /// Whether the stack has a concurrency limit.
    pub limited: bool,
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 { 0.0 } else { a as f64 / b as f64 }
}

fn latency(h: &hdrhistogram::Histogram<u64>) -> Latency {
    let q = |p: f64| {
        if h.is_empty() {
            0.0
        } else {
            h.value_at_quantile(p) as f64 / 1_000.0
        }
    };
    Latency {
        p50: q(0.5),
        p99: q(0.99),
        p999: q(0.999),
        mean: if h.is_empty() {
            0.0
        } else {
            h.mean() / 1_000.0
        },
        count: h.len(),
    }
}

/// Steps of the percentile curve, in nines (see [`percentile_curve`]).
pub const CURVE_STEP_NINES: f64 = 0.05;
/// The curve goes up to this many nines (p99.999).
pub const CURVE_MAX_NINES: f64 = 5.0;

/// Latency in milliseconds at percentiles spaced evenly in *nines*: `(n, ms)` where the
/// percentile is `1 − 10^−n` (n = 0 is the minimum, 1 is p90, 2 is p99, 3 is p99.9), from 0 to
/// [`CURVE_MAX_NINES`] in steps of [`CURVE_STEP_NINES`]. Empty for an empty histogram.
pub fn percentile_curve(h: &hdrhistogram::Histogram<u64>) -> Vec<(f64, f64)> {
    if h.is_empty() {
        return Vec::new();
    }
    let steps = (CURVE_MAX_NINES / CURVE_STEP_NINES).round() as u32;
    (0..=steps)
        .map(|k| {
            let n = f64::from(k) * CURVE_STEP_NINES;
            let q = 1.0 - 10f64.powf(-n);
            (n, h.value_at_quantile(q) as f64 / 1_000.0)
        })
        .collect()
}

/// The latency in milliseconds at `nines` (the percentile `1 − 10^−nines`), or `None` for an
/// empty histogram. A fan-out of `n` independent calls answers when its slowest does: its
/// p99.9 is one call's percentile `0.999^(1/n)`, about `3 + log10(n)` nines (6 for 1,000).
pub fn latency_at_nines(h: &hdrhistogram::Histogram<u64>, nines: f64) -> Option<f64> {
    (!h.is_empty()).then(|| h.value_at_quantile(1.0 - 10f64.powf(-nines)) as f64 / 1_000.0)
}

/// Whole buckets before `fault_start`, leaving out bucket 0 (warm-up) when there are at least two.
fn pre_fault(buckets: &[Bucket], bucket_ns: u64, fault_start: u64) -> &[Bucket] {
    let whole = ((fault_start / bucket_ns.max(1)) as usize).min(buckets.len());
    let from = usize::from(whole >= 2);
    &buckets[from.min(whole)..whole]
}

/// The successes each bucket should have if the system were as healthy as before the faults
/// (see the module docs): for an open loop, the pre-fault success ratio times the scheduled
/// arrivals of the bucket (`scheduled`); otherwise the pre-fault mean successes per bucket (or,
/// with no whole bucket before the faults, the mean first tries per bucket).
pub fn healthy_successes(
    buckets: &[Bucket],
    bucket_ns: u64,
    fault_start: u64,
    scheduled: Option<&[f64]>,
) -> Vec<f64> {
    let pre = pre_fault(buckets, bucket_ns, fault_start);
    let succ: u64 = pre.iter().map(|b| b.successes).sum();
    let first: u64 = pre.iter().map(|b| b.first_tries).sum();
    match scheduled {
        Some(expected) => {
            let ratio = if first > 0 {
                succ as f64 / first as f64
            } else {
                1.0
            };
            expected.iter().map(|e| e * ratio).collect()
        }
        None => {
            let base = if pre.is_empty() {
                let n = buckets.len().max(1) as f64;
                buckets.iter().map(|b| b.first_tries).sum::<u64>() as f64 / n
            } else {
                succ as f64 / pre.len() as f64
            };
            vec![base; buckets.len()]
        }
    }
}

/// The first window of `k` buckets starting at bucket `from` or later (and ending by the last
/// bucket) in which the server queue and the attempt latency are back to their pre-fault level:
/// the window's mean queue length (sampled at bucket ends) is at most `settle` × the largest
/// pre-fault sample (at least 1 job), and its mean attempt latency at most `settle` × the
/// largest pre-fault bucket mean. A window in which no attempt ended has no latency to judge and
/// passes on the queue alone. Without pre-fault buckets (a fault from t = 0) there is no healthy
/// level to compare with, and `from` is returned: recovery is then judged on goodput alone.
pub fn settled_from(
    buckets: &[Bucket],
    pre: &[Bucket],
    from: usize,
    k: usize,
    settle: f64,
) -> Option<usize> {
    if pre.is_empty() {
        return Some(from);
    }
    let queue_ref = pre.iter().map(|b| b.queue_len).max().unwrap_or(0).max(1) as f64;
    let mean_latency = |b: &Bucket| {
        (b.attempts_ended > 0).then(|| b.attempt_latency_us as f64 / b.attempts_ended as f64)
    };
    let latency_ref = pre.iter().filter_map(mean_latency).fold(0.0, f64::max);
    let k = k.max(1);
    let last = buckets.len().checked_sub(k)?;
    (from..=last).find(|&b0| {
        let w = &buckets[b0..b0 + k];
        let queue = w.iter().map(|b| b.queue_len).sum::<u64>() as f64 / k as f64;
        let ended: u64 = w.iter().map(|b| b.attempts_ended).sum();
        let lat: u64 = w.iter().map(|b| b.attempt_latency_us).sum();
        queue <= settle * queue_ref
            && (ended == 0
                || latency_ref == 0.0
                || lat as f64 / ended as f64 <= settle * latency_ref)
    })
}

/// How the goodput after the faults was judged by [`recovery`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Judged {
    /// Back for good, this many ns after the last fault's end.
    Recovered(u64),
    /// Not back for good by the horizon.
    Stuck,
    /// Not one whole window between the last fault's end and the horizon: too little time to
    /// judge.
    Inconclusive,
}

/// Recovery time after `fault_end` (see the module docs).
///
/// Windows are `ceil(sustain / bucket)` whole buckets, starting at or after `fault_end` and ending
/// by the horizon. A window is *healthy* when its successes reach `threshold` × its healthy
/// successes, and *down* when they fall below `relapse` × them. The run recovered at the first
/// healthy window that starts after the last down window: goodput came back **and stayed back**.
/// A run that comes back and then collapses again (a metastable failure that takes a few seconds
/// to set in) is stuck unless it comes back once more. `relapse = 0` never counts a window as down.
pub fn recovery(
    buckets: &[Bucket],
    healthy: &[f64],
    bucket_ns: u64,
    fault_end: u64,
    threshold: f64,
    relapse: f64,
    sustain_ns: u64,
) -> Judged {
    let w = bucket_ns.max(1);
    let first = fault_end.div_ceil(w) as usize;
    let k = sustain_ns.div_ceil(w).max(1) as usize;
    let Some(last) = buckets.len().checked_sub(k).filter(|&last| last >= first) else {
        return Judged::Inconclusive;
    };
    // Each window's successes and healthy successes.
    let window = |b0: usize| -> Option<(f64, f64)> {
        let got: u64 = buckets.get(b0..b0 + k)?.iter().map(|b| b.successes).sum();
        let want: f64 = healthy.get(b0..b0 + k)?.iter().sum();
        Some((got as f64, want))
    };
    let after_down = (first..=last)
        .rev()
        .find(|&b0| window(b0).is_some_and(|(got, want)| got < relapse * want))
        .map_or(first, |d| d + 1);
    (after_down..=last)
        .find_map(|b0| {
            let (got, want) = window(b0)?;
            (got >= threshold * want).then(|| (b0 as u64 * w).saturating_sub(fault_end))
        })
        .map_or(Judged::Stuck, Judged::Recovered)
}

/// Computes the summary of one run.
pub fn summarize(r: &Recorder, cx: &Context<'_>) -> PolicySummary {
    let total = r.buckets.iter().fold(Bucket::default(), |mut a, b| {
        a.first_tries += b.first_tries;
        a.retries += b.retries;
        a.attempts += b.attempts;
        a.server_arrivals += b.server_arrivals;
        a.completions += b.completions;
        a.rejections += b.rejections;
        a.local_rejections += b.local_rejections;
        a.timeouts += b.timeouts;
        a.successes += b.successes;
        a.failures += b.failures;
        a.work_us += b.work_us;
        a.wasted_us += b.wasted_us;
        a
    });
    let horizon_s = cx.horizon_ns as f64 / 1e9;
    let peak = r
        .buckets
        .iter()
        .filter(|b| b.first_tries > 0)
        .map(|b| ratio(b.server_arrivals, b.first_tries))
        .fold(0.0, f64::max);
    let (during, after, sent_during) = match cx.fault {
        Some(_) => (
            Some(ratio(r.during.1, r.during.0)),
            Some(ratio(r.after.1, r.after.0)),
            Some(ratio(r.during.2, r.during.0)),
        ),
        None => (None, None, None),
    };
    let mut goodput_recovery_s = None;
    let (verdict, recovery_s, base) = match cx.fault {
        None => (Verdict::NoFault, None, None),
        Some((start, end)) => {
            let healthy =
                healthy_successes(&r.buckets, cx.bucket_ns, start, cx.scheduled.as_deref());
            let pre = pre_fault(&r.buckets, cx.bucket_ns, start);
            let base = (!pre.is_empty())
                .then(|| pre.iter().map(|b| b.successes).sum::<u64>() as f64 / pre.len() as f64);
            match recovery(
                &r.buckets,
                &healthy,
                cx.bucket_ns,
                end,
                cx.threshold,
                cx.relapse,
                cx.sustain_ns,
            ) {
                Judged::Recovered(ns) => {
                    // Goodput is back from bucket b0; recovered once queue and latency are too.
                    goodput_recovery_s = Some(ns as f64 / 1e9);
                    let w = cx.bucket_ns.max(1);
                    let b0 = (end.saturating_add(ns)).div_ceil(w) as usize;
                    let k = cx.sustain_ns.div_ceil(w).max(1) as usize;
                    match settled_from(&r.buckets, pre, b0, k, cx.settle) {
                        Some(b) => (
                            Verdict::Recovered,
                            Some((b as u64 * w).saturating_sub(end) as f64 / 1e9),
                            base,
                        ),
                        None => (Verdict::Stuck, None, base),
                    }
                }
                Judged::Stuck => (Verdict::Stuck, None, base),
                Judged::Inconclusive => (Verdict::Inconclusive, None, base),
            }
        }
    };
    let ok_answers: u64 = r.ds.iter().map(|d| d.ok).sum();
    PolicySummary {
        name: cx.name.to_string(),
        first_tries: total.first_tries,
        attempts: total.attempts,
        server_arrivals: total.server_arrivals,
        successes: total.successes,
        success_rate: ratio(total.successes, total.first_tries),
        goodput_per_s: if horizon_s > 0.0 {
            total.successes as f64 / horizon_s
        } else {
            0.0
        },
        amplification: Amplification {
            overall: ratio(total.server_arrivals, total.first_tries),
            peak,
            during_fault: during,
            after_fault: after,
            sent_during_fault: sent_during,
        },
        latency_ms: latency(&r.latency),
        wasted_work_share: ratio(total.wasted_us, total.work_us),
        recovery_s,
        goodput_recovery_s,
        verdict,
        verdicts: Default::default(),
        seed: cx.seed,
        retries: total.retries,
        failures: total.failures,
        unfinished: cx.unfinished,
        timeouts: total.timeouts,
        server_rejections: total.rejections,
        local_rejections: total.local_rejections,
        late_replies: r.late_replies,
        server_success_rate: ratio(ok_answers, total.server_arrivals),
        success_latency_ms: latency(&r.success_latency),
        baseline_goodput_per_s: base.map(|b| b / (cx.bucket_ns as f64 / 1e9)),
        makespan_s: cx.makespan_ns.map(|n| n as f64 / 1e9),
        breaker_transitions: r.breaker_transitions,
        give_ups: r.give_ups,
        peak_in_flight: r.peak_in_flight,
        events: cx.events,
        downstreams: r
            .ds
            .iter()
            .enumerate()
            .map(|(i, d)| DownstreamSummary {
                name: cx.ds_names.get(i).cloned().unwrap_or_default(),
                arrivals: d.arrivals,
                ok: d.ok,
                errors: d.errors,
                rejections: d.rejections,
                hung: d.hung,
                held: d.held,
                completions: d.completions,
                work_s: d.work_us as f64 / 1e6,
                wasted_s: d.wasted_us as f64 / 1e6,
                commits: cx.register.get(i).copied().flatten().map(|c| c.0),
                conflicts: cx.register.get(i).copied().flatten().map(|c| c.1),
                ejections: d.ejections,
            })
            .collect(),
        llm: r
            .llm
            .as_ref()
            .map(|c| super::llm::LlmSummary::new(c, total.successes)),
        shadow: r.shadow.as_ref().map(ShadowSummary::new),
        fleet: r.fleet.as_ref().map(FleetSummary::new),
        fleet_budget: r.fleet_budget.as_ref().map(FleetBudgetSummary::new),
        extra: r.extra.as_ref().map(|c| {
            let w = cx.bucket_ns.max(1);
            let fault_buckets = cx.fault.map(|(a, b)| {
                (a.div_ceil(w) as usize)..((b / w) as usize).max(a.div_ceil(w) as usize)
            });
            super::extra::ExtraSummary::new(
                c,
                total.retries,
                total.first_tries,
                cx.ledger,
                cx.limited,
                fault_buckets,
            )
        }),
        hops: r.hops.as_ref().map(|h| {
            super::hops::summarize(
                h,
                &super::hops::HopContext {
                    names: cx.ds_names,
                    totals: r
                        .ds
                        .iter()
                        .map(|d| (d.arrivals, d.work_us, d.wasted_us))
                        .collect(),
                    first_tries: total.first_tries,
                    horizon_ns: cx.horizon_ns,
                    bucket_ns: cx.bucket_ns,
                    fault: cx.fault,
                    rule: (cx.threshold, cx.relapse, cx.sustain_ns),
                },
            )
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn buckets(successes: &[u64]) -> Vec<Bucket> {
        successes
            .iter()
            .map(|&s| Bucket {
                successes: s,
                first_tries: 10,
                ..Bucket::default()
            })
            .collect()
    }

    #[test]
    fn recovery_needs_a_sustained_healthy_window_after_the_fault() {
        let s = 1_000_000_000;
        // Fault [3 s, 5 s). Pre-fault buckets 1..3: 10 successes of 10 first tries each.
        let b = buckets(&[0, 10, 10, 0, 0, 9, 3, 10, 10, 10, 10]);
        let flat = healthy_successes(&b, s, 3 * s, None);
        assert_eq!(flat[0], 10.0);
        // Windows of 3 buckets from bucket 5: 22, 23, 30 (>= 27 at 0.9) from bucket 7.
        assert_eq!(
            recovery(&b, &flat, s, 5 * s, 0.9, 0.5, 3 * s),
            Judged::Recovered(2 * s)
        );
        // One-bucket windows: bucket 5 has 9 >= 9, but bucket 6 falls to 3 (below half), so the
        // recovery counts from bucket 7; without the relapse rule, from bucket 5.
        assert_eq!(
            recovery(&b, &flat, s, 5 * s, 0.9, 0.5, 1),
            Judged::Recovered(2 * s)
        );
        assert_eq!(
            recovery(&b, &flat, s, 5 * s, 0.9, 0.0, 1),
            Judged::Recovered(0)
        );
        // Never enough.
        assert_eq!(recovery(&b, &flat, s, 5 * s, 1.1, 0.5, s), Judged::Stuck);
        // A fault ending mid-bucket: only whole buckets after it count.
        assert_eq!(
            recovery(&b, &flat, s, 4 * s + 1, 0.9, 0.0, 1),
            Judged::Recovered(s - 1)
        );
        // A window longer than what is left after the fault: too little time to judge.
        assert_eq!(
            recovery(&b, &flat, s, 5 * s, 0.5, 0.5, 7 * s),
            Judged::Inconclusive
        );
        // A fault that ends at the horizon, or a bucket before it with a longer window: the same.
        assert_eq!(
            recovery(&b, &flat, s, 11 * s, 0.5, 0.5, s),
            Judged::Inconclusive
        );
        assert_eq!(
            recovery(&b, &flat, s, 10 * s, 0.5, 0.5, 2 * s),
            Judged::Inconclusive
        );
        // Exactly one window left: judged.
        assert_eq!(
            recovery(&b, &flat, s, 10 * s, 0.9, 0.5, s),
            Judged::Recovered(0)
        );
        // A fault from t = 0: the baseline is demand.
        assert_eq!(healthy_successes(&b, s, 0, None)[0], 10.0);
        // Open loop: scheduled arrivals scaled by the pre-fault success ratio (here 1). A rate
        // step down to 5 per bucket after the fault is not mistaken for being stuck.
        let sched = [10.0, 10.0, 10.0, 10.0, 10.0, 5.0, 5.0, 5.0, 5.0, 5.0, 5.0];
        let low = buckets(&[0, 10, 10, 0, 0, 5, 5, 5, 5, 5, 5]);
        let h = healthy_successes(&low, s, 3 * s, Some(&sched));
        assert_eq!(h[5], 5.0);
        assert_eq!(
            recovery(&low, &h, s, 5 * s, 0.9, 0.5, 3 * s),
            Judged::Recovered(0)
        );
        assert_eq!(
            recovery(&low, &flat, s, 5 * s, 0.9, 0.5, 3 * s),
            Judged::Stuck
        );
    }

    #[test]
    fn a_recovery_that_collapses_again_is_stuck() {
        let s = 1_000_000_000;
        // Fault [3 s, 5 s): back at 5-6 s, collapsed again from 7 s (a metastable failure that
        // takes a moment to set in).
        let b = buckets(&[0, 10, 10, 0, 0, 10, 10, 2, 0, 0, 0, 0]);
        let flat = healthy_successes(&b, s, 3 * s, None);
        assert_eq!(
            recovery(&b, &flat, s, 5 * s, 0.9, 0.5, 2 * s),
            Judged::Stuck
        );
        // Without the relapse rule the brief return would count.
        assert_eq!(
            recovery(&b, &flat, s, 5 * s, 0.9, 0.0, 2 * s),
            Judged::Recovered(0)
        );
        // Back, down, back again for good: recovered at the second return.
        let b = buckets(&[0, 10, 10, 0, 0, 10, 10, 0, 0, 10, 10, 10]);
        assert_eq!(
            recovery(&b, &flat, s, 5 * s, 0.9, 0.5, 2 * s),
            Judged::Recovered(4 * s)
        );
        // A dip that stays above the relapse share (degraded, not collapsed) keeps the first
        // return.
        let b = buckets(&[0, 10, 10, 0, 0, 10, 10, 6, 6, 10, 10, 10]);
        assert_eq!(
            recovery(&b, &flat, s, 5 * s, 0.9, 0.5, 2 * s),
            Judged::Recovered(0)
        );
    }
}

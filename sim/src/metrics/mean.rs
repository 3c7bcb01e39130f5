//! [`Mean`]: how each figure of a summary is averaged over the runs of several seeds, written on
//! the summary types themselves.
//!
//! - counts (`u64`): the mean, rounded to the nearest integer ([`stats::mean_count`]);
//! - figures (`f64`): the mean of the finite values ([`stats::mean`]);
//! - optional figures (`recovery_s`, `amplification.after_fault`...): the mean over the runs that
//!   have one, `None` if none has; optional counts (a register's `conflicts`): the sum over the
//!   runs that have one divided by all runs (a run without it counted none);
//! - lists (one entry per downstream): entry by entry;
//! - names and the seed: the first run's; the verdict: the most common ([`Verdicts`]).
//!
//! Every summary struct builds its mean with a struct literal that names every field, so a new
//! field that does not say how it is averaged does not compile.
//!
//! The headline figures' 95% intervals across seeds ([`PolicySummary::intervals`]) are here too.

use super::llm::LlmSummary;
use super::{
    Amplification, DownstreamSummary, FleetBudgetSummary, FleetSummary, GiveUps, Latency,
    PolicySummary, ShadowSummary, Verdict, Verdicts,
};
use crate::stats;

/// A value that has a mean over the runs of several seeds.
pub trait Mean: Sized {
    /// The mean of `runs`, which hold at least one value.
    fn mean(runs: &[&Self]) -> Self;
}

/// The mean of the field `get` picks from each of `runs`.
fn of<'a, T, F: Mean + 'a>(runs: &[&'a T], get: impl Fn(&'a T) -> &'a F) -> F {
    let column: Vec<&F> = runs.iter().map(|r| get(r)).collect();
    F::mean(&column)
}

impl Mean for u64 {
    fn mean(runs: &[&Self]) -> Self {
        stats::mean_count(runs.iter().copied().sum(), runs.len())
    }
}

impl Mean for f64 {
    fn mean(runs: &[&Self]) -> Self {
        let finite: Vec<f64> = runs.iter().map(|x| **x).filter(|x| x.is_finite()).collect();
        if finite.is_empty() {
            return runs.first().map_or(0.0, |x| **x);
        }
        stats::mean(&finite)
    }
}

impl Mean for Option<f64> {
    fn mean(runs: &[&Self]) -> Self {
        let present: Vec<f64> = runs
            .iter()
            .filter_map(|x| **x)
            .filter(|x| x.is_finite())
            .collect();
        (!present.is_empty()).then(|| stats::mean(&present))
    }
}

impl Mean for Option<u64> {
    fn mean(runs: &[&Self]) -> Self {
        let present: Vec<u64> = runs.iter().filter_map(|x| **x).collect();
        (!present.is_empty()).then(|| stats::mean_count(present.iter().sum(), runs.len()))
    }
}

impl Mean for Option<LlmSummary> {
    fn mean(runs: &[&Self]) -> Self {
        let present: Vec<&LlmSummary> = runs.iter().filter_map(|x| x.as_ref()).collect();
        (!present.is_empty()).then(|| LlmSummary::mean(&present))
    }
}

impl<T: Mean> Mean for Vec<T> {
    /// Entry by entry, over the runs that have the entry (every run of a scenario has the same
    /// entries: one per downstream).
    fn mean(runs: &[&Self]) -> Self {
        let len = runs.first().map_or(0, |v| v.len());
        (0..len)
            .map(|i| {
                let column: Vec<&T> = runs.iter().filter_map(|v| v.get(i)).collect();
                T::mean(&column)
            })
            .collect()
    }
}

impl Mean for Option<ShadowSummary> {
    fn mean(runs: &[&Self]) -> Self {
        let present: Vec<&ShadowSummary> = runs.iter().filter_map(|x| x.as_ref()).collect();
        (!present.is_empty()).then(|| ShadowSummary {
            would_reject: of(&present, |s| &s.would_reject),
            transitions: of(&present, |s| &s.transitions),
            opens: of(&present, |s| &s.opens),
            first_open_s: of(&present, |s| &s.first_open_s),
            first_reject_s: of(&present, |s| &s.first_reject_s),
        })
    }
}

impl Mean for Option<FleetSummary> {
    fn mean(runs: &[&Self]) -> Self {
        let present: Vec<&FleetSummary> = runs.iter().filter_map(|x| x.as_ref()).collect();
        (!present.is_empty()).then(|| FleetSummary {
            store_ops: of(&present, |s| &s.store_ops),
            store_failures: of(&present, |s| &s.store_failures),
            by_store: of(&present, |s| &s.by_store),
            by_cache: of(&present, |s| &s.by_cache),
            by_local: of(&present, |s| &s.by_local),
            store_refusals: of(&present, |s| &s.store_refusals),
            reconciled: of(&present, |s| &s.reconciled),
            mean_wait_ms: of(&present, |s| &s.mean_wait_ms),
            longest_wait_ms: of(&present, |s| &s.longest_wait_ms),
            fleet_opens: of(&present, |s| &s.fleet_opens),
            first_fleet_open_s: of(&present, |s| &s.first_fleet_open_s),
        })
    }
}

impl Mean for Option<FleetBudgetSummary> {
    fn mean(runs: &[&Self]) -> Self {
        let present: Vec<&FleetBudgetSummary> = runs.iter().filter_map(|x| x.as_ref()).collect();
        (!present.is_empty()).then(|| FleetBudgetSummary {
            store_ops: of(&present, |s| &s.store_ops),
            store_failures: of(&present, |s| &s.store_failures),
            granted: of(&present, |s| &s.granted),
            refused: of(&present, |s| &s.refused),
            by_local: of(&present, |s| &s.by_local),
            store_refusals: of(&present, |s| &s.store_refusals),
            grants_taken: of(&present, |s| &s.grants_taken),
        })
    }
}

impl Mean for GiveUps {
    fn mean(runs: &[&Self]) -> Self {
        GiveUps::mean(&runs.iter().map(|g| **g).collect::<Vec<_>>())
    }
}

impl Mean for Amplification {
    fn mean(runs: &[&Self]) -> Self {
        Amplification {
            overall: of(runs, |a| &a.overall),
            peak: of(runs, |a| &a.peak),
            during_fault: of(runs, |a| &a.during_fault),
            after_fault: of(runs, |a| &a.after_fault),
            sent_during_fault: of(runs, |a| &a.sent_during_fault),
        }
    }
}

impl Mean for Latency {
    fn mean(runs: &[&Self]) -> Self {
        Latency {
            p50: of(runs, |l| &l.p50),
            p99: of(runs, |l| &l.p99),
            p999: of(runs, |l| &l.p999),
            mean: of(runs, |l| &l.mean),
            count: of(runs, |l| &l.count),
        }
    }
}

impl Mean for DownstreamSummary {
    fn mean(runs: &[&Self]) -> Self {
        DownstreamSummary {
            name: runs[0].name.clone(),
            arrivals: of(runs, |d| &d.arrivals),
            ok: of(runs, |d| &d.ok),
            errors: of(runs, |d| &d.errors),
            rejections: of(runs, |d| &d.rejections),
            hung: of(runs, |d| &d.hung),
            held: of(runs, |d| &d.held),
            completions: of(runs, |d| &d.completions),
            work_s: of(runs, |d| &d.work_s),
            wasted_s: of(runs, |d| &d.wasted_s),
            commits: of(runs, |d| &d.commits),
            conflicts: of(runs, |d| &d.conflicts),
            ejections: of(runs, |d| &d.ejections),
        }
    }
}

impl Mean for LlmSummary {
    fn mean(runs: &[&Self]) -> Self {
        LlmSummary {
            input_tokens: of(runs, |l| &l.input_tokens),
            output_tokens: of(runs, |l| &l.output_tokens),
            cost: of(runs, |l| &l.cost),
            cost_wasted: of(runs, |l| &l.cost_wasted),
            cost_per_success: of(runs, |l| &l.cost_per_success),
            rate_limited: of(runs, |l| &l.rate_limited),
            overloaded: of(runs, |l| &l.overloaded),
            money_limited: of(runs, |l| &l.money_limited),
            spend_refusals: of(runs, |l| &l.spend_refusals),
        }
    }
}

impl Mean for PolicySummary {
    /// The mean over several seeds; one run is its own summary (with no `verdicts` count).
    fn mean(runs: &[&Self]) -> Self {
        let first = runs[0];
        if runs.len() == 1 {
            return first.clone();
        }
        let verdicts = Verdicts::count(runs.iter().map(|r| r.verdict));
        PolicySummary {
            name: first.name.clone(),
            first_tries: of(runs, |s| &s.first_tries),
            attempts: of(runs, |s| &s.attempts),
            server_arrivals: of(runs, |s| &s.server_arrivals),
            successes: of(runs, |s| &s.successes),
            success_rate: of(runs, |s| &s.success_rate),
            goodput_per_s: of(runs, |s| &s.goodput_per_s),
            amplification: of(runs, |s| &s.amplification),
            latency_ms: of(runs, |s| &s.latency_ms),
            wasted_work_share: of(runs, |s| &s.wasted_work_share),
            recovery_s: of(runs, |s| &s.recovery_s),
            goodput_recovery_s: of(runs, |s| &s.goodput_recovery_s),
            verdict: verdicts.most_common().unwrap_or(first.verdict),
            verdicts,
            seed: first.seed,
            retries: of(runs, |s| &s.retries),
            failures: of(runs, |s| &s.failures),
            unfinished: of(runs, |s| &s.unfinished),
            timeouts: of(runs, |s| &s.timeouts),
            server_rejections: of(runs, |s| &s.server_rejections),
            local_rejections: of(runs, |s| &s.local_rejections),
            late_replies: of(runs, |s| &s.late_replies),
            server_success_rate: of(runs, |s| &s.server_success_rate),
            success_latency_ms: of(runs, |s| &s.success_latency_ms),
            baseline_goodput_per_s: of(runs, |s| &s.baseline_goodput_per_s),
            makespan_s: of(runs, |s| &s.makespan_s),
            breaker_transitions: of(runs, |s| &s.breaker_transitions),
            give_ups: of(runs, |s| &s.give_ups),
            peak_in_flight: of(runs, |s| &s.peak_in_flight),
            events: of(runs, |s| &s.events),
            downstreams: of(runs, |s| &s.downstreams),
            llm: of(runs, |s| &s.llm),
            shadow: of(runs, |s| &s.shadow),
            fleet: of(runs, |s| &s.fleet),
            fleet_budget: of(runs, |s| &s.fleet_budget),
            extra: of(runs, |s| &s.extra),
            hops: of(runs, |s| &s.hops),
        }
    }
}

/// A headline figure of a summary, by its name in `summary.json`.
type Headline = (&'static str, fn(&PolicySummary) -> Option<f64>);

/// The figures `summary.json` gives a 95% interval for, in its order.
const HEADLINES: [Headline; 7] = [
    ("success_rate", |s| Some(s.success_rate)),
    ("goodput_per_s", |s| Some(s.goodput_per_s)),
    ("amplification.peak", |s| Some(s.amplification.peak)),
    ("amplification.during_fault", |s| {
        s.amplification.during_fault
    }),
    ("amplification.after_fault", |s| s.amplification.after_fault),
    ("latency_ms.p99", |s| Some(s.latency_ms.p99)),
    ("recovery_s", |s| s.recovery_s),
];

impl PolicySummary {
    /// The mean over `runs` (see [`Mean`]); an empty summary for no runs.
    pub fn mean_of(runs: &[PolicySummary]) -> PolicySummary {
        if runs.is_empty() {
            return PolicySummary::empty();
        }
        let refs: Vec<&PolicySummary> = runs.iter().collect();
        PolicySummary::mean(&refs)
    }

    /// The normal-approximation 95% interval `[low, high]` of the mean of each headline figure
    /// over `runs`, by its name in `summary.json`; a figure no run has is left out.
    pub fn intervals(runs: &[PolicySummary]) -> Vec<(&'static str, [f64; 2])> {
        HEADLINES
            .iter()
            .filter_map(|(name, get)| {
                let xs: Vec<f64> = runs.iter().filter_map(get).collect();
                if xs.is_empty() {
                    return None;
                }
                let (mean, half) = stats::mean_ci95(&xs);
                Some((*name, [mean - half, mean + half]))
            })
            .collect()
    }

    /// A summary of nothing: every count and figure 0, every optional figure `None`.
    pub fn empty() -> PolicySummary {
        let z = Latency {
            p50: 0.0,
            p99: 0.0,
            p999: 0.0,
            mean: 0.0,
            count: 0,
        };
        PolicySummary {
            name: String::new(),
            first_tries: 0,
            attempts: 0,
            server_arrivals: 0,
            successes: 0,
            success_rate: 0.0,
            goodput_per_s: 0.0,
            amplification: Amplification {
                overall: 0.0,
                peak: 0.0,
                during_fault: None,
                after_fault: None,
                sent_during_fault: None,
            },
            latency_ms: z.clone(),
            wasted_work_share: 0.0,
            recovery_s: None,
            goodput_recovery_s: None,
            verdict: Verdict::NoFault,
            verdicts: Verdicts::default(),
            seed: 0,
            retries: 0,
            failures: 0,
            unfinished: 0,
            timeouts: 0,
            server_rejections: 0,
            local_rejections: 0,
            late_replies: 0,
            server_success_rate: 0.0,
            success_latency_ms: z,
            baseline_goodput_per_s: None,
            makespan_s: None,
            breaker_transitions: 0,
            give_ups: GiveUps::default(),
            peak_in_flight: 0,
            events: 0,
            downstreams: Vec::new(),
            llm: None,
            shadow: None,
            fleet: None,
            fleet_budget: None,
            extra: None,
            hops: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reliable_core::retry::GiveUpReason;

    #[test]
    fn means_round_integers_and_skip_missing_options() {
        let mut a = PolicySummary::empty();
        a.first_tries = 10;
        a.success_rate = 0.5;
        a.recovery_s = Some(2.0);
        a.verdict = Verdict::Recovered;
        let mut b = PolicySummary::empty();
        b.first_tries = 13;
        b.success_rate = 1.0;
        b.verdict = Verdict::Stuck;
        let mut c = b.clone();
        c.verdict = Verdict::Recovered;
        c.recovery_s = Some(4.0);
        let budget = GiveUpReason::Budget(reliable_core::budget::Denied::Quota);
        for _ in 0..9 {
            a.give_ups.add(budget);
        }
        for _ in 0..3 {
            b.give_ups.add(GiveUpReason::MaxAttempts);
        }
        for _ in 0..6 {
            c.give_ups.add(GiveUpReason::MaxAttempts);
        }
        let m = PolicySummary::mean_of(&[a.clone(), b.clone(), c]);
        assert_eq!(m.first_tries, 12);
        assert_eq!(m.give_ups.get("budget"), 3, "missing counts are zeros");
        assert_eq!(m.give_ups.get("max-attempts"), 3);
        assert!((m.success_rate - 2.5 / 3.0).abs() < 1e-12);
        assert_eq!(m.recovery_s, Some(3.0));
        assert_eq!(m.verdict, Verdict::Recovered);
        assert_eq!(m.verdicts.get(Verdict::Recovered), 2);
        assert_eq!(m.verdicts.get(Verdict::Stuck), 1);
        // One run recovered, one stuck (an even number of seeds): stuck, in either order.
        assert_eq!(
            PolicySummary::mean_of(&[a.clone(), b.clone()]).verdict,
            Verdict::Stuck
        );
        assert_eq!(PolicySummary::mean_of(&[b, a]).verdict, Verdict::Stuck);
    }

    #[test]
    fn downstream_totals_are_means_too_not_the_first_seeds() {
        let ds = |arrivals: u64, conflicts: Option<u64>| DownstreamSummary {
            name: "db".into(),
            arrivals,
            ok: arrivals,
            errors: 0,
            rejections: 0,
            hung: 0,
            held: 0,
            completions: arrivals,
            work_s: arrivals as f64 / 10.0,
            wasted_s: 0.0,
            commits: conflicts.map(|_| arrivals),
            conflicts,
            ejections: None,
        };
        let mut a = PolicySummary::empty();
        a.downstreams = vec![ds(100, Some(10))];
        let mut b = PolicySummary::empty();
        b.downstreams = vec![ds(200, Some(30))];
        let m = PolicySummary::mean_of(&[a, b]);
        assert_eq!(m.downstreams.len(), 1);
        assert_eq!(m.downstreams[0].name, "db");
        assert_eq!(m.downstreams[0].arrivals, 150);
        assert_eq!(m.downstreams[0].conflicts, Some(20));
        assert!((m.downstreams[0].work_s - 15.0).abs() < 1e-9);
    }
}

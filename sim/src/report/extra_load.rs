//! The extra-load table of a report: hedges, extra attempts by kind, the ledger's draws and the
//! concurrency limits per policy, for stacks with a `Hedge`, `Ledger`, `Limit` or `RateLimit`
//! layer (see [`crate::metrics::extra`] for the definitions).

use std::fmt::Write;

use crate::metrics::PolicySummary;

/// An optional figure with `digits` decimals, `-` when absent.
fn opt(x: Option<f64>, digits: usize) -> String {
    x.map_or("-".to_string(), |x| format!("{x:.digits$}"))
}

/// The markdown table, or `None` when no policy has one of those layers. Figures are the means
/// over the seeds.
pub fn markdown(policies: &[(PolicySummary, Vec<PolicySummary>)]) -> Option<String> {
    if policies.iter().all(|(p, _)| p.extra.is_none()) {
        return None;
    }
    let mut out = String::from(
        "| policy | hedges sent | hedge share | hedges won | copies cancelled | hedges refused | extra: retry / hedge / probe | ledger granted / refused | limit refusals | mean limit | admitted concurrency | during the faults |\n|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n",
    );
    for (p, _) in policies {
        let Some(e) = &p.extra else { continue };
        let k = e.extra_sent;
        let ledger = e.ledger.map_or("-".to_string(), |l| {
            format!("{} / {}", l.drawn.total(), l.denied.total())
        });
        let _ = writeln!(
            out,
            "| {} | {} | {:.2}% | {} | {} | {} | {} / {} / {} | {} | {} | {} | {} | {} |",
            p.name,
            e.hedges_sent,
            e.hedge_share * 100.0,
            e.hedges_won,
            e.copies_cancelled,
            e.hedges_refused,
            k.retry,
            k.hedge,
            k.probe,
            ledger,
            e.limit_refusals,
            opt(e.limit_mean, 1),
            opt(e.admitted_mean, 1),
            opt(e.admitted_during_fault, 1),
        );
    }
    out.push_str("\nhedge share: hedges sent ÷ first tries; hedges won: calls answered by a hedge, not the first copy; copies cancelled: copies still out when their call was answered; hedges refused: by the ledger. extra: attempts beyond the first by kind (retries, hedges, probes of half-open breakers); ledger: extra attempts its budget granted and refused, every kind together. Mean limit and admitted concurrency (calls in flight through the limit, time-averaged) over the run and over the fault span's whole buckets.\n");
    Some(out)
}

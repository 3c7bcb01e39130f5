//! The per-hop table of a report over a call graph (see [`crate::metrics::hops`]): each
//! downstream's depth, amplification, goodput, latency, wasted work and verdict, per policy.

use std::fmt::Write;

use crate::metrics::PolicySummary;

/// The markdown table, or `None` for a scenario without services. Figures are the means over
/// the seeds; the verdict is the most common one.
pub fn markdown(policies: &[(PolicySummary, Vec<PolicySummary>)]) -> Option<String> {
    if policies.iter().all(|(p, _)| p.hops.is_none()) {
        return None;
    }
    let mut out = String::from(
        "| policy | downstream | depth | arrivals per edge request | goodput/s | latency ms | wasted | past deadline | verdict |\n|---|---|--:|--:|--:|--:|--:|--:|---|\n",
    );
    for (p, _) in policies {
        let Some(hops) = &p.hops else { continue };
        for h in hops {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {:.3} | {:.1} | {:.1} | {:.1}% | {} | {} |",
                p.name,
                h.name,
                h.depth.map_or("-".to_string(), |d| d.to_string()),
                h.amplification,
                h.goodput_per_s,
                h.latency_ms,
                h.wasted_share * 100.0,
                h.past_deadline,
                h.verdict.name(),
            );
        }
    }
    out.push_str("\nArrivals per edge request: the calls reaching each downstream ÷ the logical requests the workload started (retries at each hop multiply down the graph). Latency: the mean time from a caller's send to the answer or the caller's timeout. Wasted: service time on jobs whose caller had already given up. Past deadline: jobs refused, dropped or stopped because their caller's propagated deadline had passed. Verdict: the downstream's successful answers judged like the edge's goodput.\n");
    Some(out)
}

/// One line per policy for the terminal: the arrivals per edge request at each depth.
pub fn lines(policies: &[(PolicySummary, Vec<PolicySummary>)]) -> Vec<String> {
    policies
        .iter()
        .filter_map(|(p, _)| {
            let hops = p.hops.as_ref()?;
            let per: Vec<String> = hops
                .iter()
                .filter(|h| h.depth.is_some())
                .map(|h| format!("{} {:.2}x ({})", h.name, h.amplification, h.verdict.name()))
                .collect();
            Some(format!("\"{}\", per hop: {}", p.name, per.join(", ")))
        })
        .collect()
}

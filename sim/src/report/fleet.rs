//! The fleet table of a report: how each policy's fleet breakers (`Fleet` scope) decided and what
//! their store did, for scenarios with one (see the `fleet` figures in [`crate::metrics`]).

use std::fmt::Write;

use crate::metrics::PolicySummary;

/// The markdown table, or `None` when no policy has a fleet breaker. Figures are the means over
/// the seeds.
pub fn markdown(policies: &[(PolicySummary, Vec<PolicySummary>)]) -> Option<String> {
    let budgets = budget_markdown(policies);
    if policies.iter().all(|(p, _)| p.fleet.is_none()) {
        return budgets;
    }
    let mut out = String::from(
        "| policy | decided by the store | on a cached view | by the instance alone | refused (store failed) | store operations | of which failed | results replayed | mean wait | longest wait | fleet breaker opened | first opened |\n|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n",
    );
    let at = |s: Option<f64>| s.map_or("never".to_string(), |s| format!("{s:.3} s"));
    for (p, _) in policies {
        let Some(f) = &p.fleet else { continue };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {:.2} ms | {:.2} ms | {} | {} |",
            p.name,
            f.by_store,
            f.by_cache,
            f.by_local,
            f.store_refusals,
            f.store_ops,
            f.store_failures,
            f.reconciled,
            f.mean_wait_ms,
            f.longest_wait_ms,
            f.fleet_opens,
            at(f.first_fleet_open_s),
        );
    }
    out.push_str("\nCalls by who decided them: the store (a round trip the call waited for), the instance on its cached view of the store's state (a view that aged because no call came included: it is the fleet's last word), or the instance's own breaker (before its first view, or once the store failed: exact decisions that could not reach it, cached views too old since; with `on_store_failure: Refuse` the latter are refused instead). Results replayed: what instances decided alone while the store failed, sent to the fleet's breaker when it answered again. Waits are of the decisions that waited for the store.\n");
    if let Some(b) = budgets {
        out.push('\n');
        out.push_str(&b);
    }
    Some(out)
}

/// The fleet retry budgets' table, or `None` when no policy has one.
fn budget_markdown(policies: &[(PolicySummary, Vec<PolicySummary>)]) -> Option<String> {
    if policies.iter().all(|(p, _)| p.fleet_budget.is_none()) {
        return None;
    }
    let mut out = String::from(
        "| policy | retries granted (fleet's allowance) | refused (no grant) | decided by the instance alone | refused (store failed) | grants taken from the fleet | store operations | of which failed |\n|---|--:|--:|--:|--:|--:|--:|--:|\n",
    );
    for (p, _) in policies {
        let Some(b) = &p.fleet_budget else { continue };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            p.name,
            b.granted,
            b.refused,
            b.by_local,
            b.store_refusals,
            b.grants_taken,
            b.store_ops,
            b.store_failures,
        );
    }
    out.push_str("\nRetries of fleet budgets (`budget_scope: Fleet`), by how they were decided: on grants each instance took from the fleet's window at its last refresh, refused with none left, or by the instance's own budget while the store failed (`on_store_failure: Refuse` refuses those instead). Grants taken and not spent lapse: the fleet never grants more than its ratio.\n");
    Some(out)
}

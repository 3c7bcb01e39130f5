//! The LLM table of a report: tokens, money and the provider's refusals per policy, for scenarios
//! with an LLM provider (see [`crate::metrics::llm`] for the definitions).

use std::fmt::Write;

use crate::metrics::PolicySummary;

/// Money in micro-units as dollars with `digits` decimals.
fn dollars(micro: f64, digits: usize) -> String {
    format!("${:.*}", digits, micro / 1e6)
}

/// The markdown table, or `None` when no policy ran against an LLM provider. Figures are the
/// means over the seeds.
pub fn markdown(policies: &[(PolicySummary, Vec<PolicySummary>)]) -> Option<String> {
    if policies.iter().all(|(p, _)| p.llm.is_none()) {
        return None;
    }
    let mut out = String::from(
        "| policy | cost per success | cost | cost wasted | wasted share | tokens in / out | 429 rate limit | 529 overloaded | 429 money | spend refusals |\n|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n",
    );
    for (p, _) in policies {
        let Some(l) = &p.llm else { continue };
        let share = if l.cost > 0 {
            l.cost_wasted as f64 / l.cost as f64
        } else {
            0.0
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {:.1}% | {:.2}M / {:.2}M | {} | {} | {} | {} |",
            p.name,
            l.cost_per_success
                .map_or("-".to_string(), |c| dollars(c, 5)),
            dollars(l.cost as f64, 2),
            dollars(l.cost_wasted as f64, 2),
            share * 100.0,
            l.input_tokens as f64 / 1e6,
            l.output_tokens as f64 / 1e6,
            l.rate_limited,
            l.overloaded,
            l.money_limited,
            l.spend_refusals,
        );
    }
    out.push_str("\ncost: what the provider billed (every request it served, whether or not its client still waited); cost wasted: billed for attempts their client had already abandoned; 429 rate limit / 529 overloaded / 429 money: the provider's refusals; spend refusals: calls a spend breaker refused before sending them.\n");
    Some(out)
}

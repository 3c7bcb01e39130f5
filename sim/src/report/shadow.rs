//! The shadow table of a report: what each policy's breakers in shadow mode would have done, for
//! scenarios with one (see the `shadow` figures in [`crate::metrics`]).

use std::fmt::Write;

use crate::metrics::PolicySummary;

/// The markdown table, or `None` when no policy has a breaker in shadow mode. Figures are the
/// means over the seeds.
pub fn markdown(policies: &[(PolicySummary, Vec<PolicySummary>)]) -> Option<String> {
    if policies.iter().all(|(p, _)| p.shadow.is_none()) {
        return None;
    }
    let mut out = String::from(
        "| policy | would reject | would-be transitions | would-be openings | first would open | first would reject |\n|---|--:|--:|--:|--:|--:|\n",
    );
    let at = |s: Option<f64>| s.map_or("-".to_string(), |s| format!("{s:.3} s"));
    for (p, _) in policies {
        let Some(s) = &p.shadow else { continue };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} |",
            p.name,
            s.would_reject,
            s.transitions,
            s.opens,
            at(s.first_open_s),
            at(s.first_reject_s),
        );
    }
    out.push_str("\nA breaker in shadow mode decides as if live but admits every call, so its policy sends as it would without it; these are its would-be decisions (calls it would have rejected, its state changes), which the results above do not count as local rejections.\n");
    Some(out)
}

/// One line per policy with a breaker in shadow mode, for the terminal.
pub fn lines(policies: &[(PolicySummary, Vec<PolicySummary>)]) -> Vec<String> {
    policies
        .iter()
        .filter_map(|(p, _)| {
            let s = p.shadow.as_ref()?;
            let opened = s
                .first_open_s
                .map_or("never would have opened".to_string(), |t| {
                    format!("first would have opened at {t:.3} s")
                });
            Some(format!(
                "{} (shadow mode): would have rejected {} calls, {} would-be transitions, {opened}",
                p.name, s.would_reject, s.transitions
            ))
        })
        .collect()
}

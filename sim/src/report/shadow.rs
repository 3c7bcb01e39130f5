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
                "\"{}\", in shadow mode: would have rejected {} calls, {} would-be transitions, {opened}",
                p.name, s.would_reject, s.transitions
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::ShadowSummary;

    #[test]
    fn only_policies_with_a_shadow_breaker_get_a_row() {
        let plain = PolicySummary {
            name: "plain".into(),
            ..PolicySummary::empty()
        };
        assert_eq!(markdown(&[(plain.clone(), Vec::new())]), None);
        assert!(lines(&[(plain.clone(), Vec::new())]).is_empty());
        let shadow = PolicySummary {
            name: "shadow".into(),
            shadow: Some(ShadowSummary {
                would_reject: 12,
                transitions: 3,
                opens: 2,
                first_open_s: Some(1.5),
                first_reject_s: None,
            }),
            ..PolicySummary::empty()
        };
        let both = [(plain, Vec::new()), (shadow, Vec::new())];
        let table = markdown(&both).unwrap();
        assert!(
            table.contains("| shadow | 12 | 3 | 2 | 1.500 s | - |"),
            "{table}"
        );
        assert!(!table.contains("| plain |"), "{table}");
        assert_eq!(
            lines(&both),
            [
                "\"shadow\", in shadow mode: would have rejected 12 calls, 3 would-be transitions, first would have opened at 1.500 s"
            ]
        );
    }
}

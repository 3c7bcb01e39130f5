//! `summary.md`: the scenario's description and parameters, then the comparison table as Markdown.

use std::fmt::Write;

use crate::metrics::PolicySummary;
use crate::run::Compiled;
use crate::scenario::Workload;

/// A value in one-line RON, as a scenario file would write it.
fn ron_line<T: serde::Serialize>(v: &T) -> String {
    let pretty = ron::ser::PrettyConfig::new()
        .new_line(" ".to_string())
        .indentor(String::new())
        .separator(" ".to_string())
        .extensions(
            ron::extensions::Extensions::IMPLICIT_SOME
                | ron::extensions::Extensions::UNWRAP_VARIANT_NEWTYPES,
        );
    ron::ser::to_string_pretty(v, pretty)
        .map(|s| {
            // Drop the extension header: the scenario loader enables both extensions itself.
            let mut body = s.as_str();
            while let Some(rest) = body.strip_prefix("#![enable(") {
                body = rest.split_once(")] ").map_or("", |(_, b)| b);
            }
            body.replace("( ", "(")
                .replace("[ ", "[")
                .replace(", )", ")")
                .replace(",)", ")")
                .replace(", ]", "]")
        })
        .unwrap_or_default()
}

fn opt(v: Option<f64>, digits: usize, unit: &str) -> String {
    v.map_or_else(|| "-".into(), |x| format!("{x:.digits$}{unit}"))
}

/// The file's text.
pub fn summary_md(
    c: &Compiled,
    seeds: &[u64],
    policies: &[(PolicySummary, Vec<PolicySummary>)],
) -> String {
    let s = &c.scenario;
    let mut out = String::new();
    let _ = writeln!(out, "# {}\n", s.name);
    if !s.description.trim().is_empty() {
        let _ = writeln!(out, "{}\n", s.description.trim());
    }
    let _ = writeln!(out, "## Parameters\n");
    let seeds_text = match seeds {
        [one] => one.to_string(),
        many => format!(
            "{} seeds from {}",
            many.len(),
            many.first().copied().unwrap_or(0)
        ),
    };
    let _ = writeln!(
        out,
        "- horizon {}, buckets of {}, seed {seeds_text}",
        s.horizon, s.bucket
    );
    let workload = match &s.workload {
        Workload::OpenLoop {
            rate,
            arrivals,
            clients,
            steps,
            ..
        } => {
            let mut w =
                format!("open loop, {arrivals:?} arrivals at {rate}/s over {clients} client(s)");
            for st in steps {
                let _ = write!(w, ", {}/s from {}", st.rate, st.at);
            }
            w
        }
        Workload::ClosedLoop { clients, think, .. } => {
            format!("closed loop, {clients} serial clients, think time {think:?}")
        }
        Workload::JobSet { clients, .. } => {
            format!("job set of {clients} clients, one request each")
        }
    };
    let _ = writeln!(out, "- workload: {workload}");
    for d in &s.downstreams {
        let _ = writeln!(
            out,
            "- downstream `{}`: `{}`, network `{}`",
            d.name,
            ron_line(&d.model),
            ron_line(&d.network)
        );
    }
    for f in &s.faults {
        let (from, until) = f.window();
        let target = f
            .downstream()
            .map(|d| format!(" on `{d}`"))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "- fault {}{target} during [{from}, {until})",
            f.kind_name()
        );
    }
    let _ = writeln!(out, "\n## Policies\n");
    for p in &s.policies {
        let _ = writeln!(out, "- **{}**: `{}`", p.name, ron_line(&p.stack));
    }
    let _ = writeln!(out, "\n## Results\n");
    if seeds.len() > 1 {
        let _ = writeln!(
            out,
            "Means over {} seeds; recovery is the mean over the runs that recovered, and the verdict the most common one, with its count.\n",
            seeds.len()
        );
    }
    let _ = writeln!(
        out,
        "| policy | amp peak | amp fault | amp after | success | goodput/s | p99 ms | wasted | recovery | verdict |"
    );
    let _ = writeln!(out, "|---|--:|--:|--:|--:|--:|--:|--:|--:|---|");
    for (p, _) in policies {
        let runs: u64 = p.verdicts.values().sum();
        let verdict = match p.verdicts.get(&p.verdict) {
            Some(n) if runs > 1 => format!("{} {n}/{runs}", p.verdict),
            _ => p.verdict.clone(),
        };
        let _ = writeln!(
            out,
            "| {} | {:.2}x | {} | {} | {:.1}% | {:.1} | {:.1} | {:.1}% | {} | {} |",
            p.name.replace('|', "\\|"),
            p.amplification.peak,
            opt(p.amplification.during_fault, 2, "x"),
            opt(p.amplification.after_fault, 2, "x"),
            p.success_rate * 100.0,
            p.goodput_per_s,
            p.latency_ms.p99,
            p.wasted_work_share * 100.0,
            opt(p.recovery_s, 1, "s"),
            verdict
        );
    }
    let _ = writeln!(
        out,
        "\namp = server arrivals ÷ first tries (peak bucket, during the faults, after them); success = successful logical requests ÷ started; wasted = server time spent on calls whose client had given up. Definitions: `sim` crate docs, module `metrics`."
    );
    out
}

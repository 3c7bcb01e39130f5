//! `summary.md`: what a reviewer opens first. The scenario's description, the conclusion, the
//! comparison table, the plots (relative links to the PNGs next to it, each with how to read
//! it), then every parameter (downstreams, faults, workload, each policy's stack in RON) and the
//! definitions of the metrics.

use std::fmt::Write;

use super::conclusion::{Style, conclusion};
use super::figures::{Figure, capacity_notes};
use super::table;
use crate::compile::Compiled;
use crate::metrics::PolicySummary;
use crate::scenario::Workload;

/// The metrics' definitions, in short (the exact ones are in the `sim` crate's `metrics` module
/// docs).
pub const DEFINITIONS: &str = "\
- **first tries**: logical requests started by the workload; **attempts**: calls sent (first calls, retries, fallbacks); **server arrivals**: calls that reached a downstream.
- **amplification** = server arrivals ÷ first tries. *peak*: the largest per-bucket value; *fault*: counted while any fault is active (from the first fault's start to the last one's end); *after*: from the last fault's end to the horizon. Above 1x the clients add retries to the offered traffic; below 1x they refused some requests locally (an open breaker, a throttle).
- **success** = logical requests whose final answer was a success ÷ first tries (requests still in flight at the horizon count as failures).
- **goodput** = successful logical requests per second of simulated time.
- **p99** = the 99th percentile of client-observed latency, from a request's first try to its final answer (success or failure, retries and backoff included), recorded in an HdrHistogram with 3 significant digits.
- **wasted** = service time the servers spent on jobs whose client attempt had already ended (timed out or finished elsewhere) when the job completed ÷ all service time.
- **recovery**: each bucket after the faults is compared with its *healthy* goodput (for an open loop: the arrivals it is scheduled to get × the success ratio before the fault; otherwise the mean successes per bucket before the fault). A window of `sustain` whole buckets, starting at or after the last fault's end, is healthy when its successes reach `threshold` × the healthy ones, and down when they fall below `relapse` × them. The policy has *recovered* at the first healthy window after the last down one (goodput came back and stayed back); *recovery* is that window's start minus the fault's end. Otherwise it is *stuck*. Without faults: *no-fault*.
- With several seeds, figures are means over the seeds, `±` gives the 95% interval of the mean (1.96 × standard error), recovery is the mean over the runs that recovered, and the verdict is the most common one, with its count.
";

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

/// The file's text.
pub fn summary_md(
    c: &Compiled,
    seeds: &[u64],
    policies: &[(PolicySummary, Vec<PolicySummary>)],
    figures: &[Figure],
) -> String {
    let s = &c.scenario;
    let mut out = String::new();
    let _ = writeln!(out, "# {}\n", s.name);
    if !s.description.trim().is_empty() {
        let _ = writeln!(out, "{}\n", s.description.trim());
    }
    let _ = writeln!(
        out,
        "Regenerate with `sim run FILE` (or `cargo run -p sim --release` for the embedded default).\n"
    );

    let _ = writeln!(out, "## Conclusion\n");
    let _ = writeln!(out, "{}\n", conclusion(c, policies, Style::Markdown));

    let _ = writeln!(out, "## Results\n");
    if seeds.len() > 1 {
        let _ = writeln!(
            out,
            "Means over {} seeds ({} to {}), `±` the 95% interval of the mean; recovery is the mean over the runs that recovered, and the verdict the most common one, with its count.\n",
            seeds.len(),
            seeds.first().copied().unwrap_or(0),
            seeds.last().copied().unwrap_or(0)
        );
    }
    out.push_str(&table::markdown(policies));
    let _ = writeln!(
        out,
        "\nBold: the best value of each column. {} Definitions: [below](#definitions).\n",
        table::LEGEND
    );
    if let Some(llm) = super::llm::markdown(policies) {
        let _ = writeln!(out, "\n### Tokens and money\n");
        let _ = writeln!(out, "{llm}");
    }
    if let Some(shadow) = super::shadow::markdown(policies) {
        let _ = writeln!(out, "\n### Breakers in shadow mode\n");
        let _ = writeln!(out, "{shadow}");
    }
    if let Some(fleet) = super::fleet::markdown(policies) {
        let _ = writeln!(out, "\n### Fleet breakers and their store\n");
        let _ = writeln!(out, "{fleet}");
    }

    if let Some(hops) = super::hops::markdown(policies) {
        let _ = writeln!(out, "\n### Per hop of the call graph\n");
        let _ = writeln!(
            out,
            "![the call graph with each downstream's figures](graph.svg)\n"
        );
        let _ = writeln!(out, "{hops}");
    } else if !c.groups.is_empty() {
        let _ = writeln!(out, "\n### Replicas\n");
        let _ = writeln!(
            out,
            "![each replicated downstream with its replicas' figures](graph.svg)\n"
        );
    }
    if let Some(extra) = super::extra_load::markdown(policies) {
        let _ = writeln!(out, "\n### Hedges, extra attempts and concurrency limits\n");
        let _ = writeln!(out, "{extra}");
    }

    if !figures.is_empty() {
        let _ = writeln!(out, "## Plots\n");
        for f in figures {
            let _ = writeln!(out, "### {}\n", f.chart.title);
            let _ = writeln!(out, "![{}]({}.png)\n", f.chart.title, f.stem);
            let _ = writeln!(
                out,
                "*How to read it:* {} (Also as [{}.svg]({}.svg).)\n",
                f.how_to_read, f.stem, f.stem
            );
        }
    }

    let _ = writeln!(out, "## Parameters\n");
    let seeds_text = match seeds {
        [one] => format!("seed {one}"),
        many => format!(
            "{} seeds, {} to {}",
            many.len(),
            many.first().copied().unwrap_or(0),
            many.last().copied().unwrap_or(0)
        ),
    };
    let _ = writeln!(
        out,
        "- horizon {}, buckets of {}, {seeds_text}",
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
    let _ = writeln!(out, "- workload: {workload}: `{}`", ron_line(&s.workload));
    for d in &s.downstreams {
        let _ = writeln!(
            out,
            "- downstream `{}`: `{}`, network `{}`",
            d.name,
            ron_line(&d.model),
            ron_line(&d.network)
        );
    }
    let notes = capacity_notes(c);
    if !notes.is_empty() {
        let _ = writeln!(
            out,
            "- capacity (the dashed line of the plots) = workers ÷ mean service time, reduced while a fault is active (a capacity loss removes ceil(share × workers) workers, a latency inflation multiplies the service time, an outage makes it 0; network delays do not hold a worker):"
        );
        for n in notes {
            let _ = writeln!(out, "  - {n}");
        }
    }
    if s.faults.is_empty() {
        let _ = writeln!(out, "- no faults");
    }
    for f in &s.faults {
        let (from, until) = f.window();
        let _ = writeln!(out, "- fault during [{from}, {until}): `{}`", ron_line(f));
    }
    let _ = writeln!(out, "- recovery: `{}`", ron_line(&s.recovery));
    let _ = writeln!(out, "\n## Policies\n");
    for p in &s.policies {
        let _ = writeln!(out, "- **{}**: `{}`", p.name, ron_line(&p.stack));
    }
    let _ = writeln!(out, "\n## Definitions\n");
    out.push_str(DEFINITIONS);
    out
}

//! The plain-language conclusion printed under the table and written into `summary.md`,
//! computed from the results. Nothing in it is written for a particular policy: it names
//! whatever policies the numbers single out.
//!
//! In order, when they apply:
//! 1. the fault and what it did to the servers' capacity ([`capacity_at`]) compared
//!    with the offered load;
//! 2. which policies *recovered* (with their recovery times, fastest first) and which were
//!    *stuck*, by the verdict of the summary (the most common one over seeds); a stuck policy
//!    whose load after the fault (`amplification.after_fault` × the offered rate) stayed above
//!    the capacity is said to have kept the server overloaded by itself; policies whose verdict
//!    differed between seeds are named with their counts;
//! 3. the lowest and highest amplification during the fault (overall, without faults), with
//!    the reason a value below 1x is possible when that policy refused calls locally;
//! 4. the most and least goodput (and, with several seeds, whether the best is ahead of the
//!    runner-up by more than their 95% intervals);
//! 5. a bottom line: of the policies that recovered (all of them without faults), the one with
//!    the most goodput, ties going to the lower amplification; and which policies to avoid (the
//!    stuck ones).

use crate::metrics::PolicySummary;
use crate::scenario::Compiled;

use super::figures::{capacity_at, offered_at};
use super::plot::group;
use crate::metrics::Verdict;
use crate::scenario::{Fault, OutageMode};
use crate::stats::mean_ci95 as mean_ci;

/// How policy names are set off in the text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Style {
    /// `"name"`, for the terminal.
    Plain,
    /// `**name**`, for Markdown.
    Markdown,
}

impl Style {
    fn name(self, n: &str) -> String {
        match self {
            Style::Plain => format!("\"{n}\""),
            Style::Markdown => format!("**{}**", n.replace('*', "\\*")),
        }
    }
}

fn secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}

/// `30 s`, `1.5 s`.
fn fmt_s(x: f64) -> String {
    if (x - x.round()).abs() < 1e-9 {
        format!("{x:.0} s")
    } else {
        format!("{x:.1} s")
    }
}

/// `a`, `a and b`, `a, b and c`.
fn list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

fn rate(v: f64) -> String {
    group(v, if v < 10.0 && v != 0.0 { 2 } else { 0 })
}

/// A fault in words: `a 60% capacity loss on api`.
pub fn fault_phrase(f: &Fault) -> String {
    let pct = |x: f64| format!("{}%", group(x * 100.0, 0));
    let on = f.downstream().unwrap_or("");
    match f {
        Fault::Outage { mode, .. } => match mode {
            OutageMode::FailFast => format!("an outage of {on} that fails calls at once"),
            OutageMode::Hang => format!("an outage of {on} in which calls hang"),
        },
        Fault::Partition { .. } => {
            format!("a partition that holds the traffic to {on} and releases it when it heals")
        }
        Fault::ErrorRate { rate, .. } => format!("a {} error rate on {on}", pct(*rate)),
        Fault::LatencyInflation { factor, .. } => {
            format!("{on}'s service time multiplied by {factor}")
        }
        Fault::CapacityLoss { share, .. } => format!("a {} capacity loss on {on}", pct(*share)),
        Fault::Throttle {
            share, retry_after, ..
        } => format!(
            "{on} throttling {} of calls (Retry-After {retry_after})",
            pct(*share)
        ),
        Fault::LoadSpike { factor, .. } => format!("a load spike of {factor}x the offered rate"),
    }
}

/// The policies among `ps` whose `key`, written with `digits` decimals, equals `v`'s.
fn tied<'a>(
    ps: &[&'a PolicySummary],
    key: impl Fn(&PolicySummary) -> f64,
    v: f64,
    digits: usize,
) -> Vec<&'a PolicySummary> {
    let shown = format!("{v:.digits$}");
    ps.iter()
        .copied()
        .filter(|p| format!("{:.digits$}", key(p)) == shown)
        .collect()
}

/// The mean offered rate over `[from, to)` ns (open loop), from the scenario.
fn mean_offered(c: &Compiled, from: u64, to: u64) -> Option<f64> {
    if to <= from {
        return offered_at(c, from);
    }
    // Piecewise constant between rate changes; a fine grid is exact enough for a sentence.
    let n = 1000u64;
    let step = (to - from) / n;
    if step == 0 {
        return offered_at(c, from);
    }
    let sum: f64 = (0..n).filter_map(|k| offered_at(c, from + k * step)).sum();
    offered_at(c, from)?;
    Some(sum / n as f64)
}

/// The conclusion for the policies' summaries (the mean over seeds, and each seed's).
pub fn conclusion(
    c: &Compiled,
    policies: &[(PolicySummary, Vec<PolicySummary>)],
    style: Style,
) -> String {
    if policies.is_empty() {
        return "No policies to compare.".into();
    }
    let n = policies.len();
    let name = |p: &PolicySummary| style.name(&p.name);
    let mut out: Vec<String> = Vec::new();
    let horizon = secs(c.horizon_ns);

    let amp_key: fn(&PolicySummary) -> f64;
    match c.timeline.span() {
        Some((a, b)) => {
            amp_key = |p| {
                p.amplification
                    .during_fault
                    .unwrap_or(p.amplification.overall)
            };
            // 1. The fault and the capacity.
            let labels: Vec<String> = {
                let mut v: Vec<String> = Vec::new();
                for f in &c.scenario.faults {
                    let l = fault_phrase(f);
                    if !v.contains(&l) {
                        v.push(l);
                    }
                }
                v
            };
            let nominal = capacity_at(c, b.min(c.horizon_ns));
            let servers = c
                .scenario
                .downstreams
                .iter()
                .filter(|d| matches!(d.model, crate::scenario::DownstreamModel::Server { .. }))
                .count();
            let servers_word = if servers == 1 {
                "the server's"
            } else {
                "the servers'"
            };
            let mut during_min: Option<f64> = None;
            for (t, _) in c.timeline.edges() {
                if *t >= a
                    && *t < b
                    && let Some(v) = capacity_at(c, *t)
                {
                    during_min = Some(during_min.map_or(v, |m: f64| m.min(v)));
                }
            }
            let offered = mean_offered(c, a, b);
            let mut s = format!(
                "The {} ({}) lasted from {} to {}",
                if labels.len() == 1 { "fault" } else { "faults" },
                list(&labels),
                fmt_s(secs(a)),
                fmt_s(secs(b))
            );
            if let (Some(nom), Some(low)) = (nominal, during_min)
                && low < nom * 0.999
            {
                s.push_str(&format!(
                    " and cut {} capacity from about {} to {} jobs/s",
                    servers_word,
                    rate(nom),
                    rate(low)
                ));
                if let Some(off) = offered {
                    s.push_str(&if low < off {
                        format!(", below the {} req/s offered", rate(off))
                    } else {
                        format!(", still above the {} req/s offered", rate(off))
                    });
                }
            }
            s.push('.');
            out.push(s);

            // 2. Recovered and stuck.
            let mut recovered: Vec<&PolicySummary> = policies
                .iter()
                .map(|(m, _)| m)
                .filter(|m| m.verdict == Verdict::Recovered)
                .collect();
            recovered.sort_by(|x, y| {
                x.recovery_s
                    .unwrap_or(f64::INFINITY)
                    .total_cmp(&y.recovery_s.unwrap_or(f64::INFINITY))
            });
            let stuck: Vec<&PolicySummary> = policies
                .iter()
                .map(|(m, _)| m)
                .filter(|m| m.verdict == Verdict::Stuck)
                .collect();
            if !recovered.is_empty() {
                let items: Vec<String> = recovered
                    .iter()
                    .map(|p| match p.recovery_s {
                        Some(r) if r > 0.0 => format!("{} (in {})", name(p), fmt_s(r)),
                        Some(_) => format!("{} (at once)", name(p)),
                        None => name(p),
                    })
                    .collect();
                let head = if recovered.len() == n {
                    format!("All {n} policies recovered")
                } else {
                    format!("{} of {n} policies recovered", recovered.len())
                };
                out.push(format!(
                    "{head} after the {} ended at {}: {}.",
                    if c.scenario.faults.len() == 1 {
                        "fault"
                    } else {
                        "faults"
                    },
                    fmt_s(secs(b)),
                    list(&items)
                ));
            }
            if !stuck.is_empty() {
                let names: Vec<String> = stuck.iter().map(|p| name(p)).collect();
                let head = if stuck.len() == n {
                    "Every policy was stuck: by the horizon".to_string()
                } else if stuck.len() == 1 {
                    format!("{} was stuck: by the horizon", list(&names))
                } else {
                    format!("{} were stuck: by the horizon", list(&names))
                };
                let pron = if stuck.len() == 1 || stuck.len() == n {
                    "its"
                } else {
                    "their"
                };
                out.push(format!(
                    "{head} ({}, {} after the fault) {pron} goodput never held {}% of its pre-fault level for {}, with queue and latency back to theirs.",
                    fmt_s(horizon),
                    fmt_s(horizon - secs(b)),
                    group(c.scenario.recovery.threshold * 100.0, 0),
                    fmt_s(secs(c.scenario.recovery.sustain.as_nanos()))
                ));
                // Overloaded by their own retries after the fault?
                if let (Some(nom), Some(off)) = (nominal, mean_offered(c, b, c.horizon_ns))
                    && off > 0.0
                {
                    let over: Vec<String> = stuck
                        .iter()
                        .filter_map(|p| {
                            let amp = p.amplification.after_fault?;
                            (amp * off > nom).then(|| format!("{} ({:.2}x)", name(p), amp))
                        })
                        .collect();
                    if !over.is_empty() {
                        out.push(format!(
                            "After the fault, {} still sent the server more than its capacity ({:.2}x the offered load): {} own retries kept it overloaded.",
                            list(&over),
                            nom / off,
                            if over.len() == 1 { "its" } else { "their" }
                        ));
                    }
                }
            }
            let inconclusive: Vec<String> = policies
                .iter()
                .map(|(m, _)| m)
                .filter(|m| m.verdict == Verdict::Inconclusive)
                .map(&name)
                .collect();
            if !inconclusive.is_empty() {
                out.push(format!(
                    "The horizon leaves less than one recovery window after the fault, too little time to judge whether {} recovered: extend the horizon.",
                    list(&inconclusive)
                ));
            }
            // Mixed verdicts over seeds.
            let mixed: Vec<String> = policies
                .iter()
                .map(|(m, _)| m)
                .filter(|m| m.verdicts.mixed())
                .map(|m| {
                    let runs = m.verdicts.total();
                    let parts: Vec<String> = m
                        .verdicts
                        .iter()
                        .map(|(v, k)| format!("{v} in {k}"))
                        .collect();
                    format!("{} ({} of {runs} runs)", name(m), list(&parts))
                })
                .collect();
            if !mixed.is_empty() {
                out.push(format!(
                    "The verdict depended on the seed for {}.",
                    list(&mixed)
                ));
            }
        }
        None => {
            amp_key = |p| p.amplification.overall;
            out.push("This scenario has no fault, so there is nothing to recover from.".into());
        }
    }

    // 3. Amplification.
    let all: Vec<&PolicySummary> = policies.iter().map(|(m, _)| m).collect();
    let l = all.iter().map(|p| amp_key(p)).fold(f64::INFINITY, f64::min);
    let h = all
        .iter()
        .map(|p| amp_key(p))
        .fold(f64::NEG_INFINITY, f64::max);
    let when = if c.timeline.span().is_some() {
        "During the fault"
    } else {
        "Over the run"
    };
    if format!("{l:.2}") != format!("{h:.2}") {
        let lows = tied(&all, amp_key, l, 2);
        let highs = tied(&all, amp_key, h, 2);
        let names = |ps: &[&PolicySummary]| list(&ps.iter().map(|p| name(p)).collect::<Vec<_>>());
        let mut s = format!(
            "{when}, {} kept amplification lowest ({l:.2}x server calls per request) and {} pushed it highest ({h:.2}x)",
            names(&lows),
            names(&highs)
        );
        if l < 1.0 && lows.iter().all(|p| p.local_rejections > 0) {
            s.push_str(if lows.len() == 1 {
                "; below 1x means its clients refused some requests locally instead of calling the struggling server"
            } else {
                "; below 1x means their clients refused some requests locally instead of calling the struggling server"
            });
        }
        s.push('.');
        out.push(s);
    } else if n > 1 {
        out.push(format!(
            "{when}, every policy had the same amplification ({l:.2}x server calls per request)."
        ));
    }

    // 4. Goodput.
    let mut ranked: Vec<&(PolicySummary, Vec<PolicySummary>)> = policies.iter().collect();
    ranked.sort_by(|x, y| y.0.goodput_per_s.total_cmp(&x.0.goodput_per_s));
    if let (Some(best), Some(worst)) = (ranked.first(), ranked.last())
        && n > 1
    {
        let good = |p: &PolicySummary| p.goodput_per_s;
        let tops = tied(&all, good, best.0.goodput_per_s, 1);
        let bottoms = tied(&all, good, worst.0.goodput_per_s, 1);
        let names = |ps: &[&PolicySummary]| list(&ps.iter().map(|p| name(p)).collect::<Vec<_>>());
        let mut s = if tops.len() == n {
            format!(
                "Every policy delivered the same goodput ({} req/s)",
                group(best.0.goodput_per_s, 1)
            )
        } else {
            format!(
                "{} delivered the most goodput ({} req/s; {:.1}% of requests succeeded)",
                names(&tops),
                group(best.0.goodput_per_s, 1),
                best.0.success_rate * 100.0
            )
        };
        if let Some(second) = ranked.get(tops.len())
            && best.1.len() > 1
            && tops.len() < n
        {
            let ci = |runs: &[PolicySummary]| {
                let xs: Vec<f64> = runs.iter().map(|r| r.goodput_per_s).collect();
                let (m, h) = mean_ci(&xs);
                (m - h, m + h)
            };
            let (b_lo, _) = ci(&best.1);
            let (_, s_hi) = ci(&second.1);
            if b_lo <= s_hi {
                s.push_str(&format!(
                    ", though {} is within the 95% intervals",
                    name(&second.0)
                ));
            } else {
                s.push_str(", ahead of the others by more than the 95% intervals");
            }
        }
        if tops.len() < n {
            s.push_str(&format!(
                "; {} delivered the least ({} req/s).",
                names(&bottoms),
                group(worst.0.goodput_per_s, 1)
            ));
        } else {
            s.push('.');
        }
        out.push(s);
    }

    // 5. Bottom line.
    let faulty = c.timeline.span().is_some();
    let candidates: Vec<&PolicySummary> = policies
        .iter()
        .map(|(m, _)| m)
        .filter(|m| !faulty || m.verdict == Verdict::Recovered)
        .collect();
    let pick = candidates.iter().copied().max_by(|x, y| {
        x.goodput_per_s
            .total_cmp(&y.goodput_per_s)
            .then(amp_key(y).total_cmp(&amp_key(x)))
    });
    let stuck: Vec<String> = policies
        .iter()
        .map(|(m, _)| m)
        .filter(|m| m.verdict == Verdict::Stuck)
        .map(&name)
        .collect();
    match pick {
        Some(best) if faulty => {
            let mut s = format!(
                "Bottom line: {} kept the downstream alive best in this scenario: it recovered{}, with the most goodput of the policies that did.",
                name(best),
                match best.recovery_s {
                    Some(r) if r > 0.0 => format!(" {} after the fault", fmt_s(r)),
                    Some(_) => " as soon as the fault ended".to_string(),
                    None => String::new(),
                }
            );
            if !stuck.is_empty() {
                s.push_str(&format!(
                    " Avoid {} under this kind of fault.",
                    list(&stuck)
                ));
            }
            out.push(s);
        }
        Some(best) => out.push(format!(
            "Bottom line: {} delivered the most goodput in this scenario.",
            name(best)
        )),
        None => {
            let most = ranked.first().map(|p| name(&p.0)).unwrap_or_default();
            out.push(format!(
                "Bottom line: no policy kept the downstream alive through this fault; {most} lost the least goodput."
            ));
        }
    }
    out.join(" ")
}

/// `text` wrapped at `width` columns (words are never split).
pub fn wrap(text: &str, width: usize) -> String {
    let mut out = String::new();
    let mut line = 0usize;
    for word in text.split_whitespace() {
        let w = word.chars().count();
        if line > 0 && line + 1 + w > width {
            out.push('\n');
            line = 0;
        } else if line > 0 {
            out.push(' ');
            line += 1;
        }
        out.push_str(word);
        line += w;
    }
    out
}

//! The plain-language conclusion printed under the table and written into `summary.md`,
//! computed from the results. Nothing in it is written for a particular policy: it names
//! whatever policies the numbers single out.
//!
//! In order, when they apply:
//! 1. the fault and what it did to the servers' capacity ([`Compiled::capacity_at`]) compared
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

use crate::compile::Compiled;
use crate::metrics::PolicySummary;

use crate::metrics::Verdict;
use crate::plot::group;
use crate::scenario::{DownstreamModel, Fault, OutageMode};
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
        return c.offered_at(from);
    }
    // Piecewise constant between rate changes; a fine grid is exact enough for a sentence.
    let n = 1000u64;
    let step = (to - from) / n;
    if step == 0 {
        return c.offered_at(from);
    }
    let sum: f64 = (0..n).filter_map(|k| c.offered_at(from + k * step)).sum();
    c.offered_at(from)?;
    Some(sum / n as f64)
}

/// The conclusion for the policies' summaries (the mean over seeds, and each seed's): the steps
/// of the module docs, in order, as one paragraph.
pub fn conclusion(
    c: &Compiled,
    policies: &[(PolicySummary, Vec<PolicySummary>)],
    style: Style,
) -> String {
    if policies.is_empty() {
        return "No policies to compare.".into();
    }
    let f = Facts { c, policies, style };
    let mut out: Vec<String> = Vec::new();
    match c.timeline.span() {
        Some((a, b)) => {
            out.push(f.fault_and_capacity(a, b));
            out.extend(f.recovered_and_stuck(b));
        }
        None => {
            out.push("This scenario has no fault, so there is nothing to recover from.".into());
        }
    }
    out.extend(f.amplification());
    out.extend(f.goodput());
    out.push(f.bottom_line());
    out.join(" ")
}

/// What every step of the conclusion reads: the scenario, the policies' summaries (not empty)
/// and how names are set off.
struct Facts<'a> {
    c: &'a Compiled,
    policies: &'a [(PolicySummary, Vec<PolicySummary>)],
    style: Style,
}

impl Facts<'_> {
    fn name(&self, p: &PolicySummary) -> String {
        self.style.name(&p.name)
    }

    fn names(&self, ps: &[&PolicySummary]) -> String {
        list(&ps.iter().map(|p| self.name(p)).collect::<Vec<_>>())
    }

    /// The policies' summaries (means over seeds), in file order.
    fn means(&self) -> Vec<&PolicySummary> {
        self.policies.iter().map(|(m, _)| m).collect()
    }

    /// The policies whose verdict is `v`, in file order.
    fn with_verdict(&self, v: Verdict) -> Vec<&PolicySummary> {
        self.means()
            .into_iter()
            .filter(|m| m.verdict == v)
            .collect()
    }

    fn faulty(&self) -> bool {
        self.c.timeline.span().is_some()
    }

    /// The amplification the conclusion compares: during the fault, or overall without one.
    fn amp_key(&self) -> fn(&PolicySummary) -> f64 {
        if self.faulty() {
            |p| {
                p.amplification
                    .during_fault
                    .unwrap_or(p.amplification.overall)
            }
        } else {
            |p| p.amplification.overall
        }
    }

    /// The policies by goodput, most first (ties in file order).
    fn ranked(&self) -> Vec<&(PolicySummary, Vec<PolicySummary>)> {
        let mut ranked: Vec<&(PolicySummary, Vec<PolicySummary>)> = self.policies.iter().collect();
        ranked.sort_by(|x, y| y.0.goodput_per_s.total_cmp(&x.0.goodput_per_s));
        ranked
    }

    /// The servers' capacity at the end of the fault window `[.., b)`.
    fn nominal(&self, b: u64) -> Option<f64> {
        self.c.capacity_at(b.min(self.c.horizon_ns))
    }

    /// Step 1: The fault (window `[a, b)`) and what it did to the capacity against the offered load.
    fn fault_and_capacity(&self, a: u64, b: u64) -> String {
        let c = self.c;
        let mut labels: Vec<String> = Vec::new();
        for f in &c.scenario.faults {
            let l = fault_phrase(f);
            if !labels.contains(&l) {
                labels.push(l);
            }
        }
        let nominal = self.nominal(b);
        let servers = c
            .scenario
            .downstreams
            .iter()
            .filter(|d| matches!(d.model, DownstreamModel::Server { .. }))
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
                && let Some(v) = c.capacity_at(*t)
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
        s
    }

    /// Step 2: Which policies recovered after the fault ended at `b`, which were stuck (and whether
    /// their own retries kept the server overloaded), which cannot be judged, and whose verdict
    /// depended on the seed.
    fn recovered_and_stuck(&self, b: u64) -> Vec<String> {
        let mut out = Vec::new();
        out.extend(self.recovered(b));
        out.extend(self.stuck(b));
        let inconclusive = self.with_verdict(Verdict::Inconclusive);
        if !inconclusive.is_empty() {
            out.push(format!(
                "The horizon leaves less than one recovery window after the fault, too little time to judge whether {} recovered: extend the horizon.",
                self.names(&inconclusive)
            ));
        }
        out.extend(self.mixed());
        out
    }

    /// The policies that recovered, fastest first.
    fn recovered(&self, b: u64) -> Option<String> {
        let n = self.policies.len();
        let mut recovered = self.with_verdict(Verdict::Recovered);
        if recovered.is_empty() {
            return None;
        }
        recovered.sort_by(|x, y| {
            x.recovery_s
                .unwrap_or(f64::INFINITY)
                .total_cmp(&y.recovery_s.unwrap_or(f64::INFINITY))
        });
        let items: Vec<String> = recovered
            .iter()
            .map(|p| match p.recovery_s {
                Some(r) if r > 0.0 => format!("{} (in {})", self.name(p), fmt_s(r)),
                Some(_) => format!("{} (at once)", self.name(p)),
                None => self.name(p),
            })
            .collect();
        let head = if recovered.len() == n {
            format!("All {n} policies recovered")
        } else {
            format!("{} of {n} policies recovered", recovered.len())
        };
        Some(format!(
            "{head} after the {} ended at {}: {}.",
            if self.c.scenario.faults.len() == 1 {
                "fault"
            } else {
                "faults"
            },
            fmt_s(secs(b)),
            list(&items)
        ))
    }

    /// The stuck policies, and those of them whose load after the fault stayed above capacity.
    fn stuck(&self, b: u64) -> Vec<String> {
        let c = self.c;
        let n = self.policies.len();
        let stuck = self.with_verdict(Verdict::Stuck);
        if stuck.is_empty() {
            return Vec::new();
        }
        let mut out = Vec::new();
        let names: Vec<String> = stuck.iter().map(|p| self.name(p)).collect();
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
        let horizon = secs(c.horizon_ns);
        out.push(format!(
            "{head} ({}, {} after the fault) {pron} goodput never held {}% of its pre-fault level for {}, with queue and latency back to theirs.",
            fmt_s(horizon),
            fmt_s(horizon - secs(b)),
            group(c.scenario.recovery.threshold * 100.0, 0),
            fmt_s(secs(c.scenario.recovery.sustain.as_nanos()))
        ));
        // Overloaded by their own retries after the fault?
        if let (Some(nom), Some(off)) = (self.nominal(b), mean_offered(c, b, c.horizon_ns))
            && off > 0.0
        {
            let over: Vec<String> = stuck
                .iter()
                .filter_map(|p| {
                    let amp = p.amplification.after_fault?;
                    (amp * off > nom).then(|| format!("{} ({:.2}x)", self.name(p), amp))
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
        out
    }

    /// The policies whose verdict differed between seeds, with their counts.
    fn mixed(&self) -> Option<String> {
        let mixed: Vec<String> = self
            .means()
            .into_iter()
            .filter(|m| m.verdicts.mixed())
            .map(|m| {
                let runs = m.verdicts.total();
                let parts: Vec<String> = m
                    .verdicts
                    .iter()
                    .map(|(v, k)| format!("{v} in {k}"))
                    .collect();
                format!("{} ({} of {runs} runs)", self.name(m), list(&parts))
            })
            .collect();
        (!mixed.is_empty())
            .then(|| format!("The verdict depended on the seed for {}.", list(&mixed)))
    }

    /// Step 3: The lowest and highest amplification.
    fn amplification(&self) -> Option<String> {
        let amp_key = self.amp_key();
        let all = self.means();
        let l = all.iter().map(|p| amp_key(p)).fold(f64::INFINITY, f64::min);
        let h = all
            .iter()
            .map(|p| amp_key(p))
            .fold(f64::NEG_INFINITY, f64::max);
        let when = if self.faulty() {
            "During the fault"
        } else {
            "Over the run"
        };
        if format!("{l:.2}") != format!("{h:.2}") {
            let lows = tied(&all, amp_key, l, 2);
            let highs = tied(&all, amp_key, h, 2);
            let mut s = format!(
                "{when}, {} kept amplification lowest ({l:.2}x server calls per request) and {} pushed it highest ({h:.2}x)",
                self.names(&lows),
                self.names(&highs)
            );
            if l < 1.0 && lows.iter().all(|p| p.local_rejections > 0) {
                s.push_str(if lows.len() == 1 {
                    "; below 1x means its clients refused some requests locally instead of calling the struggling server"
                } else {
                    "; below 1x means their clients refused some requests locally instead of calling the struggling server"
                });
            }
            s.push('.');
            Some(s)
        } else if self.policies.len() > 1 {
            Some(format!(
                "{when}, every policy had the same amplification ({l:.2}x server calls per request)."
            ))
        } else {
            None
        }
    }

    /// Step 4: The most and least goodput, and whether the best is ahead by more than the intervals.
    fn goodput(&self) -> Option<String> {
        let n = self.policies.len();
        let ranked = self.ranked();
        let (Some(best), Some(worst)) = (ranked.first(), ranked.last()) else {
            return None;
        };
        if n <= 1 {
            return None;
        }
        let all = self.means();
        let good = |p: &PolicySummary| p.goodput_per_s;
        let tops = tied(&all, good, best.0.goodput_per_s, 1);
        let bottoms = tied(&all, good, worst.0.goodput_per_s, 1);
        let mut s = if tops.len() == n {
            format!(
                "Every policy delivered the same goodput ({} req/s)",
                group(best.0.goodput_per_s, 1)
            )
        } else {
            format!(
                "{} delivered the most goodput ({} req/s; {:.1}% of requests succeeded)",
                self.names(&tops),
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
                    self.name(&second.0)
                ));
            } else {
                s.push_str(", ahead of the others by more than the 95% intervals");
            }
        }
        if tops.len() < n {
            s.push_str(&format!(
                "; {} delivered the least ({} req/s).",
                self.names(&bottoms),
                group(worst.0.goodput_per_s, 1)
            ));
        } else {
            s.push('.');
        }
        Some(s)
    }

    /// Step 5: The bottom line: the policy to pick, and those to avoid.
    fn bottom_line(&self) -> String {
        let amp_key = self.amp_key();
        let faulty = self.faulty();
        let candidates: Vec<&PolicySummary> = self
            .means()
            .into_iter()
            .filter(|m| !faulty || m.verdict == Verdict::Recovered)
            .collect();
        let pick = candidates.iter().copied().max_by(|x, y| {
            x.goodput_per_s
                .total_cmp(&y.goodput_per_s)
                .then(amp_key(y).total_cmp(&amp_key(x)))
        });
        let stuck: Vec<String> = self
            .with_verdict(Verdict::Stuck)
            .iter()
            .map(|p| self.name(p))
            .collect();
        match pick {
            Some(best) if faulty => {
                let mut s = format!(
                    "Bottom line: {} kept the downstream alive best in this scenario: it recovered{}, with the most goodput of the policies that did.",
                    self.name(best),
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
                s
            }
            Some(best) => format!(
                "Bottom line: {} delivered the most goodput in this scenario.",
                self.name(best)
            ),
            None => {
                let ranked = self.ranked();
                let most = ranked.first().map(|p| self.name(&p.0)).unwrap_or_default();
                format!(
                    "Bottom line: no policy kept the downstream alive through this fault; {most} lost the least goodput."
                )
            }
        }
    }
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

//! `summary.json`.
//!
//! ```text
//! { "scenario": str, "seed": int, "horizon_s": f64, "seeds": [int],
//!   "policies": [ { "name", "first_tries", "attempts", "server_arrivals", "successes",
//!                   "success_rate", "goodput_per_s",
//!                   "amplification": { "overall", "peak", "during_fault", "after_fault" },
//!                   "latency_ms": { "p50", "p99", "p999", "count" }, "wasted_work_share",
//!                   "recovery_s", "verdict", ...more fields... } ],
//!   "runs": [ { "seed": int, "policies": [...] } ]  // only with several seeds
//! }
//! ```
//!
//! With one seed, each policy entry is that run's summary. With several, it is the mean over the
//! seeds (integer fields rounded, `recovery_s` averaged over the runs that recovered and `null` if
//! none did, `verdict` the most common one), with `verdicts` counting each verdict and `ci95`
//! giving a normal-approximation 95% interval of the mean for the headline figures.

use serde_json::{Map, Value, json};

use crate::metrics::{GiveUps, PolicySummary, Verdict, Verdicts};
use crate::scenario::Compiled;

/// The file's text (pretty-printed, with a final newline).
pub fn summary_json(
    c: &Compiled,
    seeds: &[u64],
    policies: &[(PolicySummary, Vec<PolicySummary>)],
) -> String {
    let mut root = Map::new();
    root.insert("scenario".into(), json!(c.scenario.name));
    root.insert("seed".into(), json!(seeds.first().copied().unwrap_or(0)));
    root.insert("horizon_s".into(), json!(c.horizon_ns as f64 / 1e9));
    root.insert("bucket_s".into(), json!(c.bucket_ns as f64 / 1e9));
    root.insert("seeds".into(), json!(seeds));
    root.insert(
        "fault_window_s".into(),
        match c.timeline.span() {
            Some((a, b)) => json!([a as f64 / 1e9, b as f64 / 1e9]),
            None => Value::Null,
        },
    );
    let entries: Vec<Value> = policies
        .iter()
        .map(|(mean, runs)| {
            let mut v = serde_json::to_value(mean).unwrap_or(Value::Null);
            if runs.len() > 1
                && let Value::Object(m) = &mut v
            {
                m.insert("ci95".into(), intervals(runs));
            }
            v
        })
        .collect();
    root.insert("policies".into(), Value::Array(entries));
    if seeds.len() > 1 {
        let runs: Vec<Value> = seeds
            .iter()
            .enumerate()
            .map(|(k, seed)| {
                let ps: Vec<Value> = policies
                    .iter()
                    .filter_map(|(_, runs)| runs.get(k))
                    .map(|s| serde_json::to_value(s).unwrap_or(Value::Null))
                    .collect();
                json!({ "seed": seed, "policies": ps })
            })
            .collect();
        root.insert("runs".into(), Value::Array(runs));
    }
    let mut text = serde_json::to_string_pretty(&Value::Object(root)).unwrap_or_default();
    text.push('\n');
    text
}

/// A named figure of a summary.
type Field = (&'static str, fn(&PolicySummary) -> Option<f64>);

fn intervals(runs: &[PolicySummary]) -> Value {
    let fields: [Field; 7] = [
        ("success_rate", |s| Some(s.success_rate)),
        ("goodput_per_s", |s| Some(s.goodput_per_s)),
        ("amplification.peak", |s| Some(s.amplification.peak)),
        ("amplification.during_fault", |s| {
            s.amplification.during_fault
        }),
        ("amplification.after_fault", |s| s.amplification.after_fault),
        ("latency_ms.p99", |s| Some(s.latency_ms.p99)),
        ("recovery_s", |s| s.recovery_s),
    ];
    let mut m = Map::new();
    for (name, get) in fields {
        let xs: Vec<f64> = runs.iter().filter_map(get).collect();
        if xs.is_empty() {
            continue;
        }
        let (mean, half) = crate::stats::mean_ci95(&xs);
        m.insert(name.into(), json!([mean - half, mean + half]));
    }
    Value::Object(m)
}

/// Field-wise mean of several runs' summaries (see the module docs).
pub fn mean_summary(runs: &[PolicySummary]) -> PolicySummary {
    let Some(first) = runs.first() else {
        return empty();
    };
    if runs.len() == 1 {
        return first.clone();
    }
    let values: Vec<Value> = runs
        .iter()
        .map(|r| serde_json::to_value(r).unwrap_or(Value::Null))
        .collect();
    let merged = mean_value(&values);
    let mut s: PolicySummary = match serde_json::from_value::<SummaryMirror>(merged) {
        Ok(m) => m.into_summary(first),
        // Cannot happen for values made by `mean_value` from summaries; keep the first run's
        // numbers rather than fail a report.
        Err(_) => first.clone(),
    };
    s.verdicts = Verdicts::count(runs.iter().map(|r| r.verdict));
    s.verdict = s.verdicts.most_common().unwrap_or(first.verdict);
    s.give_ups = GiveUps::mean(&runs.iter().map(|r| r.give_ups).collect::<Vec<_>>());
    let rec: Vec<f64> = runs.iter().filter_map(|r| r.recovery_s).collect();
    s.recovery_s = (!rec.is_empty()).then(|| crate::stats::mean(&rec));
    let rec: Vec<f64> = runs.iter().filter_map(|r| r.goodput_recovery_s).collect();
    s.goodput_recovery_s = (!rec.is_empty()).then(|| crate::stats::mean(&rec));
    s
}

fn mean_value(vs: &[Value]) -> Value {
    match vs.first() {
        Some(Value::Object(_)) => {
            // Every key that any run has, in order of first appearance.
            let mut keys: Vec<&String> = Vec::new();
            for v in vs {
                if let Value::Object(m) = v {
                    for k in m.keys() {
                        if !keys.contains(&k) {
                            keys.push(k);
                        }
                    }
                }
            }
            let mut out = Map::new();
            for k in keys {
                let col: Vec<Value> = vs
                    .iter()
                    .map(|v| v.get(k).cloned().unwrap_or(Value::Null))
                    .collect();
                out.insert(k.clone(), mean_value(&col));
            }
            Value::Object(out)
        }
        Some(Value::Array(first)) => {
            let n = first.len();
            let items = (0..n)
                .map(|i| {
                    let col: Vec<Value> = vs
                        .iter()
                        .map(|v| v.get(i).cloned().unwrap_or(Value::Null))
                        .collect();
                    mean_value(&col)
                })
                .collect();
            Value::Array(items)
        }
        Some(Value::Number(_) | Value::Null) => {
            let present: Vec<&Value> = vs.iter().filter(|v| !v.is_null()).collect();
            if present.is_empty() {
                return Value::Null;
            }
            if present.iter().all(|v| v.is_u64()) {
                // Counts: a run without the key counted none of it.
                let sum: u64 = present.iter().filter_map(|v| v.as_u64()).sum();
                return json!(crate::stats::mean_count(sum, vs.len()));
            }
            // Optional figures (recovery time, amplification after a fault): the mean over the
            // runs that have one.
            let nums: Vec<f64> = present.iter().filter_map(|v| v.as_f64()).collect();
            if nums.is_empty() {
                return Value::Null;
            }
            json!(crate::stats::mean(&nums))
        }
        Some(other) => other.clone(),
        None => Value::Null,
    }
}

/// The deserialisable shape of [`PolicySummary`] (which is output-only).
#[derive(serde::Deserialize)]
struct SummaryMirror {
    first_tries: u64,
    attempts: u64,
    server_arrivals: u64,
    successes: u64,
    success_rate: f64,
    goodput_per_s: f64,
    amplification: AmpMirror,
    latency_ms: LatMirror,
    wasted_work_share: f64,
    retries: u64,
    failures: u64,
    unfinished: u64,
    timeouts: u64,
    server_rejections: u64,
    local_rejections: u64,
    late_replies: u64,
    server_success_rate: f64,
    success_latency_ms: LatMirror,
    baseline_goodput_per_s: Option<f64>,
    makespan_s: Option<f64>,
    breaker_transitions: u64,
    peak_in_flight: u64,
    events: u64,
    #[serde(default)]
    downstreams: Vec<crate::metrics::DownstreamSummary>,
    #[serde(default)]
    llm: Option<crate::metrics::llm::LlmSummary>,
}

#[derive(serde::Deserialize)]
struct AmpMirror {
    overall: f64,
    peak: f64,
    during_fault: Option<f64>,
    after_fault: Option<f64>,
    #[serde(default)]
    sent_during_fault: Option<f64>,
}

#[derive(serde::Deserialize)]
struct LatMirror {
    p50: f64,
    p99: f64,
    p999: f64,
    mean: f64,
    count: u64,
}

impl From<LatMirror> for crate::metrics::Latency {
    fn from(l: LatMirror) -> Self {
        crate::metrics::Latency {
            p50: l.p50,
            p99: l.p99,
            p999: l.p999,
            mean: l.mean,
            count: l.count,
        }
    }
}

impl SummaryMirror {
    fn into_summary(self, first: &PolicySummary) -> PolicySummary {
        PolicySummary {
            name: first.name.clone(),
            first_tries: self.first_tries,
            attempts: self.attempts,
            server_arrivals: self.server_arrivals,
            successes: self.successes,
            success_rate: self.success_rate,
            goodput_per_s: self.goodput_per_s,
            amplification: crate::metrics::Amplification {
                overall: self.amplification.overall,
                peak: self.amplification.peak,
                during_fault: self.amplification.during_fault,
                after_fault: self.amplification.after_fault,
                sent_during_fault: self.amplification.sent_during_fault,
            },
            latency_ms: self.latency_ms.into(),
            wasted_work_share: self.wasted_work_share,
            recovery_s: None,
            goodput_recovery_s: None,
            verdict: first.verdict,
            verdicts: Default::default(),
            seed: first.seed,
            retries: self.retries,
            failures: self.failures,
            unfinished: self.unfinished,
            timeouts: self.timeouts,
            server_rejections: self.server_rejections,
            local_rejections: self.local_rejections,
            late_replies: self.late_replies,
            server_success_rate: self.server_success_rate,
            success_latency_ms: self.success_latency_ms.into(),
            baseline_goodput_per_s: self.baseline_goodput_per_s,
            makespan_s: self.makespan_s,
            breaker_transitions: self.breaker_transitions,
            give_ups: first.give_ups,
            peak_in_flight: self.peak_in_flight,
            events: self.events,
            downstreams: self.downstreams,
            llm: self.llm,
        }
    }
}

fn empty() -> PolicySummary {
    let z = crate::metrics::Latency {
        p50: 0.0,
        p99: 0.0,
        p999: 0.0,
        mean: 0.0,
        count: 0,
    };
    PolicySummary {
        name: String::new(),
        first_tries: 0,
        attempts: 0,
        server_arrivals: 0,
        successes: 0,
        success_rate: 0.0,
        goodput_per_s: 0.0,
        amplification: crate::metrics::Amplification {
            overall: 0.0,
            peak: 0.0,
            during_fault: None,
            after_fault: None,
            sent_during_fault: None,
        },
        latency_ms: z.clone(),
        wasted_work_share: 0.0,
        recovery_s: None,
        goodput_recovery_s: None,
        verdict: Verdict::NoFault,
        verdicts: Default::default(),
        seed: 0,
        retries: 0,
        failures: 0,
        unfinished: 0,
        timeouts: 0,
        server_rejections: 0,
        local_rejections: 0,
        late_replies: 0,
        server_success_rate: 0.0,
        success_latency_ms: z,
        baseline_goodput_per_s: None,
        makespan_s: None,
        breaker_transitions: 0,
        give_ups: Default::default(),
        peak_in_flight: 0,
        events: 0,
        downstreams: Vec::new(),
        llm: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::Verdict;
    use reliable_core::retry::GiveUpReason;

    #[test]
    fn means_round_integers_and_skip_missing_options() {
        let mut a = empty();
        a.first_tries = 10;
        a.success_rate = 0.5;
        a.recovery_s = Some(2.0);
        a.verdict = Verdict::Recovered;
        let mut b = empty();
        b.first_tries = 13;
        b.success_rate = 1.0;
        b.verdict = Verdict::Stuck;
        let mut c = b.clone();
        c.verdict = Verdict::Recovered;
        c.recovery_s = Some(4.0);
        let budget = GiveUpReason::Budget(reliable_core::budget::Denied::Quota);
        for _ in 0..9 {
            a.give_ups.add(budget);
        }
        for _ in 0..3 {
            b.give_ups.add(GiveUpReason::MaxAttempts);
        }
        for _ in 0..6 {
            c.give_ups.add(GiveUpReason::MaxAttempts);
        }
        let m = mean_summary(&[a.clone(), b.clone(), c]);
        assert_eq!(m.first_tries, 12);
        assert_eq!(m.give_ups.get("budget"), 3, "missing counts are zeros");
        assert_eq!(m.give_ups.get("max-attempts"), 3);
        assert!((m.success_rate - 2.5 / 3.0).abs() < 1e-12);
        assert_eq!(m.recovery_s, Some(3.0));
        assert_eq!(m.verdict, Verdict::Recovered);
        assert_eq!(m.verdicts.get(Verdict::Recovered), 2);
        assert_eq!(m.verdicts.get(Verdict::Stuck), 1);
        // One run recovered, one stuck (an even number of seeds): stuck, in either order.
        assert_eq!(
            mean_summary(&[a.clone(), b.clone()]).verdict,
            Verdict::Stuck
        );
        assert_eq!(mean_summary(&[b, a]).verdict, Verdict::Stuck);
    }

    #[test]
    fn downstream_totals_are_means_too_not_the_first_seeds() {
        let ds = |arrivals: u64, conflicts: Option<u64>| crate::metrics::DownstreamSummary {
            name: "db".into(),
            arrivals,
            ok: arrivals,
            errors: 0,
            rejections: 0,
            hung: 0,
            held: 0,
            completions: arrivals,
            work_s: arrivals as f64 / 10.0,
            wasted_s: 0.0,
            commits: conflicts.map(|_| arrivals),
            conflicts,
        };
        let mut a = empty();
        a.downstreams = vec![ds(100, Some(10))];
        let mut b = empty();
        b.downstreams = vec![ds(200, Some(30))];
        let m = mean_summary(&[a, b]);
        assert_eq!(m.downstreams.len(), 1);
        assert_eq!(m.downstreams[0].name, "db");
        assert_eq!(m.downstreams[0].arrivals, 150);
        assert_eq!(m.downstreams[0].conflicts, Some(20));
        assert!((m.downstreams[0].work_s - 15.0).abs() < 1e-9);
    }
}

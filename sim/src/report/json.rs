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
//! seeds as [`Mean`](crate::metrics::Mean) defines it (integer fields rounded, `recovery_s`
//! averaged over the runs that recovered and `null` if none did, `verdict` the most common one),
//! with `verdicts` counting each verdict and `ci95` giving a normal-approximation 95% interval of
//! the mean for the headline figures ([`PolicySummary::intervals`]).

use serde_json::{Map, Value, json};

use crate::compile::Compiled;
use crate::metrics::PolicySummary;

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

/// The `ci95` object: each headline figure's 95% interval across seeds, by name.
fn intervals(runs: &[PolicySummary]) -> Value {
    let mut m = Map::new();
    for (name, [low, high]) in PolicySummary::intervals(runs) {
        m.insert(name.into(), json!([low, high]));
    }
    Value::Object(m)
}

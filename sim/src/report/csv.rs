//! `timeseries.csv`: a header row, then one row per (policy, seed, bucket), policies in file
//! order, seeds ascending, buckets in time order.
//!
//! Columns: `policy, seed, bucket, t_start_s, t_end_s`, the bucket's counters (`first_tries,
//! retries, attempts, server_arrivals, completions, rejections, local_rejections, timeouts,
//! successes, failures`), its end-of-bucket gauges (`queue_len, busy, in_flight,
//! breaker_open_share`), then derived figures: `amplification` (server arrivals ÷ first tries,
//! empty when there were no first tries), `load_vs_baseline` (server arrivals ÷ mean first tries
//! per bucket), `goodput_per_s`, `work_s` and `wasted_s` (service time finished in the bucket).

use std::fmt::Write;

use crate::client::stack::NodeKind;
use crate::compile::Compiled;
use crate::run::RunResult;
use crate::scenario::Scope;

/// The header row.
pub const HEADER: &str = "policy,seed,bucket,t_start_s,t_end_s,first_tries,retries,attempts,server_arrivals,completions,rejections,local_rejections,timeouts,successes,failures,queue_len,busy,in_flight,breaker_open_share,amplification,load_vs_baseline,goodput_per_s,work_s,wasted_s";

/// Quotes a CSV field if it needs it.
pub fn field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// Number of breaker instances policy `p` has in a run.
pub fn breaker_instances(c: &Compiled, p: usize) -> u64 {
    let clients = u64::from(c.clients());
    c.stacks[p]
        .nodes
        .iter()
        .filter_map(|n| match n.kind {
            NodeKind::Breaker { scope, .. } => {
                Some(if scope == Scope::Shared { 1 } else { clients })
            }
            _ => None,
        })
        .sum()
}

/// The file's text.
pub fn timeseries(c: &Compiled, results: &[RunResult]) -> String {
    let mut out = String::with_capacity(results.len() * c.buckets * 120 + 256);
    out.push_str(HEADER);
    out.push('\n');
    let w = c.bucket_ns as f64 / 1e9;
    let horizon = c.horizon_ns as f64 / 1e9;
    for p in 0..c.stacks.len() {
        let instances = breaker_instances(c, p);
        let name = field(&c.scenario.policies[p].name);
        for r in results.iter().filter(|r| r.policy == p) {
            let b = &r.output.buckets;
            let mean_first =
                b.iter().map(|x| x.first_tries).sum::<u64>() as f64 / b.len().max(1) as f64;
            for (i, x) in b.iter().enumerate() {
                let start = i as f64 * w;
                let end = ((i + 1) as f64 * w).min(horizon);
                let width = (end - start).max(1e-12);
                let amp = if x.first_tries > 0 {
                    format!("{}", x.server_arrivals as f64 / x.first_tries as f64)
                } else {
                    String::new()
                };
                let load = if mean_first > 0.0 {
                    x.server_arrivals as f64 / mean_first
                } else {
                    0.0
                };
                let share = if instances > 0 {
                    x.breakers_open as f64 / instances as f64
                } else {
                    0.0
                };
                let _ = writeln!(
                    out,
                    "{name},{},{i},{start},{end},{},{},{},{},{},{},{},{},{},{},{},{},{},{share},{amp},{load},{},{},{}",
                    r.seed,
                    x.first_tries,
                    x.retries,
                    x.attempts,
                    x.server_arrivals,
                    x.completions,
                    x.rejections,
                    x.local_rejections,
                    x.timeouts,
                    x.successes,
                    x.failures,
                    x.queue_len,
                    x.busy,
                    x.in_flight,
                    x.successes as f64 / width,
                    x.work_us as f64 / 1e6,
                    x.wasted_us as f64 / 1e6,
                );
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_only_when_needed() {
        assert_eq!(field("plain"), "plain");
        assert_eq!(field("a, b"), "\"a, b\"");
        assert_eq!(field("say \"hi\""), "\"say \"\"hi\"\"\"");
    }
}

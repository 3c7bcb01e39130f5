//! `sim trace FILE [--policy NAME]`: one row per logical request, in request order.
//!
//! Columns: request number, start time, the state of each breaker of the stack just before the
//! request (for the request's client; a would-be state for a breaker in shadow mode, whose column
//! is marked `(shadow)`), the final outcome, `served_by` (the layer path that
//! produced the answer), attempts sent, latency, then the calls each downstream had received when
//! the request finished.

use crate::cli::out::outln;
use std::path::PathBuf;

use super::input::read_scenarios;
use crate::client::stack::NodeKind;
use crate::compile::{Compiled, Limits};
use crate::run::trace as run_trace;
use crate::scenario::escape;
use clap::Args;
use reliable_core::Duration;

/// Options of `sim trace`.
#[derive(Debug, Args)]
pub struct TraceArgs {
    /// Scenario file.
    pub file: PathBuf,
    /// Scenario to trace, by name (required when the file holds several).
    #[arg(long)]
    pub scenario: Option<String>,
    /// Policy to trace (required when the scenario has several).
    #[arg(long)]
    pub policy: Option<String>,
    /// Master seed (default: the scenario's).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Print at most this many rows.
    #[arg(long, default_value_t = 1000)]
    pub limit: usize,
}

pub fn trace(args: TraceArgs) -> Result<(), String> {
    let all = read_scenarios(&args.file, &Limits::default())?;
    let c = pick(all, args.scenario.as_deref(), &args.file)?;
    let s = &c.scenario;
    let names: Vec<&str> = s.policies.iter().map(|p| p.name.as_str()).collect();
    let policy = match &args.policy {
        Some(name) => names.iter().position(|n| n == name).ok_or_else(|| {
            format!(
                "no policy named \"{}\": expected one of {}",
                escape(name),
                quoted(&names)
            )
        })?,
        None if names.len() == 1 => 0,
        None => {
            return Err(format!(
                "{} has {} policies: pass --policy with one of {}",
                args.file.display(),
                names.len(),
                quoted(&names)
            ));
        }
    };
    let seed = args.seed.unwrap_or(s.seed);
    // A traced run keeps a row per request: estimate it like one seed of one policy.
    c.estimate(1, 1, 1, &Limits::default())
        .map_err(|e| e.to_string())?;
    let rows = run_trace(&c, policy, seed).map_err(|e| e.to_string())?;
    let stack = &c.stacks[policy];
    let breakers = stack.breakers.len();
    let mut header = vec!["request".to_string(), "time".into()];
    header.extend(stack.breakers.iter().enumerate().map(|(i, &node)| {
        let mut name = if breakers == 1 {
            "breaker".to_string()
        } else {
            format!("breaker{}", i + 1)
        };
        // A breaker in shadow mode admits every call: its state is a would-be state.
        if let NodeKind::Breaker { breaker, .. } = &stack.nodes[node as usize].kind
            && breaker.shadow()
        {
            name.push_str("(shadow)");
        }
        name
    }));
    header.extend(["outcome", "served_by", "attempts", "latency"].map(String::from));
    header.extend(c.ds_names.iter().map(|n| format!("calls:{n}")));
    let mut table: Vec<Vec<String>> = vec![header];
    for r in rows.iter().take(args.limit) {
        let mut row = vec![
            r.request.to_string(),
            Duration::from_nanos(r.start_ns).to_string(),
        ];
        row.extend(r.breakers_before.iter().map(|s| s.to_string()));
        if r.outcome.is_empty() {
            row.extend([
                "(in flight)".to_string(),
                "-".into(),
                r.attempts.to_string(),
                "-".into(),
            ]);
            row.extend(c.ds_names.iter().map(|_| "-".to_string()));
        } else {
            row.extend([
                r.outcome.to_string(),
                r.served_by.clone(),
                r.attempts.to_string(),
                Duration::from_nanos(r.latency_ns).to_string(),
            ]);
            row.extend(r.calls_so_far.iter().map(u64::to_string));
        }
        table.push(row);
    }
    let cols = table.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|i| {
            table
                .iter()
                .filter_map(|r| r.get(i))
                .map(|c| c.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    for row in &table {
        let line: Vec<String> = row
            .iter()
            .enumerate()
            .map(|(i, cell)| format!("{cell:<w$}", w = widths[i]))
            .collect();
        outln!("{}", escape(line.join("  ").trim_end()));
    }
    if rows.len() > args.limit {
        outln!("... {} more rows (raise --limit)", rows.len() - args.limit);
    }
    Ok(())
}

/// The scenario named `name` among those of `file`, or its only one.
pub fn pick(
    mut all: Vec<Compiled>,
    name: Option<&str>,
    file: &std::path::Path,
) -> Result<Compiled, String> {
    let names: Vec<String> = all.iter().map(|c| c.scenario.name.clone()).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    match name {
        Some(n) => match names.iter().position(|x| *x == n) {
            Some(i) => Ok(all.swap_remove(i)),
            None => Err(format!(
                "{} has no scenario named \"{}\": expected one of {}",
                file.display(),
                escape(n),
                quoted(&names)
            )),
        },
        None if all.len() == 1 => Ok(all.remove(0)),
        None => Err(format!(
            "{} holds {} scenarios: pass --scenario with one of {}",
            file.display(),
            all.len(),
            quoted(&names)
        )),
    }
}

fn quoted(names: &[&str]) -> String {
    names
        .iter()
        .map(|n| format!("\"{}\"", escape(n)))
        .collect::<Vec<_>>()
        .join(", ")
}

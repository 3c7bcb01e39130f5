//! Call graphs, for real: what a run needs to know about a scenario whose downstreams include
//! *services* (a `handler` that calls other downstreams), read from the scenario as `sim` reads
//! it.
//!
//! - **Depth** of each downstream: the fewest hops from the edge (the policy's stack calls depth
//!   1), for the per-hop figures (`summary.json`'s `hops`).
//! - **Deadline margins**: a service with `propagate_deadline` honours its caller's deadline less
//!   its margin; what a propagating service calls honours the deadlines its calls carry with no
//!   margin of its own. Such a downstream refuses an arrival past its caller's deadline, drops a
//!   queued job past it or whose caller is gone, and (a service) stops before its calls.
//! - **Replicas**: a call naming a replicated downstream reaches one of its replicas (see
//!   [`crate::balance`]); every replica sits at its group's depth and honours deadlines as the
//!   group does.
//! - **What cannot be emulated** is refused before anything starts, with the reason: outlier
//!   detection over replicas (its ejections are the simulator's alone so far), breakers per
//!   host (`scope: PerHost`: the emulated client keeps one breaker per downstream) and blocking
//!   clients (`interruptible: false`: the emulated clients are async).
//!
//! The deadline travels between hops as a `grpc-timeout` header (the remaining time, in wall
//! microseconds), as gRPC sends it; the server reads it as the request arrives.

use crate::simface::Compiled;

/// A call graph's shape, for one policy.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Per downstream: fewest hops from the edge (`u32::MAX`: no path reaches it).
    pub depth: Vec<u32>,
    /// Per downstream: the margin (virtual ns) it takes off its caller's deadline, if it honours
    /// deadlines.
    pub margin: Vec<Option<u64>>,
}

/// Whether any downstream of `c` is a service.
pub fn is_graph(c: &Compiled) -> bool {
    c.scenario.downstreams.iter().any(|d| d.handler.is_some())
}

/// Refuses what the emulator cannot run as `sim` does, before anything runs: blocking clients
/// (`interruptible: false`), outlier detection over replicas, breakers per host (`scope:
/// PerHost`) and a service's own `Fleet` scopes (the edge's run on real Redis: [`crate::fleet`]).
pub fn check(c: &Compiled) -> Result<(), String> {
    if !c.scenario.interruptible {
        return Err("interruptible: blocking clients (false) are not emulated, only simulated: the emulator's clients are async and drop an attempt at its timer, and a thread per request in flight would not fit the machine (remove the field to emulate this scenario)".into());
    }
    let edge = c
        .scenario
        .policies
        .iter()
        .enumerate()
        .map(|(i, p)| (format!("policies[{i}].stack"), &p.stack, true));
    let hops = c.scenario.downstreams.iter().flat_map(|d| {
        d.handler.iter().flat_map(move |h| {
            h.calls.iter().enumerate().map(move |(k, call)| {
                (
                    format!("downstream \"{}\": handler.calls[{k}].stack", d.name),
                    &call.stack,
                    false,
                )
            })
        })
    });
    for (path, stack, at_edge) in edge.chain(hops) {
        if !at_edge && let Some(field) = stack.fleet(&path) {
            return Err(format!(
                "{field}: a service's own Fleet scope is not emulated yet, only simulated (the workload's clients' are: write PerClient or Shared here to emulate this scenario)"
            ));
        }
        if let Some(field) = stack.per_host(&path) {
            return Err(format!(
                "{field}: breakers per host (scope PerHost) are not emulated yet, only simulated (write PerClient or Shared to emulate this policy)"
            ));
        }
    }
    for g in crate::simface::groups(c) {
        if g.outlier.is_some() {
            return Err(format!(
                "downstream \"{}\": outlier detection over replicas is not emulated yet, only simulated (remove `outlier_detection` to emulate its replicas behind the balancer)",
                g.name
            ));
        }
    }
    Ok(())
}

/// The graph's shape for policy `p` of `c`, or `None` when no downstream is a service: the
/// simulator's own (`sim::emulation::graph_shape`), so both run the same depths and margins.
pub fn plan(c: &Compiled, p: usize) -> Option<Plan> {
    let (depth, margin) = crate::simface::graph_shape(c, p)?;
    Some(Plan { depth, margin })
}

/// The `grpc-timeout` value for `remaining` (at most 8 digits, in the finest unit that fits).
pub fn grpc_timeout(remaining: std::time::Duration) -> String {
    let us = remaining.as_micros();
    if us < 100_000_000 {
        format!("{us}u")
    } else {
        let ms = remaining.as_millis();
        if ms < 100_000_000 {
            format!("{ms}m")
        } else {
            format!("{}S", remaining.as_secs().min(99_999_999))
        }
    }
}

/// Reads a `grpc-timeout` value (`None`: absent or not in gRPC's format).
pub fn parse_grpc_timeout(v: &str) -> Option<std::time::Duration> {
    let (digits, unit) = v.split_at(v.len().checked_sub(1)?);
    if digits.is_empty() || digits.len() > 8 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    use std::time::Duration as D;
    Some(match unit {
        "H" => D::from_secs(n * 3600),
        "M" => D::from_secs(n * 60),
        "S" => D::from_secs(n),
        "m" => D::from_millis(n),
        "u" => D::from_micros(n),
        "n" => D::from_nanos(n),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn grpc_timeouts_read_back() {
        for d in [
            Duration::from_micros(1),
            Duration::from_millis(995),
            Duration::from_secs(150),
            Duration::from_secs(1_000_000),
        ] {
            let v = grpc_timeout(d);
            let back = parse_grpc_timeout(&v).unwrap_or_else(|| panic!("{v}"));
            assert!(back <= d && d - back < Duration::from_secs(1), "{v}");
        }
        for bad in ["", "u", "12", "123456789u", "-1u", "1x", "1.5S"] {
            assert_eq!(parse_grpc_timeout(bad), None, "{bad}");
        }
    }
}

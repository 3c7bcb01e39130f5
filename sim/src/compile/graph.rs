//! Call graphs: downstreams whose handler calls other downstreams (services), checked before
//! anything runs, and their calls' stacks compiled after each policy's own.
//!
//! A graph must be acyclic (a cycle is refused at the call that closes it), every name it calls
//! must exist, and its size is bounded before the run: at most [`MAX_FANOUT`] calls per handler
//! and a longest path of [`MAX_GRAPH_DEPTH`] hops from the edge. The work a request does down the
//! graph (attempts multiply hop by hop) is the run's admission's question
//! ([`crate::run::admission`]), which refuses it over the event and memory limits.

use super::Limits;
use super::livelock::{LIVELOCK, livelock};
use crate::client::CompiledStack;
use crate::scenario::{Check, Checker, DownstreamModel, Path, Scenario, ScenarioError, escape};

/// Most calls one handler makes.
pub const MAX_FANOUT: usize = 64;

/// Most hops on a path through the graph (the edge's call to the first service is hop 1).
pub const MAX_GRAPH_DEPTH: usize = 16;

/// Most layers all handlers' stacks add to one policy's stack.
const MAX_HANDLER_LAYERS: usize = 16_384;

/// The path of call `j` of downstream `i`'s handler.
fn call_path(root: &Path, i: usize, j: usize) -> Path {
    root.field("downstreams")
        .index(i)
        .field("handler")
        .field("calls")
        .index(j)
}

/// Checks every handler: on a `Server`, 1 to [`MAX_FANOUT`] calls, each stack valid (names that
/// exist), the graph acyclic and at most [`MAX_GRAPH_DEPTH`] hops deep.
pub(crate) fn check_graph(
    c: &Checker<'_>,
    s: &Scenario,
    limits: &Limits,
    root: &Path,
    ds_index: &dyn Fn(&str) -> Option<u16>,
) -> Check {
    let n = s.downstreams.len();
    // Per downstream, the downstreams it calls, with the call that names each (for positions).
    let mut edges: Vec<Vec<(usize, usize)>> = vec![Vec::new(); n];
    for (i, d) in s.downstreams.iter().enumerate() {
        let Some(h) = &d.handler else { continue };
        let hp = root.field("downstreams").index(i).field("handler");
        if !matches!(d.model, DownstreamModel::Server { .. }) {
            return Err(c.fail(
                &hp,
                "a handler on a model other than Server: expected a Server (workers, queue, service time), whose jobs make the calls",
            ));
        }
        if h.calls.is_empty() || h.calls.len() > MAX_FANOUT {
            return Err(c.fail(
                &hp.field("calls"),
                format!(
                    "{} calls: expected 1 to {MAX_FANOUT} (the fan-out limit)",
                    h.calls.len()
                ),
            ));
        }
        for (j, call) in h.calls.iter().enumerate() {
            let at = call_path(root, i, j).field("stack");
            let one = CompiledStack::compile(&call.stack, ds_index, c, &at, limits.max_layers)?;
            for callee in one.calls_from(0) {
                let callee = usize::from(callee);
                if callee == i {
                    return Err(c.fail(
                        &at,
                        format!(
                            "\"{}\" calls itself: a cycle (expected an acyclic call graph)",
                            escape(&d.name)
                        ),
                    ));
                }
                edges[i].push((callee, j));
            }
            if let Some(at) = livelock(s, &call.stack, &at) {
                return Err(c.fail(&at, LIVELOCK));
            }
        }
    }
    // Kahn's order: a downstream whose callers are all placed is placed; what is left is on or
    // behind a cycle.
    let mut callers = vec![0usize; n];
    for e in &edges {
        for &(to, _) in e {
            callers[to] += 1;
        }
    }
    let mut order: Vec<usize> = (0..n).filter(|&i| callers[i] == 0).collect();
    let mut k = 0;
    while k < order.len() {
        let u = order[k];
        k += 1;
        for &(to, _) in &edges[u] {
            callers[to] -= 1;
            if callers[to] == 0 {
                order.push(to);
            }
        }
    }
    if order.len() < n {
        // Walk from a left-over downstream along left-over callees until one repeats.
        let left: Vec<bool> = (0..n).map(|i| callers[i] > 0).collect();
        let mut u = (0..n).find(|&i| left[i]).unwrap_or(0);
        let mut seen = vec![usize::MAX; n];
        let mut walk = Vec::new();
        while seen[u] == usize::MAX {
            seen[u] = walk.len();
            let Some(&(to, j)) = edges[u].iter().find(|(to, _)| left[*to]) else {
                break;
            };
            walk.push((u, j));
            u = to;
        }
        let start = seen[u].min(walk.len());
        let cycle = &walk[start..];
        let names: Vec<String> = cycle
            .iter()
            .map(|&(d, _)| escape(&s.downstreams[d].name).into_owned())
            .chain(std::iter::once(escape(&s.downstreams[u].name).into_owned()))
            .collect();
        let (from, j) = cycle.last().copied().unwrap_or((u, 0));
        return Err(c.fail(
            &call_path(root, from, j).field("stack"),
            format!(
                "a cycle: {}: expected an acyclic call graph",
                names.join(" → ")
            ),
        ));
    }
    // Longest path from each downstream, callees first (reverse Kahn order).
    let mut depth = vec![0usize; n];
    for &u in order.iter().rev() {
        depth[u] = edges[u]
            .iter()
            .map(|&(to, _)| depth[to] + 1)
            .max()
            .unwrap_or(0);
        if depth[u] + 1 > MAX_GRAPH_DEPTH {
            let (_, j) = edges[u][0];
            return Err(c.fail(
                &call_path(root, u, j).field("stack"),
                format!(
                    "a path of {} hops from \"{}\": more than the depth limit of {MAX_GRAPH_DEPTH}",
                    depth[u] + 1,
                    escape(&s.downstreams[u].name)
                ),
            ));
        }
    }
    Ok(())
}

/// Compiles every handler's calls into `stack`, after its own nodes.
pub(crate) fn compile_handlers(
    c: &Checker<'_>,
    s: &Scenario,
    limits: &Limits,
    root: &Path,
    ds_index: &dyn Fn(&str) -> Option<u16>,
    stack: &mut CompiledStack,
) -> Result<(), ScenarioError> {
    if s.downstreams.iter().all(|d| d.handler.is_none()) {
        return Ok(());
    }
    let max = stack.nodes.len() + MAX_HANDLER_LAYERS.max(limits.max_layers);
    let mut handlers = vec![Vec::new(); s.downstreams.len()];
    for (i, d) in s.downstreams.iter().enumerate() {
        let Some(h) = &d.handler else { continue };
        for (j, call) in h.calls.iter().enumerate() {
            let at = call_path(root, i, j).field("stack");
            handlers[i].push(stack.add_root(&call.stack, ds_index, c, &at, max)?);
        }
    }
    stack.handlers = handlers;
    Ok(())
}

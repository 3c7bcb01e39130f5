//! Semantic checks: a scenario that parsed may still make no sense.
//!
//! Each check names the field by its path and, where [`locate`] finds it, the line and column:
//! negative or non-finite rates, zero workers or clients, empty windows, faults that start after
//! the horizon or end before they begin, unknown downstream names, duplicate names, policy configs
//! the core refuses (its [`ConfigError`](reliable_core::ConfigError) prefixed with the layer's
//! path), and sizes that would exhaust memory or time ([`Limits`]).

use std::collections::HashMap;

use reliable_core::Duration;

use super::livelock::{LIVELOCK, livelock};
use super::{Limits, compiled};
use crate::client::CompiledStack;
use crate::scenario::*;
use crate::scenario::{Check, Checker, Path, ScenarioError, printable, sweep};

/// Most values on each axis of a map (a 100 × 100 grid at most).
const MAX_MAP_VALUES: usize = 100;

/// Checks one swept parameter (a sweep, or an axis of a map) as if each value were written in the
/// file: the path exists, there are 1 to `max` values, and each variant passes every check.
///
/// With replicas, `s` is the scenario as written (before they were expanded): each variant is
/// expanded and checked whole.
#[allow(clippy::too_many_arguments)]
fn check_axis(
    c: &Checker<'_>,
    s: &Scenario,
    replicated: bool,
    sweep: &Sweep,
    sp: &Path,
    file: &str,
    limits: &Limits,
    max: usize,
    stacks: &[CompiledStack],
) -> Check {
    sweep::check_path(s, &sweep.parameter).map_err(|e| c.fail(&sp.field("parameter"), e))?;
    if sweep.values.is_empty() || sweep.values.len() > max {
        return Err(c.fail(
            &sp.field("values"),
            format!("{} values: expected 1 to {max}", sweep.values.len()),
        ));
    }
    for (i, v) in sweep.values.iter().enumerate() {
        let vp = sp.field("values").index(i);
        let variant = sweep::variant(s, &sweep.parameter, v).map_err(|e| c.fail(&vp, e))?;
        let checked = if replicated {
            super::compile(variant, file, limits).map(drop)
        } else {
            check_variant(&variant, file, limits, &sweep.parameter, stacks)
        };
        checked.map_err(|e| {
            let what = match e {
                ScenarioError::Invalid { field, message, .. } => format!("{field}: {message}"),
                other => other.to_string(),
            };
            c.fail(&vp, format!("with {} = {v}: {what}", sweep.parameter))
        })?;
    }
    Ok(())
}

/// Per-client policy state of `clients` clients (`state_bytes` in all) within the limit.
fn state_fits(
    c: &Checker<'_>,
    root: &Path,
    clients: u32,
    state_bytes: u64,
    limits: &Limits,
) -> Check {
    if state_bytes > limits.max_state_bytes {
        return Err(c.fail(
            &root.field("workload").field("clients"),
            format!(
                "{clients} clients with per-client policy state need about {} MiB, more than {} MiB: expected fewer clients or Shared scope",
                state_bytes >> 20,
                limits.max_state_bytes >> 20
            ),
        ));
    }
    Ok(())
}

/// Checks what parsing cannot (ranges, cross-references, sizes) and compiles each policy's stack,
/// building its core policies once. `text` and `file` are only used to point at the offending
/// field of the scenario at `root` ([`Path::root`] for a file holding one, `Path::root().index(i)`
/// for the `i`-th of a list).
///
/// `written` is the scenario before its replicas were expanded, when it has any: a sweep's or
/// map's paths name its fields, and each of their values is checked as a variant of it.
pub(crate) fn check(
    s: &Scenario,
    written: Option<&Scenario>,
    text: &str,
    file: &str,
    limits: &Limits,
    root: Path,
    groups: &[super::replicas::Group],
) -> Result<Vec<CompiledStack>, ScenarioError> {
    let c = Checker::new(s, text, file);
    check_header(&c, s, limits, &root)?;
    let clients = check_workload(&c, s, limits, &root)?;
    let seen = check_downstreams(&c, s, limits, &root)?;
    // A replicated downstream's name reaches its group (its replica 0 stands for it).
    let ds_index = |name: &str| {
        seen.get(name)
            .map(|&i| i as u16)
            .or_else(|| groups.iter().find(|g| g.name == name).map(|g| g.members[0]))
    };
    check_faults(&c, s, &root, &ds_index)?;
    check_stores(&c, s, &root, clients)?;
    super::graph::check_graph(&c, s, limits, &root, &ds_index)?;
    // The hosts a call to a downstream picks from: its replicas (a call names replica 0).
    let hosts = |ds: u16| {
        groups
            .iter()
            .find(|g| g.members[0] == ds)
            .map_or(1, |g| g.members.len() as u32)
    };
    let stacks = check_policies(&c, s, limits, &root, clients, &ds_index, &hosts)?;
    check_recovery(&c, s, &root)?;
    check_sweep(&c, s, written, file, limits, &root, &stacks)?;
    Ok(stacks)
}

/// Name, horizon, bucket and seeds.
fn check_header(c: &Checker<'_>, s: &Scenario, limits: &Limits, root: &Path) -> Check {
    if s.name.trim().is_empty() {
        return Err(c.fail(
            &root.field("name"),
            "empty name: expected a short name such as \"outage\"",
        ));
    }
    printable(c, &root.field("name"), &s.name)?;
    c.positive(&root.field("horizon"), s.horizon, "the horizon")?;
    if s.horizon > limits.max_horizon {
        return Err(c.fail(
            &root.field("horizon"),
            format!(
                "{} is longer than the {} this simulator accepts",
                s.horizon, limits.max_horizon
            ),
        ));
    }
    c.positive(&root.field("bucket"), s.bucket, "a bucket")?;
    let buckets = s.horizon.as_nanos().div_ceil(s.bucket.as_nanos().max(1));
    if buckets > limits.max_buckets {
        return Err(c.fail(
            &root.field("bucket"),
            format!(
                "{} / {} makes {buckets} buckets, more than {}: expected a wider bucket",
                s.horizon, s.bucket, limits.max_buckets
            ),
        ));
    }
    limits
        .check_seeds(u64::from(s.seeds))
        .map_err(|e| c.fail(&root.field("seeds"), e))?;

    Ok(())
}

/// The workload; returns its number of clients.
fn check_workload(
    c: &Checker<'_>,
    s: &Scenario,
    limits: &Limits,
    root: &Path,
) -> Result<u32, ScenarioError> {
    let w = root.field("workload");
    Ok(match &s.workload {
        Workload::OpenLoop {
            rate,
            clients,
            start,
            steps,
            ..
        } => {
            c.non_negative_rate(&w.field("rate"), *rate, "rate (requests per second)")?;
            c.count(
                &w.field("clients"),
                u64::from(*clients),
                limits.max_clients,
                "clients",
            )?;
            if *start >= s.horizon {
                return Err(c.fail(
                    &w.field("start"),
                    format!(
                        "{start} is at or after the horizon ({}): no request would be sent",
                        s.horizon
                    ),
                ));
            }
            let mut peak = *rate;
            let mut last = Duration::ZERO;
            for (i, step) in steps.iter().enumerate() {
                let p = w.field("steps").index(i);
                c.non_negative_rate(&p.field("rate"), step.rate, "rate (requests per second)")?;
                if step.at >= s.horizon {
                    return Err(c.fail(
                        &p.field("at"),
                        format!("{} is at or after the horizon ({})", step.at, s.horizon),
                    ));
                }
                if i > 0 && step.at <= last {
                    return Err(c.fail(&p.field("at"), format!("{} is not after the previous step ({last}): expected steps in time order", step.at)));
                }
                last = step.at;
                peak = peak.max(step.rate);
            }
            let spike = s
                .faults
                .iter()
                .filter_map(|f| match f {
                    Fault::LoadSpike { factor, .. } if factor.is_finite() => Some(*factor),
                    _ => None,
                })
                .fold(1.0f64, f64::max);
            let expected = peak * spike * s.horizon.as_secs_f64();
            if expected > limits.max_requests {
                return Err(c.fail(
                    &w.field("rate"),
                    format!("up to {expected:.3e} requests over the horizon, more than {:.0e}: expected a lower rate or a shorter horizon", limits.max_requests),
                ));
            }
            *clients
        }
        Workload::ClosedLoop {
            clients,
            think,
            start_spread,
        } => {
            c.count(
                &w.field("clients"),
                u64::from(*clients),
                limits.max_clients,
                "clients",
            )?;
            c.dist(&w.field("think"), think, 0)?;
            if *start_spread > s.horizon {
                return Err(c.fail(&w.field("start_spread"), "longer than the horizon"));
            }
            *clients
        }
        Workload::JobSet {
            clients,
            start_spread,
        } => {
            c.count(
                &w.field("clients"),
                u64::from(*clients),
                limits.max_clients,
                "clients",
            )?;
            if *start_spread > s.horizon {
                return Err(c.fail(&w.field("start_spread"), "longer than the horizon"));
            }
            *clients
        }
    })
}

/// The downstreams; returns each name's index.
fn check_downstreams<'s>(
    c: &Checker<'_>,
    s: &'s Scenario,
    limits: &Limits,
    root: &Path,
) -> Result<HashMap<&'s str, usize>, ScenarioError> {
    let d = root.field("downstreams");
    if s.downstreams.is_empty() {
        return Err(c.fail(&d, "no downstreams: expected at least one, such as (name: \"api\", model: Server(workers: 8, service: Exponential(mean: \"10ms\")))"));
    }
    if s.downstreams.len() > super::replicas::MAX_DOWNSTREAMS {
        return Err(c.fail(&d, "more than 4096 downstreams"));
    }
    let mut seen = HashMap::with_capacity(s.downstreams.len());
    for (i, ds) in s.downstreams.iter().enumerate() {
        let p = d.index(i);
        c.unique_name(&p, i, &ds.name, &mut seen, "downstreams")?;
        let m = p.field("model");
        match &ds.model {
            DownstreamModel::Server {
                workers,
                service,
                error_rate,
                ..
            } => {
                c.count(
                    &m.field("workers"),
                    u64::from(*workers),
                    u64::from(u32::MAX),
                    "workers",
                )?;
                c.dist(&m.field("service"), service, 0)?;
                c.fraction(&m.field("error_rate"), *error_rate, true)?;
            }
            DownstreamModel::Register => {}
            DownstreamModel::LlmProvider(l) => {
                for (field, d) in [
                    ("input_tokens", &l.input_tokens),
                    ("output_tokens", &l.output_tokens),
                ] {
                    d.check().map_err(|e| c.fail(&m.field(field), e))?;
                }
                c.count(
                    &m.field("capacity"),
                    u64::from(l.capacity),
                    u64::from(u32::MAX),
                    "capacity",
                )?;
                for (field, v) in [("rpm", l.rpm), ("itpm", l.itpm), ("otpm", l.otpm)] {
                    if v == Some(0) {
                        return Err(c.fail(
                            &m.field(field),
                            "a limit of 0 admits nothing: expected at least 1, or leave it out",
                        ));
                    }
                }
                if !(l.slowdown.is_finite() && l.slowdown >= 0.0) {
                    return Err(c.fail(
                        &m.field("slowdown"),
                        format!("{} must be a finite number >= 0", l.slowdown),
                    ));
                }
            }
            DownstreamModel::Scripted {
                script,
                then,
                latencies,
                ..
            } => {
                for (field, len) in [("script", script.len()), ("latencies", latencies.len())] {
                    if len > limits.max_script {
                        return Err(c.fail(
                            &m.field(field),
                            format!("{len} answers, more than {}", limits.max_script),
                        ));
                    }
                }
                let answers = script
                    .iter()
                    .enumerate()
                    .map(|(k, a)| (m.field("script").index(k), a));
                for (at, a) in answers.chain(std::iter::once((m.field("then"), then))) {
                    if let ScriptAnswer::Status { status, .. } = a
                        && !(100..=599).contains(status)
                    {
                        return Err(c.fail(
                            &at.field("status"),
                            format!("{status} is not a status: expected 100..=599"),
                        ));
                    }
                }
            }
        }
        c.dist(&p.field("network").field("request"), &ds.network.request, 0)?;
        c.dist(
            &p.field("network").field("response"),
            &ds.network.response,
            0,
        )?;
    }
    if compiled::scripted_hints(s).len() + s.faults.len() > compiled::MAX_HINTS
        || compiled::scripted_statuses(s).len() > compiled::MAX_HINTS
    {
        return Err(c.fail(
            &d,
            format!(
                "more than {} distinct Retry-After hints (faults included) or scripted statuses",
                compiled::MAX_HINTS
            ),
        ));
    }

    Ok(seen)
}

/// The faults: windows inside the horizon, known downstreams, values in range.
fn check_faults(
    c: &Checker<'_>,
    s: &Scenario,
    root: &Path,
    ds_index: &dyn Fn(&str) -> Option<u16>,
) -> Check {
    let f = root.field("faults");
    if s.faults.len() > u16::MAX as usize {
        return Err(c.fail(&f, "too many faults"));
    }
    for (i, fault) in s.faults.iter().enumerate() {
        let p = f.index(i);
        let (from, until) = fault.window();
        c.window(&p, from, until, s.horizon)?;
        if let Some(name) = fault.downstream()
            && ds_index(name).is_none()
        {
            return Err(c.fail(
                &p.field("downstream"),
                format!(
                    "no downstream named \"{}\": expected one of {}",
                    escape(name),
                    c.downstream_names()
                ),
            ));
        }
        match fault {
            Fault::ErrorRate { rate, .. } => c.fraction(&p.field("rate"), *rate, true)?,
            Fault::LatencyInflation { factor, .. } => {
                if !factor.is_finite() || *factor < 1.0 || *factor > 1e6 {
                    return Err(c.fail(
                        &p.field("factor"),
                        format!("{factor}: expected a finite factor in [1, 1e6]"),
                    ));
                }
            }
            Fault::CapacityLoss { share, .. } => c.fraction(&p.field("share"), *share, false)?,
            Fault::Throttle { share, .. } => c.fraction(&p.field("share"), *share, false)?,
            Fault::LoadSpike { factor, .. } => {
                if !factor.is_finite() || *factor <= 0.0 || *factor > 1e6 {
                    return Err(c.fail(
                        &p.field("factor"),
                        format!("{factor}: expected a finite factor in (0, 1e6]"),
                    ));
                }
                if !matches!(s.workload, Workload::OpenLoop { .. }) {
                    return Err(c.fail(&p, "a LoadSpike multiplies an open-loop arrival rate, but the workload is not OpenLoop"));
                }
            }
            Fault::Outage { .. } | Fault::Partition { .. } => {}
        }
    }

    Ok(())
}

/// Most stores a scenario declares, and most faults of each and of the clients.
const MAX_STORES: usize = 16;
const MAX_STORE_FAULTS: usize = 256;

/// The stores (unique names a policy can write, round trips, fault windows inside the horizon)
/// and the client faults (a client of the workload, a window inside the horizon).
fn check_stores(c: &Checker<'_>, s: &Scenario, root: &Path, clients: u32) -> Check {
    let st = root.field("stores");
    if s.stores.len() > MAX_STORES {
        return Err(c.fail(
            &st,
            format!("{} stores: expected at most {MAX_STORES}", s.stores.len()),
        ));
    }
    let mut seen = HashMap::new();
    for (i, store) in s.stores.iter().enumerate() {
        let p = st.index(i);
        c.unique_name(&p, i, &store.name, &mut seen, "stores")?;
        if reliable_core::policy::StoreName::new(&store.name).is_none() {
            return Err(c.fail(&p.field("name"), reliable_core::policy::STORE_NAME_RULE));
        }
        c.dist(&p.field("round_trip"), &store.round_trip, 0)?;
        let f = p.field("faults");
        if store.faults.len() > MAX_STORE_FAULTS {
            return Err(c.fail(&f, format!("expected at most {MAX_STORE_FAULTS} faults")));
        }
        for (k, fault) in store.faults.iter().enumerate() {
            let (from, until) = fault.window();
            c.window(&f.index(k), from, until, s.horizon)?;
        }
    }
    let cf = root.field("client_faults");
    if s.client_faults.len() > MAX_STORE_FAULTS {
        return Err(c.fail(&cf, format!("expected at most {MAX_STORE_FAULTS} faults")));
    }
    for (k, fault) in s.client_faults.iter().enumerate() {
        let p = cf.index(k);
        let crate::scenario::ClientFault::NetworkDown {
            client,
            from,
            until,
        } = fault;
        c.window(&p, *from, *until, s.horizon)?;
        if *client >= clients {
            return Err(c.fail(
                &p.field("client"),
                format!(
                    "client {client}: expected one of the workload's clients, 0 to {}",
                    clients.saturating_sub(1)
                ),
            ));
        }
    }
    Ok(())
}

/// Compiles every policy's stack (linear in their number), refusing livelocks and per-client
/// state that would not fit.
fn check_policies(
    c: &Checker<'_>,
    s: &Scenario,
    limits: &Limits,
    root: &Path,
    clients: u32,
    ds_index: &dyn Fn(&str) -> Option<u16>,
    hosts: &dyn Fn(u16) -> u32,
) -> Result<Vec<CompiledStack>, ScenarioError> {
    let pol = root.field("policies");
    if s.policies.is_empty() {
        return Err(c.fail(&pol, "no policies: expected at least one, such as (name: \"plain\", stack: Call(downstream: \"api\"))"));
    }
    let mut state_bytes: u64 = 0;
    let mut stacks = Vec::with_capacity(s.policies.len());
    let mut seen = HashMap::with_capacity(s.policies.len());
    for (i, policy) in s.policies.iter().enumerate() {
        let p = pol.index(i);
        c.unique_name(&p, i, &policy.name, &mut seen, "policies")?;
        let mut stack = CompiledStack::compile(
            &policy.stack,
            ds_index,
            c,
            &p.field("stack"),
            limits.max_layers,
        )?;
        super::graph::compile_handlers(c, s, limits, root, ds_index, &mut stack)?;
        stack.count_hosts(hosts);
        for n in &stack.nodes {
            if let crate::client::NodeKind::Llm { ds, .. } = n.kind {
                let is_llm = s
                    .downstreams
                    .get(usize::from(ds))
                    .is_some_and(|d| matches!(d.model, DownstreamModel::LlmProvider(_)));
                if !is_llm {
                    return Err(c.fail(
                        &p.field("stack"),
                        "an Llm layer names a downstream that is not an LlmProvider",
                    ));
                }
            }
        }
        if !s.interruptible
            && let Some(ds) = stack.uninterruptible_refused()
        {
            let call = s
                .downstreams
                .get(usize::from(ds))
                .map_or("", |d| d.name.as_str());
            return Err(c.fail(
                &p.field("stack"),
                format!(
                    "interruptible: false, but the Call to {call:?} is not a copy the call engine sends (it sits alone in a Fallback, or below a fleet's or a per-host breaker): only the engine models an attempt no timer ends"
                ),
            ));
        }
        if let Some(at) = livelock(s, &policy.stack, &p.field("stack")) {
            return Err(c.fail(&at, LIVELOCK));
        }
        state_bytes = state_bytes.max(stack.per_client_bytes.saturating_mul(u64::from(clients)));
        stacks.push(stack);
    }
    state_fits(c, root, clients, state_bytes, limits)?;

    Ok(stacks)
}

/// The recovery rule's shares and window.
fn check_recovery(c: &Checker<'_>, s: &Scenario, root: &Path) -> Check {
    let r = root.field("recovery");
    c.fraction(&r.field("threshold"), s.recovery.threshold, false)?;
    c.positive(&r.field("sustain"), s.recovery.sustain, "sustain")?;
    let settle = s.recovery.settle;
    if !(settle.is_finite() && (1.0..=1e6).contains(&settle)) {
        return Err(c.fail(
            &r.field("settle"),
            format!("{settle}: expected a factor in [1, 1e6]: queue and latency count as back at most settle × their pre-fault level"),
        ));
    }
    let relapse = s.recovery.relapse;
    if !(relapse.is_finite() && (0.0..=s.recovery.threshold).contains(&relapse)) {
        return Err(c.fail(
            &r.field("relapse"),
            format!(
                "{relapse} is not a share in [0, threshold = {}]: a window is judged down below relapse × healthy and healthy at threshold × healthy",
                s.recovery.threshold
            ),
        ));
    }

    Ok(())
}

/// A sweep's path and values: each value must make a valid scenario. Only the sections the
/// parameter can change are checked again; a parameter outside `policies` keeps the compiled
/// stacks (`stacks`), so a file with many policies and many values stays linear.
fn check_sweep(
    c: &Checker<'_>,
    s: &Scenario,
    written: Option<&Scenario>,
    file: &str,
    limits: &Limits,
    root: &Path,
    stacks: &[CompiledStack],
) -> Check {
    if let Some(sweep) = &s.sweep {
        check_axis(
            c,
            written.unwrap_or(s),
            written.is_some(),
            sweep,
            &root.field("sweep"),
            file,
            limits,
            1000,
            stacks,
        )?;
    }
    if let Some(map) = &s.map {
        let mp = root.field("map");
        check_axis(
            c,
            written.unwrap_or(s),
            written.is_some(),
            &map.x,
            &mp.field("x"),
            file,
            limits,
            MAX_MAP_VALUES,
            stacks,
        )?;
        check_axis(
            c,
            written.unwrap_or(s),
            written.is_some(),
            &map.y,
            &mp.field("y"),
            file,
            limits,
            MAX_MAP_VALUES,
            stacks,
        )?;
        if map.x.parameter.trim() == map.y.parameter.trim() {
            return Err(c.fail(
                &mp.field("y").field("parameter"),
                format!(
                    "`{}` is also the x parameter: expected two different parameters",
                    map.y.parameter
                ),
            ));
        }
    }
    Ok(())
}

/// [`check`] of a sweep's variant (whose errors have no position in the file), recompiling the
/// policies only when the swept parameter is one of theirs.
fn check_variant(
    v: &Scenario,
    file: &str,
    limits: &Limits,
    parameter: &str,
    stacks: &[CompiledStack],
) -> Check {
    if parameter.starts_with("policies") || parameter.starts_with(sweep::GRAPH) {
        return check(v, None, "", file, limits, Path::root(), &[]).map(drop);
    }
    let c = Checker::new(v, "", file);
    let root = Path::root();
    check_header(&c, v, limits, &root)?;
    let clients = check_workload(&c, v, limits, &root)?;
    let seen = check_downstreams(&c, v, limits, &root)?;
    // A scenario with replicas has each variant checked whole (`check_axis`): no groups here.
    let ds_index = |name: &str| seen.get(name).map(|&i| i as u16);
    check_faults(&c, v, &root, &ds_index)?;
    // What the new value can change for the policies: a downstream or fault that makes a retry
    // loop spin at one instant, or more clients for their per-client state.
    let pol = root.field("policies");
    if parameter.starts_with("downstreams") || parameter.starts_with("faults") {
        for (i, policy) in v.policies.iter().enumerate() {
            let p = pol.index(i).field("stack");
            if let Some(at) = livelock(v, &policy.stack, &p) {
                return Err(c.fail(&at, LIVELOCK));
            }
        }
    }
    let per_client = stacks
        .iter()
        .map(|st| st.per_client_bytes)
        .max()
        .unwrap_or(0);
    state_fits(
        &c,
        &root,
        clients,
        per_client.saturating_mul(u64::from(clients)),
        limits,
    )?;
    check_recovery(&c, v, &root)
}

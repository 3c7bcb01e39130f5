//! Semantic checks: a scenario that parsed may still make no sense.
//!
//! Each check names the field by its path and, where [`locate`] finds it, the line and column:
//! negative or non-finite rates, zero workers or clients, empty windows, faults that start after
//! the horizon or end before they begin, unknown downstream names, duplicate names, policy configs
//! the core refuses (its [`ConfigError`](reliable_core::ConfigError) prefixed with the layer's
//! path), and sizes that would exhaust memory or time ([`Limits`]).

use reliable_core::Duration;
use reliable_core::breaker::BreakerPolicy;

use super::error::ScenarioError;
use super::locate::{Path, Seg, locate};
use super::types::*;
use reliable_core::budget::BudgetPolicy;
use reliable_core::retry::RetryPolicy;
use reliable_core::throttle::ThrottlePolicy;

use crate::client::breakers::BreakerSlot;
use crate::client::budgets::{BudgetSlot, ThrottleSlot};

/// Upper bounds that keep a run within memory and time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Limits {
    /// Most metrics buckets per run.
    pub max_buckets: u64,
    /// Most clients.
    pub max_clients: u64,
    /// Most logical requests a workload may be expected to start (rate × horizon).
    pub max_requests: f64,
    /// Most bytes of per-client policy state (breakers, budgets) for one run.
    pub max_state_bytes: u64,
    /// Most seeds.
    pub max_seeds: u32,
    /// Most layers in one stack.
    pub max_layers: usize,
    /// Most scripted answers.
    pub max_script: usize,
    /// Longest horizon.
    pub max_horizon: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_buckets: 1_000_000,
            max_clients: 100_000_000,
            max_requests: 2e9,
            max_state_bytes: 4 << 30,
            max_seeds: 100_000,
            max_layers: 256,
            max_script: 1_000_000,
            max_horizon: Duration::from_secs(366 * 24 * 3600),
        }
    }
}

struct Checker<'a> {
    text: &'a str,
    file: &'a str,
}

type Check = Result<(), ScenarioError>;

impl Checker<'_> {
    /// `name` (of the item at `item`) is not empty and differs from every `earlier` name in `list`.
    fn unique_name<'n>(
        &self,
        item: &Path,
        name: &str,
        earlier: impl Iterator<Item = &'n str>,
        list: &str,
    ) -> Result<(), ScenarioError> {
        if name.trim().is_empty() {
            return Err(self.fail(&item.field("name"), "empty name"));
        }
        match earlier.enumerate().find(|(_, other)| *other == name) {
            Some((j, _)) => Err(self.fail(
                &item.field("name"),
                format!("\"{name}\" is already the name of {list}[{j}]: names must be unique"),
            )),
            None => Ok(()),
        }
    }

    fn fail(&self, path: &Path, message: impl Into<String>) -> ScenarioError {
        ScenarioError::Invalid {
            path: self.file.to_string(),
            position: locate(self.text, path),
            field: path.to_string(),
            message: message.into(),
        }
    }

    fn non_negative_rate(&self, path: &Path, v: f64, what: &str) -> Check {
        if !v.is_finite() || v < 0.0 {
            return Err(self.fail(
                path,
                format!("{v} is not a valid {what}: expected a finite number >= 0"),
            ));
        }
        Ok(())
    }

    fn fraction(&self, path: &Path, v: f64, zero_ok: bool) -> Check {
        let ok = v.is_finite() && v <= 1.0 && (v > 0.0 || (zero_ok && v == 0.0));
        if !ok {
            let range = if zero_ok { "[0, 1]" } else { "(0, 1]" };
            return Err(self.fail(path, format!("{v} is not a share in {range}")));
        }
        Ok(())
    }

    fn positive(&self, path: &Path, d: Duration, what: &str) -> Check {
        if d.is_zero() {
            return Err(self.fail(path, format!("{what} must be longer than 0")));
        }
        Ok(())
    }

    fn count(&self, path: &Path, n: u64, max: u64, what: &str) -> Check {
        if n == 0 {
            return Err(self.fail(path, format!("0 {what}: expected at least 1")));
        }
        if n > max {
            return Err(self.fail(
                path,
                format!("{n} {what} is more than this simulator accepts ({max}); it would exhaust memory"),
            ));
        }
        Ok(())
    }

    fn dist(&self, path: &Path, d: &Dist, depth: usize) -> Check {
        if depth > 16 {
            return Err(self.fail(path, "distributions nested more than 16 deep"));
        }
        let day = Duration::from_secs(86_400);
        match d {
            Dist::Constant(_) => {}
            Dist::Exponential { mean } => {
                if *mean > day.saturating_mul(365) {
                    return Err(self.fail(
                        &path.field("mean"),
                        "a mean above a year is not a service or network time",
                    ));
                }
            }
            Dist::LogNormal { scale, mu, sigma } => {
                if !mu.is_finite() || mu.abs() > 50.0 {
                    return Err(self.fail(
                        &path.field("mu"),
                        format!("{mu}: expected a finite number in [-50, 50]"),
                    ));
                }
                if !sigma.is_finite() || *sigma < 0.0 || *sigma > 10.0 {
                    return Err(self.fail(
                        &path.field("sigma"),
                        format!("{sigma}: expected a finite number in [0, 10]"),
                    ));
                }
                let mean = scale.as_secs_f64() * (mu + sigma * sigma / 2.0).exp();
                if !mean.is_finite() || mean > 86_400.0 * 365.0 {
                    return Err(self.fail(path, format!("the mean of this distribution is {mean:.3e} s: expected something below a year")));
                }
            }
            Dist::Normal { .. } => {}
            Dist::Uniform { low, high } => {
                if low > high {
                    return Err(self.fail(
                        &path.field("high"),
                        format!("{high} is below low ({low}): expected low <= high"),
                    ));
                }
            }
            Dist::Choice(values) => {
                if values.is_empty() {
                    return Err(self.fail(path, "an empty Choice: expected at least one value"));
                }
                if values.len() > 10_000 {
                    return Err(self.fail(
                        path,
                        format!(
                            "a Choice of {} values: expected at most 10000",
                            values.len()
                        ),
                    ));
                }
            }
            Dist::Bimodal {
                slow_share,
                fast,
                slow,
            } => {
                self.fraction(&path.field("slow_share"), *slow_share, true)?;
                self.dist(&path.field("fast"), fast, depth + 1)?;
                self.dist(&path.field("slow"), slow, depth + 1)?;
            }
        }
        Ok(())
    }

    fn window(&self, path: &Path, from: Duration, until: Duration, horizon: Duration) -> Check {
        if from >= horizon {
            return Err(self.fail(
                &path.field("from"),
                format!(
                    "starts at {from}, at or after the horizon ({horizon}): it would never happen"
                ),
            ));
        }
        if until <= from {
            return Err(self.fail(
                &path.field("until"),
                format!("{until} is not after from ({from}): expected from < until"),
            ));
        }
        if until > horizon {
            return Err(self.fail(
                &path.field("until"),
                format!("{until} is after the horizon ({horizon}): expected until <= horizon (extend the horizon to see the recovery)"),
            ));
        }
        Ok(())
    }
}

/// Checks what parsing cannot: ranges, cross-references and sizes. `text` and `path` are only used
/// to point at the offending field.
pub fn validate(s: &Scenario, text: &str, file: &str) -> Result<(), ScenarioError> {
    validate_with(s, text, file, Limits::default())
}

/// [`validate`] with explicit [`Limits`].
pub fn validate_with(
    s: &Scenario,
    text: &str,
    file: &str,
    limits: Limits,
) -> Result<(), ScenarioError> {
    validate_at(s, text, file, limits, Path::root())
}

/// [`validate`] for the scenario at `root` in `text`: [`Path::root`] for a file holding one, or
/// `Path::root().index(i)` for the `i`-th of a list.
pub fn validate_at(
    s: &Scenario,
    text: &str,
    file: &str,
    limits: Limits,
    root: Path,
) -> Result<(), ScenarioError> {
    let c = Checker { text, file };
    if s.name.trim().is_empty() {
        return Err(c.fail(
            &root.field("name"),
            "empty name: expected a short name such as \"outage\"",
        ));
    }
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
    c.count(
        &root.field("seeds"),
        u64::from(s.seeds),
        u64::from(limits.max_seeds),
        "seeds",
    )?;

    // Workload.
    let w = root.field("workload");
    let clients = match &s.workload {
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
    };

    // Downstreams.
    let d = root.field("downstreams");
    if s.downstreams.is_empty() {
        return Err(c.fail(&d, "no downstreams: expected at least one, such as (name: \"api\", model: Server(workers: 8, service: Exponential(mean: \"10ms\")))"));
    }
    if s.downstreams.len() > 4096 {
        return Err(c.fail(&d, "more than 4096 downstreams"));
    }
    for (i, ds) in s.downstreams.iter().enumerate() {
        let p = d.index(i);
        let earlier = s.downstreams[..i].iter().map(|o| o.name.as_str());
        c.unique_name(&p, &ds.name, earlier, "downstreams")?;
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
            DownstreamModel::Scripted { script, .. } => {
                if script.len() > limits.max_script {
                    return Err(c.fail(
                        &m.field("script"),
                        format!("{} answers, more than {}", script.len(), limits.max_script),
                    ));
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
    let known = |name: &str| s.downstreams.iter().any(|d| d.name == name);
    let names = || {
        s.downstreams
            .iter()
            .map(|d| format!("\"{}\"", d.name))
            .collect::<Vec<_>>()
            .join(", ")
    };

    // Faults.
    let f = root.field("faults");
    if s.faults.len() > u16::MAX as usize {
        return Err(c.fail(&f, "too many faults"));
    }
    for (i, fault) in s.faults.iter().enumerate() {
        let p = f.index(i);
        let (from, until) = fault.window();
        c.window(&p, from, until, s.horizon)?;
        if let Some(name) = fault.downstream()
            && !known(name)
        {
            return Err(c.fail(
                &p.field("downstream"),
                format!(
                    "no downstream named \"{name}\": expected one of {}",
                    names()
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
            Fault::Outage { .. } => {}
        }
    }

    // Policies.
    let pol = root.field("policies");
    if s.policies.is_empty() {
        return Err(c.fail(&pol, "no policies: expected at least one, such as (name: \"plain\", stack: Call(downstream: \"api\"))"));
    }
    let mut state_bytes: u64 = 0;
    for (i, policy) in s.policies.iter().enumerate() {
        let p = pol.index(i);
        let earlier = s.policies[..i].iter().map(|o| o.name.as_str());
        c.unique_name(&p, &policy.name, earlier, "policies")?;
        // Walk the stack without recursion.
        let mut todo: Vec<(&Layer, Path, usize)> = vec![(&policy.stack, p.field("stack"), 0)];
        let mut layers = 0usize;
        let mut per_client_bytes: u64 = 0;
        while let Some((layer, lp, depth)) = todo.pop() {
            layers += 1;
            if layers > limits.max_layers || depth > 64 {
                return Err(c.fail(
                    &p.field("stack"),
                    format!(
                        "more than {} layers (or nested deeper than 64)",
                        limits.max_layers
                    ),
                ));
            }
            match layer {
                Layer::Call {
                    downstream,
                    timeout,
                    timeout_dist,
                } => {
                    if !known(downstream) {
                        return Err(c.fail(
                            &lp.field("downstream"),
                            format!(
                                "no downstream named \"{downstream}\": expected one of {}",
                                names()
                            ),
                        ));
                    }
                    if let Some(t) = timeout {
                        c.positive(&lp.field("timeout"), *t, "a timeout")?;
                    }
                    if let Some(d) = timeout_dist {
                        let dp = lp.field("timeout_dist");
                        if timeout.is_some() {
                            return Err(c.fail(
                                &dp,
                                "both timeout and timeout_dist: expected one of them (a fixed timeout, or one drawn per request)",
                            ));
                        }
                        c.dist(&dp, d, 0)?;
                    }
                }
                Layer::Breaker {
                    config,
                    scope,
                    inner,
                } => {
                    let cp = lp.field("config");
                    let policy =
                        BreakerPolicy::new(*config).map_err(|e| config_error(&c, &cp, e))?;
                    let bytes =
                        BreakerSlot::bytes_for(&policy).map_err(|e| config_error(&c, &cp, e))?;
                    if *scope == Scope::PerClient {
                        per_client_bytes += bytes as u64;
                    }
                    todo.push((inner, lp.field("inner"), depth + 1));
                }
                Layer::Retry {
                    policy,
                    budget,
                    budget_scope,
                    inner,
                } => {
                    RetryPolicy::new(*policy)
                        .map_err(|e| config_error(&c, &lp.field("policy"), e))?;
                    if let Some(b) = budget {
                        let bp = lp.field("budget");
                        let bpol = BudgetPolicy::new(*b).map_err(|e| config_error(&c, &bp, e))?;
                        let bytes =
                            BudgetSlot::bytes_for(&bpol).map_err(|e| config_error(&c, &bp, e))?;
                        if *budget_scope == Scope::PerClient {
                            per_client_bytes += bytes as u64;
                        }
                    }
                    todo.push((inner, lp.field("inner"), depth + 1));
                }
                Layer::Throttle {
                    config,
                    scope,
                    inner,
                } => {
                    let cp = lp.field("config");
                    let tp = ThrottlePolicy::new(*config).map_err(|e| config_error(&c, &cp, e))?;
                    let bytes =
                        ThrottleSlot::bytes_for(tp).map_err(|e| config_error(&c, &cp, e))?;
                    if *scope == Scope::PerClient {
                        per_client_bytes += bytes as u64;
                    }
                    todo.push((inner, lp.field("inner"), depth + 1));
                }
                Layer::Llm {
                    downstream,
                    spend,
                    proactive,
                    scope,
                    inner,
                    ..
                } => {
                    let is_llm = s.downstreams.iter().any(|d| {
                        d.name == *downstream && matches!(d.model, DownstreamModel::LlmProvider(_))
                    });
                    if !is_llm {
                        return Err(c.fail(
                            &lp.field("downstream"),
                            format!("no LlmProvider downstream named \"{downstream}\""),
                        ));
                    }
                    if let Some(cfg) = spend {
                        let sp = lp.field("spend");
                        let policy = reliable_core::spend::SpendPolicy::new(*cfg)
                            .map_err(|e| config_error(&c, &sp, e))?;
                        crate::client::llm::spend_slot(&policy)
                            .map_err(|e| config_error(&c, &sp, e))?;
                        if *scope == Scope::PerClient {
                            per_client_bytes += std::mem::size_of::<
                                crate::client::llm::SpendSlot<'static>,
                            >() as u64;
                        }
                    } else if *proactive {
                        return Err(c.fail(
                            &lp.field("proactive"),
                            "proactive quotas feed a spend breaker: expected `spend` too",
                        ));
                    }
                    todo.push((inner, lp.field("inner"), depth + 1));
                }
                Layer::Fallback(children) => {
                    if children.is_empty() {
                        return Err(
                            c.fail(&lp, "an empty Fallback: expected at least one layer to try")
                        );
                    }
                    for (k, child) in children.iter().enumerate().rev() {
                        todo.push((child, lp.index(k), depth + 1));
                    }
                }
            }
        }
        state_bytes = state_bytes.max(per_client_bytes.saturating_mul(u64::from(clients)));
    }
    if state_bytes > limits.max_state_bytes {
        return Err(c.fail(
            &w.field("clients"),
            format!(
                "{clients} clients with per-client policy state need about {} MiB, more than {} MiB: expected fewer clients or Shared scope",
                state_bytes >> 20,
                limits.max_state_bytes >> 20
            ),
        ));
    }

    let r = root.field("recovery");
    c.fraction(&r.field("threshold"), s.recovery.threshold, false)?;
    c.positive(&r.field("sustain"), s.recovery.sustain, "sustain")?;
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

    if let Some(sweep) = &s.sweep {
        let sp = root.field("sweep");
        super::sweep::check_path(s, &sweep.parameter)
            .map_err(|e| c.fail(&sp.field("parameter"), e))?;
        if sweep.values.is_empty() || sweep.values.len() > 1000 {
            return Err(c.fail(
                &sp.field("values"),
                format!("{} values: expected 1 to 1000", sweep.values.len()),
            ));
        }
        for (i, v) in sweep.values.iter().enumerate() {
            let vp = sp.field("values").index(i);
            let variant =
                super::sweep::variant(s, &sweep.parameter, v).map_err(|e| c.fail(&vp, e))?;
            validate_at(&variant, "", file, limits, Path::root()).map_err(|e| {
                let what = match e {
                    ScenarioError::Invalid { field, message, .. } => format!("{field}: {message}"),
                    other => other.to_string(),
                };
                c.fail(&vp, format!("with {} = {v}: {what}", sweep.parameter))
            })?;
        }
    }
    Ok(())
}

/// A core [`ConfigError`](reliable_core::ConfigError) as a scenario error at `base` + its field.
fn config_error(c: &Checker<'_>, base: &Path, e: reliable_core::ConfigError) -> ScenarioError {
    let mut path = base.clone();
    for part in e.field.split('.') {
        path.0.push(Seg::Field(part));
    }
    // Point at the field if it is written, else at the config itself.
    let position = locate(c.text, &path).or_else(|| locate(c.text, base));
    let problem = e.to_string();
    let problem = problem
        .strip_prefix(e.field)
        .and_then(|r| r.strip_prefix(": "))
        .unwrap_or(&problem)
        .to_string();
    ScenarioError::Invalid {
        path: c.file.to_string(),
        position,
        field: path.to_string(),
        message: problem,
    }
}

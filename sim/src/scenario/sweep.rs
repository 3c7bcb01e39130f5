//! Sweeps: one scenario with one parameter set to each of several values (`sim sweep`).
//!
//! A parameter is named by a path from the top of the scenario, written as in error messages:
//! fields joined by `.`, list elements in brackets by index (`faults[0]`) or by their `name`
//! (`downstreams[api]`, `policies[retry 3x]`). Enum variants (`Server`, `OpenLoop`, `Retry`,
//! `Ratio`...) are looked through, so `downstreams[api].model.error_rate` reaches the `error_rate`
//! of a `Server` model and `policies[budget].stack.budget.ratio` the ratio of a `Ratio` budget.
//!
//! A variant is made by writing the scenario out as a JSON tree (the same serde data model the RON
//! file was read with), setting the one value, and reading it back, so every variant goes through
//! the same type checks as a file; [`validate`](super::validate) then checks its meaning.
//!
//! A fault's `duration` is not a field of the file but may be swept: `faults[0].duration` set to
//! `"5s"` moves the fault's `until` to its `from` + 5 s, so a grid can be written in the
//! fault's length rather than its end.

use serde_json::Value;

use super::types::{Layer, Scenario, Sweep, SweepValue};

/// The prefix of the call graph's own parameters (see [`graph_variant`]).
pub const GRAPH: &str = "graph.";

/// Depth of a chain of services: `graph.depth`.
const DEPTH: &str = "graph.depth";

/// Attempts per hop: `graph.attempts`.
const ATTEMPTS: &str = "graph.attempts";

/// Calls `f` on `l` and every layer inside it.
fn each_layer(l: &mut Layer, f: &mut dyn FnMut(&mut Layer)) {
    f(l);
    for x in l.inner_mut() {
        each_layer(x, f);
    }
}

/// The downstream names the `Call` and `Llm` layers of `stacks` name, sorted, once each.
fn callees<'a>(stacks: impl Iterator<Item = &'a Layer>) -> Vec<String> {
    let mut out = Vec::new();
    for l in stacks {
        let mut l = l.clone();
        each_layer(&mut l, &mut |x| {
            if let Layer::Call { downstream, .. } | Layer::Llm { downstream, .. } = x {
                out.push(downstream.clone());
            }
        });
    }
    out.sort();
    out.dedup();
    out
}

/// The chain of services from the edge, by downstream index: the one downstream every policy
/// calls, then the one its handler's calls call, and so on to the first without a handler
/// (the leaf), or why the graph is not such a chain.
fn chain(s: &Scenario) -> Result<Vec<usize>, String> {
    let index = |name: &str| s.downstreams.iter().position(|d| d.name == name);
    let one = |names: Vec<String>, who: &str| match names.as_slice() {
        [name] => {
            index(name).ok_or_else(|| format!("{who} calls \"{name}\", which is not a downstream"))
        }
        _ => Err(format!(
            "{DEPTH} needs a chain of services, and {who} calls {} downstreams ({names:?}): expected one",
            names.len()
        )),
    };
    let mut out = vec![one(
        callees(s.policies.iter().map(|p| &p.stack)),
        "the edge (the policies)",
    )?];
    while let Some(h) = &s.downstreams[out[out.len() - 1]].handler {
        let who = format!("\"{}\"", s.downstreams[out[out.len() - 1]].name);
        let next = one(callees(h.calls.iter().map(|c| &c.stack)), &who)?;
        if out.contains(&next) || out.len() > s.downstreams.len() {
            return Err(format!(
                "{DEPTH}: the chain from the edge comes back to {who}"
            ));
        }
        out.push(next);
    }
    Ok(out)
}

/// A whole number of at least 1 from `value`, for `parameter`.
fn whole(parameter: &str, value: &SweepValue) -> Result<u32, String> {
    match value {
        SweepValue::Number(x) if x.fract() == 0.0 && *x >= 1.0 && *x <= f64::from(u32::MAX) => {
            Ok(*x as u32)
        }
        v => Err(format!(
            "`{parameter}` = {v}: expected a whole number of at least 1"
        )),
    }
}

/// The call graph's own parameters, which no single field holds:
///
/// - `graph.depth` = d: the graph must be a chain from the edge (every policy calls one
///   downstream, each service's handler one more, down to a leaf without a handler) of D tiers;
///   a depth d in 1..=D keeps the first d − 1 services and the leaf (service d − 1, or the edge
///   for d = 1, calls the leaf directly), and drops the services between and the faults naming
///   them. With attempts k at every hop, the leaf gets up to k^d calls per edge request.
/// - `graph.attempts` = k: sets `max_attempts` of every `Retry` layer, in the policies (the edge)
///   and in every handler's calls: the attempts per hop.
///
/// `value` `None` only checks that the parameter applies to `s`.
fn graph_variant(
    s: &mut Scenario,
    parameter: &str,
    value: Option<&SweepValue>,
) -> Result<(), String> {
    match parameter {
        DEPTH => {
            let c = chain(s)?;
            let Some(value) = value else { return Ok(()) };
            let d = whole(parameter, value)? as usize;
            if d > c.len() {
                return Err(format!(
                    "`{parameter}` = {value}: the chain from the edge has {} tiers: expected a depth from 1 to {}",
                    c.len(),
                    c.len()
                ));
            }
            if d == c.len() {
                return Ok(());
            }
            let leaf = s.downstreams[c[c.len() - 1]].name.clone();
            let skipped = s.downstreams[c[d - 1]].name.clone();
            let rename = |l: &mut Layer| {
                each_layer(l, &mut |x| {
                    if let Layer::Call { downstream, .. } = x
                        && *downstream == skipped
                    {
                        *downstream = leaf.clone();
                    }
                })
            };
            if d == 1 {
                for p in &mut s.policies {
                    rename(&mut p.stack);
                }
            } else if let Some(h) = &mut s.downstreams[c[d - 2]].handler {
                for call in &mut h.calls {
                    rename(&mut call.stack);
                }
            }
            let dropped: Vec<String> = c[d - 1..c.len() - 1]
                .iter()
                .map(|&i| s.downstreams[i].name.clone())
                .collect();
            let base = |n: &str| n.split('[').next().unwrap_or(n).to_string();
            s.faults
                .retain(|f| f.downstream().is_none_or(|n| !dropped.contains(&base(n))));
            s.downstreams.retain(|d| !dropped.contains(&d.name));
            Ok(())
        }
        ATTEMPTS => {
            let k = value.map(|v| whole(parameter, v)).transpose()?;
            let mut found = 0;
            let mut set = |l: &mut Layer| {
                each_layer(l, &mut |x| {
                    if let Layer::Retry { policy, .. } = x {
                        found += 1;
                        if let Some(k) = k {
                            policy.max_attempts = Some(k);
                        }
                    }
                })
            };
            for p in &mut s.policies {
                set(&mut p.stack);
            }
            for d in &mut s.downstreams {
                for call in d.handler.iter_mut().flat_map(|h| h.calls.iter_mut()) {
                    set(&mut call.stack);
                }
            }
            if found == 0 {
                return Err(format!(
                    "`{parameter}`: no Retry layer to set: it sets `max_attempts` of every Retry, at the edge and in every handler"
                ));
            }
            Ok(())
        }
        other => Err(format!(
            "`{other}` is not a parameter of the call graph: expected `{DEPTH}` or `{ATTEMPTS}`"
        )),
    }
}

/// One step of a parameter path.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Step {
    Field(String),
    Index(usize),
    Named(String),
}

fn parse_path(path: &str) -> Result<Vec<Step>, String> {
    let mut steps = Vec::new();
    let mut rest = path.trim();
    if rest.is_empty() {
        return Err(
            "an empty parameter path: expected e.g. `downstreams[api].model.error_rate`".into(),
        );
    }
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('[') {
            let end = r
                .find(']')
                .ok_or_else(|| format!("`[` without `]` in `{path}`"))?;
            let inner = r[..end].trim();
            if inner.is_empty() {
                return Err(format!(
                    "empty brackets in `{path}`: expected an index or a name"
                ));
            }
            steps.push(match inner.parse::<usize>() {
                Ok(i) => Step::Index(i),
                Err(_) => Step::Named(inner.trim_matches('"').to_string()),
            });
            rest = &r[end + 1..];
        } else {
            let r = rest.strip_prefix('.').unwrap_or(rest);
            if steps.is_empty() != (r.len() == rest.len()) {
                return Err(format!(
                    "`{path}`: expected fields joined by `.` and elements in brackets"
                ));
            }
            let end = r.find(['.', '[']).unwrap_or(r.len());
            let name = r[..end].trim();
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Err(format!("`{name}` in `{path}` is not a field name"));
            }
            steps.push(Step::Field(name.to_string()));
            rest = &r[end..];
        }
    }
    Ok(steps)
}

/// An enum variant as serde writes it: an object with one key naming the variant.
fn variant_inner(v: &mut Value) -> Option<&mut Value> {
    match v {
        Value::Object(m) if m.len() == 1 => {
            let (k, inner) = m.iter_mut().next()?;
            k.starts_with(|c: char| c.is_ascii_uppercase())
                .then_some(inner)
        }
        _ => None,
    }
}

fn describe(v: &Value) -> String {
    match v {
        Value::Object(m) => {
            let keys: Vec<String> = m.keys().map(|k| format!("`{k}`")).collect();
            format!("fields {}", keys.join(", "))
        }
        Value::Array(a) => format!("a list of {}", a.len()),
        Value::Null => "nothing (an unset option)".into(),
        Value::String(s) => format!("\"{s}\""),
        other => other.to_string(),
    }
}

/// The value at `steps` in `root`, looking through enum variants.
fn find<'a>(root: &'a mut Value, steps: &[Step], path: &str) -> Result<&'a mut Value, String> {
    let mut cur = root;
    let mut done = String::new();
    for step in steps {
        // Look through variants until the step fits.
        loop {
            let fits = match (step, &*cur) {
                (Step::Field(name), Value::Object(m)) => m.contains_key(name),
                (Step::Index(_) | Step::Named(_), Value::Array(_)) => true,
                _ => false,
            };
            if fits {
                break;
            }
            let here = describe(cur);
            cur = variant_inner(cur).ok_or_else(|| {
                let at = if done.is_empty() {
                    "the scenario"
                } else {
                    &done
                };
                format!("`{path}`: {at} has no {}: it has {here}", show(step))
            })?;
        }
        cur = match step {
            Step::Field(name) => cur.get_mut(name.as_str()),
            Step::Index(i) => cur.get_mut(*i),
            Step::Named(n) => match cur {
                Value::Array(items) => items.iter_mut().find(|item| named(item, n)),
                _ => None,
            },
        }
        .ok_or_else(|| format!("`{path}`: {} has no {}", done, show(step)))?;
        done.push_str(&match step {
            Step::Field(name) if done.is_empty() => name.clone(),
            Step::Field(name) => format!(".{name}"),
            Step::Index(i) => format!("[{i}]"),
            Step::Named(n) => format!("[{n}]"),
        });
    }
    Ok(cur)
}

fn show(step: &Step) -> String {
    match step {
        Step::Field(name) => format!("field `{name}`"),
        Step::Index(i) => format!("element {i}"),
        Step::Named(n) => format!("element named \"{n}\""),
    }
}

/// Whether a list element (possibly a variant) has `name: n`.
fn named(item: &Value, n: &str) -> bool {
    let mut cur = item;
    for _ in 0..4 {
        if cur.get("name").and_then(Value::as_str) == Some(n) {
            return true;
        }
        match cur {
            Value::Object(m) if m.len() == 1 => match m.values().next() {
                Some(inner) => cur = inner,
                None => return false,
            },
            _ => return false,
        }
    }
    false
}

/// Checks that `parameter` names a field of `s` (whatever its value).
pub fn check_path(s: &Scenario, parameter: &str) -> Result<(), String> {
    if parameter.trim().starts_with(GRAPH) {
        return graph_variant(&mut s.clone(), parameter.trim(), None);
    }
    let steps = parse_path(parameter)?;
    let mut tree = serde_json::to_value(s).map_err(|e| e.to_string())?;
    match find(&mut tree, &steps, parameter) {
        Ok(_) => Ok(()),
        Err(e) => window_of(&mut tree, &steps, parameter).map(|_| ()).ok_or(e),
    }
}

/// For a path ending in `.duration` whose parent has a `from` and an `until` but no `duration` (a
/// fault), that parent's fields (see the module docs).
fn window_of<'a>(
    tree: &'a mut Value,
    steps: &[Step],
    parameter: &str,
) -> Option<&'a mut serde_json::Map<String, Value>> {
    let (Step::Field(last), parent) = steps.split_last()? else {
        return None;
    };
    if last != "duration" || parent.is_empty() {
        return None;
    }
    let mut cur = find(tree, parent, parameter).ok()?;
    for _ in 0..4 {
        if cur.get("until").is_some() && cur.get("from").is_some() {
            return cur.as_object_mut();
        }
        cur = variant_inner(cur)?;
    }
    None
}

/// Sets `until` to `from` + `value` in a fault's fields.
fn set_duration(
    fields: &mut serde_json::Map<String, Value>,
    value: &SweepValue,
) -> Result<(), String> {
    use reliable_core::Duration;
    let SweepValue::Text(t) = value else {
        return Err(format!(
            "a duration is expected, such as \"5s\", not the number {value}"
        ));
    };
    let d: Duration = t
        .trim()
        .parse()
        .map_err(|e| format!("\"{t}\" is not a duration: {e}"))?;
    let from: Duration = fields
        .get("from")
        .cloned()
        .and_then(|v| serde_json::from_value(v).ok())
        .ok_or("the fault's `from` is not a duration")?;
    let until = from
        .as_nanos()
        .checked_add(d.as_nanos())
        .map(Duration::from_nanos)
        .ok_or_else(|| format!("`from` + {t} is too far in the future"))?;
    fields.insert(
        "until".into(),
        serde_json::to_value(until).map_err(|e| e.to_string())?,
    );
    Ok(())
}

/// `s` with `parameter` set to `value`, not yet validated. The variant has no sweep of its own.
pub fn variant(s: &Scenario, parameter: &str, value: &SweepValue) -> Result<Scenario, String> {
    let mut base = s.clone();
    base.sweep = None;
    base.map = None;
    if parameter.trim().starts_with(GRAPH) {
        graph_variant(&mut base, parameter.trim(), Some(value))?;
        return Ok(base);
    }
    let steps = parse_path(parameter)?;
    let mut tree = serde_json::to_value(&base).map_err(|e| e.to_string())?;
    let target = match find(&mut tree, &steps, parameter) {
        Ok(t) => t,
        Err(e) => {
            let mut copy = tree.clone();
            let Some(fields) = window_of(&mut copy, &steps, parameter) else {
                return Err(e);
            };
            set_duration(fields, value).map_err(|e| format!("`{parameter}`: {e}"))?;
            return serde_json::from_value::<Scenario>(copy)
                .map_err(|e| format!("`{parameter}` = {value}: {e}"));
        }
    };
    let new = match (value, &*target) {
        (SweepValue::Number(x), _) if !x.is_finite() => {
            return Err(format!("{x} is not a finite number"));
        }
        (SweepValue::Number(x), Value::Number(old))
            if (old.is_u64() || old.is_i64()) && x.fract() == 0.0 && *x >= 0.0 && *x < 1.8e19 =>
        {
            Value::from(*x as u64)
        }
        (SweepValue::Number(x), Value::Number(_) | Value::Null) => Value::from(*x),
        (SweepValue::Text(t), Value::String(_) | Value::Null) => Value::from(t.clone()),
        (v, old) => {
            return Err(format!(
                "`{parameter}` holds {}, which `{v}` cannot replace: expected {}",
                describe(old),
                match old {
                    Value::Number(_) => "a number",
                    Value::String(_) =>
                        "a duration such as \"250ms\" (or the text the field takes)",
                    _ => "a path to a single number or duration",
                }
            ));
        }
    };
    *target = new;
    serde_json::from_value::<Scenario>(tree).map_err(|e| format!("`{parameter}` = {value}: {e}"))
}

/// The sweep's short name: its label, or the path's last field.
pub fn label(sweep: &Sweep) -> String {
    if let Some(l) = &sweep.label {
        return l.clone();
    }
    parse_path(&sweep.parameter)
        .ok()
        .and_then(|steps| {
            steps.into_iter().rev().find_map(|s| match s {
                Step::Field(f) => Some(f),
                _ => None,
            })
        })
        .unwrap_or_else(|| sweep.parameter.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::{DownstreamModel, Layer, Workload};
    use reliable_core::Duration;
    use reliable_core::budget::BudgetConfig;

    const TEXT: &str = r#"Scenario(
        name: "s", horizon: "10s",
        workload: OpenLoop(rate: 100.0, clients: 10),
        downstreams: [(name: "api", model: Server(workers: 4, service: Constant("1ms")))],
        faults: [ErrorRate(downstream: "api", from: "1s", until: "2s", rate: 0.5)],
        policies: [
            (name: "plain", stack: Call(downstream: "api", timeout: "1s")),
            (name: "budget", stack: Retry(policy: (backoff: (shape: Constant(delay: "0s"))),
                budget: Ratio(ratio: 0.1, min_per_sec: 0), inner: Call(downstream: "api"))),
        ],
    )"#;

    fn set(path: &str, v: SweepValue) -> Result<Scenario, String> {
        variant(
            &super::super::parse::parse(TEXT, "t.ron").unwrap(),
            path,
            &v,
        )
    }

    #[test]
    fn sets_fields_through_variants_lists_and_names() {
        let n = SweepValue::Number;
        let s = set("downstreams[api].model.workers", n(8.0)).unwrap();
        assert!(matches!(
            s.downstreams[0].model,
            DownstreamModel::Server { workers: 8, .. }
        ));
        let s = set("workload.rate", n(250.0)).unwrap();
        assert!(matches!(s.workload, Workload::OpenLoop { rate: 250.0, .. }));
        let s = set("policies[budget].stack.budget.ratio", n(0.2)).unwrap();
        let Layer::Retry {
            budget: Some(BudgetConfig::Ratio(r)),
            ..
        } = &s.policies[1].stack
        else {
            panic!("{:?}", s.policies[1].stack)
        };
        assert_eq!(r.ratio, 0.2);
        let s = set(
            "policies[0].stack.timeout",
            SweepValue::Text("250ms".into()),
        )
        .unwrap();
        let Layer::Call { timeout, .. } = &s.policies[0].stack else {
            panic!()
        };
        assert_eq!(*timeout, Some(Duration::from_millis(250)));
        // An unset option can be set.
        let s = set(
            "policies[budget].stack.policy.attempt_timeout",
            SweepValue::Text("2s".into()),
        );
        assert!(s.is_ok(), "{s:?}");
    }

    #[test]
    fn a_fault_duration_moves_its_end() {
        let t = |v: &str| SweepValue::Text(v.into());
        let s = set("faults[0].duration", t("2500ms")).unwrap();
        assert_eq!(s.faults[0].window().1, Duration::from_millis(3500));
        let base = super::super::parse::parse(TEXT, "t.ron").unwrap();
        assert!(check_path(&base, "faults[0].duration").is_ok());
        let e = set("faults[0].duration", SweepValue::Number(2.0)).unwrap_err();
        assert!(e.contains("a duration is expected"), "{e}");
        // Only where there is a window to move.
        assert!(check_path(&base, "workload.duration").is_err());
        assert!(set("workload.duration", t("1s")).is_err());
    }

    #[test]
    fn bad_paths_and_values_say_what_is_there() {
        let n = SweepValue::Number;
        let e = set("downstreams[apii].model.workers", n(8.0)).unwrap_err();
        assert!(e.contains("no element named \"apii\""), "{e}");
        let e = set("workload.rte", n(1.0)).unwrap_err();
        assert!(e.contains("no field `rte`") && e.contains("`rate`"), "{e}");
        let e = set("downstreams[api].model.workers", n(2.5)).unwrap_err();
        assert!(e.contains("workers") || e.contains("u32"), "{e}");
        let e = set("policies[0].stack.timeout", n(1.0)).unwrap_err();
        assert!(
            e.contains("cannot replace") && e.contains("duration"),
            "{e}"
        );
        let e = set("policies[0].stack.timeout", SweepValue::Text("fast".into())).unwrap_err();
        assert!(e.contains("invalid duration"), "{e}");
        let e = set("downstreams", n(1.0)).unwrap_err();
        assert!(e.contains("a list of 1"), "{e}");
        for bad in [
            "",
            ".rate",
            "workload..rate",
            "faults[",
            "faults[]",
            "a b",
            "workload.rate.x",
        ] {
            assert!(set(bad, n(1.0)).is_err(), "{bad}");
        }
        assert!(set("workload.rate", n(f64::NAN)).is_err());
    }

    #[test]
    fn labels_default_to_the_last_field() {
        let sweep = Sweep {
            parameter: "downstreams[api].model.error_rate".into(),
            label: None,
            values: vec![],
        };
        assert_eq!(label(&sweep), "error_rate");
        assert_eq!(
            label(&Sweep {
                label: Some("p".into()),
                ..sweep
            }),
            "p"
        );
    }
}

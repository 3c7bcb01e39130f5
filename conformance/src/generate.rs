//! Generated sequences: one for every way the policy format nests a small set of layers around
//! a retry, each with one fixed script of answers that makes every layer act.
//!
//! The format nests `Ledger`, `Throttle`, `Breaker`, `Limit` and `RateLimit` around a `Retry`
//! in any order, a `Ledger` only outside it (inside, every retry would be a first try): each
//! gate outside the retry judges the call once, inside it every attempt. The families here are
//! every single layer on either side of the retry, and every pair of layers in every order
//! the format accepts (`nesting` in the policy block, outermost first): each pair's relative
//! order and each one's side of the retry. `cargo run -p conformance -- generate` writes them to
//! `generated/`, `bless` their expected traces (the reference face's), and `tests/generated.rs`
//! holds the files to this generator and every Rust face to the traces.

/// The layers the families nest around the retry.
pub const NESTED: [&str; 5] = ["ledger", "throttle", "breaker", "limit", "rate_limit"];

/// Every nesting of `layers` and `retry`, outermost first, that the format accepts (a ledger
/// outside the retry).
fn orders(layers: &[&'static str]) -> Vec<Vec<&'static str>> {
    let mut items: Vec<&'static str> = layers.to_vec();
    items.push("retry");
    let mut out = Vec::new();
    permute(&mut items, 0, &mut out);
    out.retain(|o| {
        let at = |l: &str| o.iter().position(|x| *x == l);
        at("ledger").is_none_or(|l| at("retry").is_some_and(|r| l < r))
    });
    out.sort();
    out
}

fn permute(items: &mut Vec<&'static str>, k: usize, out: &mut Vec<Vec<&'static str>>) {
    if k == items.len() {
        out.push(items.clone());
        return;
    }
    for i in k..items.len() {
        items.swap(k, i);
        permute(items, k + 1, out);
        items.swap(k, i);
    }
}

/// Every nesting the families cover: each layer alone, then each pair, in every accepted order.
pub fn nestings() -> Vec<Vec<&'static str>> {
    let mut out = Vec::new();
    for a in NESTED {
        out.extend(orders(&[a]));
    }
    for (i, a) in NESTED.iter().enumerate() {
        for b in &NESTED[i + 1..] {
            out.extend(orders(&[a, b]));
        }
    }
    out
}

/// The name of the sequence for `order`: `nest-` and the layers, outermost first.
pub fn name(order: &[&str]) -> String {
    let parts: Vec<String> = order.iter().map(|l| l.replace('_', "-")).collect();
    format!("nest-{}", parts.join("-"))
}

/// Each layer's block, as the policy block writes it.
fn block(layer: &str) -> &'static str {
    match layer {
        "ledger" => r#""ledger": { "ratio": 0.5, "min_per_sec": 0, "ttl_ms": 10000 }"#,
        "throttle" => {
            r#""throttle": { "k": 1.0, "window_ms": 2000, "buckets": 4, "max_rejection": null, "draws": [0.9, 0.4, 0.2, 0.9, 0.7, 0.8, 0.1, 0.6, 0.3, 0.95, 0.5, 0.1, 0.85, 0.65, 0.25, 0.9, 0.45, 0.15, 0.75, 0.55, 0.35, 0.9, 0.6, 0.2, 0.7, 0.4] }"#
        }
        "breaker" => {
            r#""breaker": { "consecutive_failures": 2, "open_ms": 1000, "half_open_successes": 1 }"#
        }
        "limit" => {
            r#""limit": { "aimd": { "initial": 4, "min": 1, "max": 8, "backoff": 0.5, "increase": 1 } }"#
        }
        _ => r#""rate_limit": { "rate": 1, "period_ms": 1000, "burst": 2 }"#,
    }
}

/// The calls every family runs: overload answers (503, which the throttle, the limit and the
/// breaker all hear), served errors, successes and a timeout, close enough together that the
/// breaker opens and probes, the rate limit refuses and the throttle sheds.
const CALLS: &str = r#"[
    { "start_ms": 0, "answers": [
        { "status": 503, "latency_ms": 10 }, { "status": 503, "latency_ms": 10 } ] },
    { "start_ms": 300, "answers": [
        { "status": 500, "latency_ms": 10 }, { "status": 500, "latency_ms": 10 } ] },
    { "start_ms": 1000, "answers": [
        { "status": 200, "latency_ms": 10 }, { "status": 200, "latency_ms": 10 } ] },
    { "start_ms": 1500, "answers": [
        { "status": 200, "latency_ms": 10 }, { "status": 200, "latency_ms": 10 } ] },
    { "start_ms": 1600, "answers": [
        { "status": 503, "latency_ms": 10 }, { "transport": "timeout" } ] },
    { "start_ms": 2300, "answers": [
        { "status": 500, "latency_ms": 10 }, { "status": 200, "latency_ms": 10 } ] },
    { "start_ms": 3000, "answers": [
        { "status": 200, "latency_ms": 10 }, { "status": 500, "latency_ms": 10 } ] },
    { "start_ms": 3600, "answers": [
        { "status": 200, "latency_ms": 10 }, { "status": 500, "latency_ms": 10 } ] },
    { "start_ms": 4000, "answers": [
        { "status": 500, "latency_ms": 10 }, { "status": 500, "latency_ms": 10 } ] },
    { "start_ms": 6000, "answers": [
        { "status": 200, "latency_ms": 10 }, { "status": 200, "latency_ms": 10 } ] }
  ]"#;

/// The sequence for `order`, as JSON text (what `generated/NAME.json` holds).
pub fn text(order: &[&str]) -> String {
    let name = name(order);
    let layers: Vec<&str> = order.iter().copied().filter(|l| *l != "retry").collect();
    let about = format!(
        "Generated: {} nested outermost first; {}.",
        order.join(" > "),
        layers
            .iter()
            .map(|l| {
                let retry = order.iter().position(|x| *x == "retry");
                let at = order.iter().position(|x| x == l);
                if at < retry {
                    format!("the {l} outside the retry (per call)")
                } else {
                    format!("the {l} inside the retry (per attempt)")
                }
            })
            .collect::<Vec<_>>()
            .join(", ")
    );
    let breaker = match layers.contains(&"breaker") {
        true => block("breaker"),
        false => r#""breaker": null"#,
    };
    let blocks: String = layers
        .iter()
        .filter(|l| **l != "breaker")
        .map(|l| format!(",\n    {}", block(l)))
        .collect();
    let nesting: Vec<String> = order.iter().map(|l| format!("\"{l}\"")).collect();
    format!(
        r#"{{
  "format": 1,
  "name": "{name}",
  "about": "{about}",
  "policy": {{
    "max_attempts": 2,
    "attempt_timeout_ms": 500,
    "deadline_ms": null,
    "backoff": {{ "base_ms": 100, "factor": 2.0, "cap_ms": 1000 }},
    "throttled_backoff": null,
    "max_server_delay_ms": 30000,
    "retry_timeouts": true,
    "wait_on_refusal": false,
    {breaker},
    "budget": null{blocks},
    "nesting": [{nesting}]
  }},
  "calls": {CALLS}
}}
"#,
        nesting = nesting.join(", ")
    )
}

/// Every generated sequence, by name.
pub fn sequences() -> Result<Vec<crate::Sequence>, String> {
    nestings()
        .iter()
        .map(|o| crate::parse(&text(o), &format!("generated/{}.json", name(o)), &name(o)))
        .collect()
}

//! The tower layers of `reliable::policy`'s `Route::route_layer` around a hedge, held to the
//! core's call engine. A `Limit` or `RateLimit` inside the `Retry` admits each copy of a hedged
//! attempt in the engine (a bulkhead of one refuses the hedge), where `route_layer` stacks its
//! `ConcurrencyLimitLayer` and `RateLimitLayer` around the `HedgeLayer` (the hedged attempt is
//! admitted once, and its hedge goes). Each policy here, loaded from a policy file as
//! `tests/policy_loader.rs` loads it, either runs through `route_layer` and sends, answers and
//! ends as the engine's trace says (all a `RouteLayer`, which takes no observer, shows), or is
//! refused by `route_layer` naming the layer and pointing to `Route::layer`, whose
//! `ReliableLayer` then writes the engine's trace byte for byte.

use conformance::faces::{self, TowerService};
use conformance::{Sequence, Trace};
use reliable::policy::{Plan, Route};
use reliable::tower::HttpPolicy;
use tower::Layer;

/// The sequence's policy as a policy file (JSON), loaded by `reliable::policy`: its one route.
fn route(s: &Sequence) -> Route {
    let entry = reliable_core::policy::Policy {
        name: s.name.clone(),
        stack: conformance::engine::stack(s).unwrap(),
    };
    let text = serde_json::to_string_pretty(&entry).unwrap();
    let plan = Plan::from_json(&text, &format!("{}.json", s.name)).unwrap();
    plan.route().unwrap().clone()
}

/// A trace's lines the service and the caller write: attempts, answers, ends (how a call failed,
/// refused or given up, is the observer's report: an end here says only whether it succeeded).
fn decisions(trace: &str) -> String {
    trace
        .lines()
        .filter(|l| {
            ["attempt", "answer", "end"]
                .iter()
                .any(|ev| l.contains(&format!("\"ev\":\"{ev}\"")))
        })
        .map(
            |l| match (l.split_once(",\"result\":"), l.split_once(",\"attempts\":")) {
                (Some((head, result)), Some((_, attempts))) => {
                    let ok = result.starts_with("\"ok\"");
                    format!("{head},\"ok\":{ok},\"attempts\":{attempts}\n")
                }
                _ => format!("{l}\n"),
            },
        )
        .collect()
}

/// `s` run through the tower layers of `route_layer`, or their refusal.
fn route_layered(s: &Sequence) -> Result<String, String> {
    let route = route(s);
    let layer = route
        .route_layer(HttpPolicy::new())
        .map_err(|e| e.to_string())?;
    faces::tower_service_with(s, &|_, _, fake| Ok(TowerService::new(layer.layer(fake))))
}

/// `s` run through the `ReliableLayer` of `Route::layer`, observed by the trace.
fn layered(s: &Sequence) -> Result<String, String> {
    let route = route(s);
    faces::tower_reliable_layer_with(s, &|trace: &Trace, _| {
        Ok(route
            .layer(HttpPolicy::new())
            .map_err(|e| e.to_string())?
            .seed(1)
            .observer(trace.observer()))
    })
}

/// `route_layer` runs `s` as the engine does, or refuses it naming the layer (`field`, `kind`)
/// and pointing to `Route::layer`, which runs it as the engine does. Returns whether it refused.
fn runs_as_the_engine_or_refuses(s: &Sequence, field: &str, kind: &str) -> bool {
    let engine = conformance::engine::run(s).unwrap();
    match route_layered(s) {
        Ok(got) => {
            let want = decisions(&engine);
            assert_eq!(
                decisions(&got),
                want,
                "{}: Route::route_layer sends, answers or ends otherwise than the engine: {}",
                s.name,
                conformance::first_difference(&want, &decisions(&got)).unwrap_or_default()
            );
            false
        }
        Err(e) => {
            let at = format!(
                "{}.json: {field}: a Hedge inside a {kind} inside the Retry: ",
                s.name
            );
            assert!(e.starts_with(&at), "{}: refused otherwise: {e}", s.name);
            assert!(e.contains("ReliableLayer (Route::layer)"), "{e}");
            assert_eq!(layered(s).unwrap(), engine, "{}: Route::layer", s.name);
            true
        }
    }
}

/// A sequence of one policy block and calls, as the format writes them.
fn sequence(name: &str, policy: &str, calls: &str) -> Sequence {
    let text = format!(
        r#"{{ "format": 1, "name": "{name}", "about": "route_layer around a hedge",
  "policy": {{ "max_attempts": 2, "attempt_timeout_ms": 1000, "deadline_ms": null,
    "backoff": {{ "base_ms": 100, "factor": 2.0, "cap_ms": 1000 }}, "throttled_backoff": null,
    "max_server_delay_ms": 30000, "retry_timeouts": true, "wait_on_refusal": false,
    "breaker": null, "budget": null, {policy} }},
  "calls": {calls} }}"#
    );
    conformance::parse(&text, &format!("{name}.json"), name).unwrap()
}

/// A slow first try (300 ms) that a hedge after 50 ms would beat, the hedge's answer to spare.
const SLOW: &str = r#"[ { "start_ms": 0, "answers": [
    { "status": 200, "latency_ms": 300 }, { "status": 200, "latency_ms": 10 } ] } ]"#;

const HEDGE: &str = r#""idempotent": true, "hedge": { "delay_ms": 50, "max_hedges": 1 }"#;

/// The hand-written bulkhead of one under the retry: the engine refuses the hedge (the first try
/// holds the one slot); `route_layer`'s limit around the `HedgeLayer` would let it go.
#[test]
fn a_limit_inside_the_retry_around_a_hedge_runs_as_the_engine_or_is_refused() {
    let s = conformance::sequences()
        .unwrap()
        .into_iter()
        .find(|s| s.name == "bulkhead-refuses-hedge")
        .unwrap();
    let engine = conformance::engine::run(&s).unwrap();
    assert!(
        engine.contains("\"ev\":\"no-hedge\",\"by\":\"limiter\""),
        "the engine gives each copy a slot:\n{engine}"
    );
    assert!(runs_as_the_engine_or_refuses(&s, "stack.inner", "Limit"));

    // The same, written here with a hedge's answer to spare.
    let s = sequence(
        "limit-hedge",
        &format!(r#"{HEDGE}, "limit": {{ "max_in_flight": 1 }}"#),
        SLOW,
    );
    assert!(runs_as_the_engine_or_refuses(&s, "stack.inner", "Limit"));
}

/// A rate limit of one a second under the retry: the engine counts the hedge and refuses it;
/// `route_layer`'s rate limit around the `HedgeLayer` would count the hedged attempt once.
#[test]
fn a_rate_limit_inside_the_retry_around_a_hedge_runs_as_the_engine_or_is_refused() {
    let rate = r#""rate_limit": { "rate": 1, "period_ms": 1000, "burst": 1 }"#;
    let s = sequence("rate-limit-hedge", &format!("{HEDGE}, {rate}"), SLOW);
    let engine = conformance::engine::run(&s).unwrap();
    assert!(
        engine.contains("\"ev\":\"no-hedge\""),
        "the engine counts each copy:\n{engine}"
    );
    assert!(runs_as_the_engine_or_refuses(
        &s,
        "stack.inner",
        "RateLimit"
    ));

    // Both, the limit outermost: the first of them is named.
    let both = sequence(
        "limit-rate-limit-hedge",
        &format!(r#"{HEDGE}, "limit": {{ "max_in_flight": 4 }}, {rate}"#),
        SLOW,
    );
    assert!(runs_as_the_engine_or_refuses(&both, "stack.inner", "Limit"));
}

/// Without a hedge, the same limits inside the retry run through `route_layer` as the engine
/// runs them (the comparison above is live, not only the refusal).
#[test]
fn without_a_hedge_route_layer_runs_the_limits_as_the_engine() {
    for (name, block) in [
        ("limit-no-hedge", r#""limit": { "max_in_flight": 1 }"#),
        (
            "rate-limit-no-hedge",
            r#""rate_limit": { "rate": 1, "period_ms": 1000, "burst": 1 }"#,
        ),
    ] {
        let calls = r#"[ { "start_ms": 0, "answers": [
            { "status": 503, "latency_ms": 10 }, { "status": 200, "latency_ms": 10 } ] },
          { "start_ms": 2000, "answers": [ { "status": 200, "latency_ms": 10 } ] } ]"#;
        let s = sequence(name, block, calls);
        assert!(!runs_as_the_engine_or_refuses(&s, "stack.inner", "Limit"));
    }
}

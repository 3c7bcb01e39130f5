//! A fleet's breaker in the core's call engine: decided exactly, an attempt (or, outside the
//! retry, the call) waits for the store's round trip before it is sent (the engine asks and the
//! store answers later); on a cached view it is decided at once; a store that does not answer
//! makes a breaker that fails closed refuse.

mod common;

use sim::metrics::PolicySummary;

/// A server answering in 1 ms over a network of no delay, a store 3 ms away (hanging from 4 s to
/// 6 s), and `policies`.
fn scenario(policies: &str) -> String {
    format!(
        r#"Scenario(
    name: "fleet-engine", horizon: "10s", seed: 3,
    workload: OpenLoop(rate: 50.0, clients: 4),
    downstreams: [(name: "api", model: Server(workers: 1000, service: Constant("1ms")),
                   network: (request: Constant("0ms"), response: Constant("0ms")))],
    stores: [(name: "redis", round_trip: Constant("3ms"),
              faults: [Outage(from: "4s", until: "6s", mode: Hang)])],
    policies: [{policies}],
)"#
    )
}

const RETRY: &str = r#"policy: (max_attempts: 3, backoff: (shape: Constant(delay: "10ms"), cap: "1s", jitter: None))"#;

fn breaker(mode: &str, failure: &str, inner: &str) -> String {
    format!(
        r#"Breaker(config: (consecutive_failures: 1000),
            scope: Fleet(store: "redis", mode: {mode}, wait: "5ms", on_store_failure: {failure}),
            inner: {inner})"#
    )
}

fn summaries(policies: &[(&str, String)]) -> Vec<PolicySummary> {
    let list: Vec<String> = policies
        .iter()
        .map(|(name, stack)| format!("(name: \"{name}\", stack: {stack})"))
        .collect();
    common::summaries(&scenario(&list.join(",\n")))
}

#[test]
fn an_exact_decision_waits_for_the_store_and_a_cached_one_does_not() {
    let call = r#"Call(downstream: "api")"#;
    let inside = |mode: &str| format!("Retry({RETRY}, inner: {})", breaker(mode, "Local", call));
    let outside = breaker("Exact", "Local", &format!("Retry({RETRY}, inner: {call})"));
    let s = summaries(&[
        ("exact", inside("Exact")),
        ("cached", inside("Cached(refresh: \"1s\")")),
        ("exact, per call", outside),
    ]);
    for p in &s {
        assert!(p.first_tries > 400, "{}: {}", p.name, p.first_tries);
        assert!(p.success_rate > 0.99, "{}: {}", p.name, p.success_rate);
    }
    // Exact: the store's 3 ms round trip, then the 1 ms call (while the store hangs, the wait
    // of 5 ms, then the client's own breaker decides).
    let (exact, cached, per_call) = (&s[0], &s[1], &s[2]);
    assert!(
        (3.9..=4.1).contains(&exact.success_latency_ms.p50),
        "{}",
        exact.success_latency_ms.p50
    );
    assert!(
        (3.9..=4.1).contains(&per_call.success_latency_ms.p50),
        "{}",
        per_call.success_latency_ms.p50
    );
    // Cached: decided at once on the view (its refreshes run in the background).
    assert!(
        cached.success_latency_ms.p50 < 1.1,
        "{}",
        cached.success_latency_ms.p50
    );
}

#[test]
fn a_breaker_that_fails_closed_refuses_while_its_store_hangs() {
    let call = r#"Call(downstream: "api")"#;
    let stack =
        |failure: &str| format!("Retry({RETRY}, inner: {})", breaker("Exact", failure, call));
    let s = summaries(&[("open", stack("Local")), ("closed", stack("Refuse"))]);
    let (open, closed) = (&s[0], &s[1]);
    assert_eq!(open.local_rejections, 0);
    // Two seconds of ten: about a fifth of the calls refused (after the 5 ms wait, or at once
    // while the client leaves the store alone after a failure).
    let refused = closed.local_rejections as f64 / closed.first_tries as f64;
    assert!((0.1..0.3).contains(&refused), "{refused}");
    assert!(closed.success_rate < 0.9 && open.success_rate > 0.99);
}

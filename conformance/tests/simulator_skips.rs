//! The simulator face's skips are real limits of the simulator's policy format, and the README's
//! table of which face runs which sequence is the one the faces' own skip rules give.

/// A one-downstream scenario with `stack` as its only policy.
fn scenario(stack: &str) -> String {
    format!(
        "Scenario(name: \"skip\", horizon: \"1s\", bucket: \"1s\", workload: JobSet(clients: 1),\n\
         downstreams: [(name: \"d\", model: Scripted(script: [], then: Hang))],\n\
         policies: [(name: \"p\", stack: {stack})])\n"
    )
}

fn load_error(stack: &str) -> String {
    match sim::load(&scenario(stack), "skip.ron") {
        Ok(_) => panic!("the simulator accepted {stack}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn the_simulator_expresses_the_stacks_it_runs() {
    let stack = "Ledger(config: (ratio: 0.5, min_per_sec: 0, ttl: \"10s\"), inner: Retry(policy: \
                 (max_attempts: 2, backoff: (shape: Exponential(base: \"100ms\", factor: 2.0), cap: \"1s\")), inner: Limit(config: (rule: Aimd(backoff: 0.5, increase: 1), \
                 initial: 3, min: 1, max: 4), inner: RateLimit(config: (rate: 10, period: \"1s\", burst: 2), \
                 inner: Hedge(config: (delay: Fixed(\"50ms\"), max_hedges: 1), idempotent: true, \
                 inner: Call(downstream: \"d\"))))))";
    sim::load(&scenario(stack), "ok.ron").unwrap();
}

#[test]
fn a_rate_limit_the_core_refuses_is_refused_at_its_field() {
    let e = load_error(
        "RateLimit(config: (rate: 0, period: \"1s\", burst: 1), inner: Call(downstream: \"d\"))",
    );
    assert!(e.contains("stack.config.rate: must not be zero"), "{e}");
}

#[test]
fn a_hedge_sends_copies_of_a_call_so_no_limit_or_breaker_sees_each_copy() {
    for inner in [
        "Limit(config: (rule: Fixed, initial: 1, min: 1, max: 1), inner: Call(downstream: \"d\"))",
        "RateLimit(config: (rate: 1, period: \"1s\", burst: 1), inner: Call(downstream: \"d\"))",
        "Breaker(config: (consecutive_failures: 1), inner: Call(downstream: \"d\"))",
    ] {
        let e = load_error(&format!(
            "Hedge(config: (delay: Fixed(\"50ms\"), max_hedges: 1), idempotent: true, inner: {inner})"
        ));
        assert!(e.contains("expected `inner: Call(...)`"), "{e}");
    }
}

#[test]
fn the_readme_table_is_the_faces_own() {
    let table = conformance::table(&conformance::sequences().unwrap());
    let readme = std::fs::read_to_string(conformance::root().join("README.md")).unwrap();
    assert!(
        readme.contains(&table),
        "conformance/README.md is out of step: paste `cargo run -p conformance -- table`:\n{table}"
    );
}

//! Blocking clients (a scenario's `interruptible: false`): no timer ends an attempt; each answer
//! is taken when it comes, as the core's answer table reads it.

mod common;

use sim::metrics::PolicySummary;

/// A server answering every call in 1 s, behind a retry of 300 ms attempts (three at most), run
/// by clients that can interrupt an attempt or by clients that cannot.
fn scenario(interruptible: bool, stack: &str) -> String {
    format!(
        r#"Scenario(
    name: "blocking", horizon: "20s", interruptible: {interruptible},
    workload: OpenLoop(rate: 20.0, clients: 4),
    downstreams: [(name: "api", model: Server(workers: 1000, service: Constant("1s")),
                   network: (request: Constant("0ms"), response: Constant("0ms")))],
    policies: [(name: "retry", stack: {stack})],
)"#
    )
}

const RETRY: &str = r#"Retry(policy: (max_attempts: 3, attempt_timeout: "300ms",
    backoff: (shape: Constant(delay: "100ms"), cap: "1s", jitter: None)),
    inner: Breaker(config: (consecutive_failures: 1000), inner: Call(downstream: "api")))"#;

fn summary(text: &str) -> PolicySummary {
    common::summaries(text).remove(0)
}

#[test]
fn a_blocking_client_keeps_each_late_success() {
    let async_ = summary(&scenario(true, RETRY));
    let blocking = summary(&scenario(false, RETRY));
    println!(
        "async: {} of {} succeeded, {} attempts; blocking: {} of {}, {} attempts",
        async_.successes,
        async_.first_tries,
        async_.attempts,
        blocking.successes,
        blocking.first_tries,
        blocking.attempts
    );
    // Interrupted at 300 ms, every attempt of a 1 s call times out: three each, no success.
    assert_eq!(async_.successes, 0);
    assert!(async_.attempts <= 3 * async_.first_tries);
    assert!(async_.attempts >= 3 * (async_.first_tries - async_.unfinished));
    // Not interrupted, each first attempt answers at 1 s and its success is the call's.
    assert!(blocking.first_tries > 300, "{}", blocking.first_tries);
    assert_eq!(blocking.attempts, blocking.first_tries);
    assert!(blocking.successes + blocking.unfinished >= blocking.first_tries);
    assert!(blocking.successes >= blocking.first_tries - 40);
}

#[test]
fn only_a_stack_the_call_engine_drives_can_block() {
    // A fallback is a subtree the engine does not run: its calls are not the engine's copies.
    let stack = r#"Retry(policy: (max_attempts: 3, backoff: (shape: Constant(delay: "100ms"), cap: "1s")),
        inner: Fallback([Call(downstream: "api"), Call(downstream: "api")]))"#;
    sim::load(&scenario(true, stack), "ok.ron").unwrap();
    let e = sim::load(&scenario(false, stack), "blocking.ron")
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("interruptible: false") && e.contains("\"api\""),
        "{e}"
    );
}

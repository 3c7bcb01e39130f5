//! A chain whose bottom is a subtree the call engine does not run (a `Fallback` here): each
//! copy of the chain's call is an invocation of the subtree, and its answer the copy's.

mod common;

use sim::metrics::PolicySummary;

fn summary(stack: &str, extra: &str) -> PolicySummary {
    let text = format!(
        r#"Scenario(
    name: "subtree", horizon: "10s", {extra}
    workload: OpenLoop(rate: 10.0, clients: 2),
    downstreams: [
        (name: "a", model: Scripted(script: [], then: Status(status: 503))),
        (name: "b", model: Scripted(script: [], then: Status(status: 500))),
    ],
    policies: [(name: "p", stack: {stack})],
)"#
    );
    common::summaries(&text).remove(0)
}

const RETRY_FALLBACK: &str = r#"Retry(policy: (max_attempts: 3,
    backoff: (shape: Constant(delay: "0ms"), cap: "1s")),
    inner: Fallback([Call(downstream: "a", timeout: "100ms"), Call(downstream: "b", timeout: "100ms")]))"#;

#[test]
fn a_retry_around_a_fallback_retries_the_whole_fallback() {
    let s = summary(RETRY_FALLBACK, "");
    println!(
        "{} requests, {} attempts, {} server arrivals, {} successes",
        s.first_tries, s.attempts, s.server_arrivals, s.successes
    );
    assert!(s.first_tries > 50, "{}", s.first_tries);
    assert_eq!(s.successes, 0);
    // Three tries of the fallback, each trying both downstreams: six calls per request.
    assert_eq!(s.attempts, 6 * s.first_tries);
}

#[test]
fn a_subtree_that_fails_at_once_is_retried_without_losing_the_call() {
    // The client's network is down the whole run: every call fails unsent, so each invocation
    // of the fallback answers at once, within the step that sent it, and the retry's zero
    // backoff sends the next at once too.
    let down = r#"client_faults: [NetworkDown(client: 0, from: "0s", until: "10s"), NetworkDown(client: 1, from: "0s", until: "10s")],"#;
    let s = summary(RETRY_FALLBACK, down);
    println!(
        "{} requests, {} successes, {} failures, {} unfinished",
        s.first_tries, s.successes, s.failures, s.unfinished
    );
    assert!(s.first_tries > 50, "{}", s.first_tries);
    // Every request ends (failed), none hangs.
    assert_eq!(s.failures, s.first_tries);
    assert_eq!(s.unfinished, 0);
}

//! Call graphs emulated for real on 127.0.0.1 (a few seconds each): services whose handlers call
//! the next tier through reliable's tower layers, the do-not-retry answer, a hop that times out,
//! deadlines that travel as a header and pass, replicas behind a balancer; and what the emulator
//! refuses.

use emulate::run::run_policy;
use emulate::simface::{Compiled, HopSummary, PolicySummary, simulate};
use emulate::size;

fn compile(text: &str) -> Compiled {
    sim::load(text, "test.ron").unwrap()
}

/// Policy 0 of `c` emulated and simulated under seed 1: (emulated, simulated) summaries.
fn both(c: &Compiled) -> (PolicySummary, PolicySummary) {
    let (out, _) = run_policy(c, 0, 1, 1.0).unwrap();
    let sim = simulate(c, 1).unwrap();
    (out.summary, sim[0].output.summary.clone())
}

fn hop<'a>(s: &'a PolicySummary, name: &str) -> &'a HopSummary {
    s.hops
        .as_ref()
        .and_then(|h| h.iter().find(|h| h.name == name))
        .unwrap_or_else(|| panic!("no hop {name}"))
}

/// `api`'s call to `db` has 200 ms, and `db` is 20x slower (~400 ms) for 1.5 s: those calls
/// time out at `api`, which then answers 503 with `x-should-retry: false`, and the edge, whose
/// 1 s attempts would otherwise retry, does not.
const HOP_TIMES_OUT: &str = r#"Scenario(
    name: "hop-times-out",
    horizon: "4s",
    workload: OpenLoop(rate: 40.0, arrivals: Constant, clients: 4),
    downstreams: [
        (name: "api", model: Server(workers: 200, service: Constant("1ms")),
         handler: (calls: [(stack: Call(downstream: "db", timeout: "200ms"))], no_retry_on_failure: true)),
        (name: "db", model: Server(workers: 20, queue: (capacity: 500), service: Constant("20ms"))),
    ],
    faults: [LatencyInflation(downstream: "db", from: "1s", until: "2500ms", factor: 20.0)],
    policies: [(name: "edge retries", stack: Retry(
        policy: (max_attempts: 3, attempt_timeout: "1s", backoff: (shape: Constant(delay: "0s"))),
        inner: Call(downstream: "api"),
    ))],
)"#;

#[test]
fn a_hop_that_times_out_answers_do_not_retry_and_the_edge_does_not_retry() {
    let c = compile(HOP_TIMES_OUT);
    let (e, s) = both(&c);
    assert_eq!(e.first_tries, s.first_tries);
    // The hop's calls in the slowdown timed out: those requests failed.
    assert!(e.success_rate < 0.9, "success {}", e.success_rate);
    assert!(s.success_rate < 0.9, "simulated success {}", s.success_rate);
    // `db` kept serving calls `api` had given up on.
    assert!(hop(&e, "db").wasted_share > 0.0);
    // The edge read `x-should-retry: false` through the core's answer table: no retries, so
    // exactly one `api` and one `db` call per request, as simulated.
    for (name, want) in [("api", 1.0), ("db", 1.0)] {
        let (ea, sa) = (hop(&e, name).amplification, hop(&s, name).amplification);
        assert!((ea - want).abs() < 0.02, "{name}: emulated {ea}");
        assert!((sa - want).abs() < 0.02, "{name}: simulated {sa}");
    }
    assert_eq!(hop(&e, "api").depth, Some(1));
    assert_eq!(hop(&e, "db").depth, Some(2));
}

/// The edge gives each attempt 300 ms and `api` retries `db` with 1 s per attempt, but the
/// deadline travels: `api` stops at its caller's deadline less 5 ms, and `db` refuses or drops
/// calls past theirs, so during the slowdown `db` sees at most one call per edge attempt.
const DEADLINE: &str = r#"Scenario(
    name: "deadline",
    horizon: "4s",
    workload: OpenLoop(rate: 40.0, arrivals: Constant, clients: 4),
    downstreams: [
        (name: "api", model: Server(workers: 200, service: Constant("1ms")),
         handler: (calls: [(stack: Retry(
             policy: (max_attempts: 3, attempt_timeout: "1s", backoff: (shape: Constant(delay: "0s"))),
             inner: Call(downstream: "db")))], propagate_deadline: (margin: "5ms"))),
        (name: "db", model: Server(workers: 4, queue: (capacity: 500), service: Constant("20ms"))),
    ],
    faults: [LatencyInflation(downstream: "db", from: "1s", until: "2500ms", factor: 20.0)],
    policies: [(name: "edge retries", stack: Retry(
        policy: (max_attempts: 3, attempt_timeout: "300ms", backoff: (shape: Constant(delay: "0s"))),
        inner: Call(downstream: "api"),
    ))],
)"#;

#[test]
fn a_deadline_travels_and_work_past_it_is_refused_or_dropped() {
    let c = compile(DEADLINE);
    let (e, s) = both(&c);
    let (ed, sd) = (hop(&e, "db"), hop(&s, "db"));
    // Work whose caller's deadline had passed was refused or dropped, for real as simulated.
    assert!(ed.past_deadline > 0, "emulated: none past the deadline");
    assert!(sd.past_deadline > 0, "simulated: none past the deadline");
    // `api` never called `db` again after its caller's deadline: at most one call per edge
    // attempt (3 per request), far below the 9 per request of retries that ignore it.
    for h in [ed, sd] {
        assert!(
            h.amplification <= hop(&e, "api").amplification.max(1.0) + 0.05,
            "db amplification {}",
            h.amplification
        );
    }
    assert!(
        (ed.amplification - sd.amplification).abs() <= 0.1 * sd.amplification + 0.05,
        "db amplification: emulated {}, simulated {}",
        ed.amplification,
        sd.amplification
    );
}

/// `api` calls `db`, three replicas behind a random balancer, one of them 20x slower (~400 ms,
/// past `api`'s 100 ms attempts) the whole run; `api` retries twice, to the same replica or to
/// another one (RETRY_HOST).
const REPLICAS: &str = r#"Scenario(
    name: "replicas",
    horizon: "4s",
    workload: OpenLoop(rate: 40.0, arrivals: Constant, clients: 4),
    downstreams: [
        (name: "api", model: Server(workers: 200, service: Constant("1ms")),
         handler: (calls: [(stack: Retry(
             policy: (max_attempts: 3, attempt_timeout: "100ms", backoff: (shape: Constant(delay: "0s"))),
             inner: Call(downstream: "db")))])),
        (name: "db", model: Server(workers: 8, queue: (capacity: 500), service: Constant("20ms")),
         replicas: 3, balancer: Random, retry_host: RETRY_HOST),
    ],
    faults: [LatencyInflation(downstream: "db[1]", from: "0s", until: "4s", factor: 20.0)],
    policies: [(name: "call", stack: Call(downstream: "api", timeout: "2s"))],
)"#;

#[test]
fn replicas_behind_a_balancer_are_picked_as_simulated() {
    for (host, success) in [("Other", 0.97..=1.0), ("Same", 0.5..=0.85)] {
        let c = compile(&REPLICAS.replace("RETRY_HOST", host));
        let (e, s) = both(&c);
        // Retries to another replica always reach a fast one; to the same one, a request that
        // drew the slow replica fails (about a third).
        assert!(
            success.contains(&s.success_rate),
            "{host}: simulated {}",
            s.success_rate
        );
        assert!(
            (e.success_rate - s.success_rate).abs() < 0.08,
            "{host}: success emulated {}, simulated {}",
            e.success_rate,
            s.success_rate
        );
        // Each replica is a downstream of its own, at the group's depth, with its share of calls.
        for k in 0..3 {
            let name = format!("db[{k}]");
            let (eh, sh) = (hop(&e, &name), hop(&s, &name));
            assert_eq!((eh.depth, sh.depth), (Some(2), Some(2)));
            assert!(
                (eh.amplification - sh.amplification).abs() <= 0.1 * sh.amplification + 0.05,
                "{host}, {name}: emulated {}, simulated {}",
                eh.amplification,
                sh.amplification
            );
        }
    }
}

#[test]
fn outlier_detection_is_refused_with_the_reason_not_run() {
    let c = compile(
        r#"Scenario(
    name: "replicas",
    horizon: "3s",
    workload: OpenLoop(rate: 60.0, clients: 4),
    downstreams: [
        (name: "front", model: Server(workers: 8, service: Constant("10ms")),
         handler: (calls: [(stack: Call(downstream: "leaf", timeout: "1s"))])),
        (name: "leaf", model: Server(workers: 8, service: Constant("10ms")), replicas: 3,
         outlier_detection: ()),
    ],
    policies: [(name: "call", stack: Call(downstream: "front", timeout: "1s"))],
)"#,
    );
    let e = size::measure(&c, 1.0, 1).unwrap_err();
    assert!(
        e.contains("\"leaf\": outlier detection") && e.contains("not emulated yet"),
        "{e}"
    );
    // The run refuses it too, before anything listens.
    let e = run_policy(&c, 0, 1, 1.0).unwrap_err();
    assert!(e.contains("outlier detection"), "{e}");
}

#[test]
fn blocking_clients_are_refused_not_run_as_async_ones() {
    let c = compile(
        r#"Scenario(
    name: "blocking",
    horizon: "3s",
    interruptible: false,
    workload: OpenLoop(rate: 60.0, clients: 4),
    downstreams: [(name: "leaf", model: Server(workers: 8, service: Constant("10ms")))],
    policies: [(name: "retry", stack: Retry(policy: (max_attempts: 2, attempt_timeout: "5ms",
        backoff: (shape: Constant(delay: "1ms"), cap: "1s")), inner: Call(downstream: "leaf")))],
)"#,
    );
    let e = size::measure(&c, 1.0, 1).unwrap_err();
    assert!(e.starts_with("interruptible: blocking clients"), "{e}");
    let e = run_policy(&c, 0, 1, 1.0).unwrap_err();
    assert!(e.contains("not emulated"), "{e}");
}

#[test]
fn breakers_per_host_are_refused_at_their_field_not_run_as_one() {
    let c = compile(
        r#"Scenario(
    name: "replicas",
    horizon: "3s",
    workload: OpenLoop(rate: 60.0, clients: 4),
    downstreams: [
        (name: "leaf", model: Server(workers: 8, service: Constant("10ms")), replicas: 3),
    ],
    policies: [
        (name: "call", stack: Call(downstream: "leaf", timeout: "1s")),
        (name: "host breakers", stack: Breaker(config: (failure_rate: 0.5, minimum_calls: 10,
            window: Count(calls: 20), open: (duration: "1s")), scope: PerHost,
            inner: Call(downstream: "leaf", timeout: "1s"))),
    ],
)"#,
    );
    let e = size::measure(&c, 1.0, 1).unwrap_err();
    assert!(
        e.starts_with("policies[1].stack.scope: breakers per host")
            && e.contains("not emulated yet"),
        "{e}"
    );
    // The run refuses it too, whichever policy it runs, before anything listens.
    let e = run_policy(&c, 0, 1, 1.0).unwrap_err();
    assert!(e.contains("PerHost"), "{e}");
}

#[test]
fn what_a_fleet_cannot_run_for_real_is_refused_with_the_reason() {
    let fleet = r#"Scenario(
    name: "fleet",
    horizon: "3s",
    workload: OpenLoop(rate: 60.0, clients: 4),
    downstreams: [(name: "leaf", model: Server(workers: 8, service: Constant("10ms")))],
    stores: [(name: "redis", round_trip: Constant("1ms"))],
    policies: [
        (name: "fleet breaker", stack: Breaker(config: (failure_rate: 0.5, minimum_calls: 10,
            window: Count(calls: 20), open: (duration: "1s")),
            scope: Fleet(store: "redis", mode: MODE, wait: "5ms", on_store_failure: Local),
            inner: Call(downstream: "leaf", timeout: "1s"))),
    ],
)"#;
    // A service decides on a view refreshed in the background, never on a round trip per
    // decision: the loader's own refusal, at the field.
    let c = compile(&fleet.replace("MODE", "Exact"));
    let e = run_policy(&c, 0, 1, 1.0).unwrap_err();
    assert!(
        e.contains("stack.scope.mode") && e.contains(reliable::policy::FLEET_EXACT),
        "{e}"
    );
    // The store and each process keep wall time: no other time scale.
    let c = compile(&fleet.replace("MODE", r#"Cached(refresh: "100ms")"#));
    let e = run_policy(&c, 0, 1, 2.0).unwrap_err();
    assert!(
        e.starts_with("--time-scale 2") && e.contains("time scale 1 only"),
        "{e}"
    );
    // A service's own Fleet scope (in a call graph) is the simulator's alone so far.
    let c = compile(
        r#"Scenario(
    name: "fleet service",
    horizon: "3s",
    workload: OpenLoop(rate: 60.0, clients: 4),
    downstreams: [
        (name: "api", model: Server(workers: 8, service: Constant("5ms")), handler: (calls: [
            (stack: Breaker(config: (failure_rate: 0.5, minimum_calls: 10,
                window: Count(calls: 20), open: (duration: "1s")),
                scope: Fleet(store: "redis", mode: Cached(refresh: "100ms"), wait: "5ms"),
                inner: Call(downstream: "db", timeout: "1s"))),
        ])),
        (name: "db", model: Server(workers: 8, service: Constant("5ms"))),
    ],
    stores: [(name: "redis", round_trip: Constant("1ms"))],
    policies: [(name: "call", stack: Call(downstream: "api", timeout: "1s"))],
)"#,
    );
    let e = size::measure(&c, 1.0, 1).unwrap_err();
    assert!(
        e.contains("handler.calls[0].stack") && e.contains("not emulated yet"),
        "{e}"
    );
}

#[test]
fn the_size_check_counts_every_tier_s_attempts() {
    // 40/s at the edge × (3 api attempts × (1 + 3 db attempts)) = 480 attempts/s.
    let c = compile(&DEADLINE.replace(r#""300ms""#, r#""1s""#));
    let s = size::measure(&c, 1.0, 1).unwrap();
    assert!(
        (s.peak_attempts_per_s - 480.0).abs() < 1e-6,
        "{}",
        s.peak_attempts_per_s
    );
}

//! One bad file per error class: every message names the file, the line and column, the field and
//! what was expected. And no input makes the parser or the validator panic.

mod common;

use common::error;

/// A valid scenario with `{}` slots to break one thing at a time.
fn scenario(workload: &str, downstreams: &str, faults: &str, policies: &str) -> String {
    format!(
        "Scenario(\n    name: \"bad\",\n    horizon: \"60s\",\n    workload: {workload},\n    downstreams: [{downstreams}],\n    faults: [{faults}],\n    policies: [{policies}],\n)\n"
    )
}

const OPEN: &str = "OpenLoop(rate: 100.0, clients: 10)";
const SERVER: &str =
    "(name: \"api\", model: Server(workers: 4, service: Exponential(mean: \"10ms\")))";
const CALL: &str = "(name: \"plain\", stack: Call(downstream: \"api\", timeout: \"1s\"))";

#[test]
fn the_template_is_valid() {
    let text = scenario(OPEN, SERVER, "", CALL);
    sim::load(&text, "ok.ron").unwrap();
}

#[test]
fn syntax_error() {
    let e = error("Scenario(\n  name: \"x\"\n  horizon: \"1s\",\n)");
    assert!(e.starts_with("bad.ron:3:"), "{e}");
    assert!(e.contains("Expected") || e.contains("expected"), "{e}");
}

#[test]
fn unknown_field_lists_the_expected_names() {
    let e = error(&scenario(
        "OpenLoop(rate: 100.0, clientz: 10)",
        SERVER,
        "",
        CALL,
    ));
    assert!(e.starts_with("bad.ron:4:"), "{e}");
    assert!(
        e.contains("clientz") && e.contains("`clients`") && e.contains("`steps`"),
        "{e}"
    );
}

#[test]
fn unknown_variant_lists_the_expected_names() {
    let e = error(&scenario("OpenLop(rate: 1.0)", SERVER, "", CALL));
    assert!(e.starts_with("bad.ron:4:"), "{e}");
    assert!(e.contains("`OpenLoop`") && e.contains("`JobSet`"), "{e}");
}

#[test]
fn wrong_type_names_the_field_and_what_was_found() {
    let ds = "(name: \"api\", model: Server(workers: \"four\", service: Constant(\"1ms\")))";
    let e = error(&scenario(OPEN, ds, "", CALL));
    assert!(e.starts_with("bad.ron:5:"), "{e}");
    assert!(
        e.contains("workers") && e.contains("integer") && e.contains("\"four\""),
        "{e}"
    );
}

#[test]
fn bad_duration_says_what_a_duration_looks_like() {
    let e = error("Scenario(name: \"x\",\n horizon: \"10 parsecs\")");
    assert!(e.starts_with("bad.ron:2:"), "{e}");
    assert!(e.contains("\"30s\""), "{e}");
}

#[test]
fn missing_field() {
    let e = error("Scenario(name: \"x\", horizon: \"1s\")");
    assert!(e.contains("workload"), "{e}");
}

/// Semantic errors: (what to break, where it must point, words the message must contain).
#[test]
fn semantic_errors_point_at_the_field() {
    let cases: Vec<(String, &str, &[&str])> = vec![
        (
            scenario("OpenLoop(rate: -5.0)", SERVER, "", CALL),
            "bad.ron:4:24: workload.rate",
            &["-5", ">= 0"],
        ),
        (
            scenario("OpenLoop(rate: 1.0, clients: 0)", SERVER, "", CALL),
            "bad.ron:4:35: workload.clients",
            &["at least 1"],
        ),
        (
            scenario(
                OPEN,
                "(name: \"api\", model: Server(workers: 0, service: Constant(\"1ms\")))",
                "",
                CALL,
            ),
            "bad.ron:5:47: downstreams[0].model.workers",
            &["at least 1"],
        ),
        (
            scenario(
                OPEN,
                SERVER,
                "Outage(downstream: \"api\", from: \"70s\", until: \"80s\")",
                CALL,
            ),
            "bad.ron:6:40: faults[0].from",
            &["horizon"],
        ),
        (
            scenario(
                OPEN,
                SERVER,
                "Outage(downstream: \"api\", from: \"10s\", until: \"5s\")",
                CALL,
            ),
            "bad.ron:6:53: faults[0].until",
            &["from < until"],
        ),
        (
            scenario(
                OPEN,
                SERVER,
                "Outage(downstream: \"api\", from: \"10s\", until: \"61s\")",
                CALL,
            ),
            "bad.ron:6:53: faults[0].until",
            &["horizon"],
        ),
        (
            scenario(
                OPEN,
                SERVER,
                "Outage(downstream: \"apii\", from: \"1s\", until: \"2s\")",
                CALL,
            ),
            "bad.ron:6:21: faults[0].downstream",
            &["\"apii\"", "\"api\""],
        ),
        (
            scenario(
                OPEN,
                SERVER,
                "",
                "(name: \"p\", stack: Fallback([Call(downstream: \"api\"), Call(downstream: \"bakup\")]))",
            ),
            "bad.ron:7:75: policies[0].stack[1].downstream",
            &["\"bakup\"", "expected one of \"api\""],
        ),
        (
            scenario(OPEN, &format!("{SERVER}, {SERVER}"), "", CALL),
            "bad.ron:5:98: downstreams[1].name",
            &["unique"],
        ),
        (
            scenario(OPEN, SERVER, "", &format!("{CALL}, {CALL}")),
            "bad.ron:7:81: policies[1].name",
            &["unique"],
        ),
        (
            scenario("OpenLoop(rate: 1.0, clients: 1000000000)", SERVER, "", CALL),
            "bad.ron:4:35: workload.clients",
            &["exhaust memory"],
        ),
        (
            scenario("OpenLoop(rate: 1e12)", SERVER, "", CALL),
            "bad.ron:4:24: workload.rate",
            &["requests over the horizon"],
        ),
        (
            scenario(
                OPEN,
                SERVER,
                "",
                "(name: \"p\", stack: Breaker(config: (failure_rate: 1.5), inner: Call(downstream: \"api\")))",
            ),
            "bad.ron:7:52: policies[0].stack.config.failure_rate",
            &["1.5 is not a fraction"],
        ),
        (
            scenario(
                OPEN,
                SERVER,
                "",
                "(name: \"p\", stack: Breaker(config: (), inner: Call(downstream: \"api\")))",
            ),
            "bad.ron:7:43: policies[0].stack.config.consecutive_failures",
            &["no trip rule"],
        ),
        (
            scenario(OPEN, SERVER, "", "(name: \"p\", stack: Fallback([]))"),
            "bad.ron:7:28: policies[0].stack",
            &["empty Fallback"],
        ),
        (
            scenario(
                OPEN,
                SERVER,
                "",
                "(name: \"p\", stack: Retry(policy: (backoff: (shape: Exponential(base: \"0s\"), cap: \"1s\")), inner: Call(downstream: \"api\")))",
            ),
            "bad.ron:7:",
            &["policies[0].stack.policy.backoff.shape.base: must not be zero"],
        ),
        (
            scenario(
                OPEN,
                SERVER,
                "",
                "(name: \"p\", stack: Retry(policy: (backoff: (shape: Constant(delay: \"0s\"))), budget: Ratio(ratio: -1.0, min_per_sec: 0), inner: Call(downstream: \"api\")))",
            ),
            "bad.ron:7:",
            &["policies[0].stack.budget.ratio: -1 must be a finite number in [0, 1000]"],
        ),
        (
            scenario(
                OPEN,
                SERVER,
                "",
                "(name: \"p\", stack: Throttle(config: (k: 0.5), inner: Call(downstream: \"api\")))",
            ),
            "bad.ron:7:",
            &["policies[0].stack.config.k: 0.5 must be a finite number in [1, 1000]"],
        ),
        (
            scenario(
                OPEN,
                SERVER,
                "",
                "(name: \"p\", stack: Hedge(config: (delay: Fixed(\"0s\"), max_hedges: 1), idempotent: true, inner: Call(downstream: \"api\")))",
            ),
            "bad.ron:7:",
            &["policies[0].stack.config.delay", "zero"],
        ),
        (
            scenario(
                OPEN,
                SERVER,
                "",
                "(name: \"p\", stack: Hedge(config: (delay: Fixed(\"5ms\"), max_hedges: 9), idempotent: true, inner: Call(downstream: \"api\")))",
            ),
            "bad.ron:7:",
            &["policies[0].stack.config.max_hedges", "at most 8"],
        ),
        (
            scenario(
                OPEN,
                SERVER,
                "",
                "(name: \"p\", stack: Hedge(config: (delay: Quantile(), max_hedges: 1), idempotent: true, inner: Retry(policy: (backoff: (shape: Constant(delay: \"0s\"))), inner: Call(downstream: \"api\"))))",
            ),
            "bad.ron:7:",
            &["policies[0].stack.inner", "expected `inner: Call(...)`"],
        ),
        (
            scenario(
                OPEN,
                SERVER,
                "",
                "(name: \"p\", stack: Retry(policy: (backoff: (shape: Constant(delay: \"0s\"))), inner: Ledger(config: (ratio: 0.1, min_per_sec: 0), inner: Call(downstream: \"api\"))))",
            ),
            "bad.ron:7:",
            &["policies[0].stack.inner", "outside the Retry"],
        ),
        (
            scenario(
                OPEN,
                SERVER,
                "",
                "(name: \"p\", stack: Ledger(config: (ratio: 0.1, min_per_sec: 0, ttl: \"100ms\"), inner: Call(downstream: \"api\")))",
            ),
            "bad.ron:7:",
            &["policies[0].stack.config.ttl"],
        ),
        (
            scenario(
                OPEN,
                SERVER,
                "",
                "(name: \"p\", stack: Limit(config: (rule: Aimd(backoff: 1.5, increase: 1), initial: 10, min: 1, max: 100), inner: Call(downstream: \"api\")))",
            ),
            "bad.ron:7:",
            &["policies[0].stack.config.rule.backoff"],
        ),
        (
            scenario(
                OPEN,
                SERVER,
                "",
                "(name: \"p\", stack: Limit(config: (rule: Fixed, initial: 0, min: 0, max: 0), inner: Call(downstream: \"api\")))",
            ),
            "bad.ron:7:",
            &["policies[0].stack.config.min"],
        ),
        (
            scenario(
                "ClosedLoop(clients: 3)",
                SERVER,
                "LoadSpike(from: \"1s\", until: \"2s\", factor: 2.0)",
                CALL,
            ),
            "bad.ron:6:14: faults[0]",
            &["OpenLoop"],
        ),
        (
            scenario(
                OPEN,
                "(name: \"api\", model: Server(workers: 1, service: Constant(\"1ms\"), error_rate: 1.5))",
                "",
                CALL,
            ),
            "bad.ron:5:85: downstreams[0].model.error_rate",
            &["[0, 1]"],
        ),
        (
            scenario(
                OPEN,
                "(name: \"api\", model: Server(workers: 1, service: LogNormal(scale: \"1ms\", sigma: -1.0)))",
                "",
                CALL,
            ),
            "bad.ron:5:92: downstreams[0].model.service.sigma",
            &["[0, 10]"],
        ),
        (
            scenario(
                OPEN,
                "(name: \"api\", model: Server(workers: 1, service: Uniform(low: \"2ms\", high: \"1ms\")))",
                "",
                CALL,
            ),
            "bad.ron:5:88: downstreams[0].model.service.high",
            &["low <= high"],
        ),
        (
            scenario(
                OPEN,
                SERVER,
                "",
                "(name: \"p\", stack: Call(downstream: \"api\", timeout: \"0s\"))",
            ),
            "bad.ron:7:59: policies[0].stack.timeout",
            &["longer than 0"],
        ),
        (
            format!(
                "{}\n",
                scenario(OPEN, SERVER, "", CALL)
                    .replace("horizon: \"60s\",", "horizon: \"60s\", bucket: \"1us\",")
            ),
            "bad.ron:3:21: bucket",
            &["wider bucket"],
        ),
        (
            scenario(OPEN, "", "", CALL),
            "bad.ron:5:5: downstreams",
            &["no downstreams"],
        ),
        (
            scenario(OPEN, SERVER, "", ""),
            "bad.ron:7:5: policies",
            &["no policies"],
        ),
    ];
    for (text, at, words) in &cases {
        let e = error(text);
        assert!(e.starts_with(at), "expected `{at}...`, got `{e}`");
        for w in *words {
            assert!(e.contains(w), "`{e}` lacks `{w}`");
        }
    }
}

/// No input panics: mutations, truncations and splices of a real scenario.
#[test]
fn no_input_panics() {
    fuzz(sim::DEFAULT_SCENARIO.as_bytes());
    // A list of scenarios with a drawn timeout, and one with a sweep.
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
    for f in ["outage-amplification.ron", "failure-rate-sweep.ron"] {
        fuzz(&std::fs::read(root.join(f)).unwrap());
    }
}

fn fuzz(base: &[u8]) {
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let junk: &[&[u8]] = &[
        b"(",
        b")",
        b"[",
        b"\"",
        b"r#\"",
        b"/*",
        b"-1e400",
        b"NaN",
        b"inf",
        b"\xff",
        b"Some(",
        b",",
        b":",
        b"0s",
        b"18446744073709551616",
    ];
    for _ in 0..3_000 {
        let mut text = base.to_vec();
        for _ in 0..(next() % 4 + 1) {
            let at = (next() as usize) % (text.len() + 1);
            match next() % 3 {
                0 => text.truncate(at),
                1 => {
                    let j = junk[(next() as usize) % junk.len()];
                    text.splice(at..at, j.iter().copied());
                }
                _ => {
                    let end = (at + (next() as usize % 20)).min(text.len());
                    text.drain(at..end);
                }
            }
        }
        let text = String::from_utf8_lossy(&text);
        let _ = sim::load_all(&text, "fuzz.ron");
    }
    // Deep nesting is refused, not a stack overflow.
    let deep = format!(
        "Scenario(name: {}{})",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    assert!(sim::load(&deep, "deep.ron").is_err());
}

#[test]
fn relapse_share_must_sit_between_zero_and_the_threshold() {
    let text = |relapse: &str| {
        format!(
            "Scenario(\n    name: \"bad\",\n    horizon: \"60s\",\n    workload: {OPEN},\n    downstreams: [{SERVER}],\n    policies: [{CALL}],\n    recovery: (threshold: 0.8, relapse: {relapse}),\n)\n"
        )
    };
    sim::load(&text("0.0"), "ok.ron").unwrap();
    sim::load(&text("0.8"), "ok.ron").unwrap();
    for bad in ["0.9", "-0.1", "NaN"] {
        let e = error(&text(bad));
        assert!(e.starts_with("bad.ron:7:32: recovery.relapse:"), "{e}");
        assert!(e.contains("[0, threshold = 0.8]"), "{e}");
    }
}

/// A file holding a list: an empty list, duplicate names, an error in the second scenario.
#[test]
fn scenario_lists() {
    let one = |name: &str, rate: &str| {
        format!(
            "Scenario(\n    name: \"{name}\",\n    horizon: \"60s\",\n    workload: OpenLoop(rate: {rate}),\n    downstreams: [{SERVER}],\n    policies: [{CALL}],\n)"
        )
    };
    let list = format!("[\n{},\n{},\n]\n", one("a", "1.0"), one("b", "2.0"));
    let all = sim::load_all(&list, "ok.ron").unwrap();
    assert_eq!(all.len(), 2);
    // `load` takes exactly one, and says so.
    let e = error(&list);
    assert!(
        e.contains("holds 2 scenarios (\"a\", \"b\"): expected one here"),
        "{e}"
    );
    let e = sim::load_all("// nothing yet\n[]", "bad.ron")
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("bad.ron:2:1: an empty list of scenarios"),
        "{e}"
    );
    let dup = format!("[\n{},\n{},\n]\n", one("a", "1.0"), one("a", "2.0"));
    let e = sim::load_all(&dup, "bad.ron").unwrap_err().to_string();
    assert!(
        e.starts_with("bad.ron:10:5: [1].name: \"a\" is used by an earlier scenario"),
        "{e}"
    );
    let bad = format!("[\n{},\n{},\n]\n", one("a", "1.0"), one("b", "-2.0"));
    let e = sim::load_all(&bad, "bad.ron").unwrap_err().to_string();
    assert!(e.starts_with("bad.ron:12:24: [1].workload.rate: -2"), "{e}");
}

/// Drawn timeouts: not both kinds at once, no empty Choice.
#[test]
fn drawn_timeouts() {
    let with = |stack: &str| scenario(OPEN, SERVER, "", &format!("(name: \"p\", stack: {stack})"));
    sim::load(
        &with("Call(downstream: \"api\", timeout_dist: Choice([\"100ms\", \"200ms\"]))"),
        "ok.ron",
    )
    .unwrap();
    let e = error(&with(
        "Call(downstream: \"api\", timeout: \"1s\", timeout_dist: Constant(\"1s\"))",
    ));
    assert!(
        e.starts_with(
            "bad.ron:7:74: policies[0].stack.timeout_dist: both timeout and timeout_dist"
        ),
        "{e}"
    );
    let e = error(&with("Call(downstream: \"api\", timeout_dist: Choice([]))"));
    assert!(
        e.starts_with("bad.ron:7:59: policies[0].stack.timeout_dist: an empty Choice"),
        "{e}"
    );
}

/// Sweeps: the path must name a field, the values must fit it and make a valid scenario.
#[test]
fn sweeps() {
    let with = |sweep: &str| {
        format!(
            "Scenario(\n    name: \"bad\",\n    horizon: \"60s\",\n    workload: {OPEN},\n    downstreams: [{SERVER}],\n    policies: [{CALL}],\n    sweep: {sweep},\n)\n"
        )
    };
    let ok = with("(parameter: \"downstreams[api].model.workers\", values: [1, 2, 8])");
    sim::load(&ok, "ok.ron").unwrap();
    let ok = with("(parameter: \"policies[plain].stack.timeout\", values: [\"100ms\", \"1s\"])");
    sim::load(&ok, "ok.ron").unwrap();
    let cases: Vec<(String, &str, &[&str])> = vec![
        (
            with("(parameter: \"downstreams[apii].model.workers\", values: [1])"),
            "bad.ron:7:13: sweep.parameter:",
            &["no element named \"apii\""],
        ),
        (
            with("(parameter: \"workload.rte\", values: [1])"),
            "bad.ron:7:13: sweep.parameter:",
            &["no field `rte`", "`rate`"],
        ),
        (
            with("(parameter: \"workload.rate\", values: [])"),
            "bad.ron:7:41: sweep.values:",
            &["0 values: expected 1 to 1000"],
        ),
        (
            with("(parameter: \"workload.rate\", values: [10.0, -1.0])"),
            "bad.ron:7:56: sweep.values[1]:",
            &["with workload.rate = -1", "workload.rate", ">= 0"],
        ),
        (
            with("(parameter: \"downstreams[0].model.workers\", values: [2.5])"),
            "bad.ron:7:65: sweep.values[0]:",
            &["u32"],
        ),
        (
            with("(parameter: \"policies[0].stack.timeout\", values: [5])"),
            "bad.ron:7:62: sweep.values[0]:",
            &["cannot replace", "duration"],
        ),
        (
            with("(parameter: \"policies[0].stack.timeout\", values: [\"soon\"])"),
            "bad.ron:7:62: sweep.values[0]:",
            &["invalid duration \"soon\""],
        ),
    ];
    for (text, at, words) in &cases {
        let e = error(text);
        assert!(e.starts_with(at), "expected `{at}...`, got `{e}`");
        for w in *words {
            assert!(e.contains(w), "`{e}` lacks `{w}`");
        }
    }
}

#[test]
fn a_scripted_status_outside_the_http_range_is_refused_at_its_position() {
    let ds =
        "(name: \"api\", model: Scripted(script: [Ok, Status(status: 200), Status(status: 600)]))";
    let e = error(&scenario(OPEN, ds, "", CALL));
    assert!(e.starts_with("bad.ron:5:"), "{e}");
    assert!(e.contains("script[2].status"), "{e}");
    assert!(e.contains("600 is not a status: expected 100..=599"), "{e}");
    let ok = "(name: \"api\", model: Scripted(script: [Reset, Status(status: 503, retry_after: Some(\"2s\"))], latencies: [\"5ms\"]))";
    sim::load(&scenario(OPEN, ok, "", CALL), "ok.ron").unwrap();
}

/// The template with `extra` fields before its closing parenthesis (stores, client faults).
fn with(policies: &str, extra: &str) -> String {
    let s = scenario(OPEN, SERVER, "", policies);
    format!("{}{extra}\n)\n", s.trim_end().trim_end_matches(')'))
}

const STORE: &str = "stores: [(name: \"redis\", round_trip: Constant(\"1ms\"))],";

fn fleet_breaker(scope: &str) -> String {
    format!(
        "(name: \"fleet\", stack: Breaker(config: (consecutive_failures: 5), scope: {scope}, inner: Call(downstream: \"api\", timeout: \"1s\")))"
    )
}

#[test]
fn fleet_scopes_stores_and_client_faults_are_checked_at_their_fields() {
    // The template with a store and a fleet breaker loads.
    let ok = with(&fleet_breaker("Fleet(store: \"redis\")"), STORE);
    sim::load(&ok, "ok.ron").unwrap();
    // A store no scenario declares.
    let e = error(&with(&fleet_breaker("Fleet(store: \"orders\")"), STORE));
    assert!(
        e.contains("scope.store")
            && e.contains("no store named \"orders\"")
            && e.contains("\"redis\""),
        "{e}"
    );
    // A wait or refresh out of bounds, at the field.
    let e = error(&with(
        &fleet_breaker("Fleet(store: \"redis\", wait: \"0s\")"),
        STORE,
    ));
    assert!(e.contains("scope.wait") && e.contains("at most 1s"), "{e}");
    let e = error(&with(
        &fleet_breaker("Fleet(store: \"redis\", mode: Cached(refresh: \"0s\"))"),
        STORE,
    ));
    assert!(e.contains("scope.mode.refresh"), "{e}");
    // A breaker config a fleet cannot share, at its field in the file, with the core's reason
    // (the policy format and `reliable::fleet` refuse the same).
    let jitter = "(name: \"j\", stack: Breaker(config: (consecutive_failures: 5, open: (duration: \"5s\", jitter: 0.2)), scope: Fleet(store: \"redis\"), inner: Call(downstream: \"api\")))";
    let e = error(&with(jitter, STORE));
    assert!(
        e.contains("stack.config.open.jitter") && e.contains("one breaker for the fleet"),
        "{e}"
    );
    let window = "(name: \"w\", stack: Breaker(config: (failure_rate: 0.5, window: Count(calls: 100)), scope: Fleet(store: \"redis\"), inner: Call(downstream: \"api\")))";
    let e = error(&with(window, STORE));
    assert!(
        e.contains("stack.config.window.calls") && e.contains("at most 64 calls"),
        "{e}"
    );
    // Where a fleet cannot share the state, and where the simulator does not model it yet.
    let throttle = "(name: \"t\", stack: Throttle(scope: Fleet(store: \"redis\"), inner: Call(downstream: \"api\")))";
    let e = error(&with(throttle, STORE));
    assert!(
        e.contains("scope") && e.contains(reliable_core::policy::FLEET_LAYERS),
        "{e}"
    );
    let rate = "(name: \"r\", stack: RateLimit(config: (rate: 10, period: \"1s\", burst: 1), scope: Fleet(store: \"redis\"), inner: Call(downstream: \"api\")))";
    let e = error(&with(rate, STORE));
    assert!(
        e.contains("models a Fleet scope on a Breaker and on a Retry's ratio budget so far"),
        "{e}"
    );
    // A ratio budget a fleet cannot share, at its field, with the core's reason.
    let slots = "(name: \"s\", stack: Retry(policy: (max_attempts: 2, backoff: (shape: Constant(delay: \"0s\"))), budget: Ratio(ratio: 0.1, min_per_sec: 0, slots: 65), budget_scope: Fleet(store: \"redis\"), inner: Call(downstream: \"api\")))";
    let e = error(&with(slots, STORE));
    assert!(
        e.contains("stack.budget.slots") && e.contains("at most 64 slots"),
        "{e}"
    );
    // A URL is not a store's name, and is not repeated.
    let url = "stores: [(name: \"redis://u:hunter2@h\", round_trip: Constant(\"1ms\"))],";
    let e = error(&with(CALL, url));
    assert!(
        e.contains("stores[0].name") && !e.contains("hunter2"),
        "{e}"
    );
    // Store faults inside the horizon; client faults on a client of the workload.
    let late = "stores: [(name: \"redis\", round_trip: Constant(\"1ms\"), faults: [Outage(from: \"10s\", until: \"90s\")])],";
    let e = error(&with(CALL, late));
    assert!(e.contains("stores[0].faults[0]"), "{e}");
    let client = "client_faults: [NetworkDown(client: 10, from: \"1s\", until: \"2s\")],";
    let e = error(&with(CALL, client));
    assert!(
        e.contains("client_faults[0].client") && e.contains("0 to 9"),
        "{e}"
    );
}

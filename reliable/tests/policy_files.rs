//! Policy files: every policy of every shipped scenario loads into `Reliable` and the tower
//! `ReliableLayer` (or is refused for a stated reason), a loaded policy decides as the simulator
//! does, errors point at `file:line:col`, and hostile files are refused quickly.

#[allow(dead_code)] // its `main` is for `cargo run --example layered`
#[path = "../examples/layered.rs"]
mod layered;

use reliable::policy::{Plan, PolicyError, Route, Scope, policy_names};
use reliable::tower::{AnyOk, BoxError, Open};
use reliable_core::outcome::ErrorClass;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use tower::{Layer, Service, ServiceExt};

/// Plain requests, every one retryable; every `Ok` a success.
#[derive(Clone, Copy, Debug)]
struct CloneAll;

impl reliable::Classify<reliable::tower::BoxError, u32> for CloneAll {
    fn error(&self, e: &reliable::tower::BoxError) -> reliable_core::outcome::ErrorClass {
        reliable::tower::error_class(e)
    }

    fn ok(&self, _: &u32) -> Option<ErrorClass> {
        None
    }
}

impl reliable::tower::Policy<u32, u32> for CloneAll {
    fn clone_request(&self, r: &u32) -> Option<u32> {
        Some(*r)
    }
}

fn scenarios() -> Vec<(String, String)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "ron"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let name = format!("scenarios/{}", p.file_name().unwrap().to_string_lossy());
            (name, std::fs::read_to_string(p).unwrap())
        })
        .collect()
}

/// Why a route cannot run in a `Reliable`, if it cannot.
fn reliable_refusal(e: &PolicyError) -> &'static str {
    let m = &e.message;
    if m.contains("simulator only") {
        "timeout_dist"
    } else if m.contains("spend breaker") {
        "spend"
    } else if m == reliable_core::policy::PER_HOST_ONE_HOST {
        "PerHost"
    } else {
        panic!("unexpected refusal: {e}")
    }
}

/// Loads a route into a `Reliable` (which refuses only a route mixing `Shared` and `PerClient`
/// layers: it is one state) and into tower layers in its own order (which must succeed), and
/// into a `ReliableLayer` (built from the same builder). `Err(false)`: the `Reliable` refused it.
fn load_route(route: &Route) -> Result<(), (bool, PolicyError)> {
    match route.builder() {
        Ok(b) => assert_eq!(b.build().unwrap().name(), route.downstream),
        Err(e)
            if e.message
                .starts_with("some layers Shared and some PerClient") =>
        {
            route.route_layer(AnyOk).unwrap();
            return Err((false, e));
        }
        Err(e) => panic!("{e}"),
    }
    route.route_layer(AnyOk).unwrap();
    route.layer(AnyOk).map(|_| ()).map_err(|e| (true, e))
}

#[test]
fn every_policy_of_every_shipped_scenario_loads_or_is_refused_with_its_reason() {
    let (mut policies, mut into_reliable, mut into_layer) = (0, 0, 0);
    let (mut refused, mut mixed, mut fleet) = (Vec::new(), Vec::new(), Vec::new());
    // The simulator's stores, in a service: a store under each name the scenarios give theirs.
    let stores = ["redis", "hanging"]
        .into_iter()
        .fold(reliable::policy::Stores::new(), |s, name| {
            s.add(name, Arc::new(reliable::fleet::MemoryStore::new(name)))
        });
    for (file, text) in scenarios() {
        let names = policy_names(&text, &file).unwrap_or_else(|e| panic!("{e}"));
        assert!(!names.is_empty(), "{file}");
        for (scenario, name) in names {
            policies += 1;
            let plan = match Plan::from_scenario_in(&text, &file, &scenario, &name) {
                Ok(plan) => plan,
                Err(e) => {
                    refused.push(format!("{scenario} {name}: {}", reliable_refusal(&e)));
                    assert!(e.field.is_some(), "{e}");
                    continue;
                }
            };
            assert_eq!(plan.name, name);
            into_reliable += 1;
            for route in &plan.routes {
                // A fleet's breaker or budget: refused without the store the policy names (one
                // per process would be a per-client scope in disguise), built with it.
                if route.is_fleet() {
                    let e = route.builder().unwrap_err();
                    assert_eq!(e.message, reliable_core::policy::FLEET_NO_STORE, "{e}");
                    assert!(e.field.as_deref().unwrap().ends_with(".scope"), "{e}");
                    assert_eq!(route.layer(AnyOk).unwrap_err(), e);
                    assert_eq!(route.route_layer(AnyOk).unwrap_err(), e);
                    // A Reliable decides at once on a view of the store: the simulator's exact
                    // mode (a round trip per decision) is refused, at the scope's `mode`.
                    match route.fleet_builder(&stores) {
                        Ok(b) => {
                            assert_eq!(b.build().unwrap().name(), route.downstream);
                            route.fleet_layer(AnyOk, &stores).unwrap();
                            fleet.push(format!("{scenario} {name}"));
                        }
                        Err(e) if e.message == reliable::policy::FLEET_EXACT => {
                            assert!(e.field.as_deref().unwrap().ends_with(".scope.mode"), "{e}");
                            refused.push(format!("{scenario} {name}: Fleet Exact"));
                        }
                        Err(e) => panic!("{e}"),
                    }
                    continue;
                }
                match load_route(route) {
                    Ok(()) => into_layer += 1,
                    Err((false, _)) => mixed.push(format!("{scenario} {name}")),
                    // The same builder as the `Reliable`'s: what it takes, the layer takes.
                    Err((true, e)) => panic!("{e}"),
                }
            }
        }
    }
    println!(
        "{policies} policies: {into_reliable} load, {into_layer} routes into ReliableLayer; refused: {refused:#?}; mixed scopes, refused by a Reliable: {mixed:#?}"
    );
    assert!(policies >= 40, "{policies}");
    // Only what a service cannot run as the simulator does is refused: the timeouts drawn per
    // request of one scenario, the spend breaker, breakers per host (one host per downstream
    // here) and a fleet's breaker in exact mode (a round trip per decision). The hedging, ledger
    // and limit policies load into both, and the cached fleet breakers (fleet-breaker.ron's,
    // emulated-fleet.ron's) into a `Reliable` and a `ReliableLayer` with their store (tests/fleet_policy.rs runs them): the
    // core refuses what a fleet breaker cannot hold, for the simulator and the policy format
    // alike, so no shipped file can hold it.
    assert_eq!(
        fleet,
        [
            "emulated-fleet fleet breaker",
            "emulated-fleet fleet breaker, the store hangs",
            "fleet-breaker fleet, cached 1s",
            "fleet-breaker fleet, cached 50ms",
        ]
    );
    assert_eq!(
        refused,
        [
            "fleet-breaker fleet, exact, fail open: Fleet Exact",
            "fleet-breaker fleet, exact, fail closed: Fleet Exact",
            "llm-provider-storm spend breaker + proactive: spend",
            "outage-recovery-mixed-timeouts no retries: timeout_dist",
            "outage-recovery-mixed-timeouts retry-2x: timeout_dist",
            "outage-recovery-mixed-timeouts retry-2x backoff + jitter: timeout_dist",
            "one-bad-replica host-breakers: PerHost",
        ]
    );
    // A breaker shared by the scenario's 50 clients around a retry budget each: the tower layers
    // keep each layer's scope, a `Reliable` (one state) cannot.
    assert_eq!(mixed, ["llm-provider-storm breaker"]);
}

/// The policies every shipped scenario uses most load into `ReliableLayer` too.
#[test]
fn a_retry_around_a_breaker_loads_into_reliable_layer() {
    let (file, text) = scenarios()
        .into_iter()
        .find(|(f, _)| f.ends_with("/default.ron"))
        .unwrap();
    let plan = Plan::from_scenario(&text, &file, "budget + breaker + jitter").unwrap();
    let config = plan.route().unwrap().reliable_config().unwrap();
    assert_eq!(config.retry.max_attempts, Some(4));
    assert!(config.budget.is_some());
    assert_eq!(config.breaker.failure_rate, Some(0.5));
    plan.layer(AnyOk).unwrap();
    assert_eq!(
        plan.builder().unwrap().build().unwrap().label(),
        "retry(breaker(api))"
    );
    // A breaker around one attempt is ReliableLayer's shape too.
    let plan = Plan::from_scenario(&text, &file, "circuit breaker").unwrap();
    assert_eq!(
        plan.builder().unwrap().build().unwrap().label(),
        "breaker(api)"
    );
    plan.layer(AnyOk).unwrap();
    // The breaker outside the retry: Reliable and ReliableLayer run it per call, the route's own
    // layers too; a ReliableConfig (retry → throttle → breaker) says why it cannot hold it.
    let (file, text) = scenarios()
        .into_iter()
        .find(|(f, _)| f.ends_with("/boundary-map.ron"))
        .unwrap();
    let plan = Plan::from_scenario(&text, &file, "circuit breaker").unwrap();
    let rel = plan.builder().unwrap().build().unwrap();
    assert_eq!(rel.label(), "breaker(retry(api))");
    plan.layer(AnyOk).unwrap();
    let e = plan
        .route()
        .unwrap()
        .reliable_config()
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("scenarios/boundary-map.ron: stack: a breaker outside the retry"),
        "{e}"
    );
    plan.route_layer(AnyOk).unwrap();
}

/// Validation case 1, loaded from its scenario file unchanged: the `Reliable`s the plan builds
/// answer the exercise's twelve requests exactly as the hand-built ones (and as `sim trace
/// scenarios/layered-stack.ron`, which `sim/tests/validation.rs` holds to the same rows).
#[tokio::test(start_paused = true)]
async fn the_layered_stack_loaded_from_its_scenario_decides_like_the_simulator() {
    let (file, text) = scenarios()
        .into_iter()
        .find(|(f, _)| f.ends_with("/layered-stack.ron"))
        .unwrap();
    let plan = Plan::from_scenario(&text, &file, "layered").unwrap();
    assert_eq!(plan.routes.len(), 2);
    let primary = plan.routes[0].builder().unwrap().build().unwrap();
    let backup = plan.routes[1].builder().unwrap().build().unwrap();
    assert_eq!(primary.label(), "breaker(retry(primary))");
    assert_eq!(backup.label(), "retry(backup)");
    let loaded = layered::table_of(&primary, &backup).await.unwrap();
    let by_hand = layered::table().await.unwrap();
    assert_eq!(loaded, by_hand);
}

#[test]
fn errors_point_at_file_line_and_column() {
    let misspelt = "(name: \"p\", stack: Retry(\n    policy: (max_attempts: 3, backof: (shape: Constant(delay: \"0s\"))),\n    inner: Call(downstream: \"api\"),\n))";
    let e = Plan::from_ron(misspelt, "p.ron").unwrap_err().to_string();
    assert!(e.starts_with("p.ron:2:31: "), "{e}");
    assert!(e.contains("backof"), "{e}");

    let wrong_type = "(name: \"p\", stack: Retry(\n    policy: (max_attempts: \"three\"),\n    inner: Call(downstream: \"api\"),\n))";
    let e = Plan::from_ron(wrong_type, "p.ron").unwrap_err().to_string();
    assert!(e.starts_with("p.ron:2:27: Expected integer"), "{e}");

    let bad_duration = "(name: \"p\", stack: Call(downstream: \"api\", timeout: \"1 fortnight\"))";
    let e = Plan::from_ron(bad_duration, "p.ron")
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("p.ron:1:"), "{e}");

    let sim_only =
        "(name: \"p\", stack: Call(downstream: \"api\",\n  timeout_dist: Choice([\"100ms\"])))";
    let e = Plan::from_ron(sim_only, "p.ron").unwrap_err().to_string();
    assert!(
        e.starts_with("p.ron:2:") && e.contains("simulator only"),
        "{e}"
    );

    let json =
        "{\"name\": \"p\",\n \"stack\": {\"Call\": {\"downstream\": \"api\", \"timeot\": \"1s\"}}}";
    let e = Plan::from_json(json, "p.json").unwrap_err().to_string();
    assert!(e.starts_with("p.json:2:") && e.contains("timeot"), "{e}");
    let json = "{\"name\": \"p\",\n \"stack\": {\"Call\": {\"downstream\": 7}}}";
    let e = Plan::from_json(json, "p.json").unwrap_err().to_string();
    assert!(e.starts_with("p.json:2:"), "{e}");

    // A shape no target runs as the simulator does names the layer.
    let two = "(name: \"p\", stack: Retry(policy: (backoff: (shape: Constant(delay: \"0s\"))), inner: Retry(policy: (backoff: (shape: Constant(delay: \"0s\"))), inner: Call(downstream: \"a\"))))";
    let e = Plan::from_ron(two, "p.ron").unwrap_err().to_string();
    assert_eq!(
        e,
        "p.ron: stack.inner: a retry inside a retry: expected one Retry per route (retries multiply)"
    );
    let e = Plan::from_scenario("Scenario(policies: [])", "s.ron", "x")
        .unwrap_err()
        .to_string();
    assert!(e.contains("no policy named \"x\""), "{e}");
    // A name several scenarios of one file use needs the scenario's name.
    let (file, text) = scenarios()
        .into_iter()
        .find(|(f, _)| f.ends_with("/outage-amplification.ron"))
        .unwrap();
    let e = Plan::from_scenario(&text, &file, "retry-2x")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("2 scenarios have a policy named \"retry-2x\""),
        "{e}"
    );
    let e = Plan::from_scenario_in(&text, &file, "outage-recovery-mixed-timeouts", "retry-2x")
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "scenarios/outage-amplification.ron: stack.inner.timeout_dist: simulator only (a timeout drawn per request models callers with different timeouts): expected `timeout` in a service"
    );
}

#[test]
fn the_same_policy_in_ron_and_json_loads_the_same() {
    let ron = r#"(name: "p", stack: Retry(
        policy: (max_attempts: 4, attempt_timeout: "1s",
                 backoff: (shape: Exponential(base: "100ms", factor: 2.0), cap: "2s", jitter: Full)),
        budget: Ratio(ratio: 0.1, min_per_sec: 0, ttl: "10s"),
        inner: Breaker(config: (failure_rate: 0.5, minimum_calls: 10), inner: Call(downstream: "api")),
    ))"#;
    let json = r#"{"name": "p", "stack": {"Retry": {
        "policy": {"max_attempts": 4, "attempt_timeout": "1s",
                   "backoff": {"shape": {"Exponential": {"base": "100ms", "factor": 2.0}}, "cap": "2s", "jitter": "Full"}},
        "budget": {"Ratio": {"ratio": 0.1, "min_per_sec": 0, "ttl": "10s"}},
        "inner": {"Breaker": {"config": {"failure_rate": 0.5, "minimum_calls": 10},
                              "inner": {"Call": {"downstream": "api"}}}}}}}"#;
    let a = Plan::from_ron(ron, "p.ron").unwrap();
    let b = Plan::from_json(json, "p.ron").unwrap();
    assert_eq!(a, b);
    assert_eq!(a.routes[0].retry.attempt_timeout.unwrap().as_millis(), 1000);
}

#[test]
fn hostile_files_are_refused_quickly_and_never_panic() {
    let t0 = std::time::Instant::now();
    // 10^5 fallback branches: parsed in linear time, refused.
    let wide = format!(
        "(name: \"w\", stack: Fallback([{}]))",
        "Call(downstream: \"a\"),".repeat(100_000)
    );
    let e = Plan::from_ron(&wide, "w.ron").unwrap_err().to_string();
    assert!(e.contains("100000 fallback branches"), "{e}");
    // 10^5 policies in a scenario: loaded in linear time.
    let many = format!(
        "Scenario(policies: [{}])",
        "(name: \"p\", stack: Call(downstream: \"a\")),".repeat(100_000)
    );
    assert_eq!(policy_names(&many, "m.ron").unwrap().len(), 100_000);
    // 10^5 levels deep: refused by the parsers' depth limits.
    let deep = format!(
        "(name: \"d\", stack: {}Call(downstream: \"a\"){})",
        "Retry(policy: (backoff: (shape: Constant(delay: \"0s\"))), inner: ".repeat(100_000),
        ")".repeat(100_000)
    );
    let e = Plan::from_ron(&deep, "d.ron").unwrap_err().to_string();
    assert!(e.contains("nested more than 128 levels deep"), "{e}");
    let deep = format!(
        "{{\"name\": \"d\", \"stack\": {}{{\"Call\": {{\"downstream\": \"a\"}}}}{}}}",
        "{\"Retry\": {\"policy\": {\"backoff\": {\"shape\": {\"Constant\": {\"delay\": \"0s\"}}}}, \"inner\": ".repeat(100_000),
        "}}".repeat(100_000)
    );
    let e = Plan::from_json(&deep, "d.json").unwrap_err().to_string();
    assert!(e.contains("recursion limit"), "{e}");
    for garbage in [
        "",
        "(",
        "\"",
        "[[[[",
        "(name: ",
        "Scenario(",
        "/*",
        "\u{feff}(",
    ] {
        let _ = Plan::from_ron(garbage, "g.ron");
        let _ = Plan::from_json(garbage, "g.json");
        let _ = policy_names(garbage, "g.ron");
    }
    let took = t0.elapsed();
    assert!(took.as_secs() < 20, "{took:?}");
}

/// A failing downstream, counting its calls.
fn failing(
    calls: Arc<AtomicUsize>,
) -> impl Service<
    u32,
    Response = u32,
    Error = BoxError,
    Future = std::future::Ready<Result<u32, BoxError>>,
> + Clone {
    tower::service_fn(move |_: u32| {
        calls.fetch_add(1, Ordering::SeqCst);
        std::future::ready(Err::<u32, BoxError>("down".into()))
    })
}

/// A breaker outside the retry sees one outcome per call, inside it one per attempt: the tower
/// layers a plan builds keep the order the policy wrote (as the simulator runs it).
#[tokio::test(start_paused = true)]
async fn route_layers_keep_the_order_the_policy_wrote() {
    let breaker = "(failure_rate: 0.5, minimum_calls: 10, window: Count(calls: 20), open: (duration: \"5s\"))";
    let retry = "(max_attempts: 3, backoff: (shape: Constant(delay: \"0s\")))";
    let outside = format!(
        "(name: \"o\", stack: Breaker(config: {breaker}, inner: Retry(policy: {retry}, inner: Call(downstream: \"api\"))))"
    );
    let inside = format!(
        "(name: \"i\", stack: Retry(policy: {retry}, inner: Breaker(config: {breaker}, inner: Call(downstream: \"api\"))))"
    );
    // Calls made downstream by 12 logical requests, and how many requests the open breaker refused.
    async fn run(text: &str) -> (usize, usize) {
        let plan = Plan::from_ron(text, "p.ron").unwrap();
        let calls = Arc::new(AtomicUsize::new(0));
        let mut svc = plan
            .route_layer(CloneAll)
            .unwrap()
            .layer(failing(calls.clone()));
        let mut refused = 0;
        for i in 0..12 {
            let e = svc.ready().await.unwrap().call(i).await.unwrap_err();
            if e.is::<Open>() {
                refused += 1;
            }
        }
        (calls.load(Ordering::SeqCst), refused)
    }
    // Per call: 10 calls of 3 attempts fail, then the breaker refuses the 11th and 12th.
    assert_eq!(run(&outside).await, (30, 2));
    // Per attempt: it opens at the 10th attempt (the 4th request's first); the rest are refused.
    assert_eq!(run(&inside).await, (10, 9));
    // Without a breaker, every request makes its 3 attempts.
    let bare =
        format!("(name: \"b\", stack: Retry(policy: {retry}, inner: Call(downstream: \"api\")))");
    assert_eq!(run(&bare).await, (36, 0));
}

/// Where a throttle sits decides what it counts: a `Reliable` and `ReliableLayer` run it where
/// the policy puts it (as the core's call engine does); the tower layers of `route_layer` and a
/// `ReliableConfig` take the orders they stack, and say why they refuse the others.
#[test]
fn throttles_load_where_the_policy_puts_them() {
    let retry = "(max_attempts: 3, backoff: (shape: Constant(delay: \"0s\")))";
    let call = "Call(downstream: \"api\")";
    let breaker = "(consecutive_failures: 5)";
    let plan =
        |stack: String| Plan::from_ron(&format!("(name: \"t\", stack: {stack})"), "t.ron").unwrap();
    let around = plan(format!(
        "Throttle(inner: Retry(policy: {retry}, inner: {call}))"
    ));
    let inside = plan(format!(
        "Retry(policy: {retry}, inner: Throttle(inner: {call}))"
    ));
    let alone = plan(format!("Throttle(inner: {call})"));
    let layered = plan(format!(
        "Retry(policy: {retry}, inner: Throttle(inner: Breaker(config: {breaker}, inner: {call})))"
    ));
    let outer = plan(format!(
        "Throttle(inner: Retry(policy: {retry}, inner: Breaker(config: {breaker}, inner: {call})))"
    ));
    let under = plan(format!(
        "Breaker(config: {breaker}, inner: Throttle(inner: Retry(policy: {retry}, inner: {call})))"
    ));
    assert!(around.routes[0].throttle.unwrap().per_call);
    assert!(!inside.routes[0].throttle.unwrap().per_call);
    use reliable_core::engine::Gate;
    assert_eq!(around.routes[0].nesting.outside(), [Gate::Throttle]);
    assert_eq!(inside.routes[0].nesting.inside(), [Gate::Throttle]);
    assert_eq!(
        under.routes[0].nesting.outside(),
        [Gate::Breaker, Gate::Throttle]
    );
    for p in [&around, &inside, &alone, &layered, &outer, &under] {
        p.builder().unwrap().build().unwrap();
        p.layer(CloneAll).unwrap();
    }
    for p in [&around, &inside, &layered, &outer] {
        p.route_layer(CloneAll).unwrap();
    }
    layered.route().unwrap().reliable_config().unwrap();
    let e = outer
        .route()
        .unwrap()
        .reliable_config()
        .unwrap_err()
        .to_string();
    assert!(e.contains("a throttle around the retry"), "{e}");
    // A throttle inside the breaker: the tower layers stack the throttle outside.
    let e = under.route_layer(CloneAll).unwrap_err().to_string();
    assert_eq!(
        e,
        "t.ron: stack.inner: a throttle inside the breaker: the tower layers (Route::route_layer) put the ThrottleLayer outside the BreakerLayer; expected the Throttle outside the Breaker, or a Reliable (Route::builder) or ReliableLayer (Route::layer), which run every nesting"
    );
}

/// The hedging, ledger and limit layers load wherever the policy puts them into a `Reliable`
/// (which runs them as the core's call engine does); the tower layers of `route_layer` take the
/// orders they stack; what no stack means is refused with the layer's path and the reason.
#[test]
fn hedge_ledger_and_limit_load_where_the_policy_puts_them() {
    let plan = |stack: &str| Plan::from_ron(&format!("(name: \"x\", stack: {stack})"), "x.ron");
    let call = "Call(downstream: \"api\", timeout: \"1s\")";
    let hedge = |inner: &str| {
        format!(
            "Hedge(config: (delay: Fixed(\"30ms\"), max_hedges: 1), idempotent: true, inner: {inner})"
        )
    };
    let ledger = |inner: &str| {
        format!("Ledger(config: (ratio: 0.1, min_per_sec: 0, ttl: \"10s\"), inner: {inner})")
    };
    let limit = |inner: &str| {
        format!(
            "Limit(config: (rule: Aimd(backoff: 0.9, increase: 1), initial: 4, min: 1, max: 8), inner: {inner})"
        )
    };
    let retry = |inner: &str| {
        format!(
            "Retry(policy: (max_attempts: 3, backoff: (shape: Constant(delay: \"0s\"))), inner: {inner})"
        )
    };
    let breaker =
        |inner: &str| format!("Breaker(config: (consecutive_failures: 5), inner: {inner})");
    let refused = |stack: &str| plan(stack).unwrap_err().to_string();

    // Every layer where both targets run it.
    let full = ledger(&retry(&breaker(&limit(call))));
    let p = plan(&full).unwrap();
    let r = p.route().unwrap();
    assert!(r.ledger.is_some() && r.limit.is_some());
    p.builder().unwrap().build().unwrap();
    p.route_layer(CloneAll).unwrap();
    let hedged = breaker(&retry(&hedge(call)));
    let p = plan(&hedged).unwrap();
    assert_eq!(
        p.builder().unwrap().build().unwrap().label(),
        "breaker(retry(api))"
    );
    p.route_layer(CloneAll).unwrap();

    // What no target runs as the simulator does.
    assert_eq!(
        refused(&hedge(&retry(call))),
        "x.ron: stack.inner: a Hedge sends copies of one call: expected `inner: Call(...)`"
    );
    let not_idempotent = hedge(call).replace("idempotent: true", "idempotent: false");
    assert!(
        refused(&not_idempotent)
            .starts_with("x.ron: stack.idempotent: a Hedge of a call not marked idempotent"),
        "{}",
        refused(&not_idempotent)
    );
    assert!(refused(&retry(&ledger(call))).starts_with(
        "x.ron: stack.inner: a Ledger inside a Retry counts every retry as a first try"
    ));
    let budgeted = ledger(&retry(call).replace(
        ", inner:",
        ", budget: Ratio(ratio: 0.1, min_per_sec: 0, ttl: \"10s\"), inner:",
    ));
    assert!(
        refused(&budgeted).starts_with("x.ron: stack.inner.budget: a retry budget inside a Ledger"),
        "{}",
        refused(&budgeted)
    );
    assert!(
        refused(&limit(&limit(call))).starts_with("x.ron: stack.inner: a second limit"),
        "{}",
        refused(&limit(&limit(call)))
    );

    // Wherever the policy puts them, a Reliable and ReliableLayer run them; the tower layers
    // put the limit innermost.
    let e = |r: Result<reliable::Builder, PolicyError>| r.map(|_| ()).unwrap_err().to_string();
    for stack in [
        limit(&breaker(call)),
        limit(&retry(call)),
        retry(&breaker(&hedge(call))),
        limit(&hedge(call)),
        breaker(&ledger(&retry(call))),
    ] {
        let p = plan(&stack).unwrap();
        p.builder().unwrap().build().unwrap();
        p.layer(CloneAll).unwrap();
    }
    let e4 = plan(&limit(&breaker(call)))
        .unwrap()
        .route_layer(CloneAll)
        .unwrap_err()
        .to_string();
    assert!(
        e4.starts_with("x.ron: stack.inner: a Breaker inside a Limit: the tower layers"),
        "{e4}"
    );
    plan(&retry(&breaker(&hedge(call))))
        .unwrap()
        .route_layer(CloneAll)
        .unwrap();
    plan(&limit(&hedge(call)))
        .unwrap()
        .route_layer(CloneAll)
        .unwrap();
    plan(&breaker(&ledger(&retry(call))))
        .unwrap()
        .route_layer(CloneAll)
        .unwrap();
    let between = plan(&ledger(&breaker(&retry(call)))).unwrap();
    between.builder().unwrap().build().unwrap();
    let e2 = between.route_layer(CloneAll).unwrap_err().to_string();
    assert!(
        e2.contains("a Ledger the retry layer cannot deposit in where the simulator does"),
        "{e2}"
    );
    let blocking = plan(&hedge(call)).unwrap();
    blocking.builder().unwrap().build().unwrap();
    assert!(e(blocking.blocking_builder()).contains("a Hedge in a blocking call"));
    plan(&ledger(call)).unwrap().blocking_builder().unwrap();
    // A `Reliable` is one state: shared, its per-client layers would be shared too; one per
    // client, its shared ones would not be. The tower layers keep each layer's scope.
    let shared = |stack: String| {
        stack.replace(
            "(consecutive_failures: 5), inner:",
            "(consecutive_failures: 5), scope: Shared, inner:",
        )
    };
    let mixed = plan(&shared(retry(&breaker(&limit(call))))).unwrap();
    assert!(
        e(mixed.builder()).contains("some layers Shared and some PerClient"),
        "{}",
        e(mixed.builder())
    );
    mixed.route_layer(CloneAll).unwrap();
    // A hedge with a fixed delay keeps no state: its scope does not count.
    let fixed = plan(&shared(breaker(&retry(&hedge(call))))).unwrap();
    fixed.builder().unwrap().build().unwrap();
    plan(&full).unwrap().layer(CloneAll).unwrap();
    let e3 = plan(&full)
        .unwrap()
        .route()
        .unwrap()
        .reliable_config()
        .unwrap_err()
        .to_string();
    assert!(
        e3.contains("a ReliableConfig has retry, throttle and breaker only"),
        "{e3}"
    );
}

/// A rate limit loads wherever the policy puts it into a `Reliable` and `ReliableLayer`; the
/// tower layers of `route_layer` take it innermost, inside any limit, and say why they refuse
/// the other shapes.
#[test]
fn a_rate_limit_loads_where_the_policy_puts_it() {
    let plan = |stack: &str| Plan::from_ron(&format!("(name: \"x\", stack: {stack})"), "x.ron");
    let refused = |stack: &str| plan(stack).unwrap_err().to_string();
    let e = |r: Result<reliable::Builder, PolicyError>| r.map(|_| ()).unwrap_err().to_string();
    let call = "Call(downstream: \"api\", timeout: \"1s\")";
    let rate = |inner: &str| {
        format!("RateLimit(config: (rate: 10, period: \"1s\", burst: 2), inner: {inner})")
    };
    let limit = |inner: &str| {
        format!("Limit(config: (rule: Fixed, initial: 4, min: 4, max: 4), inner: {inner})")
    };
    let retry = |inner: &str| {
        format!(
            "Retry(policy: (max_attempts: 3, backoff: (shape: Constant(delay: \"0s\"))), inner: {inner})"
        )
    };
    let breaker =
        |inner: &str| format!("Breaker(config: (consecutive_failures: 5), inner: {inner})");
    let hedge = |inner: &str| {
        format!(
            "Hedge(config: (delay: Fixed(\"30ms\"), max_hedges: 1), idempotent: true, inner: {inner})"
        )
    };

    let full = plan(&retry(&breaker(&limit(&rate(call))))).unwrap();
    let r = full.route().unwrap();
    assert_eq!(
        r.rate_limit
            .map(|r| (r.config.rate, r.config.burst, r.scope)),
        Some((10, 2, Scope::PerClient))
    );
    full.builder().unwrap().build().unwrap();
    full.blocking_builder().unwrap().build().unwrap();
    full.route_layer(CloneAll).unwrap();
    full.layer(CloneAll).unwrap();
    let e3 = full
        .route()
        .unwrap()
        .reliable_config()
        .unwrap_err()
        .to_string();
    assert!(e3.contains("a Hedge, Ledger, Limit or RateLimit"), "{e3}");

    // Anywhere for a Reliable and ReliableLayer; the tower layers put the rate limit innermost,
    // inside the concurrency limit.
    let towered = |stack: &str| {
        let p = plan(stack).unwrap();
        p.builder().unwrap().build().unwrap();
        p.layer(CloneAll).unwrap();
        p.route_layer(CloneAll).map(|_| ()).unwrap_err().to_string()
    };
    assert!(
        towered(&rate(&limit(call))).starts_with(
            "x.ron: stack.inner: a Limit inside a RateLimit: the tower layers (Route::route_layer) put the RateLimitLayer innermost"
        ),
        "{}",
        towered(&rate(&limit(call)))
    );
    assert!(towered(&rate(&retry(call))).contains("a Retry inside a RateLimit"));
    assert!(towered(&rate(&breaker(call))).contains("a Breaker inside a RateLimit"));
    assert!(refused(&rate(&rate(call))).contains("a second rate limit"));

    let hedged = plan(&rate(&hedge(call))).unwrap();
    hedged.builder().unwrap().build().unwrap();
    assert!(e(hedged.blocking_builder()).contains("a Hedge in a blocking call"));
    hedged.route_layer(CloneAll).unwrap();

    // Inside the Retry each copy of a hedged attempt is counted (and takes a slot of a limit);
    // the tower layers would count the hedged attempt once: refused there, naming the layer.
    for (stack, at) in [
        (
            retry(&rate(&hedge(call))),
            "stack.inner: a Hedge inside a RateLimit inside the Retry",
        ),
        (
            retry(&limit(&hedge(call))),
            "stack.inner: a Hedge inside a Limit inside the Retry",
        ),
        (
            retry(&breaker(&limit(&rate(&hedge(call))))),
            "stack.inner.inner: a Hedge inside a Limit inside the Retry",
        ),
    ] {
        let e = towered(&stack);
        assert!(e.starts_with(&format!("x.ron: {at}: ")), "{e}");
        assert!(
            e.contains("or a Reliable (Route::builder) or ReliableLayer (Route::layer)"),
            "{e}"
        );
    }

    // A config the core refuses: refused by each target, naming the field.
    let zero = plan(&rate(call).replace("rate: 10", "rate: 0")).unwrap();
    let built = zero.builder().unwrap().build().unwrap_err().to_string();
    assert!(built.contains("rate"), "{built}");
    let towered = zero.route_layer(CloneAll).unwrap_err().to_string();
    assert!(towered.contains("rate"), "{towered}");
}

/// `scope` means for a rate limit what it means in the simulator: a burst of 2 shared by two
/// clients admits two calls at once in all, one per client two each.
#[tokio::test(start_paused = true)]
async fn a_rate_limit_is_shared_or_per_client_as_its_scope_says() {
    async fn admitted(scope: &str) -> usize {
        sent_by_two_clients(&format!(
            "(name: \"r\", stack: RateLimit(config: (rate: 1, period: \"1s\", burst: 2), scope: {scope}, inner: Call(downstream: \"api\")))"
        ))
        .await
    }
    assert_eq!(admitted("Shared").await, 2);
    assert_eq!(admitted("PerClient").await, 4);
}

/// Requests sent at once when two clients of the tower route of policy `text` each make three
/// calls that never end.
async fn sent_by_two_clients(text: &str) -> usize {
    let layer = Plan::from_ron(text, "p.ron")
        .unwrap()
        .route_layer(CloneAll)
        .unwrap();
    let sent = Arc::new(AtomicUsize::new(0));
    let clients = [
        layer.layer(hanging(sent.clone())),
        layer.layer(hanging(sent.clone())),
    ];
    let mut held = Vec::new();
    for client in &clients {
        for _ in 0..3 {
            let mut svc = client.clone();
            let fut = svc.ready().await.unwrap().call(1);
            held.push(tokio::spawn(fut));
        }
    }
    tokio::task::yield_now().await;
    let n = sent.load(Ordering::SeqCst);
    for h in held {
        h.abort();
    }
    n
}

/// Hanging requests until told, each counted as it is sent.
fn hanging(
    sent: Arc<AtomicUsize>,
) -> impl Service<
    u32,
    Response = u32,
    Error = BoxError,
    Future = std::future::Pending<Result<u32, BoxError>>,
> + Clone {
    tower::service_fn(move |_: u32| {
        sent.fetch_add(1, Ordering::SeqCst);
        std::future::pending::<Result<u32, BoxError>>()
    })
}

/// `scope` means what it means in the simulator: `Shared`, one state for every client (every
/// service the layer wraps); `PerClient`, one each. A bulkhead of 2 shared by two clients admits
/// two calls in all, one per client admits two each; the shipped AIMD policy's limit is 40.
#[tokio::test(start_paused = true)]
async fn a_limit_and_a_ledger_are_shared_or_per_client_as_their_scope_says() {
    use reliable::tower::OverLimit;
    async fn admitted(scope: &str) -> usize {
        sent_by_two_clients(&format!(
            "(name: \"b\", stack: Limit(config: (rule: Fixed, initial: 2, min: 2, max: 2), scope: {scope}, inner: Call(downstream: \"api\")))"
        ))
        .await
    }
    assert_eq!(admitted("Shared").await, 2);
    assert_eq!(admitted("PerClient").await, 4);

    // The shipped adaptive-limits policies: the AIMD limit starts at 40, shared.
    let (file, text) = scenarios()
        .into_iter()
        .find(|(f, _)| f.ends_with("/adaptive-limits.ron"))
        .unwrap();
    let plan = Plan::from_scenario(&text, &file, "AIMD").unwrap();
    let svc = plan.route_layer(CloneAll).unwrap();
    let sent = Arc::new(AtomicUsize::new(0));
    let (a, b) = (
        svc.layer(hanging(sent.clone())),
        svc.layer(hanging(sent.clone())),
    );
    let mut held = Vec::new();
    for i in 0..40 {
        let mut s = if i % 2 == 0 { a.clone() } else { b.clone() };
        let fut = s.ready().await.unwrap().call(1);
        held.push(tokio::spawn(fut));
    }
    tokio::task::yield_now().await;
    let e = a.clone().oneshot(1).await.unwrap_err();
    assert_eq!(
        e.downcast_ref::<OverLimit>(),
        Some(&OverLimit { limit: 40 })
    );
    assert_eq!(sent.load(Ordering::SeqCst), 40);
    for h in held {
        h.abort();
    }

    // A ledger per client: each client's calls deposit in its own. With a 100% ledger and no
    // floor, each first try buys one retry: after client a's three calls, client b's failing call
    // (4 attempts allowed) retries 3 times from a shared ledger, once from its own.
    async fn attempts_of_b(scope: &str) -> usize {
        let text = format!(
            "(name: \"l\", stack: Ledger(config: (ratio: 1.0, min_per_sec: 0, ttl: \"10s\"), scope: {scope}, inner: Retry(policy: (max_attempts: 4, backoff: (shape: Constant(delay: \"0s\"))), inner: Call(downstream: \"api\"))))"
        );
        let layer = Plan::from_ron(&text, "l.ron")
            .unwrap()
            .route_layer(CloneAll)
            .unwrap();
        let fine = tower::service_fn(|r: u32| std::future::ready(Ok::<u32, BoxError>(r)));
        let a = layer.layer(fine);
        for _ in 0..3 {
            a.clone().oneshot(1).await.unwrap();
        }
        let calls = Arc::new(AtomicUsize::new(0));
        let b = layer.layer(failing(calls.clone()));
        let _ = b.oneshot(1).await;
        calls.load(Ordering::SeqCst)
    }
    assert_eq!(attempts_of_b("Shared").await, 4);
    assert_eq!(attempts_of_b("PerClient").await, 2);
}

/// A hedge's latency estimate is shared or per client as its scope says: after client a's 20
/// fast calls warm a shared p95, client b's slow first call is hedged; with one estimate per
/// client, b's is still warming up and its call is not.
#[tokio::test(start_paused = true)]
async fn a_hedge_times_hedges_from_a_shared_or_per_client_estimate_as_its_scope_says() {
    async fn sent_by_b(scope: &str) -> usize {
        let text = format!(
            "(name: \"h\", stack: Hedge(config: (delay: Quantile(), max_hedges: 1), idempotent: true, scope: {scope}, inner: Call(downstream: \"api\")))"
        );
        let layer = Plan::from_ron(&text, "h.ron")
            .unwrap()
            .route_layer(CloneAll)
            .unwrap();
        let sleepy = |sent: Arc<AtomicUsize>| {
            tower::service_fn(move |ms: u32| {
                sent.fetch_add(1, Ordering::SeqCst);
                async move {
                    tokio::time::sleep(std::time::Duration::from_millis(u64::from(ms))).await;
                    Ok::<u32, BoxError>(ms)
                }
            })
        };
        let a = layer.layer(sleepy(Arc::default()));
        for _ in 0..20 {
            a.clone().oneshot(10).await.unwrap();
        }
        let sent = Arc::new(AtomicUsize::new(0));
        let b = layer.layer(sleepy(sent.clone()));
        b.oneshot(100).await.unwrap();
        sent.load(Ordering::SeqCst)
    }
    assert_eq!(sent_by_b("Shared").await, 2);
    assert_eq!(sent_by_b("PerClient").await, 1);
}

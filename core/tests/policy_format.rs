//! The policy format (feature `policy`): a stack as scenario files write it parses to the core's
//! configs, round-trips through RON and JSON, and refuses unknown fields by name.
#![cfg(feature = "policy")]

use reliable_core::Duration;
use reliable_core::breaker::BreakerConfig;
use reliable_core::policy::{Layer, Policy, Scope};
use ron::extensions::Extensions;

/// A reader whose `timeout_dist` is a list of durations (the simulator reads its distributions).
type P = Policy<Vec<Duration>>;

const TEXT: &str = r#"(name: "layered", stack: Fallback([
    Breaker(config: (consecutive_failures: 2, open: (duration: "20s")),
            scope: Shared,
            inner: Retry(policy: (max_attempts: 2, backoff: (shape: Constant(delay: "0s"))),
                         budget: Ratio(ratio: 0.1, min_per_sec: 0),
                         inner: Call(downstream: "primary", timeout: "250ms"))),
    Throttle(inner: Call(downstream: "backup", timeout_dist: ["100ms", "200ms"])),
]))"#;

fn options() -> ron::Options {
    ron::Options::default()
        .with_default_extension(Extensions::IMPLICIT_SOME | Extensions::UNWRAP_VARIANT_NEWTYPES)
}

#[test]
fn a_stack_parses_to_the_core_configs_and_round_trips() {
    let p: P = options().from_str(TEXT).unwrap();
    assert_eq!(p.name, "layered");
    let Layer::Fallback(branches) = &p.stack else {
        panic!("{:?}", p.stack)
    };
    let Layer::Breaker {
        config,
        scope,
        inner,
    } = &branches[0]
    else {
        panic!("{:?}", branches[0])
    };
    assert_eq!(*scope, Scope::Shared);
    assert_eq!(config.consecutive_failures, Some(2));
    assert_eq!(config.open.duration, Duration::from_secs(20));
    assert_eq!(config.window, BreakerConfig::default().window);
    let Layer::Retry { policy, inner, .. } = &**inner else {
        panic!("{inner:?}")
    };
    assert_eq!(policy.max_attempts, Some(2));
    assert_eq!(
        **inner,
        Layer::Call {
            downstream: "primary".into(),
            timeout: Some(Duration::from_millis(250)),
            timeout_dist: None,
        }
    );
    assert_eq!(branches[1].kind_name(), "Throttle");

    let ron_text = options()
        .to_string_pretty(&p, ron::ser::PrettyConfig::default())
        .unwrap();
    assert_eq!(options().from_str::<P>(&ron_text).unwrap(), p);
    let json = serde_json::to_string(&p).unwrap();
    assert_eq!(serde_json::from_str::<P>(&json).unwrap(), p);
}

#[test]
fn unknown_fields_and_layers_are_refused_by_name() {
    let e = options()
        .from_str::<P>(r#"(name: "x", stack: Call(downstream: "a", timout: "1s"))"#)
        .unwrap_err()
        .to_string();
    assert!(e.contains("timout") && e.contains("timeout"), "{e}");
    let e = options()
        .from_str::<P>(r#"(name: "x", stack: Bulkhead(inner: Call(downstream: "a")))"#)
        .unwrap_err()
        .to_string();
    assert!(e.contains("Bulkhead") && e.contains("Retry"), "{e}");
}

#[test]
fn a_rate_limit_parses_to_the_core_config_and_round_trips() {
    use reliable_core::limit::{RateConfig, RatePolicy};
    let p: P = options()
        .from_str(
            r#"(name: "rated", stack: RateLimit(config: (rate: 100, period: "1s", burst: 10),
                  scope: Shared, inner: Call(downstream: "api")))"#,
        )
        .unwrap();
    let Layer::RateLimit {
        config,
        scope,
        inner,
    } = &p.stack
    else {
        panic!("{:?}", p.stack)
    };
    assert_eq!(
        *config,
        RateConfig {
            rate: 100,
            period: Duration::from_secs(1),
            burst: 10
        }
    );
    assert_eq!(*scope, Scope::Shared);
    assert_eq!(inner.kind_name(), "Call");
    assert_eq!(p.stack.kind_name(), "RateLimit");
    let ron_text = options().to_string(&p).unwrap();
    assert_eq!(options().from_str::<P>(&ron_text).unwrap(), p);
    let json = serde_json::to_string(&p).unwrap();
    assert_eq!(serde_json::from_str::<P>(&json).unwrap(), p);

    // The scope defaults to per client; a missing field or an unknown one is refused by name,
    // and a config the core refuses is refused by its validation, naming the field.
    let per_client: P = options()
        .from_str(r#"(name: "r", stack: RateLimit(config: (rate: 1, period: "1s", burst: 1), inner: Call(downstream: "api")))"#)
        .unwrap();
    assert!(matches!(
        per_client.stack,
        Layer::RateLimit {
            scope: Scope::PerClient,
            ..
        }
    ));
    let e = options()
        .from_str::<P>(r#"(name: "r", stack: RateLimit(config: (rate: 1, period: "1s"), inner: Call(downstream: "api")))"#)
        .unwrap_err()
        .to_string();
    assert!(e.contains("burst"), "{e}");
    let e = options()
        .from_str::<P>(r#"(name: "r", stack: RateLimit(config: (rate: 1, period: "1s", burst: 1, bust: 2), inner: Call(downstream: "api")))"#)
        .unwrap_err()
        .to_string();
    assert!(e.contains("bust"), "{e}");
    let zero = RateConfig { rate: 0, ..*config };
    assert_eq!(RatePolicy::new(zero).unwrap_err().field, "rate");
}

/// A `Fleet` scope names a store and how decisions use it; it round-trips through RON and JSON,
/// keeps `Scope` a `Copy` value, and is refused where a fleet cannot share the state, with the
/// field's path.
#[test]
fn a_fleet_scope_names_its_store_and_is_refused_where_no_fleet_can_share() {
    use reliable_core::policy::{
        FLEET_BUDGET, FLEET_BULKHEAD, FLEET_LAYERS, FLEET_NO_STORE, FleetMode, FleetScope,
        OnStoreFailure, STORE_NAME_RULE, StoreName,
    };
    let text = r#"(name: "fleet", stack: Breaker(
        config: (consecutive_failures: 2),
        scope: Fleet(store: "orders", mode: Cached(refresh: "50ms"), wait: "5ms", on_store_failure: Refuse),
        inner: Call(downstream: "api")))"#;
    let p: P = options().from_str(text).unwrap();
    let Layer::Breaker { scope, .. } = &p.stack else {
        panic!("{:?}", p.stack)
    };
    let want = FleetScope {
        store: StoreName::new("orders").unwrap(),
        mode: FleetMode::Cached {
            refresh: Duration::from_millis(50),
        },
        wait: Duration::from_millis(5),
        on_store_failure: OnStoreFailure::Refuse,
    };
    assert_eq!(*scope, Scope::Fleet(want));
    assert_eq!(scope.name(), "Fleet");
    assert_eq!(p.stack.check_nesting("stack"), Ok(()));
    // Defaults: exact, 5 ms, decide locally.
    let p: P = options()
        .from_str(r#"(name: "f", stack: Breaker(config: (), scope: Fleet(store: "orders"), inner: Call(downstream: "api")))"#)
        .unwrap();
    let Layer::Breaker { scope, .. } = &p.stack else {
        panic!()
    };
    assert_eq!(
        scope.fleet(),
        Some(FleetScope::new(StoreName::new("orders").unwrap()))
    );
    for written in [
        options().to_string(&p).unwrap(),
        serde_json::to_string(&p).unwrap(),
    ] {
        let back: P = options()
            .from_str(&written)
            .or_else(|_| serde_json::from_str(&written))
            .unwrap();
        assert_eq!(back, p, "{written}");
    }
    // A face without a store finds the field to refuse.
    assert_eq!(p.stack.fleet("stack").as_deref(), Some("stack.scope"));
    let e = reliable_core::engine::Stack::from_layer(&p.stack).unwrap_err();
    assert_eq!(
        (e.path.as_str(), e.message.as_str()),
        ("stack.scope", FLEET_NO_STORE)
    );

    // A URL (with its credential) is not a store's name, and the refusal does not repeat it.
    let url = r#"(name: "f", stack: Breaker(config: (), scope: Fleet(store: "redis://u:hunter2@h:6379"), inner: Call(downstream: "api")))"#;
    let e = options().from_str::<P>(url).unwrap_err().to_string();
    assert!(e.contains(STORE_NAME_RULE) && !e.contains("hunter2"), "{e}");
    for bad in ["", "a b", &"x".repeat(33), "orders/1"] {
        assert_eq!(StoreName::new(bad), None, "{bad:?}");
    }
    assert_eq!(StoreName::new(&"x".repeat(32)).unwrap().as_str().len(), 32);

    // Where it is refused, and why, at the field.
    let refused = |stack: &str| {
        let p: P = options()
            .from_str(&format!(r#"(name: "f", stack: {stack})"#))
            .unwrap();
        p.stack.check_nesting("stack").unwrap_err()
    };
    let e = refused(r#"Throttle(scope: Fleet(store: "s"), inner: Call(downstream: "api"))"#);
    assert_eq!(
        (e.path.as_str(), e.message.as_str()),
        ("stack.scope", FLEET_LAYERS)
    );
    let e = refused(
        r#"Retry(policy: (max_attempts: 2, backoff: (shape: Constant(delay: "0s"))), budget: Unlimited, budget_scope: Fleet(store: "s"), inner: Call(downstream: "api"))"#,
    );
    assert_eq!(
        (e.path.as_str(), e.message.as_str()),
        ("stack.budget_scope", FLEET_BUDGET)
    );
    let e = refused(
        r#"Limit(config: (rule: Aimd(backoff: 0.9, increase: 1), initial: 10, min: 1, max: 100), scope: Fleet(store: "s"), inner: Call(downstream: "api"))"#,
    );
    assert_eq!(
        (e.path.as_str(), e.message.as_str()),
        ("stack.scope", FLEET_BULKHEAD)
    );
    let e = refused(
        r#"Breaker(config: (), inner: Breaker(config: (), scope: Fleet(store: "s", wait: "0s"), inner: Call(downstream: "api")))"#,
    );
    assert_eq!(e.path, "stack.inner.scope.wait");
    let e = refused(
        r#"Breaker(config: (), scope: Fleet(store: "s", wait: "2s"), inner: Call(downstream: "api"))"#,
    );
    assert_eq!(e.path, "stack.scope.wait");
    let e = refused(
        r#"Breaker(config: (), scope: Fleet(store: "s", mode: Cached(refresh: "0s")), inner: Call(downstream: "api"))"#,
    );
    assert_eq!(e.path, "stack.scope.mode.refresh");
    // A breaker a fleet shares: what it cannot hold is refused at the config's field (the
    // simulator and `reliable::fleet` hold a config to the same rule).
    for (config, path) in [
        (r#"slow_calls: (threshold: "1s", rate: 0.5)"#, "slow_calls"),
        (r#"slow_start: (ramp: "10s")"#, "slow_start"),
        ("shadow: true", "shadow"),
        ("initial_state: disabled", "initial_state"),
        (r#"open: (duration: "5s", jitter: 0.2)"#, "open.jitter"),
        (
            r#"open: (duration: "5s", strictly_after: true)"#,
            "open.strictly_after",
        ),
        (r#"window: Time(span: "10s", buckets: 10)"#, "window"),
        ("window: Count(calls: 65)", "window.calls"),
        ("half_open: (max_in_flight: 17)", "half_open.max_in_flight"),
        (
            "half_open: (max_in_flight: None)",
            "half_open.max_in_flight",
        ),
        ("half_open: (rule: Rate(calls: 4))", "half_open.rule"),
        (r#"half_open: (max_wait: "10s")"#, "half_open.max_wait"),
        (
            r#"half_open: (probe_timeout: "18446744073709551615ns")"#,
            "half_open.probe_timeout",
        ),
    ] {
        let p: Result<P, _> = options().from_str(&format!(
            r#"(name: "f", stack: Breaker(config: (failure_rate: 0.5, {config}), scope: Fleet(store: "s"), inner: Call(downstream: "api")))"#
        ));
        let p = p.unwrap_or_else(|e| panic!("{config}: {e}"));
        let e = p.stack.check_nesting("stack").unwrap_err();
        assert_eq!(e.path, format!("stack.config.{path}"), "{config}");
        let Layer::Breaker { config, .. } = &p.stack else {
            unreachable!()
        };
        assert_eq!(config.fleet_refusal().unwrap().why, e.message, "{config:?}");
    }
    // A ratio budget a fleet cannot share: at its field, with the core's reason.
    let p: P = options()
        .from_str(
            r#"(name: "f", stack: Retry(policy: (max_attempts: 2, backoff: (shape: Constant(delay: "0s"))), budget: Ratio(ratio: 0.1, min_per_sec: 0, slots: 65), budget_scope: Fleet(store: "s"), inner: Call(downstream: "api")))"#,
        )
        .unwrap();
    let e = p.stack.check_nesting("stack").unwrap_err();
    assert_eq!(e.path, "stack.budget.slots");
    assert!(e.message.contains("at most 64 slots"), "{}", e.message);
    // The layers a fleet can share take it.
    for ok in [
        r#"Breaker(config: (failure_rate: 0.5, window: Count(calls: 64), half_open: (max_in_flight: 16)), scope: Fleet(store: "s"), inner: Call(downstream: "api"))"#,
        r#"Breaker(config: (consecutive_failures: 5, window: Time(span: "10s", buckets: 10)), scope: Fleet(store: "s"), inner: Call(downstream: "api"))"#,
        r#"Retry(policy: (max_attempts: 2, backoff: (shape: Constant(delay: "0s"))), budget: Ratio(ratio: 0.1, min_per_sec: 0), budget_scope: Fleet(store: "s"), inner: Call(downstream: "api"))"#,
        r#"Limit(config: (rule: Fixed, initial: 10, min: 1, max: 10), scope: Fleet(store: "s"), inner: Call(downstream: "api"))"#,
        r#"RateLimit(config: (rate: 100, period: "1s", burst: 10), scope: Fleet(store: "s"), inner: Call(downstream: "api"))"#,
    ] {
        let p: P = options()
            .from_str(&format!(r#"(name: "f", stack: {ok})"#))
            .unwrap();
        assert_eq!(p.stack.check_nesting("stack"), Ok(()), "{ok}");
    }
}

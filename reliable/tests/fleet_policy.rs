//! A policy file's `Fleet` scopes, loaded with the stores they name (`reliable::policy::Stores`):
//! instances built from one file share one breaker, as the simulator's clients share it through
//! the scenario's `stores`. On the in-memory store, in real time (refreshes are tokio tasks).

use std::sync::Arc;
use std::time::Duration;

use reliable::fleet::MemoryStore;
use reliable::policy::{Plan, Stores};
use reliable::{Error, Reliable};
use reliable_core::breaker::State;
use reliable_core::outcome::ErrorClass;

/// Four failures in a row open the breaker for a minute; its state is `SCOPE`'s.
const POLICY: &str = r#"(name: "payments", stack: Breaker(
    config: (consecutive_failures: 4, open: (duration: "60s", growth: 1.0, jitter: 0.0),
             half_open: (max_in_flight: 1, probe_timeout: "1s")),
    scope: SCOPE,
    inner: Call(downstream: "payments", timeout: "1s")))"#;

const FLEET: &str = r#"Fleet(store: "redis", mode: Cached(refresh: "5ms"), wait: "5ms")"#;

fn plan(scope: &str) -> Plan {
    Plan::from_ron(&POLICY.replace("SCOPE", scope), "payments.ron")
        .unwrap_or_else(|e| panic!("{e}"))
}

async fn fail(rel: &Reliable) -> Result<(), Error<ErrorClass>> {
    rel.call(|| async { Err::<(), _>(ErrorClass::Transient) })
        .await
}

/// A call that adds no result (a fatal error is ignored by the breaker) but asks the breaker,
/// and so starts a refresh of the instance's view.
async fn ignored(rel: &Reliable) -> Result<(), Error<ErrorClass>> {
    rel.call(|| async { Err::<(), _>(ErrorClass::Fatal) }).await
}

/// Two failures from each of two instances, then calls until both refuse or 50 refreshes passed:
/// whether each refused.
async fn two_failures_each(a: &Reliable, b: &Reliable) -> (bool, bool) {
    // Each instance's first view of the fleet's state (before it, its own breaker decides).
    for _ in 0..4 {
        tokio::time::sleep(Duration::from_millis(10)).await;
        let _ = (ignored(a).await, ignored(b).await);
    }
    for _ in 0..2 {
        assert!(matches!(fail(a).await, Err(Error::GaveUp { .. })));
        assert!(matches!(fail(b).await, Err(Error::GaveUp { .. })));
    }
    let mut refused = (false, false);
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(5)).await;
        refused.0 |= matches!(ignored(a).await, Err(Error::Open { .. }));
        refused.1 |= matches!(ignored(b).await, Err(Error::Open { .. }));
        if refused == (true, true) {
            break;
        }
    }
    refused
}

/// The same file: with `scope: Fleet`, two instances given one store trip one breaker with two
/// failures each; with `scope: PerClient`, neither instance has seen four in a row, and neither
/// refuses (the negative control: the sharing is the store's).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_loaded_from_one_policy_file_share_its_fleet_breaker() {
    let stores = Stores::new().add("redis", Arc::new(MemoryStore::new("t")));
    let fleet = plan(FLEET);
    let a = fleet.fleet_builder(&stores).unwrap().build().unwrap();
    let b = fleet.fleet_builder(&stores).unwrap().build().unwrap();
    assert_eq!(a.label(), "breaker(payments)");
    assert_eq!(
        two_failures_each(&a, &b).await,
        (true, true),
        "the fleet's breaker opened for both"
    );
    assert_eq!(a.state(), Some(State::Open));

    let local = plan("PerClient");
    let a = local.builder().unwrap().build().unwrap();
    let b = local.builder().unwrap().build().unwrap();
    assert_eq!(two_failures_each(&a, &b).await, (false, false));
    assert_eq!(a.state(), Some(State::Closed));
}

/// What cannot be built is refused at the field, with what was expected: no store under the
/// scope's name, a fleet scope a `Reliable` does not share through a store, a breaker config a
/// store cannot hold. Store URLs never appear: `Stores` shows names only.
#[tokio::test]
async fn what_a_fleet_builder_cannot_build_is_refused_at_its_field() {
    let stores = Stores::new().add("cache", Arc::new(MemoryStore::new("t")));
    assert_eq!(format!("{stores:?}"), r#"Stores { names: ["cache"], .. }"#);
    let e = plan(FLEET).fleet_builder(&stores).unwrap_err();
    assert_eq!(e.field.as_deref(), Some("stack.scope.store"));
    assert_eq!(
        e.message,
        r#"no store named "redis" was given: expected one of ["cache"] (Stores::add)"#
    );

    // The simulator's exact mode: a round trip per decision, which a Reliable never waits for.
    let stores = Stores::new().add("redis", Arc::new(MemoryStore::new("t")));
    let e = plan(r#"Fleet(store: "redis", mode: Exact)"#)
        .fleet_builder(&stores)
        .unwrap_err();
    assert_eq!(e.field.as_deref(), Some("stack.scope.mode"));
    assert_eq!(e.message, reliable::policy::FLEET_EXACT);

    let limit = Plan::from_ron(
        r#"(name: "bulkhead", stack: Limit(config: (rule: Fixed, initial: 8, min: 8, max: 8),
            scope: Fleet(store: "redis"), inner: Call(downstream: "api")))"#,
        "limit.ron",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let e = limit.fleet_builder(&stores).unwrap_err();
    assert_eq!(e.field.as_deref(), Some("stack.scope"));
    assert!(
        e.message
            .starts_with("scope Fleet on a Limit: a Reliable shares a breaker and a retry budget"),
        "{e}"
    );
    assert!(e.message.contains("FleetBulkhead"), "{e}");

    // What a breaker shared by a fleet cannot hold is refused at load, at its field, by the
    // core's rule (the simulator refuses the same file the same way).
    for (config, field, why) in [
        (
            r#"slow_calls: (threshold: "1s", rate: 0.5)"#,
            "stack.config.slow_calls",
            "a fleet breaker trips on failures only",
        ),
        (
            r#"open: (duration: "5s", jitter: 0.2)"#,
            "stack.config.open.jitter",
            "one breaker for the fleet",
        ),
        (
            r#"window: Time(span: "10s", buckets: 10)"#,
            "stack.config.window",
            "a fleet breaker's failure rate is over a count window",
        ),
        (
            "window: Count(calls: 65)",
            "stack.config.window.calls",
            "at most 64 calls",
        ),
    ] {
        let e = Plan::from_ron(
            &format!(
                r#"(name: "fleet", stack: Breaker(
                config: (failure_rate: 0.5, minimum_calls: 10, {config}),
                scope: Fleet(store: "redis", mode: Cached(refresh: "1s")),
                inner: Call(downstream: "api")))"#
            ),
            "fleet.ron",
        )
        .unwrap_err();
        assert_eq!(e.field.as_deref(), Some(field), "{e}");
        assert!(e.message.starts_with(why), "{e}");
    }
    // The same configs per client are a process's own breaker: they load.
    let own = Plan::from_ron(
        r#"(name: "own", stack: Breaker(
            config: (failure_rate: 0.5, minimum_calls: 10, window: Count(calls: 65),
                     open: (duration: "5s", jitter: 0.2)),
            inner: Call(downstream: "api")))"#,
        "own.ron",
    );
    assert!(own.is_ok(), "{own:?}");
}

/// A retry budget scoped `Fleet` becomes a fleet budget beside the instance's local breaker (the
/// other layers keep the instance's state).
#[tokio::test]
async fn a_fleet_retry_budget_builds_beside_a_local_breaker() {
    let stores = Stores::new().add("redis", Arc::new(MemoryStore::new("t")));
    let plan = Plan::from_ron(
        r#"(name: "budgeted", stack: Retry(
            policy: (max_attempts: 3, backoff: (shape: Constant(delay: "10ms"), cap: "10ms", jitter: None)),
            budget: Ratio(ratio: 0.1, min_per_sec: 0, ttl: "10s"),
            budget_scope: Fleet(store: "redis", mode: Cached(refresh: "100ms")),
            inner: Breaker(config: (failure_rate: 0.5, minimum_calls: 10), scope: PerClient,
                           inner: Call(downstream: "api"))))"#,
        "budget.ron",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let route = plan.route().unwrap();
    assert!(route.is_fleet());
    assert_eq!(
        route.builder().unwrap_err().field.as_deref(),
        Some("stack.budget_scope")
    );
    let rel = plan.fleet_builder(&stores).unwrap().build().unwrap();
    assert_eq!(rel.label(), "retry(breaker(api))");
}

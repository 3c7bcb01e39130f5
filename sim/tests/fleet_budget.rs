//! A fleet's retry budget (`budget_scope: Fleet(..)`): one ratio budget for every client
//! instance, in a store. 100 instances at 1 request a second each call an API that fails every
//! call for 20 s; each request may retry twice, within a budget of 10% of first tries plus a
//! reserve of 2 retries a second.
//!
//! - Per instance, the reserve is each instance's: 100 × 2 = 200 retries a second on top of the
//!   ratio, twice the offered load (too loud).
//! - For the fleet, the reserve is one: the fleet's retries stay within its ratio and one reserve.
//! - The store hangs: fail open, each instance decides on its own budget (its own reserve
//!   again); fail closed, no retry until it answers (and the fleet's ratio still holds).

use sim::metrics::PolicySummary;
use sim::run::BatchOptions;

const SCENARIO: &str = r#"Scenario(
    name: "fleet budget",
    horizon: "40s",
    bucket: "1s",
    seed: 7,
    workload: OpenLoop(rate: 100.0, clients: 100),
    downstreams: [(name: "api", model: Server(workers: 64, queue: (capacity: 100), service: Constant("5ms")))],
    faults: [Outage(downstream: "api", from: "10s", until: "30s", mode: FailFast)],
    stores: [
        (name: "redis", round_trip: Normal(mean: "1ms", std_dev: "200us")),
        (name: "hung", round_trip: Normal(mean: "1ms", std_dev: "200us"),
            faults: [Outage(from: "15s", until: "25s", mode: Hang)]),
    ],
    policies: [POLICIES],
)"#;

/// The policies: one retry layer, its budget scoped as each says.
const SCOPES: [(&str, &str); 4] = [
    ("per instance", "PerClient"),
    (
        "fleet",
        r#"Fleet(store: "redis", mode: Cached(refresh: "1s"), wait: "5ms")"#,
    ),
    (
        "fleet, store hung, fail open",
        r#"Fleet(store: "hung", mode: Cached(refresh: "1s"), wait: "5ms", on_store_failure: Local)"#,
    ),
    (
        "fleet, store hung, fail closed",
        r#"Fleet(store: "hung", mode: Cached(refresh: "1s"), wait: "5ms", on_store_failure: Refuse)"#,
    ),
];

const RETRY: &str = r#"Retry(
    policy: (max_attempts: 3, backoff: (shape: Constant(delay: "10ms"))),
    budget: Ratio(ratio: 0.1, min_per_sec: 2, ttl: "10s", slots: 10),
    budget_scope: SCOPE,
    inner: Call(downstream: "api", timeout: "1s"))"#;

fn scenario() -> String {
    let policies: Vec<String> = SCOPES
        .iter()
        .map(|(name, scope)| format!("(name: {name:?}, stack: {})", RETRY.replace("SCOPE", scope)))
        .collect();
    SCENARIO.replace("POLICIES", &policies.join(", "))
}

fn run(seed: u64) -> Vec<PolicySummary> {
    let c = sim::load(&scenario(), "fleet-budget.ron").unwrap();
    sim::run(
        &c,
        &[seed],
        BatchOptions {
            jobs: 0,
            progress: false,
        },
    )
    .unwrap()
    .results
    .into_iter()
    .map(|r| r.output.summary)
    .collect()
}

#[test]
fn one_budget_for_the_fleet_keeps_its_retries_to_one_ratio_and_one_reserve() {
    let all = run(7);
    let [own, fleet, open, closed] = &all[..] else {
        panic!("four policies")
    };
    for p in &all {
        eprintln!(
            "{}: {} first tries, {} retries; {:?}",
            p.name, p.first_tries, p.retries, p.fleet_budget
        );
    }
    // Per instance: 100 reserves of 2 a second, so about 2 retries a request in the outage
    // (both allowed), 2,000 first tries × 2.
    assert!(own.fleet_budget.is_none());
    assert!(own.retries > 3_000, "{}", own.retries);
    // For the fleet: its retries stay within its ratio over the run plus one reserve (2 a
    // second over the run and the window's span: 2 × (40 + 10)), plus the grants an instance
    // holds at once (4 each).
    let bound = 0.1 * fleet.first_tries as f64 + 2.0 * 50.0;
    let b = fleet.fleet_budget.as_ref().unwrap();
    assert!(
        (fleet.retries as f64) <= bound,
        "{} retries, bound {bound}",
        fleet.retries
    );
    assert_eq!(b.granted, fleet.retries, "every retry on a grant: {b:?}");
    assert!(b.grants_taken >= b.granted, "{b:?}");
    assert!(b.refused > 1_000, "{b:?}");
    assert!(
        fleet.retries > 100,
        "the fleet's ratio is spent: {}",
        fleet.retries
    );
    assert_eq!(b.store_failures, 0, "{b:?}");
    // The store hung in the middle of the outage: fail open, instances decide alone, on their
    // own reserves (so more retries than the fleet's); fail closed, none then.
    let (bo, bc) = (
        open.fleet_budget.as_ref().unwrap(),
        closed.fleet_budget.as_ref().unwrap(),
    );
    assert!(bo.by_local > 500 && bo.store_failures > 0, "{bo:?}");
    assert!(
        open.retries > fleet.retries + 300,
        "{} vs {}",
        open.retries,
        fleet.retries
    );
    assert!(bc.store_refusals > 500 && bc.by_local == 0, "{bc:?}");
    assert!(
        (closed.retries as f64) <= bound,
        "{} retries",
        closed.retries
    );
    assert!(
        open.retries > closed.retries + 1_000,
        "{} vs {}",
        open.retries,
        closed.retries
    );
}

#[test]
fn a_fleet_budget_runs_the_same_on_any_thread_count() {
    let c = sim::load(&scenario(), "fleet-budget.ron").unwrap();
    let at = |jobs| {
        let out = sim::run(
            &c,
            &[7, 8],
            BatchOptions {
                jobs,
                progress: false,
            },
        )
        .unwrap();
        serde_json::to_string(
            &out.results
                .iter()
                .map(|r| &r.output.summary)
                .collect::<Vec<_>>(),
        )
        .unwrap()
    };
    assert_eq!(at(1), at(2));
}

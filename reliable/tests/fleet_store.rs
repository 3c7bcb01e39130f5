//! Fleet breakers and budgets on the in-memory store and on stores that fail, in tokio's paused
//! time: the wait bound, resting, fail-open and fail-closed, cached mode's staleness bound.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use reliable::fleet::{
    BreakerOp, BreakerReply, BreakerSpec, BudgetOp, BudgetReply, BudgetSpec, BulkheadOp,
    BulkheadReply, BulkheadSpec, Decider, FleetBreaker, FleetBudget, FleetConfig, FleetReason,
    FleetStats, MemoryStore, Mode, OnStoreFailure, RateReply, RateSpec, SpecError, Store,
    StoreError, StoreErrorKind, StoreFuture,
};
use reliable_core::Duration;
use reliable_core::breaker::{
    BreakerConfig, BreakerPolicy, HalfOpenConfig, OpenConfig, Outcome, ProbeRule, State,
    WindowConfig,
};
use reliable_core::budget::RatioConfig;
use tokio::time::Instant;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Five failures in a row open it for a second; one probe at a time.
fn policy() -> BreakerPolicy {
    BreakerPolicy::new(BreakerConfig {
        consecutive_failures: Some(5),
        open: OpenConfig {
            duration: ms(1_000),
            growth: 1.0,
            max: None,
            jitter: 0.0,
            strictly_after: false,
        },
        half_open: HalfOpenConfig {
            max_in_flight: Some(1),
            probe_timeout: ms(2_000),
            ..BreakerConfig::new().half_open
        },
        ..BreakerConfig::new()
    })
    .unwrap()
}

fn spec() -> BreakerSpec {
    BreakerSpec::new(&policy()).unwrap()
}

const WAIT: std::time::Duration = std::time::Duration::from_millis(5);

fn config(mode: Mode) -> FleetConfig {
    FleetConfig {
        mode,
        wait: WAIT,
        rest: std::time::Duration::from_millis(100),
        ..FleetConfig::default()
    }
}

/// A store that never answers while `hang` is set, and fails at once while `fail` is set;
/// otherwise the memory store.
#[derive(Debug)]
struct Flaky {
    memory: MemoryStore,
    hang: AtomicBool,
    fail: AtomicBool,
}

impl Flaky {
    fn new() -> Arc<Self> {
        Arc::new(Flaky {
            memory: MemoryStore::new("t"),
            hang: AtomicBool::new(false),
            fail: AtomicBool::new(false),
        })
    }
    fn broken<T: Send + 'static>(&self) -> Option<StoreFuture<'static, T>> {
        if self.hang.load(Ordering::Relaxed) {
            return Some(Box::pin(std::future::pending()));
        }
        if self.fail.load(Ordering::Relaxed) {
            let e = StoreError {
                kind: StoreErrorKind::Unavailable,
                message: "connection refused".into(),
            };
            return Some(Box::pin(async move { Err(e) }));
        }
        None
    }
}

impl Store for Flaky {
    fn breaker<'a>(
        &'a self,
        name: &'a str,
        spec: &'a BreakerSpec,
        now_us: u64,
        op: BreakerOp,
    ) -> StoreFuture<'a, BreakerReply> {
        match self.broken() {
            Some(f) => f,
            None => self.memory.breaker(name, spec, now_us, op),
        }
    }
    fn budget<'a>(
        &'a self,
        name: &'a str,
        spec: &'a BudgetSpec,
        now_us: u64,
        op: BudgetOp,
    ) -> StoreFuture<'a, BudgetReply> {
        match self.broken() {
            Some(f) => f,
            None => self.memory.budget(name, spec, now_us, op),
        }
    }
    fn rate<'a>(
        &'a self,
        name: &'a str,
        spec: &'a RateSpec,
        now_us: u64,
    ) -> StoreFuture<'a, RateReply> {
        match self.broken() {
            Some(f) => f,
            None => self.memory.rate(name, spec, now_us),
        }
    }
    fn bulkhead<'a>(
        &'a self,
        name: &'a str,
        spec: &'a BulkheadSpec,
        now_us: u64,
        op: BulkheadOp,
    ) -> StoreFuture<'a, BulkheadReply> {
        match self.broken() {
            Some(f) => f,
            None => self.memory.bulkhead(name, spec, now_us, op),
        }
    }
    fn describe(&self) -> String {
        "flaky".into()
    }
}

async fn call(b: &FleetBreaker, outcome: Outcome) -> Result<Decider, FleetReason> {
    match b.acquire().await {
        Ok(p) => {
            let by = p.decided_by();
            b.record(p, outcome).await;
            Ok(by)
        }
        Err(e) => Err(e.reason),
    }
}

#[test]
fn a_policy_the_fleet_cannot_share_is_refused_by_field() {
    let base = policy();
    let cases: [(&str, BreakerConfig); 7] = [
        (
            "slow_calls",
            BreakerConfig {
                slow_calls: Some(reliable_core::breaker::SlowCallRule {
                    threshold: ms(100),
                    rate: 0.5,
                }),
                ..*base.config()
            },
        ),
        (
            "open.jitter",
            BreakerConfig {
                open: OpenConfig {
                    jitter: 0.1,
                    ..base.config().open
                },
                ..*base.config()
            },
        ),
        (
            "half_open.max_in_flight",
            BreakerConfig {
                half_open: HalfOpenConfig {
                    max_in_flight: None,
                    ..base.config().half_open
                },
                ..*base.config()
            },
        ),
        (
            "half_open.rule",
            BreakerConfig {
                failure_rate: Some(0.5),
                half_open: HalfOpenConfig {
                    rule: ProbeRule::Rate { calls: 3 },
                    max_in_flight: Some(3),
                    ..base.config().half_open
                },
                ..*base.config()
            },
        ),
        (
            "half_open.probe_timeout",
            BreakerConfig {
                half_open: HalfOpenConfig {
                    probe_timeout: Duration::MAX,
                    ..base.config().half_open
                },
                ..*base.config()
            },
        ),
        (
            "window",
            BreakerConfig {
                failure_rate: Some(0.5),
                window: WindowConfig::Time {
                    span: ms(10_000),
                    buckets: 10,
                },
                ..*base.config()
            },
        ),
        (
            "shadow",
            BreakerConfig {
                shadow: true,
                ..*base.config()
            },
        ),
    ];
    for (field, config) in cases {
        let policy = BreakerPolicy::new(config).unwrap();
        match BreakerSpec::new(&policy) {
            Err(SpecError::Unsupported { field: f, .. }) => assert_eq!(f, field),
            other => panic!("{field}: {other:?}"),
        }
    }
    assert!(BreakerSpec::new(&policy()).is_ok());
    let budget = BudgetSpec::new(RatioConfig {
        ttl: Duration::from_nanos(1_000_000_010),
        ..RatioConfig::percent(0.1)
    });
    assert!(matches!(
        budget,
        Err(SpecError::Unsupported { field: "ttl", .. })
    ));
    let store = Arc::new(MemoryStore::new("t"));
    let bad_name = FleetBreaker::new(store, "no spaces", spec(), FleetConfig::default());
    assert!(matches!(
        bad_name,
        Err(SpecError::Unsupported { field: "name", .. })
    ));
}

/// A store that hangs: the first decision waits exactly the bound, then the store rests and
/// decisions are local at once; after the rest, one call asks it again (and waits the bound);
/// when it answers, the store decides again.
#[tokio::test(start_paused = true)]
async fn a_hanging_store_costs_at_most_the_bound_then_nothing() {
    let store = Flaky::new();
    let b = FleetBreaker::new(store.clone(), "hang", spec(), config(Mode::Exact)).unwrap();
    assert_eq!(call(&b, Outcome::Success).await, Ok(Decider::Store));
    store.hang.store(true, Ordering::Relaxed);
    let t = Instant::now();
    let p = b.acquire().await.unwrap();
    assert_eq!(t.elapsed(), WAIT, "the first decision waits the bound");
    assert_eq!(p.decided_by(), Decider::Local);
    let t = Instant::now();
    b.record(p, Outcome::Success).await;
    assert_eq!(t.elapsed(), std::time::Duration::ZERO, "resting: no wait");
    for _ in 0..10 {
        let t = Instant::now();
        assert_eq!(call(&b, Outcome::Success).await, Ok(Decider::Local));
        assert_eq!(t.elapsed(), std::time::Duration::ZERO);
    }
    tokio::time::advance(std::time::Duration::from_millis(100)).await;
    let t = Instant::now();
    assert_eq!(call(&b, Outcome::Success).await, Ok(Decider::Local));
    assert_eq!(t.elapsed(), WAIT, "after the rest, one call asks again");
    store.hang.store(false, Ordering::Relaxed);
    tokio::time::advance(std::time::Duration::from_millis(100)).await;
    assert_eq!(call(&b, Outcome::Success).await, Ok(Decider::Store));
    let s = b.stats();
    assert_eq!(FleetStats::get(&s.timeouts), 2);
    assert_eq!(FleetStats::get(&s.fallbacks), 12);
    assert_eq!(FleetStats::get(&s.longest_wait_ns), WAIT.as_nanos() as u64);
}

/// Fail-closed refuses while the store fails; fail-open decides on the local breaker, which
/// trips on the failures it sees itself.
#[tokio::test(start_paused = true)]
async fn fail_closed_and_fail_open() {
    let store = Flaky::new();
    let closed = FleetBreaker::new(
        store.clone(),
        "closed",
        spec(),
        FleetConfig {
            on_store_failure: OnStoreFailure::Refuse,
            ..config(Mode::Exact)
        },
    )
    .unwrap();
    let open = FleetBreaker::new(store.clone(), "open", spec(), config(Mode::Exact)).unwrap();
    store.fail.store(true, Ordering::Relaxed);
    assert_eq!(
        call(&closed, Outcome::Success).await,
        Err(FleetReason::StoreUnavailable)
    );
    for _ in 0..5 {
        assert_eq!(call(&open, Outcome::Failure).await, Ok(Decider::Local));
    }
    assert_eq!(open.local_state(), State::Open);
    assert!(matches!(
        call(&open, Outcome::Failure).await,
        Err(FleetReason::Breaker(_))
    ));
    let budget = FleetBudget::new(
        store.clone(),
        "b",
        BudgetSpec::new(RatioConfig::percent(0.5)).unwrap(),
        FleetConfig {
            on_store_failure: OnStoreFailure::Refuse,
            ..config(Mode::Exact)
        },
        1,
        None,
    )
    .unwrap();
    budget.first_try();
    assert!(budget.try_retry().await.unwrap_err().store_unavailable);
}

/// Cached mode: a process admits on its view; another trips the fleet's breaker; the first
/// keeps admitting for at most `refresh + wait`, then refuses as the fleet does. Its own results
/// reach the store with its next refresh.
#[tokio::test(start_paused = true)]
async fn cached_mode_is_stale_for_at_most_refresh_plus_wait() {
    let store = Arc::new(MemoryStore::new("t"));
    let refresh = std::time::Duration::from_millis(20);
    let cached =
        FleetBreaker::new(store.clone(), "c", spec(), config(Mode::Cached { refresh })).unwrap();
    let exact = FleetBreaker::new(store.clone(), "c", spec(), config(Mode::Exact)).unwrap();
    // The first call has no view: the store decides; then the view does.
    assert_eq!(call(&cached, Outcome::Success).await, Ok(Decider::Store));
    for _ in 0..10 {
        assert_eq!(call(&cached, Outcome::Success).await, Ok(Decider::Cache));
    }
    for _ in 0..5 {
        assert_eq!(call(&exact, Outcome::Failure).await, Ok(Decider::Store));
    }
    let tripped = Instant::now();
    let mut admitted_after = std::time::Duration::ZERO;
    loop {
        match call(&cached, Outcome::Success).await {
            Ok(_) => admitted_after = tripped.elapsed(),
            Err(FleetReason::Breaker(_)) => break,
            Err(e) => panic!("{e:?}"),
        }
        tokio::time::advance(std::time::Duration::from_millis(1)).await;
        assert!(tripped.elapsed() < std::time::Duration::from_secs(1));
    }
    assert!(
        admitted_after <= refresh + WAIT,
        "admitted {admitted_after:?} after the trip"
    );
    // Its own results reach the store: five failures admitted on a fresh view trip it again.
    tokio::time::advance(std::time::Duration::from_millis(2_000)).await;
    let probe = exact.acquire().await.unwrap();
    assert!(probe.is_probe());
    exact.record(probe, Outcome::Success).await; // closes it
    // Refresh the cached view (closed), then fail five times on it.
    while call(&cached, Outcome::Ignored).await != Ok(Decider::Cache) {
        tokio::time::advance(refresh).await;
    }
    for _ in 0..5 {
        assert_eq!(call(&cached, Outcome::Failure).await, Ok(Decider::Cache));
    }
    tokio::time::advance(refresh).await;
    let _ = call(&cached, Outcome::Ignored).await; // starts the refresh that sends them
    tokio::time::advance(std::time::Duration::from_millis(1)).await;
    let view = store
        .breaker("c", &spec(), 0, BreakerOp::View)
        .await
        .unwrap();
    assert_eq!(view.state, State::Open, "{view:?}");
}

/// Cached budget: grants are taken from the fleet's window before they are spent, so it never
/// grants more than its ratio.
#[tokio::test(start_paused = true)]
async fn cached_budget_stays_within_its_ratio() {
    let store = Arc::new(MemoryStore::new("t"));
    let refresh = std::time::Duration::from_millis(10);
    let spec = BudgetSpec::new(RatioConfig::percent(0.2)).unwrap();
    let budgets: Vec<FleetBudget> = (0..3)
        .map(|_| {
            FleetBudget::new(
                store.clone(),
                "shared",
                spec.clone(),
                config(Mode::Cached { refresh }),
                3,
                None,
            )
            .unwrap()
        })
        .collect();
    let (mut first, mut granted) = (0u64, 0u64);
    for _ in 0..500 {
        for b in &budgets {
            b.first_try();
            first += 1;
            if b.try_retry().await.is_ok() {
                granted += 1;
            }
        }
        tokio::time::advance(std::time::Duration::from_millis(1)).await;
    }
    assert!(granted * 5 <= first, "{granted} of {first}");
    assert!(
        granted * 10 >= first,
        "the budget was barely used: {granted} of {first}"
    );
}

/// A process that never retries still deposits its first tries in the fleet's window (in the
/// background, every 64 or every 100 ms), so another process's retries draw on them.
#[tokio::test(start_paused = true)]
async fn a_healthy_process_deposits_without_retrying() {
    let store = Arc::new(MemoryStore::new("t"));
    let spec = BudgetSpec::new(RatioConfig::percent(0.1)).unwrap();
    let make = || {
        FleetBudget::new(
            store.clone(),
            "shared",
            spec.clone(),
            config(Mode::Exact),
            1,
            None,
        )
        .unwrap()
    };
    let (healthy, failing) = (make(), make());
    for _ in 0..100 {
        healthy.first_try();
        tokio::task::yield_now().await;
    }
    tokio::time::advance(std::time::Duration::from_millis(100)).await;
    healthy.first_try();
    tokio::task::yield_now().await;
    // 101 first tries in the window: 10 retries for anyone.
    let granted = {
        let mut n = 0;
        for _ in 0..20 {
            if failing.try_retry().await.is_ok() {
                n += 1;
            }
        }
        n
    };
    assert_eq!(granted, 10);
}

/// An operation runs when its future is polled, as a round trip to Redis does: one made and
/// dropped unpolled (what a caller resting after a store failure does with it) changes nothing.
/// (Run at once, a resting process's first tries reached the memory store and were put back
/// to send again: counted twice.)
#[tokio::test(start_paused = true)]
async fn a_memory_store_operation_dropped_unpolled_changes_nothing() {
    let store = MemoryStore::new("lazy");
    let spec = BudgetSpec::new(RatioConfig {
        ratio: 0.5,
        min_per_sec: 0,
        ttl: Duration::from_secs(10),
        slots: 10,
    })
    .unwrap();
    let deposit = BudgetOp {
        first_tries: 10,
        retries: 0,
    };
    drop(store.budget("b", &spec, 0, deposit));
    let read = BudgetOp {
        first_tries: 0,
        retries: 0,
    };
    let r = store.budget("b", &spec, 0, read).await.unwrap();
    assert_eq!(r.balance_micros, 0);
    store.budget("b", &spec, 0, deposit).await.unwrap();
    let r = store.budget("b", &spec, 0, read).await.unwrap();
    assert_eq!(r.balance_micros, 5_000_000);
}

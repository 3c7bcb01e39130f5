//! A fleet breaker and a fleet budget inside `Reliable`: the call engine asks them as it asks a
//! local breaker and budget, in async calls, blocking calls and the tower layer. On the
//! in-memory store, in real time (the fleet's refreshes are tokio tasks).

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration as StdDuration;

use reliable::fleet::{
    BreakerSpec, BudgetSpec, FleetBreaker, FleetBudget, FleetConfig, MemoryStore, Mode, Store,
};
use reliable::{Error, Reliable, ShedReason};
use reliable_core::Duration;
use reliable_core::breaker::{BreakerConfig, BreakerPolicy, HalfOpenConfig, OpenConfig, State};
use reliable_core::budget::RatioConfig;
use reliable_core::outcome::ErrorClass;

const REFRESH: StdDuration = StdDuration::from_millis(5);

fn cached() -> FleetConfig {
    FleetConfig {
        mode: Mode::Cached { refresh: REFRESH },
        ..FleetConfig::default()
    }
}

/// Four failures in a row open it for `open`; then one probe, leased for a second.
fn spec(open: StdDuration) -> BreakerSpec {
    let policy = BreakerPolicy::new(BreakerConfig {
        consecutive_failures: Some(4),
        open: OpenConfig {
            duration: open.into(),
            growth: 1.0,
            max: None,
            jitter: 0.0,
            strictly_after: false,
        },
        half_open: HalfOpenConfig {
            max_in_flight: Some(1),
            probe_timeout: Duration::from_secs(1),
            ..BreakerConfig::new().half_open
        },
        ..BreakerConfig::new()
    })
    .unwrap();
    BreakerSpec::new(&policy).unwrap()
}

fn breaker(store: &Arc<MemoryStore>, open: StdDuration) -> FleetBreaker {
    let store: Arc<dyn Store> = store.clone();
    FleetBreaker::new(store, "payments", spec(open), cached()).unwrap()
}

fn instance(name: &str, fleet: FleetBreaker) -> Reliable {
    Reliable::builder(name)
        .fleet_breaker(fleet)
        .attempts(1)
        .build()
        .unwrap()
}

async fn fail(rel: &Reliable) -> Result<(), Error<ErrorClass>> {
    rel.call(|| async { Err::<(), _>(ErrorClass::Transient) })
        .await
}

/// A call whose end says nothing of the downstream (a fatal error: ignored by the breaker): it
/// asks the breaker without adding a result.
async fn ignored(rel: &Reliable) -> Result<(), Error<ErrorClass>> {
    rel.call(|| async { Err::<(), _>(ErrorClass::Fatal) }).await
}

async fn succeed(rel: &Reliable) -> Result<(), Error<ErrorClass>> {
    rel.call(|| async { Ok::<(), ErrorClass>(()) }).await
}

/// Lets every process's view catch up (a refresh is started by a decision once the view is
/// `REFRESH` old), and its results reach the store: the last round's calls are ignored ones,
/// whose refreshes send the successes before, so that no success of a settling call lands
/// between the failures a test makes next (cached results reach the store in batches).
async fn settle(rels: &[&Reliable]) {
    for round in 0..4 {
        tokio::time::sleep(REFRESH * 2).await;
        for r in rels {
            // A call refused or admitted: either way it starts a refresh.
            let _ = if round < 3 {
                succeed(r).await
            } else {
                ignored(r).await
            };
        }
    }
    tokio::time::sleep(REFRESH * 2).await;
}

/// Two instances, two failures each: neither instance's own breaker has seen four in a row, the
/// fleet's has, and both refuse calls as open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_trip_one_fleet_breaker() {
    let store = Arc::new(MemoryStore::new("t"));
    let (fa, fb) = (
        breaker(&store, StdDuration::from_secs(60)),
        breaker(&store, StdDuration::from_secs(60)),
    );
    let (a, b) = (instance("a", fa.clone()), instance("b", fb.clone()));
    assert_eq!(a.label(), "breaker(a)");
    settle(&[&a, &b]).await;
    assert_eq!(a.state(), Some(State::Closed));
    for _ in 0..2 {
        assert!(matches!(fail(&a).await, Err(Error::GaveUp { .. })));
        assert!(matches!(fail(&b).await, Err(Error::GaveUp { .. })));
    }
    // Each process alone: two failures in a row, closed.
    assert_eq!(fa.local_state(), State::Closed);
    assert_eq!(fb.local_state(), State::Closed);
    // The results reach the store with the next refreshes; then both see it open.
    let mut refused = (false, false);
    for _ in 0..50 {
        tokio::time::sleep(REFRESH).await;
        refused.0 |= matches!(ignored(&a).await, Err(Error::Open { .. }));
        refused.1 |= matches!(ignored(&b).await, Err(Error::Open { .. }));
        if refused == (true, true) {
            break;
        }
    }
    assert_eq!(
        refused,
        (true, true),
        "both instances refuse: the fleet tripped"
    );
    assert_eq!(a.state(), Some(State::Open));
    assert_eq!(b.snapshot().state, Some(State::Open));
    assert_eq!(fa.local_state(), State::Closed);
}

/// Half-open: many calls from two instances at once, each slow; until the probe's success is
/// in, the fleet lets at most one call out at a time, and that success closes it for both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_open_lets_one_probe_out_fleet_wide() {
    let store = Arc::new(MemoryStore::new("t"));
    let open = StdDuration::from_millis(100);
    let (fa, fb) = (breaker(&store, open), breaker(&store, open));
    let (a, b) = (instance("a", fa.clone()), instance("b", fb.clone()));
    settle(&[&a, &b]).await;
    for _ in 0..4 {
        let _ = fail(&a).await;
    }
    settle(&[&a, &b]).await;
    assert_eq!(a.state(), Some(State::Open));
    tokio::time::sleep(open).await;
    let in_flight = Arc::new(AtomicU32::new(0));
    let most = Arc::new(AtomicU32::new(0));
    let probed = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut tasks = Vec::new();
    for k in 0..8 {
        let rel = if k % 2 == 0 { a.clone() } else { b.clone() };
        let (in_flight, most, probed) = (in_flight.clone(), most.clone(), probed.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..200 {
                let r = rel
                    .call(|| async {
                        // Counted only while no call has succeeded: the half-open stretch.
                        let counted = !probed.load(Ordering::SeqCst);
                        if counted {
                            let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                            most.fetch_max(now, Ordering::SeqCst);
                        }
                        tokio::time::sleep(StdDuration::from_millis(30)).await;
                        if counted {
                            in_flight.fetch_sub(1, Ordering::SeqCst);
                        }
                        probed.store(true, Ordering::SeqCst);
                        Ok::<(), ErrorClass>(())
                    })
                    .await;
                if r.is_ok() {
                    return;
                }
                if let Err(Error::Rejected { why, .. }) = &r {
                    assert_eq!(*why, ShedReason::HalfOpenFull);
                }
                tokio::time::sleep(REFRESH / 2).await;
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let fallbacks = reliable::fleet::FleetStats::get(&fa.stats().fallbacks)
        + reliable::fleet::FleetStats::get(&fb.stats().fallbacks);
    println!(
        "half-open: at most {} call(s) in flight fleet-wide before the probe's success (fallbacks {fallbacks})",
        most.load(Ordering::SeqCst)
    );
    assert_eq!(
        most.load(Ordering::SeqCst),
        1,
        "one probe at a time, fleet-wide"
    );
    settle(&[&a, &b]).await;
    assert_eq!(
        a.state(),
        Some(State::Closed),
        "the probe's success closed it"
    );
    assert_eq!(b.state(), Some(State::Closed));
}

/// A fleet budget of 10% across two instances: every call fails once and would retry; retries
/// fleet-wide stay within 10% of first tries, and nearly all of those 10% are granted, though
/// the calls come in bursts with pauses longer than the refresh between them (a grant lasts a
/// slot of the window: 58 or 59 of the 60 in 8 runs; when grants lapsed after `refresh`, 1 to 14).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fleet_budget_bounds_retries_of_two_instances() {
    let store = Arc::new(MemoryStore::new("t"));
    let spec = BudgetSpec::new(RatioConfig::percent(0.1)).unwrap();
    let budget = || {
        let store: Arc<dyn Store> = store.clone();
        FleetBudget::new(store, "retries", spec.clone(), cached(), 2, None).unwrap()
    };
    let build = |name: &str| {
        Reliable::builder(name)
            .no_breaker()
            .attempts(2)
            .no_backoff()
            .fleet_budget(budget())
            .build()
            .unwrap()
    };
    let (a, b) = (build("a"), build("b"));
    let tries = Arc::new(AtomicU32::new(0));
    let calls = 600;
    for k in 0..calls {
        let rel = if k % 2 == 0 { &a } else { &b };
        let first = Arc::new(AtomicU32::new(0));
        let _ = rel
            .call(|| {
                let (first, tries) = (first.clone(), tries.clone());
                async move {
                    tries.fetch_add(1, Ordering::SeqCst);
                    if first.fetch_add(1, Ordering::SeqCst) == 0 {
                        Err(ErrorClass::Transient)
                    } else {
                        Ok(())
                    }
                }
            })
            .await;
        if k % 20 == 0 {
            tokio::time::sleep(REFRESH).await;
        }
    }
    let retries = a.snapshot().retries + b.snapshot().retries;
    let sent = u64::from(tries.load(Ordering::SeqCst));
    assert_eq!(sent, calls + retries);
    println!(
        "fleet budget 10%: {retries} retries granted for {calls} first tries (bound {})",
        calls / 10
    );
    assert!(retries <= calls / 10, "{retries} retries for {calls} calls");
    assert!(
        retries >= calls / 10 * 3 / 4,
        "{retries} retries granted of the {} the ratio allows",
        calls / 10
    );
}

/// A blocking call made on a thread outside any runtime: the fleet breaker refreshes on the
/// runtime it was made in, and two instances trip together there too.
#[test]
fn blocking_calls_share_the_fleet_breaker() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_time()
        .build()
        .unwrap();
    let store = Arc::new(MemoryStore::new("t"));
    let (fa, fb) = rt.block_on(async {
        (
            breaker(&store, StdDuration::from_secs(60)),
            breaker(&store, StdDuration::from_secs(60)),
        )
    });
    let (a, b) = (instance("a", fa), instance("b", fb));
    let fail = |r: &Reliable| r.call_blocking(|| Err::<(), _>(ErrorClass::Transient));
    let ok = |r: &Reliable| r.call_blocking(|| Ok::<(), ErrorClass>(()));
    let ignored = |r: &Reliable| r.call_blocking(|| Err::<(), _>(ErrorClass::Fatal));
    for _ in 0..3 {
        std::thread::sleep(REFRESH * 2);
        let _ = (ok(&a), ok(&b));
    }
    // As `settle`: the successes reach the store before the failures are made.
    std::thread::sleep(REFRESH * 2);
    let _ = (ignored(&a), ignored(&b));
    std::thread::sleep(REFRESH * 2);
    for _ in 0..2 {
        let _ = (fail(&a), fail(&b));
    }
    let mut refused = false;
    for _ in 0..50 {
        std::thread::sleep(REFRESH);
        let _ = a.call_blocking(|| Err::<(), _>(ErrorClass::Fatal));
        if matches!(
            b.call_blocking(|| Err::<(), _>(ErrorClass::Fatal)),
            Err(Error::Open { .. })
        ) {
            refused = true;
            break;
        }
    }
    assert!(refused, "the blocking instance sees the fleet open");
    drop(rt);
}

#[test]
fn exact_mode_and_two_budgets_are_refused_by_field() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let _g = rt.enter();
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new("t"));
    let exact = FleetBreaker::new(
        store.clone(),
        "x",
        spec(StdDuration::from_secs(1)),
        FleetConfig::default(),
    )
    .unwrap();
    let e = Reliable::builder("x")
        .fleet_breaker(exact)
        .build()
        .unwrap_err();
    assert_eq!(e.field(), "fleet_breaker.mode");
    let budget = FleetBudget::new(
        store,
        "x",
        BudgetSpec::new(RatioConfig::percent(0.1)).unwrap(),
        cached(),
        1,
        None,
    )
    .unwrap();
    let e = Reliable::builder("x")
        .budget(reliable_core::budget::BudgetConfig::Ratio(
            RatioConfig::percent(0.1),
        ))
        .fleet_budget(budget)
        .build()
        .unwrap_err();
    assert_eq!(e.field(), "fleet_budget");
}

//! The Redis store against a real `redis-server` on 127.0.0.1 (started and ended by each test):
//! the Lua scripts against the core's breaker and budget, the store's faults, credentials.

mod fleet_support;

use std::sync::Arc;

use fleet_support::{RedisServer, Rng};
use reliable::fleet::{
    BreakerAnswer, BreakerOp, BreakerReply, BreakerSpec, BudgetOp, BudgetSpec, MemoryStore,
    RedisStore, Store,
};
use reliable_core::Duration;
use reliable_core::breaker::{
    BreakerConfig, BreakerPolicy, HalfOpenConfig, OpenConfig, Outcome, ProbeRule, WindowConfig,
};
use reliable_core::budget::RatioConfig;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// The test's own server guard: a port another server holds is refused (that server's `INFO`
/// names another pid), never taken for a new server, which a test would then lose when the
/// holder ends; and `start_with` goes on to a fresh port.
#[test]
fn a_server_on_a_taken_port_is_refused_not_shared() {
    let first = RedisServer::start();
    let err = match RedisServer::try_start_on(first.port, &[]) {
        Ok(_) => panic!("a second server on {} was taken for a new one", first.port),
        Err(e) => e,
    };
    assert!(err.contains(&first.port.to_string()), "{err}");
    let second = RedisServer::start_with(&[]);
    assert_ne!(second.port, first.port);
    assert_ne!(second.pid(), first.pid());
}

/// Policies over the rules a fleet breaker takes.
fn policies() -> Vec<BreakerPolicy> {
    let open = |d: u64, growth: f64, max: Option<u64>| OpenConfig {
        duration: ms(d),
        growth,
        max: max.map(ms),
        jitter: 0.0,
        strictly_after: false,
    };
    let half = |probes: u32, successes: u32, lease: u64| HalfOpenConfig {
        max_in_flight: Some(probes),
        rule: ProbeRule::Consecutive { successes },
        probe_timeout: ms(lease),
        ..BreakerConfig::new().half_open
    };
    [
        BreakerConfig {
            consecutive_failures: Some(3),
            open: open(1_000, 1.0, None),
            half_open: half(1, 1, 2_000),
            ..BreakerConfig::new()
        },
        BreakerConfig {
            failure_rate: Some(0.5),
            minimum_calls: 5,
            window: WindowConfig::Count { calls: 10 },
            open: open(500, 2.0, Some(4_000)),
            half_open: half(2, 2, 300),
            ..BreakerConfig::new()
        },
        BreakerConfig {
            consecutive_failures: Some(5),
            failure_rate: Some(0.3),
            minimum_calls: 4,
            window: WindowConfig::Count { calls: 8 },
            open: open(2_000, 1.5, Some(9_000)),
            half_open: half(3, 3, 1_000),
            ..BreakerConfig::new()
        },
    ]
    .into_iter()
    .map(|c| BreakerPolicy::new(c).unwrap())
    .collect()
}

/// The reply without the lease numbers, which each store picks itself.
fn shape(r: &BreakerReply) -> BreakerReply {
    let answer = match r.answer {
        BreakerAnswer::Admitted { .. } => BreakerAnswer::Admitted { lease: 0 },
        BreakerAnswer::Probe { .. } => BreakerAnswer::Probe { lease: 0 },
        a => a,
    };
    BreakerReply { answer, ..*r }
}

/// The breaker script and the core's breaker (the memory store), driven by the same random
/// operations at the same times: every answer, generation, state, open time and probe count
/// agrees. Times step forward in milliseconds, sometimes by seconds (open times end, leases
/// expire), sometimes backwards (the latest time counts).
#[tokio::test(flavor = "current_thread")]
async fn lua_matches_the_core() {
    let server = RedisServer::start();
    let redis = RedisStore::open(&server.url(), "diff").unwrap();
    let memory = MemoryStore::new("diff");
    let mut counts = [0usize; 5];
    for (case, policy) in policies().iter().enumerate() {
        let spec = BreakerSpec::new(policy).unwrap();
        let name = format!("b{case}");
        let mut rng = Rng(case as u64 + 1);
        let mut now: u64 = 1_000_000_000; // µs
        // Permits out: (generation, redis lease, memory lease).
        let mut out: Vec<(u64, u64, u64)> = Vec::new();
        let mut generation = 0;
        for step in 0..3_000 {
            match rng.below(100) {
                0..=4 => now += 1_000 * rng.below(3_000),
                5..=7 => now = now.saturating_sub(1_000 * rng.below(10)),
                _ => now += 1_000 * rng.below(20),
            }
            let outcome = |r: &mut Rng| match r.below(10) {
                0..=4 => Outcome::Failure,
                5..=8 => Outcome::Success,
                _ => Outcome::Ignored,
            };
            let roll = rng.below(100);
            let (r_op, m_op, kind) = if roll < 50 || out.is_empty() {
                (BreakerOp::Acquire, BreakerOp::Acquire, 0)
            } else if roll < 95 {
                let (g, rl, ml) = out.swap_remove(rng.below(out.len() as u64) as usize);
                let o = outcome(&mut rng);
                let op = |lease| BreakerOp::Record {
                    generation: g,
                    lease,
                    outcome: o,
                };
                (op(rl), op(ml), 1)
            } else {
                let n = 1 + rng.below(4);
                let outcomes: Vec<Outcome> = (0..n).map(|_| outcome(&mut rng)).collect();
                let op = BreakerOp::Batch {
                    generation,
                    outcomes,
                };
                (op.clone(), op, 2)
            };
            let r = redis.breaker(&name, &spec, now, r_op).await.unwrap();
            let m = memory.breaker(&name, &spec, now, m_op).await.unwrap();
            assert_eq!(shape(&r), shape(&m), "policy {case}, step {step}");
            generation = r.generation;
            counts[kind] += 1;
            match (r.answer, m.answer) {
                (BreakerAnswer::Admitted { lease: rl }, BreakerAnswer::Admitted { lease: ml })
                | (BreakerAnswer::Probe { lease: rl }, BreakerAnswer::Probe { lease: ml }) => {
                    counts[if matches!(r.answer, BreakerAnswer::Probe { .. }) {
                        3
                    } else {
                        4
                    }] += 1;
                    out.push((r.generation, rl, ml));
                }
                _ => {}
            }
        }
    }
    // Every kind of operation ran, probes included.
    assert!(counts.iter().all(|&c| c > 50), "{counts:?}");
    eprintln!("acquires, records, batches, probes, admitted: {counts:?}");
}

/// The budget script and the core's `RatioBudget`, driven by the same random operations at the
/// same times: every grant and balance agrees.
#[tokio::test(flavor = "current_thread")]
async fn budget_lua_matches_the_core() {
    let server = RedisServer::start();
    let redis = RedisStore::open(&server.url(), "diff").unwrap();
    let memory = MemoryStore::new("diff");
    let configs = [
        RatioConfig::percent(0.1),
        RatioConfig {
            ratio: 0.6,
            min_per_sec: 2,
            ttl: Duration::from_secs(2),
            slots: 4,
        },
        RatioConfig {
            ratio: 0.25,
            min_per_sec: 0,
            ttl: Duration::from_secs(1),
            slots: 10,
        },
    ];
    let mut granted = 0;
    for (case, config) in configs.into_iter().enumerate() {
        let spec = BudgetSpec::new(config).unwrap();
        let name = format!("r{case}");
        let mut rng = Rng(100 + case as u64);
        let mut now: u64 = 5_000_000_000;
        for step in 0..2_000 {
            match rng.below(100) {
                0..=2 => now += 1_000 * rng.below(5_000),
                3..=5 => now = now.saturating_sub(1_000 * rng.below(300)),
                _ => now += 1_000 * rng.below(50),
            }
            let op = BudgetOp {
                first_tries: rng.below(4) as u32,
                retries: rng.below(4) as u32,
            };
            let r = redis.budget(&name, &spec, now, op).await.unwrap();
            let m = memory.budget(&name, &spec, now, op).await.unwrap();
            assert_eq!(r, m, "budget {case}, step {step}, {op:?}");
            granted += r.granted;
        }
    }
    assert!(granted > 100, "{granted} grants");
}

/// The rate script and the core's GCRA limiter, driven by the same random calls at the same
/// times: every admission and `retry_after` agrees.
#[tokio::test(flavor = "current_thread")]
async fn rate_lua_matches_the_core() {
    use reliable::fleet::RateSpec;
    use reliable_core::limit::RateConfig;
    let server = RedisServer::start();
    let redis = RedisStore::open(&server.url(), "diff").unwrap();
    let memory = MemoryStore::new("diff");
    let configs = [
        RateConfig {
            rate: 10,
            period: ms(1_000),
            burst: 5,
        },
        RateConfig {
            rate: 3,
            period: ms(3),
            burst: 1,
        },
        RateConfig {
            rate: 100,
            period: ms(2_000),
            burst: 20,
        },
    ];
    let mut admitted = 0;
    for (case, config) in configs.into_iter().enumerate() {
        let spec = RateSpec::new(config).unwrap();
        let name = format!("g{case}");
        let mut rng = Rng(200 + case as u64);
        let mut now: u64 = 7_000_000_000;
        for step in 0..2_000 {
            match rng.below(100) {
                0..=2 => now += 1_000 * rng.below(3_000),
                3..=5 => now = now.saturating_sub(1_000 * rng.below(50)),
                _ => now += 1_000 * rng.below(30),
            }
            let r = redis.rate(&name, &spec, now).await.unwrap();
            let m = memory.rate(&name, &spec, now).await.unwrap();
            assert_eq!(r, m, "rate {case}, step {step}");
            admitted += usize::from(r.admitted);
        }
    }
    assert!(admitted > 500 && admitted < 5_500, "{admitted} admitted");
}

/// The bulkhead script and the core's static limiter (with leases kept beside it), driven by the
/// same random acquires and releases at the same times: every answer and count agrees.
#[tokio::test(flavor = "current_thread")]
async fn bulkhead_lua_matches_the_core() {
    use reliable::fleet::{BulkheadOp, BulkheadSpec};
    let server = RedisServer::start();
    let redis = RedisStore::open(&server.url(), "diff").unwrap();
    let memory = MemoryStore::new("diff");
    let mut admitted = 0;
    for (case, (max, lease)) in [(1u32, 50u64), (3, 200), (8, 1_000)]
        .into_iter()
        .enumerate()
    {
        let spec = BulkheadSpec::new(max, ms(lease)).unwrap();
        let name = format!("k{case}");
        let mut rng = Rng(300 + case as u64);
        let mut now: u64 = 9_000_000_000;
        // Slots out: (redis lease, memory lease).
        let mut out: Vec<(u64, u64)> = Vec::new();
        for step in 0..2_000 {
            match rng.below(100) {
                0..=4 => now += 1_000 * rng.below(2 * lease),
                5..=7 => now = now.saturating_sub(1_000 * rng.below(5)),
                _ => now += 1_000 * rng.below(10),
            }
            let (r, m) = if rng.below(2) == 0 || out.is_empty() {
                let op = BulkheadOp::Acquire;
                (
                    redis.bulkhead(&name, &spec, now, op).await.unwrap(),
                    memory.bulkhead(&name, &spec, now, op).await.unwrap(),
                )
            } else {
                let (rl, ml) = out.swap_remove(rng.below(out.len() as u64) as usize);
                (
                    redis
                        .bulkhead(&name, &spec, now, BulkheadOp::Release { lease: rl })
                        .await
                        .unwrap(),
                    memory
                        .bulkhead(&name, &spec, now, BulkheadOp::Release { lease: ml })
                        .await
                        .unwrap(),
                )
            };
            assert_eq!(
                (r.admitted, r.in_flight, r.now_us),
                (m.admitted, m.in_flight, m.now_us),
                "bulkhead {case}, step {step}"
            );
            if r.admitted {
                admitted += 1;
                out.push((r.lease, m.lease));
            }
        }
    }
    assert!(admitted > 300, "{admitted} admitted");
}

/// A URL's password opens the store and is never shown: not in `describe`, `Debug`, errors or
/// events.
#[tokio::test(flavor = "current_thread")]
async fn credentials_are_never_shown() {
    let secret = "s3cret-Pa55word";
    let server = RedisServer::start_with(&["--requirepass", secret]);
    let url = format!("redis://:{secret}@127.0.0.1:{}", server.port);
    let store = RedisStore::open(&url, "creds").unwrap();
    let spec = BreakerSpec::new(&policies()[0]).unwrap();
    // The password works.
    let r = store.breaker("b", &spec, 0, BreakerOp::View).await.unwrap();
    assert_eq!(r.generation, 0);
    let shown = [store.describe(), format!("{store:?}")];
    // A wrong password: the error names the store, not the password given.
    let wrong = "Wr0ng-Pa55word";
    let bad = RedisStore::open(
        &format!("redis://user:{wrong}@127.0.0.1:{}", server.port),
        "creds",
    )
    .unwrap();
    let err = bad
        .breaker("b", &spec, 0, BreakerOp::View)
        .await
        .unwrap_err();
    let texts = [
        shown[0].clone(),
        shown[1].clone(),
        err.to_string(),
        format!("{err:?}"),
        format!("{bad:?}"),
    ];
    for t in &texts {
        assert!(!t.contains(secret) && !t.contains(wrong), "shown: {t}");
    }
    assert!(texts[0].contains("***@127.0.0.1"), "{}", texts[0]);
    eprintln!("shown: {texts:?}");
    let _ = Arc::new(store);
}

// ---------------------------------------------------------------------------------------------
// The store is never the outage.
// ---------------------------------------------------------------------------------------------

use reliable::fleet::{
    Decider, FleetBreaker, FleetBudget, FleetConfig, FleetEvent, FleetReason, FleetStats, Mode,
    OnStoreFailure, StoreErrorKind,
};
use std::sync::Mutex;
use std::time::Instant as StdInstant;

/// The wait bound the fault tests configure.
const WAIT: std::time::Duration = std::time::Duration::from_millis(10);
/// What the machine may add to the bound: a timer fires late, a thread waits for a core (2 cores
/// shared by parallel tests here). A call blocked by the store would show the store's whole stall
/// (seconds).
const SLACK: std::time::Duration = std::time::Duration::from_millis(100);

/// For tests of how a store's errors are classed: a wait no loaded machine runs into, so that
/// each error is the store's own (a refusal, a wrong type, garbage), never a timeout.
fn classifying() -> FleetConfig {
    FleetConfig {
        wait: std::time::Duration::from_secs(2),
        ..config(Mode::Exact)
    }
}

fn config(mode: Mode) -> FleetConfig {
    FleetConfig {
        mode,
        wait: WAIT,
        rest: std::time::Duration::from_millis(100),
        ..FleetConfig::default()
    }
}

fn spec() -> BreakerSpec {
    // Five failures in a row open it for a second; one probe; one success closes it.
    let policy = BreakerPolicy::new(BreakerConfig {
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
    .unwrap();
    BreakerSpec::new(&policy).unwrap()
}

type Events = Arc<Mutex<Vec<FleetEvent>>>;

fn breaker(store: &Arc<RedisStore>, name: &str, config: FleetConfig) -> (FleetBreaker, Events) {
    let events: Events = Arc::default();
    let sink = events.clone();
    let b = FleetBreaker::with_events(
        store.clone(),
        name,
        spec(),
        config,
        Some(Arc::new(move |e: &FleetEvent| {
            sink.lock().unwrap().push(e.clone())
        })),
    )
    .unwrap();
    (b, events)
}

/// Calls through a fleet breaker, timing every wait.
#[derive(Default)]
struct Caller {
    longest: std::time::Duration,
    calls: usize,
}

impl Caller {
    async fn call(&mut self, b: &FleetBreaker, outcome: Outcome) -> Result<Decider, FleetReason> {
        self.calls += 1;
        let t = StdInstant::now();
        let r = b.acquire().await;
        self.longest = self.longest.max(t.elapsed());
        match r {
            Ok(p) => {
                let by = p.decided_by();
                let t = StdInstant::now();
                b.record(p, outcome).await;
                self.longest = self.longest.max(t.elapsed());
                Ok(by)
            }
            Err(e) => Err(e.reason),
        }
    }

    async fn budget(&mut self, b: &FleetBudget) -> bool {
        self.calls += 1;
        b.first_try();
        let t = StdInstant::now();
        let r = b.try_retry().await;
        self.longest = self.longest.max(t.elapsed());
        r.is_ok()
    }

    fn check(&self, what: &str, stats: &[&FleetStats]) {
        let store = stats
            .iter()
            .map(|s| std::time::Duration::from_nanos(FleetStats::get(&s.longest_wait_ns)))
            .max()
            .unwrap_or_default();
        eprintln!(
            "{what}: {} calls, longest call {:?}, longest wait on the store {store:?} (bound {WAIT:?})",
            self.calls, self.longest
        );
        assert!(
            self.longest <= WAIT + SLACK,
            "{what}: a call waited {:?}",
            self.longest
        );
    }
}

fn downs_and_ups(events: &Events) -> (usize, usize, usize) {
    let e = events.lock().unwrap();
    let downs = e
        .iter()
        .filter(|e| matches!(e, FleetEvent::StoreDown { .. }))
        .count();
    let (ups, reconciled) = e.iter().fold((0, 0), |(u, r), e| match e {
        FleetEvent::StoreUp { reconciled, .. } => (u + 1, r + reconciled),
        _ => (u, r),
    });
    (downs, ups, reconciled)
}

/// Calls (with `outcome`) until the store decides one again; panics after 5 s.
async fn until_the_store_decides(c: &mut Caller, b: &FleetBreaker, outcome: Outcome) {
    let deadline = StdInstant::now() + std::time::Duration::from_secs(5);
    loop {
        let r = c.call(b, outcome).await;
        if matches!(r, Ok(Decider::Store)) {
            return;
        }
        assert!(
            StdInstant::now() < deadline,
            "the store never decided again: {r:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

/// Calls (that say nothing) until `events` holds `n` StoreUp events; panics after 5 s.
async fn until_up(c: &mut Caller, b: &FleetBreaker, events: &Events, n: usize) {
    let deadline = StdInstant::now() + std::time::Duration::from_secs(5);
    while downs_and_ups(events).1 < n {
        assert!(StdInstant::now() < deadline, "no StoreUp event");
        let _ = c.call(b, Outcome::Ignored).await;
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
}

fn stats(s: &FleetStats) -> String {
    format!(
        "store calls {}, errors {}, timeouts {}, fallbacks {}, cached {}, reconciled {}",
        FleetStats::get(&s.store_calls),
        FleetStats::get(&s.store_errors),
        FleetStats::get(&s.timeouts),
        FleetStats::get(&s.fallbacks),
        FleetStats::get(&s.cached),
        FleetStats::get(&s.reconciled),
    )
}

/// Killed mid-run, then restarted empty: every call is decided locally at once while it is down;
/// once it is back, the failures seen meanwhile are sent to it and trip the fleet's breaker.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_then_restarted_empty() {
    let mut server = RedisServer::start();
    let store = Arc::new(RedisStore::open(&server.url(), "faults").unwrap());
    let (b, events) = breaker(&store, "kill", config(Mode::Exact));
    store.warm_up().await.unwrap();
    let mut c = Caller::default();
    until_the_store_decides(&mut c, &b, Outcome::Success).await;
    server.kill();
    // Down: the local breaker decides, at once; five failures open it locally.
    let mut local = 0;
    for _ in 0..20 {
        match c.call(&b, Outcome::Failure).await {
            Ok(Decider::Local) => local += 1,
            Err(FleetReason::Breaker(_)) => {}
            other => panic!("while down: {other:?}"),
        }
    }
    assert_eq!(local, 5, "five local failures open the local breaker");
    assert_eq!(downs_and_ups(&events).0, 1, "one StoreDown event");
    server.restart_empty();
    // Back, empty: the store decides again (calls that say nothing, so as not to reset the
    // failures in a row), and the five failures seen meanwhile reach it.
    until_the_store_decides(&mut c, &b, Outcome::Ignored).await;
    until_up(&mut c, &b, &events, 1).await;
    // (A loaded machine may miss the bound once more after the restart: another down and up.)
    let (downs, ups, reconciled) = downs_and_ups(&events);
    assert!(
        downs >= 1 && ups == downs && reconciled == 5,
        "{:?}",
        events.lock().unwrap()
    );
    let view = store
        .breaker("kill", &spec(), 0, BreakerOp::View)
        .await
        .unwrap();
    assert_eq!(view.state, reliable_core::breaker::State::Open, "{view:?}");
    c.check("killed then restarted empty", &[b.stats()]);
    eprintln!("{}", stats(b.stats()));
}

/// Paused with SIGSTOP (3 s: after the first timeout the store rests and every decision is
/// local at once, each later attempt times out at the same bound; 10 s would only repeat it
/// more often), then resumed: no call waits past the bound, and the store decides again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paused_store_never_blocks_a_call() {
    let server = RedisServer::start();
    let store = Arc::new(RedisStore::open(&server.url(), "faults").unwrap());
    let (exact, events) = breaker(&store, "pause", config(Mode::Exact));
    let cached_mode = Mode::Cached {
        refresh: std::time::Duration::from_millis(20),
    };
    let (cached, cached_events) = breaker(&store, "pause-cached", config(cached_mode));
    let budget = FleetBudget::new(
        store.clone(),
        "pause",
        BudgetSpec::new(RatioConfig::percent(0.5)).unwrap(),
        config(Mode::Exact),
        1,
        None,
    )
    .unwrap();
    store.warm_up().await.unwrap();
    let mut c = Caller::default();
    until_the_store_decides(&mut c, &exact, Outcome::Success).await;
    for _ in 0..20 {
        assert!(c.call(&exact, Outcome::Success).await.is_ok());
        assert!(c.call(&cached, Outcome::Success).await.is_ok());
        c.budget(&budget).await;
    }
    server.signal("STOP");
    let paused = StdInstant::now();
    let mut during = 0;
    while paused.elapsed() < std::time::Duration::from_secs(3) {
        assert!(c.call(&exact, Outcome::Success).await.is_ok(), "fail-open");
        assert!(c.call(&cached, Outcome::Success).await.is_ok(), "fail-open");
        c.budget(&budget).await;
        during += 1;
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
    server.signal("CONT");
    until_the_store_decides(&mut c, &exact, Outcome::Success).await;
    let deadline = StdInstant::now() + std::time::Duration::from_secs(5);
    while downs_and_ups(&cached_events).1 == 0 || downs_and_ups(&events).1 == 0 {
        assert!(c.call(&cached, Outcome::Success).await.is_ok());
        assert!(c.call(&exact, Outcome::Success).await.is_ok());
        assert!(StdInstant::now() < deadline, "no StoreUp event");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(downs_and_ups(&events).0 >= 1);
    assert!(FleetStats::get(&exact.stats().timeouts) >= 1);
    eprintln!("{during} rounds while paused");
    eprintln!("exact: {}", stats(exact.stats()));
    eprintln!("cached: {}", stats(cached.stats()));
    eprintln!("budget: {}", stats(budget.stats()));
    c.check(
        "paused 3 s",
        &[exact.stats(), cached.stats(), budget.stats()],
    );
}

/// Out of memory (`maxmemory` with `noeviction`: writes refused), a key of the wrong type, and a
/// server that answers garbage: each is a failed store; calls are decided locally, then by the
/// store again once it is healthy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_of_memory_wrong_type_and_garbage() {
    let server = RedisServer::start();
    let store = Arc::new(RedisStore::open(&server.url(), "faults").unwrap());
    let (b, events) = breaker(&store, "oom", classifying());
    store.warm_up().await.unwrap();
    let mut c = Caller::default();
    until_the_store_decides(&mut c, &b, Outcome::Success).await;
    let mut conn = server.conn();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory-policy")
        .arg("noeviction")
        .query(&mut conn)
        .unwrap();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg("1")
        .query(&mut conn)
        .unwrap();
    for _ in 0..10 {
        assert_eq!(c.call(&b, Outcome::Success).await, Ok(Decider::Local));
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    {
        let e = events.lock().unwrap();
        let FleetEvent::StoreDown { error, .. } = &e[0] else {
            panic!("{e:?}")
        };
        assert_eq!(error.kind, StoreErrorKind::Refused, "{error}");
        assert!(error.message.contains("OOM"), "{error}");
    }
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg("0")
        .query(&mut conn)
        .unwrap();
    until_the_store_decides(&mut c, &b, Outcome::Success).await;
    // The outage is over once its results are reconciled (in the background, after the store
    // first answers again): a fault before that would extend this outage, not start a second.
    until_up(&mut c, &b, &events, 1).await;

    // Someone else's string where the breaker's hash should be.
    let key = store.breaker_keys("oom")[0].clone();
    let _: () = redis::cmd("SET")
        .arg(&key)
        .arg("not a hash")
        .query(&mut conn)
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(150)).await;
    assert_eq!(c.call(&b, Outcome::Success).await, Ok(Decider::Local));
    let _: () = redis::cmd("DEL").arg(&key).query(&mut conn).unwrap();
    until_the_store_decides(&mut c, &b, Outcome::Success).await;
    until_up(&mut c, &b, &events, 2).await;
    assert_eq!(downs_and_ups(&events).0, 2, "{:?}", events.lock().unwrap());

    // A server that answers garbage to everything.
    let garbage = GarbageServer::start();
    let bad = Arc::new(RedisStore::open(&garbage.url(), "faults").unwrap());
    let (g, gevents) = breaker(&bad, "garbage", classifying());
    for _ in 0..10 {
        assert_eq!(c.call(&g, Outcome::Success).await, Ok(Decider::Local));
    }
    let e = gevents.lock().unwrap().clone();
    assert!(matches!(&e[..], [FleetEvent::StoreDown { .. }]), "{e:?}");
    eprintln!("garbage: {e:?}");
    c.check(
        "out of memory, wrong type, garbage",
        &[b.stats(), g.stats()],
    );
}

/// Fail-closed, opted in: while the store is down, calls and retries are refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fail_closed_refuses_while_the_store_is_down() {
    let mut server = RedisServer::start();
    let store = Arc::new(RedisStore::open(&server.url(), "faults").unwrap());
    let closed = FleetConfig {
        on_store_failure: OnStoreFailure::Refuse,
        ..config(Mode::Exact)
    };
    let (b, _) = breaker(&store, "closed", closed);
    let budget = FleetBudget::new(
        store.clone(),
        "closed",
        BudgetSpec::new(RatioConfig::percent(1.0)).unwrap(),
        closed,
        1,
        None,
    )
    .unwrap();
    store.warm_up().await.unwrap();
    let mut c = Caller::default();
    until_the_store_decides(&mut c, &b, Outcome::Success).await;
    assert!(c.budget(&budget).await);
    server.kill();
    for _ in 0..5 {
        assert_eq!(
            c.call(&b, Outcome::Success).await,
            Err(FleetReason::StoreUnavailable)
        );
        budget.first_try();
        let denied = budget.try_retry().await.unwrap_err();
        assert!(denied.store_unavailable);
    }
    c.check("fail-closed", &[b.stats(), budget.stats()]);
}

/// A TCP server on loopback that answers every connection with bytes that are not RESP.
struct GarbageServer {
    port: u16,
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl GarbageServer {
    fn start() -> Self {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut conns = Vec::new();
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                if let Ok((s, _)) = listener.accept() {
                    s.set_nonblocking(true).unwrap();
                    conns.push(s);
                }
                for s in &mut conns {
                    let mut buf = [0u8; 4096];
                    if let Ok(n) = s.read(&mut buf)
                        && n > 0
                    {
                        let _ = s.write_all(b"*3\r\n:1\r\n$-5\r\n\x00\xff garbage \r\n");
                    }
                }
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        });
        GarbageServer {
            port,
            stop,
            thread: Some(thread),
        }
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }
}

impl Drop for GarbageServer {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Correct under concurrency: 4 processes × 4 threads on one breaker and one budget.
// ---------------------------------------------------------------------------------------------

use reliable_core::breaker::{CircuitBreaker, CountWindow, Permit, RejectReason};
use std::collections::HashMap;

const PROCESSES: usize = 4;
const THREADS: usize = 4;

/// The breaker the processes share: a failure rate of 50% over 20 calls, a short open time so
/// that many half-open rounds happen, two probes at once, three successes close.
fn shared_policy() -> BreakerPolicy {
    BreakerPolicy::new(BreakerConfig {
        failure_rate: Some(0.5),
        minimum_calls: 20,
        window: WindowConfig::Count { calls: 20 },
        open: OpenConfig {
            duration: ms(50),
            growth: 1.0,
            max: None,
            jitter: 0.0,
            strictly_after: false,
        },
        half_open: HalfOpenConfig {
            max_in_flight: Some(2),
            rule: ProbeRule::Consecutive { successes: 3 },
            probe_timeout: ms(300),
            ..BreakerConfig::new().half_open
        },
        ..BreakerConfig::new()
    })
    .unwrap()
}

const RATIO: f64 = 0.1;

/// Cached mode's refresh in the processes of `cached-trip` and `cached-probes`, and the wait.
const REFRESH: std::time::Duration = std::time::Duration::from_millis(10);
const CACHED_WAIT: std::time::Duration = std::time::Duration::from_millis(50);

/// `shared_policy` open for 10 s: one trip in a run, to time.
fn trip_policy() -> BreakerPolicy {
    let mut c = *shared_policy().config();
    c.open.duration = Duration::from_secs(10);
    BreakerPolicy::new(c).unwrap()
}

fn epoch_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64
}

/// The rate limit the processes share: 200 calls a second, bursts of 10.
const RATE: reliable_core::limit::RateConfig = reliable_core::limit::RateConfig {
    rate: 200,
    period: Duration::from_secs(1),
    burst: 10,
};

/// Counts an application-level probe in or out (`delta` ±1) and keeps the maximum, atomically.
const PROBE_COUNTER: &str = "local n = redis.call('INCRBY', KEYS[1], ARGV[1]) \
    if n > tonumber(redis.call('GET', KEYS[2]) or '0') then redis.call('SET', KEYS[2], n) end return n";

/// Counts an application-level probe in (1) or out (-1).
async fn count(counter: &redis::Script, conn: &mut redis::aio::MultiplexedConnection, delta: i64) {
    let _: i64 = counter
        .key("probes-now")
        .key("probes-max")
        .arg(delta)
        .invoke_async(conn)
        .await
        .unwrap();
}

/// The non-atomic probe gate of the negative control: read the leases, then (another round
/// trip later) take one: two processes can both read a free slot.
async fn non_atomic_probe(
    conn: &mut redis::aio::MultiplexedConnection,
    leases: &str,
    probes: u32,
    lease: u64,
) -> bool {
    let held: u32 = redis::cmd("HLEN")
        .arg(leases)
        .query_async(conn)
        .await
        .unwrap();
    if held >= probes {
        return false;
    }
    let _: () = redis::cmd("HSET")
        .arg(leases)
        .arg(lease)
        .arg(1)
        .query_async(conn)
        .await
        .unwrap();
    true
}

/// One process of the fleet (run by `fleet_of_processes`, which starts this test binary again
/// with `FLEET_ROLE` set; without it, this test does nothing).
#[test]
fn fleet_child() {
    let Ok(role) = std::env::var("FLEET_ROLE") else {
        return;
    };
    let url = std::env::var("FLEET_URL").unwrap();
    let seed: u64 = std::env::var("FLEET_SEED").unwrap().parse().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(THREADS)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        // The shared breaker's decisions go to its log, for the parent to replay.
        let store = Arc::new(RedisStore::open(&url, "fleet").unwrap().with_decision_log());
        store.warm_up().await.unwrap();
        let client = redis::Client::open(url.as_str()).unwrap();
        // A generous bound: this test is about the store's atomicity, not its faults.
        let cfg = |mode| FleetConfig {
            mode,
            wait: std::time::Duration::from_millis(500),
            ..FleetConfig::default()
        };
        let cached = Mode::Cached {
            refresh: std::time::Duration::from_millis(10),
        };
        let mut tasks = Vec::new();
        // Lines for the parent (times in µs since the epoch, as the store's clock).
        let lines: Arc<Mutex<Vec<String>>> = Arc::default();
        // One fleet breaker per process, shared by its threads (as one `Reliable` shares it),
        // decided at once (`decide`, `record_now`: what the call engine asks).
        let cached_breaker = match role.as_str() {
            "cached-trip" | "cached-probes" => Some(
                FleetBreaker::new(
                    store.clone(),
                    &role,
                    BreakerSpec::new(&if role == "cached-trip" {
                        trip_policy()
                    } else {
                        shared_policy()
                    })
                    .unwrap(),
                    FleetConfig {
                        mode: Mode::Cached { refresh: REFRESH },
                        wait: CACHED_WAIT,
                        ..FleetConfig::default()
                    },
                )
                .unwrap(),
            ),
            _ => None,
        };
        for t in 0..THREADS as u64 {
            let store = store.clone();
            let client = client.clone();
            let role = role.clone();
            let lines = lines.clone();
            let cached_breaker = cached_breaker.clone();
            tasks.push(tokio::spawn(async move {
                let mut rng = Rng(seed * 100 + t);
                let mut conn = client.get_multiplexed_async_connection().await.unwrap();
                let counter = redis::Script::new(PROBE_COUNTER);
                let mut tally = [0u64; 4];
                match role.as_str() {
                    "breaker" => {
                        let b = FleetBreaker::new(
                            store,
                            "shared",
                            BreakerSpec::new(&shared_policy()).unwrap(),
                            cfg(Mode::Exact),
                        )
                        .unwrap();
                        let end = StdInstant::now() + std::time::Duration::from_millis(1_500);
                        while StdInstant::now() < end {
                            match b.acquire().await {
                                Ok(p) => {
                                    tally[0] += 1;
                                    let probe = p.is_probe();
                                    if probe {
                                        tally[1] += 1;
                                        count(&counter, &mut conn, 1).await;
                                    }
                                    let wait = rng.below(2_000);
                                    tokio::time::sleep(std::time::Duration::from_micros(wait))
                                        .await;
                                    let outcome = if rng.below(10) < 6 {
                                        Outcome::Failure
                                    } else {
                                        Outcome::Success
                                    };
                                    if probe {
                                        count(&counter, &mut conn, -1).await;
                                        // Now and then a probe never reports: its lease expires.
                                        if rng.below(50) == 0 {
                                            tally[3] += 1;
                                            drop(p);
                                            continue;
                                        }
                                    }
                                    b.record(p, outcome).await;
                                }
                                Err(_) => {
                                    tally[2] += 1;
                                    tokio::time::sleep(std::time::Duration::from_micros(200)).await;
                                }
                            }
                        }
                        tally[3] = FleetStats::get(&b.stats().fallbacks);
                    }
                    "budget" | "budget-cached" => {
                        let mode = if role == "budget" {
                            cfg(Mode::Exact)
                        } else {
                            cfg(cached)
                        };
                        let b = FleetBudget::new(
                            store,
                            &role,
                            BudgetSpec::new(RatioConfig::percent(RATIO)).unwrap(),
                            mode,
                            2,
                            None,
                        )
                        .unwrap();
                        for _ in 0..300 {
                            b.first_try();
                            tally[0] += 1;
                            // Every call fails and asks to retry.
                            if b.try_retry().await.is_ok() {
                                tally[1] += 1;
                            }
                            tokio::time::sleep(std::time::Duration::from_micros(300)).await;
                        }
                        tally[3] = FleetStats::get(&b.stats().fallbacks);
                    }
                    "cached-trip" | "cached-probes" => {
                        let b = cached_breaker.unwrap();
                        let end = StdInstant::now() + std::time::Duration::from_millis(1_000);
                        let mut mine = Vec::new();
                        while StdInstant::now() < end {
                            match b.decide() {
                                Ok(p) => {
                                    tally[0] += 1;
                                    let probe = p.is_probe();
                                    if probe {
                                        tally[1] += 1;
                                        count(&counter, &mut conn, 1).await;
                                    }
                                    if p.decided_by() != Decider::Store {
                                        mine.push(format!("A {}", epoch_us()));
                                    }
                                    let wait = rng.below(2_000);
                                    tokio::time::sleep(std::time::Duration::from_micros(wait))
                                        .await;
                                    let failed = rng.below(10) < 6;
                                    if probe {
                                        count(&counter, &mut conn, -1).await;
                                    }
                                    mine.push(format!(
                                        "R {} {}",
                                        epoch_us(),
                                        if failed { 'F' } else { 'S' }
                                    ));
                                    let outcome = if failed {
                                        Outcome::Failure
                                    } else {
                                        Outcome::Success
                                    };
                                    b.record_now(p, outcome);
                                }
                                Err(_) => {
                                    tally[2] += 1;
                                    tokio::time::sleep(std::time::Duration::from_micros(200)).await;
                                }
                            }
                        }
                        tally[3] = FleetStats::get(&b.stats().fallbacks);
                        lines.lock().unwrap().extend(mine);
                    }
                    "rate" => {
                        let l = reliable::fleet::FleetRateLimiter::new(
                            store,
                            "shared",
                            RATE,
                            RATE,
                            cfg(Mode::Exact),
                            None,
                        )
                        .unwrap();
                        let end = StdInstant::now() + std::time::Duration::from_millis(1_000);
                        while StdInstant::now() < end {
                            match l.acquire().await {
                                Ok(()) => tally[0] += 1,
                                Err(_) => tally[2] += 1,
                            }
                            tokio::time::sleep(std::time::Duration::from_micros(500)).await;
                        }
                        tally[3] = FleetStats::get(&l.stats().fallbacks);
                    }
                    "bulkhead" => {
                        let k = reliable::fleet::FleetBulkhead::new(
                            store,
                            "shared",
                            reliable::fleet::BulkheadSpec::new(3, ms(2_000)).unwrap(),
                            3,
                            cfg(Mode::Exact),
                            None,
                        )
                        .unwrap();
                        let end = StdInstant::now() + std::time::Duration::from_millis(1_000);
                        while StdInstant::now() < end {
                            match k.acquire().await {
                                Ok(slot) => {
                                    tally[0] += 1;
                                    count(&counter, &mut conn, 1).await;
                                    let wait = rng.below(1_000);
                                    tokio::time::sleep(std::time::Duration::from_micros(wait))
                                        .await;
                                    count(&counter, &mut conn, -1).await;
                                    k.release(slot).await;
                                }
                                Err(_) => {
                                    tally[2] += 1;
                                    tokio::task::yield_now().await;
                                }
                            }
                        }
                        tally[3] = FleetStats::get(&k.stats().fallbacks);
                    }
                    "negative" => {
                        let leases = store.breaker_keys("negative")[1].clone();
                        let end = StdInstant::now() + std::time::Duration::from_millis(1_000);
                        let mut lease = (seed * 100 + t) * 1_000_000;
                        while StdInstant::now() < end {
                            lease += 1;
                            if non_atomic_probe(&mut conn, &leases, 2, lease).await {
                                tally[1] += 1;
                                count(&counter, &mut conn, 1).await;
                                tokio::time::sleep(std::time::Duration::from_micros(500)).await;
                                count(&counter, &mut conn, -1).await;
                                let _: () = redis::cmd("HDEL")
                                    .arg(&leases)
                                    .arg(lease)
                                    .query_async(&mut conn)
                                    .await
                                    .unwrap();
                            } else {
                                tally[2] += 1;
                                tokio::task::yield_now().await;
                            }
                        }
                    }
                    other => panic!("role {other}"),
                }
                tally
            }));
        }
        let mut total = [0u64; 4];
        for t in tasks {
            let tally = t.await.unwrap();
            for (a, b) in total.iter_mut().zip(tally) {
                *a += b;
            }
        }
        // The last results reach the store before the process ends.
        if let Some(b) = &cached_breaker {
            b.sync().await;
        }
        for l in lines.lock().unwrap().iter() {
            println!("{l}");
        }
        println!("RESULT {} {} {} {}", total[0], total[1], total[2], total[3]);
    });
}

/// Runs `PROCESSES` copies of this test binary in `role`; the sums of their RESULT lines.
fn run_fleet(url: &str, role: &str) -> [u64; 4] {
    run_fleet_lines(url, role).0
}

/// [`run_fleet`], with every other line the processes printed.
fn run_fleet_lines(url: &str, role: &str) -> ([u64; 4], Vec<String>) {
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..PROCESSES)
        .map(|i| {
            std::process::Command::new(&exe)
                .args(["--exact", "fleet_child", "--nocapture", "--test-threads=1"])
                .env("FLEET_ROLE", role)
                .env("FLEET_URL", url)
                .env("FLEET_SEED", (i + 1).to_string())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .map(ChildGuard)
        .collect();
    let mut total = [0u64; 4];
    let mut lines = Vec::new();
    for mut child in children {
        let out = child.0.wait_with_output_ref();
        assert!(out.0.success(), "a {role} process failed: {}", out.2);
        lines.extend(
            out.1
                .lines()
                .filter(|l| l.starts_with("A ") || l.starts_with("R "))
                .map(str::to_owned),
        );
        let line = out
            .1
            .lines()
            .find_map(|l| l.split_once("RESULT ").map(|(_, r)| r))
            .unwrap_or_else(|| panic!("no RESULT from a {role} process: {}", out.1))
            .to_owned();
        for (t, v) in total.iter_mut().zip(line.split(' ')) {
            *t += v.parse::<u64>().unwrap();
        }
    }
    (total, lines)
}

/// A child process, killed if the test panics before it ends.
struct ChildGuard(std::process::Child);

trait WaitRef {
    fn wait_with_output_ref(&mut self) -> (std::process::ExitStatus, String, String);
}

impl WaitRef for std::process::Child {
    fn wait_with_output_ref(&mut self) -> (std::process::ExitStatus, String, String) {
        use std::io::Read;
        let (mut out, mut err) = (String::new(), String::new());
        if let Some(s) = self.stdout.as_mut() {
            s.read_to_string(&mut out).unwrap();
        }
        if let Some(s) = self.stderr.as_mut() {
            s.read_to_string(&mut err).unwrap();
        }
        (self.wait().unwrap(), out, err)
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Replays the store's decision log through one core breaker, in the store's order, and checks
/// every answer agrees; returns (acquires, probes admitted, most probes in flight, results
/// counted before the first trip).
fn replay(log: &[String]) -> (usize, usize, u32, usize) {
    let mut core: CircuitBreaker<BreakerPolicy, CountWindow<64>, 16> =
        CircuitBreaker::with_storage(shared_policy()).unwrap();
    let t = |us: &str| reliable_core::Instant::from_nanos(us.parse::<u64>().unwrap() * 1_000);
    let mut pool: HashMap<u64, Vec<Permit>> = HashMap::new();
    let mut probes: HashMap<(u64, u64), Permit> = HashMap::new();
    let (mut acquires, mut admitted_probes, mut most, mut before_trip) = (0, 0, 0, None);
    let mut results_closed = 0;
    for (i, line) in log.iter().enumerate() {
        let f: Vec<&str> = line.split(' ').collect();
        match f[0] {
            "acquire" => {
                acquires += 1;
                let (code, g, x): (u64, u64, u64) = (
                    f[2].parse().unwrap(),
                    f[3].parse().unwrap(),
                    f[4].parse().unwrap(),
                );
                let answer = core.try_acquire(t(f[1]));
                assert_eq!(u64::from(core.generation()), g, "line {i}: {line}");
                match (answer, code) {
                    (Ok(p), 1) if !p.is_probe() => pool.entry(g).or_default().push(p),
                    (Ok(p), 2) if p.is_probe() => {
                        admitted_probes += 1;
                        probes.insert((g, x), p);
                    }
                    (Err(r), 3) => assert_eq!(
                        r.reason,
                        RejectReason::Open {
                            retry_after: Duration::from_micros(x)
                        },
                        "line {i}: {line}"
                    ),
                    (Err(r), 4) => assert_eq!(r.reason, RejectReason::HalfOpenFull),
                    (a, _) => panic!("line {i}: {line}: the core answers {a:?}"),
                }
                most = most.max(core.probes_in_flight());
            }
            "record" => {
                let (g, l): (u64, u64) = (f[2].parse().unwrap(), f[3].parse().unwrap());
                let outcome = match f[4] {
                    "S" => Outcome::Success,
                    "F" => Outcome::Failure,
                    _ => Outcome::Ignored,
                };
                let permit = if l >= 2 {
                    probes.remove(&(g, l))
                } else {
                    pool.get_mut(&g).and_then(Vec::pop)
                };
                let permit = permit.unwrap_or_else(|| panic!("line {i}: {line}: no such permit"));
                let before = core.generation();
                core.record(permit, outcome, t(f[1]));
                if g == 0 && outcome != Outcome::Ignored && before == 0 {
                    results_closed += 1;
                    if core.generation() != before && before_trip.is_none() {
                        before_trip = Some(results_closed);
                    }
                }
            }
            _ => panic!("line {i}: {line}"),
        }
    }
    (acquires, admitted_probes, most, before_trip.unwrap_or(0))
}

/// 4 processes × 4 threads against one real Redis: the fleet's breaker decides exactly as one
/// core breaker fed the store's sequence of calls (so it opens at the same threshold), never has
/// more than `max_in_flight` probes out, and the fleet's budget never grants more than its
/// ratio, exact or cached. The negative control, a probe gate that reads then writes in two
/// round trips, lets more probes out, and the same count catches it.
#[test]
fn fleet_of_processes() {
    let server = RedisServer::start();
    let url = server.url();
    let mut conn = server.conn();
    let log_store = RedisStore::open(&url, "fleet").unwrap();
    let keys = log_store.breaker_keys("shared");
    let get = |conn: &mut redis::Connection, k: &str| -> i64 {
        redis::cmd("GET")
            .arg(k)
            .query::<Option<i64>>(conn)
            .unwrap()
            .unwrap_or(0)
    };

    // The breaker.
    let [admitted, probes, rejected, fallbacks] = run_fleet(&url, "breaker");
    let log: Vec<String> = redis::cmd("LRANGE")
        .arg(&keys[3])
        .arg(0)
        .arg(-1)
        .query(&mut conn)
        .unwrap();
    let (acquires, replayed_probes, most, trip) = replay(&log);
    let app_most = get(&mut conn, "probes-max");
    eprintln!(
        "breaker: {admitted} admitted ({probes} probes), {rejected} rejected, {fallbacks} local; \
         the store's log: {acquires} acquires, {replayed_probes} probes, replayed through one core \
         breaker: every answer agrees; opened after {trip} results; most probes in flight \
         fleet-wide: {most} by the store's leases, {app_most} counted by the callers (limit 2)"
    );
    assert!(acquires > 200 && replayed_probes > 5, "too little happened");
    // The replay checked the generation at every acquire: the fleet's breaker opened at the
    // very result at which one core breaker, fed the same results in the same order, opens;
    // never before the window holds its minimum of 20.
    assert!(trip >= 20, "opened after {trip} results");
    assert!(most <= 2 && (1..=2).contains(&app_most));

    // The budget, exact and cached: every call fails and asks to retry.
    for role in ["budget", "budget-cached"] {
        let [first, granted, _, fallbacks] = run_fleet(&url, role);
        let key = log_store.budget_key(role);
        let (a, b): (i64, i64) = {
            let h: HashMap<String, i64> = redis::cmd("HGETALL").arg(&key).query(&mut conn).unwrap();
            h.iter()
                .fold((0, 0), |(a, b), (k, v)| match k.as_bytes()[0] {
                    b'a' => (a + v, b),
                    b'b' => (a, b + v),
                    _ => (a, b),
                })
        };
        let allowed = (RATIO * first as f64).floor() as u64;
        eprintln!(
            "{role}: {first} first tries, {granted} retries granted (ratio {RATIO}: at most \
             {allowed}), {fallbacks} decided locally; the store's window: {a} first tries, {b} \
             retries withdrawn"
        );
        assert_eq!(fallbacks, 0, "{role}: the store was slow");
        assert!(granted <= allowed, "{role}: {granted} > {allowed}");
        assert!(b as u64 <= (RATIO * a as f64).floor() as u64);
        assert!(granted >= allowed / 2, "{role}: the budget was barely used");
    }

    // The rate limit: over the span of the whole run (a superset of the calls' span), at most
    // burst + span / interval calls.
    let started = StdInstant::now();
    let [admitted, _, refused, fallbacks] = run_fleet(&url, "rate");
    let span = started.elapsed();
    let allowed = 10 + (span.as_nanos() / 5_000_000) as u64;
    eprintln!(
        "rate: {admitted} admitted, {refused} refused, {fallbacks} decided locally, in {span:?} \
         (at most {allowed}: 200/s, bursts of 10)"
    );
    assert_eq!(fallbacks, 0, "rate: the store was slow");
    assert!(admitted <= allowed, "{admitted} > {allowed}");
    assert!(refused > 0 && admitted >= 150, "the limit was not reached");

    // The bulkhead: at most 3 calls in flight fleet-wide, counted by the callers.
    let _: () = redis::cmd("SET")
        .arg("probes-max")
        .arg(0)
        .query(&mut conn)
        .unwrap();
    let [admitted, _, refused, fallbacks] = run_fleet(&url, "bulkhead");
    let most = get(&mut conn, "probes-max");
    eprintln!(
        "bulkhead: {admitted} admitted, {refused} refused, {fallbacks} decided locally; most in \
         flight fleet-wide {most} (limit 3)"
    );
    assert_eq!(fallbacks, 0, "bulkhead: the store was slow");
    assert!((1..=3).contains(&most) && refused > 0, "{most}");

    // The negative control: a gate that reads, then writes.
    let _: () = redis::cmd("SET")
        .arg("probes-max")
        .arg(0)
        .query(&mut conn)
        .unwrap();
    let [_, neg_probes, _, _] = run_fleet(&url, "negative");
    let neg_most = get(&mut conn, "probes-max");
    eprintln!("negative control: {neg_probes} probes, most in flight {neg_most} (limit 2)");
    assert!(
        neg_most > 2,
        "the non-atomic gate was not caught: {neg_most}"
    );
}

// ---------------------------------------------------------------------------------------------
// Fleet breakers and budgets inside `Reliable`.
// ---------------------------------------------------------------------------------------------

/// Two `Reliable` instances, each on its own connection to one real Redis, share the breaker
/// `payments`: three failures through each (six in a row fleet-wide, five trip it) open it for
/// both, though neither instance's own breaker saw five. Then the store is paused: no call
/// through two more instances on that open breaker, with the usual wait bound, waits for it.
///
/// The first two wait for the store as long as a loaded machine may need (a store operation
/// given up at a 10 ms bound would leave its results to a later replay and the failures out of
/// their row); the bound itself is the pause's to try.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_reliables_share_one_breaker_in_redis() {
    use reliable::{Error, Reliable};
    use reliable_core::breaker::State;
    use reliable_core::outcome::ErrorClass;
    let server = RedisServer::start();
    let refresh = std::time::Duration::from_millis(5);
    let instance = |name: &str, wait: std::time::Duration| {
        let store = Arc::new(RedisStore::open(&server.url(), "faces").unwrap());
        let config = FleetConfig {
            wait,
            ..config(Mode::Cached { refresh })
        };
        let (b, _) = breaker(&store, "payments", config);
        let rel = Reliable::builder(name)
            .fleet_breaker(b.clone())
            .attempts(1)
            .build()
            .unwrap();
        (rel, b, store)
    };
    let patient = std::time::Duration::from_secs(2);
    let (a, fa, sa) = instance("a", patient);
    let (b, fb, sb) = instance("b", patient);
    sa.warm_up().await.unwrap();
    sb.warm_up().await.unwrap();
    let ok = |r: &Reliable| {
        let r = r.clone();
        async move { r.call(|| async { Ok::<(), ErrorClass>(()) }).await }
    };
    let fail = |r: &Reliable| {
        let r = r.clone();
        async move {
            r.call(|| async { Err::<(), _>(ErrorClass::Transient) })
                .await
        }
    };
    // A call whose end says nothing of the downstream (a fatal error: ignored by the breaker),
    // to ask the breaker without adding a result between the failures.
    let ignored = |r: &Reliable| {
        let r = r.clone();
        async move { r.call(|| async { Err::<(), _>(ErrorClass::Fatal) }).await }
    };
    // Views first (a process with none decides on its own breaker).
    for _ in 0..5 {
        let _ = (ok(&a).await, ok(&b).await);
        tokio::time::sleep(refresh * 2).await;
    }
    // The successes reach the store before the failures are made: cached results go to the
    // store in batches, and a late success would break the failures in a row.
    fa.sync().await;
    fb.sync().await;
    for _ in 0..3 {
        assert!(matches!(fail(&a).await, Err(Error::GaveUp { .. })));
        assert!(matches!(fail(&b).await, Err(Error::GaveUp { .. })));
    }
    assert_eq!(fa.local_state(), State::Closed);
    assert_eq!(fb.local_state(), State::Closed);
    let started = StdInstant::now();
    let mut open = (false, false);
    while open != (true, true) {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(5),
            "the fleet did not trip: {open:?}"
        );
        tokio::time::sleep(refresh).await;
        open.0 |= matches!(ignored(&a).await, Err(Error::Open { .. }));
        open.1 |= matches!(ignored(&b).await, Err(Error::Open { .. }));
    }
    let mut conn = server.conn();
    let state: Option<i64> = redis::cmd("HGET")
        .arg(&sa.breaker_keys("payments")[0])
        .arg("state")
        .query(&mut conn)
        .unwrap();
    assert_eq!(state, Some(1), "open in the store");
    eprintln!(
        "two Reliable instances: both refuse {:?} after their sixth failure",
        started.elapsed()
    );

    // Two more instances with the usual bound, their views on the open breaker.
    let (c, fc, _sc) = instance("c", WAIT);
    let (d, fd, _sd) = instance("d", WAIT);
    // (A view read past the 10 ms bound on a loaded machine is read again after the rest.)
    let viewing = StdInstant::now();
    while (fc.fleet_state(), fd.fleet_state()) != (Some(State::Open), Some(State::Open)) {
        assert!(
            viewing.elapsed() < std::time::Duration::from_secs(5),
            "no view of the open breaker"
        );
        fc.sync().await;
        fd.sync().await;
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    // The store paused: every call still ends at once (open: refused on the view, then on
    // each process's own breaker once the view is stale).
    server.signal("STOP");
    let paused = StdInstant::now();
    let mut longest = std::time::Duration::ZERO;
    let mut calls = 0;
    while paused.elapsed() < std::time::Duration::from_secs(2) {
        for r in [&c, &d] {
            let t = StdInstant::now();
            let _ = ok(r).await;
            longest = longest.max(t.elapsed());
            calls += 1;
        }
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
    server.signal("CONT");
    eprintln!("store paused 2 s: {calls} calls through Reliable, longest {longest:?}");
    assert!(
        longest < SLACK,
        "a call waited {longest:?} for a paused store"
    );
}

/// 4 processes × 4 threads, each process with one fleet breaker in cached mode decided at once
/// (what `Reliable`'s call engine asks), against one real Redis:
///
/// - it opens within the staleness bound (`refresh + wait`) of when one breaker fed every result
///   of the fleet as it happened would have opened: the store's trip (its last result of the
///   first generation) against the results' own times replayed through one core breaker;
/// - no process admits a call on its view more than `refresh + wait` after the store tripped;
/// - half-open rounds let at most `max_in_flight` (2) probes out fleet-wide, counted by the
///   callers in Redis.
#[test]
fn cached_fleet_of_processes() {
    let server = RedisServer::start();
    let url = server.url();
    let mut conn = server.conn();
    let log_store = RedisStore::open(&url, "fleet").unwrap();

    let ([admitted, _, refused, fallbacks], lines) = run_fleet_lines(&url, "cached-trip");
    let log: Vec<String> = redis::cmd("LRANGE")
        .arg(&log_store.breaker_keys("cached-trip")[3])
        .arg(0)
        .arg(-1)
        .query(&mut conn)
        .unwrap();
    // The store's trip: its last result counted in the first generation (every later one was of
    // an older view, and dropped).
    let t_open = log
        .iter()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            (f[0] == "record" && f[2] == "0").then(|| f[1].parse::<u64>().unwrap())
        })
        .max()
        .expect("results reached the store");
    let counted = log
        .iter()
        .filter(|l| l.starts_with("record ") && l.split(' ').nth(2) == Some("0"))
        .count();
    // One breaker fed every result at the time it happened.
    let mut results: Vec<(u64, bool)> = lines
        .iter()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            (f[0] == "R").then(|| (f[1].parse().unwrap(), f[2] == "F"))
        })
        .collect();
    results.sort();
    let mut one: CircuitBreaker<BreakerPolicy, CountWindow<64>, 16> =
        CircuitBreaker::with_storage(trip_policy()).unwrap();
    let at = |us: u64| reliable_core::Instant::from_nanos(us * 1_000);
    let mut single = None;
    for (n, &(t, failed)) in results.iter().enumerate() {
        if let Ok(p) = one.try_acquire(at(t)) {
            let o = if failed {
                Outcome::Failure
            } else {
                Outcome::Success
            };
            one.record(p, o, at(t));
        }
        if one.generation() != 0 {
            single = Some((t, n + 1));
            break;
        }
    }
    let (t_single, n_single) = single.expect("one breaker would have opened");
    let last_admit = lines
        .iter()
        .filter_map(|l| l.strip_prefix("A ").map(|t| t.parse::<u64>().unwrap()))
        .max()
        .unwrap();
    let bound = (REFRESH + CACHED_WAIT).as_micros() as i64;
    let lag_open = t_open as i64 - t_single as i64;
    let lag_admit = last_admit as i64 - t_open as i64;
    eprintln!(
        "cached trip: {admitted} admitted, {refused} refused, {fallbacks} local; one breaker fed \
         the fleet's results as they happened opens at result {n_single}; the store counted \
         {counted} results and tripped {:.1} ms after it; the last call admitted on a view came \
         {:.1} ms after the trip (bound refresh + wait = {} ms)",
        lag_open as f64 / 1e3,
        lag_admit as f64 / 1e3,
        bound / 1_000
    );
    assert_eq!(fallbacks, 0, "the store was slow");
    // The machine may add a scheduling delay to each (2 cores shared by parallel tests).
    let slack = 100_000;
    assert!(lag_open <= bound + slack, "tripped {lag_open} µs late");
    assert!(
        lag_admit <= bound + slack,
        "admitted {lag_admit} µs after the trip"
    );

    let ([admitted, probes, refused, fallbacks], _) = run_fleet_lines(&url, "cached-probes");
    let most: i64 = redis::cmd("GET")
        .arg("probes-max")
        .query::<Option<i64>>(&mut conn)
        .unwrap()
        .unwrap_or(0);
    eprintln!(
        "cached probes: {admitted} admitted ({probes} probes), {refused} refused, {fallbacks} \
         local; most probes in flight fleet-wide, counted by the callers: {most} (limit 2)"
    );
    assert_eq!(fallbacks, 0, "the store was slow");
    assert!(probes > 5, "too few half-open rounds: {probes}");
    assert!((1..=2).contains(&most), "{most} probes at once");
}

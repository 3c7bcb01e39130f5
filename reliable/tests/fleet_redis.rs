//! The Redis store against a real `redis-server` on 127.0.0.1 (started and ended by each test):
//! the Lua scripts against the core's breaker and budget, the store's faults, credentials.

mod fleet_support;

use std::sync::Arc;

use fleet_support::{RedisServer, Rng};
use reliable::fleet::{
    Answer, BreakerOp, BreakerReply, BreakerSpec, BudgetOp, BudgetSpec, MemoryStore, RedisStore,
    Store,
};
use reliable_core::Duration;
use reliable_core::breaker::{
    BreakerConfig, BreakerPolicy, HalfOpenConfig, OpenConfig, Outcome, ProbeRule, WindowConfig,
};
use reliable_core::budget::RatioConfig;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
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
        Answer::Admitted { .. } => Answer::Admitted { lease: 0 },
        Answer::Probe { .. } => Answer::Probe { lease: 0 },
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
                (Answer::Admitted { lease: rl }, Answer::Admitted { lease: ml })
                | (Answer::Probe { lease: rl }, Answer::Probe { lease: ml }) => {
                    counts[if matches!(r.answer, Answer::Probe { .. }) {
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

/// A URL's password opens the store and is never shown: not in `describe`, `Debug`, errors or
/// events.
#[tokio::test(flavor = "current_thread")]
async fn credentials_are_never_shown() {
    let secret = "s3cret-Pa55word";
    let server = RedisServer::start_on(fleet_support::free_port(), &["--requirepass", secret]);
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

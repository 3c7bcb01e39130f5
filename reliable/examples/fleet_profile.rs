//! The cost of a fleet breaker's decision.
//!
//! ```sh
//! cargo build -p reliablekit --features fleet-redis --example fleet_profile --release
//! # Latency through a Redis on loopback (start one: redis-server --port 6390 --save '' --appendonly no):
//! target/release/examples/fleet_profile latency redis://127.0.0.1:6390 20000
//! # Instructions per call under callgrind: (Ir(2N) - Ir(N)) / N.
//! valgrind --tool=callgrind target/release/examples/fleet_profile cached 100000
//! valgrind --tool=callgrind target/release/examples/fleet_profile local 100000
//! ```
//!
//! `latency` times acquire + record pairs one after another on one task: exact mode (each a
//! round trip), then cached mode (decisions on the view; its refresh runs in the background),
//! and prints p50, p99 and the maximum of each. `cached` runs acquire + record on a cached fleet
//! breaker over the in-memory store (refresh every second: the view never goes stale here; the
//! results are sent in batches of 256); `local` runs the same on the core breaker alone, behind a
//! mutex, as the fleet breaker keeps its local fallback.

use std::hint::black_box;
use std::sync::{Arc, Mutex};
use std::time::Duration as StdDuration;

use reliable::fleet::{BreakerSpec, FleetBreaker, FleetConfig, MemoryStore, Mode, RedisStore};
use reliable_core::breaker::{
    BreakerConfig, BreakerPolicy, CircuitBreaker, CountWindow, HalfOpenConfig, OpenConfig, Outcome,
};
use reliable_core::{Duration, Instant};

fn policy() -> BreakerPolicy {
    BreakerPolicy::new(BreakerConfig {
        failure_rate: Some(0.5),
        minimum_calls: 20,
        open: OpenConfig {
            duration: Duration::from_secs(30),
            growth: 1.0,
            max: None,
            jitter: 0.0,
            strictly_after: false,
        },
        half_open: HalfOpenConfig {
            max_in_flight: Some(1),
            probe_timeout: Duration::from_secs(10),
            ..BreakerConfig::new().half_open
        },
        ..BreakerConfig::new()
    })
    .expect("a valid policy")
}

fn percentiles(mut v: Vec<StdDuration>) -> String {
    v.sort();
    let at = |q: f64| v[((v.len() as f64 * q) as usize).min(v.len() - 1)];
    format!(
        "p50 {:>9.1?}  p99 {:>9.1?}  max {:>9.1?}",
        at(0.50),
        at(0.99),
        v[v.len() - 1]
    )
}

async fn latency(url: &str, n: usize) {
    let store = Arc::new(RedisStore::open(url, "profile").expect("a store URL"));
    store.warm_up().await.expect("the store answers");
    let spec = BreakerSpec::new(&policy()).expect("a fleet policy");
    for (label, mode) in [
        ("exact", Mode::Exact),
        (
            "cached (refresh 10 ms)",
            Mode::Cached {
                refresh: StdDuration::from_millis(10),
            },
        ),
    ] {
        let config = FleetConfig {
            mode,
            // Generous: this measures the store, not the fallback.
            wait: StdDuration::from_millis(100),
            ..FleetConfig::default()
        };
        let b = FleetBreaker::new(store.clone(), &format!("p-{}", n), spec.clone(), config)
            .expect("a fleet breaker");
        let (mut acquire, mut record) = (Vec::with_capacity(n), Vec::with_capacity(n));
        for i in 0..n + 1_000 {
            let t = std::time::Instant::now();
            let p = b.acquire().await.expect("closed");
            let a = t.elapsed();
            let t = std::time::Instant::now();
            b.record(p, Outcome::Success).await;
            let r = t.elapsed();
            // The first thousand warm up.
            if i >= 1_000 {
                acquire.push(a);
                record.push(r);
            }
        }
        let s = b.stats();
        println!("{label:<24} acquire {}", percentiles(acquire));
        println!("{:<24} record  {}", "", percentiles(record));
        println!(
            "{:<24} store calls {}, fallbacks {}, cached decisions {}",
            "",
            reliable::fleet::FleetStats::get(&s.store_calls),
            reliable::fleet::FleetStats::get(&s.fallbacks),
            reliable::fleet::FleetStats::get(&s.cached)
        );
    }
}

async fn cached(n: usize) {
    let store = Arc::new(MemoryStore::new("profile"));
    let spec = BreakerSpec::new(&policy()).expect("a fleet policy");
    let config = FleetConfig {
        mode: Mode::Cached {
            refresh: StdDuration::from_secs(1),
        },
        ..FleetConfig::default()
    };
    let b = FleetBreaker::new(store, "p", spec, config).expect("a fleet breaker");
    // The first call fetches the view.
    let p = b.acquire().await.expect("closed");
    b.record(p, Outcome::Success).await;
    for i in 0..n {
        let p = black_box(b.acquire().await.expect("closed"));
        b.record(p, Outcome::Success).await;
        if i % 256 == 255 {
            // Let the batch of results go to the store.
            tokio::task::yield_now().await;
        }
    }
}

fn local(n: usize) {
    let b: Mutex<CircuitBreaker<BreakerPolicy, CountWindow<64>, 16>> =
        Mutex::new(CircuitBreaker::with_storage(policy()).expect("a breaker"));
    let origin = std::time::Instant::now();
    for _ in 0..n {
        let now = Instant::from_nanos(origin.elapsed().as_nanos() as u64);
        let p = black_box(
            b.lock()
                .expect("not poisoned")
                .try_acquire(now)
                .expect("closed"),
        );
        let now = Instant::from_nanos(origin.elapsed().as_nanos() as u64);
        b.lock()
            .expect("not poisoned")
            .record(p, Outcome::Success, now);
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    match args.get(1).map(String::as_str) {
        Some("latency") => {
            let url = args.get(2).map_or("redis://127.0.0.1:6379", String::as_str);
            let n = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(20_000);
            rt.block_on(latency(url, n));
        }
        Some("cached") => {
            let n = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(100_000);
            rt.block_on(cached(n));
        }
        Some("local") => {
            let n = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(100_000);
            local(n);
        }
        _ => eprintln!("usage: fleet_profile latency URL N | cached N | local N"),
    }
}

//! One fleet retry budget, two faces: the simulator's model (`sim`'s fleet budget, what `sim run`
//! runs for `budget_scope: Fleet(..)`) and the service's (`reliable::fleet::FleetBudget` as a
//! `Reliable`'s call engine asks it: `first_try`, `try_retry_now`), driven by the same first
//! tries and retries of several client instances at the same instants, over a store that answers
//! at once (the simulator's round trip 0; the service's `MemoryStore`) and refuses every operation
//! for a window (a `FailFast` outage): every retry is granted or refused alike.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use reliable::fleet::{
    BreakerOp, BreakerReply, BreakerSpec, BudgetOp, BudgetReply, BudgetSpec, BulkheadOp,
    BulkheadReply, BulkheadSpec, FleetBudget, MemoryStore, RateReply, RateSpec, Store, StoreError,
    StoreErrorKind, StoreFuture,
};
use reliable_core::Instant;
use reliable_core::budget::{Budget, BudgetConfig, BudgetPolicy, RatioConfig};
use reliable_core::outcome::ErrorClass;
use reliable_core::policy::FleetScope;
use sim::emulation::fleet_budget::{
    BudgetSlot, FleetBudgetClient, FleetBudgetCounters, FleetRetries, StoreSim,
};

/// The memory store, refusing every operation at once while `refusing` is set.
#[derive(Debug)]
struct Refusing {
    memory: MemoryStore,
    refusing: AtomicBool,
}

impl Refusing {
    fn refused<T: Send + 'static>(&self) -> Option<StoreFuture<'static, T>> {
        self.refusing.load(Ordering::Relaxed).then(|| {
            let e = StoreError {
                kind: StoreErrorKind::Unavailable,
                message: "connection refused".into(),
            };
            Box::pin(async move { Err(e) }) as StoreFuture<'static, T>
        })
    }
}

impl Store for Refusing {
    fn breaker<'a>(
        &'a self,
        name: &'a str,
        spec: &'a BreakerSpec,
        now_us: u64,
        op: BreakerOp,
    ) -> StoreFuture<'a, BreakerReply> {
        self.refused()
            .unwrap_or_else(|| self.memory.breaker(name, spec, now_us, op))
    }
    fn budget<'a>(
        &'a self,
        name: &'a str,
        spec: &'a BudgetSpec,
        now_us: u64,
        op: BudgetOp,
    ) -> StoreFuture<'a, BudgetReply> {
        self.refused()
            .unwrap_or_else(|| self.memory.budget(name, spec, now_us, op))
    }
    fn rate<'a>(
        &'a self,
        name: &'a str,
        spec: &'a RateSpec,
        now_us: u64,
    ) -> StoreFuture<'a, RateReply> {
        self.refused()
            .unwrap_or_else(|| self.memory.rate(name, spec, now_us))
    }
    fn bulkhead<'a>(
        &'a self,
        name: &'a str,
        spec: &'a BulkheadSpec,
        now_us: u64,
        op: BulkheadOp,
    ) -> StoreFuture<'a, BulkheadReply> {
        self.refused()
            .unwrap_or_else(|| self.memory.bulkhead(name, spec, now_us, op))
    }
    fn describe(&self) -> String {
        "refusing".into()
    }
}

/// A deterministic generator (splitmix64).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)) % n
    }
}

const CLIENTS: usize = 5;
/// The store refuses every operation in `[REFUSE_FROM, REFUSE_UNTIL)` ms.
const REFUSE_FROM: u64 = 8_000;
const REFUSE_UNTIL: u64 = 11_000;

/// Retry answers of both faces for one scope: (service, simulator), in event order.
async fn both(scope_ron: &str, ratio_ron: &str, seed: u64) -> (Vec<bool>, Vec<bool>) {
    let scope: FleetScope = ron::from_str(scope_ron).unwrap();
    let ratio: RatioConfig = ron::from_str(ratio_ron).unwrap();
    // The service: one FleetBudget per instance over one store, as `Route::fleet_builder`
    // makes them (its chunk is the loader's default).
    let store = Arc::new(Refusing {
        memory: MemoryStore::new("conformance"),
        refusing: AtomicBool::new(false),
    });
    let config = reliable::policy::fleet_config(&scope);
    let service: Vec<FleetBudget> = (0..CLIENTS)
        .map(|_| {
            FleetBudget::new(
                store.clone(),
                "orders:budget",
                BudgetSpec::new(ratio).unwrap(),
                config,
                reliable::policy::DEFAULT_BUDGET_CHUNK,
                None,
            )
            .unwrap()
        })
        .collect();
    // The simulator: the store's budget, each client's own and its state.
    let policy = BudgetPolicy::new(BudgetConfig::Ratio(ratio)).unwrap();
    let mut fleet = BudgetSlot::new(&policy).unwrap();
    let mut locals: Vec<BudgetSlot> = (0..CLIENTS)
        .map(|_| BudgetSlot::new(&policy).unwrap())
        .collect();
    let mut states = vec![FleetBudgetClient::default(); CLIENTS];
    let sim_store: sim::scenario::Store = ron::from_str(&format!(
        r#"(name: "s", round_trip: Constant("0s"), faults: [Outage(from: "{REFUSE_FROM}ms", until: "{REFUSE_UNTIL}ms", mode: FailFast)])"#
    ))
    .unwrap();
    let mut sim_store = StoreSim::new(&sim_store, 0, seed);
    let mut counters = FleetBudgetCounters::default();
    let width_ns = ratio.ttl.as_nanos() / u64::from(ratio.slots);

    let (mut served, mut simulated) = (Vec::new(), Vec::new());
    let mut rng = Rng(seed);
    let mut now_ms = 0;
    while now_ms < 20_000 {
        let step = 1 + rng.below(12);
        now_ms += step;
        tokio::time::advance(std::time::Duration::from_millis(step)).await;
        store.refusing.store(
            (REFUSE_FROM..REFUSE_UNTIL).contains(&now_ms),
            Ordering::Relaxed,
        );
        let c = rng.below(CLIENTS as u64) as usize;
        let now = Instant::from_millis(now_ms);
        let mut model = FleetRetries {
            client: &mut states[c],
            fleet: &mut fleet,
            local: &mut locals[c],
            store: &mut sim_store,
            scope,
            network_down: false,
            width_ns,
            counters: &mut counters,
        };
        // Mostly first tries: a storm's retries are a share of its first tries.
        if rng.below(10) < 6 {
            service[c].first_try();
            model.on_first_try(now);
        } else {
            served.push(service[c].try_retry_now().is_ok());
            simulated.push(model.try_retry(ErrorClass::Transient, now).is_ok());
        }
        // The store's answers (a spawned operation on a store that answers at once) land
        // before the next instant, as the simulator's round trip of 0 has them.
        for _ in 0..8 {
            tokio::task::yield_now().await;
        }
    }
    (served, simulated)
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn the_simulator_decides_a_fleet_budget_as_the_service_does() {
    let ratio = r#"(ratio: 0.2, min_per_sec: 1, ttl: "2s", slots: 10)"#;
    for (scope, seed) in [
        (
            r#"(store: "s", mode: Cached(refresh: "100ms"), wait: "5ms")"#,
            1,
        ),
        (
            r#"(store: "s", mode: Cached(refresh: "1s"), wait: "5ms")"#,
            2,
        ),
        (r#"(store: "s", mode: Exact, wait: "20ms")"#, 3),
        (
            r#"(store: "s", mode: Cached(refresh: "100ms"), wait: "5ms", on_store_failure: Refuse)"#,
            4,
        ),
    ] {
        let (served, simulated) = both(scope, ratio, seed).await;
        let granted = served.iter().filter(|g| **g).count();
        eprintln!(
            "{scope}: {} retries asked, {granted} granted by the service",
            served.len()
        );
        // Both answers and refusals, so that the comparison means something.
        assert!(granted > 50 && granted < served.len() - 50, "{granted}");
        if let Some(i) = served.iter().zip(&simulated).position(|(a, b)| a != b) {
            panic!(
                "{scope}: retry {i} of {}: the service says {}, the simulator {}",
                served.len(),
                served[i],
                simulated[i]
            );
        }
        assert_eq!(served.len(), simulated.len());
    }
}

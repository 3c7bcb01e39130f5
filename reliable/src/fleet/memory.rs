//! The in-memory store: the core's own breaker and budget behind one lock, for tests and for
//! processes that share a store in-process. It is the reference the Redis scripts are compared
//! with: every decision here is reliable-core's.

use std::collections::HashMap;
use std::fmt;
use std::sync::Mutex;

use reliable_core::breaker::{CircuitBreaker, CountWindow, Permit, RejectReason, State};
use reliable_core::budget::{Budget, RatioBudget};
use reliable_core::limit::{
    Completion, LimitPermit, Limiter, LimiterConfig, LimiterPolicy, RateLimiter,
};
use reliable_core::outcome::ErrorClass;
use reliable_core::{Duration, Instant};

use super::store::{
    BreakerAnswer, BreakerOp, BreakerReply, BreakerSpec, BudgetOp, BudgetReply, BudgetSpec,
    BulkheadOp, BulkheadReply, BulkheadSpec, MAX_PROBES, MAX_WINDOW, RateReply, RateSpec, Store,
    StoreError, StoreErrorKind, StoreFuture,
};

/// The core breaker a fleet breaker runs on in memory (and in each process's fallback).
pub(crate) type CoreBreaker = CircuitBreaker<
    reliable_core::breaker::BreakerPolicy,
    CountWindow<{ MAX_WINDOW as usize }>,
    { MAX_PROBES as usize },
>;
/// The core budget a fleet budget runs on in memory (and in each process's fallback).
pub(crate) type CoreBudget = RatioBudget<64>;

struct MemBreaker {
    breaker: CoreBreaker,
    /// Permits out, by lease (a permit not handed back stays here: a test store).
    permits: HashMap<u64, Permit>,
    next: u64,
    /// The latest time seen (an earlier `now` counts as it, as in the core).
    latest: Instant,
}

/// A store in this process's memory: each operation runs reliable-core's breaker or budget under
/// one lock. Its clock (for `now_us` = 0) counts from when it was made.
pub struct MemoryStore {
    namespace: String,
    origin: tokio::time::Instant,
    breakers: Mutex<HashMap<String, MemBreaker>>,
    budgets: Mutex<HashMap<String, CoreBudget>>,
    rates: Mutex<HashMap<String, RateLimiter>>,
    bulkheads: Mutex<HashMap<String, MemBulkhead>>,
}

/// The core's static limiter, its permits kept by lease with their expiry.
struct MemBulkhead {
    limiter: Limiter,
    leases: std::collections::BTreeMap<u64, (LimitPermit, Instant)>,
    next: u64,
}

impl fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryStore")
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}

impl MemoryStore {
    /// An empty store; names are kept apart by `namespace`.
    pub fn new(namespace: &str) -> Self {
        MemoryStore {
            namespace: namespace.to_owned(),
            origin: tokio::time::Instant::now(),
            breakers: Mutex::new(HashMap::new()),
            budgets: Mutex::new(HashMap::new()),
            rates: Mutex::new(HashMap::new()),
            bulkheads: Mutex::new(HashMap::new()),
        }
    }

    fn now(&self, now_us: u64) -> Instant {
        if now_us == 0 {
            let us = self.origin.elapsed().as_micros() as u64;
            Instant::from_nanos(us.saturating_mul(1_000))
        } else {
            Instant::from_nanos(now_us.saturating_mul(1_000))
        }
    }

    fn key(&self, kind: &str, name: &str) -> String {
        format!("{}:{kind}:{name}", self.namespace)
    }

    /// The breaker operation, run on the core's breaker.
    pub(crate) fn breaker_now(
        &self,
        name: &str,
        spec: &BreakerSpec,
        now: Instant,
        op: BreakerOp,
    ) -> Result<BreakerReply, StoreError> {
        let mut map = self.breakers.lock().unwrap_or_else(|e| e.into_inner());
        let key = self.key("breaker", name);
        if !map.contains_key(&key) {
            let breaker = CoreBreaker::with_storage(spec.policy).map_err(refused)?;
            map.insert(
                key.clone(),
                MemBreaker {
                    breaker,
                    permits: HashMap::new(),
                    next: 1,
                    latest: Instant::ZERO,
                },
            );
        }
        let Some(b) = map.get_mut(&key) else {
            return Err(refused("just inserted"));
        };
        b.latest = b.latest.max(now);
        let now = b.latest;
        let answer = match op {
            BreakerOp::Acquire => match b.breaker.try_acquire(now) {
                Ok(permit) => {
                    let lease = b.next;
                    b.next += 1;
                    let probe = permit.is_probe();
                    b.permits.insert(lease, permit);
                    if probe {
                        BreakerAnswer::Probe { lease }
                    } else {
                        BreakerAnswer::Admitted { lease }
                    }
                }
                Err(r) => match r.reason {
                    RejectReason::Open { retry_after } => BreakerAnswer::Open { retry_after },
                    _ => BreakerAnswer::HalfOpenFull,
                },
            },
            BreakerOp::Record { lease, outcome, .. } => {
                if let Some(permit) = b.permits.remove(&lease) {
                    b.breaker.record(permit, outcome, now);
                }
                BreakerAnswer::Done
            }
            BreakerOp::Batch {
                generation,
                outcomes,
            } => {
                for outcome in outcomes {
                    if u64::from(b.breaker.generation()) != generation
                        || b.breaker.state(now) != State::Closed
                    {
                        break;
                    }
                    if let Ok(permit) = b.breaker.try_acquire(now) {
                        b.breaker.record(permit, outcome, now);
                    }
                }
                BreakerAnswer::Done
            }
            BreakerOp::View => BreakerAnswer::Done,
        };
        Ok(reply(&b.breaker, answer, now))
    }

    /// The budget operation, run on the core's budget.
    pub(crate) fn budget_now(
        &self,
        name: &str,
        spec: &BudgetSpec,
        now: Instant,
        op: BudgetOp,
    ) -> Result<BudgetReply, StoreError> {
        let mut map = self.budgets.lock().unwrap_or_else(|e| e.into_inner());
        let key = self.key("budget", name);
        if !map.contains_key(&key) {
            map.insert(key.clone(), CoreBudget::new(spec.policy).map_err(refused)?);
        }
        let Some(b) = map.get_mut(&key) else {
            return Err(refused("just inserted"));
        };
        for _ in 0..op.first_tries {
            b.on_first_try(now);
        }
        let mut granted = 0;
        while granted < op.retries && b.try_retry(ErrorClass::Transient, now).is_ok() {
            granted += 1;
        }
        b.on_request_end(now);
        Ok(BudgetReply {
            granted,
            balance_micros: b
                .micro_balance(now)
                .clamp(i64::MIN as i128, i64::MAX as i128) as i64,
            now_us: now.as_nanos() / 1_000,
        })
    }
}

fn refused(e: impl std::fmt::Display) -> StoreError {
    StoreError::new(StoreErrorKind::Refused, e.to_string())
}

/// The reply for the breaker's state after an operation, as the Redis script reports it.
fn reply(b: &CoreBreaker, answer: BreakerAnswer, now: Instant) -> BreakerReply {
    let until_us = match b.retry_after(now) {
        Some(left) => (now + left).as_nanos() / 1_000,
        None => 0,
    };
    BreakerReply {
        answer,
        generation: u64::from(b.generation()),
        // As the core shows it: an open breaker whose time is up reads as half-open.
        state: b.state(now),
        until_us,
        now_us: now.as_nanos() / 1_000,
        probes_in_flight: b.probes_in_flight(),
    }
}

impl MemoryStore {
    /// The rate limit's call, run on the core's limiter.
    pub(crate) fn rate_now(&self, name: &str, spec: &RateSpec, now: Instant) -> RateReply {
        let mut map = self.rates.lock().unwrap_or_else(|e| e.into_inner());
        let l = map
            .entry(self.key("rate", name))
            .or_insert_with(|| RateLimiter::new(spec.policy));
        let (admitted, retry_after) = match l.try_acquire(now) {
            Ok(()) => (true, Duration::ZERO),
            Err(r) => (false, r.retry_after),
        };
        RateReply {
            admitted,
            retry_after,
            now_us: now.as_nanos() / 1_000,
        }
    }
}

impl MemoryStore {
    /// The bulkhead's call, run on the core's static limiter (expired leases released first).
    pub(crate) fn bulkhead_now(
        &self,
        name: &str,
        spec: &BulkheadSpec,
        now: Instant,
        op: BulkheadOp,
    ) -> Result<BulkheadReply, StoreError> {
        let mut map = self.bulkheads.lock().unwrap_or_else(|e| e.into_inner());
        let key = self.key("bulkhead", name);
        if !map.contains_key(&key) {
            let policy = LimiterPolicy::new(LimiterConfig::bulkhead(spec.max)).map_err(refused)?;
            map.insert(
                key.clone(),
                MemBulkhead {
                    limiter: Limiter::new(policy),
                    leases: std::collections::BTreeMap::new(),
                    next: 0,
                },
            );
        }
        let Some(b) = map.get_mut(&key) else {
            return Err(refused("just inserted"));
        };
        let expired: Vec<u64> = b
            .leases
            .iter()
            .filter(|(_, (_, until))| *until <= now)
            .map(|(id, _)| *id)
            .collect();
        for id in expired {
            if let Some((permit, _)) = b.leases.remove(&id) {
                b.limiter.release(permit, Completion::Ignored, now);
            }
        }
        let (mut admitted, mut lease) = (false, 0);
        match op {
            BulkheadOp::Acquire => {
                if let Ok(permit) = b.limiter.try_acquire(now) {
                    b.next += 1;
                    lease = b.next;
                    admitted = true;
                    let until = now.saturating_add(Duration::from_micros(spec.lease_us));
                    b.leases.insert(lease, (permit, until));
                }
            }
            BulkheadOp::Release { lease: id } => {
                if let Some((permit, _)) = b.leases.remove(&id) {
                    b.limiter.release(permit, Completion::Ignored, now);
                }
            }
        }
        Ok(BulkheadReply {
            admitted,
            lease,
            in_flight: b.limiter.in_flight(),
            now_us: now.as_nanos() / 1_000,
        })
    }
}

// Each operation runs when its future is first polled, as a round trip to a real store does: a
// future made and dropped unpolled (a caller resting after failures refuses it) changes nothing.
impl Store for MemoryStore {
    fn bulkhead<'a>(
        &'a self,
        name: &'a str,
        spec: &'a BulkheadSpec,
        now_us: u64,
        op: BulkheadOp,
    ) -> StoreFuture<'a, BulkheadReply> {
        Box::pin(async move { self.bulkhead_now(name, spec, self.now(now_us), op) })
    }

    fn rate<'a>(
        &'a self,
        name: &'a str,
        spec: &'a RateSpec,
        now_us: u64,
    ) -> StoreFuture<'a, RateReply> {
        Box::pin(async move { Ok(self.rate_now(name, spec, self.now(now_us))) })
    }

    fn breaker<'a>(
        &'a self,
        name: &'a str,
        spec: &'a BreakerSpec,
        now_us: u64,
        op: BreakerOp,
    ) -> StoreFuture<'a, BreakerReply> {
        Box::pin(async move { self.breaker_now(name, spec, self.now(now_us), op) })
    }

    fn budget<'a>(
        &'a self,
        name: &'a str,
        spec: &'a BudgetSpec,
        now_us: u64,
        op: BudgetOp,
    ) -> StoreFuture<'a, BudgetReply> {
        Box::pin(async move { self.budget_now(name, spec, self.now(now_us), op) })
    }

    fn describe(&self) -> String {
        format!("memory:{}", self.namespace)
    }
}

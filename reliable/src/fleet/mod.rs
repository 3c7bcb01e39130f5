//! Fleet-wide state: circuit breakers, retry budgets, rate limits and bulkheads shared by every
//! process of a service through a store (Redis, or memory for tests), by name, in a namespace.
//!
//! Every process keeping its own state fails both ways: 200 instances each seeing 2 calls a
//! second never reach a breaker's `minimum_calls` while the downstream drowns, and the same 200
//! instances each send their own half-open probes and their own budget's worth of retries. A
//! [`FleetBreaker`] is one breaker for the fleet (trips at the threshold one breaker would,
//! at most `max_in_flight` probes fleet-wide); a [`FleetBudget`] is one ratio budget for the fleet;
//! a [`FleetRateLimiter`] is one GCRA rate limit for the fleet; a [`FleetBulkhead`] counts the
//! fleet's calls in flight against one limit.
//!
//! # The rules are the core's
//!
//! The [`MemoryStore`] runs reliable-core's `CircuitBreaker`, `RatioBudget`, `RateLimiter` and
//! static `Limiter` behind a lock.
//! The [`RedisStore`] (feature `fleet-redis`; Redis 7.0 or later) runs four Lua scripts
//! (`breaker.lua`, `budget.lua`, `rate.lua`, `bulkhead.lua` in this folder), each a
//! transcription of the core's rules that names where they come from (the breaker's names each
//! line of the core's transition table it encodes); the tests drive the scripts and the core with
//! the same random operations and compare every answer. Each process's fallback is the core's
//! breaker, budget or limiter itself. Time is the Redis server's clock, in microseconds.
//!
//! A result whose fate is unknown (the store timed out after the script may have run) is not
//! sent again: a result counts at most once. Scripts run whole or not at all (an out-of-memory
//! Redis refuses them up front).
//!
//! # Two modes
//!
//! - [`Mode::Exact`]: one round trip per decision.
//! - [`Mode::Cached`]: decisions on a view refreshed in the background at least every `refresh`;
//!   see [`FleetBreaker`] and [`FleetBudget`] for the staleness bound each documents.
//!
//! # Inside a `Reliable`
//!
//! [`Builder::fleet_breaker`](crate::Builder::fleet_breaker) and
//! [`Builder::fleet_budget`](crate::Builder::fleet_budget) put a fleet breaker and budget in place
//! of an instance's own: async calls, blocking calls and the tower layer ask them through the core's
//! call engine, which decides at once ([`FleetBreaker::decide`], [`FleetBudget::try_retry_now`]),
//! on the cached view; probes stay the store's.
//!
//! # The store is never the outage
//!
//! A decision waits for the store at most [`FleetConfig::wait`] (default 5 ms). When the store is
//! slow, down, restarted empty, out of memory or answers garbage, the process decides on its own
//! state ([`OnStoreFailure::Local`], the default) or refuses ([`OnStoreFailure::Refuse`]),
//! counts it in [`FleetStats::fallbacks`], tells [`FleetEvent::StoreDown`] once, leaves the
//! store alone for [`FleetConfig::rest`], and when the store answers again sends it the results
//! decided locally meanwhile and tells [`FleetEvent::StoreUp`]. Store URLs are shown only through
//! [`redact_url`]: credentials are never logged or returned.
//!
//! ```
//! use std::sync::Arc;
//! use reliable::fleet::{BreakerSpec, FleetBreaker, FleetConfig, MemoryStore};
//! use reliable_core::breaker::{BreakerConfig, BreakerPolicy, HalfOpenConfig, Outcome};
//! use reliable_core::Duration;
//!
//! # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
//! let store = Arc::new(MemoryStore::new("shop"));
//! // Two failures in a row open it for 20 s; then one probe, with a lease of 10 s (a process
//! // that dies mid-probe must not wedge the fleet).
//! let config = BreakerConfig::layered_exercise();
//! let half_open = HalfOpenConfig { probe_timeout: Duration::from_secs(10), ..config.half_open };
//! let policy = BreakerPolicy::new(BreakerConfig { half_open, ..config }).unwrap();
//! let spec = BreakerSpec::new(&policy).unwrap();
//! // Two processes' breakers on one store and name: one breaker.
//! let a = FleetBreaker::new(store.clone(), "payments", spec.clone(), FleetConfig::default()).unwrap();
//! let b = FleetBreaker::new(store, "payments", spec, FleetConfig::default()).unwrap();
//! let p = a.acquire().await.unwrap();
//! a.record(p, Outcome::Failure).await;
//! let p = b.acquire().await.unwrap();
//! b.record(p, Outcome::Failure).await;
//! // Two failures in a row, one from each: the fleet's breaker is open for both.
//! assert!(a.acquire().await.is_err());
//! # });
//! ```

mod fleet_breaker;
mod fleet_budget;
mod fleet_bulkhead;
mod fleet_rate;
mod gates;
mod guard;
mod memory;
#[cfg(feature = "fleet-redis")]
mod redis_store;
mod store;

pub use fleet_breaker::{Decider, FleetBreaker, FleetPermit, FleetReason, FleetRejection};
pub use fleet_budget::{BudgetDenied, DEPOSIT_AFTER, DEPOSIT_EVERY, FleetBudget};
pub use fleet_bulkhead::{BulkheadFull, FleetBulkhead, FleetSlot};
pub use fleet_rate::{FleetRateLimiter, RateRefused};
pub use gates::{EngineBudget, FleetGates};
pub use guard::{EventSink, FleetConfig, FleetEvent, FleetStats, Mode, OnStoreFailure};
pub use memory::MemoryStore;
#[cfg(feature = "fleet-redis")]
pub use redis_store::RedisStore;
pub use store::{
    BreakerAnswer, BreakerOp, BreakerReply, BreakerSpec, BudgetOp, BudgetReply, BudgetSpec,
    BulkheadOp, BulkheadReply, BulkheadSpec, MAX_PROBES, MAX_SLOTS, MAX_WINDOW, RateReply,
    RateSpec, SpecError, Store, StoreError, StoreErrorKind, StoreFuture, redact_url,
};

//! A concurrency limit shared by a fleet of processes through a [`Store`].

use std::fmt;
use std::sync::{Arc, Mutex};

use reliable_core::Instant;
use reliable_core::limit::{Completion, LimitPermit, Limiter, LimiterConfig, LimiterPolicy};

use super::fleet_breaker::Decider;
use super::guard::{EventSink, FleetConfig, FleetStats, Guard, OnStoreFailure};
use super::store::{BulkheadOp, BulkheadSpec, SpecError, Store, check_name};

/// A call the bulkhead refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BulkheadFull {
    /// Who decided.
    pub decided_by: Decider,
    /// Whether the store's failure refused it ([`OnStoreFailure::Refuse`]).
    pub store_unavailable: bool,
}

impl fmt::Display for BulkheadFull {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.store_unavailable {
            f.write_str("fleet store unavailable; no call")
        } else {
            write!(f, "fleet bulkhead full (decided by {:?})", self.decided_by)
        }
    }
}

impl std::error::Error for BulkheadFull {}

/// A slot of a [`FleetBulkhead`]; give it back with [`FleetBulkhead::release`].
#[must_use = "a slot is held until it is released or its lease runs out"]
#[derive(Debug)]
pub struct FleetSlot {
    lease: Option<u64>,
    local: Option<LimitPermit>,
}

impl FleetSlot {
    /// Who admitted the call.
    pub fn decided_by(&self) -> Decider {
        if self.lease.is_some() {
            Decider::Store
        } else {
            Decider::Local
        }
    }
}

/// The core's static concurrency limit shared by a fleet: at most `max` calls in flight
/// fleet-wide, each slot a lease (a process that dies mid-call gives its slots back when they run
/// out). One round trip to take a slot and one to give it back. While the store fails, each
/// process decides on its own bulkhead of `local` calls, or refuses ([`OnStoreFailure::Refuse`]).
#[derive(Clone)]
pub struct FleetBulkhead {
    inner: Arc<Inner>,
}

struct Inner {
    name: String,
    spec: BulkheadSpec,
    store: Arc<dyn Store>,
    config: FleetConfig,
    guard: Guard,
    local: Mutex<Limiter>,
    origin: tokio::time::Instant,
}

impl fmt::Debug for FleetBulkhead {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FleetBulkhead")
            .field("name", &self.inner.name)
            .field("store", &self.inner.store.describe())
            .finish_non_exhaustive()
    }
}

impl FleetBulkhead {
    /// The bulkhead `name` in `store`; `local` calls at once while the store fails.
    pub fn new(
        store: Arc<dyn Store>,
        name: &str,
        spec: BulkheadSpec,
        local: u32,
        config: FleetConfig,
        events: Option<EventSink>,
    ) -> Result<Self, SpecError> {
        check_name(name)?;
        let local = Limiter::new(LimiterPolicy::new(LimiterConfig::bulkhead(local))?);
        Ok(FleetBulkhead {
            inner: Arc::new(Inner {
                name: name.to_owned(),
                guard: Guard::new(name, &config, events)?,
                spec,
                store,
                config,
                local: Mutex::new(local),
                origin: tokio::time::Instant::now(),
            }),
        })
    }

    /// Counts of this process's dealings with the store.
    pub fn stats(&self) -> &FleetStats {
        &self.inner.guard.stats
    }

    fn now(&self) -> Instant {
        Instant::from_nanos(self.inner.origin.elapsed().as_nanos() as u64)
    }

    /// Asks for a slot.
    pub async fn acquire(&self) -> Result<FleetSlot, BulkheadFull> {
        let i = &self.inner;
        let op = BulkheadOp::Acquire;
        match i.guard.run(i.store.bulkhead(&i.name, &i.spec, 0, op)).await {
            Ok(reply) if reply.admitted => {
                i.guard.up(0);
                Ok(FleetSlot {
                    lease: Some(reply.lease),
                    local: None,
                })
            }
            Ok(_) => {
                i.guard.up(0);
                Err(BulkheadFull {
                    decided_by: Decider::Store,
                    store_unavailable: false,
                })
            }
            Err(_) => {
                i.guard.fallback();
                match i.config.on_store_failure {
                    OnStoreFailure::Refuse => Err(BulkheadFull {
                        decided_by: Decider::Local,
                        store_unavailable: true,
                    }),
                    OnStoreFailure::Local => {
                        let mut l = i.local.lock().unwrap_or_else(|e| e.into_inner());
                        match l.try_acquire(self.now()) {
                            Ok(p) => Ok(FleetSlot {
                                lease: None,
                                local: Some(p),
                            }),
                            Err(_) => Err(BulkheadFull {
                                decided_by: Decider::Local,
                                store_unavailable: false,
                            }),
                        }
                    }
                }
            }
        }
    }

    /// Gives a slot back (a store that fails lets the lease run out instead).
    pub async fn release(&self, slot: FleetSlot) {
        let i = &self.inner;
        if let Some(p) = slot.local {
            i.local.lock().unwrap_or_else(|e| e.into_inner()).release(
                p,
                Completion::Ignored,
                self.now(),
            );
        }
        if let Some(lease) = slot.lease {
            let op = BulkheadOp::Release { lease };
            // On a failure the lease runs out by itself.
            let _ = i.guard.run(i.store.bulkhead(&i.name, &i.spec, 0, op)).await;
        }
    }
}

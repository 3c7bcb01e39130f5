//! A rate limit shared by a fleet of processes through a [`Store`].

use std::fmt;
use std::sync::{Arc, Mutex};

use reliable_core::limit::{RateConfig, RateLimiter, RatePolicy};
use reliable_core::{Duration, Instant};

use super::fleet_breaker::Decider;
use super::guard::{EventSink, FleetConfig, FleetStats, Guard, OnStoreFailure};
use super::store::{RateSpec, SpecError, Store, check_name};

/// A call the rate limit refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateRefused {
    /// When a call would next be admitted (unknown when the store's failure refused it).
    pub retry_after: Option<Duration>,
    /// Who decided.
    pub decided_by: Decider,
}

impl fmt::Display for RateRefused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.retry_after {
            Some(d) => write!(f, "fleet rate limit: retry after {d}"),
            None => f.write_str("fleet store unavailable; no call"),
        }
    }
}

impl std::error::Error for RateRefused {}

/// The core's GCRA rate limiter shared by every process using the same store and name: at most
/// `burst + ⌊d / interval⌋` calls fleet-wide over any span `d`. Each call is one round trip
/// (the mode is exact whatever [`FleetConfig::mode`] says). While the store fails, each process
/// decides on its own limiter of the `local` config (a share of the fleet's rate is the caller's
/// choice), or refuses ([`OnStoreFailure::Refuse`]).
#[derive(Clone)]
pub struct FleetRateLimiter {
    inner: Arc<Inner>,
}

struct Inner {
    name: String,
    spec: RateSpec,
    store: Arc<dyn Store>,
    config: FleetConfig,
    guard: Guard,
    local: Mutex<RateLimiter>,
    origin: tokio::time::Instant,
}

impl fmt::Debug for FleetRateLimiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FleetRateLimiter")
            .field("name", &self.inner.name)
            .field("store", &self.inner.store.describe())
            .finish_non_exhaustive()
    }
}

impl FleetRateLimiter {
    /// The rate limit `name` in `store` at `fleet`'s rate; `local` decides while the store fails.
    pub fn new(
        store: Arc<dyn Store>,
        name: &str,
        fleet: RateConfig,
        local: RateConfig,
        config: FleetConfig,
        events: Option<EventSink>,
    ) -> Result<Self, SpecError> {
        check_name(name)?;
        let local = RateLimiter::new(RatePolicy::new(local)?);
        Ok(FleetRateLimiter {
            inner: Arc::new(Inner {
                name: name.to_owned(),
                spec: RateSpec::new(fleet)?,
                guard: Guard::new(name, &config, events)?,
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

    /// Asks to make one call.
    pub async fn acquire(&self) -> Result<(), RateRefused> {
        let i = &self.inner;
        match i.guard.run(i.store.rate(&i.name, &i.spec, 0)).await {
            Ok(reply) => {
                i.guard.up(0);
                if reply.admitted {
                    Ok(())
                } else {
                    Err(RateRefused {
                        retry_after: Some(reply.retry_after),
                        decided_by: Decider::Store,
                    })
                }
            }
            Err(_) => {
                i.guard.fallback();
                match i.config.on_store_failure {
                    OnStoreFailure::Refuse => Err(RateRefused {
                        retry_after: None,
                        decided_by: Decider::Local,
                    }),
                    OnStoreFailure::Local => {
                        let now = Instant::from_nanos(i.origin.elapsed().as_nanos() as u64);
                        let mut l = i.local.lock().unwrap_or_else(|e| e.into_inner());
                        l.try_acquire(now).map_err(|r| RateRefused {
                            retry_after: Some(r.retry_after),
                            decided_by: Decider::Local,
                        })
                    }
                }
            }
        }
    }
}

//! How a process waits for its store: never longer than the bound, not at all while the store
//! rests after failing, and with every fallback counted and told.

use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use reliable_core::breaker::{BreakerConfig, BreakerPolicy, CircuitBreaker, NoWindow, Outcome};
use reliable_core::{Duration, Instant};

use super::store::{SpecError, StoreError, StoreErrorKind};

/// What a process does when its store does not answer in time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum OnStoreFailure {
    /// Decide on the process's own state (its local breaker or budget), as if there were no
    /// fleet (the default): a call never fails because the store failed.
    #[default]
    Local,
    /// Refuse the call (a breaker) or the retry (a budget).
    Refuse,
}

/// How decisions use the store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// One round trip per decision (each acquire, each result, each retry asked).
    Exact,
    /// Decide on a view of the fleet's state refreshed in the background at least every
    /// `refresh`; results and first tries go to the store with the next refresh. Half-open probes
    /// are still asked of the store, one round trip each.
    Cached {
        /// How often the view is refreshed (while calls come).
        refresh: std::time::Duration,
    },
}

/// How a fleet breaker or budget uses its store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FleetConfig {
    /// Exact or cached.
    pub mode: Mode,
    /// The longest a decision waits for the store. Default 5 ms.
    pub wait: std::time::Duration,
    /// What to do when the store fails. Default: decide locally.
    pub on_store_failure: OnStoreFailure,
    /// After a failure, how long the store is left alone (decisions are local at once) before
    /// one call asks it again. Default 250 ms.
    pub rest: std::time::Duration,
}

impl Default for FleetConfig {
    fn default() -> Self {
        FleetConfig {
            mode: Mode::Exact,
            wait: std::time::Duration::from_millis(5),
            on_store_failure: OnStoreFailure::Local,
            rest: std::time::Duration::from_millis(250),
        }
    }
}

/// What happened between a process and its store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FleetEvent {
    /// The store failed: decisions are local (or refused) until it answers again.
    StoreDown {
        /// The breaker or budget.
        name: String,
        /// Why.
        error: StoreError,
    },
    /// The store answers again; results decided locally meanwhile were sent to it.
    StoreUp {
        /// The breaker or budget.
        name: String,
        /// How long it was down.
        after: std::time::Duration,
        /// Local results sent to the store.
        reconciled: usize,
    },
}

/// Counts of a fleet breaker's or budget's dealings with its store (also exported through the
/// `metrics` facade with the feature `metrics`).
#[derive(Debug, Default)]
pub struct FleetStats {
    /// Operations sent to the store.
    pub store_calls: AtomicU64,
    /// Operations that failed (timeouts included).
    pub store_errors: AtomicU64,
    /// Operations that ran out of the wait bound.
    pub timeouts: AtomicU64,
    /// Decisions taken locally (or refused) because the store failed or rested.
    pub fallbacks: AtomicU64,
    /// Decisions taken on the cached view.
    pub cached: AtomicU64,
    /// Local results sent to the store when it came back.
    pub reconciled: AtomicU64,
    /// The longest a decision waited for the store, in nanoseconds.
    pub longest_wait_ns: AtomicU64,
}

impl FleetStats {
    /// A count, read.
    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }
}

/// Where events go.
pub type EventSink = Arc<dyn Fn(&FleetEvent) + Send + Sync>;

/// The store's health, as a core breaker: one failure rests the store for `rest`; then one call
/// at a time asks it again.
pub(crate) struct Guard {
    name: String,
    wait: std::time::Duration,
    health: Mutex<CircuitBreaker<BreakerPolicy, NoWindow>>,
    origin: tokio::time::Instant,
    pub(crate) down: AtomicBool,
    down_since: Mutex<Option<tokio::time::Instant>>,
    pub(crate) stats: Arc<FleetStats>,
    events: Option<EventSink>,
}

impl fmt::Debug for Guard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Guard")
            .field("name", &self.name)
            .field("wait", &self.wait)
            .field("down", &self.down)
            .finish_non_exhaustive()
    }
}

impl Guard {
    pub(crate) fn new(
        name: &str,
        config: &FleetConfig,
        events: Option<EventSink>,
    ) -> Result<Self, SpecError> {
        let rest = Duration::from_nanos(config.rest.as_nanos().max(1) as u64);
        let policy = BreakerPolicy::new(BreakerConfig {
            consecutive_failures: Some(1),
            open: reliable_core::breaker::OpenConfig {
                duration: rest,
                growth: 1.0,
                max: None,
                jitter: 0.0,
                strictly_after: false,
            },
            half_open: reliable_core::breaker::HalfOpenConfig {
                max_in_flight: Some(1),
                probe_timeout: Duration::from_secs(10),
                ..BreakerConfig::new().half_open
            },
            ..BreakerConfig::new()
        })?;
        Ok(Guard {
            name: name.to_owned(),
            wait: config.wait,
            health: Mutex::new(CircuitBreaker::with_storage(policy)?),
            origin: tokio::time::Instant::now(),
            down: AtomicBool::new(false),
            down_since: Mutex::new(None),
            stats: Arc::new(FleetStats::default()),
            events,
        })
    }

    fn now(&self) -> Instant {
        Instant::from_nanos(self.origin.elapsed().as_nanos() as u64)
    }

    /// Runs one store operation, waiting at most the bound. `Ok(None)`... never: an error says why
    /// the caller decides without the store.
    pub(crate) async fn run<T>(
        &self,
        op: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        let permit = {
            let mut h = self.health.lock().unwrap_or_else(|e| e.into_inner());
            h.try_acquire(self.now())
        };
        let Ok(permit) = permit else {
            return Err(StoreError::new(
                StoreErrorKind::Unavailable,
                "resting after a failure",
            ));
        };
        self.stats.store_calls.fetch_add(1, Ordering::Relaxed);
        let started = tokio::time::Instant::now();
        let result = match tokio::time::timeout(self.wait, op).await {
            Ok(r) => r,
            Err(_) => {
                self.stats.timeouts.fetch_add(1, Ordering::Relaxed);
                Err(StoreError::new(
                    StoreErrorKind::Timeout,
                    format!("no answer in {:?}", self.wait),
                ))
            }
        };
        let waited = started.elapsed().as_nanos() as u64;
        self.stats
            .longest_wait_ns
            .fetch_max(waited, Ordering::Relaxed);
        let outcome = if result.is_ok() {
            Outcome::Success
        } else {
            Outcome::Failure
        };
        self.health
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .record(permit, outcome, self.now());
        if let Err(e) = &result {
            self.stats.store_errors.fetch_add(1, Ordering::Relaxed);
            self.went_down(e);
        }
        result
    }

    fn went_down(&self, e: &StoreError) {
        if !self.down.swap(true, Ordering::AcqRel) {
            *self.down_since.lock().unwrap_or_else(|e| e.into_inner()) =
                Some(tokio::time::Instant::now());
            self.emit(&FleetEvent::StoreDown {
                name: self.name.clone(),
                error: e.clone(),
            });
        }
    }

    /// Whether the store had failed and now answered: the caller reconciles, then calls `up`.
    pub(crate) fn is_down(&self) -> bool {
        self.down.load(Ordering::Acquire)
    }

    pub(crate) fn up(&self, reconciled: usize) {
        if self.down.swap(false, Ordering::AcqRel) {
            let since = self
                .down_since
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take();
            self.stats
                .reconciled
                .fetch_add(reconciled as u64, Ordering::Relaxed);
            self.emit(&FleetEvent::StoreUp {
                name: self.name.clone(),
                after: since.map(|s| s.elapsed()).unwrap_or_default(),
                reconciled,
            });
        }
    }

    /// A decision taken without the store.
    pub(crate) fn fallback(&self) {
        self.stats.fallbacks.fetch_add(1, Ordering::Relaxed);
        #[cfg(feature = "metrics")]
        metrics::counter!("reliable_fleet_fallbacks_total", "name" => self.name.clone())
            .increment(1);
    }

    fn emit(&self, event: &FleetEvent) {
        #[cfg(feature = "metrics")]
        metrics::gauge!("reliable_fleet_store_down", "name" => self.name.clone()).set(
            match event {
                FleetEvent::StoreDown { .. } => 1.0,
                FleetEvent::StoreUp { .. } => 0.0,
            },
        );
        #[cfg(feature = "tracing")]
        match event {
            FleetEvent::StoreDown { name, error } => {
                tracing::warn!(name = %name, error = %error, "fleet store down: deciding locally")
            }
            FleetEvent::StoreUp {
                name, reconciled, ..
            } => tracing::info!(name = %name, reconciled, "fleet store back"),
        }
        if let Some(sink) = &self.events {
            sink(event);
        }
    }
}

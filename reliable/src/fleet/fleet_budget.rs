//! A retry budget shared by a fleet of processes through a [`Store`].

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use reliable_core::Instant;
use reliable_core::budget::Budget;
use reliable_core::outcome::ErrorClass;

use super::fleet_breaker::Decider;
use super::guard::{EventSink, FleetConfig, FleetStats, Guard, Mode, OnStoreFailure};
use super::memory::CoreBudget;
use super::store::{BudgetOp, BudgetSpec, SpecError, Store, check_name};

/// A retry the budget refused, and who decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BudgetDenied {
    /// Who decided.
    pub decided_by: Decider,
    /// Whether the store's failure refused it ([`OnStoreFailure::Refuse`]), not the ratio.
    pub store_unavailable: bool,
}

impl fmt::Display for BudgetDenied {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.store_unavailable {
            f.write_str("fleet store unavailable; no retry")
        } else {
            write!(
                f,
                "fleet retry budget spent (decided by {:?})",
                self.decided_by
            )
        }
    }
}

impl std::error::Error for BudgetDenied {}

/// A ratio retry budget (the core's [`RatioBudget`](reliable_core::budget::RatioBudget)) shared
/// by every process using the same store and name: retries fleet-wide at most `ratio` × first
/// tries fleet-wide (+ the reserve), over the window.
///
/// Exact mode asks the store for each retry, sending the first tries counted since (one round
/// trip). Cached mode takes up to `chunk` grants at a refresh (when a retry finds none, and when
/// it spends the last) and spends them locally; a grant lasts one slot of the window (`ttl /
/// slots`), or `refresh` if longer. The fleet still never grants more than its ratio, since every
/// grant was withdrawn from the fleet's window first; what cached mode costs is up to `chunk`
/// grants per process that lapse unused, and first tries reaching the store up to `refresh +
/// wait` late (so retries are refused a little more than exactly).
///
/// While the store fails, each process decides on its own core budget (fed with its own first
/// tries throughout), or refuses ([`OnStoreFailure::Refuse`]).
#[derive(Clone)]
pub struct FleetBudget {
    inner: Arc<Inner>,
}

struct Inner {
    name: String,
    spec: BudgetSpec,
    store: Arc<dyn Store>,
    config: FleetConfig,
    chunk: u32,
    guard: Guard,
    local: Mutex<CoreBudget>,
    origin: tokio::time::Instant,
    /// First tries not yet sent to the store, and when they were last sent.
    pending: Mutex<u32>,
    sent_at: Mutex<tokio::time::Instant>,
    sending: AtomicBool,
    /// Cached mode: grants taken from the fleet, and when.
    allowance: Mutex<(u32, Option<tokio::time::Instant>)>,
    refreshing: AtomicBool,
    /// The runtime it was made in, for the background work of a call made outside any.
    runtime: Option<tokio::runtime::Handle>,
}

impl fmt::Debug for FleetBudget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FleetBudget")
            .field("name", &self.inner.name)
            .field("store", &self.inner.store.describe())
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

/// First tries sent to the store in the background once this many wait.
pub const DEPOSIT_EVERY: u32 = 64;
/// First tries sent to the store in the background once the last were sent this long ago.
pub const DEPOSIT_AFTER: std::time::Duration = std::time::Duration::from_millis(100);

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl FleetBudget {
    /// The budget `name` in `store`. `chunk`: grants a process takes at once in cached mode (at
    /// least 1).
    pub fn new(
        store: Arc<dyn Store>,
        name: &str,
        spec: BudgetSpec,
        config: FleetConfig,
        chunk: u32,
        events: Option<EventSink>,
    ) -> Result<Self, SpecError> {
        check_name(name)?;
        let local = CoreBudget::new(spec.policy)?;
        Ok(FleetBudget {
            inner: Arc::new(Inner {
                name: name.to_owned(),
                guard: Guard::new(name, &config, events)?,
                spec,
                store,
                config,
                chunk: chunk.max(1),
                local: Mutex::new(local),
                origin: tokio::time::Instant::now(),
                pending: Mutex::new(0),
                sent_at: Mutex::new(tokio::time::Instant::now()),
                sending: AtomicBool::new(false),
                allowance: Mutex::new((0, None)),
                refreshing: AtomicBool::new(false),
                runtime: tokio::runtime::Handle::try_current().ok(),
            }),
        })
    }

    /// How it uses its store.
    pub fn config(&self) -> &FleetConfig {
        &self.inner.config
    }

    /// Counts of this process's dealings with the store.
    pub fn stats(&self) -> &FleetStats {
        &self.inner.guard.stats
    }

    /// A first try was sent: it deposits `ratio`. First tries go to the store with the next
    /// retry asked, or in the background once [`DEPOSIT_EVERY`] of them or
    /// [`DEPOSIT_AFTER`] have passed, so that a healthy process's traffic counts in the fleet's
    /// window though it never retries.
    pub fn first_try(&self) {
        let i = &self.inner;
        lock(&i.local).on_first_try(i.now());
        let pending = {
            let mut p = lock(&i.pending);
            *p += 1;
            *p
        };
        let due = pending >= DEPOSIT_EVERY || lock(&i.sent_at).elapsed() >= DEPOSIT_AFTER;
        if due && !i.sending.swap(true, Ordering::AcqRel) {
            let me = Arc::clone(&self.inner);
            i.spawn(async move {
                let first_tries = std::mem::take(&mut *lock(&me.pending));
                *lock(&me.sent_at) = tokio::time::Instant::now();
                let op = BudgetOp {
                    first_tries,
                    retries: 0,
                };
                if me
                    .guard
                    .run(me.store.budget(&me.name, &me.spec, 0, op))
                    .await
                    .is_err()
                {
                    *lock(&me.pending) += first_tries;
                }
                me.sending.store(false, Ordering::Release);
            });
        }
    }

    /// Asks for one retry.
    pub async fn try_retry(&self) -> Result<(), BudgetDenied> {
        let i = &self.inner;
        if let Mode::Cached { refresh } = i.config.mode {
            return i.cached(refresh);
        }
        let first_tries = std::mem::take(&mut *lock(&i.pending));
        let op = BudgetOp {
            first_tries,
            retries: 1,
        };
        match i.guard.run(i.store.budget(&i.name, &i.spec, 0, op)).await {
            Ok(reply) => {
                i.guard.up(0);
                if reply.granted == 1 {
                    Ok(())
                } else {
                    Err(BudgetDenied {
                        decided_by: Decider::Store,
                        store_unavailable: false,
                    })
                }
            }
            Err(_) => {
                *lock(&i.pending) += first_tries;
                i.fallback()
            }
        }
    }
}

impl FleetBudget {
    /// Asks for one retry and answers at once, without waiting for the store: what the call
    /// engine asks when this budget is a [`Reliable`](crate::Reliable)'s (the engine is
    /// sans-IO: it cannot wait for a round trip in the middle of a decision).
    ///
    /// The decision is cached mode's (with [`Mode::Exact`], with `wait` as the refresh): a grant
    /// from the allowance taken from the fleet at the last refresh, else a refusal that starts a
    /// refresh. The fleet never grants more than its ratio; a process's first retry after its
    /// allowance ran out or lapsed is refused (size `chunk` for the retry rate: a process holds
    /// at most `chunk` grants that others cannot use).
    pub fn try_retry_now(&self) -> Result<(), BudgetDenied> {
        let i = &self.inner;
        let refresh = match i.config.mode {
            Mode::Cached { refresh } => refresh,
            Mode::Exact => i.config.wait,
        };
        i.cached(refresh)
    }
}

impl Inner {
    /// Runs `fut` on the caller's runtime, else on the one this budget was made in, else not at
    /// all (the allowance then ages, and retries are decided locally once the store is down).
    fn spawn(&self, fut: impl std::future::Future<Output = ()> + Send + 'static) {
        match tokio::runtime::Handle::try_current() {
            Ok(h) => drop(h.spawn(fut)),
            Err(_) => {
                if let Some(h) = &self.runtime {
                    drop(h.spawn(fut));
                }
            }
        }
    }

    fn now(&self) -> Instant {
        Instant::from_nanos(self.origin.elapsed().as_nanos() as u64)
    }

    fn fallback(&self) -> Result<(), BudgetDenied> {
        self.guard.fallback();
        let denied = |store_unavailable| BudgetDenied {
            decided_by: Decider::Local,
            store_unavailable,
        };
        match self.config.on_store_failure {
            OnStoreFailure::Refuse => Err(denied(true)),
            OnStoreFailure::Local => lock(&self.local)
                .try_retry(ErrorClass::Transient, self.now())
                .map(drop)
                .map_err(|_| denied(false)),
        }
    }

    /// A decision on the allowance. Its grants last one slot of the budget's window (`ttl /
    /// slots`), or `refresh` if longer: the fleet's window counts each grant from when it was
    /// taken, and no finer than a slot, so a grant spent within a slot is spent as the window
    /// accounts it. Spending the last grant starts the next refresh at once, so a process that
    /// keeps retrying finds its allowance filled. With no grant, a store not heard from for
    /// `2 × refresh + wait` that is down sends the decision to [`Self::fallback`].
    fn cached(self: &Arc<Self>, refresh: std::time::Duration) -> Result<(), BudgetDenied> {
        let lifetime = refresh.max(std::time::Duration::from_micros(self.spec.width_us));
        let now = tokio::time::Instant::now();
        // Some(grants left) when one was granted; else when the allowance was taken.
        let (left, taken_at) = {
            let mut a = lock(&self.allowance);
            if a.1
                .is_none_or(|t| now.saturating_duration_since(t) >= lifetime)
            {
                a.0 = 0;
            }
            let left = (a.0 > 0).then(|| {
                a.0 -= 1;
                a.0
            });
            (left, a.1)
        };
        if let Some(left) = left {
            self.guard.stats.cached.fetch_add(1, Ordering::Relaxed);
            if left == 0 {
                // The last grant: the next retry then finds grants, not a refusal and a refresh.
                self.start_refresh();
            }
            return Ok(());
        }
        self.start_refresh();
        let stale = taken_at
            .is_none_or(|t| now.saturating_duration_since(t) > refresh * 2 + self.config.wait);
        if stale && self.guard.is_down() {
            return self.fallback();
        }
        Err(BudgetDenied {
            decided_by: Decider::Cache,
            store_unavailable: false,
        })
    }

    fn start_refresh(self: &Arc<Self>) {
        if self.refreshing.swap(true, Ordering::AcqRel) {
            return;
        }
        let me = Arc::clone(self);
        self.spawn(async move {
            let first_tries = std::mem::take(&mut *lock(&me.pending));
            let op = BudgetOp {
                first_tries,
                retries: me.chunk,
            };
            match me
                .guard
                .run(me.store.budget(&me.name, &me.spec, 0, op))
                .await
            {
                Ok(reply) => {
                    me.guard.up(0);
                    *lock(&me.allowance) = (reply.granted, Some(tokio::time::Instant::now()));
                }
                Err(_) => *lock(&me.pending) += first_tries,
            }
            me.refreshing.store(false, Ordering::Release);
        });
    }
}

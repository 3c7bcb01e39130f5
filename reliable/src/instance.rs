//! One instance's state, shared by every clone of its [`Reliable`]: the downstream's breaker,
//! retry policy, budget and timers (`Inner`), the handle's struct itself, and the [`Snapshot`]
//! that reads them.
//!
//! The state comes early in the crate's layering, so that the fast path (`attempt`), the
//! engine's driver (`drive`), the builder and the faces (`call`, `blocking`) can all work on it.
//! The handle's methods come after them all: every one of them, public or not, is in
//! `reliable.rs`, the one `impl Reliable`.

use crate::breaker::Owned;
use crate::clock::Clock;
use crate::observer::Observer;
use crate::rng::Rng;
use crate::sleep::Sleep;
use crate::stats::{Stats, Total};
use reliable_core::breaker::{Counts, State};
use reliable_core::budget::AnyBudget;
use reliable_core::hedge::{Hedger, Idempotency};
use reliable_core::ledger::{Extra, ExtraLedger};
use reliable_core::limit::{Limiter, RateLimiter};
use reliable_core::retry::RetryPolicy;
use reliable_core::throttle::AdaptiveThrottle;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Where the breaker sits relative to the retries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scope {
    /// `retry(breaker(call))`: every attempt asks the breaker and reports to it.
    PerAttempt,
    /// `breaker(retry(call))`: the breaker sees one outcome per call.
    PerCall,
}

/// One instance's state, behind the `Arc` every clone of its [`Reliable`] shares.
#[derive(Debug)]
pub(crate) struct Inner {
    pub name: Arc<str>,
    pub label: String,
    pub breaker: Option<Owned>,
    pub scope: Scope,
    /// Where each gate sits around the retry, when the builder was told (else `scope` says).
    pub nesting: Option<reliable_core::engine::Nesting>,
    pub retry: RetryPolicy,
    pub budget: Option<Mutex<AnyBudget>>,
    pub throttle: Option<Mutex<AdaptiveThrottle>>,
    /// Hedges for the attempts of idempotent calls.
    pub hedger: Option<Mutex<Hedger>>,
    /// Each copy's own timeout in a hedged attempt, from its own send.
    pub copy_timeout: Option<reliable_core::Duration>,
    /// Whether calls may be sent twice (only then are they hedged).
    pub idempotency: Idempotency,
    /// The one budget of extra attempts: retries (as the retry budget), hedges and probes.
    pub ledger: Option<Arc<Mutex<ExtraLedger>>>,
    /// Retries draw from the ledger (it is the retry budget, and each call deposits in it);
    /// else only hedges and probes draw from it.
    pub ledger_retries: bool,
    /// The concurrency limit of attempts in flight (hedges included).
    pub limiter: Option<Mutex<Limiter>>,
    /// The client-side rate limit of attempts sent.
    pub rate: Option<Mutex<RateLimiter>>,
    pub clock: Arc<dyn Clock>,
    pub sleep: Arc<dyn Sleep>,
    pub rng: Rng,
    /// The throttle's samples, when given instead of drawn from `rng`.
    pub throttle_draws: Option<crate::rng::Given>,
    pub observers: Arc<[Arc<dyn Observer>]>,
    /// Read the clock on every call (a decision or an observer needs the time); otherwise only
    /// when a call fails or the breaker is not plainly closed.
    pub eager_clock: bool,
    /// A first attempt may skip the engine's bookkeeping (`attempt::FirstAttempt`): nothing
    /// reads the time of a success (so no budget, throttle, observer or timed breaker rule; a
    /// timeout or a deadline is fine) and the breaker, if any, is asked per attempt. A success is
    /// then one breaker permit, one counter and, with a timeout, the readings that bound it; a
    /// failure continues as a full run.
    pub fast_first: bool,
    pub stats: Stats,
    /// A fleet breaker and budget in place of the local ones (`Builder::fleet_breaker`).
    #[cfg(feature = "fleet")]
    pub fleet: Option<Box<crate::fleet::FleetGates>>,
}

// The handle: only what its clones share. Its methods, every one, are in `reliable.rs` (the one
// `impl Reliable`), after the builder and the faces they delegate to.
/// Calls to one downstream made reliable: a circuit breaker, a retry policy with backoff and
/// jitter, per-attempt timeouts, an overall deadline, an optional retry budget and adaptive
/// throttle, an injectable clock, timer and seed, and observers.
///
/// Cheap to clone (an `Arc`); every clone shares the breaker, the budget and the counts, which is
/// what they are for: one breaker per downstream, one budget per client process. Build it with
/// [`Reliable::builder`] or a preset, then [`call`](Reliable::call) (async) or
/// [`call_blocking`](Reliable::call_blocking).
///
/// ```
/// use reliable::Reliable;
///
/// let rel = Reliable::builder("inventory").build()?;
/// let n: Result<u32, _> = rel.call_blocking(|| Ok::<_, std::io::Error>(42));
/// assert_eq!(n.unwrap(), 42);
/// # Ok::<(), reliable::BuildError>(())
/// ```
#[derive(Clone, Debug)]
pub struct Reliable {
    pub(crate) inner: Arc<Inner>,
}

// A panic in the user's closure leaves the instance consistent: the unwinding call's guard hands
// its permits and budget grant back, and poisoned locks are recovered (every update is one step).
impl std::panic::UnwindSafe for Reliable {}
impl std::panic::RefUnwindSafe for Reliable {}

/// An instance's state and totals as plain data: for dashboards, health endpoints and the
/// registry's [`snapshot`](crate::Registry::snapshot).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    /// The instance's name.
    pub name: String,
    /// Its layers, e.g. `retry(breaker(llm))`.
    pub label: String,
    /// The breaker's state, `None` without a breaker.
    pub state: Option<State>,
    /// While the breaker is open: how long until it admits a probe (the `retry_after` a call
    /// refused now would get). `None` when it is not open, and when it is forced open (no probe
    /// until it is reset).
    pub retry_after: Option<Duration>,
    /// Outcomes in the breaker's window (zero for a breaker that only counts failures in a row);
    /// its slow calls split into [`slow_failures`](Counts::slow_failures) and
    /// [`slow_successes`](Counts::slow_successes).
    pub window: Counts,
    /// Failures in a row while closed.
    pub consecutive_failures: u32,
    /// Whether the breaker runs in shadow mode: it lets every call through, and its state and
    /// transitions are what it would do live.
    pub shadow: bool,
    /// Calls shadow mode let through that the breaker would have rejected.
    pub would_reject: u64,
    /// Calls that succeeded.
    pub succeeded: u64,
    /// Calls that failed after their attempts (gave up or timed out).
    pub failed: u64,
    /// Calls refused before or between attempts (breaker open, probes full, throttled, budget).
    pub refused: u64,
    /// Calls dropped before they finished.
    pub cancelled: u64,
    /// Retries sent.
    pub retries: u64,
    /// Hedges sent.
    pub hedges: u64,
    /// Calls won by a hedge.
    pub hedges_won: u64,
    /// The ledger's extra attempts granted, by kind (retry, hedge, probe); zero without one.
    pub ledger_drawn: [u64; 3],
    /// The ledger's extra attempts refused, by kind (retry, hedge, probe).
    pub ledger_denied: [u64; 3],
    /// The concurrency limit now, `None` without one.
    pub limit: Option<u32>,
}

impl Inner {
    /// A uniform sample for the adaptive throttle: the given draws, else the seeded stream.
    pub fn throttle_sample(&self) -> u64 {
        match &self.throttle_draws {
            Some(draws) => (draws.0)(),
            None => self.rng.next_u64(),
        }
    }

    /// The breaker's state now, `None` without a breaker (local, else the fleet's as this
    /// process last saw it).
    pub fn state(&self) -> Option<State> {
        let now = self.clock.now();
        let local = self.breaker.as_ref().map(|b| b.state(now));
        #[cfg(feature = "fleet")]
        let local = local.or_else(|| self.fleet_state());
        local
    }

    /// Sends the results the fleet breaker kept since its last refresh and reads the fleet's
    /// state now (nothing without a fleet breaker).
    #[cfg(feature = "fleet")]
    pub async fn fleet_sync(&self) {
        if let Some(b) = self.fleet.as_ref().and_then(|g| g.breaker()) {
            b.sync().await;
        }
    }

    /// The fleet breaker's state as this process last saw it.
    #[cfg(feature = "fleet")]
    fn fleet_state(&self) -> Option<State> {
        self.fleet.as_ref()?.breaker.as_ref()?.fleet_state()
    }

    fn fleet_snapshot_state(&self) -> Option<State> {
        #[cfg(feature = "fleet")]
        return self.fleet_state();
        #[cfg(not(feature = "fleet"))]
        None
    }

    /// The state and totals now.
    pub fn snapshot(&self) -> Snapshot {
        let now = self.clock.now();
        let breaker = self.breaker.as_ref().map(|b| b.snapshot(now));
        Snapshot {
            name: self.name.to_string(),
            label: self.label.clone(),
            state: breaker
                .map(|b| b.state)
                .or_else(|| self.fleet_snapshot_state()),
            retry_after: self.breaker.as_ref().and_then(|b| b.retry_after(now)),
            window: breaker.map(|b| b.counts).unwrap_or_default(),
            consecutive_failures: breaker.map_or(0, |b| b.consecutive_failures),
            shadow: self.breaker.as_ref().is_some_and(|b| b.policy().shadow()),
            would_reject: self.breaker.as_ref().map_or(0, |b| b.would_reject()),
            succeeded: self.stats.total(Total::Succeeded),
            failed: self.stats.total(Total::Failed),
            refused: self.stats.total(Total::Refused),
            cancelled: self.stats.total(Total::Cancelled),
            retries: self.stats.total(Total::Retries),
            hedges: self.stats.total(Total::Hedges),
            hedges_won: self.stats.total(Total::HedgesWon),
            ledger_drawn: ledger_counts(self, ExtraLedger::drawn),
            ledger_denied: ledger_counts(self, ExtraLedger::denied),
            limit: self
                .limiter
                .as_ref()
                .map(|l| l.lock().unwrap_or_else(|p| p.into_inner()).limit()),
        }
    }
}

/// A ledger's counters by kind, zero without a ledger.
fn ledger_counts(i: &Inner, count: fn(&ExtraLedger, Extra) -> u64) -> [u64; 3] {
    match &i.ledger {
        Some(l) => {
            let l = l.lock().unwrap_or_else(|p| p.into_inner());
            Extra::ALL.map(|k| count(&l, k))
        }
        None => [0; 3],
    }
}

//! A fleet's retry budget: one ratio budget for every client instance, kept in a store the
//! scenario declares, decided as `reliable::fleet::FleetBudget` decides for a `Reliable` (its
//! call engine asks at once, never waiting for a round trip: `FleetBudget::try_retry_now`).
//!
//! A retry node of `budget_scope: Fleet(..)` keeps `1 + clients` core budgets: number 0 is the
//! store's (the fleet's window: a store runs the core's ratio budget, as `reliable::fleet`'s
//! `MemoryStore` does and its Redis script transcribes), number `1 + c` is client `c`'s own, fed
//! with its own first tries throughout, which decides while the store fails. Each client also
//! keeps a [`FleetBudgetClient`]: its first tries not yet sent, its allowance, its store's health.
//!
//! The rules, `reliable::fleet`'s (`fleet_budget.rs`):
//!
//! - **First tries** are counted locally and sent to the store in one operation once
//!   [`DEPOSIT_EVERY`] wait or [`DEPOSIT_AFTER_NS`] passed since the last were sent (one such
//!   operation out at a time), and with every refresh. An operation that fails puts them back.
//! - **A retry** spends a grant of the client's allowance: grants taken from the fleet at its last
//!   refresh, each lasting `max(refresh, ttl / slots)` (for `mode: Exact`, the refresh is the
//!   scope's `wait`: a `Reliable` decides at once either way). Spending the last grant starts a
//!   refresh; finding none refuses the retry and starts one. A refresh sends the first tries and
//!   asks for `chunk` grants ([`DEFAULT_CHUNK`], `reliable::policy`'s default); its answer is the
//!   allowance one round trip later (unused grants are dropped).
//! - **The store fails**: a retry finding no grant, whose allowance was taken more than
//!   `2 × refresh + wait` ago (or never) while the store is down, is decided by the client's
//!   own budget (`Local`) or refused (`Refuse`). The store is down from a failed operation until
//!   a refresh is answered.
//!
//! Where the simulator is simpler than a service, as for the fleet's breaker: the store applies
//! an operation at the moment it is asked.

use reliable_core::Instant;
use reliable_core::budget::{Budget, Denied, Grant};
use reliable_core::outcome::{AttemptOutcome, ErrorClass};
use reliable_core::policy::{FleetMode, FleetScope, OnStoreFailure};

use crate::client::budgets::BudgetSlot;
use crate::client::fleet::{Fate, OpCounts, StoreGuard, StoreSim};

/// First tries sent to the store once this many wait (`reliable::fleet`'s `DEPOSIT_EVERY`).
pub const DEPOSIT_EVERY: u32 = 64;
/// First tries sent to the store once the last were sent this long ago, ns (`DEPOSIT_AFTER`).
pub const DEPOSIT_AFTER_NS: u64 = 100_000_000;
/// Grants a client takes at once (`reliable::policy::DEFAULT_BUDGET_CHUNK`).
pub const DEFAULT_CHUNK: u32 = 4;

/// What the clients' fleet budgets and their store did in one run (summed over clients).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FleetBudgetCounters {
    /// Operations sent to a store.
    pub store_ops: u64,
    /// Of which failed (timed out, refused, the client's network down).
    pub store_failures: u64,
    /// Retries granted on the allowance taken from the fleet.
    pub granted: u64,
    /// Retries refused: no grant left (the fleet's ratio spent, or the allowance not back yet).
    pub refused: u64,
    /// Retries decided by the client's own budget while the store failed.
    pub by_local: u64,
    /// Retries refused because the store failed and the scope fails closed.
    pub store_refusals: u64,
    /// Grants the store gave (withdrawn from the fleet's window).
    pub grants_taken: u64,
}

/// One client's dealings with the store of one fleet budget.
#[derive(Clone, Debug, Default)]
pub struct FleetBudgetClient {
    guard: StoreGuard,
    /// First tries not yet sent to the store.
    pending: u32,
    /// When first tries were last sent (ns).
    sent_at: u64,
    /// A deposit is out until then (ns).
    depositing_until: u64,
    /// Grants left, and when they were taken (ns; `None` before the first).
    allowance: (u32, Option<u64>),
    /// A refresh's answer: grants, arriving at (ns).
    incoming: Option<(u32, u64)>,
    /// A refresh is out until then (ns): one at a time.
    refreshing_until: u64,
}

impl FleetBudgetClient {
    /// Bytes of one.
    pub const BYTES: usize = std::mem::size_of::<FleetBudgetClient>();
}

/// A fleet budget's shared parts in a run: its scope, its store, and what it counted.
#[derive(Clone, Debug)]
pub struct FleetBudgetNode {
    /// The scope's settings.
    pub scope: FleetScope,
    /// Its store (index among the scenario's).
    pub store: u16,
    /// One slot of the budget's window, ns.
    pub width_ns: u64,
    /// Per client.
    pub clients: Vec<FleetBudgetClient>,
    /// Its counts.
    pub counters: FleetBudgetCounters,
}

/// The budget a fleet retry node's client draws from: its own state, the store's budget and its
/// own (the module docs of `sim/src/client/fleet_budget.rs` have the rules).
#[derive(Debug)]
pub struct FleetRetries<'a> {
    /// The client's dealings with the store.
    pub client: &'a mut FleetBudgetClient,
    /// The fleet's budget, in the store.
    pub fleet: &'a mut BudgetSlot,
    /// The client's own, for when the store fails.
    pub local: &'a mut BudgetSlot,
    /// The store.
    pub store: &'a mut StoreSim,
    /// The scope.
    pub scope: FleetScope,
    /// Whether the client's own network is down now.
    pub network_down: bool,
    /// One slot of the fleet's window, ns (how long a grant counts there).
    pub width_ns: u64,
    /// The node's counts.
    pub counters: &'a mut FleetBudgetCounters,
}

impl FleetRetries<'_> {
    fn wait(&self) -> u64 {
        self.scope.wait.as_nanos()
    }

    /// The refresh that decisions on the allowance run on.
    fn refresh_ns(&self) -> u64 {
        match self.scope.mode {
            FleetMode::Cached { refresh } => refresh.as_nanos(),
            FleetMode::Exact => self.wait(),
        }
    }

    fn ask(&mut self, now: u64) -> Result<u64, (u64, Fate)> {
        let wait = self.wait();
        let counts = OpCounts {
            ops: &mut self.counters.store_ops,
            failures: &mut self.counters.store_failures,
        };
        self.client
            .guard
            .ask(self.store, self.network_down, now, wait, counts)
    }

    /// Applies one operation at the store: `first_tries` deposited, then up to `retries` grants
    /// withdrawn; how many were.
    fn apply(&mut self, first_tries: u32, retries: u32, now: Instant) -> u32 {
        for _ in 0..first_tries {
            self.fleet.on_first_try(now);
        }
        let mut granted = 0;
        while granted < retries && self.fleet.try_retry(ErrorClass::Transient, now).is_ok() {
            granted += 1;
        }
        self.fleet.on_request_end(now);
        self.counters.grants_taken += u64::from(granted);
        granted
    }

    /// Sends the first tries waiting, in the background (the caller does not wait).
    fn deposit(&mut self, now: u64) {
        let c = &mut *self.client;
        let due = c.pending >= DEPOSIT_EVERY || now.saturating_sub(c.sent_at) >= DEPOSIT_AFTER_NS;
        if !due || now < c.depositing_until {
            return;
        }
        let first_tries = std::mem::take(&mut c.pending);
        c.sent_at = now;
        match self.ask(now) {
            Ok(rtt) => {
                self.apply(first_tries, 0, Instant::from_nanos(now));
                self.client.depositing_until = now.saturating_add(rtt);
            }
            Err((waited, fate)) => {
                if fate == Fate::Applied {
                    self.apply(first_tries, 0, Instant::from_nanos(now));
                }
                // A failed operation puts them back (one that ran late counts twice, as in a
                // service: it cannot tell).
                self.client.pending += first_tries;
                self.client.depositing_until = now.saturating_add(waited);
            }
        }
    }

    /// Sends the first tries and asks for a chunk of grants; the answer is the allowance one
    /// round trip later (the caller does not wait).
    fn refresh(&mut self, now: u64) {
        if now < self.client.refreshing_until {
            return;
        }
        let first_tries = std::mem::take(&mut self.client.pending);
        match self.ask(now) {
            Ok(rtt) => {
                let granted = self.apply(first_tries, DEFAULT_CHUNK, Instant::from_nanos(now));
                let at = now.saturating_add(rtt);
                let c = &mut *self.client;
                c.incoming = Some((granted, at));
                c.refreshing_until = at;
                c.guard.up();
            }
            Err((waited, fate)) => {
                if fate == Fate::Applied {
                    // It ran: its grants were withdrawn, and lost with its answer.
                    self.apply(first_tries, DEFAULT_CHUNK, Instant::from_nanos(now));
                }
                self.client.pending += first_tries;
                self.client.refreshing_until = now.saturating_add(waited);
            }
        }
    }

    fn fallback(&mut self, now: Instant) -> Result<Grant, Denied> {
        match self.scope.on_store_failure {
            OnStoreFailure::Refuse => {
                self.counters.store_refusals += 1;
                Err(Denied::Ratio)
            }
            OnStoreFailure::Local => {
                self.counters.by_local += 1;
                self.local
                    .try_retry(ErrorClass::Transient, now)
                    .map(|_| Grant::new(0))
            }
        }
    }
}

impl Budget for FleetRetries<'_> {
    fn on_first_try(&mut self, now: Instant) {
        self.local.on_first_try(now);
        self.client.pending += 1;
        self.deposit(now.as_nanos());
    }

    fn try_retry(&mut self, _: ErrorClass, at: Instant) -> Result<Grant, Denied> {
        let now = at.as_nanos();
        let refresh = self.refresh_ns();
        let c = &mut *self.client;
        if let Some((granted, arrived)) = c.incoming
            && arrived <= now
        {
            c.allowance = (granted, Some(arrived));
            c.incoming = None;
        }
        let lifetime = refresh.max(self.width_ns);
        let c = &mut *self.client;
        if c.allowance
            .1
            .is_none_or(|t| now.saturating_sub(t) >= lifetime)
        {
            c.allowance.0 = 0;
        }
        if c.allowance.0 > 0 {
            c.allowance.0 -= 1;
            let last = c.allowance.0 == 0;
            self.counters.granted += 1;
            if last {
                // The next retry then finds grants, not a refusal and a refresh.
                self.refresh(now);
            }
            return Ok(Grant::new(0));
        }
        let taken_at = c.allowance.1;
        // The store's health as this decision finds it: the refresh it starts answers later.
        let down = c.guard.down;
        self.refresh(now);
        let stale = taken_at.is_none_or(|t| {
            now.saturating_sub(t) > refresh.saturating_mul(2).saturating_add(self.wait())
        });
        if stale && down {
            return self.fallback(at);
        }
        self.counters.refused += 1;
        Err(Denied::Ratio)
    }

    fn on_attempt_end(&mut self, _: AttemptOutcome, _: Option<Grant>, _: Instant) {}

    fn on_request_end(&mut self, _: Instant) {}
}

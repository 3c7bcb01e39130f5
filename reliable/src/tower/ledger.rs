//! [`SharedLedger`]: the one budget of extra attempts the layers draw from: [`RetryLayer`]'s
//! retries and [`HedgeLayer`]'s hedges (see [`reliable_core::ledger`]).
//!
//! [`RetryLayer`]: super::RetryLayer
//! [`HedgeLayer`]: super::HedgeLayer

use std::sync::{Arc, Mutex, MutexGuard};

use reliable_core::ConfigError;
use reliable_core::budget::RatioConfig;
use reliable_core::ledger::{Extra, ExtraLedger};

/// The ledger the call engine draws from: its window holds up to 10 slots (the config's
/// `slots` must fit).
pub(crate) type CoreLedger = ExtraLedger;

/// A handle on one ledger of extra attempts; clones share it. Give a clone to each layer whose
/// extra attempts it bounds: over any window, retries plus hedges ≤ `ratio` × first tries +
/// `min_per_sec` × `ttl`.
#[derive(Clone, Debug)]
pub struct SharedLedger(pub(crate) Arc<Mutex<CoreLedger>>);

impl SharedLedger {
    /// An empty ledger (only the floor available). Refuses an invalid config or more than 10
    /// slots.
    pub fn new(config: RatioConfig) -> Result<Self, ConfigError> {
        Ok(SharedLedger(Arc::new(Mutex::new(CoreLedger::from_config(
            config,
        )?))))
    }

    /// Another ledger, a copy of this one as it is now (a per-client ledger made from a template
    /// nothing draws from).
    #[cfg(feature = "policy")]
    pub(crate) fn fresh(&self) -> Self {
        SharedLedger(Arc::new(Mutex::new(self.lock().clone())))
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, CoreLedger> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Extra attempts of `kind` granted so far.
    pub fn drawn(&self, kind: Extra) -> u64 {
        self.lock().drawn(kind)
    }

    /// Extra attempts of `kind` refused so far.
    pub fn denied(&self, kind: Extra) -> u64 {
        self.lock().denied(kind)
    }

    /// Draws of `kind` not yet settled (attempts in flight).
    pub fn outstanding(&self, kind: Extra) -> u32 {
        self.lock().outstanding(kind)
    }
}

//! Ledgers of extra attempts as the simulator stores them: the core's [`ExtraLedger`] of the
//! smallest window capacity that fits the config, and the view a retry layer inside a ledger
//! takes of it.
//!
//! As with budgets, [`LedgerSlot`] tries a small inline capacity first and falls back to a boxed
//! larger one.

use reliable_core::budget::{Budget, Denied, Grant, RatioConfig};
#[cfg(test)]
use reliable_core::ledger::Draw;
use reliable_core::ledger::{Extra, ExtraLedger};
use reliable_core::outcome::{AttemptOutcome, ErrorClass};
use reliable_core::{ConfigError, Instant};

/// A ledger of whichever capacity fits its config.
#[allow(clippy::large_enum_variant)] // Inline small variant on purpose, as for budgets.
#[derive(Clone, Debug)]
pub enum LedgerSlot {
    /// Up to 10 window slots, inline.
    Small(ExtraLedger<10>),
    /// Up to 64 window slots, boxed.
    Large(Box<ExtraLedger<64>>),
}

/// Calls `$body` with `$l` bound to the ledger inside `$slot`, whatever its capacity.
macro_rules! with {
    ($slot:expr, $l:ident => $body:expr) => {
        match $slot {
            LedgerSlot::Small($l) => $body,
            LedgerSlot::Large($l) => $body,
        }
    };
}

impl LedgerSlot {
    /// A fresh ledger for `config`.
    pub fn new(config: RatioConfig) -> Result<Self, ConfigError> {
        if let Ok(l) = ExtraLedger::<10>::from_config(config) {
            return Ok(LedgerSlot::Small(l));
        }
        Ok(LedgerSlot::Large(Box::new(ExtraLedger::<64>::from_config(
            config,
        )?)))
    }

    /// Bytes this ledger takes, its boxed part included.
    pub fn bytes(&self) -> usize {
        match self {
            LedgerSlot::Small(_) => std::mem::size_of::<Self>(),
            LedgerSlot::Large(_) => {
                std::mem::size_of::<Self>() + std::mem::size_of::<ExtraLedger<64>>()
            }
        }
    }

    /// See [`ExtraLedger::on_first_try`] (a chain's ledger takes its deposits in the engine; the
    /// tests deposit here).
    #[cfg(test)]
    pub fn on_first_try(&mut self, now: Instant) {
        with!(self, l => l.on_first_try(now))
    }

    /// See [`ExtraLedger::try_draw`] (a chain's ledger draws in the engine, through its small
    /// window; the tests draw here).
    #[cfg(test)]
    pub fn try_draw(&mut self, kind: Extra, now: Instant) -> Result<Draw, Denied> {
        with!(self, l => l.try_draw(kind, now))
    }

    /// Extra attempts granted and refused so far, by kind in [`Extra::ALL`] order.
    pub fn counts(&self) -> ([u64; 3], [u64; 3]) {
        with!(self, l => (Extra::ALL.map(|k| l.drawn(k)), Extra::ALL.map(|k| l.denied(k))))
    }
}

/// A retry layer's budget when it sits inside a ledger: its retries are drawn as
/// [`Extra::Retry`]; its first tries are not deposited again (the ledger layer deposits each
/// logical request once, when it enters).
#[derive(Debug)]
pub struct LedgerRetries<'a>(pub &'a mut LedgerSlot);

impl Budget for LedgerRetries<'_> {
    fn on_first_try(&mut self, _: Instant) {}
    fn try_retry(&mut self, class: ErrorClass, now: Instant) -> Result<Grant, Denied> {
        with!(self.0, l => l.try_retry(class, now))
    }
    fn on_attempt_end(&mut self, outcome: AttemptOutcome, grant: Option<Grant>, now: Instant) {
        with!(self.0, l => l.on_attempt_end(outcome, grant, now))
    }
    fn on_request_end(&mut self, now: Instant) {
        with!(self.0, l => l.on_request_end(now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reliable_core::Duration;

    #[test]
    fn retries_and_hedges_share_one_budget() {
        let config = RatioConfig {
            ratio: 0.5,
            min_per_sec: 0,
            ttl: Duration::from_secs(10),
            slots: 10,
        };
        let mut slot = LedgerSlot::new(config).unwrap();
        assert!(matches!(slot, LedgerSlot::Small(_)));
        let now = Instant::from_secs(1);
        slot.on_first_try(now);
        slot.on_first_try(now);
        // The retry view deposits nothing: still one extra attempt (2 × 0.5) in all.
        LedgerRetries(&mut slot).on_first_try(now);
        let grant = LedgerRetries(&mut slot)
            .try_retry(ErrorClass::Timeout, now)
            .unwrap();
        LedgerRetries(&mut slot).on_attempt_end(AttemptOutcome::Success, Some(grant), now);
        assert!(slot.try_draw(Extra::Hedge, now).is_err());
        assert_eq!(slot.counts(), ([1, 0, 0], [0, 1, 0]));
        let large = LedgerSlot::new(RatioConfig {
            slots: 40,
            ..config
        })
        .unwrap();
        assert!(matches!(large, LedgerSlot::Large(_)));
        assert!(large.bytes() > slot.bytes());
    }
}

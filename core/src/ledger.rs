//! One ledger for every extra attempt: retries, hedges and half-open probes draw from one budget,
//! so the extra load a client can add under a storm is one bounded number.
//!
//! ## Why one ledger
//!
//! Each mechanism that sends more than the first try is a load multiplier: a retry after a failure,
//! a hedge after a delay, a probe of a half-open breaker. Budgeted separately, their bounds add up
//! (a 10% retry budget plus a 10% hedge budget is 20% extra, and nobody wrote that number down);
//! worse, hedges are sent exactly when the downstream is slow, which is when it is overloaded.
//! gRPC's retry design (proposal A6) already makes retries and hedged attempts draw from one
//! throttle; [`ExtraLedger`] does the same for every kind of extra attempt.
//!
//! ## The bound
//!
//! The ledger is a [`RatioBudget`] (a token ratio with a floor per
//! second, the project's ratio budget): each first try deposits `ratio`, each extra attempt of any
//! kind withdraws 1, both for `ttl`. So over any `ttl`, **extra attempts ≤ `ratio` × first tries +
//! `min_per_sec` × `ttl`**, whatever mix of retries, hedges and probes asked for them: with a 10%
//! ledger and no floor, a client sends at most 1.1× its first tries in every window, storm or not.
//! Every draw and every refusal is counted by [`Extra`] kind, for metrics.
//!
//! Compared with gRPC's throttle: gRPC's token bucket moves on *outcomes* (a failure takes 1
//! token, a success gives back `token_ratio`; extra attempts only while tokens > `max_tokens / 2`),
//! so under a total outage it stops extra attempts after `max_tokens / 2` failures and a client that
//! sees no failures but slow answers never runs it down; its bound is on failures, not on load.
//! The ratio ledger bounds *load* directly: extra attempts as a share of first tries, whatever
//! the outcomes.
//!
//! ```
//! use reliable_core::budget::RatioConfig;
//! use reliable_core::ledger::{Extra, ExtraLedger};
//! use reliable_core::Instant;
//!
//! // 10% of first tries, no floor, over 10 s.
//! let mut ledger: ExtraLedger = ExtraLedger::from_config(RatioConfig::percent(0.1))?;
//! let now = Instant::from_secs(1);
//! for _ in 0..100 {
//!     ledger.on_first_try(now);
//! }
//! // Retries, hedges and probes all ask: ten extra attempts in all are granted.
//! let mut granted = 0;
//! for kind in [Extra::Retry, Extra::Hedge, Extra::Probe].into_iter().cycle().take(30) {
//!     if let Ok(draw) = ledger.try_draw(kind, now) {
//!         granted += 1;
//!         ledger.settle(draw, now);
//!     }
//! }
//! assert_eq!(granted, 10);
//! assert_eq!(ledger.drawn(Extra::Retry) + ledger.drawn(Extra::Hedge) + ledger.drawn(Extra::Probe), 10);
//! assert_eq!(ledger.denied(Extra::Hedge), 7);
//! # Ok::<(), reliable_core::ConfigError>(())
//! ```
//!
//! ## How each kind draws
//!
//! - **Retries:** the ledger implements [`Budget`], so the [retry policy](crate::retry) takes it
//!   as its budget; its retries are drawn as [`Extra::Retry`].
//! - **Hedges:** [`Hedger::try_hedge_from`](crate::hedge::Hedger::try_hedge_from) asks the ledger
//!   once the hedging rules say yes.
//! - **Probes:** when the breaker's permit is a probe (`Permit::is_probe`: it is half-open), the
//!   caller draws an [`Extra::Probe`]; a refusal gives the permit back unused
//!   (`Outcome::Ignored`) and is a local rejection; the draw is settled with the probe's result.
//!   Asking the breaker first draws only for a call that is a probe (not for one a full
//!   half-open breaker refuses anyway), and every face does it in this order.
//!
//! Every first try is reported once ([`on_first_try`](ExtraLedger::on_first_try); the retry
//! policy does it when the ledger is its budget): first tries are what extra attempts are a share
//! of.

use crate::budget::{Budget, Denied, Grant, RatioBudget, RatioConfig, RatioPolicy};
use crate::error::ConfigError;
use crate::outcome::{AttemptOutcome, ErrorClass};
use crate::time::Instant;

/// The kinds of extra attempt (anything sent beyond a request's first try).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Extra {
    /// A retry after a failed attempt.
    Retry,
    /// A hedge: another copy of a slow attempt, sent while the first is still out.
    Hedge,
    /// A probe of a half-open circuit breaker.
    Probe,
}

impl Extra {
    /// Every kind, in the order of the ledger's counters.
    pub const ALL: [Extra; 3] = [Extra::Retry, Extra::Hedge, Extra::Probe];

    /// A short lower-case name: `retry`, `hedge`, `probe`.
    pub const fn name(self) -> &'static str {
        match self {
            Extra::Retry => "retry",
            Extra::Hedge => "hedge",
            Extra::Probe => "probe",
        }
    }

    const fn index(self) -> usize {
        match self {
            Extra::Retry => 0,
            Extra::Hedge => 1,
            Extra::Probe => 2,
        }
    }
}

/// Permission for one extra attempt of `kind`, from [`ExtraLedger::try_draw`]. Hand it back to
/// [`ExtraLedger::settle`] when the attempt ends (won, lost, cancelled).
#[must_use = "a draw is settled when its attempt ends"]
#[derive(Debug, PartialEq, Eq)]
pub struct Draw {
    kind: Extra,
    grant: Grant,
}

impl Draw {
    /// What the draw was for.
    pub const fn kind(&self) -> Extra {
        self.kind
    }
}

/// One budget for every extra attempt, counted by kind. See the [module docs](self).
///
/// `N` is the slot capacity of the ratio window (at least the config's `slots`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExtraLedger<const N: usize = 10> {
    budget: RatioBudget<N>,
    drawn: [u64; 3],
    denied: [u64; 3],
    outstanding: [u32; 3],
}

impl<const N: usize> ExtraLedger<N> {
    /// An empty ledger (only the floor available). Fails if `N < slots`.
    pub fn new(policy: RatioPolicy) -> Result<Self, ConfigError> {
        Ok(ExtraLedger {
            budget: RatioBudget::new(policy)?,
            drawn: [0; 3],
            denied: [0; 3],
            outstanding: [0; 3],
        })
    }

    /// Validates `config` and builds an empty ledger for it.
    pub fn from_config(config: RatioConfig) -> Result<Self, ConfigError> {
        Self::new(RatioPolicy::new(config)?)
    }

    /// A request sends its first try: deposits `ratio`.
    #[inline]
    pub fn on_first_try(&mut self, now: Instant) {
        self.budget.on_first_try(now);
    }

    /// May an extra attempt of `kind` go? On `Ok` one attempt has been withdrawn. Either way the
    /// answer is counted for `kind`.
    #[inline]
    pub fn try_draw(&mut self, kind: Extra, now: Instant) -> Result<Draw, Denied> {
        // The ratio budget ignores the class; hand it the one a retry would have.
        let answer = self.budget.try_retry(ErrorClass::Transient, now);
        let i = kind.index();
        match answer {
            Ok(grant) => {
                bump(&mut self.drawn, i);
                if let Some(n) = self.outstanding.get_mut(i) {
                    *n = n.saturating_add(1);
                }
                Ok(Draw { kind, grant })
            }
            Err(denied) => {
                bump(&mut self.denied, i);
                Err(denied)
            }
        }
    }

    /// The attempt a draw admitted has ended (or was never sent).
    #[inline]
    pub fn settle(&mut self, draw: Draw, now: Instant) {
        if let Some(n) = self.outstanding.get_mut(draw.kind.index()) {
            *n = n.saturating_sub(1);
        }
        self.budget
            .on_attempt_end(AttemptOutcome::Cancelled, Some(draw.grant), now);
    }

    /// Extra attempts of `kind` granted so far.
    pub fn drawn(&self, kind: Extra) -> u64 {
        self.drawn.get(kind.index()).copied().unwrap_or(0)
    }

    /// Extra attempts of `kind` refused so far.
    pub fn denied(&self, kind: Extra) -> u64 {
        self.denied.get(kind.index()).copied().unwrap_or(0)
    }

    /// Draws of `kind` not yet settled.
    pub fn outstanding(&self, kind: Extra) -> u32 {
        self.outstanding.get(kind.index()).copied().unwrap_or(0)
    }

    /// Extra attempts available as of `now`, in millionths (floor + deposits − withdrawals in the
    /// window); a draw needs at least one million.
    pub fn micro_balance(&self, now: Instant) -> i128 {
        self.budget.micro_balance(now)
    }

    /// The underlying ratio budget.
    pub fn budget(&self) -> &RatioBudget<N> {
        &self.budget
    }
}

fn bump(counters: &mut [u64; 3], i: usize) {
    if let Some(c) = counters.get_mut(i) {
        *c = c.saturating_add(1);
    }
}

/// The retry policy's view: retries are drawn as [`Extra::Retry`].
/// A ledger of any window (any slot capacity `N`), as the call engine draws from it: what
/// [`Shared::ledger`](crate::engine::Shared::ledger) hands over, so that a face keeping ledgers
/// of several windows (a simulator's) hands each as it is.
pub trait AnyLedger {
    /// See [`ExtraLedger::try_draw`].
    fn try_draw(&mut self, kind: Extra, now: Instant) -> Result<Draw, Denied>;
    /// See [`ExtraLedger::settle`].
    fn settle(&mut self, draw: Draw, now: Instant);
}

impl<const N: usize> AnyLedger for ExtraLedger<N> {
    #[inline]
    fn try_draw(&mut self, kind: Extra, now: Instant) -> Result<Draw, Denied> {
        ExtraLedger::try_draw(self, kind, now)
    }
    #[inline]
    fn settle(&mut self, draw: Draw, now: Instant) {
        ExtraLedger::settle(self, draw, now);
    }
}

impl<const N: usize> Budget for ExtraLedger<N> {
    fn on_first_try(&mut self, now: Instant) {
        ExtraLedger::on_first_try(self, now);
    }
    fn try_retry(&mut self, _: ErrorClass, now: Instant) -> Result<Grant, Denied> {
        self.try_draw(Extra::Retry, now).map(|draw| draw.grant)
    }
    fn on_attempt_end(&mut self, outcome: AttemptOutcome, grant: Option<Grant>, now: Instant) {
        if grant.is_some()
            && let Some(n) = self.outstanding.get_mut(Extra::Retry.index())
        {
            *n = n.saturating_sub(1);
        }
        self.budget.on_attempt_end(outcome, grant, now);
    }
    fn on_request_end(&mut self, now: Instant) {
        self.budget.on_request_end(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Duration;

    #[test]
    fn every_kind_draws_from_the_one_budget() {
        // 50%, a floor of 1/s over 2 s (2 extra attempts), 2 slots.
        let mut l: ExtraLedger = ExtraLedger::from_config(RatioConfig {
            ratio: 0.5,
            min_per_sec: 1,
            ttl: Duration::from_secs(2),
            slots: 2,
        })
        .unwrap();
        let t = Instant::from_millis;
        // (ms, kind to draw or None for a first try, granted, balance after in millionths)
        let steps: [(u64, Option<Extra>, bool, i128); 9] = [
            (0, Some(Extra::Hedge), true, 1_000_000),
            (10, Some(Extra::Probe), true, 0),
            (20, Some(Extra::Retry), false, 0),
            (30, None, true, 500_000),
            (40, None, true, 1_000_000),
            (50, Some(Extra::Retry), true, 0),
            (60, Some(Extra::Hedge), false, 0),
            // 2 s: slot 0 leaves; only the floor.
            (2_000, Some(Extra::Hedge), true, 1_000_000),
            (2_010, Some(Extra::Probe), true, 0),
        ];
        for (i, (at, kind, ok, balance)) in steps.into_iter().enumerate() {
            match kind {
                None => l.on_first_try(t(at)),
                Some(k) => {
                    let got = l.try_draw(k, t(at));
                    assert_eq!(got.is_ok(), ok, "step {i}");
                    if let Ok(d) = got {
                        assert_eq!(d.kind(), k);
                        l.settle(d, t(at));
                    }
                }
            }
            assert_eq!(l.micro_balance(t(at)), balance, "step {i}");
        }
        assert_eq!(
            Extra::ALL.map(|k| (l.drawn(k), l.denied(k))),
            [(1, 1), (2, 1), (2, 0)]
        );
        assert_eq!(Extra::ALL.map(|k| l.outstanding(k)), [0, 0, 0]);
        assert_eq!(Extra::Probe.name(), "probe");
    }

    #[test]
    fn as_a_retry_budget_it_counts_retries() {
        let mut l: ExtraLedger = ExtraLedger::from_config(RatioConfig::percent(0.5)).unwrap();
        let now = Instant::from_secs(1);
        Budget::on_first_try(&mut l, now);
        Budget::on_first_try(&mut l, now);
        let g = l.try_retry(ErrorClass::Timeout, now).unwrap();
        assert_eq!(l.outstanding(Extra::Retry), 1);
        l.on_attempt_end(AttemptOutcome::Success, Some(g), now);
        l.on_request_end(now);
        assert_eq!(l.outstanding(Extra::Retry), 0);
        assert_eq!(l.drawn(Extra::Retry), 1);
        assert_eq!(l.try_retry(ErrorClass::Timeout, now), Err(Denied::Ratio));
        assert_eq!(l.denied(Extra::Retry), 1);
        assert!(ExtraLedger::<4>::from_config(RatioConfig::percent(0.5)).is_err());
    }
}

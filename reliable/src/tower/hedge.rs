//! [`HedgeLayer`]: hedged requests around a service (Dean & Barroso, "The Tail at Scale"), raced
//! by the core's call engine ([`reliable_core::engine`]) holding this one layer (one attempt,
//! its hedges; see the `engine` module: the layer has no race of its own).
//!
//! When a request is still unanswered after the policy's delay (fixed, or a quantile of recent
//! latencies: [`reliable_core::hedge`]), a copy is sent to a clone of the service, up to
//! `max_hedges`; the first **success** (by the [`Policy`]'s classification) wins and every copy
//! still in flight is dropped (cancelled: an HTTP client closes its connection). A copy that
//! fails waits for the others; when every copy has failed, the last answer is returned. With
//! [`HedgeLayer::copy_timeout`], each copy is timed from its own send and one still unanswered
//! then fails as a timeout. Only a request [`Policy::clone_request`] can copy is hedged (`None`:
//! not idempotent). With a
//! [`SharedLedger`], each hedge draws from the one budget of extra attempts that a
//! [`RetryLayer`](super::RetryLayer) given the same ledger draws its retries from; a refused hedge
//! is reported (`on_hedge_refused`) and the request goes on without it. Every draw is settled
//! when its copy ends, wins, loses or is dropped.
//!
//! Compared with tower's `hedge`: that one takes the first answer, success or failure, and times
//! hedges from a histogram rotated on a fixed period; this one waits for a success and reads its
//! delay from the core's fixed-memory quantile, and can bound hedges by the ledger.

use std::fmt;
use std::sync::Arc;

use reliable_core::ConfigError;
use reliable_core::backoff::BackoffConfig;
use reliable_core::hedge::HedgeConfig;
use reliable_core::retry::RetryConfig;
use tower_layer::Layer;

use super::engine::{Ending, Engine, EngineFuture, Only, Reports, engine_service};
use super::ledger::SharedLedger;
use super::sharing::Sharing;
use crate::Reliable;
use crate::builder::Builder;
use crate::clock::Clock;
use crate::observer::Observer;
use crate::sleep::Sleep;

/// Hedged requests (Dean & Barroso, "The Tail at Scale"): when a request is still unanswered
/// after the delay (fixed, or a quantile of recent latencies: [`reliable_core::hedge`]), a copy
/// goes to a clone of the service, up to `max_hedges`; the first **success** (by the policy's
/// classification) wins and every copy still in flight is dropped (an HTTP client closes its
/// connection). A copy that fails waits for the others; when every copy has failed, the last
/// answer is returned. Only a request the policy's `clone_request` can copy is hedged (`None`:
/// not idempotent). Every ledger draw is settled when its copy ends, wins, loses or is dropped.
///
/// Builds [`HedgeService`]s sharing one hedger (and its latency quantile). Setters keep it.
#[derive(Clone)]
pub struct HedgeLayer<P> {
    builder: Builder,
    policy: P,
    /// One hedger for every service the layer wraps.
    sharing: Sharing<Reliable>,
}

impl<P> fmt::Debug for HedgeLayer<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HedgeLayer")
            .field("builder", &self.builder)
            .finish_non_exhaustive()
    }
}

impl<P> HedgeLayer<P> {
    /// Hedges as `config` says; `policy` classifies answers and copies requests.
    pub fn new(config: HedgeConfig, policy: P) -> Result<Self, ConfigError> {
        // One attempt, with no timeout of its own: its hedges are the layer's only copies.
        let once = RetryConfig {
            max_attempts: Some(1),
            attempt_timeout: None,
            deadline: None,
            ..RetryConfig::new(BackoffConfig::immediate())
        };
        let builder = Reliable::builder("hedge")
            .no_breaker()
            .retry(once)
            .idempotent()
            .hedge(config);
        builder.clone().build().map_err(|e| e.error)?;
        Ok(HedgeLayer {
            builder,
            policy,
            sharing: Sharing::shared(),
        })
    }

    fn set(mut self, f: impl FnOnce(Builder) -> Builder) -> Self {
        self.builder = f(self.builder);
        self.sharing.reset();
        self
    }

    /// The same layer with a hedger of its own, as this one's was when it was built: no
    /// latency recorded (a per-client hedger).
    #[cfg(feature = "policy")]
    pub(crate) fn fresh(&self) -> Self
    where
        P: Clone,
    {
        HedgeLayer {
            sharing: Sharing::shared(),
            ..self.clone()
        }
    }

    /// Each hedge draws from `ledger`, the one budget of extra attempts a
    /// [`RetryLayer`](super::RetryLayer) given the same ledger draws its retries from (and feeds
    /// with first tries: without one above, only the ledger's floor is there to draw). A refused
    /// hedge is reported (`on_hedge_refused`) and the request goes on without it.
    pub fn ledger(self, ledger: SharedLedger) -> Self {
        self.set(|b| b.hedge_ledger(ledger.0))
    }

    /// Each copy may take `timeout` from its own send (a policy file's `Call` timeout under a
    /// `Hedge`): its request carries that deadline ([`Policy::set_deadline`](super::Policy::set_deadline),
    /// never later than one a retry layer above set), and a copy still unanswered then is
    /// dropped and fails as [`TimedOut`](super::TimedOut), like any failed copy: the others race
    /// on. A retry layer's attempt timeout above still bounds the hedged request as a whole.
    pub fn copy_timeout(self, timeout: std::time::Duration) -> Self {
        self.set(|b| b.copy_timeout(timeout))
    }

    /// The same layer reading time from `clock` and timing hedges on `sleep`.
    pub fn with_time(self, clock: impl Clock, sleep: impl Sleep) -> Self {
        self.set(|b| b.clock(clock).sleep(sleep))
    }

    /// Names the layer in what observers receive (default `hedge`).
    pub fn named(self, name: &str) -> Self {
        self.set(|b| b.renamed(name))
    }

    /// Tells `observer` every hedge sent (`on_hedge`, numbered within its request from 2),
    /// refused (`on_hedge_refused`) and won (`on_hedge_won`), every copy cancelled
    /// (`on_attempt_cancelled`) and every ledger answer (`on_ledger`).
    pub fn observer(self, observer: impl Observer) -> Self {
        self.set(|b| b.observer(Only(Reports::Hedge, Arc::new(observer))))
    }

    fn make(&self) -> Reliable {
        match self.builder.clone().build() {
            Ok(r) => r,
            Err(_) => unreachable!("the settings were accepted when they were set"),
        }
    }
}

impl<S, P: Clone> Layer<S> for HedgeLayer<P> {
    type Service = HedgeService<S, P>;

    fn layer(&self, inner: S) -> Self::Service {
        let reliable = self.sharing.get(|| self.make());
        HedgeService(Engine::new(
            inner,
            reliable,
            self.policy.clone(),
            Ending::Bare,
        ))
    }
}

/// A service whose slow requests are hedged (see [`HedgeLayer`]).
#[derive(Clone, Debug)]
pub struct HedgeService<S, P>(Engine<S, P>);

engine_service!(HedgeService);

/// The response future of [`HedgeService`].
pub type HedgeFuture<Res> = EngineFuture<Res>;

//! [`RetryLayer`]: the core's retry policy and retry budget around a service, one decision per
//! failed attempt, taken by the core's call engine ([`reliable_core::engine`]) holding this one
//! layer (see the `engine` module: the layer has no loop of its own).
//!
//! tower's own `Retry` asks a policy "retry?" and leaves the wait, the deadline and the budget to
//! separate layers that cannot see each other. Here one call of the core's
//! [`RetryPolicy::on_failure`](reliable_core::retry::RetryPolicy::on_failure) weighs them all: the
//! attempt limit, the overall deadline, the backoff with jitter, the server's `Retry-After`
//! (clamped), and the budget, which every clone of the service shares (a retry budget belongs to
//! a client process, not to a request).
//!
//! Each attempt gets the policy's per-attempt timeout (or what is left of the overall deadline,
//! if sooner), enforced here (a millisecond after the deadline) and also handed to the request
//! through [`Policy::set_deadline`], so a timeout below a breaker can fail the call first and the
//! breaker counts it. [`Policy::clone_request`] returning `None` means the request cannot be sent twice:
//! its first answer is final. A dropped response future returns any budget it holds.
//!
//! When the policy gives up on an error *response* (an HTTP 503), that response is returned; on
//! an error, a [`GaveUp`] carrying the reason and the last error. A local refusal below (an open
//! breaker's [`Open`](super::Open), a throttle's [`Throttled`](super::Throttled)) ends the call at
//! once with that refusal, unless the policy's `wait_on_refusal` asks to wait it out and the wait
//! fits the deadline (the core's rule, [`reliable_core::answer`]).

use std::fmt;

use reliable_core::ConfigError;
use reliable_core::budget::BudgetConfig;
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

/// Builds [`RetryService`]s from a validated retry config and an optional budget.
#[derive(Clone)]
pub struct RetryLayer<P> {
    builder: Builder,
    policy: P,
    sharing: Sharing<Reliable>,
}

impl<P> fmt::Debug for RetryLayer<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryLayer")
            .field("builder", &self.builder)
            .finish_non_exhaustive()
    }
}

impl<P> RetryLayer<P> {
    /// Retries as `config` says, without a budget, on tokio's clock.
    pub fn new(config: RetryConfig, policy: P) -> Result<Self, ConfigError> {
        let builder = Reliable::builder("retry").no_breaker().retry(config);
        builder.clone().build().map_err(|e| e.error)?;
        Ok(RetryLayer {
            builder,
            policy,
            sharing: Sharing::per_service(),
        })
    }

    fn set(mut self, f: impl FnOnce(Builder) -> Builder) -> Self {
        self.builder = f(self.builder);
        self.sharing.reset();
        self
    }

    /// Adds a retry budget. Each service this layer wraps gets its own (shared by its clones);
    /// see [`shared`](Self::shared). Refuses an invalid config or a window over 10 slots.
    pub fn budget(self, config: BudgetConfig) -> Result<Self, ConfigError> {
        let layer = self.set(|b| b.budget(config));
        layer.builder.clone().build().map_err(|e| e.error)?;
        Ok(layer)
    }

    /// Retries draw from `ledger`, the one budget of extra attempts that hedges
    /// ([`HedgeLayer::ledger`](super::HedgeLayer::ledger)) and probes share, instead of a budget
    /// of their own; each request deposits in it as it enters. Every service this layer wraps,
    /// and every layer given a clone of `ledger`, draws from the same one.
    pub fn ledger(self, ledger: SharedLedger) -> Self {
        self.set(|b| b.shared_ledger(ledger.0))
    }

    /// The same layer reading time from `clock` and waiting on `sleep`.
    pub fn with_time(self, clock: impl Clock, sleep: impl Sleep) -> Self {
        self.set(|b| b.clock(clock).sleep(sleep))
    }

    /// Seeds the backoff jitter.
    pub fn seed(self, seed: u64) -> Self {
        self.set(|b| b.seed(seed))
    }

    /// Names the layer in what observers receive (default `retry`).
    pub fn named(self, name: &str) -> Self {
        self.set(|b| b.renamed(name))
    }

    /// Tells `observer` every retry (`on_retry`, with the wait) and every request given up
    /// (`on_give_up`, with the core's reason: `max-attempts`, `budget`, `deadline`, ...).
    pub fn observer(self, observer: impl Observer) -> Self {
        self.set(|b| b.observer(Only(Reports::Retry, std::sync::Arc::new(observer))))
    }

    /// One budget for every service this layer wraps (one per client process). The other
    /// settings apply whether they are set before or after this.
    pub fn shared(mut self) -> Self {
        self.sharing = Sharing::shared();
        self
    }

    fn make(&self) -> Reliable {
        match self.builder.clone().build() {
            Ok(r) => r,
            Err(_) => unreachable!("the settings were accepted when they were set"),
        }
    }
}

impl<S, P: Clone> Layer<S> for RetryLayer<P> {
    type Service = RetryService<S, P>;

    fn layer(&self, inner: S) -> Self::Service {
        let reliable = self.sharing.get(|| self.make());
        RetryService(Engine::new(
            inner,
            reliable,
            self.policy.clone(),
            Ending::Wrapped,
        ))
    }
}

/// A service whose failed calls are retried (see the [`tower` module docs](crate::tower)).
#[derive(Clone, Debug)]
pub struct RetryService<S, P>(Engine<S, P>);

engine_service!(RetryService);

/// The response future of [`RetryService`].
pub type RetryFuture<Res> = EngineFuture<Res>;

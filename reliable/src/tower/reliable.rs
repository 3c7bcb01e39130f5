//! [`ReliableLayer`]: the whole stack as one tower layer, decided by the core's call engine
//! ([`reliable_core::engine`]) as [`Reliable::call`](crate::Reliable::call) decides it: the
//! ledger, the retry with its budget, the adaptive throttle, the breaker every attempt passes,
//! the limits, hedging, the timeouts and the deadline. Built from one [`ReliableConfig`] (retry
//! → throttle → breaker, the order that keeps retries from amplifying an outage: while the
//! downstream is failing the retries are refused locally instead of sent, and the budget caps
//! them as a share of first tries), then any of [`hedge`](ReliableLayer::hedge),
//! [`limit`](ReliableLayer::limit), [`rate_limit`](ReliableLayer::rate_limit) and
//! [`ledger`](ReliableLayer::ledger); or from any [`Builder`] ([`ReliableLayer::from_builder`]).

use reliable_core::ConfigError;
use reliable_core::breaker::BreakerConfig;
use reliable_core::budget::BudgetConfig;
use reliable_core::hedge::HedgeConfig;
use reliable_core::limit::{LimiterConfig, RateConfig};
use reliable_core::retry::RetryConfig;
use reliable_core::throttle::ThrottleConfig;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use tower_layer::Layer;

use super::engine::{Ending, Engine, EngineFuture};
use super::sharing::Sharing;
use crate::Reliable;
use crate::builder::Builder;
use crate::clock::Clock;
use crate::error::BuildError;
use crate::sleep::Sleep;
/// Everything a [`ReliableLayer`] needs: the core's configs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ReliableConfig {
    /// Attempts, timeouts, deadline, backoff.
    pub retry: RetryConfig,
    /// The retry budget (`None`: unlimited).
    pub budget: Option<BudgetConfig>,
    /// The breaker every attempt passes.
    pub breaker: BreakerConfig,
    /// Client-side adaptive throttling (`None`: off).
    pub throttle: Option<ThrottleConfig>,
}

impl ReliableConfig {
    /// The seed library's breaker and retries (5 attempts of at most 8 s with jittered
    /// exponential backoff) plus Finagle's retry budget (retries up to 20% of first tries, with a
    /// floor of 10 retries per second), no throttling. For the seed's numbers alone, set `budget`
    /// to `None`.
    pub fn reliablekit_with_budget() -> Self {
        ReliableConfig {
            retry: RetryConfig::reliablekit(),
            budget: Some(BudgetConfig::Ratio(
                reliable_core::budget::RatioConfig::finagle(),
            )),
            breaker: BreakerConfig::reliablekit(),
            throttle: None,
        }
    }

    /// The old name of [`reliablekit_with_budget`](Self::reliablekit_with_budget): "reliablekit"
    /// elsewhere means the seed's numbers alone, without a budget.
    #[deprecated(
        note = "renamed reliablekit_with_budget(): it adds a retry budget to the seed's numbers"
    )]
    pub fn reliablekit() -> Self {
        Self::reliablekit_with_budget()
    }
}

/// The service a [`ReliableLayer`] builds: each request is one call of the engine, whose copies
/// go to clones of `S`. Clones share the instance (breaker, budget, throttle, limits, hedger).
#[derive(Clone, Debug)]
pub struct ReliableService<S, P>(Engine<S, P>);

impl<S, P> ReliableService<S, P> {
    /// The instance whose state every request draws from: its
    /// [`snapshot`](Reliable::snapshot), its breaker's [`state`](Reliable::state).
    pub fn reliable(&self) -> &Reliable {
        self.0.reliable()
    }

    /// The wrapped service.
    pub fn get_ref(&self) -> &S {
        self.0.get_ref()
    }
}

super::engine::engine_service!(ReliableService);

/// The response future of [`ReliableService`].
pub type ReliableFuture<Res> = EngineFuture<Res>;

/// The whole stack as one layer, decided by the core's call engine (see the
/// [`tower` module docs](crate::tower)). `P` classifies answers, copies requests (a request it
/// cannot copy is sent once, unhedged) and carries each copy's deadline.
#[derive(Clone, Debug)]
pub struct ReliableLayer<P> {
    builder: Builder,
    policy: P,
    sharing: Sharing<Reliable>,
    /// [`seed_each`](ReliableLayer::seed_each): the seed the wrapped services' seeds are drawn
    /// from, and how many services were wrapped since (shared by clones).
    seed_each: Option<(u64, Arc<AtomicU64>)>,
}

impl<P: Clone> ReliableLayer<P> {
    /// Validates every config; the first invalid one is refused with the field it names.
    pub fn new(config: ReliableConfig, policy: P) -> Result<Self, ConfigError> {
        let b = Reliable::builder("reliable")
            .retry(config.retry)
            .breaker(config.breaker);
        let b = match config.budget {
            Some(c) => b.budget(c),
            None => b,
        };
        let b = match config.throttle {
            Some(c) => b.throttle(c),
            None => b,
        };
        Self::from_builder(b, policy).map_err(|e| e.error)
    }

    /// Any stack a [`Builder`] describes, as one layer: a breaker per call or none, a ledger,
    /// hedges (for requests `policy` can copy), limits, a rate limit. Refused as
    /// [`Builder::build`] refuses it.
    pub fn from_builder(builder: Builder, policy: P) -> Result<Self, BuildError> {
        let layer = ReliableLayer {
            builder,
            policy,
            sharing: Sharing::per_service(),
            seed_each: None,
        };
        layer.check()
    }

    /// The layer with its builder validated.
    fn check(self) -> Result<Self, BuildError> {
        self.builder.clone().build()?;
        Ok(self)
    }

    /// The layer with its builder changed by `f`, already validated (the setting cannot make
    /// it invalid).
    fn set(mut self, f: impl FnOnce(Builder) -> Builder) -> Self {
        self.builder = f(self.builder);
        self.sharing.reset();
        self
    }

    /// The layer with its builder changed by `f`, validated.
    fn try_set(self, f: impl FnOnce(Builder) -> Builder) -> Result<Self, ConfigError> {
        self.set(f).check().map_err(|e| e.error)
    }

    /// The same layer reading time from `clock` and waiting on `sleep`.
    pub fn with_time(self, clock: impl Clock + Clone, sleep: impl Sleep + Clone) -> Self {
        self.set(|b| b.clock(clock).sleep(sleep))
    }

    /// Tells `observer` what the calls do: attempts, retries and give-ups, refusals, the
    /// breaker's transitions, hedges, limits, the ledger's answers, each call's end.
    pub fn observer(self, observer: impl crate::observer::Observer) -> Self {
        self.set(|b| b.observer(observer))
    }

    /// Retries, hedges and half-open probes draw from `ledger`, the one budget of extra attempts
    /// other layers and instances given a clone of it share (it replaces the retry budget), as
    /// a [`Builder::ledger`](crate::Builder::ledger)'s do.
    pub fn ledger(self, ledger: super::SharedLedger) -> Self {
        self.set(|b| b.shared_ledger(ledger.0))
    }

    /// Hedges the attempts of requests the policy can copy (see
    /// [`Builder::hedge`](crate::Builder::hedge)).
    pub fn hedge(self, config: HedgeConfig) -> Result<Self, ConfigError> {
        self.try_set(|b| b.idempotent().hedge(config))
    }

    /// Each copy of a hedged attempt may take `timeout` from its own send (see
    /// [`Builder::copy_timeout`](crate::Builder::copy_timeout)).
    pub fn copy_timeout(self, timeout: std::time::Duration) -> Result<Self, ConfigError> {
        self.try_set(|b| b.copy_timeout(timeout))
    }

    /// A concurrency limit on attempts in flight, hedges included (see
    /// [`Builder::limit`](crate::Builder::limit)).
    pub fn limit(self, config: LimiterConfig) -> Result<Self, ConfigError> {
        self.try_set(|b| b.limit(config))
    }

    /// A client-side rate limit on attempts sent (see
    /// [`Builder::rate_limit`](crate::Builder::rate_limit)).
    pub fn rate_limit(self, config: RateConfig) -> Result<Self, ConfigError> {
        self.try_set(|b| b.rate_limit(config))
    }

    /// Seeds the backoff's jitter (and the throttle's draws, unless given). Every service this
    /// layer wraps gets the same seed (see [`seed_each`](Self::seed_each)).
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed_each = None;
        self.set(|b| b.seed(seed))
    }

    /// Seeds each service this layer wraps (and each clone of the layer wraps) with a seed of
    /// its own, drawn from `seed` and the order it was wrapped in: the `n`-th (from 0) gets
    /// `splitmix64(seed ^ n)`. Per-client instances given one [`seed`](Self::seed) draw the same
    /// numbers, so their backoffs (and throttles) move in step, a herd no real fleet of clients
    /// is; with `seed_each` they are independent and a run is still repeatable when the services
    /// are wrapped in the same order. A [`shared`](Self::shared) layer's one instance gets the
    /// first seed.
    pub fn seed_each(mut self, seed: u64) -> Self {
        self = self.set(|b| b);
        self.seed_each = Some((seed, Arc::new(AtomicU64::new(0))));
        self
    }

    /// Whether every service this layer wraps shares one instance ([`shared`](Self::shared)),
    /// rather than getting one of its own: what a caller that builds one service per client
    /// reads to know whether the clients share state (one breaker, budget, ledger, limiter) or
    /// each has its own, as `policy::Route::layer` (feature `policy`) decides from the
    /// policy's scopes.
    pub fn is_shared(&self) -> bool {
        self.sharing.is_shared()
    }

    /// The throttle's rejection draws come from `draws` (see [`ThrottleLayer::draws`](super::ThrottleLayer::draws)).
    pub fn throttle_draws(self, draws: impl Fn() -> u64 + Send + Sync + 'static) -> Self {
        self.set(|b| b.throttle_draws(draws))
    }

    /// One instance (breaker, budget, throttle, limits, hedger) for every service this layer
    /// wraps (per process rather than per wrapped service).
    pub fn shared(mut self) -> Self {
        self.sharing = Sharing::shared();
        self
    }

    fn make(&self) -> Reliable {
        let builder = match &self.seed_each {
            Some((seed, wrapped)) => {
                let n = wrapped.fetch_add(1, Ordering::Relaxed);
                self.builder
                    .clone()
                    .seed(reliable_core::sample::splitmix64(seed ^ n))
            }
            None => self.builder.clone(),
        };
        match builder.build() {
            Ok(r) => r,
            Err(_) => unreachable!("the builder was validated when it was set"),
        }
    }
}

impl<S, P: Clone> Layer<S> for ReliableLayer<P> {
    type Service = ReliableService<S, P>;

    fn layer(&self, inner: S) -> Self::Service {
        let reliable = self.sharing.get(|| self.make());
        ReliableService(Engine::new(
            inner,
            reliable,
            self.policy.clone(),
            Ending::Wrapped,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tower::HttpPolicy;

    /// The first uniform draws of the instance `layer` gives the next service it wraps.
    fn draws(layer: &ReliableLayer<HttpPolicy>) -> [u64; 3] {
        let svc = layer.layer(());
        let inner = &svc.reliable().inner;
        [(); 3].map(|_| inner.throttle_sample())
    }

    fn layer() -> ReliableLayer<HttpPolicy> {
        ReliableLayer::from_builder(Reliable::builder("api").no_breaker(), HttpPolicy::new())
            .unwrap()
    }

    #[test]
    fn seed_each_gives_each_wrapped_service_its_own_repeatable_seed() {
        // One seed: every per-client instance draws the same numbers (clients in step).
        let one = layer().seed(7);
        assert_eq!(draws(&one), draws(&one));
        // seed_each: each wrapped service its own, the same again for a layer built the same.
        let each = layer().seed_each(7);
        let (a, b) = (draws(&each), draws(&each.clone()));
        assert_ne!(a, b);
        let again = layer().seed_each(7);
        assert_eq!((draws(&again), draws(&again)), (a, b));
        // The n-th wrapped service's seed is splitmix64(seed ^ n).
        let first = layer().seed(reliable_core::sample::splitmix64(7));
        assert_eq!(draws(&first), a);
        // A later `seed` gives every service one seed again.
        let reset = layer().seed_each(7).seed(3);
        assert_eq!(draws(&reset), draws(&reset));
        // Shared: one instance, seeded with the first.
        let shared = layer().seed_each(7).shared();
        assert!(shared.is_shared() && !each.is_shared());
        let (s1, s2) = (shared.layer(()), shared.layer(()));
        assert_eq!(s1.reliable().inner.throttle_sample(), a[0]);
        assert_eq!(s2.reliable().inner.throttle_sample(), a[1]);
    }
}

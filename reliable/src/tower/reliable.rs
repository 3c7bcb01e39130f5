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
use tower_layer::Layer;

use super::engine::{Ending, Engine, EngineFuture};
use super::sharing::Sharing;
use crate::builder::Builder;
use crate::clock::Clock;
use crate::error::BuildError;
use crate::reliable::Reliable;
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

    /// Seeds the backoff's jitter (and the throttle's draws, unless given).
    pub fn seed(self, seed: u64) -> Self {
        self.set(|b| b.seed(seed))
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
        match self.builder.clone().build() {
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

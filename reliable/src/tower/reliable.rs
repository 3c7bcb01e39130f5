//! [`ReliableLayer`]: retry (with its budget) → adaptive throttle → breaker, built from one
//! [`ReliableConfig`], in the order that keeps retries from amplifying an outage: every attempt
//! passes the breaker and the throttle, so while the downstream is failing the retries are
//! refused locally instead of sent, and the budget caps them as a share of first tries.

use reliable_core::ConfigError;
use reliable_core::breaker::BreakerConfig;
use reliable_core::budget::BudgetConfig;
use reliable_core::retry::RetryConfig;
use reliable_core::throttle::ThrottleConfig;
use tower_layer::Layer;

use super::breaker::{BreakerLayer, BreakerService};
use super::retry::{RetryLayer, RetryService};
use super::throttle::{ThrottleLayer, ThrottleService};
use crate::clock::Clock;
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

/// The service a [`ReliableLayer`] builds: retry → throttle → breaker around `S`.
pub type ReliableService<S, P> = RetryService<ThrottleService<BreakerService<S, P>, P>, P>;

/// Retry → throttle → breaker from one config. `P` classifies answers and copies requests for
/// every layer.
#[derive(Clone, Debug)]
pub struct ReliableLayer<P> {
    retry: RetryLayer<P>,
    throttle: ThrottleLayer<P>,
    breaker: BreakerLayer<P>,
}

impl<P: Clone> ReliableLayer<P> {
    /// Validates every config; the first invalid one is refused with the field it names.
    pub fn new(config: ReliableConfig, policy: P) -> Result<Self, ConfigError> {
        let mut retry = RetryLayer::new(config.retry, policy.clone())?;
        if let Some(b) = config.budget {
            retry = retry.budget(b)?;
        }
        let throttle = match config.throttle {
            Some(t) => ThrottleLayer::new(t, policy.clone())?,
            None => ThrottleLayer::disabled(policy.clone()),
        };
        Ok(ReliableLayer {
            retry,
            throttle,
            breaker: BreakerLayer::new(config.breaker, policy)?,
        })
    }
}

impl<P: Clone> ReliableLayer<P> {
    /// The same layers reading time from `clock` and waiting on `sleep`.
    pub fn with_time(self, clock: impl Clock + Clone, sleep: impl Sleep + Clone) -> Self {
        ReliableLayer {
            retry: self.retry.with_time(clock.clone(), sleep.clone()),
            throttle: self.throttle.with_time(clock.clone(), sleep.clone()),
            breaker: self.breaker.with_time(clock, sleep),
        }
    }

    /// Tells `observer` what every layer reports: the retry's retries and give-ups, the
    /// throttle's and the breaker's refusals, the breaker's transitions.
    pub fn observer(self, observer: impl crate::observer::Observer) -> Self {
        let o = std::sync::Arc::new(observer);
        ReliableLayer {
            retry: self.retry.observer(Shared(o.clone())),
            throttle: self.throttle.observer(Shared(o.clone())),
            breaker: self.breaker.observer(Shared(o)),
        }
    }

    /// Retries and half-open probes draw from `ledger`, the one budget of extra attempts a
    /// [`HedgeLayer`](super::HedgeLayer) below may share ([`RetryLayer::ledger`],
    /// [`BreakerLayer::ledger`]), as a [`Builder::ledger`](crate::Builder::ledger)'s do.
    pub fn ledger(self, ledger: super::SharedLedger) -> Self {
        ReliableLayer {
            retry: self.retry.ledger(ledger.clone()),
            breaker: self.breaker.ledger(ledger),
            ..self
        }
    }

    /// The throttle's rejection draws come from `draws` (see [`ThrottleLayer::draws`]).
    pub fn throttle_draws(self, draws: impl Fn() -> u64 + Send + Sync + 'static) -> Self {
        ReliableLayer {
            throttle: self.throttle.draws(draws),
            ..self
        }
    }

    /// One budget, throttle and breaker for every service this layer wraps (per process rather
    /// than per wrapped service).
    pub fn shared(self) -> Self {
        ReliableLayer {
            retry: self.retry.shared(),
            throttle: self.throttle.shared(),
            breaker: self.breaker.shared(),
        }
    }
}

impl<S, P: Clone> Layer<S> for ReliableLayer<P> {
    type Service = ReliableService<S, P>;

    fn layer(&self, inner: S) -> Self::Service {
        self.retry
            .layer(self.throttle.layer(self.breaker.layer(inner)))
    }
}

/// One observer given to several layers.
#[derive(Debug)]
struct Shared<O>(std::sync::Arc<O>);

impl<O: crate::observer::Observer> crate::observer::Observer for Shared<O> {
    fn on_attempt(&self, name: &str, attempt: u32) {
        self.0.on_attempt(name, attempt);
    }
    fn on_attempt_end(
        &self,
        name: &str,
        attempt: u32,
        class: Option<reliable_core::outcome::ErrorClass>,
    ) {
        self.0.on_attempt_end(name, attempt, class);
    }
    fn on_retry(
        &self,
        name: &str,
        attempt: u32,
        class: reliable_core::outcome::ErrorClass,
        delay: std::time::Duration,
    ) {
        self.0.on_retry(name, attempt, class, delay);
    }
    fn on_reject(&self, name: &str, refusal: crate::observer::NotSent) {
        self.0.on_reject(name, refusal);
    }
    fn on_transition(&self, name: &str, transition: reliable_core::breaker::Transition) {
        self.0.on_transition(name, transition);
    }
    fn on_give_up(&self, name: &str, attempts: u32, reason: &'static str) {
        self.0.on_give_up(name, attempts, reason);
    }
    fn on_call_end(&self, name: &str, end: &crate::observer::CallEnd) {
        self.0.on_call_end(name, end);
    }
    fn on_hedge(&self, name: &str, attempt: u32) {
        self.0.on_hedge(name, attempt);
    }
    fn on_hedge_refused(&self, name: &str, refusal: crate::observer::NotSent) {
        self.0.on_hedge_refused(name, refusal);
    }
    fn on_hedge_won(&self, name: &str, attempt: u32, hedge: bool) {
        self.0.on_hedge_won(name, attempt, hedge);
    }
    fn on_attempt_cancelled(&self, name: &str, attempt: u32) {
        self.0.on_attempt_cancelled(name, attempt);
    }
    fn on_ledger(&self, name: &str, kind: reliable_core::ledger::Extra, granted: bool) {
        self.0.on_ledger(name, kind, granted);
    }
    fn on_limit_change(&self, name: &str, from: u32, to: u32) {
        self.0.on_limit_change(name, from, to);
    }
}

//! [`Builder`]: a [`Reliable`] from `std::time::Duration`s, the core's configs, or a preset.
//!
//! Every setting has a default (the seed library's, with a gated half-open probe; see
//! [`Reliable::builder`]); each method changes one thing. [`Builder::build`] validates everything
//! once and refuses a bad config with a [`ConfigError`] naming the field, e.g.
//! `breaker.failure_rate` or `retry.max_attempts`.
//!
//! ```
//! use reliable::Reliable;
//! use std::time::Duration;
//!
//! let rel = Reliable::builder("llm")
//!     .attempts(4)
//!     .timeout(Duration::from_secs(8))
//!     .backoff(Duration::from_millis(200), 2.0, Duration::from_secs(5))
//!     .jitter(0.1)
//!     .build()?;
//! assert_eq!(rel.name(), "llm");
//!
//! let err = Reliable::builder("llm").attempts(0).build().unwrap_err();
//! assert_eq!(err.field(), "retry.max_attempts");
//! # Ok::<(), reliable::ConfigError>(())
//! ```

use crate::breaker::{Owned, Transitions};
use crate::clock::{Clock, ManualClock};
use crate::error::ConfigError;
use crate::observer::Observer;
use crate::reliable::{Inner, Reliable, Scope};
use crate::rng::Rng;
use crate::sleep::{ManualSleep, Sleep};
use crate::stats::Stats;
use reliable_core::backoff::{BackoffConfig, Jitter, Shape};
use reliable_core::breaker::{BreakerConfig, BreakerPolicy, HalfOpenConfig, ProbeRule};
use reliable_core::budget::{AnyBudget, BudgetConfig, BudgetPolicy};
use reliable_core::retry::{RetryConfig, RetryPolicy};
use reliable_core::throttle::{AdaptiveThrottle, ThrottleConfig, ThrottlePolicy};
use reliable_core::{Duration, Problem};
use std::sync::{Arc, Mutex};

/// Builds a [`Reliable`]. Made by [`Reliable::builder`] and the presets.
#[derive(Debug, Clone)]
pub struct Builder {
    name: String,
    breaker: Option<BreakerConfig>,
    scope: Scope,
    retry: RetryConfig,
    budget: Option<BudgetConfig>,
    throttle: Option<ThrottleConfig>,
    clock: Option<Arc<dyn Clock>>,
    sleep: Option<Arc<dyn Sleep>>,
    seed: Option<u64>,
    observers: Vec<Arc<dyn Observer>>,
    #[cfg(feature = "metrics")]
    metrics: bool,
}

impl Builder {
    pub(crate) fn new(name: &str) -> Self {
        Builder {
            name: name.to_string(),
            breaker: Some(BreakerConfig {
                open: reliable_core::breaker::OpenConfig {
                    jitter: 0.1,
                    ..BreakerConfig::reliablekit().open
                },
                half_open: HalfOpenConfig {
                    max_in_flight: Some(1),
                    rule: ProbeRule::Consecutive { successes: 3 },
                    probe_timeout: Duration::from_secs(10),
                    decide_at_minimum: false,
                },
                ..BreakerConfig::reliablekit()
            }),
            scope: Scope::PerAttempt,
            retry: RetryConfig::reliablekit(),
            budget: None,
            throttle: None,
            clock: None,
            sleep: None,
            seed: None,
            observers: Vec::new(),
            #[cfg(feature = "metrics")]
            metrics: false,
        }
    }

    /// The seed library exactly (`reliablekit` 0.1's `CircuitBreaker()` and `@reliable()`
    /// defaults): a failure rate of 50% over 20 calls opens it for 30 s; half-open lets **every**
    /// call through until 3 succeed in a row; 5 attempts of at most 8 s, `0.2 s·2^(a−1)` ±10%
    /// between them; one breaker verdict per attempt.
    pub(crate) fn reliablekit(name: &str) -> Self {
        Builder {
            breaker: Some(BreakerConfig::reliablekit()),
            ..Builder::new(name)
        }
    }

    /// The layered-stack exercise's primary: a breaker that opens after 2 failures in a row for
    /// 20 s and then lets one trial through, around (not inside) 2 attempts with no wait between.
    pub(crate) fn layered_exercise(name: &str) -> Self {
        Builder {
            breaker: Some(BreakerConfig::layered_exercise()),
            scope: Scope::PerCall,
            retry: RetryConfig {
                max_attempts: Some(2),
                attempt_timeout: None,
                ..RetryConfig::new(BackoffConfig::immediate())
            },
            ..Builder::new(name)
        }
    }

    /// The name the instance will have.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Attempts in all, the first try included (`max_attempts`; 1: no retries).
    pub fn attempts(mut self, attempts: u32) -> Self {
        self.retry.max_attempts = Some(attempts);
        self
    }

    /// How long each attempt may take; a timed-out async attempt is dropped (cancelled).
    pub fn timeout(mut self, timeout: std::time::Duration) -> Self {
        self.retry.attempt_timeout = Some(timeout.into());
        self
    }

    /// No per-attempt timeout.
    pub fn no_timeout(mut self) -> Self {
        self.retry.attempt_timeout = None;
        self
    }

    /// How long a whole call may take, retries and waits included.
    pub fn deadline(mut self, deadline: std::time::Duration) -> Self {
        self.retry.deadline = Some(deadline.into());
        self
    }

    /// Exponential backoff: before retry `k`, `base·factor^(k−1)`, at most `cap`, with the jitter
    /// already set (see [`jitter`](Self::jitter)).
    pub fn backoff(
        mut self,
        base: std::time::Duration,
        factor: f64,
        cap: std::time::Duration,
    ) -> Self {
        self.retry.backoff = BackoffConfig {
            shape: Shape::Exponential {
                base: base.into(),
                factor,
            },
            cap: Some(cap.into()),
            ..self.retry.backoff
        };
        self
    }

    /// ±`fraction` proportional jitter on every backoff delay (the seed's `jitter=0.1`).
    pub fn jitter(mut self, fraction: f64) -> Self {
        self.retry.backoff.jitter = Jitter::Proportional { fraction };
        self
    }

    /// Retries go at once, with no wait.
    pub fn no_backoff(mut self) -> Self {
        self.retry.backoff = BackoffConfig::immediate();
        self
    }

    /// The whole retry policy, from the core's config (attempts, timeouts, backoffs, server
    /// delays).
    pub fn retry(mut self, config: RetryConfig) -> Self {
        self.retry = config;
        self
    }

    /// The longest server-requested delay (`Retry-After`) honoured; zero ignores them.
    pub fn max_server_delay(mut self, max: std::time::Duration) -> Self {
        self.retry.max_server_delay = max.into();
        self
    }

    /// The breaker, from the core's config.
    pub fn breaker(mut self, config: BreakerConfig) -> Self {
        self.breaker = Some(config);
        self
    }

    /// Runs the breaker in shadow mode ([`BreakerConfig::shadow`]), to roll it out safely: it
    /// decides as usual and reports what it would do (would-be transitions to `on_transition`,
    /// would-be rejections to `on_would_reject`, the snapshot's `would_reject`, the metrics'
    /// `reliable_breaker_would_reject_total`) but lets every call through. No effect without a
    /// breaker.
    pub fn shadow_breaker(mut self) -> Self {
        if let Some(config) = &mut self.breaker {
            config.shadow = true;
        }
        self
    }

    /// No breaker.
    pub fn no_breaker(mut self) -> Self {
        self.breaker = None;
        self
    }

    /// One breaker verdict per call, after its retries (`breaker(retry(call))`), instead of one
    /// per attempt (`retry(breaker(call))`, the default). Per call, a burst of retries counts
    /// once and a retry never meets a breaker that opened meanwhile; per attempt, the breaker
    /// learns sooner and stops the retries of calls in flight when it opens.
    pub fn breaker_per_call(mut self) -> Self {
        self.scope = Scope::PerCall;
        self
    }

    /// A retry budget shared by every clone: retries as a share of first tries (see
    /// [`reliable_core::budget`]). Without one, only the attempt limit bounds retries.
    pub fn budget(mut self, config: BudgetConfig) -> Self {
        self.budget = Some(config);
        self
    }

    /// Client-side adaptive throttling (Google SRE): reject calls locally, with a probability that
    /// grows as the downstream refuses more of them for overload (429, 503, `Retry-After`: see
    /// [`classify::accepted`](crate::classify::accepted)). Other failures are the breaker's.
    pub fn throttle(mut self, config: ThrottleConfig) -> Self {
        self.throttle = Some(config);
        self
    }

    /// The clock. Default: tokio's with the `tokio` feature (so `tokio::time::pause()` works),
    /// the system clock otherwise. The clock is read only when a decision needs it: a call that
    /// succeeds through a closed breaker with a count window, no timeout, no deadline, no budget,
    /// no throttle and no observer reads it not at all.
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Some(Arc::new(clock));
        self
    }

    /// The timer for backoff waits and async timeouts. Default: tokio's with the `tokio` feature,
    /// [`TimerSleep`](crate::sleep::TimerSleep) otherwise.
    pub fn sleep(mut self, sleep: impl Sleep) -> Self {
        self.sleep = Some(Arc::new(sleep));
        self
    }

    /// Time by hand: `clock` as the clock, and waits that advance it at once.
    pub fn manual_time(self, clock: ManualClock) -> Self {
        let sleep = ManualSleep::new(clock.clone());
        self.clock(clock).sleep(sleep)
    }

    /// The seed of this instance's random numbers (backoff jitter, throttling, the breaker's
    /// open-time jitter). Default: a different one per instance, from the OS's hasher keys.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Adds an observer (several may be added).
    pub fn observer(mut self, observer: impl Observer) -> Self {
        self.observers.push(Arc::new(observer));
        self
    }

    /// Exports calls, attempts, durations and breaker states through the `metrics` facade,
    /// labelled with this instance's name (see [`metrics`](crate::metrics)).
    #[cfg(feature = "metrics")]
    pub fn metrics(mut self) -> Self {
        self.metrics = true;
        self
    }

    /// Validates everything and builds the instance.
    pub fn build(self) -> Result<Reliable, ConfigError> {
        if self.name.is_empty() {
            return Err(ConfigError::new(
                "",
                reliable_core::ConfigError::new("name", Problem::Inconsistent("must not be empty")),
            ));
        }
        let retry = RetryPolicy::new(self.retry).map_err(|e| ConfigError::new("retry", e))?;
        let seed = self.seed.unwrap_or_else(crate::rng::random_seed);
        let rng = Rng::new(seed);
        let budget = match self.budget {
            Some(config) => {
                let policy =
                    BudgetPolicy::new(config).map_err(|e| ConfigError::new("budget", e))?;
                let budget = AnyBudget::new(&policy).map_err(|e| ConfigError::new("budget", e))?;
                Some(Mutex::new(budget))
            }
            None => None,
        };
        let throttle = match self.throttle {
            Some(config) => {
                let policy =
                    ThrottlePolicy::new(config).map_err(|e| ConfigError::new("throttle", e))?;
                let t =
                    AdaptiveThrottle::new(policy).map_err(|e| ConfigError::new("throttle", e))?;
                Some(Mutex::new(t))
            }
            None => None,
        };
        let name: Arc<str> = Arc::from(self.name.as_str());
        #[allow(unused_mut)]
        let mut observers = self.observers;
        #[cfg(feature = "metrics")]
        if self.metrics {
            observers.push(Arc::new(crate::metrics::Metrics::new(
                &name,
                self.breaker.map(|c| c.shadow),
            )));
        }
        let observers: Arc<[Arc<dyn Observer>]> = observers.into();
        let breaker = match self.breaker {
            Some(config) => {
                let policy =
                    BreakerPolicy::new(config).map_err(|e| ConfigError::new("breaker", e))?;
                let outlet = Transitions::new(name.clone(), observers.clone());
                Some(
                    Owned::new(policy, rng.fork(1), outlet)
                        .map_err(|e| ConfigError::new("breaker", e))?,
                )
            }
            None => None,
        };
        let config = &self.retry;
        let breaker_needs_time = breaker.as_ref().is_some_and(|b| {
            let c = b.policy().config();
            c.slow_calls.is_some()
                || c.slow_start.is_some()
                || matches!(c.window, reliable_core::breaker::WindowConfig::Time { .. })
                    && b.policy().needs_window()
        });
        let success_needs_time =
            breaker_needs_time || budget.is_some() || throttle.is_some() || !observers.is_empty();
        let eager_clock =
            success_needs_time || config.attempt_timeout.is_some() || config.deadline.is_some();
        let label = label(
            &self.name,
            breaker.is_some(),
            config.max_attempts != Some(1),
            self.scope,
        );
        Ok(Reliable::from_inner(Inner {
            name,
            label,
            breaker,
            scope: self.scope,
            retry,
            budget,
            throttle,
            clock: self.clock.unwrap_or_else(default_clock),
            sleep: self.sleep.unwrap_or_else(default_sleep),
            rng,
            observers,
            eager_clock,
            fast_first: !success_needs_time && self.scope == Scope::PerAttempt,
            success_needs_time,
            stats: Stats::default(),
        }))
    }
}

/// `breaker(retry(name))` and the like: the layers a call goes through, outermost first.
fn label(name: &str, breaker: bool, retry: bool, scope: Scope) -> String {
    match (breaker, retry, scope) {
        (true, true, Scope::PerCall) => format!("breaker(retry({name}))"),
        (true, true, Scope::PerAttempt) => format!("retry(breaker({name}))"),
        (true, false, _) => format!("breaker({name})"),
        (false, true, _) => format!("retry({name})"),
        (false, false, _) => name.to_string(),
    }
}

fn default_clock() -> Arc<dyn Clock> {
    #[cfg(feature = "tokio")]
    return Arc::new(crate::clock::TokioClock::new());
    #[cfg(not(feature = "tokio"))]
    return Arc::new(crate::clock::SystemClock::new());
}

fn default_sleep() -> Arc<dyn Sleep> {
    #[cfg(feature = "tokio")]
    return Arc::new(crate::sleep::TokioSleep);
    #[cfg(not(feature = "tokio"))]
    return Arc::new(crate::sleep::TimerSleep);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_configs_name_their_field() {
        let field = |b: Builder| b.build().map(|_| ()).unwrap_err().field();
        assert_eq!(field(Reliable::builder("")), "name");
        assert_eq!(
            field(Reliable::builder("x").attempts(0)),
            "retry.max_attempts"
        );
        assert_eq!(
            field(Reliable::builder("x").timeout(std::time::Duration::ZERO)),
            "retry.attempt_timeout"
        );
        assert_eq!(
            field(Reliable::builder("x").jitter(1.5)),
            "retry.backoff.jitter.fraction"
        );
        let mut bc = BreakerConfig::reliablekit();
        bc.failure_rate = Some(-0.5);
        assert_eq!(
            field(Reliable::builder("x").breaker(bc)),
            "breaker.failure_rate"
        );
        let mut bc = BreakerConfig::reliablekit();
        bc.half_open.max_in_flight = Some(100);
        assert_eq!(
            field(Reliable::builder("x").breaker(bc)),
            "breaker.half_open.max_in_flight"
        );
        let t = ThrottleConfig {
            k: 0.5,
            ..ThrottleConfig::google_sre()
        };
        assert_eq!(field(Reliable::builder("x").throttle(t)), "throttle.k");
    }

    #[test]
    fn labels_name_the_layers() {
        let l = |b: Builder| b.build().unwrap().label().to_string();
        assert_eq!(
            l(Reliable::layered_exercise("primary")),
            "breaker(retry(primary))"
        );
        assert_eq!(
            l(Reliable::layered_exercise("backup").no_breaker()),
            "retry(backup)"
        );
        assert_eq!(l(Reliable::builder("a")), "retry(breaker(a))");
        assert_eq!(l(Reliable::builder("a").attempts(1)), "breaker(a)");
        assert_eq!(l(Reliable::builder("a").attempts(1).no_breaker()), "a");
    }
}

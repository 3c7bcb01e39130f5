//! [`Builder`]: a [`Reliable`] from `std::time::Duration`s, the core's configs, or a preset.
//!
//! Every setting has a default (the seed library's, with a gated half-open probe; see
//! [`Reliable::builder`]); each method changes one thing. [`Builder::build`] validates everything
//! once and refuses a bad config with a [`BuildError`] naming the field, e.g.
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
//! # Ok::<(), reliable::BuildError>(())
//! ```

use crate::breaker::{Owned, Transitions};
use crate::clock::{Clock, ManualClock};
use crate::error::BuildError;
use crate::instance::{Inner, Reliable, Scope};
use crate::observer::Observer;
use crate::rng::Rng;
use crate::sleep::{ManualSleep, Sleep};
use crate::stats::Stats;
use reliable_core::backoff::{BackoffConfig, Jitter, Shape};
use reliable_core::breaker::{
    BreakerConfig, BreakerPolicy, HalfOpenConfig, ProbeRule, SlowCallRule, WindowConfig,
};
use reliable_core::budget::{AnyBudget, BudgetConfig, BudgetPolicy, RatioConfig};
use reliable_core::hedge::{HedgeConfig, HedgeDelay, HedgePolicy, Hedger, Idempotency};
use reliable_core::ledger::ExtraLedger;
use reliable_core::limit::{
    Limiter, LimiterConfig, LimiterPolicy, RateConfig, RateLimiter, RatePolicy,
};
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
    nesting: Option<reliable_core::engine::Nesting>,
    retry: RetryConfig,
    budget: Option<BudgetConfig>,
    throttle: Option<ThrottleConfig>,
    hedge: Option<HedgeConfig>,
    copy_timeout: Option<Duration>,
    idempotency: Idempotency,
    ledger: Option<RatioConfig>,
    /// A ledger shared with other instances or layers (a tower `SharedLedger`), instead of one
    /// of this instance's own.
    shared_ledger: Option<Arc<Mutex<ExtraLedger>>>,
    /// Retries draw from the ledger (it is the retry budget); else only hedges and probes do.
    ledger_retries: bool,
    limit: Option<LimiterConfig>,
    rate: Option<RateConfig>,
    clock: Option<Arc<dyn Clock>>,
    sleep: Option<Arc<dyn Sleep>>,
    seed: Option<u64>,
    throttle_draws: Option<crate::rng::Given>,
    observers: Vec<Arc<dyn Observer>>,
    #[cfg(feature = "metrics")]
    metrics: bool,
    #[cfg(feature = "fleet")]
    fleet_breaker: Option<crate::fleet::FleetBreaker>,
    #[cfg(feature = "fleet")]
    fleet_budget: Option<crate::fleet::FleetBudget>,
}

impl Builder {
    pub(crate) fn new(name: &str) -> Self {
        Builder {
            name: name.to_string(),
            breaker: Some(default_breaker()),
            scope: Scope::PerAttempt,
            nesting: None,
            retry: RetryConfig::reliablekit(),
            budget: None,
            throttle: None,
            hedge: None,
            copy_timeout: None,
            idempotency: Idempotency::NotIdempotent,
            ledger: None,
            shared_ledger: None,
            ledger_retries: true,
            limit: None,
            rate: None,
            clock: None,
            sleep: None,
            seed: None,
            throttle_draws: None,
            observers: Vec::new(),
            #[cfg(feature = "metrics")]
            metrics: false,
            #[cfg(feature = "fleet")]
            fleet_breaker: None,
            #[cfg(feature = "fleet")]
            fleet_budget: None,
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

    /// How long each attempt may take; a timed-out async attempt is dropped (cancelled). A hedged
    /// attempt as a whole, from its first send: each copy's own is [`copy_timeout`](Self::copy_timeout).
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

    /// The delay before the first retry of an exponential backoff: the seed's `base_delay`.
    /// Default 0.2 s. Keeps the factor and the cap; another backoff shape becomes exponential
    /// with factor 2.
    pub fn base_delay(mut self, base: std::time::Duration) -> Self {
        let factor = match self.retry.backoff.shape {
            Shape::Exponential { factor, .. } => factor,
            _ => 2.0,
        };
        self.retry.backoff.shape = Shape::Exponential {
            base: base.into(),
            factor,
        };
        self
    }

    /// How much each retry's delay grows over the one before: the seed's `factor`. Default 2.
    /// Keeps the base delay and the cap; another backoff shape becomes exponential from 0.2 s.
    pub fn factor(mut self, factor: f64) -> Self {
        let base = match self.retry.backoff.shape {
            Shape::Exponential { base, .. } => base,
            _ => Duration::from_millis(200),
        };
        self.retry.backoff.shape = Shape::Exponential { base, factor };
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

    /// Trip when failures ÷ calls in the window reach `rate` (inclusive), in (0, 1]: the seed's
    /// `failure_rate`. Default 0.5.
    pub fn failure_rate(mut self, rate: f64) -> Self {
        self.breaker_config().failure_rate = Some(rate);
        self
    }

    /// The rates are computed over the last `calls` calls: the seed's `window`. Default 20.
    pub fn window(mut self, calls: u32) -> Self {
        self.breaker_config().window = WindowConfig::Count { calls };
        self
    }

    /// The rates are computed over the calls of the last `span`, kept in `buckets` buckets (old
    /// buckets drop out whole), instead of the last so many calls.
    pub fn time_window(mut self, span: std::time::Duration, buckets: u32) -> Self {
        self.breaker_config().window = WindowConfig::Time {
            span: span.into(),
            buckets,
        };
        self
    }

    /// No rate decides before the window holds at least `calls` calls. Default 20.
    pub fn minimum_calls(mut self, calls: u32) -> Self {
        self.breaker_config().minimum_calls = calls;
        self
    }

    /// How long the breaker stays open after it trips: the seed's `cooldown`. Default 30 s,
    /// spread by ±10% (see [`open_jitter`](Self::open_jitter)).
    pub fn cooldown(mut self, cooldown: std::time::Duration) -> Self {
        self.breaker_config().open.duration = cooldown.into();
        self
    }

    /// ±`fraction` uniform spread of each open time, so clients that tripped together do not
    /// probe together. Default 0.1; 0 gives the seed's exact cooldown.
    pub fn open_jitter(mut self, fraction: f64) -> Self {
        self.breaker_config().open.jitter = fraction;
        self
    }

    /// `successes` successful probes in a row close the breaker; a failed probe re-opens it:
    /// the seed's `probe`. Default 3.
    pub fn probe(mut self, successes: u32) -> Self {
        self.breaker_config().half_open.rule = ProbeRule::Consecutive { successes };
        self
    }

    /// Probes let through at once while half-open. Default 1; the seed let every call through
    /// (no limit), which a hung probe cannot wedge only because probes are leased (10 s).
    pub fn probes_in_flight(mut self, probes: u32) -> Self {
        self.breaker_config().half_open.max_in_flight = Some(probes);
        self
    }

    /// Also trip after `failures` failures in a row while closed. Default off.
    pub fn consecutive_failures(mut self, failures: u32) -> Self {
        self.breaker_config().consecutive_failures = Some(failures);
        self
    }

    /// Also trip when calls longer than `threshold` make up `rate` (inclusive) of the window.
    /// Default off.
    pub fn slow_call(mut self, threshold: std::time::Duration, rate: f64) -> Self {
        self.breaker_config().slow_calls = Some(SlowCallRule {
            threshold: threshold.into(),
            rate,
        });
        self
    }

    /// The whole breaker, from the core's config. This **replaces** every breaker setting made so
    /// far and the builder's breaker defaults (listed on [`Reliable::builder`]): a config built
    /// from `BreakerConfig::default()` has a minimum of 10 calls and no open-time jitter. To change
    /// one setting, use its method ([`failure_rate`](Self::failure_rate), [`window`](Self::window),
    /// [`cooldown`](Self::cooldown), …) instead.
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

    /// The breaker config the breaker methods change: the builder's own, or its defaults again
    /// after [`no_breaker`](Self::no_breaker).
    fn breaker_config(&mut self) -> &mut BreakerConfig {
        self.breaker.get_or_insert_with(default_breaker)
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
        self.nesting = None;
        self
    }

    /// Where each of the throttle, the breaker, the limit and the rate limit sits around the
    /// retry, in which order, and where the ledger takes each call's deposit (as a policy file
    /// nests them; see [`reliable_core::engine::Nesting`]): a gate outside the retry judges the
    /// call once, inside it every attempt. Overrides [`breaker_per_call`](Self::breaker_per_call);
    /// calls follow it in [`Reliable::call`], [`Reliable::call_blocking`] and the tower
    /// `ReliableLayer` built from this builder (each drives the core's call engine).
    pub fn nesting(mut self, nesting: reliable_core::engine::Nesting) -> Self {
        self.scope = match nesting.per_call(reliable_core::engine::Gate::Breaker) {
            true => Scope::PerCall,
            false => Scope::PerAttempt,
        };
        self.nesting = Some(nesting);
        self
    }

    /// A circuit breaker shared by a fleet of processes through a store, in place of this
    /// instance's own (feature `fleet`; see [`crate::fleet`]): every call (blocking, async, the
    /// tower layer built from this builder) asks it where the breaker sits, per attempt or per
    /// call, as it would ask its own. The engine decides at once, on the fleet breaker's view
    /// ([`FleetBreaker::decide`](crate::fleet::FleetBreaker::decide)): build the fleet breaker
    /// in [`Mode::Cached`](crate::fleet::Mode::Cached), inside the tokio runtime its refreshes
    /// are to run on. The breaker settings of this builder are then unused.
    #[cfg(feature = "fleet")]
    pub fn fleet_breaker(mut self, breaker: crate::fleet::FleetBreaker) -> Self {
        self.fleet_breaker = Some(breaker);
        self
    }

    /// A retry budget shared by a fleet of processes through a store, in place of
    /// [`budget`](Self::budget) (feature `fleet`): each call's first try deposits in it and each
    /// retry asks it, at once ([`FleetBudget::try_retry_now`](crate::fleet::FleetBudget::try_retry_now)):
    /// build it in [`Mode::Cached`](crate::fleet::Mode::Cached). Not with a ledger that is the
    /// retry budget.
    ///
    /// It never grants more than the fleet's ratio. A process's first retry after its allowance
    /// ran out or lapsed (a grant lasts a slot of the budget's window) is refused while the next
    /// refresh is under way: two instances making 600 calls at a ratio of 0.1, in bursts, got 58
    /// or 59 of the 60 retries allowed (`tests/fleet_reliable.rs`).
    #[cfg(feature = "fleet")]
    pub fn fleet_budget(mut self, budget: crate::fleet::FleetBudget) -> Self {
        self.fleet_budget = Some(budget);
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

    /// Hedged attempts (async calls only): when an attempt is slower than the policy's delay
    /// (fixed, or a quantile of recent latencies, p95 by default: [`HedgeConfig`]), another copy
    /// is sent, up to `max_hedges`, and the first **success** wins; the copies still in flight
    /// are dropped (cancelled: their sockets close) and their permits and ledger draws settled. A
    /// failed copy waits for the others; the attempt fails when every copy has. Every copy passes
    /// the breaker, the limits and, with a [`ledger`](Self::ledger), draws a hedge from it. Only
    /// calls marked [`idempotent`](Self::idempotent) are hedged: `build` refuses a hedge without
    /// it. A blocking call hedges only through
    /// [`call_blocking_detached`](crate::Reliable::call_blocking_detached), which runs each copy
    /// on a thread of its own; the others run on the caller's thread alone. Each copy may have
    /// a timeout of its own, from its own send ([`copy_timeout`](Self::copy_timeout)).
    pub fn hedge(mut self, config: HedgeConfig) -> Self {
        self.hedge = Some(config);
        self
    }

    /// How long each copy of a hedged attempt may take, from its own send (a policy file's
    /// `Call` timeout under a `Hedge`): a copy that has not answered by then is dropped and
    /// fails as a timeout, and the race goes on while other copies are out. The
    /// [`timeout`](Self::timeout) still bounds the hedged attempt as a whole, from its first
    /// send, and the [`deadline`](Self::deadline) the call. Without hedging the attempt is its
    /// only copy: the shorter of the two timeouts applies.
    pub fn copy_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.copy_timeout = Some(timeout.into());
        self
    }

    /// One hedge, `delay` after an attempt was sent.
    pub fn hedge_after(self, delay: std::time::Duration) -> Self {
        self.hedge(HedgeConfig {
            delay: HedgeDelay::Fixed(delay.into()),
            max_hedges: 1,
        })
    }

    /// This instance's calls may be sent twice with the effect of once (reads, PUTs, keyed
    /// writes): the condition for [hedging](Self::hedge) them.
    pub fn idempotent(mut self) -> Self {
        self.idempotency = Idempotency::Idempotent;
        self
    }

    /// One ledger for every extra attempt, shared by every clone: retries (it is the retry
    /// budget), hedges and half-open probes draw from one ratio of first tries
    /// ([`reliable_core::ledger`]), so the extra load this client adds under a storm is one
    /// bounded number. Replaces a [`budget`](Self::budget): `build` refuses both. A probe the
    /// ledger refuses is a local refusal ([`ShedReason::Ledger`](crate::ShedReason::Ledger)).
    pub fn ledger(mut self, config: RatioConfig) -> Self {
        self.ledger = Some(config);
        self
    }

    /// One ledger of extra attempts shared with other instances or layers (what a tower
    /// `SharedLedger` holds): the retry budget (replacing a [`budget`](Self::budget)), and what
    /// hedges and half-open probes draw from.
    #[cfg_attr(not(feature = "tower"), allow(dead_code))]
    pub(crate) fn shared_ledger(mut self, ledger: Arc<Mutex<ExtraLedger>>) -> Self {
        self.shared_ledger = Some(ledger);
        self.budget = None;
        self
    }

    /// Hedges draw from the shared `ledger`, and nothing else: no call deposits in it (a tower
    /// hedge layer under a retry layer that deposits each request once).
    #[cfg_attr(not(feature = "tower"), allow(dead_code))]
    pub(crate) fn hedge_ledger(mut self, ledger: Arc<Mutex<ExtraLedger>>) -> Self {
        self.shared_ledger = Some(ledger);
        self.ledger_retries = false;
        self
    }

    /// The same builder for an instance named `name`.
    #[cfg_attr(not(feature = "tower"), allow(dead_code))]
    pub(crate) fn renamed(mut self, name: &str) -> Self {
        self.name = name.to_string();
        self
    }

    /// A concurrency limit on attempts in flight (hedges included), shared by every clone: fixed
    /// (a bulkhead) or adaptive (AIMD, gradient: [`reliable_core::limit`]), moved by each
    /// attempt's class through the core's answer table. An attempt over the limit is refused
    /// locally ([`ShedReason::Limit`](crate::ShedReason::Limit)): inside a retry that ends the call
    /// at once, unless the retry policy waits on refusals.
    pub fn limit(mut self, config: LimiterConfig) -> Self {
        self.limit = Some(config);
        self
    }

    /// A static bulkhead: at most `calls` attempts in flight ([`limit`](Self::limit)).
    pub fn bulkhead(self, calls: u32) -> Self {
        self.limit(LimiterConfig::bulkhead(calls))
    }

    /// A client-side rate limit on attempts sent (GCRA, [`RateConfig`]), shared by every clone;
    /// an attempt over it is refused locally with the time until the next one would be admitted
    /// ([`ShedReason::RateLimited`](crate::ShedReason::RateLimited)).
    pub fn rate_limit(mut self, config: RateConfig) -> Self {
        self.rate = Some(config);
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

    /// The timer for backoff waits and async timeouts. Default: with the `tokio` feature,
    /// [`RuntimeSleep`](crate::sleep::RuntimeSleep) (tokio's timer inside a tokio runtime,
    /// `futures-timer` under any other executor); [`TimerSleep`](crate::sleep::TimerSleep) without.
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

    /// The adaptive throttle's uniform samples come from `draws` (each decision calls it once)
    /// instead of the instance's seeded stream: a throttle's decisions replayed from a script,
    /// as the conformance suite does to compare faces exactly. Other draws (backoff jitter)
    /// still come from the seed.
    pub fn throttle_draws(mut self, draws: impl Fn() -> u64 + Send + Sync + 'static) -> Self {
        self.throttle_draws = Some(crate::rng::Given(Arc::new(draws)));
        self
    }

    /// Adds an observer (several may be added).
    pub fn observer(mut self, observer: impl Observer) -> Self {
        self.observers.push(Arc::new(observer));
        self
    }

    /// Emits a `tracing` event per attempt, retry, refusal, breaker transition, give-up and call
    /// end (names and fields in [`traces`](crate::traces)). Calls run in a `reliable.call` span
    /// with the feature on, whether or not this is called.
    #[cfg(feature = "tracing")]
    pub fn tracing(self) -> Self {
        self.observer(crate::traces::TracingObserver)
    }

    /// Exports calls, attempts, durations and breaker states through the `metrics` facade,
    /// labelled with this instance's name (see [`metrics`](crate::metrics)).
    #[cfg(feature = "metrics")]
    pub fn metrics(mut self) -> Self {
        self.metrics = true;
        self
    }

    /// Validates everything and builds the instance.
    pub fn build(self) -> Result<Reliable, BuildError> {
        if self.name.is_empty() {
            return Err(BuildError::new(
                "",
                reliable_core::ConfigError::new("name", Problem::Inconsistent("must not be empty")),
            ));
        }
        let mut retry_config = self.retry;
        let copy_timeout = match (self.copy_timeout, self.hedge) {
            (Some(t), _) if t.is_zero() => {
                return Err(BuildError::new(
                    "",
                    reliable_core::ConfigError::new("copy_timeout", Problem::Zero),
                ));
            }
            // Without hedging, the attempt is its only copy.
            (Some(t), None) => {
                let own = retry_config.attempt_timeout.map_or(t, |a| a.min(t));
                retry_config.attempt_timeout = Some(own);
                None
            }
            (t, Some(_)) => t,
            (None, None) => None,
        };
        let retry = RetryPolicy::new(retry_config).map_err(|e| BuildError::new("retry", e))?;
        let seed = self.seed.unwrap_or_else(crate::rng::random_seed);
        let rng = Rng::new(seed);
        let budget = match self.budget {
            Some(config) => {
                let policy = BudgetPolicy::new(config).map_err(|e| BuildError::new("budget", e))?;
                let budget = AnyBudget::new(&policy).map_err(|e| BuildError::new("budget", e))?;
                Some(Mutex::new(budget))
            }
            None => None,
        };
        let throttle = match self.throttle {
            Some(config) => {
                let policy =
                    ThrottlePolicy::new(config).map_err(|e| BuildError::new("throttle", e))?;
                let t =
                    AdaptiveThrottle::new(policy).map_err(|e| BuildError::new("throttle", e))?;
                Some(Mutex::new(t))
            }
            None => None,
        };
        // A shared ledger replaces the budget (it is the retry budget), set before or after.
        let budget = budget.filter(|_| self.shared_ledger.is_none() || !self.ledger_retries);
        if self.ledger.is_some() && budget.is_some() {
            return Err(BuildError::new(
                "",
                reliable_core::ConfigError::new(
                    "ledger",
                    Problem::Inconsistent("the ledger is the retry budget: set one of them"),
                ),
            ));
        }
        let hedger = match self.hedge {
            Some(_) if self.idempotency == Idempotency::NotIdempotent => {
                return Err(BuildError::new(
                    "",
                    reliable_core::ConfigError::new(
                        "hedge",
                        Problem::Inconsistent("only idempotent calls are hedged: mark them"),
                    ),
                ));
            }
            Some(config) => Some(Mutex::new(Hedger::new(
                HedgePolicy::new(config).map_err(|e| BuildError::new("hedge", e))?,
            ))),
            None => None,
        };
        let ledger = match (self.shared_ledger, self.ledger) {
            (Some(shared), _) => Some(shared),
            (None, Some(config)) => Some(Arc::new(Mutex::new(
                ExtraLedger::from_config(config).map_err(|e| BuildError::new("ledger", e))?,
            ))),
            (None, None) => None,
        };
        let limiter = match self.limit {
            Some(config) => Some(Mutex::new(Limiter::new(
                LimiterPolicy::new(config).map_err(|e| BuildError::new("limit", e))?,
            ))),
            None => None,
        };
        let rate = match self.rate {
            Some(config) => Some(Mutex::new(RateLimiter::new(
                RatePolicy::new(config).map_err(|e| BuildError::new("rate_limit", e))?,
            ))),
            None => None,
        };
        #[cfg(feature = "fleet")]
        let fleet = fleet_gates(
            self.fleet_breaker,
            self.fleet_budget,
            budget.is_some() || (ledger.is_some() && self.ledger_retries),
        )?;
        #[cfg(not(feature = "fleet"))]
        let fleet: Option<()> = None;
        // A fleet breaker replaces the local one.
        let breaker_config = self.breaker.filter(|_| {
            #[cfg(feature = "fleet")]
            return fleet.as_ref().is_none_or(|f| f.breaker.is_none());
            #[cfg(not(feature = "fleet"))]
            true
        });
        let name: Arc<str> = Arc::from(self.name.as_str());
        #[allow(unused_mut)]
        let mut observers = self.observers;
        #[cfg(feature = "metrics")]
        if self.metrics {
            observers.push(Arc::new(crate::metrics::Metrics::new(
                &name,
                breaker_config.map(|c| c.shadow),
            )));
        }
        let observers: Arc<[Arc<dyn Observer>]> = observers.into();
        let breaker = match breaker_config {
            Some(config) => {
                let policy =
                    BreakerPolicy::new(config).map_err(|e| BuildError::new("breaker", e))?;
                let outlet = Transitions::new(name.clone(), observers.clone());
                Some(
                    Owned::new(policy, rng.fork(1), outlet)
                        .map_err(|e| BuildError::new("breaker", e))?,
                )
            }
            None => None,
        };
        let config = &retry_config;
        let breaker_needs_time = breaker.as_ref().is_some_and(|b| {
            let c = b.policy().config();
            c.slow_calls.is_some()
                || c.slow_start.is_some()
                || matches!(c.window, reliable_core::breaker::WindowConfig::Time { .. })
                    && b.policy().needs_window()
        });
        let extra_load =
            hedger.is_some() || ledger.is_some() || limiter.is_some() || rate.is_some();
        let success_needs_time = breaker_needs_time
            || fleet.is_some()
            || budget.is_some()
            || throttle.is_some()
            || extra_load
            || !observers.is_empty();
        let eager_clock =
            success_needs_time || config.attempt_timeout.is_some() || config.deadline.is_some();
        #[cfg(feature = "fleet")]
        let fleet_breaker = fleet.as_ref().is_some_and(|f| f.breaker.is_some());
        #[cfg(not(feature = "fleet"))]
        let fleet_breaker = false;
        let label = label(
            &self.name,
            breaker.is_some() || fleet_breaker,
            config.max_attempts != Some(1),
            self.scope,
        );
        Ok(Reliable {
            inner: Arc::new(Inner {
                name,
                label,
                breaker,
                scope: self.scope,
                nesting: self.nesting,
                retry,
                budget,
                throttle,
                hedger,
                copy_timeout,
                idempotency: self.idempotency,
                ledger,
                ledger_retries: self.ledger_retries,
                limiter,
                rate,
                clock: self.clock.unwrap_or_else(default_clock),
                sleep: self.sleep.unwrap_or_else(default_sleep),
                rng,
                throttle_draws: self.throttle_draws,
                observers,
                eager_clock,
                // Only the breaker can be there on the fast path: it fits when no gate is outside
                // the retry (the order inside does not matter then).
                fast_first: !success_needs_time
                    && self.scope == Scope::PerAttempt
                    && self.nesting.is_none_or(|n| n.outside().is_empty()),
                stats: Stats::default(),
                #[cfg(feature = "fleet")]
                fleet: fleet.map(Box::new),
            }),
        })
    }
}

/// The fleet breaker and budget, checked: each decides at once in the engine, so each is built
/// in cached mode; a fleet budget is not set with another retry budget (`budget`).
#[cfg(feature = "fleet")]
fn fleet_gates(
    fleet_breaker: Option<crate::fleet::FleetBreaker>,
    fleet_budget: Option<crate::fleet::FleetBudget>,
    budget: bool,
) -> Result<Option<crate::fleet::FleetGates>, BuildError> {
    {
        use crate::fleet::Mode;
        let exact = Problem::Inconsistent(
            "the call engine decides at once, on a view of the store: build it in Mode::Cached",
        );
        if let Some(b) = &fleet_breaker
            && b.config().mode == Mode::Exact
        {
            return Err(BuildError::new(
                "fleet_breaker",
                reliable_core::ConfigError::new("mode", exact),
            ));
        }
        if let Some(b) = &fleet_budget {
            if b.config().mode == Mode::Exact {
                return Err(BuildError::new(
                    "fleet_budget",
                    reliable_core::ConfigError::new("mode", exact),
                ));
            }
            if budget {
                return Err(BuildError::new(
                    "",
                    reliable_core::ConfigError::new(
                        "fleet_budget",
                        Problem::Inconsistent(
                            "one retry budget: the fleet's, the budget or the ledger",
                        ),
                    ),
                ));
            }
        }
        if fleet_breaker.is_none() && fleet_budget.is_none() {
            return Ok(None);
        }
        Ok(Some(crate::fleet::FleetGates::new(
            fleet_breaker,
            fleet_budget,
        )))
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

/// The builder's breaker: the seed's numbers (50% over 20 calls, at least 20 calls, 30 s open,
/// 3 probe successes close it), with ±10% open-time jitter and one leased probe at a time.
fn default_breaker() -> BreakerConfig {
    BreakerConfig {
        open: reliable_core::breaker::OpenConfig {
            jitter: 0.1,
            ..BreakerConfig::reliablekit().open
        },
        half_open: HalfOpenConfig {
            max_in_flight: Some(1),
            rule: ProbeRule::Consecutive { successes: 3 },
            probe_timeout: Duration::from_secs(10),
            decide_at_minimum: false,
            max_wait: None,
            max_wait_closes: false,
        },
        ..BreakerConfig::reliablekit()
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
    return Arc::new(crate::sleep::RuntimeSleep);
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
        let fixed = |ms| Reliable::builder("x").hedge_after(std::time::Duration::from_millis(ms));
        assert_eq!(field(fixed(10)), "hedge");
        assert_eq!(field(fixed(0).idempotent()), "hedge.delay");
        let no_time = fixed(10)
            .idempotent()
            .copy_timeout(std::time::Duration::ZERO);
        assert_eq!(field(no_time), "copy_timeout");
        let ledger = RatioConfig::percent(0.1);
        let budget = BudgetConfig::Ratio(ledger);
        assert_eq!(
            field(Reliable::builder("x").ledger(ledger).budget(budget)),
            "ledger"
        );
        assert_eq!(field(Reliable::builder("x").bulkhead(0)), "limit.min");
        let rate = RateConfig {
            rate: 0,
            period: Duration::from_secs(1),
            burst: 1,
        };
        assert_eq!(
            field(Reliable::builder("x").rate_limit(rate)),
            "rate_limit.rate"
        );
    }

    /// Each seed-word setter changes its own field and nothing else (the builder's other
    /// defaults survive it, unlike `breaker(config)`).
    #[test]
    fn each_setter_changes_only_its_field() {
        use reliable_core::breaker::OpenConfig;
        use std::time::Duration as Std;
        let base = Reliable::builder("x");
        let (b0, r0) = (base.breaker.unwrap(), base.retry);
        let (open, half) = (b0.open, b0.half_open);
        let secs = Duration::from_secs;
        let cases: [(Builder, BreakerConfig); 10] = [
            (
                Reliable::builder("x").failure_rate(0.25),
                BreakerConfig {
                    failure_rate: Some(0.25),
                    ..b0
                },
            ),
            (
                Reliable::builder("x").window(50),
                BreakerConfig {
                    window: WindowConfig::Count { calls: 50 },
                    ..b0
                },
            ),
            (
                Reliable::builder("x").time_window(Std::from_secs(10), 5),
                BreakerConfig {
                    window: WindowConfig::Time {
                        span: secs(10),
                        buckets: 5,
                    },
                    ..b0
                },
            ),
            (
                Reliable::builder("x").minimum_calls(7),
                BreakerConfig {
                    minimum_calls: 7,
                    ..b0
                },
            ),
            (
                Reliable::builder("x").cooldown(Std::from_secs(5)),
                BreakerConfig {
                    open: OpenConfig {
                        duration: secs(5),
                        ..open
                    },
                    ..b0
                },
            ),
            (
                Reliable::builder("x").open_jitter(0.0),
                BreakerConfig {
                    open: OpenConfig {
                        jitter: 0.0,
                        ..open
                    },
                    ..b0
                },
            ),
            (
                Reliable::builder("x").probe(1),
                BreakerConfig {
                    half_open: HalfOpenConfig {
                        rule: ProbeRule::Consecutive { successes: 1 },
                        ..half
                    },
                    ..b0
                },
            ),
            (
                Reliable::builder("x").probes_in_flight(2),
                BreakerConfig {
                    half_open: HalfOpenConfig {
                        max_in_flight: Some(2),
                        ..half
                    },
                    ..b0
                },
            ),
            (
                Reliable::builder("x").consecutive_failures(4),
                BreakerConfig {
                    consecutive_failures: Some(4),
                    ..b0
                },
            ),
            (
                Reliable::builder("x").slow_call(Std::from_secs(2), 0.5),
                BreakerConfig {
                    slow_calls: Some(SlowCallRule {
                        threshold: secs(2),
                        rate: 0.5,
                    }),
                    ..b0
                },
            ),
        ];
        for (builder, expected) in cases {
            assert_eq!(builder.retry, r0);
            assert_eq!(builder.breaker.unwrap(), expected);
        }
        // A breaker setting after `no_breaker` brings the builder's defaults back, not a bare config.
        let again = Reliable::builder("x").no_breaker().probe(3);
        assert_eq!(again.breaker.unwrap(), b0);
        // Backoff words keep each other.
        let b = Reliable::builder("x")
            .base_delay(Std::from_millis(50))
            .factor(3.0);
        let shape = Shape::Exponential {
            base: Duration::from_millis(50),
            factor: 3.0,
        };
        assert_eq!(
            b.retry.backoff,
            BackoffConfig {
                shape,
                ..r0.backoff
            }
        );
        assert_eq!(b.breaker.unwrap(), b0);
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

//! The policy format: a client policy as a stack of layers, exactly as scenario files write it.
//!
//! This is the one definition of the format. The simulator's scenario files (`policies: [(name:
//! .., stack: ..)]`) parse into it, and `reliable` loads the same text into a `Reliable` or a tower
//! `ReliableLayer`, so a policy tried in the simulator ships unchanged. Every layer holds the
//! core's own config ([`BreakerConfig`], [`RetryConfig`], [`BudgetConfig`], [`ThrottleConfig`],
//! [`SpendConfig`], and the hedging, ledger, limiter and rate-limit configs); durations are written as text (`"250ms"`, `"1s"`).
//!
//! Only with the `policy` feature (which turns on `serde` and needs `alloc`: a stack nests and
//! names things); the core's default build stays allocation-free.
//!
//! ```text
//! (name: "budget + breaker", stack: Retry(
//!     policy: (max_attempts: 4, attempt_timeout: "1s",
//!              backoff: (shape: Exponential(base: "100ms", factor: 2.0), cap: "2s", jitter: Full)),
//!     budget: Ratio(ratio: 0.1, min_per_sec: 0, ttl: "10s"),
//!     inner: Breaker(config: (failure_rate: 0.5, minimum_calls: 10), inner: Call(downstream: "api")),
//! ))
//! ```
//!
//! What belongs to the simulator only is marked so on its field: which downstream a `Call` (or an
//! `Llm` layer) goes to names the service in a real client, and a `timeout_dist` (a timeout drawn
//! per request, to model callers with different timeouts) has the distribution type `D` of the
//! reader: the simulator reads its distributions there, a real client reads a type that refuses it.
//!
//! Field names and variant names here are the file format: renaming one breaks policy files.

use alloc::boxed::Box;
use alloc::string::String;
use alloc::vec::Vec;

use serde::{Deserialize, Serialize};

use crate::Duration;
use crate::breaker::BreakerConfig;
use crate::budget::BudgetConfig;
use crate::retry::RetryConfig;
use crate::spend::SpendConfig;
use crate::throttle::ThrottleConfig;

/// A client policy: a name and a stack of layers (one entry of a scenario's `policies`). `D` is
/// the type a `Call`'s `timeout_dist` is read as (see the [module docs](self)).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, bound(deserialize = "D: Deserialize<'de>"))]
pub struct Policy<D> {
    /// Shown in tables and reports.
    pub name: String,
    /// The layers, outermost first.
    pub stack: Layer<D>,
}

/// One layer of a client policy stack. Layers nest: `Breaker(inner: Retry(inner: Call(..)))`
/// retries inside the breaker (the breaker sees one outcome per retried call), while
/// `Retry(inner: Breaker(inner: Call(..)))` lets the breaker see every attempt.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, bound(deserialize = "D: Deserialize<'de>"))]
pub enum Layer<D> {
    /// One call to a downstream, failing with a timeout after `timeout` (or the nearest deadline
    /// of an enclosing layer, if sooner).
    Call {
        /// The downstream's name (in a real client: the name of the service called).
        downstream: String,
        /// Per-call timeout. Default: none (only enclosing deadlines apply).
        #[serde(default)]
        timeout: Option<Duration>,
        /// Simulator only. Instead of one `timeout` for everybody, each logical request draws its
        /// own from this distribution, once, and every attempt of it through this call uses it:
        /// callers with different timeouts (Yandex 2024 gives each client 100, 200 or 300 ms:
        /// `Choice(["100ms", "200ms", "300ms"])`). The draw depends only on the seed and the
        /// request's number, so every policy sees the same timeouts. Default: none.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        timeout_dist: Option<D>,
    },
    /// A circuit breaker (the core's) around `inner`.
    Breaker {
        /// The core's breaker config.
        config: BreakerConfig,
        /// One breaker per client (default) or one shared by all clients.
        #[serde(default)]
        scope: Scope,
        /// What it protects.
        inner: Box<Layer<D>>,
    },
    /// Retries `inner` as the core's retry policy decides: attempts, per-attempt timeout (pushed
    /// down to the calls inside as a deadline), overall deadline, backoff with jitter, server
    /// delays, and a retry budget.
    Retry {
        /// The core's retry config.
        policy: RetryConfig,
        /// The core's budget config. Default: none (unlimited).
        #[serde(default)]
        budget: Option<BudgetConfig>,
        /// One budget per client (default) or one shared by all clients.
        #[serde(default)]
        budget_scope: Scope,
        /// What is retried.
        inner: Box<Layer<D>>,
    },
    /// Client-side adaptive throttling (the core's): rejects locally with a probability that grows
    /// as the downstream accepts less of what it is sent.
    Throttle {
        /// The core's throttle config. Default: the SRE book's (K = 2 over 2 minutes).
        #[serde(default)]
        config: ThrottleConfig,
        /// One throttle per client (default) or one shared by all clients.
        #[serde(default)]
        scope: Scope,
        /// What it protects.
        inner: Box<Layer<D>>,
    },
    /// Tries each layer in order until one succeeds.
    Fallback(Vec<Layer<D>>),
    /// Hedged requests (the core's [`Hedger`](crate::hedge::Hedger)): when the call
    /// inside has been out longer than the delay (fixed, or a quantile of recent latencies), send
    /// another copy, up to `max_hedges`; the first **success** to come back is the call's answer
    /// and the other copies are cancelled (their attempts end; a server drops their queued jobs
    /// when it has `cancel_abandoned`, and finishes those already in service). A copy that fails
    /// waits for the others; when every copy has failed, the last failure is the call's answer
    /// (as `reliable`'s hedging and the conformance suite decide). `inner` must be a `Call`.
    /// Inside a `Ledger`, each hedge draws from it.
    Hedge {
        /// The core's hedging config: `(delay: Quantile(), max_hedges: 1)` or
        /// `(delay: Fixed("10ms"), max_hedges: 1)`.
        config: crate::hedge::HedgeConfig,
        /// Whether the call may be sent twice. Only idempotent calls are hedged: the scenario
        /// must say so. Default false (never hedged).
        #[serde(default)]
        idempotent: bool,
        /// One latency estimate per client (default) or one shared by all clients.
        #[serde(default)]
        scope: Scope,
        /// The hedged call.
        inner: Box<Layer<D>>,
    },
    /// One ledger for every extra attempt inside it (the core's
    /// [`ExtraLedger`](crate::ledger::ExtraLedger)): each logical request entering it
    /// deposits `ratio`; retries of `Retry` layers without a budget of their own, hedges of
    /// `Hedge` layers and probes of half-open `Breaker`s inside it each withdraw one, or are
    /// refused locally. Put it outside any `Retry`: inside one, every retry would count as a
    /// first try.
    Ledger {
        /// The core's ratio budget config: `(ratio: 0.1, min_per_sec: 10, ttl: "10s")`.
        config: crate::budget::RatioConfig,
        /// One ledger per client (default) or one shared by all clients.
        #[serde(default)]
        scope: Scope,
        /// What draws from it.
        inner: Box<Layer<D>>,
    },
    /// A concurrency limit (the core's [`Limiter`](crate::limit::Limiter)): a static
    /// bulkhead or an adaptive limit (AIMD, gradient) that admits a call while fewer than the
    /// limit are in flight through it, and refuses locally otherwise. An answer moves the limit as
    /// the rule says: a success is a latency sample, a timeout or an overload answer (429, 503)
    /// is a drop, anything else (a local refusal, a served error) is ignored.
    Limit {
        /// The core's limiter config: `(rule: Aimd(backoff: 0.9, increase: 1), initial: 20,
        /// min: 1, max: 200)`.
        config: crate::limit::LimiterConfig,
        /// One limiter per client or one shared by all clients. Default: per client.
        #[serde(default)]
        scope: Scope,
        /// What it admits calls to.
        inner: Box<Layer<D>>,
    },
    /// A client-side rate limit (the core's [`RateLimiter`](crate::limit::RateLimiter), GCRA):
    /// admits a call while the rate allows, `rate` per `period` with bursts of up to `burst`,
    /// and refuses it locally otherwise, saying when the next would be admitted (a refusal's
    /// `retry_after`, which a `Retry` with `wait_on_refusal` waits out if it fits the deadline).
    /// Answers do not move it. Inside a `Retry`, every attempt is counted; outside, every call.
    RateLimit {
        /// The core's rate config: `(rate: 100, period: "1s", burst: 10)`.
        config: crate::limit::RateConfig,
        /// One rate limiter per client or one shared by all clients. Default: per client.
        #[serde(default)]
        scope: Scope,
        /// What it admits calls to.
        inner: Box<Layer<D>>,
    },
    /// An LLM client around `inner` (which calls the `LlmProvider` named `downstream`): with
    /// `signals`, money-limit answers are read from the body and never retried (without it a money
    /// 429 looks like any 429, as to an SDK); with `spend`, each attempt reserves input +
    /// `max_tokens` in the core's spend breaker first and settles to the usage after; with
    /// `proactive`, the provider's rate-limit headers feed the spend breaker.
    Llm {
        /// The `LlmProvider` downstream called inside.
        downstream: String,
        /// Read provider signals (money limits). Default false.
        #[serde(default)]
        signals: bool,
        /// The core's spend-breaker config. Default: none.
        #[serde(default)]
        spend: Option<SpendConfig>,
        /// Feed the provider's remaining-quota headers to the spend breaker. Default false.
        #[serde(default)]
        proactive: bool,
        /// One spend breaker per client (default: per key) or one shared by all clients.
        #[serde(default)]
        scope: Scope,
        /// What it wraps.
        inner: Box<Layer<D>>,
    },
}

impl<D> Layer<D> {
    /// The variant's name as written in files.
    pub fn kind_name(&self) -> &'static str {
        match self {
            Layer::Call { .. } => "Call",
            Layer::Breaker { .. } => "Breaker",
            Layer::Retry { .. } => "Retry",
            Layer::Throttle { .. } => "Throttle",
            Layer::Fallback(_) => "Fallback",
            Layer::Hedge { .. } => "Hedge",
            Layer::Ledger { .. } => "Ledger",
            Layer::Limit { .. } => "Limit",
            Layer::RateLimit { .. } => "RateLimit",
            Layer::Llm { .. } => "Llm",
        }
    }
}

/// A nesting no stack can mean, refused by every loader of the format (the simulator,
/// `reliable::policy`, the core's engine): the layer's path from the policy (`stack.inner`) and
/// why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NestingError {
    /// The path of the layer at fault, from `stack`.
    pub path: String,
    /// What is wrong, and what is expected instead.
    pub message: String,
}

impl core::fmt::Display for NestingError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

/// Why a `Ledger` may not sit inside a `Retry`.
pub const LEDGER_IN_RETRY: &str = "a Ledger inside a Retry counts every retry as a first try: \
                                   expected the Ledger outside the Retry";

/// Why a `Hedge`'s `inner` must be a `Call`.
pub const HEDGE_OF_CALL: &str = "a Hedge sends copies of one call: expected `inner: Call(...)`";

/// Why a `Fallback` may not be empty.
pub const EMPTY_FALLBACK: &str = "an empty Fallback: expected at least one layer to try";

impl<D> Layer<D> {
    /// The layers this one wraps (a `Fallback`'s branches; none for a `Call`).
    pub fn inner(&self) -> &[Layer<D>] {
        match self {
            Layer::Call { .. } => &[],
            Layer::Fallback(layers) => layers,
            Layer::Breaker { inner, .. }
            | Layer::Retry { inner, .. }
            | Layer::Throttle { inner, .. }
            | Layer::Hedge { inner, .. }
            | Layer::Ledger { inner, .. }
            | Layer::Limit { inner, .. }
            | Layer::RateLimit { inner, .. }
            | Layer::Llm { inner, .. } => core::slice::from_ref(&**inner),
        }
    }

    /// [`inner`](Self::inner), to change: the layers this one wraps.
    pub fn inner_mut(&mut self) -> &mut [Layer<D>] {
        match self {
            Layer::Call { .. } => &mut [],
            Layer::Fallback(layers) => layers,
            Layer::Breaker { inner, .. }
            | Layer::Retry { inner, .. }
            | Layer::Throttle { inner, .. }
            | Layer::Hedge { inner, .. }
            | Layer::Ledger { inner, .. }
            | Layer::Limit { inner, .. }
            | Layer::RateLimit { inner, .. }
            | Layer::Llm { inner, .. } => core::slice::from_mut(&mut **inner),
        }
    }

    /// This layer's scope fields, by name (`scope`, or a `Retry`'s `budget_scope`).
    pub fn scope_fields(&self) -> impl Iterator<Item = (&'static str, Scope)> {
        let field = match self {
            Layer::Call { .. } | Layer::Fallback(_) => None,
            Layer::Retry { budget_scope, .. } => Some(("budget_scope", *budget_scope)),
            Layer::Breaker { scope, .. }
            | Layer::Throttle { scope, .. }
            | Layer::Hedge { scope, .. }
            | Layer::Ledger { scope, .. }
            | Layer::Limit { scope, .. }
            | Layer::RateLimit { scope, .. }
            | Layer::Llm { scope, .. } => Some(("scope", *scope)),
        };
        field.into_iter()
    }

    /// The path of the first scope field below this layer (whose path is `path`) that says
    /// `PerHost`, if any: a face that calls one host per downstream refuses the stack there
    /// with [`PER_HOST_ONE_HOST`].
    pub fn per_host(&self, path: &str) -> Option<String> {
        if let Some((field, _)) = self.scope_fields().find(|(_, s)| *s == Scope::PerHost) {
            return Some(alloc::format!("{path}.{field}"));
        }
        match self {
            Layer::Fallback(layers) => layers
                .iter()
                .enumerate()
                .find_map(|(i, l)| l.per_host(&alloc::format!("{path}[{i}]"))),
            _ => self
                .inner()
                .first()
                .and_then(|l| l.per_host(&alloc::format!("{path}.inner"))),
        }
    }

    /// The path of the first scope field below this layer (whose path is `path`) that says
    /// `Fleet`, if any: a face without a fleet store refuses the stack there with
    /// [`FLEET_NO_STORE`].
    pub fn fleet(&self, path: &str) -> Option<String> {
        if let Some((field, _)) = self.scope_fields().find(|(_, s)| s.fleet().is_some()) {
            return Some(alloc::format!("{path}.{field}"));
        }
        match self {
            Layer::Fallback(layers) => layers
                .iter()
                .enumerate()
                .find_map(|(i, l)| l.fleet(&alloc::format!("{path}[{i}]"))),
            _ => self
                .inner()
                .first()
                .and_then(|l| l.fleet(&alloc::format!("{path}.inner"))),
        }
    }

    /// Whether this layer may keep its state in a fleet store, and if not, why
    /// ([`FLEET_LAYERS`], or what its config lacks): a `Breaker`; a `Retry` with a ratio budget
    /// (the fleet's budget is a ratio of first tries); a `Limit` with a `Fixed` rule (a bulkhead
    /// counts calls in flight fleet-wide; an adaptive limit moves on one process's latencies);
    /// a `RateLimit`.
    pub fn fleet_refusal(&self) -> Option<&'static str> {
        match self {
            Layer::Breaker { .. } | Layer::RateLimit { .. } => None,
            Layer::Retry { budget, .. } => match budget {
                Some(crate::budget::BudgetConfig::Ratio(_)) => None,
                _ => Some(FLEET_BUDGET),
            },
            Layer::Limit { config, .. } => match config.rule {
                crate::limit::LimitRule::Fixed => None,
                _ => Some(FLEET_BULKHEAD),
            },
            _ => Some(FLEET_LAYERS),
        }
    }

    /// Refuses a nesting no stack can mean, wherever it is below this layer (whose path is
    /// `path`, `stack` for a policy's): a `Ledger` inside a `Retry` ([`LEDGER_IN_RETRY`]), a
    /// `Hedge` around anything but a `Call` ([`HEDGE_OF_CALL`]), an empty `Fallback`
    /// ([`EMPTY_FALLBACK`]), a `PerHost` scope anywhere but on a `Breaker` around a `Call`
    /// ([`PER_HOST_BREAKER`]), a `Fleet` scope on a layer a fleet cannot share
    /// ([`FLEET_LAYERS`], [`FLEET_BUDGET`], [`FLEET_BULKHEAD`]) or with a `wait` or `refresh`
    /// out of bounds (at `scope.wait`, `scope.mode.refresh`), a `Fleet` breaker or ratio budget
    /// whose config a fleet cannot share (at the field: [`BreakerConfig::fleet_refusal`],
    /// [`RatioConfig::fleet_refusal`](crate::budget::RatioConfig::fleet_refusal)). Every other nesting
    /// means something: each stateful layer outside a
    /// `Retry` judges the call once, inside it every attempt, and layers on one side of it
    /// nest in the order written.
    pub fn check_nesting(&self, path: &str) -> Result<(), NestingError> {
        self.check_within(path, false)
    }

    fn check_within(&self, path: &str, in_retry: bool) -> Result<(), NestingError> {
        let fail = |path: String, message: &str| {
            Err(NestingError {
                path,
                message: String::from(message),
            })
        };
        if let Some(field) = self.scope_fields().find(|(_, s)| *s == Scope::PerHost) {
            let around_call = matches!(self, Layer::Breaker { inner, .. }
                if matches!(**inner, Layer::Call { .. }));
            if !around_call {
                return fail(alloc::format!("{path}.{}", field.0), PER_HOST_BREAKER);
            }
        }
        if let Some((field, scope)) = self.scope_fields().find(|(_, s)| s.fleet().is_some()) {
            if let Some(why) = self.fleet_refusal() {
                return fail(alloc::format!("{path}.{field}"), why);
            }
            if let Some(Err((sub, why))) = scope.fleet().map(|f| f.check()) {
                return fail(alloc::format!("{path}.{field}.{sub}"), why);
            }
            if let Layer::Breaker { config, .. } = self
                && let Some(r) = config.fleet_refusal()
            {
                return fail(alloc::format!("{path}.config.{}", r.field), r.why);
            }
            if let Layer::Retry {
                budget: Some(crate::budget::BudgetConfig::Ratio(ratio)),
                ..
            } = self
                && let Some(r) = ratio.fleet_refusal()
            {
                return fail(alloc::format!("{path}.budget.{}", r.field), r.why);
            }
        }
        match self {
            Layer::Ledger { .. } if in_retry => return fail(String::from(path), LEDGER_IN_RETRY),
            Layer::Hedge { inner, .. } if !matches!(**inner, Layer::Call { .. }) => {
                return fail(alloc::format!("{path}.inner"), HEDGE_OF_CALL);
            }
            Layer::Fallback(layers) if layers.is_empty() => {
                return fail(String::from(path), EMPTY_FALLBACK);
            }
            _ => {}
        }
        let in_retry = in_retry || matches!(self, Layer::Retry { .. });
        match self {
            Layer::Fallback(layers) => {
                for (i, l) in layers.iter().enumerate() {
                    l.check_within(&alloc::format!("{path}[{i}]"), in_retry)?;
                }
                Ok(())
            }
            _ => match self.inner().first() {
                Some(inner) => inner.check_within(&alloc::format!("{path}.inner"), in_retry),
                None => Ok(()),
            },
        }
    }
}

/// Whose state a stateful layer keeps.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Scope {
    /// One instance per client.
    #[default]
    PerClient,
    /// One instance shared by every client (a process-wide breaker or budget).
    Shared,
    /// One instance per client and per host: a `Breaker` whose `inner` is a `Call` keeps one
    /// breaker for each replica the call's balancer can pick, and the balancer skips the
    /// replicas whose breaker refuses calls (as Finagle's and Envoy's balancers skip hosts
    /// they hold down). Only a `Breaker` around a `Call` may have it ([`PER_HOST_BREAKER`]);
    /// a face that calls one host per downstream (no balancer over replicas) refuses it
    /// ([`PER_HOST_ONE_HOST`], [`Layer::per_host`]) rather than keep one breaker for all.
    PerHost,
    /// One state for every process of a service (a fleet), kept in a store the service names:
    /// `Fleet(store: "orders", mode: Cached(refresh: "50ms"), wait: "5ms", on_store_failure:
    /// Local)`. Only on a `Breaker`, a `Retry`'s `budget_scope`, a `Limit` (a static bulkhead)
    /// and a `RateLimit` ([`FLEET_LAYERS`]); a face without a store refuses it
    /// ([`FLEET_NO_STORE`], [`Layer::fleet`]) rather than keep one per process.
    Fleet(FleetScope),
}

impl Scope {
    /// The variant's name as written in files.
    pub fn name(self) -> &'static str {
        match self {
            Scope::PerClient => "PerClient",
            Scope::Shared => "Shared",
            Scope::PerHost => "PerHost",
            Scope::Fleet(_) => "Fleet",
        }
    }

    /// The fleet's settings, for a `Fleet` scope.
    pub fn fleet(self) -> Option<FleetScope> {
        match self {
            Scope::Fleet(f) => Some(f),
            _ => None,
        }
    }
}

/// How a `Fleet` scope shares its state: which store, how decisions use it, how long one waits
/// for it, and what a process does when it does not answer in time. The policy names the store;
/// the service maps the name to a store (a Redis URL and its credentials live in the service's
/// configuration, never in a policy, which is shipped, logged and shown to agents).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FleetScope {
    /// The store's name, as the service registers it (`"orders"`).
    pub store: StoreName,
    /// One round trip per decision, or decisions on a view refreshed every `refresh`. Default
    /// `Exact`.
    #[serde(default)]
    pub mode: FleetMode,
    /// The longest a decision waits for the store, in `(0, 1s]`. Default 5 ms.
    #[serde(default = "FleetScope::default_wait")]
    pub wait: Duration,
    /// What a process does when the store does not answer in time. Default `Local`.
    #[serde(default)]
    pub on_store_failure: OnStoreFailure,
}

/// The longest [`FleetScope::wait`] may be: a decision waiting on a store longer than this is the
/// outage it was meant to prevent.
pub const MAX_FLEET_WAIT: Duration = Duration::from_secs(1);

/// The longest [`FleetMode::Cached`] `refresh` may be: a view older than this is no longer the
/// fleet's state.
pub const MAX_FLEET_REFRESH: Duration = Duration::from_secs(60);

impl FleetScope {
    /// A fleet scope on `store` with the defaults: exact, 5 ms wait, local on store failure.
    pub const fn new(store: StoreName) -> Self {
        FleetScope {
            store,
            mode: FleetMode::Exact,
            wait: Duration::from_millis(5),
            on_store_failure: OnStoreFailure::Local,
        }
    }

    fn default_wait() -> Duration {
        Duration::from_millis(5)
    }

    /// Checks the durations: `wait` in `(0, 1s]`, a cached `refresh` in `(0, 60s]`. The error
    /// names the field (`wait`, `mode.refresh`) and what is expected.
    pub fn check(&self) -> Result<(), (&'static str, &'static str)> {
        if self.wait.is_zero() || self.wait > MAX_FLEET_WAIT {
            return Err((
                "wait",
                "the longest a decision waits for the store: expected more than 0 and at most 1s",
            ));
        }
        if let FleetMode::Cached { refresh } = self.mode
            && (refresh.is_zero() || refresh > MAX_FLEET_REFRESH)
        {
            return Err((
                "mode.refresh",
                "how often the view of the fleet's state is refreshed: expected more than 0 and \
                 at most 60s",
            ));
        }
        Ok(())
    }
}

/// How decisions of a `Fleet` scope use the store.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub enum FleetMode {
    /// One round trip per decision: the store decides, the call waits for it (at most `wait`).
    #[default]
    Exact,
    /// Decisions on a view of the fleet's state refreshed at least every `refresh` while calls
    /// come; results reach the store with the next refresh. Half-open probes are still the
    /// store's decision.
    Cached {
        /// How often the view is refreshed.
        refresh: Duration,
    },
}

/// What a process does when its store does not answer in time (or rests after failing).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum OnStoreFailure {
    /// Decide on the process's own state, as if there were no fleet (fail open), and send the
    /// store the results decided meanwhile when it answers again.
    #[default]
    Local,
    /// Refuse the call (a breaker, a limit) or the retry (a budget): fail closed.
    Refuse,
}

/// Most bytes of a [`StoreName`].
pub const MAX_STORE_NAME: usize = 32;

/// A store's name in a policy: 1 to 32 ASCII letters, digits, `-`, `_` or `.`. Kept inline (a
/// `Scope` is `Copy`); a URL or anything with a credential in it is refused, and the refusal
/// never repeats the text.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct StoreName {
    len: u8,
    bytes: [u8; MAX_STORE_NAME],
}

/// Why a text is not a store's name (the text itself is not repeated: it may hold a credential).
pub const STORE_NAME_RULE: &str = "a store's name is 1 to 32 ASCII letters, digits, '-', '_' or \
                                   '.' (the service maps it to its store: a URL or a credential \
                                   never goes in a policy)";

impl StoreName {
    /// The name, if `name` is one.
    pub fn new(name: &str) -> Option<Self> {
        let b = name.as_bytes();
        let ok = |c: &u8| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.');
        if b.is_empty() || b.len() > MAX_STORE_NAME || !b.iter().all(ok) {
            return None;
        }
        let mut bytes = [0; MAX_STORE_NAME];
        for (to, from) in bytes.iter_mut().zip(b) {
            *to = *from;
        }
        Some(StoreName {
            len: b.len() as u8,
            bytes,
        })
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        let b = self.bytes.get(..usize::from(self.len)).unwrap_or(&[]);
        // Only ASCII was ever stored.
        core::str::from_utf8(b).unwrap_or("")
    }
}

impl core::fmt::Debug for StoreName {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        core::fmt::Debug::fmt(self.as_str(), f)
    }
}

impl core::fmt::Display for StoreName {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for StoreName {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for StoreName {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = StoreName;
            fn expecting(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                f.write_str(STORE_NAME_RULE)
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<StoreName, E> {
                StoreName::new(v).ok_or_else(|| E::custom(STORE_NAME_RULE))
            }
        }
        d.deserialize_str(V)
    }
}

/// Why a `Fleet` scope may only be on a `Breaker`, a `Retry`'s budget, a `Limit` or a
/// `RateLimit`.
pub const FLEET_LAYERS: &str = "scope Fleet shares a breaker, a retry budget, a static bulkhead \
                                or a rate limit through a store: expected it only on a Breaker, \
                                a Retry's budget_scope, a Limit or a RateLimit (a throttle, a \
                                hedger's latencies, a ledger or a spend breaker is kept per \
                                process: PerClient or Shared)";

/// Why a fleet budget must be a ratio budget.
pub const FLEET_BUDGET: &str = "budget_scope Fleet shares one ratio budget of retries per first \
                                tries through a store: expected `budget: Ratio(...)`";

/// Why a fleet limit must be a static bulkhead.
pub const FLEET_BULKHEAD: &str = "scope Fleet on a Limit counts the fleet's calls in flight \
                                  against one fixed limit: expected `rule: Fixed` (an adaptive \
                                  limit moves on one process's latencies: PerClient or Shared)";

/// Why a face without a fleet store refuses a `Fleet` scope.
pub const FLEET_NO_STORE: &str = "scope Fleet shares state through a store this face does not \
                                  have: expected PerClient or Shared here (the simulator models \
                                  it with the scenario's `stores`; a Rust service gives the \
                                  stores its policies name to reliable::policy's \
                                  Route::fleet_builder)";

/// Why a `PerHost` scope may only be a `Breaker`'s around a `Call`.
pub const PER_HOST_BREAKER: &str = "scope PerHost keeps one breaker per host a Call's balancer \
                                    can pick: expected it only on a Breaker whose inner is a \
                                    Call (PerClient or Shared elsewhere)";

/// Why a face with one host per downstream refuses a `PerHost` scope.
pub const PER_HOST_ONE_HOST: &str = "scope PerHost needs a balancer over a downstream's \
                                     replicas, and this face calls one host per downstream (the \
                                     simulator's `replicas` have one): expected PerClient or \
                                     Shared";

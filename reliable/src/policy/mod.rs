//! Policy files: a policy tried in the simulator, loaded unchanged into a [`Reliable`] or a tower
//! `ReliableLayer` (feature `policy`).
//!
//! The format is the core's ([`reliable_core::policy`]), the one the simulator's scenario files
//! use: a policy is `(name: .., stack: ..)`, its stack the layers outermost first, each holding the
//! core's config, durations written as text (`"250ms"`). It reads from RON (a policy entry, or a
//! whole scenario file and a policy's name) and JSON (serde's shape of the same types); a syntax
//! error, an unknown field or a wrong type is refused as `file:line:col: message`.
//!
//! ```
//! let text = r#"(name: "budget + breaker", stack: Retry(
//!     policy: (max_attempts: 4, attempt_timeout: "1s",
//!              backoff: (shape: Exponential(base: "100ms", factor: 2.0), cap: "2s", jitter: Full)),
//!     budget: Ratio(ratio: 0.1, min_per_sec: 0, ttl: "10s"),
//!     inner: Breaker(config: (failure_rate: 0.5, minimum_calls: 10), inner: Call(downstream: "api")),
//! ))"#;
//! let plan = reliable::policy::Plan::from_ron(text, "policy.ron")?;
//! let api = plan.builder()?.build()?; // retry(breaker(api)), with the budget
//! assert_eq!(api.label(), "retry(breaker(api))");
//!
//! let e = reliable::policy::Plan::from_ron("(name: \"x\", stack: Call(downstrem: \"api\"))", "p.ron")
//!     .unwrap_err();
//! assert!(e.to_string().starts_with("p.ron:1:25: Unexpected field named `downstrem`"), "{e}");
//!
//! // Hedged reads, every hedge (and probe, and retry) drawn from one ledger of 10%.
//! let hedged = r#"(name: "hedged", stack: Ledger(config: (ratio: 0.1, min_per_sec: 0, ttl: "10s"),
//!     inner: Hedge(config: (delay: Quantile(), max_hedges: 1), idempotent: true,
//!                  inner: Call(downstream: "api", timeout: "1s"))))"#;
//! let plan = reliable::policy::Plan::from_ron(hedged, "hedged.ron")?;
//! let reads = plan.builder()?.build()?; // hedges in `call`
//! let e = plan.blocking_builder().unwrap_err(); // `call_blocking` never hedges: refused, not dropped
//! assert!(e.message.starts_with("a Hedge in a blocking call"), "{e}");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## What loads, and into what
//!
//! A stack becomes a [`Plan`]: one [`Route`] per path a call may take (an outermost `Fallback`
//! gives one route per branch, tried in order; compose them with [`Fallback`](crate::Fallback) or
//! the tower `FallbackLayer`). A route is a chain of layers down to its `Call`, each at most
//! once: a `Retry`, and around it or inside it, in any order, a `Ledger` (outside the `Retry`), a
//! `Throttle`, a `Breaker`, a `Limit` and a `RateLimit`, then a `Hedge` around the `Call`; an
//! `Llm` anywhere. A gate (throttle, breaker, limit, rate limit) outside the `Retry` judges the
//! call once, inside it every attempt, each side in the order written; without a `Retry` (one
//! attempt) every gate judges the call; the call deposits in the ledger where the `Ledger` sits.
//! The core reads where each gate sits ([`Route::nesting`](Route#structfield.nesting), from
//! [`reliable_core::engine::Nesting::of_route`], the reading the core's engine runs a stack
//! by), and [`Route::builder`] hands it to [`Builder::nesting`]: a `Reliable`, and the tower
//! `ReliableLayer` built from the same builder ([`Route::layer`]), run every nesting exactly as
//! the core's call engine (and so the simulator) runs it.
//!
//! | In the stack | In a `Reliable` ([`Route::builder`]) and `ReliableLayer` ([`Route::layer`]) | In the tower layers of [`Route::route_layer`] |
//! |---|---|---|
//! | `Call(downstream, timeout)` | the instance's name; `timeout` is the per-attempt timeout (the smaller of it and the retry's `attempt_timeout`), or under a `Hedge` each copy's ([`Builder::copy_timeout`]) | the same, in the `RetryLayer`; under a `Hedge`, `HedgeLayer::copy_timeout` |
//! | `Retry(policy, budget)` | [`Builder::retry`], [`Builder::budget`]; no `Retry`: one attempt | `RetryLayer` with its budget |
//! | `Breaker` | [`Builder::breaker`], where the nesting puts it: inside the `Retry` every attempt passes it, outside it one verdict per call; no `Breaker`: [`Builder::no_breaker`] | `BreakerLayer` where the stack puts it: retry → throttle → breaker, or throttle → breaker → retry |
//! | `Throttle` | [`Builder::throttle`], where the nesting puts it: inside the `Retry` it admits every attempt, outside it the call once | `ThrottleLayer` where the stack puts it, outside any `Breaker` |
//! | `Hedge(config, idempotent: true)` (its `inner` a `Call`) | [`Builder::hedge`] and [`Builder::idempotent`]: the gates inside the `Retry` admit each copy (a throttle the attempt once), those outside it the call once; [`Reliable::call`] only (see [`Route::blocking_builder`]); each copy timed from its own send, the retry's `attempt_timeout` bounding the hedged attempt (see [`RouteHedge`]) | `HedgeLayer`, innermost: the layers above see one hedged call; the policy's `clone_request` still says which requests may be copied; timeouts as in a `Reliable` |
//! | `Ledger(config)` | [`Builder::ledger`] (retries, hedges and the probes of a breaker inside it draw from it): each call deposits where the `Ledger` sits among the gates outside the `Retry` | one `SharedLedger` for `RetryLayer::ledger` (where each call deposits), `HedgeLayer::ledger` and the `BreakerLayer::ledger` of a breaker inside it: outermost, or right around the `Retry` with the throttle and breaker around the retry outside it |
//! | `Limit(config)` | [`Builder::limit`], where the nesting puts it: inside the `Retry` every copy takes a slot, outside it the call one for all its attempts | `ConcurrencyLimitLayer`, innermost (around the `Hedge`: one slot for all its copies, so refused with a `Hedge` when inside the `Retry`) |
//! | `RateLimit(config)` | [`Builder::rate_limit`], where the nesting puts it: inside the `Retry` every copy is counted, outside it the call once; a refusal gives back what the gates outside it hold, and inside a `Retry` ends the call unless the retry policy waits on refusals and the wait fits the deadline | `RateLimitLayer`, inside the `ConcurrencyLimitLayer` (around the `Hedge`: one count for all its copies, so refused with a `Hedge` when inside the `Retry`) |
//! | `Llm(signals: true)` | [`Route::llm_signals`]: classify errors with `reliable::llm` (the error type's [`Classify`](crate::Classify), not a builder setting) | the same, in the tower policy |
//! | `scope`, `budget_scope` | the instance is the state: share one `Reliable` for `Shared` (`ReliableLayer::shared`), build one per client for `PerClient` (so a route's stateful layers must have one scope) | `Shared`: one state for every service the layers wrap (`shared()`; one hedger, limiter, ledger); `PerClient`: one per wrapped service |
//! | `scope: Fleet(store, ..)` on a `Breaker`, `budget_scope: Fleet(..)` on a `Retry`'s ratio budget | the fleet's state, in the store the service gives under that name (feature `fleet`): `Route::fleet_builder` and `Route::fleet_layer` with `Stores` put a `FleetBreaker` or `FleetBudget` there (in `mode: Cached` only: a `Reliable` never waits for a round trip), each instance keeping its own fallback; `builder` and `layer` refuse it (one per process would be a per-client scope in disguise), and `fleet_builder` a `Fleet` scope on a `Limit` or `RateLimit` | refused |
//!
//! What a target cannot run as the core's engine and the simulator do is refused with the
//! layer's path and why, never dropped. By every target: a `timeout_dist` (simulator only: a
//! timeout drawn per request models a crowd of callers), a spend breaker or proactive quotas
//! (`Llm(spend: ..)`, `Llm(proactive: true)`: not a layer of these targets; drive
//! [`reliable_core::spend::SpendBreaker`] yourself), a second retry, breaker, throttle, ledger,
//! limit or rate limit on one route (each target has one of each), a `Fallback` inside another
//! layer (a fallback is between routes), a `Hedge` whose `inner` is not a `Call` or whose call is
//! not `idempotent` (it would never hedge), a `Ledger` inside a `Retry`, and a `Retry` with a
//! budget of its own inside a `Ledger` (the ledger is the retry budget). By a `Reliable` and
//! `ReliableLayer`: a route mixing `Shared` and `PerClient` layers (one instance is one state);
//! by [`Route::blocking_builder`], a `Hedge` (a blocking call never hedges). By the tower layers
//! of [`Route::route_layer`], which stack in fixed orders: a throttle inside the breaker, a layer
//! inside a `Limit` other than a `RateLimit` or a `Hedge`, a layer inside a `RateLimit` other
//! than a `Hedge`, a `Hedge` under a `Limit` or `RateLimit` inside the `Retry` (the engine
//! has each copy take a slot or be counted, the tower layers the hedged attempt once), and a
//! ledger where the retry layer cannot deposit each call as the simulator does. [`Route::reliable_config`] (the stock shape `ReliableLayer::new` takes) refuses what a
//! [`ReliableConfig`](crate::tower::ReliableConfig) cannot hold.
//!
//! Hostile input is bounded: ron refuses nesting deeper than 128 levels and serde_json too, a
//! plan has at most [`MAX_ROUTES`] routes, and parsing is linear in the text.

use std::fmt;

use reliable_core::Duration;
use reliable_core::backoff::BackoffConfig;
use reliable_core::breaker::BreakerConfig;
use reliable_core::budget::{BudgetConfig, RatioConfig};
use reliable_core::hedge::{HedgeConfig, HedgeDelay};
use reliable_core::limit::{LimiterConfig, RateConfig};
use reliable_core::retry::RetryConfig;
use reliable_core::throttle::ThrottleConfig;
use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use crate::Reliable;
use crate::builder::Builder;

pub use reliable_core::policy::Scope;

#[cfg(feature = "tower")]
mod layers;
#[cfg(feature = "fleet")]
mod stores;
#[cfg(feature = "tower")]
pub use layers::{RouteFuture, RouteInnermost, RouteLayer, RouteRated, RouteService};
#[cfg(feature = "fleet")]
pub use stores::{DEFAULT_BUDGET_CHUNK, FLEET_EXACT, Stores, fleet_config};

#[cfg(feature = "fleet")]
use crate::fleet::FleetGates;

/// A policy entry as a real client reads it: the core's format, with `timeout_dist` refused.
pub type PolicyEntry = reliable_core::policy::Policy<SimulatorOnly>;

/// One layer of a [`PolicyEntry`]'s stack.
pub type PolicyLayer = reliable_core::policy::Layer<SimulatorOnly>;

/// Most routes (fallback branches) a plan may have.
pub const MAX_ROUTES: usize = 64;

/// What a real client reads a simulator-only field as: nothing, ever. Reading one is an error
/// that says why (and, in a RON or JSON file, where).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SimulatorOnly {}

impl<'de> Deserialize<'de> for SimulatorOnly {
    fn deserialize<D: Deserializer<'de>>(_: D) -> Result<Self, D::Error> {
        Err(de::Error::custom(
            "timeout_dist is simulator only (a timeout drawn per request models callers with different timeouts): expected `timeout` in a service",
        ))
    }
}

/// Why a policy file was refused. Displays as `file:line:col: message` for what the parser saw,
/// `file: field: message` for a layer a target cannot run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicyError {
    /// The file, as given.
    pub file: String,
    /// 1-based line and column, when the parser knew them.
    pub position: Option<(usize, usize)>,
    /// The layer's path from the policy (`stack.inner.inner`), for a refused layer.
    pub field: Option<String>,
    /// What was wrong and what was expected.
    pub message: String,
}

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some((line, col)) = self.position {
            write!(f, ":{line}:{col}")?;
        }
        f.write_str(": ")?;
        if let Some(field) = &self.field {
            write!(f, "{field}: ")?;
        }
        f.write_str(&self.message)
    }
}

impl std::error::Error for PolicyError {}

impl serde::Serialize for SimulatorOnly {
    fn serialize<S: serde::Serializer>(&self, _: S) -> Result<S::Ok, S::Error> {
        match *self {}
    }
}

/// A scenario's `timeout_dist`, skipped when reading a whole scenario file (refused only if the
/// policy chosen has one).
#[derive(Clone, Copy, Debug)]
struct Skipped;

impl<'de> Deserialize<'de> for Skipped {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        IgnoredAny::deserialize(d).map(|_| Skipped)
    }
}

/// A breaker on a [`Route`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RouteBreaker {
    /// The core's config.
    pub config: BreakerConfig,
    /// Outside the retry: one verdict per call (`Breaker(inner: Retry(..))`); inside or without a
    /// retry: one per attempt.
    pub per_call: bool,
    /// Whose state it is.
    pub scope: Scope,
}

/// Adaptive throttling on a [`Route`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RouteThrottle {
    /// The core's config.
    pub config: ThrottleConfig,
    /// Around the retry: admits once per call (`Throttle(inner: Retry(..))`); inside or without
    /// a retry: once per attempt.
    pub per_call: bool,
    /// Whose state it is.
    pub scope: Scope,
}

/// Hedging on a [`Route`]: around its call, every copy the call itself (as the simulator sends
/// them: a `Hedge`'s `inner` is a `Call`).
///
/// Timeouts follow the format's structure, as in the simulator: the `Call`'s `timeout` is each
/// copy's, from that copy's own send ([`Builder::copy_timeout`],
/// [`HedgeLayer::copy_timeout`](crate::tower::HedgeLayer::copy_timeout)); the `Retry`'s
/// `attempt_timeout` bounds the hedged attempt as a whole from its first send, and the deadline
/// the call. The attempt ends when a copy succeeds or every copy has ended (so when every copy
/// times out, at the last copy's timer), and only then may the retry send the next.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RouteHedge {
    /// The core's config.
    pub config: HedgeConfig,
    /// The `Call`'s `timeout`: each copy's own, from its send.
    pub copy_timeout: Option<Duration>,
    /// Whose latency estimate times the hedges.
    pub scope: Scope,
}

/// The ledger of extra attempts on a [`Route`]: the retries, hedges and half-open probes inside
/// it draw from it, and each call that enters it deposits a share of one.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RouteLedger {
    /// The core's ratio config.
    pub config: RatioConfig,
    /// Whose ledger it is.
    pub scope: Scope,
    /// A `Throttle` is outside it (it decides before the call deposits).
    pub under_throttle: bool,
    /// A `Breaker` is outside it (it decides before the call deposits, and its probes do not
    /// draw from the ledger).
    pub under_breaker: bool,
}

/// A concurrency limit on a [`Route`]: innermost, so every attempt takes a slot (a hedged
/// attempt one for all its copies).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RouteLimit {
    /// The core's config.
    pub config: LimiterConfig,
    /// Whose limiter it is.
    pub scope: Scope,
}

/// A client-side rate limit on a [`Route`]: innermost, inside any concurrency limit, so every
/// attempt the breaker and the limit admitted is counted (a hedged attempt once for all its
/// copies).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RouteRateLimit {
    /// The core's config.
    pub config: RateConfig,
    /// Whose rate limiter it is.
    pub scope: Scope,
}

/// One path of a [`Plan`]: the layers a call to one downstream passes.
#[derive(Clone, Debug, PartialEq)]
pub struct Route {
    /// Where the route is written in the policy: `stack`, or `stack[i]` for a fallback branch.
    pub path: String,
    /// The downstream called (the instance's name).
    pub downstream: String,
    /// The retry policy; without a `Retry` layer, one attempt with the call's timeout.
    pub retry: RetryConfig,
    /// Whether a `Retry` layer was written (one attempt without).
    pub retries: bool,
    /// The retry budget, and whose it is.
    pub budget: Option<(BudgetConfig, Scope)>,
    /// The breaker.
    pub breaker: Option<RouteBreaker>,
    /// Adaptive throttling.
    pub throttle: Option<RouteThrottle>,
    /// Hedged requests (of a call marked idempotent).
    pub hedge: Option<RouteHedge>,
    /// The ledger of extra attempts.
    pub ledger: Option<RouteLedger>,
    /// A concurrency limit.
    pub limit: Option<RouteLimit>,
    /// A client-side rate limit.
    pub rate_limit: Option<RouteRateLimit>,
    /// `Llm(signals: true)`: the policy reads LLM provider signals (money limits are never
    /// retried), so classify errors with `reliable::llm` (feature `llm`).
    pub llm_signals: bool,
    /// Where the throttle, breaker, limit and rate limit sit around the retry and where the
    /// ledger takes each call's deposit, read by the core as the engine reads the stack
    /// ([`Nesting::of_route`](reliable_core::engine::Nesting::of_route)):
    /// [`builder`](Self::builder) passes it to [`Builder::nesting`].
    pub nesting: reliable_core::engine::Nesting,
    /// The first layer the tower layers of [`route_layer`](Self::route_layer) cannot stack where
    /// the policy puts it, and why (a `Reliable` and `ReliableLayer` run every nesting).
    route_layer_refusal: Option<Refused>,
    /// The scope fields that say `Fleet`, outermost first: the layer's kind and the field's path.
    /// Only [`fleet_builder`](Self::fleet_builder), given the stores they name, builds them.
    fleet: Vec<(&'static str, String)>,
    /// The file, for messages.
    file: String,
}

/// A loaded policy: its name and its routes, in the order a fallback tries them.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// The policy's name.
    pub name: String,
    /// One route per fallback branch (one without a `Fallback`).
    pub routes: Vec<Route>,
    /// The file, for messages.
    file: String,
}

/// A layer's path from the policy, for messages.
fn at(path: &str, step: &str) -> String {
    format!("{path}.{step}")
}

impl Plan {
    /// Reads a policy entry `(name: .., stack: ..)` written in RON (as in a scenario's
    /// `policies`), with the simulator's extensions: a bare value for an `Option`, one pair of
    /// parentheses for a newtype variant holding a struct.
    pub fn from_ron(text: &str, file: &str) -> Result<Plan, PolicyError> {
        let policy: PolicyEntry = ron_options()
            .from_str(text)
            .map_err(|e| ron_error(e, file))?;
        Plan::new(&policy, file)
    }

    /// Reads a policy from JSON: the same types as serde writes them (`{"name": .., "stack":
    /// {"Retry": {"policy": .., "inner": {"Call": {"downstream": "api"}}}}}`).
    pub fn from_json(text: &str, file: &str) -> Result<Plan, PolicyError> {
        let policy: PolicyEntry = serde_json::from_str(text).map_err(|e| PolicyError {
            file: file.to_string(),
            position: Some((e.line().max(1), e.column().max(1))),
            field: None,
            message: e.to_string(),
        })?;
        Plan::new(&policy, file)
    }

    /// Reads the policy called `name` from a scenario file (`Scenario(..)` or a list of them):
    /// the file `sim check` validated, unchanged. Only the `policies` are read; the rest of the
    /// scenario (workload, downstreams, faults) is the simulator's and is skipped. In a list
    /// whose scenarios share policy names, say which scenario with
    /// [`from_scenario_in`](Self::from_scenario_in).
    pub fn from_scenario(text: &str, file: &str, name: &str) -> Result<Plan, PolicyError> {
        Plan::pick(text, file, None, name)
    }

    /// Reads the policy called `name` of the scenario called `scenario` from a scenario file.
    pub fn from_scenario_in(
        text: &str,
        file: &str,
        scenario: &str,
        name: &str,
    ) -> Result<Plan, PolicyError> {
        Plan::pick(text, file, Some(scenario), name)
    }

    fn pick(
        text: &str,
        file: &str,
        scenario: Option<&str>,
        name: &str,
    ) -> Result<Plan, PolicyError> {
        let all = scenario_policies(text, file)?;
        let fail = |message: String| PolicyError {
            file: file.to_string(),
            position: None,
            field: None,
            message,
        };
        let found: Vec<&(String, reliable_core::policy::Policy<Skipped>)> = all
            .iter()
            .filter(|(s, p)| p.name == name && scenario.is_none_or(|want| want == s))
            .collect();
        match found.as_slice() {
            [(_, policy)] => Plan::new(policy, file),
            [] => {
                let names: Vec<String> = all
                    .iter()
                    .filter(|(s, _)| scenario.is_none_or(|want| want == s))
                    .map(|(_, p)| p.name.clone())
                    .take(20)
                    .collect();
                Err(fail(format!(
                    "no policy named {name:?}: expected one of {names:?}"
                )))
            }
            several => {
                let scenarios: Vec<&str> = several.iter().map(|(s, _)| s.as_str()).collect();
                Err(fail(format!(
                    "{} scenarios have a policy named {name:?} ({scenarios:?}): expected the scenario's name too (Plan::from_scenario_in)",
                    several.len()
                )))
            }
        }
    }

    /// Splits a parsed policy into routes, refusing what no target can run as the simulator does.
    pub fn new<D>(
        policy: &reliable_core::policy::Policy<D>,
        file: &str,
    ) -> Result<Plan, PolicyError> {
        let fail = |field: String, message: &str| PolicyError {
            file: file.to_string(),
            position: None,
            field: Some(field),
            message: message.to_string(),
        };
        // What no stack can mean, refused as every loader of the format refuses it.
        policy
            .stack
            .check_nesting("stack")
            .map_err(|e| fail(e.path, &e.message))?;
        // A client here calls one host per downstream: one breaker per host would be one breaker.
        if let Some(path) = policy.stack.per_host("stack") {
            return Err(fail(path, reliable_core::policy::PER_HOST_ONE_HOST));
        }
        let mut branches = Vec::new();
        flatten(&policy.stack, "stack".to_string(), &mut branches);
        if branches.len() > MAX_ROUTES {
            return Err(fail(
                "stack".into(),
                &format!(
                    "{} fallback branches: expected at most {MAX_ROUTES}",
                    branches.len()
                ),
            ));
        }
        let routes = branches
            .into_iter()
            .map(|(layer, path)| route(layer, path, file).map_err(|(f, m)| fail(f, &m)))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Plan {
            name: policy.name.clone(),
            routes,
            file: file.to_string(),
        })
    }

    /// The single route, or why there is not exactly one.
    pub fn route(&self) -> Result<&Route, PolicyError> {
        match self.routes.as_slice() {
            [r] => Ok(r),
            routes => Err(PolicyError {
                file: self.file.clone(),
                position: None,
                field: Some("stack".into()),
                message: format!(
                    "a Fallback of {} routes: expected one; build each of `routes` and compose them with `Fallback`",
                    routes.len()
                ),
            }),
        }
    }

    /// A [`Builder`] for the single route (see [`Route::builder`]).
    pub fn builder(&self) -> Result<Builder, PolicyError> {
        self.route()?.builder()
    }

    /// A [`Builder`] for blocking calls on the single route (see [`Route::blocking_builder`]).
    pub fn blocking_builder(&self) -> Result<Builder, PolicyError> {
        self.route()?.blocking_builder()
    }

    /// A tower `ReliableLayer` for the single route (see [`Route::layer`]).
    #[cfg(feature = "tower")]
    pub fn layer<P: Clone>(
        &self,
        policy: P,
    ) -> Result<crate::tower::ReliableLayer<P>, PolicyError> {
        self.route()?.layer(policy)
    }

    /// The tower layers of the single route, in its own order (see [`Route::route_layer`]).
    #[cfg(feature = "tower")]
    pub fn route_layer<P: Clone>(&self, policy: P) -> Result<RouteLayer<P>, PolicyError> {
        self.route()?.route_layer(policy)
    }

    /// A [`Builder`] for the single route, with the fleet's state from `stores` (see
    /// [`Route::fleet_builder`]).
    #[cfg(feature = "fleet")]
    pub fn fleet_builder(&self, stores: &Stores) -> Result<Builder, PolicyError> {
        self.route()?.fleet_builder(stores)
    }

    /// A tower `ReliableLayer` for the single route, with the fleet's state from `stores` (see
    /// [`Route::fleet_layer`]).
    #[cfg(all(feature = "fleet", feature = "tower"))]
    pub fn fleet_layer<P: Clone>(
        &self,
        policy: P,
        stores: &Stores,
    ) -> Result<crate::tower::ReliableLayer<P>, PolicyError> {
        self.route()?.fleet_layer(policy, stores)
    }
}

/// The branches of `layer`: the layers of an outermost `Fallback` (nested ones flattened, as
/// trying `[a, [b, c]]` in order tries a, b, c), or `layer` itself.
fn flatten<'a, D>(
    layer: &'a reliable_core::policy::Layer<D>,
    path: String,
    out: &mut Vec<(&'a reliable_core::policy::Layer<D>, String)>,
) {
    use reliable_core::policy::Layer;
    match layer {
        Layer::Fallback(layers) => {
            for (i, l) in layers.iter().enumerate() {
                flatten(l, format!("{path}[{i}]"), out);
            }
        }
        other => out.push((other, path)),
    }
}

type Refused = (String, String);

/// One route from a chain of layers, outermost first.
fn route<D>(
    mut layer: &reliable_core::policy::Layer<D>,
    at_path: String,
    file: &str,
) -> Result<Route, Refused> {
    use reliable_core::policy::Layer;
    let top = layer;
    let mut path = at_path.clone();
    let refuse = |path: &str, m: &str| Err((path.to_string(), m.to_string()));
    // What `Route::route_layer` cannot stack; a Reliable and ReliableLayer run it.
    let mut route_layer_refusal: Option<Refused> = None;
    let mut retry: Option<RetryConfig> = None;
    let mut budget = None;
    let mut breaker: Option<RouteBreaker> = None;
    let mut throttle: Option<RouteThrottle> = None;
    let mut hedge = None;
    let mut ledger: Option<RouteLedger> = None;
    let mut limit = None;
    let mut rate_limit = None;
    let mut llm_signals = false;
    let mut fleet = Vec::new();
    // The first Limit or RateLimit inside the Retry (its path and kind): the engine has each
    // copy of a hedged attempt pass it, the tower layers the hedged attempt once.
    let mut per_copy: Option<(String, &str)> = None;
    loop {
        // The tower layers put the limits innermost, around the call (or its hedge), the rate
        // limit inside the concurrency limit.
        let outer = matches!(
            layer,
            Layer::Retry { .. }
                | Layer::Breaker { .. }
                | Layer::Throttle { .. }
                | Layer::Ledger { .. }
                | Layer::Limit { .. }
        );
        let kind = layer.kind_name();
        // A fleet's state lives in a store the service names (Route::fleet_builder).
        for (field, _) in layer.scope_fields().filter(|(_, s)| s.fleet().is_some()) {
            fleet.push((kind, at(&path, field)));
        }
        if route_layer_refusal.is_none() && rate_limit.is_some() && outer {
            route_layer_refusal = Some((
                path.clone(),
                format!(
                    "a {kind} inside a RateLimit: the tower layers (Route::route_layer) put the RateLimitLayer innermost, inside any ConcurrencyLimitLayer, around the call or its HedgeLayer; expected the RateLimit there, or a Reliable (Route::builder) or ReliableLayer (Route::layer), which run every nesting"
                ),
            ));
        }
        if route_layer_refusal.is_none() && limit.is_some() && outer {
            route_layer_refusal = Some((
                path.clone(),
                format!(
                    "a {kind} inside a Limit: the tower layers (Route::route_layer) put the ConcurrencyLimitLayer innermost, around the call, its HedgeLayer or a RateLimitLayer; expected the Limit there, or a Reliable (Route::builder) or ReliableLayer (Route::layer), which run every nesting"
                ),
            ));
        }
        match layer {
            Layer::Call {
                downstream,
                timeout,
                timeout_dist,
            } => {
                if timeout_dist.is_some() {
                    return refuse(
                        &at(&path, "timeout_dist"),
                        "simulator only (a timeout drawn per request models callers with different timeouts): expected `timeout` in a service",
                    );
                }
                let retries = retry.is_some();
                let mut retry = retry.unwrap_or(RetryConfig {
                    max_attempts: Some(1),
                    ..RetryConfig::new(BackoffConfig::immediate())
                });
                // Under a hedge the call's timeout is each copy's; otherwise the attempt is the
                // call's only copy.
                match &mut hedge {
                    Some(RouteHedge { copy_timeout, .. }) => *copy_timeout = *timeout,
                    None => retry.attempt_timeout = min_some(retry.attempt_timeout, *timeout),
                }
                // The engine's reading of the route's nesting; a gate twice was refused above.
                let nesting = reliable_core::engine::Nesting::of_route(top).map_err(|t| {
                    (
                        at_path.clone(),
                        format!(
                            "a second {:?} gate: expected each layer once per route",
                            t.0
                        ),
                    )
                })?;
                return Ok(Route {
                    path: at_path,
                    file: file.to_string(),
                    nesting,
                    route_layer_refusal,
                    fleet,
                    downstream: downstream.clone(),
                    retry,
                    retries,
                    budget,
                    breaker,
                    throttle,
                    hedge,
                    ledger,
                    limit,
                    rate_limit,
                    llm_signals,
                });
            }
            Layer::Retry {
                policy,
                budget: b,
                budget_scope,
                inner,
            } => {
                if retry.is_some() {
                    return refuse(
                        &path,
                        "a retry inside a retry: expected one Retry per route (retries multiply)",
                    );
                }
                if ledger.is_some() && b.is_some() {
                    return refuse(
                        &at(&path, "budget"),
                        "a retry budget inside a Ledger: its retries would not draw from the ledger, nor its calls deposit in it, which neither a Reliable (the ledger is its retry budget) nor the tower layers run; expected no `budget` (the ledger bounds the retries)",
                    );
                }
                retry = Some(*policy);
                budget = b.map(|b| (b, *budget_scope));
                path = at(&path, "inner");
                layer = inner;
            }
            Layer::Breaker {
                config,
                scope,
                inner,
            } => {
                if breaker.is_some() {
                    return refuse(&path, "a second breaker: expected one Breaker per route");
                }
                breaker = Some(RouteBreaker {
                    config: *config,
                    per_call: false,
                    scope: *scope,
                });
                path = at(&path, "inner");
                layer = inner;
                // Outside the retry if a Retry comes below it.
                if let Some(b) = &mut breaker {
                    b.per_call = retry.is_none() && has_retry(layer);
                }
            }
            Layer::Throttle {
                config,
                scope,
                inner,
            } => {
                if throttle.is_some() {
                    return refuse(&path, "a second throttle: expected one Throttle per route");
                }
                if breaker.is_some() && route_layer_refusal.is_none() {
                    route_layer_refusal = Some((
                        path.clone(),
                        "a throttle inside the breaker: the tower layers (Route::route_layer) put the ThrottleLayer outside the BreakerLayer; expected the Throttle outside the Breaker, or a Reliable (Route::builder) or ReliableLayer (Route::layer), which run every nesting".to_string(),
                    ));
                }
                path = at(&path, "inner");
                layer = inner;
                throttle = Some(RouteThrottle {
                    config: *config,
                    per_call: retry.is_none() && has_retry(layer),
                    scope: *scope,
                });
            }
            Layer::Llm {
                signals,
                spend,
                proactive,
                inner,
                ..
            } => {
                if *proactive {
                    return refuse(
                        &at(&path, "proactive"),
                        "proactive quotas feed a spend breaker, which is not a Reliable layer: expected `proactive: false`",
                    );
                }
                if spend.is_some() {
                    return refuse(
                        &at(&path, "spend"),
                        "a spend breaker is not a Reliable layer: expected no `spend` (drive reliable_core::spend::SpendBreaker around the call yourself)",
                    );
                }
                llm_signals = *signals;
                path = at(&path, "inner");
                layer = inner;
            }
            Layer::Fallback(_) => {
                return refuse(
                    &path,
                    "a Fallback inside another layer: expected Fallback only outermost (one route per branch)",
                );
            }
            Layer::Hedge {
                config,
                idempotent,
                scope,
                inner,
            } => {
                if !matches!(**inner, Layer::Call { .. }) {
                    return refuse(&at(&path, "inner"), reliable_core::policy::HEDGE_OF_CALL);
                }
                if !*idempotent {
                    return refuse(
                        &at(&path, "idempotent"),
                        "a Hedge of a call not marked idempotent never hedges (a copy would do its work twice): expected `idempotent: true`, or no Hedge",
                    );
                }
                if let Some((gate, kind)) =
                    per_copy.as_ref().filter(|_| route_layer_refusal.is_none())
                {
                    let (tower, each) = match *kind {
                        "Limit" => ("ConcurrencyLimitLayer", "takes a slot of its own"),
                        _ => ("RateLimitLayer", "is counted"),
                    };
                    route_layer_refusal = Some((
                        gate.clone(),
                        format!(
                            "a Hedge inside a {kind} inside the Retry: there each copy of a hedged attempt {each} (as the core's call engine runs it), but the tower layers (Route::route_layer) put the {tower} around the HedgeLayer, once for all the copies of an attempt; expected no Hedge under a {kind} inside the Retry, or a Reliable (Route::builder) or ReliableLayer (Route::layer), which run every nesting"
                        ),
                    ));
                }
                hedge = Some(RouteHedge {
                    config: *config,
                    copy_timeout: None,
                    scope: *scope,
                });
                path = at(&path, "inner");
                layer = inner;
            }
            Layer::Ledger {
                config,
                scope,
                inner,
            } => {
                if retry.is_some() {
                    return refuse(&path, reliable_core::policy::LEDGER_IN_RETRY);
                }
                if ledger.is_some() {
                    return refuse(&path, "a second ledger: expected one Ledger per route");
                }
                ledger = Some(RouteLedger {
                    config: *config,
                    scope: *scope,
                    under_throttle: throttle.is_some(),
                    under_breaker: breaker.is_some(),
                });
                path = at(&path, "inner");
                layer = inner;
            }
            Layer::Limit {
                config,
                scope,
                inner,
            } => {
                if limit.is_some() {
                    return refuse(&path, "a second limit: expected one Limit per route");
                }
                limit = Some(RouteLimit {
                    config: *config,
                    scope: *scope,
                });
                if retry.is_some() && per_copy.is_none() {
                    per_copy = Some((path.clone(), "Limit"));
                }
                path = at(&path, "inner");
                layer = inner;
            }
            Layer::RateLimit {
                config,
                scope,
                inner,
            } => {
                if rate_limit.is_some() {
                    return refuse(
                        &path,
                        "a second rate limit: expected one RateLimit per route",
                    );
                }
                rate_limit = Some(RouteRateLimit {
                    config: *config,
                    scope: *scope,
                });
                if retry.is_some() && per_copy.is_none() {
                    per_copy = Some((path.clone(), "RateLimit"));
                }
                path = at(&path, "inner");
                layer = inner;
            }
        }
    }
}

/// Whether a `Retry` is somewhere below `layer` on its chain.
fn has_retry<D>(mut layer: &reliable_core::policy::Layer<D>) -> bool {
    use reliable_core::policy::Layer;
    loop {
        layer = match layer {
            Layer::Retry { .. } => return true,
            Layer::Breaker { inner, .. }
            | Layer::Throttle { inner, .. }
            | Layer::Hedge { inner, .. }
            | Layer::Ledger { inner, .. }
            | Layer::Limit { inner, .. }
            | Layer::RateLimit { inner, .. }
            | Layer::Llm { inner, .. } => inner,
            Layer::Call { .. } | Layer::Fallback(_) => return false,
        }
    }
}

fn min_some(a: Option<Duration>, b: Option<Duration>) -> Option<Duration> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

impl Route {
    /// The scopes of the route's layers that keep state (a hedge with a fixed delay keeps none).
    fn scopes(&self) -> impl Iterator<Item = Scope> {
        let estimates = |h: &RouteHedge| matches!(h.config.delay, HedgeDelay::Quantile(_));
        self.budget
            .map(|b| b.1)
            .into_iter()
            .chain(self.breaker.map(|b| b.scope))
            .chain(self.throttle.map(|t| t.scope))
            .chain(self.hedge.filter(estimates).map(|h| h.scope))
            .chain(self.ledger.map(|l| l.scope))
            .chain(self.limit.map(|l| l.scope))
            .chain(self.rate_limit.map(|r| r.scope))
    }

    /// Some of its stateful layers are `Shared` and some `PerClient` (a `Fleet` layer's state is
    /// its store's, whichever the others are).
    fn mixes_scopes(&self) -> bool {
        let mut scopes = self.scopes().filter(|s| s.fleet().is_none());
        let first = scopes.next();
        scopes.any(|s| Some(s) != first)
    }

    fn refuse(&self, message: &str) -> PolicyError {
        self.refuse_at(&self.path, message)
    }

    fn refuse_at(&self, field: &str, message: &str) -> PolicyError {
        PolicyError {
            file: self.file.clone(),
            position: None,
            field: Some(field.to_string()),
            message: message.to_string(),
        }
    }

    /// A [`Builder`] set to this route: named after the downstream, its retry, budget, breaker,
    /// throttle, hedging (the instance marked idempotent), ledger, concurrency limit and rate
    /// limit, each where the policy nests it ([`Builder::nesting`] with the route's
    /// [`nesting`](Self#structfield.nesting), so the instance's calls run the stack as the core's
    /// call engine runs it, and the simulator), nothing else of the builder's defaults. Add the
    /// clock, observers, metrics as usual.
    ///
    /// The instance hedges in [`Reliable::call`] only: [`Reliable::call_blocking`] never hedges.
    /// For blocking calls, build from [`blocking_builder`](Self::blocking_builder), which refuses
    /// a route with a `Hedge` instead of dropping it.
    ///
    /// A route with a `Fleet` scope is refused here ([`FLEET_NO_STORE`](reliable_core::policy::FLEET_NO_STORE)):
    /// one breaker or budget per process would be a per-client scope in disguise;
    /// `fleet_builder` (feature `fleet`) builds it with the stores the policy names.
    pub fn builder(&self) -> Result<Builder, PolicyError> {
        self.refuse_fleet()?;
        self.local_builder()
    }

    /// Whether some layer of the route says `Fleet`: only `fleet_builder` (feature `fleet`),
    /// given the stores the policy names, builds it.
    pub fn is_fleet(&self) -> bool {
        !self.fleet.is_empty()
    }

    /// Refuses a route with a `Fleet` scope, at its first such field.
    fn refuse_fleet(&self) -> Result<(), PolicyError> {
        match self.fleet.first() {
            Some((_, field)) => Err(self.refuse_at(field, reliable_core::policy::FLEET_NO_STORE)),
            None => Ok(()),
        }
    }

    /// [`builder`](Self::builder) without the `Fleet` refusal: every layer with the instance's
    /// own state (what `fleet_builder` then gives the fleet's).
    fn local_builder(&self) -> Result<Builder, PolicyError> {
        if self.mixes_scopes() {
            return Err(self.refuse(
                "some layers Shared and some PerClient: a Reliable is one state for all its layers (share one instance for Shared, build one per client for PerClient), so either way some layer would run with the other scope, unlike the simulator; expected one scope, or the tower layers (Plan::route_layer), which keep each layer's own",
            ));
        }
        let mut b = Reliable::builder(&self.downstream)
            .no_breaker()
            .retry(self.retry)
            .nesting(self.nesting);
        if let Some(br) = self.breaker {
            b = b.breaker(br.config);
        }
        // A fleet's budget is `fleet_builder`'s (`builder` refused it).
        if let Some((budget, scope)) = self.budget
            && scope.fleet().is_none()
        {
            b = b.budget(budget);
        }
        if let Some(throttle) = self.throttle {
            b = b.throttle(throttle.config);
        }
        if let Some(hedge) = self.hedge {
            b = b.hedge(hedge.config).idempotent();
            if let Some(t) = hedge.copy_timeout {
                b = b.copy_timeout(t.into());
            }
        }
        if let Some(ledger) = self.ledger {
            b = b.ledger(ledger.config);
        }
        if let Some(limit) = self.limit {
            b = b.limit(limit.config);
        }
        if let Some(rate) = self.rate_limit {
            b = b.rate_limit(rate.config);
        }
        Ok(b)
    }

    /// A [`Builder`] for [`Reliable::call_blocking`]: [`builder`](Self::builder), refusing a
    /// route with a `Hedge` (`call_blocking` runs on the caller's thread alone and a copy would
    /// need a thread; [`builder`](Self::builder) serves `call_blocking_detached`, which hedges).
    pub fn blocking_builder(&self) -> Result<Builder, PolicyError> {
        if self.hedge.is_some() {
            return Err(self.refuse(
                "a Hedge in a blocking call: call_blocking never hedges (a copy would need a thread of its own); expected an async call or call_blocking_detached (Route::builder), or no Hedge",
            ));
        }
        self.builder()
    }

    /// The route as one tower `ReliableLayer`, built from [`builder`](Self::builder): the same
    /// instance a `Reliable` would be, so its service runs the route's nesting as the core's
    /// call engine does, whatever it is (a breaker per call or none, a throttle or a limit
    /// outside the retry, a ledger, hedges of requests `policy` can copy). Scopes: all `Shared`
    /// gives [`shared`](crate::tower::ReliableLayer::shared) (one state for every service the
    /// layer wraps); all per client, one per wrapped service; refused when mixed.
    #[cfg(feature = "tower")]
    pub fn layer<P: Clone>(
        &self,
        policy: P,
    ) -> Result<crate::tower::ReliableLayer<P>, PolicyError> {
        if self.mixes_scopes() {
            return Err(self.refuse(
                "some layers Shared and some PerClient: expected one scope (ReliableLayer shares all its state or none), or the tower layers (Plan::route_layer), which keep each layer's own",
            ));
        }
        let shared = self.scopes().all(|s| s == Scope::Shared);
        let layer = crate::tower::ReliableLayer::from_builder(self.builder()?, policy)
            .map_err(|e| self.refuse(&format!("{e}: expected a config the core accepts")))?;
        Ok(if shared { layer.shared() } else { layer })
    }

    /// The tower layers of this route in the order the policy wrote them, whatever it is: a
    /// [`RouteLayer`] (`RetryLayer`, `ThrottleLayer`, `BreakerLayer`, then innermost a
    /// `ConcurrencyLimitLayer`, a `RateLimitLayer` and a `HedgeLayer`, each shared or per wrapped
    /// service as its scope says, and a `SharedLedger` for the retry, hedge and breaker layers
    /// inside the ledger). Refuses what those layers cannot stack where the policy puts it (see
    /// the [module docs](self)): [`layer`](Self::layer) runs every nesting.
    #[cfg(feature = "tower")]
    pub fn route_layer<P: Clone>(&self, policy: P) -> Result<RouteLayer<P>, PolicyError> {
        self.refuse_fleet()?;
        if let Some((field, message)) = &self.route_layer_refusal {
            return Err(PolicyError {
                file: self.file.clone(),
                position: None,
                field: Some(field.clone()),
                message: message.clone(),
            });
        }
        RouteLayer::new(self, policy)
    }

    /// The route as a tower [`ReliableConfig`](crate::tower::ReliableConfig), the stock shape
    /// `ReliableLayer::new` takes: a retry (with its budget), a throttle and a breaker every
    /// attempt passes, nothing else. [`layer`](Self::layer) builds any route.
    #[cfg(feature = "tower")]
    pub fn reliable_config(&self) -> Result<crate::tower::ReliableConfig, PolicyError> {
        self.refuse_fleet()?;
        if self.hedge.is_some()
            || self.ledger.is_some()
            || self.limit.is_some()
            || self.rate_limit.is_some()
        {
            return Err(self.refuse(
                "a Hedge, Ledger, Limit or RateLimit: a ReliableConfig has retry, throttle and breaker only; expected Route::layer, which builds the ReliableLayer of any route",
            ));
        }
        let Some(breaker) = self.breaker else {
            return Err(self.refuse(
                "no breaker: a ReliableConfig always has one; expected a Breaker inside the Retry, or Route::layer, which builds the ReliableLayer of any route",
            ));
        };
        if breaker.per_call {
            return Err(self.refuse(
                "a breaker outside the retry: a ReliableConfig's breaker sees every attempt; expected Retry(inner: Breaker(..)), or Route::layer, which builds the ReliableLayer of any route",
            ));
        }
        if self.throttle.is_some_and(|t| t.per_call) {
            return Err(self.refuse(
                "a throttle around the retry: a ReliableConfig's throttle sees every attempt; expected Retry(inner: Throttle(inner: Breaker(..))), or Route::layer, which builds the ReliableLayer of any route",
            ));
        }
        // What ReliableLayer::new runs: every gate inside the retry, the throttle outside the
        // breaker.
        use reliable_core::engine::{Gate, Nesting};
        let stock: &[Gate] = match self.throttle {
            Some(_) => &[Gate::Throttle, Gate::Breaker],
            None => &[Gate::Breaker],
        };
        if Nesting::new(&[], 0, stock).ok() != Some(self.nesting) {
            return Err(self.refuse(
                "a throttle inside the breaker, or gates that judge the call once (outside the Retry, or on a route without one): a ReliableConfig's throttle and breaker see every attempt, the throttle outside the breaker; expected Retry(inner: Throttle(inner: Breaker(..))), or Route::layer, which builds the ReliableLayer of any route",
            ));
        }
        Ok(crate::tower::ReliableConfig {
            retry: self.retry,
            budget: self.budget.map(|b| b.0),
            breaker: breaker.config,
            throttle: self.throttle.map(|t| t.config),
        })
    }

    /// [`builder`](Self::builder), with the fleet's state where the policy says `Fleet`: a
    /// [`FleetBreaker`](crate::fleet::FleetBreaker) ([`Builder::fleet_breaker`]) for a
    /// `Breaker`, a [`FleetBudget`](crate::fleet::FleetBudget) ([`Builder::fleet_budget`]) for a
    /// `Retry`'s ratio budget, in the store `stores` holds under the scope's name (see
    /// [`Stores`] for what they are named). The other layers are the instance's own, as
    /// [`builder`](Self::builder) makes them (all `Shared` or all `PerClient`); each instance
    /// built from it keeps its own fallback for when the store fails.
    ///
    /// A `Reliable`'s call engine decides at once, on the fleet's view refreshed every
    /// `refresh` ([`FleetBreaker::decide`](crate::fleet::FleetBreaker::decide)):
    /// `mode: Cached(refresh: ..)` only. Call it inside the tokio runtime the refreshes are to
    /// run on.
    ///
    /// Refused: `mode: Exact` ([`FLEET_EXACT`]: the simulator's exact mode is a round trip per
    /// decision, which a `Reliable` never waits for), a `Fleet` scope on a `Limit` or a `RateLimit` (a `Reliable` does not share a
    /// bulkhead or a rate limit through a store: drive [`crate::fleet::FleetBulkhead`] or
    /// [`crate::fleet::FleetRateLimiter`] around the call), a store `stores` lacks, a config the
    /// store cannot hold (a breaker's `slow_calls`, say), a downstream name a store cannot key.
    #[cfg(feature = "fleet")]
    pub fn fleet_builder(&self, stores: &Stores) -> Result<Builder, PolicyError> {
        let mut b = self.local_builder()?;
        let (breaker, budget) = stores::fleet_state(self, stores)?;
        if let Some(fleet) = breaker {
            b = b.fleet_breaker(fleet);
        }
        if let Some(fleet) = budget {
            b = b.fleet_budget(fleet);
        }
        Ok(b)
    }

    /// The route's fleet breaker and budget as the core's call engine asks them, for a face
    /// that drives the engine itself (the Python package), refused as
    /// [`fleet_builder`](Self::fleet_builder) refuses; the route's other layers are the face's
    /// to build. Call it inside the tokio runtime the refreshes are to run on.
    #[cfg(feature = "fleet")]
    pub fn fleet_gates(&self, stores: &Stores) -> Result<FleetGates, PolicyError> {
        let (breaker, budget) = stores::fleet_state(self, stores)?;
        Ok(FleetGates::new(breaker, budget))
    }

    /// The route as one tower `ReliableLayer`, built from [`fleet_builder`](Self::fleet_builder)
    /// (as [`layer`](Self::layer) is from [`builder`](Self::builder)): shared by every service it
    /// wraps when the route's other stateful layers are all `Shared` (or it has none).
    #[cfg(all(feature = "fleet", feature = "tower"))]
    pub fn fleet_layer<P: Clone>(
        &self,
        policy: P,
        stores: &Stores,
    ) -> Result<crate::tower::ReliableLayer<P>, PolicyError> {
        let shared = self
            .scopes()
            .filter(|s| s.fleet().is_none())
            .all(|s| s == Scope::Shared);
        let layer = crate::tower::ReliableLayer::from_builder(self.fleet_builder(stores)?, policy)
            .map_err(|e| self.refuse(&format!("{e}: expected a config the core accepts")))?;
        Ok(if shared { layer.shared() } else { layer })
    }
}

fn ron_options() -> ron::Options {
    use ron::extensions::Extensions;
    ron::Options::default()
        .with_default_extension(Extensions::IMPLICIT_SOME | Extensions::UNWRAP_VARIANT_NEWTYPES)
        .with_recursion_limit(128)
}

fn ron_error(e: ron::error::SpannedError, file: &str) -> PolicyError {
    let message = e.code.to_string().trim().replace('\n', " ");
    let message = if message.contains("recursion limit") {
        "nested more than 128 levels deep: expected a flatter policy".to_string()
    } else {
        message
    };
    PolicyError {
        file: file.to_string(),
        position: Some((e.span.start.line.max(1), e.span.start.col.max(1))),
        field: None,
        message,
    }
}

/// The policies in a scenario file (`Scenario(..)` or a list of them), in file order: for each,
/// its scenario's name and its own, what [`Plan::from_scenario_in`] loads.
pub fn policy_names(text: &str, file: &str) -> Result<Vec<(String, String)>, PolicyError> {
    Ok(scenario_policies(text, file)?
        .into_iter()
        .map(|(s, p)| (s, p.name))
        .collect())
}

/// Every policy of a scenario file (`Scenario(..)` or `[Scenario(..), ...]`) with its scenario's
/// name, the rest skipped.
fn scenario_policies(text: &str, file: &str) -> Result<Vec<Tagged>, PolicyError> {
    let found: Policies = ron_options()
        .from_str(text)
        .map_err(|e| ron_error(e, file))?;
    Ok(found.0)
}

/// A policy and the name of the scenario it is in.
type Tagged = (String, reliable_core::policy::Policy<Skipped>);

/// The policies of one scenario or of a list of them.
struct Policies(Vec<Tagged>);

impl<'de> Deserialize<'de> for Policies {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(PoliciesVisitor)
    }
}

struct PoliciesVisitor;

impl<'de> Visitor<'de> for PoliciesVisitor {
    type Value = Policies;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a scenario `Scenario(..)` or a list `[Scenario(..), ...]`")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Policies, A::Error> {
        let (mut name, mut policies) = (String::new(), None);
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "name" => name = map.next_value()?,
                "policies" => policies = Some(map.next_value::<Vec<_>>()?),
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        let policies = policies.ok_or_else(|| de::Error::missing_field("policies"))?;
        Ok(Policies(
            policies.into_iter().map(|p| (name.clone(), p)).collect(),
        ))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Policies, A::Error> {
        let mut all = Vec::new();
        while let Some(Policies(p)) = seq.next_element::<Policies>()? {
            all.extend(p);
        }
        Ok(Policies(all))
    }
}

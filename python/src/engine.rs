//! The core's call engine ([`reliable_core::engine`]) for Python: a [`Policy`] owns the plan and
//! the state its calls share (breaker, retry budget or ledger, throttle, hedger, limits), and a
//! [`Run`] is one call through it. The Python side (`reliable/__init__.py`) only does what the
//! engine asks: send a copy (call the function), keep a timer, cancel a copy, hand back what came
//! back. Every decision is the engine's.
//!
//! A policy is built from the seed's arguments (`reliable(..., breaker=, budget=, ...)`) or
//! loaded from a policy file: the policy format the simulator runs, as JSON or RON, a policy entry
//! or a scenario file's policy, read by the engine's own reader ([`Stack::from_layer`]). A policy
//! file's layers are shared by every function decorated with it, or kept by each, as their
//! `scope` says: each decorated function runs a client of the policy (`Policy::_client`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::MutexExt;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};

use reliable::fleet::FleetGates;
use reliable_core::breaker::{
    BreakerConfig, BreakerPolicy, Outcome, Permit, RejectReason, Rejection, State, Transition,
};
use reliable_core::budget::{AnyBudget, Budget, Unlimited};
use reliable_core::engine::{
    Action, CallState, Cancelled, Ended, Input, Note, Plan, Refusal, SampleFor, Shared, Stack,
};
use reliable_core::hedge::{HedgePolicy, Hedger};
use reliable_core::ledger::ExtraLedger;
use reliable_core::limit::{Limiter, LimiterPolicy, RateLimiter, RatePolicy};
use reliable_core::outcome::ErrorClass;
use reliable_core::policy::{Layer, Scope};
use reliable_core::retry::RetryPolicy;
use reliable_core::throttle::{AdaptiveThrottle, ThrottlePolicy};
use reliable_core::{Duration, Instant};

use super::fleet::Store;
use super::{CircuitBreaker, Clock, Queue, Random, RetryBudget, Storage, bad_value};

/// The longest policy text read (a policy is a few KiB; a scenario file a few tens).
const MAX_TEXT: usize = 1 << 20;

/// Locks a layer's state. Steps run attached to the interpreter, and a step may call Python (the
/// user's `rng`, inside the throttle's decision), which lets other threads run: one that waits
/// for this lock waits detached, so the holder can get the interpreter back and finish.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A poisoned lock only means a step was interrupted; every state is updated in single steps.
    Python::attach(|py| m.lock_py_attached(py).unwrap_or_else(|p| p.into_inner()))
}

/// A policy's calls: the plan and the state of its stateful layers (breaker, budget, ledger,
/// throttle, hedger, limits), shared across threads.
///
/// A policy read from a file is the state its layers scoped `Shared` keep, and the fresh state of
/// those scoped `PerClient` (`per_client`): each function decorated with it runs a *client* of it
/// ([`client_of`](Policy::client_of)), which draws from the policy's state for the `Shared` layers and
/// keeps its own for the `PerClient` ones, as a tower `ReliableLayer`'s services do (and a
/// TypeScript `Policy`'s wrappers). A `Fleet` scope's state is the store's; the policy's view of it
/// (and its fallback while the store fails) is every client's. The seed's policy (the decorator's
/// own arguments) is one client: its breaker and budget are whatever objects it was given.
#[pyclass(module = "reliable", name = "Policy", frozen)]
#[derive(Debug)]
pub(crate) struct Policy {
    plan: Plan,
    breaker: Option<Py<CircuitBreaker>>,
    budget: Option<Py<RetryBudget>>,
    ledger: Option<Arc<Mutex<ExtraLedger>>>,
    throttle: Option<Arc<Mutex<AdaptiveThrottle>>>,
    hedger: Option<Arc<Mutex<Hedger>>>,
    limiter: Option<Arc<Mutex<Limiter>>>,
    rate: Option<Arc<Mutex<RateLimiter>>>,
    /// The fleet's breaker and budget, where the policy's scope says `Fleet` (and `stores` named
    /// the store): they stand in for `breaker` and `budget`.
    fleet: Option<Arc<FleetGates>>,
    clock: Clock,
    /// One stream for the policy and its clients: each draw is taken once, in the order asked.
    rng: Arc<Random>,
    /// Whether a backoff draws jitter (else no sample is asked of `rng` for it).
    random_backoff: bool,
    name: String,
    /// A policy read from a file: its `PerClient` layers, fresh, copied into each client. `None`
    /// for a client and for the seed's policy, whose state is complete (they can be started).
    per_client: Option<PerClient>,
}

/// The `PerClient` layers of a policy read from a file, as each client starts them: fresh state
/// (the breaker as its config, built for each client with a seed of its own).
#[derive(Debug)]
struct PerClient {
    breaker: Option<BreakerConfig>,
    budget: Option<AnyBudget>,
    ledger: Option<ExtraLedger>,
    throttle: Option<AdaptiveThrottle>,
    hedger: Option<Hedger>,
    limiter: Option<Limiter>,
    rate: Option<RateLimiter>,
    /// The file's name, for a breaker's errors.
    file: String,
}

/// Whether a layer's state is the policy's, for every client: `Shared`, and `Fleet` (the store's,
/// through the policy's view of it); `PerClient` is each client's own.
fn policy_wide(scope: &Scope) -> bool {
    !matches!(scope, Scope::PerClient)
}

/// A layer's state, `Shared` into the policy and `PerClient` into the template each client copies.
fn split<T>(layer: Option<(T, bool)>) -> (Option<Arc<Mutex<T>>>, Option<T>) {
    match layer {
        Some((t, true)) => (Some(Arc::new(Mutex::new(t))), None),
        Some((t, false)) => (None, Some(t)),
        None => (None, None),
    }
}

impl Policy {
    /// The seed's policy: `retry`, through `breaker` and `budget`, timed by `clock`, else by the
    /// breaker's clock.
    pub(crate) fn seed(
        py: Python<'_>,
        retry: RetryPolicy,
        breaker: Option<Py<CircuitBreaker>>,
        budget: Option<Py<RetryBudget>>,
        rng: Random,
        clock: Option<Py<PyAny>>,
    ) -> Policy {
        let clock = match (clock, &breaker) {
            (Some(c), _) => Clock(Some(c)),
            (None, Some(b)) => b.get().clock.clone_ref(py),
            (None, None) => Clock(None),
        };
        Policy {
            plan: Plan::new(retry),
            random_backoff: random_backoff(&retry),
            breaker,
            budget,
            ledger: None,
            throttle: None,
            hedger: None,
            limiter: None,
            rate: None,
            fleet: None,
            clock,
            rng: Arc::new(rng),
            name: String::new(),
            per_client: None,
        }
    }

    /// A policy entry read from a file, with the caller's `clock`, `rng` and `stores`.
    fn from_entry(
        py: Python<'_>,
        entry: &Entry,
        file: &str,
        (clock, rng): (Option<Bound<'_, PyAny>>, Option<Bound<'_, PyAny>>),
        stores: Option<&HashMap<String, Py<Store>>>,
    ) -> PyResult<Policy> {
        let timing = (
            Clock(super::callable("clock", clock)?),
            Random::new(py, rng)?,
        );
        Policy::from_layer(py, (&entry.name, &entry.stack), file, timing, stores)
    }

    /// A policy format stack, read by the engine's reader; its state built from its configs, and
    /// a `Fleet` scope's from the store `stores` names.
    fn from_layer<D: Clone>(
        py: Python<'_>,
        entry: (&str, &Layer<D>),
        file: &str,
        (clock, rng): (Clock, Random),
        stores: Option<&HashMap<String, Py<Store>>>,
    ) -> PyResult<Policy> {
        let (name, stack) = entry;
        refuse_timeout_dist(stack, "stack", file)?;
        let s = match stores {
            Some(_) => Stack::from_layer_with_store(stack),
            None => Stack::from_layer(stack),
        }
        .map_err(|e| PyValueError::new_err(format!("{file}: {e}")))?;
        let fleet = match stores {
            Some(stores) if stack.fleet("stack").is_some() => {
                Some(super::fleet::gates(name, stack, file, stores)?)
            }
            _ => None,
        };
        let at = |what: &str, e: reliable_core::ConfigError| {
            PyValueError::new_err(format!("{file}: the {what}: {e}"))
        };
        // Each layer's state: the policy's (`Shared`), or a template each client copies
        // (`PerClient`); a `Fleet` scope's, the store's through `fleet`.
        let (breaker, own_breaker) = match s.breaker {
            // Kept in the fleet's store: `fleet` decides.
            Some((_, Scope::Fleet(_))) => (None, None),
            // With a jittered open time, seeded from `rng` (its first draw).
            Some((config, scope)) if policy_wide(&scope) => {
                let seed = if config.open.jitter > 0.0 {
                    rng.sample(py)?
                } else {
                    0
                };
                let b = Py::new(py, policy_breaker(config, &clock, seed, file)?)?;
                (Some(b), None)
            }
            // Checked now (each client's is built, and seeded, when the client is made).
            Some((config, _)) => {
                policy_breaker(config, &clock, 0, file)?;
                (None, Some(config))
            }
            None => (None, None),
        };
        let (budget, own_budget) = match s.budget {
            Some((_, Scope::Fleet(_))) => (None, None),
            Some((config, scope)) => {
                let b = AnyBudget::from_config(config).map_err(|e| at("Retry's budget", e))?;
                if policy_wide(&scope) {
                    let inner = Mutex::new(b);
                    (Some(Py::new(py, RetryBudget { inner })?), None)
                } else {
                    (None, Some(b))
                }
            }
            None => (None, None),
        };
        let (ledger, own_ledger) = split(
            s.ledger
                .map(|(c, scope)| ExtraLedger::from_config(c).map(|l| (l, policy_wide(&scope))))
                .transpose()
                .map_err(|e| at("Ledger", e))?,
        );
        let (throttle, own_throttle) = split(
            s.throttle
                .map(|(c, scope)| {
                    ThrottlePolicy::new(c)
                        .and_then(AdaptiveThrottle::new)
                        .map(|t| (t, policy_wide(&scope)))
                })
                .transpose()
                .map_err(|e| at("Throttle", e))?,
        );
        let (hedger, own_hedger) = split(
            s.hedge
                .map(|(c, scope)| {
                    HedgePolicy::new(c).map(|h| (Hedger::new(h), policy_wide(&scope)))
                })
                .transpose()
                .map_err(|e| at("Hedge", e))?,
        );
        let (limiter, own_limiter) = split(
            s.limit
                .map(|(c, scope)| {
                    LimiterPolicy::new(c).map(|l| (Limiter::new(l), policy_wide(&scope)))
                })
                .transpose()
                .map_err(|e| at("Limit", e))?,
        );
        let (rate, own_rate) = split(
            s.rate
                .map(|(c, scope)| {
                    RatePolicy::new(c).map(|r| (RateLimiter::new(r), policy_wide(&scope)))
                })
                .transpose()
                .map_err(|e| at("RateLimit", e))?,
        );
        Ok(Policy {
            random_backoff: random_backoff(s.plan.retry()),
            plan: s.plan,
            breaker,
            budget,
            ledger,
            throttle,
            hedger,
            limiter,
            rate,
            fleet: fleet.map(Arc::new),
            clock,
            rng: Arc::new(rng),
            name: s.downstream,
            per_client: Some(PerClient {
                breaker: own_breaker,
                budget: own_budget,
                ledger: own_ledger,
                throttle: own_throttle,
                hedger: own_hedger,
                limiter: own_limiter,
                rate: own_rate,
                file: file.to_owned(),
            }),
        })
    }

    /// A client of this policy: what one function decorated with it runs. Its `Shared` (and
    /// `Fleet`) layers are this policy's state; its `PerClient` layers are its own, fresh (a
    /// jittered breaker seeded with the next draw of `rng`, as the policy's own was when read).
    /// A client, or the seed's policy, is its own client: the same object.
    fn client_of(slf: &Bound<'_, Self>) -> PyResult<Py<Policy>> {
        let py = slf.py();
        let p = slf.get();
        let Some(own) = &p.per_client else {
            return Ok(slf.clone().unbind());
        };
        let breaker = match (&p.breaker, own.breaker) {
            (Some(b), _) => Some(b.clone_ref(py)),
            (None, Some(config)) => {
                let seed = if config.open.jitter > 0.0 {
                    p.rng.sample(py)?
                } else {
                    0
                };
                Some(Py::new(
                    py,
                    policy_breaker(config, &p.clock, seed, &own.file)?,
                )?)
            }
            (None, None) => None,
        };
        let budget = match (&p.budget, &own.budget) {
            (Some(b), _) => Some(b.clone_ref(py)),
            (None, Some(b)) => Some(Py::new(
                py,
                RetryBudget {
                    inner: Mutex::new(b.clone()),
                },
            )?),
            (None, None) => None,
        };
        fn either<T: Clone>(
            shared: &Option<Arc<Mutex<T>>>,
            own: &Option<T>,
        ) -> Option<Arc<Mutex<T>>> {
            shared
                .clone()
                .or_else(|| own.clone().map(|t| Arc::new(Mutex::new(t))))
        }
        let client = Policy {
            plan: p.plan,
            breaker,
            budget,
            ledger: either(&p.ledger, &own.ledger),
            throttle: either(&p.throttle, &own.throttle),
            hedger: either(&p.hedger, &own.hedger),
            limiter: either(&p.limiter, &own.limiter),
            rate: either(&p.rate, &own.rate),
            fleet: p.fleet.clone(),
            clock: p.clock.clone_ref(py),
            rng: p.rng.clone(),
            random_backoff: p.random_backoff,
            name: p.name.clone(),
            per_client: None,
        };
        Py::new(py, client)
    }
}

fn random_backoff(retry: &RetryPolicy) -> bool {
    [
        ErrorClass::Transient,
        ErrorClass::Throttled { retry_after: None },
    ]
    .into_iter()
    .any(|c| retry.backoff_for(c).is_random())
}

/// `timeout_dist` is the simulator's (a crowd of callers): a client has one timeout.
fn refuse_timeout_dist<D>(layer: &Layer<D>, path: &str, file: &str) -> PyResult<()> {
    match layer {
        Layer::Call {
            timeout_dist: Some(_),
            ..
        } => Err(PyValueError::new_err(format!(
            "{file}: {path}: a timeout_dist draws a timeout per simulated caller: a client has one `timeout`"
        ))),
        Layer::Call { .. } => Ok(()),
        Layer::Breaker { inner, .. }
        | Layer::Retry { inner, .. }
        | Layer::Throttle { inner, .. }
        | Layer::Ledger { inner, .. }
        | Layer::Limit { inner, .. }
        | Layer::RateLimit { inner, .. }
        | Layer::Hedge { inner, .. } => refuse_timeout_dist(inner, &format!("{path}.inner"), file),
        // The engine's reader refuses the others with their path.
        _ => Ok(()),
    }
}

/// A policy's breaker config in the lock-free breaker the seed's `CircuitBreaker` uses.
fn policy_breaker(
    config: BreakerConfig,
    clock: &Clock,
    seed: u64,
    file: &str,
) -> PyResult<CircuitBreaker> {
    let fail =
        |e: reliable_core::ConfigError| PyValueError::new_err(format!("{file}: the Breaker: {e}"));
    let policy = BreakerPolicy::new(config).map_err(fail)?;
    let storage = Storage::with_storage(policy)
        .map_err(fail)?
        .observe(Queue::default())
        .with_seed(seed);
    Python::attach(|py| {
        Ok(CircuitBreaker {
            inner: Box::new(storage),
            clock: clock.clone_ref(py),
            on_transition: None,
        })
    })
}

/// A policy entry `{"name": .., "stack": ..}` (or `(name: .., stack: ..)` in RON).
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    name: String,
    stack: Layer<serde::de::IgnoredAny>,
}

/// The policies of a scenario file (`Scenario(..)` or a list of them), each with its
/// scenario's name, the rest skipped.
struct ScenarioFile(Vec<(String, Entry)>);

impl<'de> serde::Deserialize<'de> for ScenarioFile {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(FileVisitor)
    }
}

struct FileVisitor;

impl<'de> serde::de::Visitor<'de> for FileVisitor {
    type Value = ScenarioFile;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a scenario `Scenario(..)` or a list `[Scenario(..), ...]`")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<ScenarioFile, A::Error> {
        let (mut name, mut policies) = (String::new(), Vec::new());
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "policies" => policies = map.next_value::<Vec<Entry>>()?,
                "name" => name = map.next_value()?,
                _ => {
                    map.next_value::<serde::de::IgnoredAny>()?;
                }
            }
        }
        Ok(ScenarioFile(
            policies.into_iter().map(|p| (name.clone(), p)).collect(),
        ))
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<ScenarioFile, A::Error> {
        let mut all = Vec::new();
        while let Some(ScenarioFile(p)) = seq.next_element::<ScenarioFile>()? {
            all.extend(p);
        }
        Ok(ScenarioFile(all))
    }
}

fn ron_options() -> ron::Options {
    use ron::extensions::Extensions;
    ron::Options::default()
        .with_default_extension(Extensions::IMPLICIT_SOME | Extensions::UNWRAP_VARIANT_NEWTYPES)
        .with_recursion_limit(128)
}

fn ron_error(e: ron::error::SpannedError, file: &str) -> PyErr {
    let message = e.code.to_string().trim().replace('\n', " ");
    PyValueError::new_err(format!(
        "{file}:{}:{}: {message}",
        e.span.start.line.max(1),
        e.span.start.col.max(1)
    ))
}

fn json_error(e: serde_json::Error, file: &str) -> PyErr {
    PyValueError::new_err(format!(
        "{file}:{}:{}: {e}",
        e.line().max(1),
        e.column().max(1)
    ))
}

fn bounded(text: &str, file: &str) -> PyResult<()> {
    if text.len() > MAX_TEXT {
        return Err(PyValueError::new_err(format!(
            "{file}: {} bytes: a policy file is at most {MAX_TEXT}",
            text.len()
        )));
    }
    Ok(())
}

/// The entry called `name` (or the only one) among a scenario file's policies, in the scenario
/// called `scenario` when given.
fn pick(text: &str, file: &str, name: Option<&str>, scenario: Option<&str>) -> PyResult<Entry> {
    let ScenarioFile(all) = ron_options()
        .from_str(text)
        .map_err(|e| ron_error(e, file))?;
    let mut all: Vec<(String, Entry)> = all
        .into_iter()
        .filter(|(s, _)| scenario.is_none_or(|want| want == s))
        .collect();
    let names: Vec<String> = all.iter().map(|(_, p)| p.name.clone()).take(20).collect();
    let found: Vec<usize> = all
        .iter()
        .enumerate()
        .filter(|(_, (_, p))| name.is_none_or(|n| p.name == n))
        .map(|(i, _)| i)
        .collect();
    match found.as_slice() {
        [i] => Ok(all.swap_remove(*i).1),
        [] => Err(PyValueError::new_err(match name {
            Some(n) => format!("{file}: no policy named {n:?}: expected one of {names:?}"),
            None => format!("{file}: no policies in the file"),
        })),
        several => {
            let scenarios: Vec<&str> = several
                .iter()
                .filter_map(|i| all.get(*i).map(|(s, _)| s.as_str()))
                .collect();
            Err(PyValueError::new_err(match name {
                Some(n) => format!(
                    "{file}: the scenarios {scenarios:?} each have a policy named {n:?}: name the scenario with scenario="
                ),
                None => format!("{file}: several policies ({names:?}): name one with name="),
            }))
        }
    }
}

#[pymethods]
impl Policy {
    /// A policy entry written in JSON (serde's shape of the policy format:
    /// `{"name": .., "stack": {"Retry": {"policy": .., "inner": {"Call": {"downstream": "api"}}}}}`).
    ///
    /// `stores` (`{"redis": Store.redis(url)}`) holds the stores a `Fleet` scope names; without
    /// it, a `Fleet` scope is refused.
    #[staticmethod]
    #[pyo3(signature = (text, *, file = "<json>", clock = None, rng = None, stores = None))]
    fn from_json(
        py: Python<'_>,
        text: &str,
        file: &str,
        clock: Option<Bound<'_, PyAny>>,
        rng: Option<Bound<'_, PyAny>>,
        stores: Option<HashMap<String, Py<Store>>>,
    ) -> PyResult<Policy> {
        bounded(text, file)?;
        let entry: Entry = serde_json::from_str(text).map_err(|e| json_error(e, file))?;
        Policy::from_entry(py, &entry, file, (clock, rng), stores.as_ref())
    }

    /// A policy entry `(name: .., stack: ..)` written in RON, or the policy called `name` in a
    /// scenario file (`Scenario(..)` or a list of them: `scenario` picks one), as the simulator
    /// reads them.
    #[staticmethod]
    #[pyo3(signature = (text, name = None, *, scenario = None, file = "<ron>", clock = None, rng = None, stores = None))]
    #[allow(clippy::too_many_arguments)]
    fn from_ron(
        py: Python<'_>,
        text: &str,
        name: Option<&str>,
        scenario: Option<&str>,
        file: &str,
        clock: Option<Bound<'_, PyAny>>,
        rng: Option<Bound<'_, PyAny>>,
        stores: Option<HashMap<String, Py<Store>>>,
    ) -> PyResult<Policy> {
        bounded(text, file)?;
        // A scenario file names its policies; a policy entry is one.
        let entry = if text.contains("policies") {
            pick(text, file, name, scenario)?
        } else {
            let entry: Entry = ron_options()
                .from_str(text)
                .map_err(|e| ron_error(e, file))?;
            if let Some(n) = name.filter(|n| *n != entry.name) {
                return Err(PyValueError::new_err(format!(
                    "{file}: the policy is named {:?}, not {n:?}",
                    entry.name
                )));
            }
            entry
        };
        Policy::from_entry(py, &entry, file, (clock, rng), stores.as_ref())
    }

    /// Reads a policy file: JSON (`.json`) or RON (anything else), a policy entry or a scenario
    /// file (then `name` picks the policy, and `scenario` the scenario in a list of them).
    #[staticmethod]
    #[pyo3(signature = (path, name = None, *, scenario = None, clock = None, rng = None, stores = None))]
    #[allow(clippy::too_many_arguments)]
    fn from_file(
        py: Python<'_>,
        path: std::path::PathBuf,
        name: Option<&str>,
        scenario: Option<&str>,
        clock: Option<Bound<'_, PyAny>>,
        rng: Option<Bound<'_, PyAny>>,
        stores: Option<HashMap<String, Py<Store>>>,
    ) -> PyResult<Policy> {
        let file = path.display().to_string();
        let size = std::fs::metadata(&path)
            .map_err(|e| PyValueError::new_err(format!("{file}: {e}")))?
            .len();
        if size > MAX_TEXT as u64 {
            return Err(PyValueError::new_err(format!(
                "{file}: {size} bytes: a policy file is at most {MAX_TEXT}"
            )));
        }
        let text = std::fs::read_to_string(&path)
            .map_err(|e| PyValueError::new_err(format!("{file}: {e}")))?;
        if path.extension().is_some_and(|e| e == "json") {
            Policy::from_json(py, &text, &file, clock, rng, stores)
        } else {
            Policy::from_ron(py, &text, name, scenario, &file, clock, rng, stores)
        }
    }

    /// The breaker every call through the policy passes: a `Shared` breaker (or a client's own).
    /// `None` when there is none, when it is `PerClient` (each function decorated with the policy
    /// has its own) and when it is the fleet's (`fleet_state`).
    #[getter]
    fn breaker(&self, py: Python<'_>) -> Option<Py<CircuitBreaker>> {
        self.breaker.as_ref().map(|b| b.clone_ref(py))
    }

    /// The fleet's breaker state as this process last saw it in the store ("closed", "open",
    /// "half_open"), or None: no `Fleet` breaker, or no answer from the store yet.
    #[getter]
    fn fleet_state(&self) -> Option<&'static str> {
        let state = self.fleet.as_ref()?.breaker()?.fleet_state()?;
        Some(super::state_name(state))
    }

    /// The downstream the policy's `Call` names (empty for the seed's arguments).
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// Whether a call may be sent twice at once (a hedge): the caller must run copies
    /// concurrently.
    #[getter]
    fn hedges(&self) -> bool {
        self.hedger.is_some()
            || self
                .per_client
                .as_ref()
                .is_some_and(|own| own.hedger.is_some())
    }

    /// A client of the policy: the policy one decorated function runs, its `Shared` layers this
    /// policy's state and its `PerClient` layers its own. A client, or the seed's policy, is its
    /// own client.
    fn _client(slf: &Bound<'_, Self>) -> PyResult<Py<Policy>> {
        Policy::client_of(slf)
    }

    /// Starts one call now: poll the returned run for what to do. A policy read from a file is
    /// started through a client of it (`_client()`): it holds no `PerClient` state of its own.
    #[pyo3(signature = (listen = false))]
    fn start(slf: &Bound<'_, Self>, listen: bool) -> PyResult<Run> {
        let py = slf.py();
        if slf.get().per_client.is_some() {
            return Err(PyTypeError::new_err(
                "a Policy read from a file runs through the functions decorated with it \
                 (reliable(fn, policy=...)), each a client of it: start a call on policy._client()",
            ));
        }
        let now = slf.get().clock.now(py)?;
        let layers = Layers {
            policy: slf.clone().unbind(),
            plan: slf.get().plan,
            events: Mutex::new(Vec::new()),
            error: Mutex::new(None),
        };
        let call = CallState::start(&layers.plan, &layers, now);
        let mut run = Run {
            layers,
            call,
            over: false,
            pending: Vec::new(),
            listen,
            waits: Vec::new(),
        };
        run.after(py)?;
        Ok(run)
    }

    fn __repr__(&self) -> String {
        format!("Policy({:?})", self.plan)
    }
}

/// What a call reports as it goes.
#[derive(Debug)]
enum Event {
    Note(Note),
    Transition(Transition),
}

/// One call's view of its policy: the shared state, and the call's own events.
#[derive(Debug)]
struct Layers {
    policy: Py<Policy>,
    plan: Plan,
    events: Mutex<Vec<Event>>,
    /// The first error the user's rng raised inside a step (reported after it).
    error: Mutex<Option<PyErr>>,
}

impl Layers {
    fn p(&self) -> &Policy {
        self.policy.get()
    }

    /// The breaker's transitions since it was last looked at, in order with the call's notes.
    fn transitions(&self, b: &CircuitBreaker) {
        let items = std::mem::take(&mut *b.inner.observer().lock());
        let mut events = lock(&self.events);
        events.extend(items.into_iter().map(Event::Transition));
    }
}

impl Shared for Layers {
    fn breaker_acquire(&self, now: Instant) -> Option<Result<Permit, Rejection>> {
        let Some(b) = self.p().breaker.as_ref() else {
            return self.p().fleet.as_ref()?.acquire(now);
        };
        let b = b.get();
        let r = b.inner.try_acquire(now);
        self.transitions(b);
        Some(r)
    }
    fn breaker_record(&self, permit: Permit, outcome: Outcome, now: Instant) {
        match (&self.p().breaker, &self.p().fleet) {
            (Some(b), _) => {
                let b = b.get();
                b.inner.record(permit, outcome, now);
                self.transitions(b);
            }
            (None, Some(f)) => f.record(permit, outcome),
            (None, None) => {}
        }
    }
    fn breaker_refuses(&self, now: Instant) -> Option<Duration> {
        let Some(b) = self.p().breaker.as_ref() else {
            return self.p().fleet.as_ref()?.refuses();
        };
        let b = b.get();
        match b.inner.retry_after(now) {
            Some(after) => Some(after),
            None if b.inner.state(now) == State::ForcedOpen => Some(Duration::MAX),
            None => None,
        }
    }
    fn budget<R>(&self, f: impl FnOnce(&mut dyn Budget) -> R) -> R {
        let p = self.p();
        match (&p.ledger, &p.budget) {
            (Some(l), _) => f(&mut *lock(l)),
            (None, Some(b)) => f(&mut *lock(&b.get().inner)),
            (None, None) => match p.fleet.as_ref().and_then(|f| f.budget()) {
                Some(b) => f(&mut *lock(b)),
                None => f(&mut Unlimited),
            },
        }
    }
    fn throttle<R>(
        &self,
        f: impl FnOnce(&mut dyn reliable_core::throttle::AnyThrottle) -> R,
    ) -> Option<R> {
        self.p().throttle.as_ref().map(|t| f(&mut *lock(t)))
    }
    fn ledger<R>(
        &self,
        f: impl FnOnce(&mut dyn reliable_core::ledger::AnyLedger) -> R,
    ) -> Option<R> {
        self.p().ledger.as_ref().map(|l| f(&mut *lock(l)))
    }
    fn hedger<R>(&self, f: impl FnOnce(&mut Hedger) -> R) -> Option<R> {
        self.p().hedger.as_ref().map(|h| f(&mut lock(h)))
    }
    fn limiter<R>(&self, f: impl FnOnce(&mut Limiter) -> R) -> Option<R> {
        self.p().limiter.as_ref().map(|l| f(&mut lock(l)))
    }
    fn rate<R>(&self, f: impl FnOnce(&mut RateLimiter) -> R) -> Option<R> {
        self.p().rate.as_ref().map(|r| f(&mut lock(r)))
    }
    fn sample(&self, what: SampleFor) -> u64 {
        let p = self.p();
        if what == SampleFor::Backoff && !p.random_backoff {
            return 0;
        }
        // Every step runs inside a method called from Python: the interpreter is attached.
        Python::attach(|py| match p.rng.sample(py) {
            Ok(u) => u,
            Err(e) => {
                lock(&self.error).get_or_insert(e);
                0
            }
        })
    }
    fn note(&self, note: Note) {
        lock(&self.events).push(Event::Note(note));
    }
}

/// One call in progress (from `Policy.start()`): hand it what happens with `answer`, `timeout`,
/// `dropped`, `tick` and `cancel`, then do what `poll()` says, and wake it after `wait()`
/// seconds. Dropped unfinished, it is cancelled: what its copies hold goes back.
#[pyclass(module = "reliable._core")]
#[derive(Debug)]
pub(crate) struct Run {
    /// The policy view the call draws from.
    layers: Layers,
    /// The call, stepped with `layers` (the engine's borrow-free form).
    call: CallState<4>,
    over: bool,
    /// Events taken from the call, waiting for `events()` (kept only when listened to).
    pending: Vec<Event>,
    listen: bool,
    /// The retry waits decided since the last `poll()`, in seconds.
    waits: Vec<f64>,
}

fn class_name(class: Option<ErrorClass>) -> &'static str {
    class.map_or("ok", ErrorClass::name)
}

/// Who refused, as the trace names it.
fn by(r: Refusal) -> &'static str {
    match r {
        Refusal::Breaker(_) => "breaker",
        Refusal::Throttle(_) => "throttle",
        Refusal::Ledger(_) => "ledger",
        Refusal::Limit(_) | Refusal::Rate(_) => "limiter",
    }
}

/// Why a call was refused, as `CallRecord.reason` names it.
fn refusal_reason(r: Refusal) -> &'static str {
    match r {
        Refusal::Breaker(_) => "breaker-open",
        Refusal::Throttle(_) => "throttled",
        Refusal::Ledger(_) => "ledger",
        Refusal::Limit(_) => "limit",
        Refusal::Rate(_) => "rate-limit",
    }
}

/// A refusal's wait in seconds: `None` when not known (half-open probes full), `-1` never
/// (forced open).
fn refusal_after(r: Refusal) -> Option<f64> {
    match r {
        Refusal::Breaker(RejectReason::ForcedOpen) => Some(-1.0),
        r => r.retry_after().map(|d| {
            if d == Duration::MAX {
                -1.0
            } else {
                d.as_secs_f64()
            }
        }),
    }
}

/// The error class the Python side names (`classify`'s kinds), with the server's delay.
fn error_class(kind: &str, retry_after: Option<f64>) -> PyResult<ErrorClass> {
    Ok(match kind {
        "transient" => ErrorClass::Transient,
        "timeout" => ErrorClass::Timeout,
        "throttled" => ErrorClass::Throttled {
            retry_after: retry_after
                .map(|s| super::seconds("retry_after", s, false))
                .transpose()?,
        },
        "fatal" => ErrorClass::Fatal,
        "dont_retry" | "dont-retry" => ErrorClass::DontRetry,
        other => {
            return Err(bad_value(
                "kind",
                format!("'{other}' is not transient, timeout, throttled, fatal or dont_retry"),
            ));
        }
    })
}

impl Run {
    fn now(&self, py: Python<'_>) -> PyResult<Instant> {
        self.layers.p().clock.now(py)
    }

    fn handle(&mut self, py: Python<'_>, input: Input) -> PyResult<()> {
        let now = self.now(py)?;
        self.call
            .handle(&self.layers.plan, &self.layers, now, input);
        self.after(py)
    }

    /// After a step: the breaker's transitions to its hook, an rng error raised.
    fn after(&mut self, py: Python<'_>) -> PyResult<()> {
        let owner = &self.layers;
        let new = std::mem::take(&mut *lock(&owner.events));
        if let Some(b) = &owner.p().breaker {
            let b = b.get();
            if let Some(hook) = &b.on_transition {
                for e in &new {
                    if let Event::Transition(t) = e {
                        let args = (
                            super::state_name(t.from),
                            super::state_name(t.to),
                            super::as_seconds(t.at),
                        );
                        if let Err(err) = hook.call1(py, args) {
                            err.write_unraisable(py, Some(hook.bind(py)));
                        }
                    }
                }
            }
        }
        let error = lock(&owner.error).take();
        for e in &new {
            if let Event::Note(Note::Retry { after, .. }) = e {
                self.waits.push(after.as_secs_f64());
            }
        }
        if self.listen {
            self.pending.extend(new);
        }
        match error {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

#[pymethods]
impl Run {
    /// Copy `n` answered: `kind` `None` for a success, else its error class (`classify`'s kinds)
    /// and the server's delay in seconds.
    #[pyo3(signature = (n, kind = None, retry_after = None))]
    fn answer(
        &mut self,
        py: Python<'_>,
        n: u32,
        kind: Option<&str>,
        retry_after: Option<f64>,
    ) -> PyResult<()> {
        let class = kind.map(|k| error_class(k, retry_after)).transpose()?;
        self.handle(py, Input::Classified { n, class })
    }

    /// Copy `n` was lost without an answer.
    fn dropped(&mut self, py: Python<'_>, n: u32) -> PyResult<()> {
        self.handle(py, Input::Dropped { n })
    }

    /// Time passed: copies past their deadline time out, a hedge due is sent, a wait ends.
    fn tick(&mut self, py: Python<'_>) -> PyResult<()> {
        self.handle(py, Input::Tick)
    }

    /// The wait the call asked for is over (the caller slept it, with its own `sleep`): time
    /// passes to the wake-up, even if the clock says less.
    fn woke(&mut self, py: Python<'_>) -> PyResult<()> {
        let now = self.now(py)?;
        let at = self.call.poll_timeout(&self.layers);
        let now = at.map_or(now, |at| at.max(now));
        self.call
            .handle(&self.layers.plan, &self.layers, now, Input::Tick);
        self.after(py)
    }

    /// The caller gives up on the call: copies in flight are cancelled, holdings go back.
    fn cancel(&mut self, py: Python<'_>) -> PyResult<()> {
        self.handle(py, Input::Cancel)
    }

    /// What to do now, in order: `("retry", seconds)` (a retry's wait was decided: the call
    /// waits it, or sends at once when 0), `("send", n, timeout_seconds_or_None, hedge)`, `("cancel", n,
    /// why)` (`lost`, `timed-out`, `call-over`), `("done", result, detail, attempts, last_n,
    /// retry_after, reason)`: `result` `ok` (`detail` the winning copy), `gave-up` (`detail`
    /// the retry policy's reason), `refused` (`detail` who: `breaker`, `throttle`, `ledger`,
    /// `limiter`; `retry_after` when it would admit, `-1` never) or `cancelled`.
    fn poll<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        // The clock is read only for a copy with a deadline (the time left is from now), once.
        let mut now = None;
        let out = PyList::empty(py);
        for wait in std::mem::take(&mut self.waits) {
            out.append((intern!(py, "retry"), wait))?;
        }
        while let Some(action) = self.call.poll() {
            let item: Bound<'py, PyTuple> = match action {
                Action::Send { n, deadline, hedge } => {
                    let left = match deadline {
                        Some(d) => {
                            let now = match now {
                                Some(t) => t,
                                None => *now.insert(self.now(py)?),
                            };
                            Some(d.saturating_duration_since(now).as_secs_f64())
                        }
                        None => None,
                    };
                    (intern!(py, "send"), n, left, hedge).into_pyobject(py)?
                }
                Action::Cancel { n, why } => {
                    let why = match why {
                        Cancelled::Lost => "lost",
                        Cancelled::TimedOut => "timed-out",
                        Cancelled::CallOver => "call-over",
                    };
                    (intern!(py, "cancel"), n, why).into_pyobject(py)?
                }
                Action::Done(end) => {
                    self.over = true;
                    let last_n = end.last.map(|(n, _)| n);
                    // A successful end's names are interned: it makes no new string.
                    let name = |s: &'static str| PyString::new(py, s);
                    let (result, detail, after, reason): (
                        Bound<'py, PyString>,
                        Py<PyAny>,
                        Option<f64>,
                        Bound<'py, PyString>,
                    ) = match end.result {
                        Ended::Ok { n } => (
                            intern!(py, "ok").clone(),
                            n.into_pyobject(py)?.into_any().unbind(),
                            None,
                            intern!(py, "").clone(),
                        ),
                        Ended::GaveUp(r) => (
                            name("gave-up"),
                            r.name().into_pyobject(py)?.into_any().unbind(),
                            None,
                            name(r.name()),
                        ),
                        Ended::Refused(r) => (
                            name("refused"),
                            by(r).into_pyobject(py)?.into_any().unbind(),
                            refusal_after(r),
                            name(refusal_reason(r)),
                        ),
                        Ended::Cancelled => (name("cancelled"), py.None(), None, name("cancelled")),
                    };
                    (
                        intern!(py, "done"),
                        result,
                        detail,
                        end.attempts,
                        last_n,
                        after,
                        reason,
                    )
                        .into_pyobject(py)?
                }
            };
            out.append(item)?;
        }
        Ok(out)
    }

    /// Seconds until the call must be woken with `tick()`, or `None`.
    fn wait(&self, py: Python<'_>) -> PyResult<Option<f64>> {
        let at = self.call.poll_timeout(&self.layers);
        match at {
            None => Ok(None),
            Some(at) => {
                let now = self.now(py)?;
                Ok(Some(at.saturating_duration_since(now).as_secs_f64()))
            }
        }
    }

    /// The decisions taken since the last look, in order: `(event, fields)` with events named
    /// as the conformance trace names them: `breaker` (`from`, `to`), `answer` (`n`, `class`,
    /// `accepted`), `refused` (`by`), `hedge` (`n`), `no-hedge` (`by`), `cancelled` (`n`: lost a
    /// race), `limit` (`from`, `to`), `retry` (`delay`, seconds), `give-up` (`reason`).
    fn events<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let out = PyList::empty(py);
        let items = std::mem::take(&mut self.pending);
        for e in items {
            let d = PyDict::new(py);
            let name = match e {
                Event::Transition(t) => {
                    d.set_item("from", t.from.name())?;
                    d.set_item("to", t.to.name())?;
                    "breaker"
                }
                Event::Note(note) => match note {
                    Note::Ended { n, class } => {
                        d.set_item("n", n)?;
                        d.set_item("class", class_name(class))?;
                        let accepted = class.is_none_or(|c| c.consequences().accepted);
                        d.set_item("accepted", accepted)?;
                        "answer"
                    }
                    Note::Refused(r) => {
                        d.set_item("by", by(r))?;
                        "refused"
                    }
                    Note::Hedge { n } => {
                        d.set_item("n", n)?;
                        "hedge"
                    }
                    Note::NoHedge(r) => {
                        d.set_item("by", by(r))?;
                        "no-hedge"
                    }
                    Note::Lost { n } => {
                        d.set_item("n", n)?;
                        "cancelled"
                    }
                    Note::Limit { from, to } => {
                        d.set_item("from", from)?;
                        d.set_item("to", to)?;
                        "limit"
                    }
                    Note::Retry { after, .. } => {
                        d.set_item("delay", after.as_secs_f64())?;
                        d.set_item("delay_ms", after.as_millis())?;
                        "retry"
                    }
                    Note::GaveUp(r) => {
                        d.set_item("reason", r.name())?;
                        "give-up"
                    }
                    Note::Ledger { .. } => continue,
                },
            };
            out.append((name, d))?;
        }
        Ok(out)
    }

    /// Copies sent so far.
    #[getter]
    fn attempts(&self) -> u32 {
        self.call.attempts()
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        if self.over || self.call.is_done() {
            return;
        }
        // `Instant::ZERO` reads as the latest time each layer has seen.
        self.call.handle(
            &self.layers.plan,
            &self.layers,
            Instant::ZERO,
            Input::Cancel,
        );
        while self.call.poll().is_some() {}
    }
}

/// A Python `rng` that is neither callable nor a `random.Random`: refused by name.
pub(crate) fn rng_error(got: &Bound<'_, PyAny>) -> PyErr {
    PyTypeError::new_err(format!(
        "rng: must be a callable returning a float in [0, 1), a random.Random, or None, got {}",
        got.get_type()
            .name()
            .map_or_else(|_| "?".to_string(), |n| n.to_string())
    ))
}

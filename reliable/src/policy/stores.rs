//! A policy's `Fleet` scopes, given the stores they name (feature `fleet`): the same policy file
//! that shares a breaker through the simulator's `stores` shares it through a service's Redis.

use std::fmt;
use std::sync::Arc;

use reliable_core::breaker::BreakerPolicy;
use reliable_core::budget::BudgetConfig;
use reliable_core::policy::{FleetMode, FleetScope, Scope};

use super::{PolicyError, Route};
use crate::fleet::{
    BreakerSpec, BudgetSpec, EventSink, FleetBreaker, FleetBudget, FleetConfig, Mode,
    OnStoreFailure, Store,
};

/// Why a `Reliable` refuses `mode: Exact` (see [`Route::fleet_builder`]).
pub const FLEET_EXACT: &str = "mode Exact: a Reliable's call engine decides at once, on a view of the store refreshed in the background, never on a round trip per decision as the simulator's Exact does; expected mode: Cached(refresh: ..) (or drive reliable::fleet's FleetBreaker or FleetBudget around the call yourself, one round trip each)";

/// Grants a process takes at once from a fleet budget, unless [`Stores::budget_chunk`] says
/// otherwise (see [`FleetBudget::new`]).
pub const DEFAULT_BUDGET_CHUNK: u32 = 4;

/// The stores a service's policies name in their `Fleet` scopes (`scope: Fleet(store:
/// "redis", ..)`), by those names. Given to [`Route::fleet_builder`], they put a [`FleetBreaker`]
/// where the policy scopes a `Breaker` `Fleet` and a [`FleetBudget`] where it scopes a `Retry`'s
/// ratio budget `Fleet`, each with the scope's mode, wait and behaviour on a store failure.
///
/// The fleet's state is named after the route's downstream: the breaker of the calls to
/// `orders` is `orders:breaker` in its store's namespace, their budget `orders:budget`. Every
/// process whose policy calls `orders` with such a scope on that store shares it, which is the
/// point; policies that must not share (two services, a canary) use stores with different
/// namespaces.
///
/// ```
/// use std::sync::Arc;
/// use reliable::fleet::MemoryStore;
/// use reliable::policy::{Plan, Stores};
///
/// let text = r#"(name: "fleet breaker", stack: Breaker(
///     config: (failure_rate: 0.5, minimum_calls: 20, window: Count(calls: 64)),
///     scope: Fleet(store: "redis", mode: Cached(refresh: "1s"), wait: "5ms"),
///     inner: Call(downstream: "orders", timeout: "500ms")))"#;
/// let plan = Plan::from_ron(text, "fleet.ron")?;
/// // Without the store the policy names, a process would keep a breaker of its own: refused.
/// assert!(plan.builder().is_err());
/// # tokio::runtime::Builder::new_current_thread().enable_time().build()?.block_on(async {
/// let stores = Stores::new().add("redis", Arc::new(MemoryStore::new("shop")));
/// let orders = plan.fleet_builder(&stores)?.build()?; // one breaker for every instance
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # })?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Default)]
pub struct Stores {
    stores: Vec<(String, Arc<dyn Store>)>,
    events: Option<EventSink>,
    budget_chunk: Option<u32>,
}

impl fmt::Debug for Stores {
    // The names only: a store may hold a URL with credentials.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Stores")
            .field("names", &self.names().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl Stores {
    /// No stores.
    pub fn new() -> Self {
        Self::default()
    }

    /// `store` under `name`, the name the policies' `Fleet(store: ..)` give it (replacing a store
    /// added under that name before).
    pub fn add(mut self, name: &str, store: Arc<dyn Store>) -> Self {
        self.stores.retain(|(n, _)| n != name);
        self.stores.push((name.to_string(), store));
        self
    }

    /// Tells `events` when a store goes down and comes back, for every breaker and budget built.
    pub fn events(mut self, events: EventSink) -> Self {
        self.events = Some(events);
        self
    }

    /// Grants a process takes at once from a fleet budget (at least 1; default
    /// [`DEFAULT_BUDGET_CHUNK`]): see [`FleetBudget::new`].
    pub fn budget_chunk(mut self, chunk: u32) -> Self {
        self.budget_chunk = Some(chunk.max(1));
        self
    }

    /// The stores' names, in the order added.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.stores.iter().map(|(n, _)| n.as_str())
    }

    /// The store `scope` names, for a layer of `route` whose scope is at `field`; refused in
    /// `Mode::Exact` (see [`Route::fleet_builder`]).
    fn store(
        &self,
        scope: &FleetScope,
        field: &str,
        route: &Route,
    ) -> Result<Arc<dyn Store>, PolicyError> {
        if matches!(scope.mode, FleetMode::Exact) {
            return Err(route.refuse_at(&format!("{field}.mode"), FLEET_EXACT));
        }
        let name = scope.store.as_str();
        match self.stores.iter().find(|(n, _)| n == name) {
            Some((_, store)) => Ok(store.clone()),
            None => Err(route.refuse_at(
                &format!("{field}.store"),
                &format!(
                    "no store named {name:?} was given: expected one of {:?} (Stores::add)",
                    self.names().collect::<Vec<_>>()
                ),
            )),
        }
    }
}

/// How a fleet breaker or budget uses its store, as a policy's `Fleet` scope says (its mode, wait
/// and behaviour on a store failure; the rest `FleetConfig`'s defaults): what
/// [`Route::fleet_builder`] gives the fleet breakers and budgets it makes.
pub fn fleet_config(scope: &FleetScope) -> FleetConfig {
    FleetConfig {
        mode: match scope.mode {
            FleetMode::Exact => Mode::Exact,
            FleetMode::Cached { refresh } => Mode::Cached {
                refresh: refresh.into(),
            },
        },
        wait: scope.wait.into(),
        on_store_failure: match scope.on_store_failure {
            reliable_core::policy::OnStoreFailure::Local => OnStoreFailure::Local,
            reliable_core::policy::OnStoreFailure::Refuse => OnStoreFailure::Refuse,
        },
        ..FleetConfig::default()
    }
}

/// The fleet breaker and budget `route`'s `Fleet` scopes name, from `stores`: what
/// [`Route::fleet_builder`] and [`Route::fleet_gates`] put in place.
pub(super) fn fleet_state(
    route: &Route,
    stores: &Stores,
) -> Result<(Option<FleetBreaker>, Option<FleetBudget>), PolicyError> {
    let (mut fleet_breaker, mut fleet_budget) = (None, None);
    for (kind, field) in &route.fleet {
        match *kind {
            "Breaker" | "Retry" => {}
            _ => {
                return Err(route.refuse_at(
                    field,
                    &format!(
                        "scope Fleet on a {kind}: a Reliable shares a breaker and a retry budget through a store, not a {kind}; expected PerClient or Shared, or reliable::fleet's {} driven around the call",
                        if *kind == "Limit" { "FleetBulkhead" } else { "FleetRateLimiter" }
                    ),
                ));
            }
        }
    }
    let field_of = |kind: &str| {
        route
            .fleet
            .iter()
            .find(|(k, _)| *k == kind)
            .map(|(_, f)| f.clone())
            .unwrap_or_else(|| route.path.clone())
    };
    if let Some(breaker) = route.breaker
        && let Scope::Fleet(scope) = breaker.scope
    {
        let field = field_of("Breaker");
        let store = stores.store(&scope, &field, route)?;
        let spec = BreakerPolicy::new(breaker.config)
            .map_err(|e| route.refuse_at(&field, &format!("the breaker's config: {e}")))
            .and_then(|policy| {
                BreakerSpec::new(&policy).map_err(|e| {
                    route.refuse_at(&field, &format!("a fleet breaker cannot hold it: {e}"))
                })
            })?;
        let name = format!("{}:breaker", route.downstream);
        let fleet = FleetBreaker::with_events(
            store,
            &name,
            spec,
            fleet_config(&scope),
            stores.events.clone(),
        )
        .map_err(|e| route.refuse_at(&field, &format!("the fleet breaker {name:?}: {e}")))?;
        fleet_breaker = Some(fleet);
    }
    if let Some((budget, Scope::Fleet(scope))) = route.budget {
        let field = field_of("Retry");
        // The core refused any other budget under a Fleet scope (FLEET_BUDGET).
        let BudgetConfig::Ratio(ratio) = budget else {
            return Err(route.refuse_at(&field, reliable_core::policy::FLEET_BUDGET));
        };
        let store = stores.store(&scope, &field, route)?;
        let spec = BudgetSpec::new(ratio)
            .map_err(|e| route.refuse_at(&field, &format!("a fleet budget cannot hold it: {e}")))?;
        let name = format!("{}:budget", route.downstream);
        let fleet = FleetBudget::new(
            store,
            &name,
            spec,
            fleet_config(&scope),
            stores.budget_chunk.unwrap_or(DEFAULT_BUDGET_CHUNK),
            stores.events.clone(),
        )
        .map_err(|e| route.refuse_at(&field, &format!("the fleet budget {name:?}: {e}")))?;
        fleet_budget = Some(fleet);
    }
    Ok((fleet_breaker, fleet_budget))
}

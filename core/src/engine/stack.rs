//! A policy format stack ([`Layer`]) read into what the engine runs: a [`Plan`] and the configs
//! of the shared state it draws from, each with its scope. Feature `policy` (it allocates: the
//! error names its place in the stack).
//!
//! The engine runs one route: a chain of layers ending in a `Call`, each at most once, every one
//! but the `Call` optional, in any order the format means (see
//! [`Layer::check_nesting`](crate::policy::Layer::check_nesting)):
//!
//! - the gates (`Throttle`, `Breaker`, `Limit`, `RateLimit`) outside the `Retry` judge the call
//!   once, those inside it every attempt, each side in the order written ([`Nesting`]); without
//!   a `Retry` (one attempt) they all judge the call;
//! - a `Ledger` sits outside the `Retry`, anywhere among the gates there: the call deposits when
//!   it passes it, and the breaker's probes draw from it when the breaker is inside it;
//! - a `Hedge` is innermost, around the `Call`: the gates inside the retry admit each copy (a
//!   throttle admits the attempt once), those outside the call once.
//!
//! A `Call`'s timeout is each copy's own (a copy is one send; under a `Hedge` each hedge has its
//! own timer), bounded by the retry's attempt timeout and deadline. Anything else (a `Fallback`,
//! an `Llm`, a layer twice) is refused with the path of the layer and what the engine runs
//! instead.

use alloc::format;
use alloc::string::String;

use crate::breaker::{BreakerConfig, BreakerPolicy};
use crate::budget::{BudgetConfig, BudgetPolicy, RatioConfig, RatioPolicy};
use crate::error::ConfigError;
use crate::hedge::{HedgeConfig, HedgePolicy, Idempotency};
use crate::limit::{LimiterConfig, LimiterPolicy, RateConfig, RatePolicy};
use crate::policy::{Layer, Scope};
use crate::retry::{RetryConfig, RetryPolicy};
use crate::throttle::{ThrottleConfig, ThrottlePolicy};

use super::{Gate, Nesting, Plan};

/// A stack the engine can run: the plan and the shared state's configs, each validated, with
/// its scope (one per client, or one shared by all).
#[derive(Clone, Debug, PartialEq)]
pub struct Stack {
    /// The plan of each call.
    pub plan: Plan,
    /// The downstream the `Call` names.
    pub downstream: String,
    /// The circuit breaker.
    pub breaker: Option<(BreakerConfig, Scope)>,
    /// The retry budget (none with a ledger: the ledger is the retry budget then).
    pub budget: Option<(BudgetConfig, Scope)>,
    /// The adaptive throttle.
    pub throttle: Option<(ThrottleConfig, Scope)>,
    /// The ledger of extra attempts.
    pub ledger: Option<(RatioConfig, Scope)>,
    /// The hedging.
    pub hedge: Option<(HedgeConfig, Scope)>,
    /// The concurrency limit.
    pub limit: Option<(LimiterConfig, Scope)>,
    /// The rate limit.
    pub rate: Option<(RateConfig, Scope)>,
}

/// Why a stack cannot be run by the engine: where (`stack.inner.inner`) and what.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StackError {
    /// The layer's path from `stack`.
    pub path: String,
    /// What is wrong.
    pub message: String,
}

impl core::fmt::Display for StackError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

const ORDER: &str = "a chain of Ledger, Retry, Throttle, Breaker, Limit and RateLimit, each at \
                     most once, then a Hedge and the Call";

fn invalid(path: &str, e: ConfigError) -> StackError {
    StackError {
        path: String::from(path),
        message: format!("{e}"),
    }
}

impl Stack {
    /// Reads `stack` (the layers, outermost first).
    pub fn from_layer<D>(stack: &Layer<D>) -> Result<Self, StackError> {
        Self::read(stack, false)
    }

    /// Reads `stack` for a face that keeps a `Fleet` scope's state in a store it was given: as
    /// [`from_layer`](Self::from_layer), but a `Fleet` scope is read (the layer's scope says
    /// `Fleet`, for the face to build that layer's state from its store) instead of refused with
    /// [`FLEET_NO_STORE`](crate::policy::FLEET_NO_STORE).
    pub fn from_layer_with_store<D>(stack: &Layer<D>) -> Result<Self, StackError> {
        Self::read(stack, true)
    }

    fn read<D>(stack: &Layer<D>, store: bool) -> Result<Self, StackError> {
        stack.check_nesting("stack").map_err(|e| StackError {
            path: e.path,
            message: e.message,
        })?;
        // One host per downstream here: a breaker per host would be one breaker in disguise.
        if let Some(path) = stack.per_host("stack") {
            return Err(StackError {
                path,
                message: String::from(crate::policy::PER_HOST_ONE_HOST),
            });
        }
        // No store here: a fleet's state kept per process would be a per-client scope in disguise.
        if let Some(path) = stack.fleet("stack").filter(|_| !store) {
            return Err(StackError {
                path,
                message: String::from(crate::policy::FLEET_NO_STORE),
            });
        }
        let mut out = Stack {
            plan: Plan::new(
                RetryPolicy::new(RetryConfig {
                    max_attempts: Some(1),
                    ..RetryConfig::new(crate::backoff::BackoffConfig::immediate())
                })
                .map_err(|e| invalid("stack", e))?,
            ),
            downstream: String::new(),
            breaker: None,
            budget: None,
            throttle: None,
            ledger: None,
            hedge: None,
            limit: None,
            rate: None,
        };
        let mut path = String::from("stack");
        let mut layer = stack;
        // The gates met so far (where they sit is `Nesting::of_route`'s to say).
        let mut seen: heapless::Vec<Gate, 4> = heapless::Vec::new();
        let mut retry = false;
        let mut hedged = false;
        loop {
            let twice = |path: &str, what: &str| StackError {
                path: String::from(path),
                message: format!("a second {what} on the route: the engine runs {ORDER}"),
            };
            let (gate, inner) = match layer {
                Layer::Call {
                    downstream,
                    timeout,
                    ..
                } => {
                    out.downstream = downstream.clone();
                    out.plan = out.plan.copy_timeout(*timeout);
                    break;
                }
                _ if hedged => {
                    // `check_nesting` holds a Hedge's inner to a Call.
                    return Err(StackError {
                        path,
                        message: format!("the engine runs {ORDER}"),
                    });
                }
                Layer::Ledger {
                    config,
                    scope,
                    inner,
                } => {
                    if out.ledger.is_some() {
                        return Err(twice(&path, "Ledger"));
                    }
                    RatioPolicy::new(*config).map_err(|e| invalid(&path, e))?;
                    out.ledger = Some((*config, *scope));
                    (None, inner)
                }
                Layer::Retry {
                    policy,
                    budget,
                    budget_scope,
                    inner,
                } => {
                    if retry {
                        return Err(twice(&path, "Retry"));
                    }
                    let p = RetryPolicy::new(*policy).map_err(|e| invalid(&path, e))?;
                    out.plan = Plan {
                        retry: p,
                        ..out.plan
                    };
                    if let Some(b) = budget {
                        BudgetPolicy::new(*b).map_err(|e| invalid(&path, e))?;
                        out.budget = Some((*b, *budget_scope));
                    }
                    retry = true;
                    (None, inner)
                }
                Layer::Throttle {
                    config,
                    scope,
                    inner,
                } => {
                    ThrottlePolicy::new(*config).map_err(|e| invalid(&path, e))?;
                    out.throttle = Some((*config, *scope));
                    (Some(Gate::Throttle), inner)
                }
                Layer::Breaker {
                    config,
                    scope,
                    inner,
                } => {
                    BreakerPolicy::new(*config).map_err(|e| invalid(&path, e))?;
                    out.breaker = Some((*config, *scope));
                    (Some(Gate::Breaker), inner)
                }
                Layer::Limit {
                    config,
                    scope,
                    inner,
                } => {
                    LimiterPolicy::new(*config).map_err(|e| invalid(&path, e))?;
                    out.limit = Some((*config, *scope));
                    (Some(Gate::Limit), inner)
                }
                Layer::RateLimit {
                    config,
                    scope,
                    inner,
                } => {
                    RatePolicy::new(*config).map_err(|e| invalid(&path, e))?;
                    out.rate = Some((*config, *scope));
                    (Some(Gate::Rate), inner)
                }
                Layer::Hedge {
                    config,
                    idempotent,
                    scope,
                    inner,
                } => {
                    HedgePolicy::new(*config).map_err(|e| invalid(&path, e))?;
                    out.hedge = Some((*config, *scope));
                    let idempotency = if *idempotent {
                        Idempotency::Idempotent
                    } else {
                        Idempotency::NotIdempotent
                    };
                    out.plan = out.plan.idempotency(idempotency);
                    hedged = true;
                    (None, inner)
                }
                Layer::Fallback(_) | Layer::Llm { .. } => {
                    return Err(StackError {
                        path,
                        message: format!(
                            "the engine does not run a {} yet: it runs {ORDER}",
                            layer.kind_name()
                        ),
                    });
                }
            };
            if let Some(gate) = gate {
                if seen.contains(&gate) {
                    return Err(twice(&path, layer.kind_name()));
                }
                // Four distinct gates at most: there is room.
                let _ = seen.push(gate);
            }
            path.push_str(".inner");
            layer = inner;
        }
        if out.ledger.is_some() && out.budget.is_some() {
            return Err(StackError {
                path: String::from("stack"),
                message: String::from(
                    "a Retry inside a Ledger draws from it: its own budget would be a second one",
                ),
            });
        }
        let nesting = Nesting::of_route(stack).map_err(|t| StackError {
            path: String::from("stack"),
            message: format!("a second {:?} on the route: the engine runs {ORDER}", t.0),
        })?;
        out.plan = out.plan.nesting(nesting);
        Ok(out)
    }
}

impl Nesting {
    /// Where the gates of one route sit, read from its layers (`route`, outermost first, down
    /// to its `Call`) as the engine runs them: a `Throttle`, `Breaker`, `Limit` or `RateLimit`
    /// above the `Retry` sits outside it (it judges the call once), below it inside (it judges
    /// every attempt), each side in the order written; without a `Retry` (one attempt) every gate
    /// is outside it, so a `Hedge`'s copies pass none of them, as in the simulator. The call
    /// deposits in the ledger where the `Ledger` sits among the gates outside (after all of them
    /// without a `Ledger`). Every other layer places no gate: a `Hedge` or an `Llm` is passed
    /// through, and a `Call` or a `Fallback` ends the route (a `Fallback`'s branches are routes
    /// of their own).
    ///
    /// This is the one reading of a nesting: [`Stack::from_layer`] takes its plan's from here, and
    /// so does every loader that builds a face from a policy file (`reliable::policy`). It does
    /// not check the stack otherwise (see [`Stack::from_layer`] and
    /// [`Layer::check_nesting`](crate::policy::Layer::check_nesting)): a `Ledger` below the `Retry`
    /// (which `check_nesting` refuses) takes the deposit after every gate outside, a second
    /// `Retry` or `Ledger` places nothing. Allocation-free.
    ///
    /// Refused: a gate named twice.
    pub fn of_route<D>(route: &Layer<D>) -> Result<Nesting, super::Twice> {
        let mut outside: heapless::Vec<Gate, 4> = heapless::Vec::new();
        let mut inside: heapless::Vec<Gate, 4> = heapless::Vec::new();
        let mut ledger_at = None;
        let mut retry = false;
        let layers = core::iter::successors(Some(route), |l| match l {
            Layer::Fallback(_) => None,
            _ => l.inner().first(),
        });
        for layer in layers {
            let gate = match layer {
                Layer::Retry { .. } => {
                    retry = true;
                    continue;
                }
                Layer::Ledger { .. } => {
                    if !retry && ledger_at.is_none() {
                        ledger_at = Some(outside.len());
                    }
                    continue;
                }
                Layer::Throttle { .. } => Gate::Throttle,
                Layer::Breaker { .. } => Gate::Breaker,
                Layer::Limit { .. } => Gate::Limit,
                Layer::RateLimit { .. } => Gate::Rate,
                Layer::Call { .. }
                | Layer::Fallback(_)
                | Layer::Hedge { .. }
                | Layer::Llm { .. } => continue,
            };
            if outside.contains(&gate) || inside.contains(&gate) {
                return Err(super::Twice(gate));
            }
            let side = if retry { &mut inside } else { &mut outside };
            // Four distinct gates at most: there is room.
            if side.push(gate).is_err() {
                return Err(super::Twice(gate));
            }
        }
        let ledger_at = ledger_at.unwrap_or(outside.len());
        Nesting::new(&outside, ledger_at, &inside)
    }
}

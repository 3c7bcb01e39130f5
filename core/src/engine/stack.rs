//! A policy format stack ([`Layer`]) read into what the engine runs: a [`Plan`] and the configs
//! of the shared state it draws from, each with its scope. Feature `policy` (it allocates: the
//! error names its place in the stack).
//!
//! The engine runs one route: the layers below, in this order, each at most once, every one but
//! the `Call` optional:
//!
//! - the breaker per attempt: `Ledger → Retry → Throttle → Breaker → Limit → RateLimit → Hedge → Call`;
//! - the breaker per call: `Throttle → Breaker → Ledger → Retry → Limit → RateLimit → Hedge → Call`
//!   (the throttle goes with the breaker, outside the retry).
//!
//! A `Call`'s timeout is each copy's own (a copy is one send; under a `Hedge` each hedge has its
//! own timer), bounded by the retry's attempt timeout and deadline. Anything else (a `Fallback`,
//! an `Llm`, a throttle on the other side of the retry from the breaker, a layer twice) is refused
//! with the path of the layer and what the engine runs instead.

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

use super::{BreakerScope, Plan};

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

/// The slots of the two orders, outermost first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Slot {
    CallThrottle,
    CallBreaker,
    Ledger,
    Retry,
    Throttle,
    Breaker,
    Limit,
    RateLimit,
    Hedge,
}

const ORDER: &str = "Ledger → Retry → Throttle → Breaker → Limit → RateLimit → Hedge → Call, \
                     or Throttle → Breaker outside the Retry";

fn invalid(path: &str, e: ConfigError) -> StackError {
    StackError {
        path: String::from(path),
        message: format!("{e}"),
    }
}

impl Stack {
    /// Reads `stack` (the layers, outermost first).
    pub fn from_layer<D>(stack: &Layer<D>) -> Result<Self, StackError> {
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
        // The slot of the layer above; a throttle seen before the retry waits for its breaker.
        let mut last: Option<Slot> = None;
        let mut retry = false;
        let mut pending_throttle: Option<(ThrottleConfig, Scope, String)> = None;
        loop {
            let (slot, inner) = match layer {
                Layer::Call {
                    downstream,
                    timeout,
                    ..
                } => {
                    out.downstream = downstream.clone();
                    out.plan = out.plan.copy_timeout(*timeout);
                    break;
                }
                Layer::Ledger {
                    config,
                    scope,
                    inner,
                } => {
                    RatioPolicy::new(*config).map_err(|e| invalid(&path, e))?;
                    out.ledger = Some((*config, *scope));
                    (Slot::Ledger, inner)
                }
                Layer::Retry {
                    policy,
                    budget,
                    budget_scope,
                    inner,
                } => {
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
                    (Slot::Retry, inner)
                }
                Layer::Throttle {
                    config,
                    scope,
                    inner,
                } => {
                    ThrottlePolicy::new(*config).map_err(|e| invalid(&path, e))?;
                    let slot = if retry {
                        out.throttle = Some((*config, *scope));
                        Slot::Throttle
                    } else {
                        pending_throttle = Some((*config, *scope, path.clone()));
                        Slot::CallThrottle
                    };
                    (slot, inner)
                }
                Layer::Breaker {
                    config,
                    scope,
                    inner,
                } => {
                    BreakerPolicy::new(*config).map_err(|e| invalid(&path, e))?;
                    out.breaker = Some((*config, *scope));
                    let slot = if retry {
                        Slot::Breaker
                    } else {
                        out.plan = out.plan.scope(BreakerScope::PerCall);
                        if let Some((c, s, _)) = pending_throttle.take() {
                            out.throttle = Some((c, s));
                        }
                        Slot::CallBreaker
                    };
                    (slot, inner)
                }
                Layer::Limit {
                    config,
                    scope,
                    inner,
                } => {
                    LimiterPolicy::new(*config).map_err(|e| invalid(&path, e))?;
                    out.limit = Some((*config, *scope));
                    (Slot::Limit, inner)
                }
                Layer::RateLimit {
                    config,
                    scope,
                    inner,
                } => {
                    RatePolicy::new(*config).map_err(|e| invalid(&path, e))?;
                    out.rate = Some((*config, *scope));
                    (Slot::RateLimit, inner)
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
                    (Slot::Hedge, inner)
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
            if last.is_some_and(|l| l >= slot) {
                return Err(StackError {
                    path,
                    message: format!(
                        "a {} here is out of the engine's order: it runs {ORDER}",
                        layer.kind_name()
                    ),
                });
            }
            last = Some(slot);
            path.push_str(".inner");
            layer = inner;
        }
        if let Some((_, _, at)) = pending_throttle {
            return Err(StackError {
                path: at,
                message: format!(
                    "a Throttle outside the Retry goes with a Breaker outside it: the engine runs \
                     {ORDER}"
                ),
            });
        }
        if out.ledger.is_some() && out.budget.is_some() {
            return Err(StackError {
                path: String::from("stack"),
                message: String::from(
                    "a Retry inside a Ledger draws from it: its own budget would be a second one",
                ),
            });
        }
        Ok(out)
    }
}

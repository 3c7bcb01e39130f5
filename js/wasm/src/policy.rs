//! A policy format stack, layer by layer: the TypeScript side walks the layers of the file
//! (their nesting and order, by the rule of `reliable_core::engine::Stack::from_layer`), and
//! each layer's config is read here by the core's own `serde` derives ([`crate::de`]) and
//! checked by the core's own policy constructors; where the gates sit around the retry comes as
//! a [`Nesting`] ([`Kind::Nesting`], [`nesting_of`]). Then the whole becomes a [`Policy`]: the
//! engine's [`Plan`] and the stateful layers it draws from.

use reliable_core::backoff::BackoffConfig;
use reliable_core::breaker::{BreakerConfig, BreakerPolicy};
use reliable_core::budget::{AnyBudget, BudgetConfig, BudgetPolicy, RatioConfig, RatioPolicy};
use reliable_core::engine::{BreakerScope, Gate, Nesting, Plan};
use reliable_core::hedge::{HedgeConfig, HedgePolicy, Hedger, Idempotency};
use reliable_core::ledger::ExtraLedger;
use reliable_core::limit::{
    Limiter, LimiterConfig, LimiterPolicy, RateConfig, RateLimiter, RatePolicy,
};
use reliable_core::retry::{RetryConfig, RetryPolicy};
use reliable_core::throttle::{AdaptiveThrottle, ThrottleConfig, ThrottlePolicy};
use reliable_core::{ConfigError, Duration};

use core::cell::RefCell;

use crate::de::{self, DeError};
use crate::{Failure, Policy, World};

/// The layers a stack may hold, as [`World::stack_layer`] reads their config.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `Retry`'s `policy` (a `RetryConfig`).
    Retry = 1,
    /// `Retry`'s `budget` (a `BudgetConfig`).
    Budget = 2,
    /// `Breaker`'s `config`; flag 1: outside the retry (one permit per call).
    Breaker = 3,
    /// `Throttle`'s `config`.
    Throttle = 4,
    /// `Ledger`'s `config` (a `RatioConfig`).
    Ledger = 5,
    /// `Hedge`'s `config`; flag 1: the call is idempotent.
    Hedge = 6,
    /// `Limit`'s `config`.
    Limit = 7,
    /// `RateLimit`'s `config`.
    Rate = 8,
    /// `Call`'s `timeout` (a duration or null).
    CallTimeout = 9,
    /// No config: the flag is where the gates sit around the retry ([`nesting_of`]).
    Nesting = 10,
}

/// The bit of a stateful layer in [`World::policy_share`]'s `layers`: `1 << kind` (`Budget` is
/// the `Retry`'s budget, its `budget_scope`).
pub const fn shared_bit(kind: Kind) -> u32 {
    1 << kind as u32
}

/// Every layer a policy may share: the breaker, the budget, the throttle, the ledger, the hedge
/// (its latency estimate), the limit and the rate limit.
pub const SHARED_LAYERS: u32 = shared_bit(Kind::Budget)
    | shared_bit(Kind::Breaker)
    | shared_bit(Kind::Throttle)
    | shared_bit(Kind::Ledger)
    | shared_bit(Kind::Hedge)
    | shared_bit(Kind::Limit)
    | shared_bit(Kind::Rate);

/// The gate a number names (1 throttle, 2 breaker, 3 limit, 4 rate limit).
fn gate_of(n: u32) -> Option<Gate> {
    Some(match n {
        1 => Gate::Throttle,
        2 => Gate::Breaker,
        3 => Gate::Limit,
        4 => Gate::Rate,
        _ => return None,
    })
}

/// The [`Nesting`] a [`Kind::Nesting`] flag writes: the gates outermost first, three bits each
/// (bits 0-11, a 0 ends the list), how many of them are outside the retry (bits 12-14) and how
/// many of those come before the ledger (bits 15-17). `None`: not a nesting (an unknown gate, a
/// gate twice, more outside than there are).
pub fn nesting_of(flag: u32) -> Option<Nesting> {
    let mut gates: heapless::Vec<Gate, 4> = heapless::Vec::new();
    for i in 0..4 {
        match (flag >> (3 * i)) & 0b111 {
            0 => break,
            n => gates.push(gate_of(n)?).ok()?,
        }
    }
    let outside = ((flag >> 12) & 0b111) as usize;
    let ledger_at = ((flag >> 15) & 0b111) as usize;
    if outside > gates.len() || ledger_at > outside || flag >> 18 != 0 {
        return None;
    }
    Nesting::new(gates.get(..outside)?, ledger_at, gates.get(outside..)?).ok()
}

impl Kind {
    /// The kind of a number, if any.
    pub fn of(n: u32) -> Option<Kind> {
        Some(match n {
            1 => Kind::Retry,
            2 => Kind::Budget,
            3 => Kind::Breaker,
            4 => Kind::Throttle,
            5 => Kind::Ledger,
            6 => Kind::Hedge,
            7 => Kind::Limit,
            8 => Kind::Rate,
            9 => Kind::CallTimeout,
            10 => Kind::Nesting,
            _ => return None,
        })
    }
}

/// The configs read so far, each checked.
#[derive(Debug, Default)]
pub struct Builder {
    retry: Option<RetryPolicy>,
    per_call: bool,
    idempotent: bool,
    budget: Option<BudgetConfig>,
    breaker: Option<BreakerConfig>,
    throttle: Option<ThrottleConfig>,
    ledger: Option<RatioConfig>,
    hedge: Option<HedgeConfig>,
    limit: Option<LimiterConfig>,
    rate: Option<RateConfig>,
    copy_timeout: Option<Duration>,
    nesting: Option<Nesting>,
}

impl World {
    /// A config read (by one of [`crate::de`]'s readers), or why not kept for
    /// [`World::read_error`].
    fn read<T>(&self, read: Result<T, DeError>) -> Result<T, Failure> {
        read.map_err(|e| {
            self.read_error.set(Some(e));
            Failure::De
        })
    }
}

fn config<T>(r: Result<T, ConfigError>) -> Result<T, Failure> {
    r.map_err(Failure::Config)
}

impl World {
    /// Starts a stack (one at a time; a stack started and not finished is forgotten).
    pub fn stack_begin(&self) {
        if let Ok(mut b) = self.builder.try_borrow_mut() {
            *b = Builder::default();
        }
    }

    /// Reads the config of a layer of `kind` from `tokens` (see [`crate::de`]) and checks it.
    pub fn stack_layer(&self, kind: u32, flag: u32, tokens: &[u8]) -> Result<(), Failure> {
        let mut b = self
            .builder
            .try_borrow_mut()
            .map_err(|_| Failure::BadHandle)?;
        let kind = Kind::of(kind).ok_or(Failure::BadHandle)?;
        match kind {
            Kind::Retry => b.retry = Some(config(RetryPolicy::new(self.read(de::retry(tokens))?))?),
            Kind::Budget => {
                let c = self.read(de::budget(tokens))?;
                config(BudgetPolicy::new(c))?;
                b.budget = Some(c);
            }
            Kind::Breaker => {
                let c = self.read(de::breaker(tokens))?;
                config(BreakerPolicy::new(c))?;
                b.breaker = Some(c);
                b.per_call = flag == 1;
            }
            Kind::Throttle => {
                let c = self.read(de::throttle(tokens))?;
                config(ThrottlePolicy::new(c))?;
                b.throttle = Some(c);
            }
            Kind::Ledger => {
                let c = self.read(de::ledger(tokens))?;
                config(RatioPolicy::new(c))?;
                b.ledger = Some(c);
            }
            Kind::Hedge => {
                let c = self.read(de::hedge(tokens))?;
                config(HedgePolicy::new(c))?;
                b.hedge = Some(c);
                b.idempotent = flag == 1;
            }
            Kind::Limit => {
                let c = self.read(de::limit(tokens))?;
                config(LimiterPolicy::new(c))?;
                b.limit = Some(c);
            }
            Kind::Rate => {
                let c = self.read(de::rate(tokens))?;
                config(RatePolicy::new(c))?;
                b.rate = Some(c);
            }
            Kind::CallTimeout => b.copy_timeout = self.read(de::call_timeout(tokens))?,
            Kind::Nesting => b.nesting = Some(nesting_of(flag).ok_or(Failure::BadHandle)?),
        }
        Ok(())
    }

    /// The stack read so far as a policy: its handle.
    pub fn stack_finish(&'static self) -> Result<u32, Failure> {
        let b = core::mem::take(
            &mut *self
                .builder
                .try_borrow_mut()
                .map_err(|_| Failure::BadHandle)?,
        );
        // No `Retry`: one attempt, as the engine's stack reader does.
        let retry = match b.retry {
            Some(r) => r,
            None => config(RetryPolicy::new(RetryConfig {
                max_attempts: Some(1),
                ..RetryConfig::new(BackoffConfig::immediate())
            }))?,
        };
        let plan = Plan::new(retry).scope(if b.per_call {
            BreakerScope::PerCall
        } else {
            BreakerScope::PerAttempt
        });
        // A nesting read overrides the breaker's flag (the whole stack's shape, not only its).
        let plan = match b.nesting {
            Some(n) => plan.nesting(n),
            None => plan,
        }
        .idempotency(if b.idempotent {
            Idempotency::Idempotent
        } else {
            Idempotency::NotIdempotent
        })
        .copy_timeout(b.copy_timeout);
        let mut policy = Policy::new(plan);
        policy.budget = match b.budget {
            Some(c) => Some(RefCell::new(config(AnyBudget::from_config(c))?)),
            None => None,
        };
        policy.ledger = match b.ledger {
            Some(c) => Some(RefCell::new(config(ExtraLedger::from_config(c))?)),
            None => None,
        };
        policy.throttle = match b.throttle {
            Some(c) => Some(RefCell::new(config(
                ThrottlePolicy::new(c).and_then(AdaptiveThrottle::new),
            )?)),
            None => None,
        };
        policy.hedger = match b.hedge {
            Some(c) => Some(RefCell::new(Hedger::new(config(HedgePolicy::new(c))?))),
            None => None,
        };
        policy.limiter = match b.limit {
            Some(c) => Some(RefCell::new(Limiter::new(config(LimiterPolicy::new(c))?))),
            None => None,
        };
        policy.rate = match b.rate {
            Some(c) => Some(RefCell::new(RateLimiter::new(config(RatePolicy::new(c))?))),
            None => None,
        };
        let breaker = match b.breaker {
            Some(c) => Some(self.breaker_new(c)?),
            None => None,
        };
        policy.owns_breaker = breaker.is_some();
        self.policy_new(policy, breaker).inspect_err(|_| {
            if let Some(h) = breaker {
                self.breaker_free(h);
            }
        })
    }
}

//! Cross-face conformance: scripted answer sequences (`sequences/*.json`) that every face of the
//! project must turn into the same decision trace (`traces/*.jsonl`). The format is defined in
//! this crate's README; this library reads it, builds the core's configs from a policy block,
//! and writes trace lines, for the Rust faces' runners ([`faces`]).
#![forbid(unsafe_code)]

pub mod embassy;
pub mod engine;
pub mod faces;
pub mod generate;
pub mod simulator;
mod trace;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use reliable_core::Duration;
use reliable_core::backoff::{BackoffConfig, Jitter, Shape};
use reliable_core::breaker::{BreakerConfig, ProbeRule};
use reliable_core::budget::{BudgetConfig, RatioConfig, Threshold, TokenBucketConfig};
use reliable_core::hedge::{HedgeConfig, HedgeDelay, QuantileDelay};
use reliable_core::limit::{LimitRule, LimiterConfig, RateConfig};
use reliable_core::retry::RetryConfig;
use reliable_core::throttle::ThrottleConfig;
use serde::Deserialize;

pub use trace::Trace;

/// One scripted sequence.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sequence {
    /// The format's version: 1.
    pub format: u32,
    /// Its name (the file's stem).
    pub name: String,
    /// What it checks, in a sentence.
    pub about: String,
    /// The policy every face builds.
    pub policy: PolicyBlock,
    /// The calls, one after another.
    pub calls: Vec<CallScript>,
}

/// The policy block (see the README's table).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyBlock {
    pub max_attempts: u32,
    pub attempt_timeout_ms: Option<u64>,
    pub deadline_ms: Option<u64>,
    pub backoff: BackoffBlock,
    pub throttled_backoff: Option<BackoffBlock>,
    pub max_server_delay_ms: u64,
    pub retry_timeouts: bool,
    pub wait_on_refusal: bool,
    pub breaker: Option<BreakerBlock>,
    pub budget: Option<BudgetBlock>,
    /// Optional (default `false`): the calls may be sent twice, so they may be hedged.
    #[serde(default)]
    pub idempotent: bool,
    /// Optional (default none): hedging.
    #[serde(default)]
    pub hedge: Option<HedgeBlock>,
    /// Optional (default none): one ledger for retries, hedges and probes (then no `budget`).
    #[serde(default)]
    pub ledger: Option<LedgerBlock>,
    /// Optional (default none): a concurrency limit on attempts in flight.
    #[serde(default)]
    pub limit: Option<LimitBlock>,
    /// Optional (default none): a client-side rate limit on attempts sent.
    #[serde(default)]
    pub rate_limit: Option<RateLimitBlock>,
    /// Optional (format 1 without it: none).
    #[serde(default)]
    pub throttle: Option<ThrottleBlock>,
    /// Optional (default `false`): an attempt cannot be interrupted (a blocking call): its
    /// answer is taken when it comes, even after its timer.
    #[serde(default)]
    pub uninterruptible: bool,
    /// Optional (default: [`STOCK_ORDER`] without the layers the block leaves out): how the
    /// layers nest, outermost first, as names of [`LAYERS`]: `retry` and each layer the block
    /// sets, once each (a hedge is always innermost, around the call).
    #[serde(default)]
    pub nesting: Option<Vec<String>>,
    /// Optional (default none): chaos injected below the retry and every layer, where the
    /// answers come from (the sequences of `chaos/` only; see the README).
    #[serde(default)]
    pub chaos: Option<ChaosBlock>,
}

/// Chaos injected into each attempt sent, below every layer (where a real answer comes from): a
/// fault and an outcome strategy of `reliable_core::chaos`, each with its rate, seed and
/// `enabled` switch. An attempt they answer never reaches the scripted downstream (it takes no
/// scripted answer); its answer comes at once.
#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChaosBlock {
    /// A failure instead of the real answer.
    #[serde(default)]
    pub fault: Option<InjectBlock>,
    /// A chosen answer instead of the real one.
    #[serde(default)]
    pub outcome: Option<InjectBlock>,
    /// A delay before the attempt reaches the downstream (or its injected answer comes).
    #[serde(default)]
    pub latency: Option<LatencyBlock>,
}

/// The latency strategy: `delay_ms` before the attempts it hits go on.
#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LatencyBlock {
    pub rate: f64,
    pub seed: u64,
    #[serde(default = "yes")]
    pub enabled: bool,
    pub delay_ms: u64,
}

/// One strategy: `rate` and `seed` decide which attempts it hits (the `n`-th attempt through the
/// chaos layer while some strategy is on, from 0, across calls), `enabled` whether it starts
/// switched on; it answers `status` (with `retry_after_ms` and `should_retry` as its headers) or a
/// `transport` failure (`reset`; `timeout`: no answer ever).
#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InjectBlock {
    pub rate: f64,
    pub seed: u64,
    #[serde(default = "yes")]
    pub enabled: bool,
    #[serde(default)]
    pub status: Option<u16>,
    #[serde(default)]
    pub retry_after_ms: Option<u64>,
    #[serde(default)]
    pub should_retry: Option<bool>,
    #[serde(default)]
    pub transport: Option<Transport>,
}

fn yes() -> bool {
    true
}

impl InjectBlock {
    /// The core's injected answer.
    pub fn injected(&self) -> reliable_core::chaos::Injected {
        use reliable_core::chaos::Injected;
        match (self.status, self.transport) {
            (Some(status), _) => Injected::Status {
                status,
                retry_after: self.retry_after_ms.map(ms),
                should_retry: self.should_retry,
            },
            (None, Some(Transport::Timeout)) => Injected::Hang,
            (None, _) => Injected::Reset,
        }
    }
}

impl ChaosBlock {
    /// The core's chaos config.
    pub fn config(&self) -> reliable_core::chaos::ChaosConfig {
        use reliable_core::chaos::{ChaosConfig, FaultConfig, OutcomeConfig};
        // (latency below, by its full path)
        ChaosConfig {
            fault: self.fault.map(|f| FaultConfig {
                rate: f.rate,
                enabled: f.enabled,
                seed: f.seed,
                answer: f.injected(),
            }),
            outcome: self.outcome.map(|o| OutcomeConfig {
                rate: o.rate,
                enabled: o.enabled,
                seed: o.seed,
                answer: o.injected(),
            }),
            latency: self.latency.map(|l| reliable_core::chaos::LatencyConfig {
                rate: l.rate,
                enabled: l.enabled,
                seed: l.seed,
                delay: reliable_core::chaos::Delay::Fixed {
                    delay: ms(l.delay_ms),
                },
            }),
            ..ChaosConfig::OFF
        }
    }

    /// Why the block is ill-formed, if it is.
    fn error(&self) -> Option<String> {
        for (name, b) in [("fault", self.fault), ("outcome", self.outcome)] {
            let Some(b) = b else { continue };
            if b.status.is_some() == b.transport.is_some() {
                return Some(format!(
                    "chaos.{name}: needs a status or a transport, not both"
                ));
            }
        }
        reliable_core::chaos::Chaos::new(self.config())
            .err()
            .map(|e| format!("chaos.{e}"))
    }
}

/// The layers a `nesting` names.
pub const LAYERS: [&str; 6] = [
    "ledger",
    "retry",
    "throttle",
    "breaker",
    "limit",
    "rate_limit",
];

/// The order `Reliable` applies a policy in (and the default nesting), outermost first.
pub const STOCK_ORDER: [&str; 6] = LAYERS;

/// An adaptive throttle (Google SRE) that admits every attempt before the breaker, with the
/// uniform draws its decisions take, in order.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ThrottleBlock {
    pub k: f64,
    pub window_ms: u64,
    pub buckets: u32,
    pub max_rejection: Option<f64>,
    /// Uniform draws in [0, 1), one per decision.
    pub draws: Vec<f64>,
}

/// A throttle's scripted draws, handed out one per decision as the core's `u64` samples
/// (`⌊u · 2⁶⁴⌋`, exact for every `f64` in [0, 1)); a face that asks for more than the script has
/// gets `u64::MAX` (never refused) and [`Draws::exhausted`] says so.
#[derive(Clone, Debug, Default)]
pub struct Draws {
    samples: std::sync::Arc<Vec<u64>>,
    taken: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl Draws {
    /// The draws of `u` (each in [0, 1)).
    pub fn new(u: &[f64]) -> Self {
        Draws {
            samples: std::sync::Arc::new(u.iter().map(|&u| sample(u)).collect()),
            taken: Default::default(),
        }
    }

    /// The samples, in order.
    pub fn samples(&self) -> &[u64] {
        &self.samples
    }

    /// The next sample.
    pub fn next(&self) -> u64 {
        let i = self.taken.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.samples.get(i).copied().unwrap_or(u64::MAX)
    }

    /// More decisions were taken than the script has draws.
    pub fn exhausted(&self) -> bool {
        self.taken.load(std::sync::atomic::Ordering::SeqCst) > self.samples.len()
    }
}

/// The core's sample for a uniform draw `u` in [0, 1): `⌊u · 2⁶⁴⌋`.
pub fn sample(u: f64) -> u64 {
    // u · 2^64 is exact (a power of two); below 2^64 for u < 1.
    (u * 18_446_744_073_709_551_616.0) as u64
}

/// A hedge `delay_ms` after an attempt is sent, the next after `2 × delay_ms`, up to `max_hedges`;
/// or, with `quantile` instead of `delay_ms`, a delay read from recent latencies.
#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HedgeBlock {
    #[serde(default)]
    pub delay_ms: Option<u64>,
    /// Optional (instead of `delay_ms`): the delay is a quantile of recent attempt latencies.
    #[serde(default)]
    pub quantile: Option<QuantileBlock>,
    pub max_hedges: u32,
    /// Optional (default none): each copy's own timeout, from its own send (the policy format's
    /// `Call` timeout under a `Hedge`); `attempt_timeout_ms` still bounds the hedged attempt.
    #[serde(default)]
    pub copy_timeout_ms: Option<u64>,
}

/// A hedge delay from the core's streaming quantile: `q` of the latencies held (up to `window`),
/// no hedge before `min_samples`, clamped to `[min_ms, max_ms]`.
#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuantileBlock {
    pub q: f64,
    pub window: u32,
    pub min_samples: u32,
    pub min_ms: u64,
    pub max_ms: u64,
}

/// The ledger: extra attempts ≤ `ratio` × first tries + `min_per_sec` × the window, over `ttl_ms`.
#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LedgerBlock {
    pub ratio: f64,
    pub min_per_sec: u32,
    pub ttl_ms: u64,
}

/// A concurrency limit on attempts in flight, hedges included: a static bulkhead
/// (`max_in_flight`), or (optional, instead) an adaptive `aimd` or `gradient` limit.
#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitBlock {
    #[serde(default)]
    pub max_in_flight: Option<u32>,
    #[serde(default)]
    pub aimd: Option<AimdBlock>,
    #[serde(default)]
    pub gradient: Option<GradientBlock>,
}

/// AIMD: × `backoff` on a drop, + `increase` on a success while the limit is in use.
#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AimdBlock {
    pub initial: u32,
    pub min: u32,
    pub max: u32,
    pub backoff: f64,
    pub increase: u32,
}

/// Gradient2: the limit follows `tolerance × long-term RTT / RTT`.
#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GradientBlock {
    pub initial: u32,
    pub min: u32,
    pub max: u32,
    pub tolerance: f64,
    pub smoothing: f64,
    pub long_window: u32,
    pub queue: u32,
}

/// `rate` attempts per `period_ms`, `burst` at once (GCRA).
#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateLimitBlock {
    pub rate: u32,
    pub period_ms: u64,
    pub burst: u32,
}

/// `{base_ms, factor, cap_ms}`: retry `k` waits `min(cap, base · factor^(k−1))`.
#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BackoffBlock {
    pub base_ms: u64,
    pub factor: f64,
    pub cap_ms: Option<u64>,
}

/// A consecutive-failures breaker with a fixed open time and one probe at a time.
#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BreakerBlock {
    pub consecutive_failures: u32,
    pub open_ms: u64,
    pub half_open_successes: u32,
}

/// A retry budget.
#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub enum BudgetBlock {
    /// A token bucket that starts full.
    TokenBucket {
        max_tokens: f64,
        retry_cost: f64,
        failure_cost: f64,
        success_credit: f64,
    },
}

/// One call: when it starts and the answers its attempts get.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallScript {
    pub start_ms: u64,
    pub answers: Vec<ScriptedAnswer>,
    /// Optional (default none; with `chaos` only): strategies (`fault`, `outcome`) switched on
    /// (`true`) or off before the call starts.
    #[serde(default)]
    pub chaos: Option<BTreeMap<String, bool>>,
}

impl CallScript {
    /// The chaos switches to flip before the call, as the core's strategies.
    pub fn chaos_switches(&self) -> Vec<(reliable_core::chaos::Strategy, bool)> {
        use reliable_core::chaos::Strategy;
        let mut out = Vec::new();
        for (name, on) in self.chaos.iter().flatten() {
            if let Some(s) = Strategy::ALL.into_iter().find(|s| s.name() == name) {
                out.push((s, *on));
            }
        }
        out
    }
}

/// One scripted answer.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedAnswer {
    #[serde(default)]
    pub status: Option<u16>,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    #[serde(default)]
    pub latency_ms: u64,
    #[serde(default)]
    pub transport: Option<Transport>,
}

/// A transport outcome instead of a status.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Transport {
    /// No answer, ever.
    Timeout,
    /// The connection is refused or reset after the latency.
    Reset,
}

/// What a scripted answer is, once its shape is checked.
#[derive(Clone, Debug, PartialEq)]
pub enum Scripted {
    /// A status with headers.
    Status(u16, Vec<(String, String)>),
    /// The connection dropped.
    Reset,
    /// Never answers.
    Hang,
}

impl ScriptedAnswer {
    /// The answer's kind, or why the script is invalid.
    pub fn kind(&self) -> Result<Scripted, String> {
        match (self.status, self.transport) {
            (Some(s), None) if (100..=599).contains(&s) => Ok(Scripted::Status(
                s,
                self.headers
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
            )),
            (None, Some(Transport::Reset)) => Ok(Scripted::Reset),
            (None, Some(Transport::Timeout)) => Ok(Scripted::Hang),
            _ => Err("an answer needs a status in 100..=599 or a transport, not both".into()),
        }
    }
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn backoff(b: BackoffBlock) -> BackoffConfig {
    BackoffConfig {
        shape: Shape::Exponential {
            base: ms(b.base_ms),
            factor: b.factor,
        },
        cap: b.cap_ms.map(ms),
        jitter: Jitter::None,
        first_exponent: 0,
    }
}

impl PolicyBlock {
    /// The core's retry config.
    pub fn retry(&self) -> RetryConfig {
        RetryConfig {
            max_attempts: Some(self.max_attempts),
            attempt_timeout: self.attempt_timeout_ms.map(ms),
            deadline: self.deadline_ms.map(ms),
            backoff: backoff(self.backoff),
            throttled_backoff: self.throttled_backoff.map(backoff),
            max_server_delay: ms(self.max_server_delay_ms),
            retry_timeouts: self.retry_timeouts,
            wait_on_refusal: self.wait_on_refusal,
        }
    }

    /// The core's breaker config, if any.
    pub fn breaker(&self) -> Option<BreakerConfig> {
        self.breaker.map(|b| {
            let mut c = BreakerConfig::new();
            c.consecutive_failures = Some(b.consecutive_failures);
            c.open.duration = ms(b.open_ms);
            c.open.growth = 1.0;
            c.open.jitter = 0.0;
            c.half_open.max_in_flight = Some(1);
            c.half_open.rule = ProbeRule::Consecutive {
                successes: b.half_open_successes,
            };
            c.half_open.probe_timeout = Duration::MAX;
            c
        })
    }

    /// The core's throttle config and the draws, if any.
    pub fn throttle(&self) -> Option<(ThrottleConfig, Draws)> {
        self.throttle.as_ref().map(|t| {
            let config = ThrottleConfig {
                k: t.k,
                window: ms(t.window_ms),
                buckets: t.buckets,
                max_rejection: t.max_rejection,
            };
            (config, Draws::new(&t.draws))
        })
    }

    /// The core's budget config, if any.
    pub fn budget(&self) -> Option<BudgetConfig> {
        self.budget.map(|b| match b {
            BudgetBlock::TokenBucket {
                max_tokens,
                retry_cost,
                failure_cost,
                success_credit,
            } => BudgetConfig::TokenBucket(TokenBucketConfig {
                max_tokens,
                initial_tokens: None,
                first_try_credit: 0.0,
                success_credit,
                retried_success_credit: None,
                failure_cost,
                retry_cost,
                retry_when: Threshold::AtLeast(retry_cost),
            }),
        })
    }
}

impl PolicyBlock {
    /// Whether the block sets layer `name` of [`LAYERS`] (`retry` always).
    pub fn sets(&self, name: &str) -> bool {
        match name {
            "retry" => true,
            "ledger" => self.ledger.is_some(),
            "throttle" => self.throttle.is_some(),
            "breaker" => self.breaker.is_some(),
            "limit" => self.limit.is_some(),
            "rate_limit" => self.rate_limit.is_some(),
            _ => false,
        }
    }

    /// How the layers nest, outermost first (see [`PolicyBlock::nesting`](Self#structfield.nesting)).
    pub fn order(&self) -> Vec<&str> {
        match &self.nesting {
            Some(n) => n.iter().map(String::as_str).collect(),
            None => STOCK_ORDER.into_iter().filter(|l| self.sets(l)).collect(),
        }
    }

    /// Whether layer `name` is set and nested inside the retry (it judges every attempt).
    pub fn inside_retry(&self, name: &str) -> bool {
        let order = self.order();
        let at = |l: &str| order.iter().position(|x| *x == l);
        matches!((at(name), at("retry")), (Some(l), Some(r)) if l > r)
    }

    /// Whether the layers nest in another order than the stock one.
    pub fn nested_otherwise(&self) -> bool {
        let stock: Vec<&str> = STOCK_ORDER.into_iter().filter(|l| self.sets(l)).collect();
        self.order() != stock
    }

    /// Where the gates sit around the retry, as the engine reads the nesting.
    pub fn gates(&self) -> reliable_core::engine::Nesting {
        use reliable_core::engine::{Gate, Nesting};
        let order = self.order();
        let retry = order.iter().position(|l| *l == "retry").unwrap_or(0);
        let gate = |l: &&str| match *l {
            "throttle" => Some(Gate::Throttle),
            "breaker" => Some(Gate::Breaker),
            "limit" => Some(Gate::Limit),
            "rate_limit" => Some(Gate::Rate),
            _ => None,
        };
        let outside: Vec<Gate> = order[..retry].iter().filter_map(gate).collect();
        let inside: Vec<Gate> = order[retry..].iter().filter_map(gate).collect();
        let ledger_at = order[..retry]
            .iter()
            .position(|l| *l == "ledger")
            .map_or(outside.len(), |at| {
                order[..at].iter().filter_map(gate).count()
            });
        // `load` holds every name to one place.
        Nesting::new(&outside, ledger_at, &inside).unwrap_or_default()
    }

    /// Why `nesting` is ill-formed, if it is.
    fn nesting_error(&self) -> Option<String> {
        let n = self.nesting.as_ref()?;
        for (i, name) in n.iter().enumerate() {
            if !LAYERS.contains(&name.as_str()) {
                return Some(format!(
                    "nesting[{i}]: {name:?} is no layer: expected one of {LAYERS:?}"
                ));
            }
            if n[..i].contains(name) {
                return Some(format!("nesting[{i}]: {name:?} twice"));
            }
            if !self.sets(name) {
                return Some(format!(
                    "nesting[{i}]: {name:?} is not set in the policy block"
                ));
            }
        }
        if let Some(missing) = LAYERS
            .into_iter()
            .find(|l| self.sets(l) && !n.iter().any(|x| x == l))
        {
            return Some(format!(
                "nesting: {missing:?} is set in the policy block but not nested"
            ));
        }
        let at = |l: &str| n.iter().position(|x| x == l);
        if let (Some(ledger), Some(retry)) = (at("ledger"), at("retry"))
            && ledger > retry
        {
            return Some(
                "nesting: a ledger inside the retry counts every retry as a first try".into(),
            );
        }
        None
    }

    /// The core's hedging config, if any (a block with neither or both delays is refused by
    /// [`load`]; here it is a fixed delay of `delay_ms`, 0 if absent).
    pub fn hedge(&self) -> Option<HedgeConfig> {
        self.hedge.map(|h| HedgeConfig {
            delay: match h.quantile {
                Some(q) => HedgeDelay::Quantile(QuantileDelay {
                    quantile: q.q,
                    window: q.window,
                    min_samples: q.min_samples,
                    min: ms(q.min_ms),
                    max: ms(q.max_ms),
                }),
                None => HedgeDelay::Fixed(ms(h.delay_ms.unwrap_or(0))),
            },
            max_hedges: h.max_hedges,
        })
    }

    /// Each copy's own timeout in a hedged attempt, if any.
    pub fn copy_timeout(&self) -> Option<Duration> {
        self.hedge.and_then(|h| h.copy_timeout_ms).map(ms)
    }

    /// The core's ledger config, if any.
    pub fn ledger(&self) -> Option<RatioConfig> {
        self.ledger.map(|l| RatioConfig {
            ratio: l.ratio,
            min_per_sec: l.min_per_sec,
            ttl: ms(l.ttl_ms),
            slots: 10,
        })
    }

    /// The core's concurrency limit, if any (a block with no rule or several is refused by
    /// [`load`]; here the first of `max_in_flight`, `aimd`, `gradient` it sets).
    pub fn limit(&self) -> Option<LimiterConfig> {
        self.limit
            .map(|l| match (l.max_in_flight, l.aimd, l.gradient) {
                (Some(n), _, _) => LimiterConfig::bulkhead(n),
                (None, Some(a), _) => LimiterConfig {
                    rule: LimitRule::Aimd {
                        backoff: a.backoff,
                        increase: a.increase,
                    },
                    initial: a.initial,
                    min: a.min,
                    max: a.max,
                },
                (None, None, Some(g)) => LimiterConfig {
                    rule: LimitRule::Gradient {
                        tolerance: g.tolerance,
                        smoothing: g.smoothing,
                        long_window: g.long_window,
                        queue: g.queue,
                    },
                    initial: g.initial,
                    min: g.min,
                    max: g.max,
                },
                (None, None, None) => LimiterConfig::bulkhead(0),
            })
    }

    /// Why the optional blocks are ill-formed, if they are: a hedge needs exactly one of
    /// `delay_ms` and `quantile`, a limit exactly one of `max_in_flight`, `aimd`, `gradient`.
    fn shape_error(&self) -> Option<&'static str> {
        let one = |set: &[bool]| set.iter().filter(|&&s| s).count() == 1;
        if let Some(h) = &self.hedge
            && !one(&[h.delay_ms.is_some(), h.quantile.is_some()])
        {
            return Some("a hedge needs exactly one of delay_ms and quantile");
        }
        if let Some(l) = &self.limit
            && !one(&[
                l.max_in_flight.is_some(),
                l.aimd.is_some(),
                l.gradient.is_some(),
            ])
        {
            return Some("a limit needs exactly one of max_in_flight, aimd and gradient");
        }
        None
    }

    /// The core's rate limit, if any.
    pub fn rate_limit(&self) -> Option<RateConfig> {
        self.rate_limit.map(|r| RateConfig {
            rate: r.rate,
            period: ms(r.period_ms),
            burst: r.burst,
        })
    }

    /// Whether it uses a field added after the first fields of format 1 (for faces that cannot
    /// express them yet): its name.
    pub fn extra_load_field(&self) -> Option<&'static str> {
        [
            (self.hedge.is_some(), "hedge"),
            (self.ledger.is_some(), "ledger"),
            (self.limit.is_some(), "limit"),
            (self.rate_limit.is_some(), "rate_limit"),
            (self.uninterruptible, "uninterruptible"),
            (self.nested_otherwise(), "nesting"),
            (self.chaos.is_some(), "chaos"),
        ]
        .into_iter()
        .find_map(|(set, name)| set.then_some(name))
    }
}

/// This crate's directory.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every sequence, by name, sorted.
pub fn sequences() -> Result<Vec<Sequence>, String> {
    let dir = root().join("sequences");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    paths.sort();
    paths.iter().map(|p| load(p)).collect()
}

/// Reads one sequence; errors name the file, line and column.
pub fn load(path: &Path) -> Result<Sequence, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
    parse(&text, &path.display().to_string(), stem)
}

/// Reads one sequence from `text` (named `file` in errors), which must be called `stem`.
pub fn parse(text: &str, file: &str, stem: &str) -> Result<Sequence, String> {
    let s: Sequence = serde_json::from_str(text)
        .map_err(|e| format!("{file}:{}:{}: {e}", e.line(), e.column()))?;
    if s.format != 1 || s.name != stem {
        return Err(format!("{file}: expected format 1 and name {stem:?}"));
    }
    if let Some(e) = s.policy.nesting_error() {
        return Err(format!("{file}: {e}"));
    }
    if let Some(e) = s.policy.shape_error() {
        return Err(format!("{file}: {e}"));
    }
    for c in &s.calls {
        for a in &c.answers {
            a.kind().map_err(|e| format!("{file}: {e}"))?;
        }
    }
    if let Some(c) = &s.policy.chaos {
        if let Some(e) = c.error() {
            return Err(format!("{file}: {e}"));
        }
        if s.policy.hedge.is_some() {
            return Err(format!(
                "{file}: chaos with a hedge: not in format 1 (which copy a chaos line names)"
            ));
        }
    }
    for (i, c) in s.calls.iter().enumerate() {
        for name in c.chaos.iter().flat_map(|m| m.keys()) {
            if s.policy.chaos.is_none() || !["fault", "outcome", "latency"].contains(&name.as_str())
            {
                return Err(format!(
                    "{file}: calls[{i}].chaos.{name}: expected fault, outcome or latency, with a chaos block"
                ));
            }
        }
    }
    if let Some(t) = &s.policy.throttle
        && (t.draws.is_empty() || t.draws.iter().any(|u| !(0.0..1.0).contains(u)))
    {
        return Err(format!("{file}: a throttle needs draws, each in [0, 1)"));
    }
    Ok(s)
}

/// The chaos sequences (`chaos/*.json`), by name, sorted: run only by the faces with a chaos
/// layer (the engine, the tower layers, the Python and TypeScript packages).
pub fn chaos_sequences() -> Result<Vec<Sequence>, String> {
    let dir = root().join("chaos");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    paths.sort();
    paths.iter().map(|p| load(p)).collect()
}

/// The expected trace of chaos sequence `name`.
pub fn chaos_expected(name: &str) -> Result<String, String> {
    let p = root().join("chaos").join(format!("{name}.jsonl"));
    std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))
}

/// The expected trace of sequence `name`.
pub fn expected(name: &str) -> Result<String, String> {
    let p = root().join("traces").join(format!("{name}.jsonl"));
    std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))
}

/// The first line where `got` differs from `want`, for a failure message.
pub fn first_difference(want: &str, got: &str) -> Option<String> {
    let (w, g): (Vec<&str>, Vec<&str>) = (want.lines().collect(), got.lines().collect());
    (0..w.len().max(g.len())).find_map(|i| {
        let (a, b) = (w.get(i).copied(), g.get(i).copied());
        (a != b).then(|| {
            format!(
                "line {}: expected {}\n{:>width$}got      {}",
                i + 1,
                a.unwrap_or("(end)"),
                "",
                b.unwrap_or("(end)"),
                width = 0
            )
        })
    })
}

/// A markdown table: each sequence that sets an optional field of format 1 (the others run on
/// every Rust face), and for each Rust face whether it runs it or, if not, the field it cannot
/// express; then the count each face runs of all the sequences.
pub fn table(sequences: &[Sequence]) -> String {
    use faces::ALL;
    let mut out = String::from("| sequence |");
    for f in ALL {
        out += &format!(" {} |", f.name);
    }
    out += "\n|---|";
    out += &"---|".repeat(ALL.len());
    out += "\n";
    for s in sequences {
        let p = &s.policy;
        if p.extra_load_field().is_none() && !p.idempotent {
            continue;
        }
        out += &format!("| `{}` |", s.name);
        for f in ALL {
            let cell = match (f.skips)(s) {
                None => "runs".to_string(),
                Some(why) => format!("no: `{}`", why.split(':').next().unwrap_or("")),
            };
            out += &format!(" {cell} |");
        }
        out += "\n";
    }
    out += &format!("| **runs, of {}** |", sequences.len());
    for f in ALL {
        let runs = sequences.iter().filter(|s| (f.skips)(s).is_none()).count();
        out += &format!(" {runs} |");
    }
    out + "\n"
}

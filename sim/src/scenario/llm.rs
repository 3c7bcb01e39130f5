//! The scenario types of LLM providers: the [`LlmProvider`] downstream and its token counts.

use reliable_core::Duration;
use reliable_core::spend::Price;
use serde::{Deserialize, Serialize};

/// An LLM provider: each request draws its input and output tokens; per-key (per-client) limits on
/// requests, input tokens and output tokens per minute are answered with 429 and a `retry-after`;
/// past `capacity` requests generating at once, provider-wide, it answers 529 (overloaded); a
/// request's latency is `first_token + output × per_output_token`, stretched by
/// `1 + slowdown × generating / capacity left` (latency grows with load). Every served request is
/// billed at `price`, whether or not the client still waits for it. A key with a spend limit is
/// answered 429 with a money-limit body once it has spent that much.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LlmProvider {
    /// Input (prompt) tokens of a request.
    pub input_tokens: TokenDist,
    /// Output tokens the model would generate; capped at `max_tokens`.
    pub output_tokens: TokenDist,
    /// The clients' `max_tokens`: what a spend breaker reserves for output.
    pub max_tokens: u64,
    /// Requests per minute per key. Default: no limit.
    #[serde(default)]
    pub rpm: Option<u64>,
    /// Input tokens per minute per key. Default: no limit.
    #[serde(default)]
    pub itpm: Option<u64>,
    /// Output tokens per minute per key (counted when generated). Default: no limit.
    #[serde(default)]
    pub otpm: Option<u64>,
    /// Requests generating at once, provider-wide, before it answers 529. A `CapacityLoss` fault
    /// takes its share away.
    pub capacity: u32,
    /// Time to the first token, unloaded.
    pub first_token: Duration,
    /// Time per output token, unloaded.
    pub per_output_token: Duration,
    /// Extra latency at full capacity, as a share of the unloaded latency. Default 1 (twice as
    /// slow when full).
    #[serde(default = "one")]
    pub slowdown: f64,
    /// What tokens cost, in micro-units per million tokens.
    pub price: Price,
    /// Per-key spend limits, in micro-units over the whole run: once a key has spent this much,
    /// its requests are answered 429 `enforced_spend_limit_reached`. Default: none.
    #[serde(default)]
    pub spend_limits: Vec<SpendLimit>,
}

fn one() -> f64 {
    1.0
}

/// A per-key spend limit.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpendLimit {
    /// The client (key), from 0.
    pub client: u32,
    /// The limit, in micro-units.
    pub cost: u64,
}

/// A distribution of token counts.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub enum TokenDist {
    /// Always this many.
    Constant(u64),
    /// Uniform on `[low, high]`.
    Uniform {
        /// Fewest.
        low: u64,
        /// Most.
        high: u64,
    },
    /// `median × exp(N(0, sigma))`, rounded: long-tailed, like real prompts and answers.
    LogNormal {
        /// The median.
        median: u64,
        /// Standard deviation of the underlying normal.
        sigma: f64,
    },
}

impl TokenDist {
    /// A draw from two independent uniforms in `[0, 1)`.
    pub fn draw(&self, u1: f64, u2: f64) -> u64 {
        match *self {
            TokenDist::Constant(n) => n,
            TokenDist::Uniform { low, high } => {
                let span = high.saturating_sub(low).saturating_add(1) as f64;
                low.saturating_add((u1 * span) as u64).min(high.max(low))
            }
            TokenDist::LogNormal { median, sigma } => {
                // Box-Muller: 1 - u1 is in (0, 1], so the logarithm is finite.
                let z = (-2.0 * (1.0 - u1).ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
                (median as f64 * (sigma * z).exp()).round().max(0.0) as u64
            }
        }
    }

    /// Whether the parameters make sense (`low <= high`, a finite non-negative `sigma`).
    pub fn check(&self) -> Result<(), String> {
        match *self {
            TokenDist::Uniform { low, high } if low > high => {
                Err(format!("low {low} is above high {high}"))
            }
            TokenDist::LogNormal { sigma, .. } if !(sigma.is_finite() && sigma >= 0.0) => {
                Err(format!("sigma {sigma} must be a finite number >= 0"))
            }
            _ => Ok(()),
        }
    }
}

//! What runs against an LLM provider measure: tokens, money, and the provider's refusals.
//!
//! - **cost**: what the provider billed, in micro-units: every request it served, at its price per
//!   input and output token, whether or not the client still waited for the answer.
//! - **cost wasted**: billed for requests whose client attempt had already ended (timed out or
//!   abandoned) when the provider finished them: paid for, never used.
//! - **cost per success**: cost ÷ successful logical requests (`null` with none).
//! - **rate limited** / **overloaded** / **money limited**: the provider's 429 (a per-key limit),
//!   529 (provider-wide overload) and 429-with-a-money-limit answers.
//! - **spend refusals**: calls a spend breaker refused before sending them.

use serde::{Deserialize, Serialize};

/// LLM counters of one run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LlmCounters {
    /// Input tokens billed.
    pub input_tokens: u64,
    /// Output tokens billed.
    pub output_tokens: u64,
    /// Billed, micro-units.
    pub cost: u64,
    /// Of which for abandoned attempts.
    pub wasted: u64,
    /// 429 answers for a per-key limit.
    pub rate_limited: u64,
    /// 529 answers.
    pub overloaded: u64,
    /// 429 answers with a money limit.
    pub money_limited: u64,
    /// Calls refused by a spend breaker.
    pub spend_refusals: u64,
}

/// The LLM figures of a policy's summary (see the module docs).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LlmSummary {
    /// Input tokens billed.
    pub input_tokens: u64,
    /// Output tokens billed.
    pub output_tokens: u64,
    /// Billed, micro-units.
    pub cost: u64,
    /// Billed for abandoned attempts, micro-units.
    pub cost_wasted: u64,
    /// Cost ÷ successes, micro-units.
    pub cost_per_success: Option<f64>,
    /// 429 answers for a per-key limit.
    pub rate_limited: u64,
    /// 529 answers.
    pub overloaded: u64,
    /// 429 answers with a money limit.
    pub money_limited: u64,
    /// Calls refused by a spend breaker.
    pub spend_refusals: u64,
}

impl LlmSummary {
    /// The summary of `c` for a run with `successes`.
    pub fn new(c: &LlmCounters, successes: u64) -> Self {
        LlmSummary {
            input_tokens: c.input_tokens,
            output_tokens: c.output_tokens,
            cost: c.cost,
            cost_wasted: c.wasted,
            cost_per_success: (successes > 0).then(|| c.cost as f64 / successes as f64),
            rate_limited: c.rate_limited,
            overloaded: c.overloaded,
            money_limited: c.money_limited,
            spend_refusals: c.spend_refusals,
        }
    }
}

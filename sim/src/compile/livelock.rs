//! The livelock guard: a retry loop that could spin at one virtual instant for ever would hang a
//! run, so the compile stage refuses it with the retry layer's position.

use crate::model::bounds::{backoff_s, max_s};
use crate::scenario::Dist;
use crate::scenario::{DownstreamModel, Layer, Path, Scenario};

/// Why a zero-time retry loop is refused.
pub(crate) const LIVELOCK: &str = "unlimited attempts with a backoff that can be zero around a layer that can answer at once: a livelock (retries at one instant for ever): set max_attempts, a budget, or a backoff";

/// Whether `stack` can retry at one instant for ever: a retry with unlimited attempts, no budget
/// and a backoff that can be zero, around a layer that can answer at once (a zero round trip, or
/// a breaker or throttle that rejects locally). Returns the retry layer's path below `at`.
pub(crate) fn livelock(s: &Scenario, layer: &Layer, at: &Path) -> Option<Path> {
    /// Every draw is 0.
    fn zero(d: &Dist) -> bool {
        max_s(d) == 0.0
            || matches!(d, Dist::Exponential { mean } if mean.is_zero())
            || matches!(d, Dist::LogNormal { scale, .. } if scale.is_zero())
            || matches!(d, Dist::Normal { mean, std_dev } if mean.is_zero() && std_dev.is_zero())
    }
    /// The downstream can fail with no time passing. A register cannot: each round of conflicts
    /// commits one write.
    fn fails_at_once(s: &Scenario, name: &str) -> bool {
        let Some(d) = s.downstreams.iter().find(|d| d.name == name) else {
            return false;
        };
        let faulty = s.faults.iter().any(|f| f.downstream() == Some(name));
        zero(&d.network.request)
            && zero(&d.network.response)
            && match &d.model {
                DownstreamModel::Scripted {
                    latency, latencies, ..
                } => latency.is_zero() || latencies.iter().any(|l| l.is_zero()),
                DownstreamModel::Server {
                    service,
                    error_rate,
                    ..
                } => zero(service) && (*error_rate > 0.0 || faulty),
                DownstreamModel::Register => false,
                // A 429 or a 529 comes back at once.
                DownstreamModel::LlmProvider(_) => true,
            }
    }
    fn zero_answer(s: &Scenario, layer: &Layer) -> bool {
        match layer {
            Layer::Call { downstream, .. } => fails_at_once(s, downstream),
            Layer::Breaker { .. }
            | Layer::Throttle { .. }
            | Layer::Llm { .. }
            | Layer::Limit { .. }
            | Layer::RateLimit { .. } => true,
            Layer::Hedge { inner, .. } | Layer::Ledger { inner, .. } => zero_answer(s, inner),
            Layer::Retry { inner, .. } => zero_answer(s, inner),
            Layer::Fallback(children) => children.iter().all(|c| zero_answer(s, c)),
        }
    }
    match layer {
        Layer::Retry {
            policy,
            budget,
            inner,
            ..
        } => {
            let unbounded = policy.max_attempts.is_none()
                && budget
                    .is_none_or(|b| matches!(b, reliable_core::budget::BudgetConfig::Unlimited));
            if unbounded && backoff_s(&policy.backoff).0 == 0.0 && zero_answer(s, inner) {
                return Some(at.clone());
            }
            livelock(s, inner, &at.field("inner"))
        }
        Layer::Breaker { inner, .. }
        | Layer::Throttle { inner, .. }
        | Layer::Llm { inner, .. }
        | Layer::Hedge { inner, .. }
        | Layer::Ledger { inner, .. }
        | Layer::Limit { inner, .. }
        | Layer::RateLimit { inner, .. } => livelock(s, inner, &at.field("inner")),
        Layer::Fallback(children) => children
            .iter()
            .enumerate()
            .find_map(|(k, c)| livelock(s, c, &at.index(k))),
        Layer::Call { .. } => None,
    }
}

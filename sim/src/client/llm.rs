//! The state of an LLM client layer: one spend breaker (the core's) per client or shared.

use reliable_core::ConfigError;
use reliable_core::spend::{SpendBreaker, SpendPolicy};

/// A spend breaker with the default bucket capacities (6 per minute, 24 per day, 30 per month).
pub type SpendSlot<'c> = SpendBreaker<&'c SpendPolicy, 6, 24, 30>;

/// A spend breaker for `policy`, or why its buckets do not fit.
pub fn spend_slot(policy: &SpendPolicy) -> Result<SpendSlot<'_>, ConfigError> {
    SpendSlot::new(policy)
}

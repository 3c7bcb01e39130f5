//! What a retry budget shared by a fleet can be: the rules every face that keeps one ratio budget
//! in a store for many processes holds a config to (`reliable::fleet`'s store, the simulator's),
//! so that a policy file the simulator runs with `budget_scope: Fleet(..)` is the file a service
//! runs, and one they both refuse otherwise.
//!
//! The fleet's window is kept in the store in slots of whole microseconds (the store's clock), at
//! most [`FLEET_MAX_SLOTS`] of them (each process keeps a ratio budget of the same config to fall
//! back on while the store fails, of that capacity).

use super::RatioConfig;
use crate::breaker::FleetRefusal;

/// The most slots a fleet budget's window may have: each process's fallback budget keeps that
/// many.
pub const FLEET_MAX_SLOTS: u32 = 64;

impl RatioConfig {
    /// The first field a ratio budget kept by a fleet cannot have (in the shape a breaker's
    /// refusal has: the field below the budget, and why), or `None` if the whole config can be
    /// shared: at most [`FLEET_MAX_SLOTS`] slots, each a whole number of microseconds long.
    pub fn fleet_refusal(&self) -> Option<FleetRefusal> {
        if self.slots > FLEET_MAX_SLOTS {
            return Some(FleetRefusal {
                field: "slots",
                why: "at most 64 slots in a fleet budget (each process's fallback budget keeps that many)",
            });
        }
        let slots = u64::from(self.slots.max(1));
        if !(self.ttl.as_nanos() / slots).is_multiple_of(1_000) {
            return Some(FleetRefusal {
                field: "ttl",
                why: "ttl / slots must be whole microseconds (the store's clock)",
            });
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Duration;

    #[test]
    fn a_fleet_budget_holds_64_slots_of_whole_microseconds() {
        let ok = RatioConfig {
            ratio: 0.1,
            min_per_sec: 0,
            ttl: Duration::from_secs(10),
            slots: 64,
        };
        assert_eq!(ok.fleet_refusal(), None);
        let many = RatioConfig { slots: 65, ..ok };
        assert_eq!(many.fleet_refusal().map(|r| r.field), Some("slots"));
        let odd = RatioConfig {
            ttl: Duration::from_nanos(10_000_000_500),
            slots: 10,
            ..ok
        };
        assert_eq!(odd.fleet_refusal().map(|r| r.field), Some("ttl"));
    }
}

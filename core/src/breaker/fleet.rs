//! What a breaker shared by a fleet can be: the rules every face that keeps one breaker in a store
//! for many processes holds a config to, so that a policy file the simulator runs with a `Fleet`
//! scope is the file a service runs (`reliable::fleet`), and one they both refuse otherwise.
//!
//! A fleet breaker trips on failures in a row, or on a failure rate over a count window of at
//! most [`FLEET_MAX_WINDOW`] calls (each process keeps a local breaker of the same config to fall
//! back on while the store fails: that is its capacity); its open times grow per re-open without
//! jitter (one breaker for the fleet: its probes are gated by the store, not spread by chance);
//! its half-open round lets at most [`FLEET_MAX_PROBES`] leased probes through, closed by
//! successes in a row. Everything else a single process's breaker can do is refused, by field.

use super::{BreakerConfig, ProbeRule, State, WindowConfig};
use crate::Duration;

/// The longest count window a fleet breaker may have: each process's fallback breaker keeps that
/// many calls.
pub const FLEET_MAX_WINDOW: u32 = 64;

/// The most probes a fleet breaker's half-open round may let through at once.
pub const FLEET_MAX_PROBES: u32 = 16;

/// A field of a breaker config that a fleet cannot share, and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FleetRefusal {
    /// The field, as written in a policy file below the breaker's `config`
    /// (`open.jitter`, `window.calls`).
    pub field: &'static str,
    /// Why, and what to write instead.
    pub why: &'static str,
}

impl BreakerConfig {
    /// The first field a breaker kept by a fleet cannot have, or `None` if the whole config can
    /// be shared. A fleet breaker trips on failures in a row, or on a failure rate over a count
    /// window of at most [`FLEET_MAX_WINDOW`] calls (each process keeps a breaker of the same
    /// config to fall back on while the store fails); its open times grow per re-open without
    /// jitter (its probes are gated by the store, not spread by chance); its half-open round lets
    /// at most [`FLEET_MAX_PROBES`] leased probes through, closed by successes in a row. Slow
    /// calls, slow start, shadow mode and an initial state but closed are refused.
    pub fn fleet_refusal(&self) -> Option<FleetRefusal> {
        let refuse = |field, why| Some(FleetRefusal { field, why });
        if self.slow_calls.is_some() {
            return refuse("slow_calls", "a fleet breaker trips on failures only");
        }
        if self.slow_start.is_some() {
            return refuse("slow_start", "no slow start in a fleet breaker");
        }
        if self.shadow {
            return refuse("shadow", "no shadow mode in a fleet breaker");
        }
        if self.initial_state != State::Closed {
            return refuse("initial_state", "a fleet breaker starts closed");
        }
        if self.open.jitter != 0.0 {
            return refuse(
                "open.jitter",
                "one breaker for the fleet: its probes are gated by the store, not spread: expected 0.0",
            );
        }
        if self.open.strictly_after {
            return refuse(
                "open.strictly_after",
                "a fleet's store counts microseconds: expected false",
            );
        }
        match self.window {
            WindowConfig::Count { calls } if calls > FLEET_MAX_WINDOW => {
                return refuse(
                    "window.calls",
                    "at most 64 calls in a fleet breaker's window (each process's fallback breaker keeps that many)",
                );
            }
            WindowConfig::Time { .. } if self.failure_rate.is_some() => {
                return refuse(
                    "window",
                    "a fleet breaker's failure rate is over a count window: expected Count(calls: ..)",
                );
            }
            _ => {}
        }
        match self.half_open.max_in_flight {
            Some(n) if n > FLEET_MAX_PROBES => {
                return refuse("half_open.max_in_flight", "at most 16 probes in flight");
            }
            None => {
                return refuse(
                    "half_open.max_in_flight",
                    "a fleet breaker gates its probes fleet-wide: set a number",
                );
            }
            Some(_) => {}
        }
        if let ProbeRule::Rate { .. } = self.half_open.rule {
            return refuse(
                "half_open.rule",
                "a fleet breaker closes on successes in a row: expected Consecutive(successes: ..)",
            );
        }
        if self.half_open.max_wait.is_some() {
            return refuse(
                "half_open.max_wait",
                "a fleet breaker's round ends by its leases",
            );
        }
        if self.half_open.probe_timeout == Duration::MAX {
            return refuse(
                "half_open.probe_timeout",
                "a process that dies mid-probe must not wedge the fleet: set a lease",
            );
        }
        None
    }
}

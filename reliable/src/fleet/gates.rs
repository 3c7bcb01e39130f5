//! A fleet breaker and a fleet budget as the call engine's breaker and retry budget: what a
//! [`Reliable`](crate::Reliable) (and so its blocking calls and its tower layer) asks when it
//! was built with [`Builder::fleet_breaker`](crate::Builder::fleet_breaker) or
//! [`Builder::fleet_budget`](crate::Builder::fleet_budget), and what another face that drives
//! the core's engine itself (the Python package) asks from its `engine::Shared`
//! ([`Route::fleet_gates`](crate::policy::Route::fleet_gates) builds them from a policy).
//!
//! The engine takes each decision at once ([`FleetBreaker::decide`],
//! [`FleetBudget::try_retry_now`]) and carries a core [`Permit`] between the breaker's admit and
//! record: a fleet permit does not fit in one, so it waits here, in a table, and the core permit
//! carries its place ([`Permit::foreign`]).

use std::sync::{Mutex, MutexGuard};

use reliable_core::Instant;
use reliable_core::breaker::{Outcome, Permit, RejectReason, Rejection};
use reliable_core::budget::{Budget, Denied, Grant};
use reliable_core::outcome::{AttemptOutcome, ErrorClass};

use super::fleet_breaker::{FleetBreaker, FleetPermit, FleetReason};
use super::fleet_budget::FleetBudget;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The fleet's gates of one instance: its [`FleetBreaker`] and [`FleetBudget`] as the core's
/// call engine asks a breaker and a budget (`engine::Shared`'s `breaker_acquire`,
/// `breaker_record`, `breaker_refuses` and `budget`).
#[derive(Debug)]
pub struct FleetGates {
    pub(crate) breaker: Option<FleetBreaker>,
    budget: Option<Mutex<EngineBudget>>,
    /// Fleet permits the engine holds, by the token its core permit carries; free places.
    permits: Mutex<(Vec<Option<FleetPermit>>, Vec<u32>)>,
    /// While the store fails and the breaker fails closed: when to ask again.
    rest: std::time::Duration,
}

impl FleetGates {
    /// The gates of `breaker` and `budget` (either may be absent). Build both in
    /// [`Mode::Cached`](super::Mode::Cached): the engine decides at once, on their views.
    pub fn new(breaker: Option<FleetBreaker>, budget: Option<FleetBudget>) -> Self {
        let rest = breaker
            .as_ref()
            .map(|b| b.config().rest)
            .unwrap_or_default();
        FleetGates {
            breaker,
            budget: budget.map(|b| Mutex::new(EngineBudget(b))),
            permits: Mutex::new((Vec::new(), Vec::new())),
            rest,
        }
    }

    /// The breaker's decision, as the engine takes it; `None`: no fleet breaker.
    pub fn acquire(&self, now: Instant) -> Option<Result<Permit, Rejection>> {
        let b = self.breaker.as_ref()?;
        Some(match b.decide() {
            Ok(p) => {
                let probe = p.is_probe();
                let mut t = lock(&self.permits);
                let token = match t.1.pop() {
                    Some(free) => {
                        if let Some(slot) = t.0.get_mut(free as usize) {
                            *slot = Some(p);
                        }
                        free
                    }
                    None => {
                        t.0.push(Some(p));
                        (t.0.len() - 1) as u32
                    }
                };
                Ok(Permit::foreign(token, probe, now))
            }
            Err(r) => Err(Rejection {
                reason: match r.reason {
                    FleetReason::Breaker(reason) => reason,
                    // Failing closed while the store rests: ask again when it is next asked.
                    FleetReason::StoreUnavailable => RejectReason::Open {
                        retry_after: self.rest.into(),
                    },
                },
            }),
        })
    }

    /// A permit the engine hands back, with its call's end.
    pub fn record(&self, permit: Permit, outcome: Outcome) {
        let Some(b) = self.breaker.as_ref() else {
            return;
        };
        let token = permit.generation();
        let fleet = {
            let mut t = lock(&self.permits);
            let p = t.0.get_mut(token as usize).and_then(Option::take);
            if p.is_some() {
                t.1.push(token);
            }
            p
        };
        if let Some(p) = fleet {
            b.record_now(p, outcome);
        }
    }

    /// While the fleet's breaker is open (as this process last saw it): the time left.
    pub fn refuses(&self) -> Option<reliable_core::Duration> {
        self.breaker.as_ref()?.open_for()
    }

    /// The fleet's retry budget.
    pub fn budget(&self) -> Option<&Mutex<EngineBudget>> {
        self.budget.as_ref()
    }

    /// The fleet's breaker.
    pub fn breaker(&self) -> Option<&FleetBreaker> {
        self.breaker.as_ref()
    }

    /// Fleet permits the engine holds now (for tests: every permit comes back).
    #[cfg(test)]
    pub fn held(&self) -> usize {
        lock(&self.permits).0.iter().filter(|p| p.is_some()).count()
    }
}

/// A fleet budget as the core's [`Budget`]: first tries deposit, retries are granted at once
/// (on the fleet's view).
#[derive(Debug)]
pub struct EngineBudget(FleetBudget);

impl Budget for EngineBudget {
    fn on_first_try(&mut self, _: Instant) {
        self.0.first_try();
    }
    fn try_retry(&mut self, _: ErrorClass, _: Instant) -> Result<Grant, Denied> {
        // A ratio budget refunds nothing: the grant carries no cost to give back.
        self.0
            .try_retry_now()
            .map(|()| Grant::new(0))
            .map_err(|_| Denied::Ratio)
    }
    fn on_attempt_end(&mut self, _: AttemptOutcome, _: Option<Grant>, _: Instant) {}
    fn on_request_end(&mut self, _: Instant) {}
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use reliable_core::breaker::{BreakerConfig, BreakerPolicy, HalfOpenConfig};

    use super::*;
    use crate::fleet::{BreakerSpec, FleetConfig, MemoryStore, Mode};

    /// Every permit the engine takes comes back to the table, and its place is used again: the
    /// table holds no more places than permits held at once.
    #[tokio::test(flavor = "current_thread")]
    async fn permits_come_back_and_places_are_reused() {
        let policy = BreakerPolicy::new(BreakerConfig {
            consecutive_failures: Some(3),
            half_open: HalfOpenConfig {
                max_in_flight: Some(1),
                probe_timeout: reliable_core::Duration::from_secs(1),
                ..BreakerConfig::new().half_open
            },
            ..BreakerConfig::new()
        })
        .unwrap();
        let breaker = FleetBreaker::new(
            Arc::new(MemoryStore::new("t")),
            "b",
            BreakerSpec::new(&policy).unwrap(),
            FleetConfig {
                mode: Mode::Cached {
                    refresh: std::time::Duration::from_millis(5),
                },
                ..FleetConfig::default()
            },
        )
        .unwrap();
        let gates = FleetGates::new(Some(breaker), None);
        let now = Instant::from_nanos(0);
        let held: Vec<Permit> = (0..3)
            .map(|_| gates.acquire(now).unwrap().unwrap())
            .collect();
        assert_eq!(gates.held(), 3);
        let tokens: Vec<u32> = held.iter().map(Permit::generation).collect();
        assert_eq!(tokens, [0, 1, 2]);
        for p in held {
            gates.record(p, Outcome::Success);
        }
        assert_eq!(gates.held(), 0);
        let again = gates.acquire(now).unwrap().unwrap();
        assert!(again.generation() < 3, "a free place is used again");
        gates.record(again, Outcome::Ignored);
        assert_eq!(gates.held(), 0);
        assert_eq!(lock(&gates.permits).0.len(), 3);
    }
}

//! Breakers as the simulator stores them: the smallest core breaker type that fits the config.
//!
//! The core's breaker is generic over its window storage and probe slots. A scenario's config is
//! only known at run time, so [`BreakerProto`] picks, in order, a breaker with no window
//! (consecutive failures only, one probe), one with a 64-call count window and four probes, or one
//! with an [`AnyWindow<256, 64, 4>`](reliable_core::breaker::AnyWindow) and 16 probes, whichever
//! the core accepts first. Each breaker node of a run keeps its breakers (one shared, or one per
//! client) in one [`Breakers`] of that type, driven through the core's [`Breaker`] trait: the
//! storage is chosen once per node, never per call. A million per-client breakers of the first
//! kind take tens of megabytes, not gigabytes. A config none of them fits is reported as a
//! scenario error (the core's message).

use reliable_core::breaker::{
    AnyWindow, Breaker, BreakerPolicy, CircuitBreaker, CountWindow, LastTransition, NoWindow,
    Outcome, Permit, Rejection, Transition, Window,
};
use std::fmt::Debug;
use std::sync::Arc;

use reliable_core::{ConfigError, Instant};

/// A core breaker sharing its scenario's policy (one `Arc` for all clients), keeping its latest
/// transition for the caller.
type Core<W, const P: usize> = CircuitBreaker<Arc<BreakerPolicy>, W, P, LastTransition>;

/// The same without the (single-threaded) transition outlet: what a compiled scenario, shared by
/// every run's thread, keeps.
type Fresh<W, const P: usize> = CircuitBreaker<Arc<BreakerPolicy>, W, P>;

/// One breaker node's breakers in one run (one shared, or one per client), all of the storage
/// that fits the node's policy. Each call names the breaker and returns the transition it made,
/// if any.
pub trait Breakers: Debug {
    /// Breaker `i` asked for a permit at `now`.
    fn try_acquire(
        &mut self,
        i: usize,
        now: Instant,
    ) -> (Result<Permit, Rejection>, Option<Transition>);
    /// Breaker `i` told how a call it permitted ended.
    fn record(
        &mut self,
        i: usize,
        permit: Permit,
        outcome: Outcome,
        now: Instant,
    ) -> Option<Transition>;
    /// Breaker `i`, to read.
    fn get(&self, i: usize) -> &dyn Breaker;
    /// Breaker `i`'s generation (it moves on every state change; a fleet's batch of results
    /// counts only in the generation it was sent for).
    fn generation(&self, i: usize) -> u32;
    /// How many there are.
    fn len(&self) -> usize;
}

/// Every storage's breakers, through the core's trait.
impl<W: Window + Debug, const P: usize> Breakers for Vec<Core<W, P>> {
    #[inline]
    fn try_acquire(
        &mut self,
        i: usize,
        now: Instant,
    ) -> (Result<Permit, Rejection>, Option<Transition>) {
        let b = &mut self[i];
        let decision = Breaker::try_acquire(b, now);
        (decision, b.observer().take())
    }
    #[inline]
    fn record(
        &mut self,
        i: usize,
        permit: Permit,
        outcome: Outcome,
        now: Instant,
    ) -> Option<Transition> {
        let b = &mut self[i];
        Breaker::record(b, permit, outcome, now);
        b.observer().take()
    }
    fn get(&self, i: usize) -> &dyn Breaker {
        &self[i]
    }
    fn generation(&self, i: usize) -> u32 {
        self[i].generation()
    }
    fn len(&self) -> usize {
        Vec::len(self)
    }
}

/// A closed breaker for a validated policy, in the storage that fits it: built once when the
/// scenario is compiled (where a config none of the storages fits is refused), then copied for
/// each client by [`BreakerProto::instances`], which cannot fail.
#[derive(Clone, Debug)]
pub struct BreakerProto {
    fresh: Arc<dyn Prototype>,
    /// Whether the policy runs in shadow mode ([`BreakerPolicy::shadow`]).
    shadow: bool,
}

/// A closed breaker of one storage, to copy.
trait Prototype: Debug + Send + Sync {
    /// Copies of it, the `i`-th with its open-time jitter seeded with `seeds[i]`.
    fn instances(&self, seeds: &mut dyn Iterator<Item = u64>) -> Box<dyn Breakers>;
    /// Bytes one copy takes.
    fn bytes(&self) -> usize;
}

impl<W: Window + Clone + Debug + Send + Sync + 'static, const P: usize> Prototype for Fresh<W, P> {
    fn instances(&self, seeds: &mut dyn Iterator<Item = u64>) -> Box<dyn Breakers> {
        let copies: Vec<Core<W, P>> = seeds
            .map(|seed| {
                self.clone()
                    .with_seed(seed)
                    .observe(LastTransition::default())
            })
            .collect();
        Box::new(copies)
    }
    fn bytes(&self) -> usize {
        std::mem::size_of::<Core<W, P>>()
    }
}

impl BreakerProto {
    /// The breaker for `policy`, or why no storage fits it.
    pub fn new(policy: BreakerPolicy) -> Result<Self, ConfigError> {
        let (needs_window, shadow) = (policy.needs_window(), policy.shadow());
        let policy = Arc::new(policy);
        let fresh: Arc<dyn Prototype> = match Fresh::<NoWindow, 1>::with_storage(policy.clone()) {
            Ok(b) if !needs_window => Arc::new(b),
            _ => match Fresh::<CountWindow<64>, 4>::with_storage(policy.clone()) {
                Ok(b) => Arc::new(b),
                Err(_) => Arc::new(Fresh::<AnyWindow<256, 64, 4>, 16>::with_storage(policy)?),
            },
        };
        Ok(BreakerProto { fresh, shadow })
    }

    /// Fresh breakers of this kind, the `i`-th with its open-time jitter seeded with `seeds[i]`.
    pub fn instances(&self, seeds: impl Iterator<Item = u64>) -> Box<dyn Breakers> {
        self.fresh.instances(&mut { seeds })
    }

    /// Bytes one instance takes.
    pub fn bytes(&self) -> usize {
        self.fresh.bytes()
    }

    /// Whether the policy runs in shadow mode: its breakers admit every call and their
    /// transitions are would-be transitions.
    pub fn shadow(&self) -> bool {
        self.shadow
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reliable_core::breaker::BreakerConfig;

    /// A scenario's breaker in shadow mode (`shadow: true` in its config) admits every call, so
    /// its client sends as with no breaker, and its would-be decisions (the calls it admitted
    /// with a shadow permit, its transitions) are the live breaker's on the same calls.
    #[test]
    fn a_breaker_in_shadow_mode_decides_as_the_live_one() {
        let run = |shadow: bool| {
            let config = BreakerConfig {
                shadow,
                ..BreakerConfig::reliablekit()
            };
            let proto = BreakerProto::new(BreakerPolicy::new(config).unwrap()).unwrap();
            assert_eq!(proto.shadow(), shadow);
            let mut b = proto.instances(std::iter::once(7));
            let (mut refused, mut transitions) = (Vec::new(), Vec::new());
            for i in 0..400u64 {
                let now = Instant::from_millis(i * 500);
                // Down from the 50th call to the 200th.
                let outcome = if (50..200).contains(&i) {
                    Outcome::Failure
                } else {
                    Outcome::Success
                };
                let (decision, t) = b.try_acquire(0, now);
                transitions.extend(t);
                match decision {
                    Ok(p) if p.is_shadow() => {
                        refused.push(i);
                        transitions.extend(b.record(0, p, outcome, now));
                    }
                    Ok(p) => transitions.extend(b.record(0, p, outcome, now)),
                    Err(_) => refused.push(i),
                }
            }
            (refused, transitions)
        };
        let (live, shadow) = (run(false), run(true));
        assert!(live.0.len() > 50 && live.1.len() >= 3, "{live:?}");
        assert_eq!(shadow, live);
    }

    #[test]
    fn picks_the_smallest_storage_that_fits() {
        let build = |c: BreakerConfig| BreakerProto::new(BreakerPolicy::new(c).unwrap()).unwrap();
        let plain = build(BreakerConfig::layered_exercise());
        assert_eq!(plain.bytes(), std::mem::size_of::<Core<NoWindow, 1>>());
        let kit = build(BreakerConfig::reliablekit());
        assert_eq!(kit.bytes(), std::mem::size_of::<Core<CountWindow<64>, 4>>());
        let r4j = build(BreakerConfig::resilience4j());
        let any = std::mem::size_of::<Core<AnyWindow<256, 64, 4>, 16>>();
        assert_eq!(r4j.bytes(), any);
        assert!(plain.bytes() < kit.bytes() && kit.bytes() < any);
        // 160 bytes of breaker state, and the latest transition kept for the simulator (24).
        assert!(plain.bytes() <= 184, "{}", plain.bytes());
        let b = plain.instances([1, 2, 3].into_iter());
        assert_eq!(b.len(), 3);
    }
}

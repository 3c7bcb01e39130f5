//! Breakers as the simulator stores them: the smallest core breaker type that fits the config.
//!
//! The core's breaker is generic over its window storage and probe slots. A scenario's config is
//! only known at run time, so [`BreakerSlot`] picks, in order, a breaker with no window (consecutive
//! failures only, one probe), one with a 64-call count window and four probes, or a boxed
//! [`AnyWindow<256, 64, 4>`](reliable_core::breaker::AnyWindow) with 16 probes, whichever the core
//! accepts first. A million per-client breakers of the first kind take tens of megabytes, not
//! gigabytes. A config none of them fits is reported as a scenario error (the core's message).

use reliable_core::breaker::{
    AnyWindow, Breaker, BreakerPolicy, CircuitBreaker, CountWindow, LastTransition, NoWindow,
    Outcome, Permit, Rejection, Snapshot, State, Transition,
};
use std::sync::Arc;

use reliable_core::{ConfigError, Duration, Instant};

/// A breaker of whichever storage fits its policy.
#[derive(Clone, Debug)]
pub enum BreakerSlot {
    /// Consecutive-failure breakers: no window.
    Plain(Core<NoWindow, 1>),
    /// Rate rules over at most 64 calls, up to 4 probes.
    Count(Core<CountWindow<64>, 4>),
    /// Anything else the core supports: 256-call count windows or 64-bucket time windows, 16 probes.
    Any(Box<Core<AnyWindow<256, 64, 4>, 16>>),
}

/// A core breaker sharing its scenario's policy (one `Arc` for all clients), keeping its latest
/// transition for the caller.
type Core<W, const P: usize> = CircuitBreaker<Arc<BreakerPolicy>, W, P, LastTransition>;

/// The same without the (single-threaded) transition outlet: what a compiled scenario, shared by
/// every run's thread, keeps.
type Fresh<W, const P: usize> = CircuitBreaker<Arc<BreakerPolicy>, W, P>;

/// A closed breaker for a validated policy, in the storage that fits it: built once when the
/// scenario is compiled (where a config none of the storages fits is refused), then copied for
/// each client by [`BreakerProto::instance`], which cannot fail.
#[derive(Clone, Debug)]
pub enum BreakerProto {
    /// See [`BreakerSlot::Plain`].
    Plain(Fresh<NoWindow, 1>),
    /// See [`BreakerSlot::Count`].
    Count(Fresh<CountWindow<64>, 4>),
    /// See [`BreakerSlot::Any`].
    Any(Box<Fresh<AnyWindow<256, 64, 4>, 16>>),
}

impl BreakerProto {
    /// The breaker for `policy`, or why no storage fits it.
    pub fn new(policy: BreakerPolicy) -> Result<Self, ConfigError> {
        let needs_window = policy.needs_window();
        let policy = Arc::new(policy);
        if let Ok(b) = Fresh::<NoWindow, 1>::with_storage(policy.clone())
            && !needs_window
        {
            return Ok(BreakerProto::Plain(b));
        }
        if let Ok(b) = Fresh::<CountWindow<64>, 4>::with_storage(policy.clone()) {
            return Ok(BreakerProto::Count(b));
        }
        let b = Fresh::<AnyWindow<256, 64, 4>, 16>::with_storage(policy)?;
        Ok(BreakerProto::Any(Box::new(b)))
    }

    /// A fresh breaker of this kind, its open-time jitter seeded with `seed`.
    pub fn instance(&self, seed: u64) -> BreakerSlot {
        let o = LastTransition::default;
        match self {
            BreakerProto::Plain(b) => BreakerSlot::Plain(b.clone().with_seed(seed).observe(o())),
            BreakerProto::Count(b) => BreakerSlot::Count(b.clone().with_seed(seed).observe(o())),
            BreakerProto::Any(b) => {
                BreakerSlot::Any(Box::new((**b).clone().with_seed(seed).observe(o())))
            }
        }
    }

    /// Bytes one instance takes, its boxed part included.
    pub fn bytes(&self) -> usize {
        let own = std::mem::size_of::<BreakerSlot>();
        match self {
            BreakerProto::Plain(_) | BreakerProto::Count(_) => own,
            BreakerProto::Any(_) => own + std::mem::size_of::<Core<AnyWindow<256, 64, 4>, 16>>(),
        }
    }
}

/// Every call goes to the breaker of whichever storage the slot holds.
macro_rules! each {
    ($slot:expr, $b:ident => $e:expr) => {
        match $slot {
            BreakerSlot::Plain($b) => $e,
            BreakerSlot::Count($b) => $e,
            BreakerSlot::Any($b) => $e,
        }
    };
}

impl BreakerSlot {
    /// The transition the latest call made, if any (each call replaces it).
    #[inline]
    pub fn take_transition(&self) -> Option<Transition> {
        each!(self, b => b.observer().take())
    }
}

/// The simulator drives its breakers through the core's [`Breaker`] trait, like any other user.
impl Breaker for BreakerSlot {
    #[inline]
    fn try_acquire(&mut self, now: Instant) -> Result<Permit, Rejection> {
        each!(self, b => b.try_acquire(now))
    }
    #[inline]
    fn record(&mut self, permit: Permit, outcome: Outcome, now: Instant) {
        each!(self, b => b.record(permit, outcome, now))
    }
    fn record_latency(
        &mut self,
        permit: Permit,
        outcome: Outcome,
        latency: Duration,
        now: Instant,
    ) {
        each!(self, b => b.record_latency(permit, outcome, latency, now))
    }
    fn state(&self, now: Instant) -> State {
        each!(self, b => b.state(now))
    }
    fn retry_after(&self, now: Instant) -> Option<Duration> {
        each!(self, b => b.retry_after(now))
    }
    fn try_acquire_closed(&mut self) -> Option<Permit> {
        each!(self, b => b.try_acquire_closed())
    }
    fn open_until(&mut self, until: Instant, now: Instant) {
        each!(self, b => b.open_until(until, now))
    }
    fn open_for(&mut self, duration: Duration, now: Instant) {
        each!(self, b => b.open_for(duration, now))
    }
    fn half_open(&mut self, now: Instant) -> bool {
        each!(self, b => b.half_open(now))
    }
    fn close(&mut self, now: Instant) {
        each!(self, b => b.close(now))
    }
    fn snapshot(&self, now: Instant) -> Snapshot {
        each!(self, b => b.snapshot(now))
    }
    fn policy(&self) -> &BreakerPolicy {
        each!(self, b => b.policy())
    }
    fn force_open(&mut self, now: Instant) {
        each!(self, b => b.force_open(now))
    }
    fn disable(&mut self, now: Instant) {
        each!(self, b => b.disable(now))
    }
    fn reset(&mut self, now: Instant) {
        each!(self, b => b.reset(now))
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
            let mut b = proto.instance(7);
            let (mut refused, mut transitions) = (Vec::new(), Vec::new());
            for i in 0..400u64 {
                let now = Instant::from_millis(i * 500);
                // Down from the 50th call to the 200th.
                let outcome = if (50..200).contains(&i) {
                    Outcome::Failure
                } else {
                    Outcome::Success
                };
                match b.try_acquire(now) {
                    Ok(p) if p.is_shadow() => {
                        refused.push(i);
                        b.record(p, outcome, now);
                    }
                    Ok(p) => b.record(p, outcome, now),
                    Err(_) => refused.push(i),
                }
                transitions.extend(b.take_transition());
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
        assert!(matches!(plain.instance(1), BreakerSlot::Plain(_)));
        let kit = build(BreakerConfig::reliablekit());
        assert!(matches!(kit.instance(1), BreakerSlot::Count(_)));
        let r4j = build(BreakerConfig::resilience4j());
        assert!(matches!(r4j.instance(1), BreakerSlot::Any(_)));
        // 160 bytes of breaker state, and the latest transition kept for the simulator (24).
        assert!(plain.bytes() <= 184, "{}", plain.bytes());
    }
}

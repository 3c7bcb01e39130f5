//! The adaptive throttle against a plain reference model (a list of timestamped requests and
//! accepts, filtered to the live window), on random valid sequences and random configs (K, window,
//! buckets, a cap on the rejection probability).
//!
//! After every step: the counts agree; the rejection probability matches the SRE book's formula
//! `min(cap, max(0, (requests − K·accepts) / (requests + 1)))` computed in floating point; and each
//! decision is exactly "the sample, as a fraction of 2⁶⁴, is below that probability" (compared in
//! exact integers).
//!
//! `PROPTEST_CASES=5000 cargo test -p reliable-core --test throttle_state_machine` is CI's long pass.

use proptest::prelude::*;
use proptest::strategy::Union;
use proptest_state_machine::{ReferenceStateMachine, StateMachineTest, prop_state_machine};
use reliable_core::throttle::{AdaptiveThrottle, Shed, ThrottleConfig, ThrottlePolicy};
use reliable_core::{Duration, Instant};

const BUCKETS: usize = 8;

#[derive(Clone, Debug)]
struct Model {
    k_micro: u64,
    width: u64,
    buckets: u32,
    cap_micro: Option<u64>,
    now: u64,
    latest: u64,
    /// Requests sent and not yet answered.
    pending: u32,
    /// (time, requests, accepts).
    events: Vec<(u64, u64, u64)>,
    /// The model's answer to the last acquire.
    answer: Option<Result<(), Shed>>,
}

impl Model {
    fn counts(&self, view: u64) -> (u64, u64) {
        self.events
            .iter()
            .filter(|e| e.0 / self.width + u64::from(self.buckets) > view / self.width)
            .fold((0, 0), |(r, a), e| (r + e.1, a + e.2))
    }

    /// The probability as an exact fraction (numerator, denominator).
    fn fraction(&self, view: u64) -> (u128, u128) {
        let (r, a) = self.counts(view);
        let (r, a) = (u128::from(r), u128::from(a));
        let excess = (r * 1_000_000).saturating_sub(u128::from(self.k_micro) * a);
        let cap = self
            .cap_micro
            .map_or(u128::MAX, |c| u128::from(c) * (r + 1));
        (excess.min(cap), (r + 1) * 1_000_000)
    }

    fn formula(&self, view: u64) -> f64 {
        let (r, a) = self.counts(view);
        let k = self.k_micro as f64 / 1e6;
        let p = ((r as f64 - k * a as f64) / (r as f64 + 1.0)).max(0.0);
        self.cap_micro.map_or(p, |c| p.min(c as f64 / 1e6))
    }
}

#[derive(Clone, Debug)]
enum Op {
    Wait(u64),
    Back(u64),
    Acquire(u64),
    Answer(bool),
}

struct Machine;

impl ReferenceStateMachine for Machine {
    type State = Model;
    type Transition = Op;

    fn init_state() -> BoxedStrategy<Model> {
        (
            prop_oneof![Just(2_000_000u64), 1_000_000..=4_000_000u64],
            1_000_000..10_000_000_000u64,
            1..=BUCKETS as u32,
            proptest::option::of(0..=1_000_000u64),
        )
            .prop_map(|(k_micro, width, buckets, cap_micro)| Model {
                k_micro,
                width,
                buckets,
                cap_micro,
                now: 0,
                latest: 0,
                pending: 0,
                events: Vec::new(),
                answer: None,
            })
            .boxed()
    }

    fn transitions(s: &Model) -> BoxedStrategy<Op> {
        let w = s.width;
        let mut ops: Vec<(u32, BoxedStrategy<Op>)> = vec![
            (6, (0..w).prop_map(Op::Wait).boxed()),
            (2, (w..w * 12).prop_map(Op::Wait).boxed()),
            (1, Just(Op::Wait(u64::MAX / 3)).boxed()),
            (2, (0..w * 3).prop_map(Op::Back).boxed()),
            (
                10,
                prop_oneof![any::<u64>(), Just(0u64), Just(u64::MAX)]
                    .prop_map(Op::Acquire)
                    .boxed(),
            ),
        ];
        if s.pending > 0 {
            // The downstream mostly rejects, so the throttle has something to do.
            ops.push((
                10,
                prop_oneof![1 => Just(true), 2 => Just(false)]
                    .prop_map(Op::Answer)
                    .boxed(),
            ));
        }
        Union::new_weighted(ops).boxed()
    }

    fn apply(mut s: Model, op: &Op) -> Model {
        s.answer = None;
        match *op {
            Op::Wait(d) => s.now = s.now.saturating_add(d),
            Op::Back(d) => s.now = s.now.saturating_sub(d),
            Op::Acquire(sample) => {
                s.latest = s.latest.max(s.now);
                let (num, den) = s.fraction(s.latest);
                s.events.push((s.latest, 1, 0));
                // Rejected when sample / 2^64 < num / den.
                s.answer = Some(if u128::from(sample) * den < num << 64 {
                    Err(Shed {
                        probability_ppm: (num * 1_000_000 / den) as u32,
                    })
                } else {
                    s.pending += 1;
                    Ok(())
                });
            }
            Op::Answer(accepted) => {
                s.latest = s.latest.max(s.now);
                s.events.push((s.latest, 0, u64::from(accepted)));
                s.pending -= 1;
            }
        }
        s
    }
}

impl StateMachineTest for Machine {
    type SystemUnderTest = AdaptiveThrottle<BUCKETS>;
    type Reference = Machine;

    fn init_test(s: &Model) -> AdaptiveThrottle<BUCKETS> {
        let config = ThrottleConfig {
            k: s.k_micro as f64 / 1e6,
            window: Duration::from_nanos(s.width * u64::from(s.buckets)),
            buckets: s.buckets,
            max_rejection: s.cap_micro.map(|c| c as f64 / 1e6),
        };
        AdaptiveThrottle::new(ThrottlePolicy::new(config).unwrap()).unwrap()
    }

    fn apply(mut t: AdaptiveThrottle<BUCKETS>, s: &Model, op: Op) -> AdaptiveThrottle<BUCKETS> {
        let now = Instant::from_nanos(s.now);
        match op {
            Op::Wait(_) | Op::Back(_) => {}
            Op::Acquire(sample) => {
                let got = t.try_acquire_with(now, sample);
                assert_eq!(Some(got), s.answer, "sample {sample:#x} at {now:?}");
            }
            Op::Answer(accepted) => t.record(now, accepted),
        }
        t
    }

    fn check_invariants(t: &AdaptiveThrottle<BUCKETS>, s: &Model) {
        let now = Instant::from_nanos(s.now);
        let view = s.now.max(s.latest);
        assert_eq!(t.counts(now), s.counts(view));
        let p = t.rejection_probability(now);
        assert!(
            (p - s.formula(view)).abs() < 1e-12,
            "{p} vs {}",
            s.formula(view)
        );
        assert!((0.0..1.0).contains(&p));
    }
}

prop_state_machine! {
    #[test]
    fn throttle_matches_the_model(sequential 1..200 => Machine);
}

//! The ledger of extra attempts against a plain reference model (a list of timestamped deposits
//! and withdrawals summed over the live window, and a counter per kind), on random sequences of
//! first tries, draws of every kind, settlements and time steps, with random configs.
//!
//! Invariants: the ledger never overspends (after every grant, floor + deposits − withdrawals in
//! the window is still ≥ 0); draws, refusals and outstanding draws are counted by kind exactly;
//! and within one window, the extra attempts of all kinds together never exceed ratio × first
//! tries + floor, and one is refused only when granting it would break that bound.
//!
//! `PROPTEST_CASES=5000 cargo test -p reliable-core --test ledger_state_machine` is CI's long pass.

mod common;

use common::live;
use proptest::prelude::*;
use proptest::strategy::Union;
use proptest_state_machine::{ReferenceStateMachine, StateMachineTest, prop_state_machine};
use reliable_core::budget::RatioConfig;
use reliable_core::ledger::{Draw, Extra, ExtraLedger};
use reliable_core::{Duration, Instant};

const SLOTS: usize = 8;
const M: u128 = 1_000_000;

#[derive(Clone, Debug)]
enum Op {
    Wait(u64),
    Back(u64),
    FirstTry,
    Draw(Extra),
    Settle(usize),
}

#[derive(Clone, Debug)]
struct Model {
    ratio_micro: u128,
    min_per_sec: u32,
    ttl_ms: u64,
    slots: u32,
    now: u64,
    latest: u64,
    /// (time, deposit, withdrawal) in millionths of an attempt.
    events: Vec<(u64, u128, u128)>,
    drawn: [u64; 3],
    denied: [u64; 3],
    /// Kinds of the draws not yet settled, in the real draws' order.
    outstanding: Vec<Extra>,
    answer: Option<bool>,
}

fn index(kind: Extra) -> usize {
    Extra::ALL.iter().position(|k| *k == kind).unwrap()
}

impl Model {
    fn width(&self) -> u64 {
        self.ttl_ms * 1_000_000 / u64::from(self.slots)
    }
    fn floor(&self) -> u128 {
        u128::from(self.min_per_sec) * u128::from(self.ttl_ms) * 1_000
    }
    fn balance(&self, view: u64) -> i128 {
        let (d, w) = self
            .events
            .iter()
            .filter(|e| live(e.0, view, self.width(), self.slots))
            .fold((0, 0), |(d, w), e| (d + e.1, w + e.2));
        self.floor() as i128 + d as i128 - w as i128
    }
    fn config(&self) -> RatioConfig {
        RatioConfig {
            ratio: self.ratio_micro as f64 / 1e6,
            min_per_sec: self.min_per_sec,
            ttl: Duration::from_millis(self.ttl_ms),
            slots: self.slots,
        }
    }
}

fn kind() -> impl Strategy<Value = Extra> {
    prop_oneof![Just(Extra::Retry), Just(Extra::Hedge), Just(Extra::Probe)]
}

struct Ledger;

impl ReferenceStateMachine for Ledger {
    type State = Model;
    type Transition = Op;

    fn init_state() -> BoxedStrategy<Model> {
        (
            prop_oneof![Just(0u128), 0..=2 * M, Just(M / 10), Just(M)],
            prop_oneof![Just(0u32), 0..=3u32],
            1_000..=60_000u64,
            1..=SLOTS as u32,
        )
            .prop_map(|(ratio_micro, min_per_sec, ttl_ms, slots)| Model {
                ratio_micro,
                min_per_sec,
                ttl_ms,
                slots,
                now: 0,
                latest: 0,
                events: Vec::new(),
                drawn: [0; 3],
                denied: [0; 3],
                outstanding: Vec::new(),
                answer: None,
            })
            .boxed()
    }

    fn transitions(s: &Model) -> BoxedStrategy<Op> {
        let w = s.width().max(2);
        let mut ops = vec![
            (5, (0..w).prop_map(Op::Wait).boxed()),
            (2, (w..w * 12).prop_map(Op::Wait).boxed()),
            (1, Just(Op::Wait(u64::MAX / 3)).boxed()),
            (2, (0..w * 3).prop_map(Op::Back).boxed()),
            (6, Just(Op::FirstTry).boxed()),
            (8, kind().prop_map(Op::Draw).boxed()),
        ];
        if !s.outstanding.is_empty() {
            ops.push((4, (0..s.outstanding.len()).prop_map(Op::Settle).boxed()));
        }
        Union::new_weighted(ops).boxed()
    }

    // Shrinking may drop the `Draw` a later op refers to.
    fn preconditions(s: &Model, op: &Op) -> bool {
        !matches!(*op, Op::Settle(i) if i >= s.outstanding.len())
    }

    fn apply(mut s: Model, op: &Op) -> Model {
        s.answer = None;
        match *op {
            Op::Wait(d) => s.now = s.now.saturating_add(d),
            Op::Back(d) => s.now = s.now.saturating_sub(d),
            _ => s.latest = s.latest.max(s.now),
        }
        let latest = s.latest;
        match *op {
            Op::Wait(_) | Op::Back(_) => {}
            Op::FirstTry => s.events.push((latest, s.ratio_micro, 0)),
            Op::Draw(kind) => {
                let ok = s.balance(latest) >= M as i128;
                if ok {
                    s.events.push((latest, 0, M));
                    s.drawn[index(kind)] += 1;
                    s.outstanding.push(kind);
                } else {
                    s.denied[index(kind)] += 1;
                }
                s.answer = Some(ok);
            }
            Op::Settle(i) => {
                s.outstanding.swap_remove(i);
            }
        }
        s
    }
}

#[derive(Debug)]
struct Sut {
    ledger: ExtraLedger<SLOTS>,
    draws: Vec<Draw>,
}

impl StateMachineTest for Ledger {
    type SystemUnderTest = Sut;
    type Reference = Ledger;

    fn init_test(s: &Model) -> Sut {
        Sut {
            ledger: ExtraLedger::from_config(s.config()).unwrap(),
            draws: Vec::new(),
        }
    }

    fn apply(mut sut: Sut, s: &Model, op: Op) -> Sut {
        let now = Instant::from_nanos(s.now);
        match op {
            Op::Wait(_) | Op::Back(_) => {}
            Op::FirstTry => sut.ledger.on_first_try(now),
            Op::Draw(kind) => {
                let got = sut.ledger.try_draw(kind, now);
                assert_eq!(Some(got.is_ok()), s.answer, "draw {kind:?} at {now:?}");
                if let Ok(d) = got {
                    assert_eq!(d.kind(), kind);
                    // Never overspends: the grant left the balance at or above zero.
                    assert!(sut.ledger.micro_balance(now) >= 0, "overspent");
                    sut.draws.push(d);
                }
            }
            Op::Settle(i) => {
                let d = sut.draws.swap_remove(i);
                sut.ledger.settle(d, now);
            }
        }
        sut
    }

    fn check_invariants(sut: &Sut, s: &Model) {
        let view = s.now.max(s.latest);
        assert_eq!(
            sut.ledger.micro_balance(Instant::from_nanos(s.now)),
            s.balance(view)
        );
        for kind in Extra::ALL {
            let i = index(kind);
            assert_eq!(sut.ledger.drawn(kind), s.drawn[i], "{kind:?} drawn");
            assert_eq!(sut.ledger.denied(kind), s.denied[i], "{kind:?} denied");
            let held = s.outstanding.iter().filter(|k| **k == kind).count();
            assert_eq!(sut.ledger.outstanding(kind) as usize, held, "{kind:?} held");
        }
        assert_eq!(
            sut.draws.iter().map(|d| d.kind()).collect::<Vec<_>>(),
            s.outstanding
        );
    }
}

prop_state_machine! {
    #[test]
    fn ledger_matches_the_model(sequential 1..150 => Ledger);
}

proptest! {
    #[test]
    fn extra_attempts_of_all_kinds_never_exceed_the_one_bound(
        ratio_micro in 0..=2_000_000u64,
        min_per_sec in 0..=3u32,
        // None: a first try; Some(kind): an extra attempt is asked for. All within one slot.
        ops in proptest::collection::vec((proptest::option::of(kind()), 0..100_000_000u64), 1..300),
    ) {
        let config = RatioConfig {
            ratio: ratio_micro as f64 / 1e6,
            min_per_sec,
            ttl: Duration::from_secs(10),
            slots: 10,
        };
        let mut ledger: ExtraLedger = ExtraLedger::from_config(config).unwrap();
        let floor = u128::from(min_per_sec) * 10 * M;
        let (mut first_tries, mut granted) = (0u128, 0u128);
        for (op, at) in ops {
            let now = Instant::from_nanos(at);
            let Some(kind) = op else {
                ledger.on_first_try(now);
                first_tries += 1;
                continue;
            };
            let bound = u128::from(ratio_micro) * first_tries + floor;
            match ledger.try_draw(kind, now) {
                Ok(draw) => {
                    granted += 1;
                    prop_assert!(granted * M <= bound, "{granted} extra attempts, bound {bound}");
                    // Settling gives nothing back: an attempt sent is load sent.
                    ledger.settle(draw, now);
                }
                Err(_) => prop_assert!((granted + 1) * M > bound),
            }
        }
        let total: u64 = Extra::ALL.iter().map(|k| ledger.drawn(*k)).sum();
        prop_assert_eq!(u128::from(total), granted);
    }
}

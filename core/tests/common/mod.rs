//! A proptest-state-machine harness shared by the budget tests: random valid sequences of the
//! [`Budget`] calls, applied to the real budget and to a plain reference model of its kind, with
//! every answer and every observable compared after each step.
//!
//! Only valid transitions are generated (never rejected in preconditions): a request ends only
//! when none of its grants is outstanding, a retry is asked for only by a request that holds no
//! grant, a grant is handed back once. Time moves forward by small and huge steps and sometimes
//! backwards; the budget then counts it as the latest time seen, and so does the model.
#![allow(dead_code)]

use std::fmt::Debug;
use std::marker::PhantomData;

use proptest::prelude::*;
use proptest::strategy::Union;
use proptest_state_machine::{ReferenceStateMachine, StateMachineTest};
use reliable_core::budget::{Budget, Denied, Grant};
use reliable_core::outcome::{AttemptOutcome, ErrorClass};
use reliable_core::{Duration, Instant};

/// A reference model of one budget kind, with its random config.
pub trait Model: Clone + Debug + 'static {
    /// The real budget.
    type Budget: Budget + Debug;
    /// A random valid config and the fresh model for it.
    fn strategy() -> BoxedStrategy<Self>;
    /// The real budget for the model's config.
    fn build(&self) -> Self::Budget;
    /// The time scale that matters (a slot's width), in ns.
    fn width(&self) -> u64 {
        1_000_000_000
    }
    /// The calls, at `latest` (the latest time passed to the budget so far).
    fn first_try(&mut self, latest: u64);
    fn try_retry(&mut self, class: ErrorClass, latest: u64) -> Result<u32, Denied>;
    fn attempt_end(&mut self, outcome: AttemptOutcome, grant: Option<u32>, latest: u64);
    fn request_end(&mut self, latest: u64);
    /// Compares the budget's observable state with the model's, viewed at `view` (the later of now
    /// and the latest time), and checks the kind's invariants.
    fn check(&self, budget: &Self::Budget, now: Instant, view: u64);
}

#[derive(Clone, Debug)]
pub enum Op {
    Wait(u64),
    Back(u64),
    FirstTry,
    Retry(ErrorClass),
    End {
        outcome: AttemptOutcome,
        grant: Option<usize>,
    },
    RequestEnd,
}

#[derive(Clone, Debug)]
pub struct State<M> {
    pub model: M,
    pub now: u64,
    pub latest: u64,
    /// Requests started and not ended.
    pub open: u32,
    /// Costs of the grants outstanding, in the same order as the real grants.
    pub grants: Vec<u32>,
    /// The model's answer to the last `Retry`.
    pub answer: Option<Result<u32, Denied>>,
}

pub fn class() -> impl Strategy<Value = ErrorClass> {
    prop_oneof![
        4 => Just(ErrorClass::Transient),
        2 => Just(ErrorClass::Timeout),
        2 => proptest::option::of(0..5_000u64)
            .prop_map(|ms| ErrorClass::Throttled { retry_after: ms.map(Duration::from_millis) }),
        1 => Just(ErrorClass::Fatal),
        1 => Just(ErrorClass::DontRetry),
    ]
}

pub fn outcome() -> impl Strategy<Value = AttemptOutcome> {
    prop_oneof![
        4 => Just(AttemptOutcome::Success),
        5 => class().prop_map(AttemptOutcome::Failed),
        1 => Just(AttemptOutcome::Cancelled),
    ]
}

/// Time steps around `width`: mostly within a slot, sometimes across many, rarely to the end of
/// time, sometimes backwards.
pub fn time_ops(width: u64) -> Vec<(u32, BoxedStrategy<Op>)> {
    let w = width.max(2);
    vec![
        (6, (0..w).prop_map(Op::Wait).boxed()),
        (2, (w..w.saturating_mul(12)).prop_map(Op::Wait).boxed()),
        (1, Just(Op::Wait(u64::MAX / 3)).boxed()),
        (2, (0..w.saturating_mul(3)).prop_map(Op::Back).boxed()),
    ]
}

pub struct Machine<M>(PhantomData<M>);

impl<M: Model> ReferenceStateMachine for Machine<M> {
    type State = State<M>;
    type Transition = Op;

    fn init_state() -> BoxedStrategy<State<M>> {
        M::strategy()
            .prop_map(|model| State {
                model,
                now: 0,
                latest: 0,
                open: 0,
                grants: Vec::new(),
                answer: None,
            })
            .boxed()
    }

    fn transitions(s: &State<M>) -> BoxedStrategy<Op> {
        let mut ops = time_ops(s.model.width());
        ops.push((5, Just(Op::FirstTry).boxed()));
        let held = s.grants.len() as u32;
        if s.open > held {
            // A request without a grant: its attempt may end, it may ask to retry, or end.
            ops.push((6, class().prop_map(Op::Retry).boxed()));
            ops.push((
                4,
                outcome()
                    .prop_map(|outcome| Op::End {
                        outcome,
                        grant: None,
                    })
                    .boxed(),
            ));
            ops.push((3, Just(Op::RequestEnd).boxed()));
        }
        if held > 0 {
            let n = s.grants.len();
            ops.push((
                6,
                (0..n, outcome())
                    .prop_map(|(i, outcome)| Op::End {
                        outcome,
                        grant: Some(i),
                    })
                    .boxed(),
            ));
        }
        Union::new_weighted(ops).boxed()
    }

    fn apply(mut s: State<M>, op: &Op) -> State<M> {
        s.answer = None;
        let calls_budget = !matches!(op, Op::Wait(_) | Op::Back(_));
        match *op {
            Op::Wait(d) => s.now = s.now.saturating_add(d),
            Op::Back(d) => s.now = s.now.saturating_sub(d),
            _ => {}
        }
        if calls_budget {
            s.latest = s.latest.max(s.now);
        }
        let latest = s.latest;
        match *op {
            Op::Wait(_) | Op::Back(_) => {}
            Op::FirstTry => {
                s.model.first_try(latest);
                s.open += 1;
            }
            Op::Retry(class) => {
                let answer = s.model.try_retry(class, latest);
                if let Ok(cost) = answer {
                    s.grants.push(cost);
                }
                s.answer = Some(answer);
            }
            Op::End { outcome, grant } => {
                let grant = grant.map(|i| s.grants.swap_remove(i));
                s.model.attempt_end(outcome, grant, latest);
            }
            Op::RequestEnd => {
                s.model.request_end(latest);
                s.open -= 1;
            }
        }
        s
    }
}

/// The real budget and the grants it handed out, in the model's order.
#[derive(Debug)]
pub struct Sut<B> {
    pub budget: B,
    pub grants: Vec<Grant>,
}

impl<M: Model> StateMachineTest for Machine<M> {
    type SystemUnderTest = Sut<M::Budget>;
    type Reference = Machine<M>;

    fn init_test(s: &State<M>) -> Sut<M::Budget> {
        Sut {
            budget: s.model.build(),
            grants: Vec::new(),
        }
    }

    fn apply(mut sut: Sut<M::Budget>, s: &State<M>, op: Op) -> Sut<M::Budget> {
        let now = Instant::from_nanos(s.now);
        match op {
            Op::Wait(_) | Op::Back(_) => {}
            Op::FirstTry => sut.budget.on_first_try(now),
            Op::Retry(class) => {
                let got = sut.budget.try_retry(class, now).map(|g| {
                    let cost = g.cost();
                    sut.grants.push(g);
                    cost
                });
                assert_eq!(Some(got), s.answer, "try_retry({class:?}) at {now:?}");
            }
            Op::End { outcome, grant } => {
                let grant = grant.map(|i| sut.grants.swap_remove(i));
                sut.budget.on_attempt_end(outcome, grant, now);
            }
            Op::RequestEnd => sut.budget.on_request_end(now),
        }
        sut
    }

    fn check_invariants(sut: &Sut<M::Budget>, s: &State<M>) {
        assert_eq!(sut.grants.len(), s.grants.len());
        s.model
            .check(&sut.budget, Instant::from_nanos(s.now), s.now.max(s.latest));
    }
}

/// Whether an event recorded at `at` is still in a window of `n` slots of `width` viewed at `view`.
pub fn live(at: u64, view: u64, width: u64, n: u32) -> bool {
    at / width + u64::from(n) > view / width
}

//! Both circuit breakers against a plain reference model, on random operation sequences.
//!
//! The model is written for clarity, not speed: a `VecDeque` of outcomes for the count window, a
//! list of timestamped outcomes for the time window, a list of leased probes, exact integer rate
//! comparisons. Random configs are drawn too (every trip rule, both window kinds, growth, jitter,
//! bounded and unbounded probes, both probe rules, slow start). Time steps go forward, backwards and
//! by huge jumps. Each operation is applied to the `&mut` [`CircuitBreaker`] and to the lock-free
//! [`SharedBreaker`] alike; after every step each must give the model's answer, and the invariants
//! of the design must hold for each. So the shared breaker makes the same decisions as the `&mut`
//! one for every sequential history the generator draws.
//!
//! `PROPTEST_CASES=5000 cargo test -p reliable-core --test breaker_state_machine` is CI's long pass.

use std::collections::VecDeque;

use proptest::prelude::*;
use proptest_state_machine::{ReferenceStateMachine, StateMachineTest, prop_state_machine};
use reliable_core::breaker::{
    AnyWindow, AtomicAnyWindow, Breaker, BreakerConfig, BreakerPolicy, CircuitBreaker,
    HalfOpenConfig, LastTransition, OpenConfig, Outcome, Permit, ProbeRound, ProbeRule,
    RejectReason, SharedBreaker, SlowCallRule, SlowStartConfig, State, Transition, WindowConfig,
};
use reliable_core::sample::{splitmix64, uniform_between};
use reliable_core::{Duration, Instant};

const SLOTS: usize = 4;
type Mutable = CircuitBreaker<&'static BreakerPolicy, AnyWindow<128, 8, 2>, SLOTS, LastTransition>;
type Shared =
    SharedBreaker<&'static BreakerPolicy, AtomicAnyWindow<128, 8, 2>, SLOTS, LastTransition>;

/// A breaker under test: driven through the `Breaker` trait, its transitions read from its
/// `LastTransition` observer after each call.
trait UnderTest: Breaker {
    const NAME: &'static str;
    fn taken(&self) -> Option<Transition>;
}

impl UnderTest for Mutable {
    const NAME: &'static str = "CircuitBreaker";
    fn taken(&self) -> Option<Transition> {
        self.observer().take()
    }
}

/// `SharedBreaker` implements `Breaker` through `&SharedBreaker`.
impl UnderTest for &'static Shared {
    const NAME: &'static str = "SharedBreaker";
    fn taken(&self) -> Option<Transition> {
        self.observer().take()
    }
}

/// Parameters drawn for one test case, in the units the model uses.
#[derive(Clone, Debug)]
struct Params {
    consecutive: Option<u32>,
    failure_ppm: Option<u32>,
    slow: Option<(u64, u32)>,
    minimum_calls: u32,
    count_window: Option<u32>,
    time_window: Option<(u64, u32)>,
    open_base: u64,
    growth: (u64, u64),
    open_max: u64,
    jitter_ppm: u32,
    max_in_flight: Option<u32>,
    rule: ProbeRule,
    probe_timeout: u64,
    slow_start: Option<(u64, u32)>,
    seed: u64,
    strictly_after: bool,
    decide_at_minimum: bool,
    /// Half-open: how long a round may last, and whether it then closes.
    max_wait: Option<u64>,
    max_wait_closes: bool,
    shadow: bool,
    initial_state: State,
}

impl Params {
    fn config(&self) -> BreakerConfig {
        let ppm = |p: u32| f64::from(p) / 1e6;
        BreakerConfig {
            consecutive_failures: self.consecutive,
            failure_rate: self.failure_ppm.map(ppm),
            slow_calls: self.slow.map(|(ns, p)| SlowCallRule {
                threshold: Duration::from_nanos(ns),
                rate: ppm(p),
            }),
            minimum_calls: self.minimum_calls,
            window: match (self.count_window, self.time_window) {
                (Some(calls), _) => WindowConfig::Count { calls },
                (None, Some((width, buckets))) => WindowConfig::Time {
                    span: Duration::from_nanos(width * u64::from(buckets)),
                    buckets,
                },
                (None, None) => unreachable!(),
            },
            open: OpenConfig {
                duration: Duration::from_nanos(self.open_base),
                growth: self.growth.0 as f64 / self.growth.1 as f64,
                max: Some(Duration::from_nanos(self.open_max)),
                jitter: ppm(self.jitter_ppm),
                strictly_after: self.strictly_after,
            },
            half_open: HalfOpenConfig {
                max_in_flight: self.max_in_flight,
                rule: self.rule,
                probe_timeout: Duration::from_nanos(self.probe_timeout),
                decide_at_minimum: self.decide_at_minimum,
                max_wait: self.max_wait.map(Duration::from_nanos),
                max_wait_closes: self.max_wait_closes,
            },
            slow_start: self.slow_start.map(|(ramp, p)| SlowStartConfig {
                ramp: Duration::from_nanos(ramp),
                initial: ppm(p),
            }),
            shadow: self.shadow,
            initial_state: self.initial_state,
        }
    }
}

const MS: u64 = 1_000_000;

fn params() -> impl Strategy<Value = Params> {
    let rules = (
        proptest::option::of(1u32..=5),
        proptest::option::of(prop_oneof![
            Just(500_000u32),
            Just(100_000),
            Just(1_000_000),
            1u32..=1_000_000
        ]),
        proptest::option::of((
            1u64..=2_000,
            prop_oneof![Just(500_000u32), Just(1_000_000), 1u32..=1_000_000],
        )),
    );
    let window = prop_oneof![
        (1u32..=128).prop_map(|c| (Some(c), None)),
        ((1u64..=5_000).prop_map(|ms| ms * MS), 1u32..=8).prop_map(|t| (None, Some(t))),
    ];
    let open = (
        1u64..=60_000,
        prop_oneof![Just((1u64, 1u64)), Just((3, 2)), Just((2, 1)), Just((3, 1))],
        1u64..=1_000,
        prop_oneof![Just(0u32), Just(100_000), Just(500_000)],
    );
    let half = (
        proptest::option::of(1u32..=SLOTS as u32),
        prop_oneof![
            (1u32..=3).prop_map(|s| ProbeRule::Consecutive { successes: s }),
            (1u32..=5).prop_map(|c| ProbeRule::Rate { calls: c })
        ],
        prop_oneof![(100u64..=30_000).prop_map(|ms| ms * MS), Just(u64::MAX)],
        proptest::option::of((1u64..=20_000).prop_map(|ms| ms * MS)),
        any::<bool>(),
    );
    let slow_start = proptest::option::of((
        1u64..=20_000,
        prop_oneof![Just(0u32), Just(100_000), Just(500_000), Just(1_000_000)],
    ));
    (
        rules,
        window,
        0.0f64..=1.0,
        open,
        half,
        slow_start,
        (any::<u64>(), any::<bool>(), any::<bool>(), any::<bool>()),
        prop_oneof![
            5 => Just(State::Closed),
            1 => Just(State::HalfOpen),
            1 => Just(State::ForcedOpen),
            1 => Just(State::Disabled),
        ],
    )
        .prop_map(
            |(
                (consecutive, failure_ppm, slow),
                (count_window, time_window),
                min_frac,
                open,
                half,
                slow_start,
                (seed, strictly_after, decide_at_minimum, shadow),
                initial_state,
            )| {
                let mut consecutive = consecutive;
                let slow = slow.map(|(ms, p)| (ms * MS, p));
                if consecutive.is_none() && failure_ppm.is_none() && slow.is_none() {
                    consecutive = Some(3);
                }
                let has_rate = failure_ppm.is_some() || slow.is_some();
                let minimum_calls = match count_window {
                    Some(c) => 1 + ((f64::from(c - 1)) * min_frac) as u32,
                    None => 1 + (20.0 * min_frac) as u32,
                };
                let (base_ms, growth, max_mult, jitter_ppm) = open;
                let rule = match half.1 {
                    ProbeRule::Rate { .. } if !has_rate => ProbeRule::Consecutive { successes: 2 },
                    r => r,
                };
                Params {
                    consecutive,
                    failure_ppm,
                    slow,
                    minimum_calls,
                    count_window,
                    time_window,
                    open_base: base_ms * MS,
                    growth,
                    open_max: base_ms * MS * if growth == (1, 1) { 1 } else { max_mult },
                    jitter_ppm,
                    max_in_flight: half.0,
                    rule,
                    probe_timeout: half.2,
                    max_wait: half.3,
                    max_wait_closes: half.4,
                    slow_start: slow_start.map(|(ms, p)| (ms * MS, p)),
                    seed,
                    strictly_after,
                    decide_at_minimum,
                    shadow,
                    initial_state,
                }
            },
        )
}

/// A time step: forwards, backwards or a huge jump.
#[derive(Clone, Copy, Debug)]
enum Step {
    Forward(u64),
    Back(u64),
    Jump,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        8 => (0u64..=2_000).prop_map(|ms| Step::Forward(ms * MS)),
        3 => (0u64..=90_000).prop_map(|ms| Step::Forward(ms * MS)),
        2 => (0u64..=10_000).prop_map(|ms| Step::Back(ms * MS)),
        1 => Just(Step::Jump),
    ]
}

#[derive(Clone, Debug)]
enum Op {
    Acquire(Step),
    Record {
        pick: usize,
        outcome: Outcome,
        step: Step,
    },
    Wait(Step),
    ForceOpen,
    Disable,
    Reset,
    /// An operator's commands: open for a while, half-open now, close.
    OpenFor(u64),
    HalfOpenNow,
    Close,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum MState {
    Closed,
    Open { until: u64 },
    HalfOpen,
    Forced,
    Disabled,
}

#[derive(Clone, Debug)]
struct MPermit {
    epoch: u64,
    started: u64,
    id: u64,
}

/// What a call to the breaker should have answered.
#[derive(Clone, Debug, PartialEq)]
enum Answer {
    Admit {
        probe: bool,
        /// Shadow mode admitted a call the rules rejected.
        shadow: bool,
        transition: Option<(State, State)>,
    },
    Reject {
        reason: RejectReason,
        transition: Option<(State, State)>,
    },
    Recorded(Option<(State, State)>),
    Manual(Option<(State, State)>),
    Nothing,
}

#[derive(Clone, Debug)]
struct Model {
    p: Params,
    clock: u64,
    latest: u64,
    state: MState,
    epoch: u64,
    next_id: u64,
    outstanding: Vec<MPermit>,
    count_window: VecDeque<(bool, bool)>,
    time_window: Vec<(u64, bool, bool)>,
    consecutive: u32,
    reopens: u32,
    /// When this half-open round began.
    round_since: u64,
    /// Probes leased in this half-open round: (permit id, issued at).
    leases: Vec<(u64, u64)>,
    issued: u32,
    successes: u32,
    failures: u32,
    slow: u32,
    ramp_since: Option<u64>,
    credit: u64,
    /// Opened by an operator's `open_for`, whose time the maximum open time does not bound.
    by_hand: bool,
    /// What the last operation should have answered.
    last_answer: Answer,
}

impl Model {
    fn new(p: Params) -> Self {
        let state = match p.initial_state {
            State::Closed => MState::Closed,
            State::HalfOpen => MState::HalfOpen,
            State::ForcedOpen => MState::Forced,
            State::Disabled => MState::Disabled,
            State::Open => unreachable!("refused by the policy"),
        };
        Model {
            p,
            clock: 0,
            latest: 0,
            state,
            epoch: 0,
            next_id: 0,
            outstanding: Vec::new(),
            count_window: VecDeque::new(),
            time_window: Vec::new(),
            consecutive: 0,
            reopens: 0,
            round_since: 0,
            leases: Vec::new(),
            issued: 0,
            successes: 0,
            failures: 0,
            slow: 0,
            ramp_since: None,
            credit: 0,
            by_hand: false,
            last_answer: Answer::Nothing,
        }
    }

    fn advance(&mut self, s: Step) {
        self.clock = match s {
            Step::Forward(d) => self.clock.saturating_add(d),
            Step::Back(d) => self.clock.saturating_sub(d),
            Step::Jump => self.clock.saturating_add(u64::MAX / 4),
        };
    }

    /// A call to the breaker: it sees the clock, and never goes back in time.
    fn observe(&mut self) {
        self.latest = self.latest.max(self.clock);
    }

    /// The time a read-only query at the current clock sees.
    fn query_time(&self) -> u64 {
        self.latest.max(self.clock)
    }

    fn public(s: MState) -> State {
        match s {
            MState::Closed => State::Closed,
            MState::Open { .. } => State::Open,
            MState::HalfOpen => State::HalfOpen,
            MState::Forced => State::ForcedOpen,
            MState::Disabled => State::Disabled,
        }
    }

    /// Effective state for `state(now)`.
    /// The half-open round's tallies as the breakers show them: none outside half-open, only the
    /// successes in a row under `Consecutive`.
    fn probe_round(&self) -> ProbeRound {
        match (&self.state, self.p.rule) {
            (MState::HalfOpen, ProbeRule::Rate { .. }) => ProbeRound {
                successes: self.successes,
                failures: self.failures,
                slow: self.slow,
                issued: if self.p.max_in_flight.is_some() {
                    self.issued
                } else {
                    0
                },
            },
            (MState::HalfOpen, ProbeRule::Consecutive { .. }) => ProbeRound {
                successes: self.successes,
                ..ProbeRound::default()
            },
            _ => ProbeRound::default(),
        }
    }

    fn visible_state(&self) -> State {
        match self.state {
            MState::Open { until } if self.open_over(self.query_time(), until) => State::HalfOpen,
            s => Self::public(s),
        }
    }

    /// Whether the open time ending at `until` is over at `now` (strictly after it, if so set).
    fn open_over(&self, now: u64, until: u64) -> bool {
        if self.p.strictly_after {
            now > until
        } else {
            now >= until
        }
    }

    /// The wait until the first instant the open time ending at `until` is over.
    fn open_left(&self, until: u64) -> Duration {
        Duration::from_nanos(until - self.latest + u64::from(self.p.strictly_after))
    }

    fn go(&mut self, to: MState) -> Option<(State, State)> {
        let from = Self::public(self.state);
        self.state = to;
        self.epoch += 1;
        if to == MState::HalfOpen {
            self.round_since = self.latest;
        }
        self.leases.clear();
        self.issued = 0;
        self.successes = 0;
        self.failures = 0;
        self.slow = 0;
        (from != Self::public(to)).then_some((from, Self::public(to)))
    }

    /// `min(max, floor(base · growth^reopens))`, exact: the growth factors drawn (1, 3/2, 2, 3)
    /// are exact in the breaker's binary fixed point, so it rounds once, at the end, as this does.
    fn nominal_open(&self) -> u64 {
        let (num, den) = (u128::from(self.p.growth.0), u128::from(self.p.growth.1));
        let (base, max) = (u128::from(self.p.open_base), u128::from(self.p.open_max));
        let (mut num_k, mut den_k) = (1u128, 1u128);
        for _ in 0..self.reopens {
            if base * num_k / den_k >= max {
                break;
            }
            num_k *= num;
            den_k *= den;
        }
        (base * num_k / den_k).min(max) as u64
    }

    fn open(&mut self) -> Option<(State, State)> {
        // The documented jitter draw: one sample per opening, from the seed and the generation.
        let d = self.nominal_open();
        let sample = splitmix64(self.p.seed ^ self.epoch.wrapping_mul(0x2545_F491_4F6C_DD1D));
        let spread = (u128::from(d) * u128::from(self.p.jitter_ppm) / 1_000_000) as u64;
        let open = uniform_between(sample, d - spread, (d + spread).min(self.p.open_max));
        let until = self.latest.saturating_add(open);
        self.consecutive = 0;
        self.by_hand = false;
        self.go(MState::Open { until })
    }

    fn close(&mut self) -> Option<(State, State)> {
        self.reopens = 0;
        self.consecutive = 0;
        self.count_window.clear();
        self.time_window.clear();
        self.credit = 0;
        self.ramp_since = self.p.slow_start.map(|_| self.latest);
        self.go(MState::Closed)
    }

    /// (calls, failures, slow calls, slow failures) in the window as of `at`.
    fn window_counts(&self, at: u64) -> (u64, u64, u64, u64) {
        let items: Vec<(bool, bool)> = match self.p.time_window {
            Some((width, n)) => self
                .time_window
                .iter()
                .filter(|(t, _, _)| t / width + u64::from(n) > at / width)
                .map(|&(_, f, s)| (f, s))
                .collect(),
            None => self.count_window.iter().copied().collect(),
        };
        let f = items.iter().filter(|c| c.0).count() as u64;
        let s = items.iter().filter(|c| c.1).count() as u64;
        let sf = items.iter().filter(|c| c.0 && c.1).count() as u64;
        (items.len() as u64, f, s, sf)
    }

    fn push_window(&mut self, failed: bool, slow: bool) {
        if let Some(size) = self.p.count_window {
            self.count_window.push_back((failed, slow));
            if self.count_window.len() > size as usize {
                self.count_window.pop_front();
            }
        } else {
            self.time_window.push((self.latest, failed, slow));
        }
    }

    fn rates_fire(&self, calls: u64, failures: u64, slow: u64) -> bool {
        let over =
            |n: u64, ppm: Option<u32>| ppm.is_some_and(|p| n * 1_000_000 >= u64::from(p) * calls);
        calls > 0 && (over(failures, self.p.failure_ppm) || over(slow, self.p.slow.map(|s| s.1)))
    }

    fn rate_round_done(&mut self) -> Option<Option<(State, State)>> {
        let ProbeRule::Rate { calls } = self.p.rule else {
            return None;
        };
        let done = self.successes + self.failures;
        let quorum = if self.p.decide_at_minimum {
            calls.min(self.p.minimum_calls)
        } else {
            calls
        };
        if done < quorum {
            return None;
        }
        Some(
            if self.rates_fire(
                u64::from(done),
                u64::from(self.failures),
                u64::from(self.slow),
            ) {
                self.reopens += 1;
                self.open()
            } else {
                self.close()
            },
        )
    }

    fn issue(&mut self, probe: bool, transition: Option<(State, State)>) -> Answer {
        let id = self.next_id;
        self.next_id += 1;
        self.outstanding.push(MPermit {
            epoch: self.epoch,
            started: self.latest,
            id,
        });
        if probe && self.p.max_in_flight.is_some() {
            self.leases.push((id, self.latest));
        }
        Answer::Admit {
            probe,
            shadow: false,
            transition,
        }
    }

    fn acquire(&mut self) -> Answer {
        match self.state {
            MState::Disabled => self.issue(false, None),
            MState::Forced => Answer::Reject {
                reason: RejectReason::ForcedOpen,
                transition: None,
            },
            MState::Closed => self.acquire_closed(None),
            MState::Open { until } if !self.open_over(self.latest, until) => Answer::Reject {
                reason: RejectReason::Open {
                    retry_after: self.open_left(until),
                },
                transition: None,
            },
            MState::Open { .. } => {
                let t = self.go(MState::HalfOpen);
                self.acquire_half_open(t)
            }
            MState::HalfOpen => self.acquire_half_open(None),
        }
    }

    fn acquire_closed(&mut self, transition: Option<(State, State)>) -> Answer {
        if let (Some(since), Some((ramp, initial))) = (self.ramp_since, self.p.slow_start) {
            let elapsed = self.latest - since;
            if elapsed >= ramp {
                self.ramp_since = None;
            } else {
                let share = u64::from(initial)
                    + (u128::from(1_000_000 - initial) * u128::from(elapsed) / u128::from(ramp))
                        as u64;
                self.credit += share;
                if self.credit < 1_000_000 {
                    return Answer::Reject {
                        reason: RejectReason::SlowStart,
                        transition,
                    };
                }
                self.credit -= 1_000_000;
            }
        }
        self.issue(false, transition)
    }

    /// A round that outlived its maximum wait ends: open again (rejected as open) or closed
    /// (decided again as closed). `None` while it has time left.
    fn max_wait_over(&mut self) -> Option<Answer> {
        let wait = self.p.max_wait?;
        if self.latest - self.round_since < wait {
            return None;
        }
        Some(if self.p.max_wait_closes {
            let t = self.close();
            self.acquire_closed(t)
        } else {
            self.reopens += 1;
            let t = self.open();
            let MState::Open { until } = self.state else {
                unreachable!()
            };
            Answer::Reject {
                reason: RejectReason::Open {
                    retry_after: self.open_left(until),
                },
                transition: t,
            }
        })
    }

    fn acquire_half_open(&mut self, entered: Option<(State, State)>) -> Answer {
        let Some(max) = self.p.max_in_flight else {
            if let Some(answer) = self.max_wait_over() {
                return answer;
            }
            self.issued += 1;
            return self.issue(true, entered);
        };
        let timeout = self.p.probe_timeout;
        let now = self.latest;
        let before = self.leases.len();
        self.leases
            .retain(|&(_, at)| at.saturating_add(timeout) > now);
        let expired = (before - self.leases.len()) as u32;
        if expired > 0 {
            let decided = match self.p.rule {
                ProbeRule::Consecutive { .. } => {
                    self.reopens += 1;
                    Some(self.open())
                }
                ProbeRule::Rate { .. } => {
                    self.failures += expired;
                    self.rate_round_done()
                }
            };
            if let Some(t) = decided {
                return match self.state {
                    MState::Open { until } => Answer::Reject {
                        reason: RejectReason::Open {
                            retry_after: self.open_left(until),
                        },
                        transition: t,
                    },
                    _ => self.acquire_closed(t),
                };
            }
        }
        if let Some(answer) = self.max_wait_over() {
            return answer;
        }
        let full = self.leases.len() as u32 >= max
            || matches!(self.p.rule, ProbeRule::Rate { calls } if self.issued >= calls);
        if full {
            return Answer::Reject {
                reason: RejectReason::HalfOpenFull,
                transition: entered,
            };
        }
        self.issued += 1;
        self.issue(true, entered)
    }

    fn record(&mut self, pick: usize, outcome: Outcome) -> Answer {
        let permit = self.outstanding.remove(pick % self.outstanding.len());
        if permit.epoch != self.epoch {
            return Answer::Recorded(None);
        }
        let slow = self
            .p
            .slow
            .is_some_and(|(threshold, _)| self.latest - permit.started > threshold);
        let failed = outcome == Outcome::Failure;
        Answer::Recorded(match self.state {
            MState::Closed => {
                if outcome == Outcome::Ignored {
                    return Answer::Recorded(None);
                }
                self.consecutive = if failed { self.consecutive + 1 } else { 0 };
                self.push_window(failed, slow);
                // The rates count every slow call, failed or not: the split is only read.
                let (calls, f, s, _) = self.window_counts(self.latest);
                let has_rate = self.p.failure_ppm.is_some() || self.p.slow.is_some();
                let trip = self.p.consecutive.is_some_and(|c| self.consecutive >= c)
                    || (has_rate
                        && calls >= u64::from(self.p.minimum_calls)
                        && self.rates_fire(calls, f, s));
                if trip { self.open() } else { None }
            }
            MState::Disabled => {
                if outcome != Outcome::Ignored {
                    self.push_window(failed, slow);
                }
                None
            }
            MState::HalfOpen => {
                if self.p.max_in_flight.is_some() {
                    let before = self.leases.len();
                    self.leases.retain(|&(id, _)| id != permit.id);
                    if self.leases.len() == before {
                        // Its lease expired and was already counted as a failure.
                        return Answer::Recorded(None);
                    }
                }
                let bad = failed || slow;
                match (outcome, self.p.rule) {
                    (Outcome::Ignored, _) => {
                        self.issued = self.issued.saturating_sub(1);
                        None
                    }
                    (_, ProbeRule::Consecutive { .. }) if bad => {
                        self.reopens += 1;
                        self.open()
                    }
                    (_, ProbeRule::Consecutive { successes }) => {
                        self.successes += 1;
                        if self.successes >= successes {
                            self.close()
                        } else {
                            None
                        }
                    }
                    (_, ProbeRule::Rate { .. }) => {
                        if failed {
                            self.failures += 1;
                        } else {
                            self.successes += 1;
                        }
                        self.slow += u32::from(slow);
                        self.rate_round_done().flatten()
                    }
                }
            }
            MState::Open { .. } | MState::Forced => None,
        })
    }

    /// Shadow mode: a call the rules rejected (not by an operator's forced open) is admitted,
    /// with a permit whose result is ignored.
    fn shadowed(&mut self, answer: Answer) -> Answer {
        match answer {
            Answer::Reject { reason, transition }
                if self.p.shadow && reason != RejectReason::ForcedOpen =>
            {
                let id = self.next_id;
                self.next_id += 1;
                self.outstanding.push(MPermit {
                    epoch: u64::MAX,
                    started: self.latest,
                    id,
                });
                Answer::Admit {
                    probe: false,
                    shadow: true,
                    transition,
                }
            }
            a => a,
        }
    }

    fn manual(&mut self, op: &Op) -> Answer {
        Answer::Manual(match *op {
            Op::ForceOpen => self.go(MState::Forced),
            Op::Disable => self.go(MState::Disabled),
            Op::OpenFor(d) => {
                self.consecutive = 0;
                self.by_hand = true;
                self.go(MState::Open {
                    until: self.latest.saturating_add(d),
                })
            }
            // A closed breaker has nothing to probe: refused, nothing changes.
            Op::HalfOpenNow if self.state == MState::Closed => None,
            Op::HalfOpenNow => {
                self.consecutive = 0;
                self.go(MState::HalfOpen)
            }
            Op::Close => self.close(),
            _ => {
                self.reopens = 0;
                self.consecutive = 0;
                self.credit = 0;
                self.count_window.clear();
                self.time_window.clear();
                self.ramp_since = None;
                self.go(MState::Closed)
            }
        })
    }
}

struct BreakerMachine;

impl ReferenceStateMachine for BreakerMachine {
    type State = Model;
    type Transition = Op;

    fn init_state() -> BoxedStrategy<Model> {
        params().prop_map(Model::new).boxed()
    }

    fn transitions(state: &Model) -> BoxedStrategy<Op> {
        let outcome = prop_oneof![4 => Just(Outcome::Failure), 4 => Just(Outcome::Success), 1 => Just(Outcome::Ignored)];
        let base = prop_oneof![
            6 => step().prop_map(Op::Acquire),
            2 => step().prop_map(Op::Wait),
            1 => prop_oneof![
                8 => Just(Op::Reset),
                1 => Just(Op::ForceOpen),
                1 => Just(Op::Disable),
                2 => (0u64..=60_000).prop_map(|ms| Op::OpenFor(ms * MS)),
                2 => Just(Op::HalfOpenNow),
                2 => Just(Op::Close),
            ],
        ];
        if state.outstanding.is_empty() {
            base.boxed()
        } else {
            prop_oneof![
                3 => base,
                5 => (any::<usize>(), outcome, step()).prop_map(|(pick, outcome, step)| Op::Record { pick, outcome, step }),
            ]
            .boxed()
        }
    }

    /// Only used while shrinking: a `Record` needs a permit to hand back.
    fn preconditions(state: &Model, op: &Op) -> bool {
        !matches!(op, Op::Record { .. }) || !state.outstanding.is_empty()
    }

    fn apply(mut state: Model, op: &Op) -> Model {
        state.last_answer = match op {
            Op::Acquire(s) => {
                state.advance(*s);
                state.observe();
                let answer = state.acquire();
                state.shadowed(answer)
            }
            Op::Record {
                pick,
                outcome,
                step,
            } => {
                state.advance(*step);
                state.observe();
                state.record(*pick, *outcome)
            }
            Op::Wait(s) => {
                state.advance(*s);
                Answer::Nothing
            }
            manual => {
                state.observe();
                state.manual(manual)
            }
        };
        state
    }
}

/// One breaker under test and the permits it has handed out.
struct Driven<B> {
    breaker: B,
    permits: Vec<Permit>,
}

impl<B: UnderTest> Driven<B> {
    fn apply(&mut self, op: &Op, now: Instant) -> Answer {
        match *op {
            Op::Acquire(_) => match self.breaker.try_acquire(now) {
                Ok(p) => {
                    let a = Answer::Admit {
                        probe: p.is_probe(),
                        shadow: p.is_shadow(),
                        transition: self.transition(),
                    };
                    self.permits.push(p);
                    a
                }
                Err(r) => Answer::Reject {
                    reason: r.reason,
                    transition: self.transition(),
                },
            },
            Op::Record { pick, outcome, .. } => {
                let p = self.permits.remove(pick % self.permits.len());
                self.breaker.record(p, outcome, now);
                Answer::Recorded(self.transition())
            }
            Op::Wait(_) => Answer::Nothing,
            Op::ForceOpen => {
                self.breaker.force_open(now);
                Answer::Manual(self.transition())
            }
            Op::Disable => {
                self.breaker.disable(now);
                Answer::Manual(self.transition())
            }
            Op::Reset => {
                self.breaker.reset(now);
                Answer::Manual(self.transition())
            }
            Op::OpenFor(d) => {
                self.breaker.open_for(Duration::from_nanos(d), now);
                Answer::Manual(self.transition())
            }
            Op::HalfOpenNow => {
                let moved = self.breaker.half_open(now);
                let t = self.transition();
                assert!(moved || t.is_none(), "{}: refused but moved", B::NAME);
                Answer::Manual(t)
            }
            Op::Close => {
                self.breaker.close(now);
                Answer::Manual(self.transition())
            }
        }
    }

    /// The transition the last call made, if any, as the model states it.
    fn transition(&self) -> Option<(State, State)> {
        self.breaker.taken().map(|t| (t.from, t.to))
    }

    fn check_invariants(&self, model: &Model, now: Instant) {
        let name = B::NAME;
        let b = self.breaker.snapshot(now);
        assert_eq!(b.state, model.visible_state(), "{name}: state");
        assert_eq!(self.breaker.state(now), b.state, "{name}: state");
        let (calls, failures, slow, slow_failures) = model.window_counts(model.query_time());
        let c = b.counts;
        assert_eq!(
            (c.calls, c.failures, c.slow),
            (calls, failures, slow),
            "{name}: window counts"
        );
        // The slow calls split into slow failures and slow successes, as the model counts them.
        assert_eq!(
            (c.slow_failures, c.slow_successes()),
            (slow_failures, slow - slow_failures),
            "{name}: slow failures and slow successes"
        );
        // Half-open probes in flight never exceed the limit.
        if let Some(max) = model.p.max_in_flight {
            assert!(b.probes_in_flight <= max, "{name}: probes in flight");
        }
        assert_eq!(b.probe_round, model.probe_round(), "{name}: probe round");
        assert_eq!(b.consecutive_failures, model.consecutive, "{name}");
        assert_eq!(b.reopens, model.reopens, "{name}");
        assert_eq!(
            u64::from(b.generation),
            model.epoch & u64::from(u32::MAX),
            "{name}: generation"
        );
    }
}

/// The `&mut` breaker and the shared one, driven by the same operations.
struct Sut {
    mutable: Driven<Mutable>,
    shared: Driven<&'static Shared>,
    policy: &'static BreakerPolicy,
    clock: u64,
}

impl StateMachineTest for Sut {
    type SystemUnderTest = Sut;
    type Reference = BreakerMachine;

    fn init_test(model: &Model) -> Sut {
        let policy: &'static BreakerPolicy = Box::leak(Box::new(
            BreakerPolicy::new(model.p.config()).expect("valid config"),
        ));
        Sut {
            mutable: Driven {
                breaker: Mutable::with_storage(policy)
                    .expect("fits")
                    .with_seed(model.p.seed)
                    .observe(LastTransition::default()),
                permits: Vec::new(),
            },
            shared: Driven {
                breaker: Box::leak(Box::new(
                    Shared::with_storage(policy)
                        .expect("fits")
                        .with_seed(model.p.seed)
                        .observe(LastTransition::default()),
                )),
                permits: Vec::new(),
            },
            policy,
            clock: 0,
        }
    }

    fn apply(mut sut: Sut, model: &Model, op: Op) -> Sut {
        // The model has already applied `op`; `model.clock` is the time of this call.
        sut.clock = model.clock;
        let now = Instant::from_nanos(model.clock);
        let got = sut.mutable.apply(&op, now);
        let got_shared = sut.shared.apply(&op, now);
        if std::env::var_os("SM_DEBUG").is_some() {
            eprintln!(
                "{op:?} clock={} latest={} got={got:?} shared={got_shared:?} model_state={:?} leases={:?} s/f={}/{} issued={}",
                model.clock,
                model.latest,
                model.state,
                model.leases,
                model.successes,
                model.failures,
                model.issued
            );
        }
        assert_eq!(&got, &model.last_answer, "CircuitBreaker: op {op:?}");
        assert_eq!(&got_shared, &model.last_answer, "SharedBreaker: op {op:?}");
        // Open rejects until its time is up, and never asks to wait longer than the maximum.
        if let Answer::Reject {
            reason: RejectReason::Open { retry_after },
            ..
        } = got
        {
            // (With `strictly_after`, the wait runs to the nanosecond after the open time.)
            let strict = Duration::from_nanos(u64::from(model.p.strictly_after));
            assert!(
                model.by_hand || retry_after <= sut.policy.max_open_time().saturating_add(strict)
            );
            // Zero only where the open time saturated at the end of representable time.
            assert!(
                model.by_hand
                    || !retry_after.is_zero()
                    || Instant::from_nanos(model.query_time())
                        .saturating_add(sut.policy.max_open_time())
                        == Instant::MAX
            );
        }
        sut
    }

    fn check_invariants(sut: &Sut, model: &Model) {
        let now = Instant::from_nanos(sut.clock);
        sut.mutable.check_invariants(model, now);
        sut.shared.check_invariants(model, now);
    }
}

prop_state_machine! {
    #![proptest_config(ProptestConfig { cases: 256, max_shrink_iters: 4096, .. ProptestConfig::default() })]
    #[test]
    fn breakers_match_the_reference_model(sequential 1..120 => Sut);
}

//! The spend breaker against a plain reference model, on random operation sequences.
//!
//! The model keeps every charge as a timestamped entry (per window, what is left of it after
//! refunds) and sums the live ones on demand; waits are found by sorting the entries' expiry times;
//! provider quotas and the money signal are plain fields. Random configs are drawn (price, which
//! windows and metrics have ceilings, bucket counts, threshold), and time steps go forward by
//! seconds, hours or days, and backwards. After every step the breaker must give the model's answer
//! (admit with its amount and transition, or refuse with the same reason, `retry_after` and
//! transition; settlements charge the same), its state and usage must match, and every refusal's
//! `retry_after` must be exact: a copy of the breaker admits the same call at `now + retry_after`
//! and refuses it one nanosecond earlier.
//!
//! `PROPTEST_CASES=5000 cargo test -p reliable-core --test spend_state_machine` is CI's long pass.

use proptest::prelude::*;
use proptest_state_machine::{ReferenceStateMachine, StateMachineTest, prop_state_machine};
use reliable_core::provider::{QuotaKind, QuotaUpdate};
use reliable_core::spend::{
    Amount, Ceiling, Metric, Price, RefuseReason, Reservation, Span, SpendBreaker, SpendConfig,
    SpendPolicy, SpendState, Tokens, Transition,
};
use reliable_core::{Duration, Instant};

type Breaker = SpendBreaker<&'static SpendPolicy, 6, 24, 30>;

const SEC: u64 = 1_000_000_000;

/// A drawn ceiling: (tokens, cost, buckets).
type RawCeiling = Option<(Option<u64>, Option<u64>, u32)>;

#[derive(Clone, Debug)]
struct Params {
    price: (u64, u64),
    /// Per span: (tokens ceiling, cost ceiling, buckets).
    ceilings: [RawCeiling; 3],
    throttle_ppm: u32,
    money_open_s: u64,
}

impl Params {
    fn config(&self) -> SpendConfig {
        let c = |x: RawCeiling| {
            x.map(|(tokens, cost, buckets)| Ceiling {
                tokens,
                cost,
                buckets,
            })
        };
        SpendConfig {
            price: Price::per_million_tokens(self.price.0, self.price.1),
            minute: c(self.ceilings[0]),
            day: c(self.ceilings[1]),
            month: c(self.ceilings[2]),
            throttle_below: f64::from(self.throttle_ppm) / 1e6,
            money_open: Duration::from_secs(self.money_open_s),
        }
    }

    fn cost(&self, t: Tokens) -> u64 {
        (u128::from(t.input) * u128::from(self.price.0)
            + u128::from(t.output) * u128::from(self.price.1))
        .div_ceil(1_000_000) as u64
    }

    fn width(&self, w: usize) -> Option<(u64, u64)> {
        self.ceilings[w].map(|(_, _, n)| {
            let span = Span::ALL[w].length().as_nanos();
            (span / u64::from(n), u64::from(n))
        })
    }
}

fn ceiling(buckets: &'static [u32], scale: u64) -> impl Strategy<Value = RawCeiling> {
    proptest::option::of(
        (
            proptest::option::of((1u64..=100).prop_map(move |k| k * 1_000 * scale)),
            proptest::option::of((1u64..=100).prop_map(move |k| k * 2_000 * scale)),
            proptest::sample::select(buckets),
        )
            .prop_map(|(t, c, n)| match (t, c) {
                (None, None) => (Some(50_000), None, n),
                _ => (t, c, n),
            }),
    )
}

fn params() -> impl Strategy<Value = Params> {
    (
        (
            prop_oneof![Just(0u64), 0u64..=15_000_000],
            prop_oneof![Just(0u64), 0u64..=75_000_000],
        ),
        ceiling(&[1, 2, 3, 4, 5, 6], 1),
        ceiling(&[1, 2, 3, 4, 6, 8, 12, 24], 5),
        ceiling(&[1, 2, 3, 5, 6, 10, 15, 30], 20),
        prop_oneof![Just(0u32), Just(100_000), 0u32..1_000_000],
        1u64..=7_200,
    )
        .prop_map(|(price, m, d, mo, throttle_ppm, money_open_s)| Params {
            price,
            ceilings: [m, d, mo],
            throttle_ppm,
            money_open_s,
        })
}

#[derive(Clone, Copy, Debug)]
enum Step {
    Forward(u64),
    Back(u64),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => (0u64..=20 * SEC).prop_map(Step::Forward),
        2 => (0u64..=2 * 3_600 * SEC).prop_map(Step::Forward),
        1 => (0u64..=40 * 86_400 * SEC).prop_map(Step::Forward),
        1 => (0u64..=30 * SEC).prop_map(Step::Back),
    ]
}

fn tokens() -> impl Strategy<Value = Tokens> {
    prop_oneof![
        3 => (0u64..=4_000, 0u64..=4_000),
        1 => (0u64..=200_000, 0u64..=50_000),
    ]
    .prop_map(|(input, output)| Tokens { input, output })
}

#[derive(Clone, Debug)]
enum Op {
    Reserve(Tokens, Step),
    Settle(usize, Tokens, Step),
    Cancel(usize, Option<Tokens>, Step),
    Observe {
        kind: QuotaKind,
        limit: Option<u64>,
        remaining: u64,
        reset_in: u64,
        step: Step,
    },
    Money(Option<u64>, Step),
    Reset(Step),
}

impl Op {
    fn step(&self) -> Step {
        match self {
            Op::Reserve(_, s)
            | Op::Settle(_, _, s)
            | Op::Cancel(_, _, s)
            | Op::Money(_, s)
            | Op::Reset(s) => *s,
            Op::Observe { step, .. } => *step,
        }
    }
}

type Pair = Option<(SpendState, SpendState)>;

#[derive(Clone, Debug, PartialEq)]
enum Answer {
    Admitted(Amount, Pair),
    Refused(RefuseReason, Duration, Pair),
    Settled(Amount, Pair),
    Changed(Pair),
    Nothing,
}

#[derive(Clone, Debug)]
struct Entry {
    t: u64,
    /// What is left of the charge in each window.
    left: [Amount; 3],
}

#[derive(Clone, Debug)]
struct Held {
    t: u64,
    /// Its entry in `Model::entries`.
    entry: usize,
    estimate: Tokens,
    amount: Amount,
}

#[derive(Clone, Copy, Debug)]
struct MQuota {
    limit: Option<u64>,
    remaining: u64,
    reset: u64,
}

#[derive(Clone, Debug)]
struct Model {
    p: Params,
    clock: u64,
    latest: u64,
    entries: Vec<Entry>,
    held: Vec<Held>,
    quotas: [Option<MQuota>; 4],
    open_until: u64,
    state: SpendState,
    last: Answer,
}

fn minus(a: Amount, b: Amount) -> Amount {
    Amount {
        tokens: a.tokens.saturating_sub(b.tokens),
        cost: a.cost.saturating_sub(b.cost),
    }
}

fn kind_index(k: QuotaKind) -> usize {
    QuotaKind::ALL.iter().position(|&x| x == k).unwrap()
}

fn need(kind: QuotaKind, t: Tokens) -> u64 {
    match kind {
        QuotaKind::Requests => 1,
        QuotaKind::Tokens => t.input + t.output,
        QuotaKind::InputTokens => t.input,
        QuotaKind::OutputTokens => t.output,
    }
}

impl Model {
    fn now(&mut self, s: Step) -> u64 {
        self.clock = match s {
            Step::Forward(d) => self.clock + d,
            Step::Back(d) => self.clock.saturating_sub(d),
        };
        self.latest = self.latest.max(self.clock);
        let now = self.latest;
        for q in &mut self.quotas {
            if q.is_some_and(|q| q.reset <= now) {
                *q = None;
            }
        }
        now
    }

    fn live(&self, w: usize, t: u64, now: u64) -> bool {
        self.p
            .width(w)
            .is_some_and(|(width, n)| t / width <= now / width && t / width + n > now / width)
    }

    fn usage(&self, w: usize, now: u64) -> Amount {
        let mut sum = Amount::default();
        for e in self.entries.iter().filter(|e| self.live(w, e.t, now)) {
            sum.tokens += e.left[w].tokens;
            sum.cost += e.left[w].cost;
        }
        sum
    }

    fn wait_one(
        &self,
        w: usize,
        now: u64,
        need: u64,
        limit: u64,
        get: fn(&Amount) -> u64,
    ) -> Option<Duration> {
        let mut used = get(&self.usage(w, now));
        if used + need <= limit {
            return None;
        }
        if need > limit {
            return Some(Duration::MAX);
        }
        let (width, n) = self.p.width(w).unwrap();
        let mut leaving: Vec<(u64, u64)> = self
            .entries
            .iter()
            .filter(|e| self.live(w, e.t, now))
            .map(|e| ((e.t / width + n) * width, get(&e.left[w])))
            .collect();
        leaving.sort();
        for (at, amount) in leaving {
            used -= amount;
            if used + need <= limit {
                return Some(Duration::from_nanos(at - now));
            }
        }
        panic!("model: usage never drains")
    }

    fn refusal(&self, now: u64, t: Tokens, amount: Amount) -> Option<(RefuseReason, Duration)> {
        if now < self.open_until {
            return Some((
                RefuseReason::MoneyLimit,
                Duration::from_nanos(self.open_until - now),
            ));
        }
        let mut all = Vec::new();
        for (w, span) in Span::ALL.into_iter().enumerate() {
            let Some((tok, cost, _)) = self.p.ceilings[w] else {
                continue;
            };
            for (metric, limit, need, get) in [
                (
                    Metric::Tokens,
                    tok,
                    amount.tokens,
                    (|a: &Amount| a.tokens) as fn(&Amount) -> u64,
                ),
                (Metric::Cost, cost, amount.cost, |a: &Amount| a.cost),
            ] {
                let Some(limit) = limit else { continue };
                if let Some(wait) = self.wait_one(w, now, need, limit, get) {
                    let reason = if wait == Duration::MAX {
                        RefuseReason::TooLarge { span, metric }
                    } else {
                        RefuseReason::Ceiling { span, metric }
                    };
                    all.push((reason, wait));
                }
            }
        }
        for kind in QuotaKind::ALL {
            if let Some(q) = self.quotas[kind_index(kind)]
                && need(kind, t) > q.remaining
            {
                all.push((
                    RefuseReason::ProviderQuota(kind),
                    Duration::from_nanos(q.reset - now),
                ));
            }
        }
        // The longest wait; the first listed on a tie.
        let max = all.iter().map(|a| a.1).max()?;
        all.into_iter().find(|a| a.1 == max)
    }

    fn visible_state(&self, now: u64) -> SpendState {
        if now < self.open_until {
            return SpendState::Open;
        }
        let low = |left: u64, limit: u64| {
            u128::from(left) * 1_000_000 < u128::from(self.p.throttle_ppm) * u128::from(limit)
        };
        for w in 0..3 {
            let Some((tok, cost, _)) = self.p.ceilings[w] else {
                continue;
            };
            let used = self.usage(w, now);
            if tok.is_some_and(|l| low(l.saturating_sub(used.tokens), l))
                || cost.is_some_and(|l| low(l.saturating_sub(used.cost), l))
            {
                return SpendState::Throttling;
            }
        }
        let quota_low = self.quotas.iter().flatten().any(|q| match q.limit {
            Some(l) => low(q.remaining, l),
            None => q.remaining == 0,
        });
        if quota_low {
            SpendState::Throttling
        } else {
            SpendState::Admitting
        }
    }

    fn update(&mut self, now: u64) -> Pair {
        let to = self.visible_state(now);
        let from = std::mem::replace(&mut self.state, to);
        (from != to).then_some((from, to))
    }

    fn reserve(&mut self, now: u64, t: Tokens) -> Answer {
        let amount = Amount {
            tokens: t.input + t.output,
            cost: self.p.cost(t),
        };
        if let Some((reason, wait)) = self.refusal(now, t, amount) {
            return Answer::Refused(reason, wait, self.update(now));
        }
        self.entries.push(Entry {
            t: now,
            left: [amount; 3],
        });
        for kind in QuotaKind::ALL {
            if let Some(q) = &mut self.quotas[kind_index(kind)] {
                q.remaining = q.remaining.saturating_sub(need(kind, t));
            }
        }
        self.held.push(Held {
            t: now,
            entry: self.entries.len() - 1,
            estimate: t,
            amount,
        });
        Answer::Admitted(amount, self.update(now))
    }

    fn settle(&mut self, now: u64, pick: usize, actual: Option<Tokens>) -> Answer {
        let h = self.held.remove(pick % self.held.len());
        let actual = actual.unwrap_or(h.estimate);
        let charged = Amount {
            tokens: actual.input + actual.output,
            cost: self.p.cost(actual),
        };
        let refund = minus(h.amount, charged);
        let extra = minus(charged, h.amount);
        for w in 0..3 {
            if self.live(w, h.t, now) {
                let e = &mut self.entries[h.entry];
                e.left[w] = minus(e.left[w], refund);
            }
        }
        self.entries.push(Entry {
            t: now,
            left: [extra; 3],
        });
        Answer::Settled(charged, self.update(now))
    }
}

struct Machine;

impl ReferenceStateMachine for Machine {
    type State = Model;
    type Transition = Op;

    fn init_state() -> BoxedStrategy<Model> {
        params()
            .prop_map(|p| Model {
                p,
                clock: 0,
                latest: 0,
                entries: Vec::new(),
                held: Vec::new(),
                quotas: [None; 4],
                open_until: 0,
                state: SpendState::Admitting,
                last: Answer::Nothing,
            })
            .boxed()
    }

    fn transitions(state: &Model) -> BoxedStrategy<Op> {
        let kind = proptest::sample::select(QuotaKind::ALL.to_vec());
        let base = prop_oneof![
            8 => (tokens(), step()).prop_map(|(t, s)| Op::Reserve(t, s)),
            2 => (kind, proptest::option::of(1u64..=100_000), 0u64..=100_000, 0u64..=90 * SEC, step())
                .prop_map(|(kind, limit, remaining, reset_in, step)| Op::Observe { kind, limit, remaining, reset_in, step }),
            1 => (proptest::option::of(0u64..=7_200), step()).prop_map(|(r, s)| Op::Money(r, s)),
            1 => step().prop_map(Op::Reset),
        ];
        if state.held.is_empty() {
            base.boxed()
        } else {
            prop_oneof![
                3 => base,
                3 => (any::<usize>(), tokens(), step()).prop_map(|(i, t, s)| Op::Settle(i, t, s)),
                1 => (any::<usize>(), proptest::option::of(tokens()), step()).prop_map(|(i, t, s)| Op::Cancel(i, t, s)),
            ]
            .boxed()
        }
    }

    fn preconditions(state: &Model, op: &Op) -> bool {
        !matches!(op, Op::Settle(..) | Op::Cancel(..)) || !state.held.is_empty()
    }

    fn apply(mut m: Model, op: &Op) -> Model {
        let now = m.now(op.step());
        m.last = match op {
            Op::Reserve(t, _) => m.reserve(now, *t),
            Op::Settle(i, t, _) => m.settle(now, *i, Some(*t)),
            Op::Cancel(i, t, _) => m.settle(now, *i, *t),
            Op::Observe {
                kind,
                limit,
                remaining,
                reset_in,
                ..
            } => {
                m.quotas[kind_index(*kind)] = (*reset_in > 0).then_some(MQuota {
                    limit: *limit,
                    remaining: *remaining,
                    reset: now + reset_in,
                });
                Answer::Changed(m.update(now))
            }
            Op::Money(r, _) => {
                let until = now + r.unwrap_or(m.p.money_open_s) * SEC;
                m.open_until = m.open_until.max(until);
                Answer::Changed(m.update(now))
            }
            Op::Reset(_) => {
                m.open_until = 0;
                Answer::Changed(m.update(now))
            }
        };
        m
    }
}

struct Sut {
    breaker: Breaker,
    held: Vec<Reservation>,
}

fn pair(t: Option<Transition>) -> Pair {
    t.map(|t| (t.from, t.to))
}

impl StateMachineTest for Sut {
    type SystemUnderTest = Sut;
    type Reference = Machine;

    fn init_test(model: &Model) -> Sut {
        let policy: &'static SpendPolicy = Box::leak(Box::new(
            SpendPolicy::new(model.p.config()).expect("valid config"),
        ));
        Sut {
            breaker: Breaker::new(policy).expect("fits"),
            held: Vec::new(),
        }
    }

    fn apply(mut sut: Sut, model: &Model, op: Op) -> Sut {
        let now = Instant::from_nanos(model.clock);
        let got = match op {
            Op::Reserve(t, _) => match sut.breaker.reserve(now, t) {
                Ok(r) => {
                    let a = Answer::Admitted(r.amount(), pair(r.transition()));
                    sut.held.push(r);
                    a
                }
                Err(no) => {
                    check_retry_after(&sut.breaker, model.latest, t, no.reason, no.retry_after);
                    Answer::Refused(no.reason, no.retry_after, pair(no.transition))
                }
            },
            Op::Settle(i, t, _) => {
                let r = sut.held.remove(i % sut.held.len());
                let s = sut.breaker.settle(now, r, t);
                Answer::Settled(s.charged, pair(s.transition))
            }
            Op::Cancel(i, t, _) => {
                let r = sut.held.remove(i % sut.held.len());
                let s = sut.breaker.cancel(now, r, t);
                Answer::Settled(s.charged, pair(s.transition))
            }
            Op::Observe {
                kind,
                limit,
                remaining,
                reset_in,
                ..
            } => {
                let reset = Instant::from_nanos(model.latest + reset_in);
                Answer::Changed(pair(sut.breaker.observe(
                    now,
                    QuotaUpdate {
                        kind,
                        limit,
                        remaining,
                        reset,
                    },
                )))
            }
            Op::Money(r, _) => Answer::Changed(pair(
                sut.breaker.money_signal(now, r.map(Duration::from_secs)),
            )),
            Op::Reset(_) => Answer::Changed(pair(sut.breaker.reset(now))),
        };
        assert_eq!(got, model.last, "op {op:?}");
        sut
    }

    fn check_invariants(sut: &Sut, model: &Model) {
        let now = Instant::from_nanos(model.clock);
        let later = model.latest;
        assert_eq!(sut.breaker.state(now), model.visible_state(later), "state");
        for (w, span) in Span::ALL.into_iter().enumerate() {
            let want = if model.p.ceilings[w].is_some() {
                model.usage(w, later)
            } else {
                Amount::default()
            };
            assert_eq!(
                sut.breaker.usage(now, span),
                want,
                "usage over the {span:?}"
            );
        }
        assert_eq!(
            sut.breaker.open_until(now),
            (later < model.open_until).then(|| Instant::from_nanos(model.open_until))
        );
    }
}

/// A refusal's `retry_after` is exact: the same call fits then, and not a nanosecond before.
fn check_retry_after(b: &Breaker, now: u64, t: Tokens, reason: RefuseReason, wait: Duration) {
    if wait == Duration::MAX {
        assert!(matches!(reason, RefuseReason::TooLarge { .. }));
        return;
    }
    assert!(!wait.is_zero(), "a refusal with nothing to wait for");
    let at = Instant::from_nanos(now) + wait;
    if !matches!(reason, RefuseReason::MoneyLimit) {
        let mut copy = b.clone();
        assert!(
            copy.reserve(at, t).is_ok(),
            "{reason:?}: still refused after {wait}"
        );
    }
    let mut copy = b.clone();
    assert!(
        copy.reserve(at - Duration::from_nanos(1), t).is_err(),
        "{reason:?}: admitted before {wait}"
    );
}

prop_state_machine! {
    #![proptest_config(ProptestConfig { cases: 256, max_shrink_iters: 4096, .. ProptestConfig::default() })]
    #[test]
    fn spend_breaker_matches_the_reference_model(sequential 1..80 => Sut);
}

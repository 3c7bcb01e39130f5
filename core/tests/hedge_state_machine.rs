//! The hedger on random sequences of calls (idempotent or not), hedge requests with and without
//! the ledger, recorded latencies, first tries and time steps, with random policies; and its
//! latency quantile against exact references.
//!
//! Invariants: no call ever has more than `max_hedges` hedges; a call not marked idempotent never
//! has one; a hedge goes only once `started + (k + 1) × delay` has passed, and is refused as "not
//! yet" only before it; a quantile delay refuses while warming exactly when fewer than
//! `min_samples` latencies are held; hedges drawn from the ledger never overspend it and are
//! counted as hedges. The quantile is never below the exact sample quantile and less than 1/16
//! above it (exact below 16 ns), and with fading it equals a plain bucket-count model.
//!
//! `PROPTEST_CASES=5000 cargo test -p reliable-core --test hedge_state_machine` is CI's long pass.

use proptest::prelude::*;
use proptest::strategy::Union;
use proptest_state_machine::{ReferenceStateMachine, StateMachineTest, prop_state_machine};
use reliable_core::budget::RatioConfig;
use reliable_core::hedge::quantile::{BUCKETS, bucket_max, bucket_of};
use reliable_core::hedge::{
    HedgeConfig, HedgeDelay, HedgePolicy, HedgedCall, Hedger, Idempotency, LatencyQuantile,
    NoHedge, QuantileDelay,
};
use reliable_core::ledger::{Draw, Extra, ExtraLedger};
use reliable_core::{Duration, Instant};

#[derive(Clone, Debug)]
enum Op {
    Wait(u64),
    Record(u64),
    FirstTry,
    Start(Idempotency),
    Hedge { call: usize, ledger: bool },
    End(usize),
}

#[derive(Clone, Debug)]
struct Model {
    config: HedgeConfig,
    now: u64,
    /// Calls open.
    calls: usize,
}

fn delay() -> impl Strategy<Value = HedgeDelay> {
    prop_oneof![
        (1..50_000_000u64).prop_map(|ns| HedgeDelay::Fixed(Duration::from_nanos(ns))),
        (
            1..=1_000_000u32,
            2..200u32,
            0..100u32,
            0..5_000_000u64,
            0..80_000_000u64
        )
            .prop_map(|(q, window, min_samples, min, span)| HedgeDelay::Quantile(
                QuantileDelay {
                    quantile: f64::from(q) / 1e6,
                    window,
                    min_samples: 1 + min_samples % (window / 2),
                    min: Duration::from_nanos(min),
                    max: Duration::from_nanos(min + span + 1),
                }
            )),
    ]
}

struct Hedging;

impl ReferenceStateMachine for Hedging {
    type State = Model;
    type Transition = Op;

    fn init_state() -> BoxedStrategy<Model> {
        (delay(), 1..4u32)
            .prop_map(|(delay, max_hedges)| Model {
                config: HedgeConfig { delay, max_hedges },
                now: 0,
                calls: 0,
            })
            .boxed()
    }

    fn transitions(s: &Model) -> BoxedStrategy<Op> {
        let mut ops = vec![
            (4, (0..20_000_000u64).prop_map(Op::Wait).boxed()),
            (1, Just(Op::Wait(u64::MAX / 4)).boxed()),
            (4, (0..60_000_000u64).prop_map(Op::Record).boxed()),
            (3, Just(Op::FirstTry).boxed()),
            (
                3,
                prop_oneof![
                    4 => Just(Idempotency::Idempotent),
                    1 => Just(Idempotency::NotIdempotent)
                ]
                .prop_map(Op::Start)
                .boxed(),
            ),
        ];
        if s.calls > 0 {
            ops.push((
                8,
                (0..s.calls, any::<bool>())
                    .prop_map(|(call, ledger)| Op::Hedge { call, ledger })
                    .boxed(),
            ));
            ops.push((2, (0..s.calls).prop_map(Op::End).boxed()));
        }
        Union::new_weighted(ops).boxed()
    }

    // Shrinking may drop the `Start` a later op refers to.
    fn preconditions(s: &Model, op: &Op) -> bool {
        match *op {
            Op::Hedge { call, .. } | Op::End(call) => call < s.calls,
            _ => true,
        }
    }

    fn apply(mut s: Model, op: &Op) -> Model {
        match *op {
            Op::Wait(d) => s.now = s.now.saturating_add(d),
            Op::Start(_) => s.calls += 1,
            Op::End(_) => s.calls -= 1,
            _ => {}
        }
        s
    }
}

#[derive(Debug)]
struct Sut {
    hedger: Hedger,
    ledger: ExtraLedger,
    /// Open calls with the draws of their hedges.
    calls: Vec<(HedgedCall, Vec<Draw>)>,
    hedges_from_ledger: u64,
}

impl StateMachineTest for Hedging {
    type SystemUnderTest = Sut;
    type Reference = Hedging;

    fn init_test(s: &Model) -> Sut {
        Sut {
            hedger: Hedger::new(HedgePolicy::new(s.config).unwrap()),
            ledger: ExtraLedger::from_config(RatioConfig::percent(0.2)).unwrap(),
            calls: Vec::new(),
            hedges_from_ledger: 0,
        }
    }

    fn apply(mut sut: Sut, s: &Model, op: Op) -> Sut {
        let now = Instant::from_nanos(s.now);
        match op {
            Op::Wait(_) => {}
            Op::Record(ns) => sut.hedger.record(Duration::from_nanos(ns)),
            Op::FirstTry => sut.ledger.on_first_try(now),
            Op::Start(idempotency) => {
                let call = sut.hedger.start(now, idempotency);
                sut.calls.push((call, Vec::new()));
            }
            Op::Hedge { call, ledger } => {
                let delay = sut.hedger.delay();
                let warming = match s.config.delay {
                    HedgeDelay::Fixed(_) => false,
                    HedgeDelay::Quantile(q) => sut.hedger.latencies().samples() < q.min_samples,
                };
                assert_eq!(delay.is_none(), warming);
                let (c, draws) = &mut sut.calls[call];
                let before = *c;
                // started + (k + 1) × delay, computed in u128; instants saturate at the end of
                // time, so does this.
                let due = delay.map(|d| {
                    (u128::from(before.started().as_nanos())
                        + u128::from(d.as_nanos()) * (u128::from(before.hedges()) + 1))
                        .min(u128::from(u64::MAX))
                });
                let next_at = sut.hedger.next_hedge_at(c);
                let got = if ledger {
                    sut.hedger
                        .try_hedge_from(c, now, &mut sut.ledger)
                        .map(|d| draws.push(d))
                } else {
                    sut.hedger.try_hedge(c, now)
                };
                match got {
                    Ok(()) => {
                        assert!(
                            c.hedges() <= s.config.max_hedges,
                            "more hedges than the maximum"
                        );
                        assert_eq!(c.hedges(), before.hedges() + 1);
                        assert!(
                            next_at.is_some_and(|at| at <= now),
                            "hedged before it was due"
                        );
                        assert!(
                            due.is_some_and(|at| at <= u128::from(s.now)),
                            "hedged early"
                        );
                        assert_eq!(before.idempotency(), Idempotency::Idempotent);
                        if ledger {
                            sut.hedges_from_ledger += 1;
                            assert!(sut.ledger.micro_balance(now) >= 0, "ledger overspent");
                        }
                    }
                    Err(why) => {
                        assert_eq!(*c, before, "a refusal changed the call");
                        match why {
                            NoHedge::NotYet { retry_after } => {
                                assert_eq!(next_at, Some(now + retry_after));
                                assert_eq!(
                                    due,
                                    Some(u128::from(s.now) + u128::from(retry_after.as_nanos()))
                                );
                                assert!(retry_after > Duration::ZERO);
                            }
                            NoHedge::Warming => assert!(warming),
                            NoHedge::MaxHedges => {
                                assert_eq!(c.hedges(), s.config.max_hedges)
                            }
                            NoHedge::NotIdempotent => {
                                assert_eq!(before.idempotency(), Idempotency::NotIdempotent)
                            }
                            NoHedge::Ledger(_) => {
                                assert!(ledger);
                                assert!(next_at.is_some_and(|at| at <= now));
                            }
                        }
                    }
                }
            }
            Op::End(call) => {
                let (_, draws) = sut.calls.swap_remove(call);
                for d in draws {
                    sut.ledger.settle(d, now);
                }
            }
        }
        sut
    }

    fn check_invariants(sut: &Sut, s: &Model) {
        assert_eq!(sut.calls.len(), s.calls);
        for (call, draws) in &sut.calls {
            assert!(
                call.hedges() <= s.config.max_hedges,
                "more hedges than the maximum"
            );
            assert!(draws.len() as u32 <= call.hedges());
            if call.idempotency() == Idempotency::NotIdempotent {
                assert_eq!(call.hedges(), 0, "a call not marked idempotent was hedged");
            }
        }
        assert_eq!(sut.ledger.drawn(Extra::Hedge), sut.hedges_from_ledger);
        assert_eq!(sut.ledger.drawn(Extra::Retry), 0);
    }
}

prop_state_machine! {
    #[test]
    fn hedges_never_exceed_their_maximum_nor_come_early(sequential 1..200 => Hedging);
}

/// A plain model of the faded histogram: counts per bucket; when they reach the window, the
/// samples at or below each bucket become half of what they were (rounded down); the quantile is
/// found by a scan.
struct Faded {
    counts: Vec<u32>,
    total: u32,
    window: u32,
}

impl Faded {
    fn record(&mut self, ns: u64) {
        self.counts[bucket_of(ns)] += 1;
        self.total += 1;
        if self.total >= self.window {
            // Each bucket keeps half of the samples at or below it, minus those kept below.
            let mut seen = 0;
            self.total = 0;
            for c in self.counts.iter_mut() {
                seen += *c;
                *c = seen / 2 - self.total;
                self.total += *c;
            }
        }
    }

    fn estimate(&self, quantile_ppm: u32) -> Option<u64> {
        let n = u64::from(self.total);
        let rank = ((u64::from(quantile_ppm) * n).div_ceil(1_000_000) as u32).max(1);
        let mut seen = 0;
        for (i, c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Some(bucket_max(i));
            }
        }
        None
    }
}

fn latency() -> impl Strategy<Value = u64> {
    prop_oneof![
        0..16u64,
        0..1_000_000u64,
        1_000_000..100_000_000u64,
        any::<u64>().prop_map(|x| x >> (x % 64)),
    ]
}

proptest! {
    #[test]
    fn the_quantile_is_within_a_sixteenth_above_the_exact_one(
        quantile_ppm in 1..=1_000_000u32,
        samples in proptest::collection::vec(latency(), 1..400),
    ) {
        let mut q = LatencyQuantile::new(quantile_ppm, 65_535);
        let mut sorted = Vec::new();
        for &ns in &samples {
            q.record(Duration::from_nanos(ns));
            let at = sorted.partition_point(|&x| x < ns);
            sorted.insert(at, ns);
            let rank = ((u64::from(quantile_ppm) * sorted.len() as u64).div_ceil(1_000_000)).max(1);
            let x = sorted[rank as usize - 1];
            let est = q.estimate().unwrap().as_nanos();
            if x >= 1 << 40 {
                prop_assert_eq!(est, 1u64 << 40);
            } else {
                prop_assert!(x <= est, "estimate {est} below the sample quantile {x}");
                prop_assert!(
                    u128::from(est) * 16 < u128::from(x) * 17 || est == x,
                    "estimate {est} more than 1/16 above {x}"
                );
            }
        }
    }

    #[test]
    fn the_faded_quantile_matches_a_bucket_count_model(
        quantile_ppm in 1..=1_000_000u32,
        window in 2..300u32,
        samples in proptest::collection::vec(latency(), 1..1_000),
    ) {
        let mut q = LatencyQuantile::new(quantile_ppm, window);
        let mut model = Faded { counts: vec![0; BUCKETS], total: 0, window };
        for (i, &ns) in samples.iter().enumerate() {
            q.record(Duration::from_nanos(ns));
            model.record(ns);
            prop_assert_eq!(
                q.estimate().map(Duration::as_nanos),
                model.estimate(quantile_ppm),
                "after {} samples", i + 1
            );
        }
    }
}

//! Fuzzes the hedger: arbitrary policies (fixed or quantile delays, any quantile, window, bounds)
//! and histories (calls, hedge requests with and without a ledger, latencies of any size, time
//! steps), checking that no call passes its maximum, none that is not idempotent is hedged, none
//! is hedged before it is due, and the quantile stays within its error bound of the true sample
//! quantile while nothing has faded.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use reliable_core::budget::RatioConfig;
use reliable_core::hedge::{
    HedgeConfig, HedgeDelay, HedgePolicy, HedgedCall, Hedger, Idempotency, QuantileDelay,
};
use reliable_core::ledger::ExtraLedger;
use reliable_core::{Duration, Instant};

#[derive(Arbitrary, Debug)]
enum RawDelay {
    Fixed(u64),
    Quantile {
        quantile: u32,
        window: u16,
        min_samples: u16,
        min: u64,
        max: u64,
    },
}

#[derive(Arbitrary, Debug)]
enum Op {
    Start(bool),
    Hedge { pick: u8, ledger: bool },
    End(u8),
    Record(u64),
    FirstTry,
    Step(u32),
    Huge(u64),
}

fuzz_target!(|input: (RawDelay, u8, Vec<Op>)| {
    let (raw, max_hedges, ops) = input;
    let delay = match raw {
        RawDelay::Fixed(ns) => HedgeDelay::Fixed(Duration::from_nanos(ns)),
        RawDelay::Quantile {
            quantile,
            window,
            min_samples,
            min,
            max,
        } => HedgeDelay::Quantile(QuantileDelay {
            quantile: f64::from(quantile) / f64::from(u32::MAX),
            window: u32::from(window),
            min_samples: u32::from(min_samples),
            min: Duration::from_nanos(min),
            max: Duration::from_nanos(max),
        }),
    };
    let config = HedgeConfig {
        delay,
        max_hedges: u32::from(max_hedges),
    };
    let Ok(policy) = HedgePolicy::new(config) else {
        return;
    };
    let mut hedger = Hedger::new(policy);
    let mut ledger: ExtraLedger = ExtraLedger::from_config(RatioConfig::percent(0.1)).unwrap();
    let mut calls: Vec<HedgedCall> = Vec::new();
    let mut latencies: Vec<u64> = Vec::new();
    let mut clock = 0u64;
    for op in ops.iter().take(3_000) {
        let now = Instant::from_nanos(clock);
        match *op {
            Op::Start(idempotent) => calls.push(hedger.start(
                now,
                if idempotent {
                    Idempotency::Idempotent
                } else {
                    Idempotency::NotIdempotent
                },
            )),
            Op::Hedge { pick, ledger: with } => {
                if calls.is_empty() {
                    continue;
                }
                let i = usize::from(pick) % calls.len();
                let call = &mut calls[i];
                let before = *call;
                let due = hedger.next_hedge_at(call);
                let sent = if with {
                    hedger
                        .try_hedge_from(call, now, &mut ledger)
                        .map(|d| ledger.settle(d, now))
                        .is_ok()
                } else {
                    hedger.try_hedge(call, now).is_ok()
                };
                if sent {
                    assert_eq!(before.idempotency(), Idempotency::Idempotent);
                    assert!(
                        due.is_some_and(|at| at <= now),
                        "early: due {due:?}, now {now:?}"
                    );
                    assert_eq!(call.hedges(), before.hedges() + 1);
                } else {
                    assert_eq!(*call, before);
                }
                assert!(call.hedges() <= u32::from(max_hedges));
            }
            Op::End(pick) => {
                if !calls.is_empty() {
                    calls.swap_remove(usize::from(pick) % calls.len());
                }
            }
            Op::Record(ns) => {
                hedger.record(Duration::from_nanos(ns));
                latencies.push(ns);
            }
            Op::FirstTry => ledger.on_first_try(now),
            Op::Step(ns) => clock = clock.saturating_add(u64::from(ns)),
            Op::Huge(n) => clock = clock.saturating_add(n),
        }
        // While nothing has faded, the estimate is within its bound of the sample quantile.
        if let (HedgeDelay::Quantile(q), Some(est)) = (delay, hedger.latencies().estimate()) {
            if (latencies.len() as u32) < q.window.max(2) && !latencies.is_empty() {
                let mut sorted = latencies.clone();
                sorted.sort_unstable();
                let ppm = (q.quantile * 1e6 + 0.5) as u64;
                let rank = (ppm * sorted.len() as u64).div_ceil(1_000_000).max(1);
                let x = sorted[rank as usize - 1].min(1 << 40);
                let est = est.as_nanos();
                assert!(x <= est, "estimate {est} below {x}");
                assert!(
                    est == x || u128::from(est) * 16 < u128::from(x) * 17,
                    "{est} vs {x}"
                );
            }
        }
    }
});

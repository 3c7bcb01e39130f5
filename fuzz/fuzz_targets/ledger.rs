//! Fuzzes the ledger of extra attempts: arbitrary ratio configs and histories (first tries, draws
//! of every kind, settlements in any order, time steps forwards, backwards and huge), checking
//! after every step that it never overspends and counts every kind exactly.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use reliable_core::budget::RatioConfig;
use reliable_core::ledger::{Draw, Extra, ExtraLedger};
use reliable_core::{Duration, Instant};

#[derive(Arbitrary, Debug)]
struct RawConfig {
    ratio: u32,
    min_per_sec: u8,
    ttl_ms: u16,
    slots: u8,
}

#[derive(Arbitrary, Debug)]
enum Op {
    FirstTry,
    Draw(u8),
    Settle(u8),
    Step(u16),
    Back(u16),
    Huge(u64),
}

fuzz_target!(|input: (RawConfig, Vec<Op>)| {
    let (raw, ops) = input;
    let config = RatioConfig {
        ratio: f64::from(raw.ratio) / f64::from(u32::MAX) * 2.0,
        min_per_sec: u32::from(raw.min_per_sec),
        ttl: Duration::from_millis(u64::from(raw.ttl_ms)),
        slots: u32::from(raw.slots),
    };
    let Ok(mut ledger) = ExtraLedger::<16>::from_config(config) else {
        return;
    };
    let mut clock = 0u64;
    let mut draws: Vec<Draw> = Vec::new();
    let (mut drawn, mut denied) = ([0u64; 3], [0u64; 3]);
    for op in ops.iter().take(5_000) {
        let now = Instant::from_nanos(clock);
        match *op {
            Op::FirstTry => ledger.on_first_try(now),
            Op::Draw(k) => {
                let i = usize::from(k % 3);
                let kind = Extra::ALL[i];
                let before = ledger.micro_balance(now);
                match ledger.try_draw(kind, now) {
                    Ok(d) => {
                        assert!(before >= 1_000_000, "granted with a balance of {before}");
                        assert!(ledger.micro_balance(now) >= 0, "overspent");
                        assert_eq!(d.kind(), kind);
                        drawn[i] += 1;
                        draws.push(d);
                    }
                    Err(_) => {
                        assert!(before < 1_000_000, "refused with a balance of {before}");
                        denied[i] += 1;
                    }
                }
            }
            Op::Settle(pick) => {
                if !draws.is_empty() {
                    let d = draws.swap_remove(usize::from(pick) % draws.len());
                    ledger.settle(d, now);
                }
            }
            Op::Step(ms) => clock = clock.saturating_add(u64::from(ms) * 1_000_000),
            Op::Back(ms) => clock = clock.saturating_sub(u64::from(ms) * 1_000_000),
            Op::Huge(n) => clock = clock.saturating_add(n),
        }
        for (i, kind) in Extra::ALL.into_iter().enumerate() {
            assert_eq!(ledger.drawn(kind), drawn[i]);
            assert_eq!(ledger.denied(kind), denied[i]);
            let held = draws.iter().filter(|d| d.kind() == kind).count();
            assert_eq!(ledger.outstanding(kind) as usize, held);
        }
    }
});

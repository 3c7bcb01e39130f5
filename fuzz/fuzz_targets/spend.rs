//! Fuzzes the spend breaker: arbitrary configs (any price, ceiling, bucket count, threshold) and
//! histories (reserve, settle, cancel, provider quota reports, money signals, resets, time steps
//! forwards, backwards and huge, token counts up to `u64::MAX`), checking after every step that
//! nothing panics or overflows, an admitted call leaves every ceiling respected, every refusal says
//! how long to wait (exactly: the same call fits then and not a nanosecond before), and the
//! reported state agrees with itself.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use reliable_core::provider::{QuotaKind, QuotaUpdate};
use reliable_core::spend::{
    Ceiling, Price, RefuseReason, Reservation, Span, SpendBreaker, SpendConfig, SpendPolicy,
    SpendState, Tokens,
};
use reliable_core::{Duration, Instant};

#[derive(Arbitrary, Debug)]
struct RawCeiling {
    tokens: Option<u64>,
    cost: Option<u64>,
    buckets: u8,
}

#[derive(Arbitrary, Debug)]
struct RawConfig {
    input_price: u64,
    output_price: u64,
    minute: Option<RawCeiling>,
    day: Option<RawCeiling>,
    month: Option<RawCeiling>,
    throttle: u16,
    money_open_s: u32,
}

#[derive(Arbitrary, Debug)]
enum Op {
    Reserve {
        input: u64,
        output: u64,
    },
    Settle {
        pick: u8,
        input: u64,
        output: u64,
    },
    Cancel {
        pick: u8,
        reported: Option<(u64, u64)>,
    },
    Observe {
        kind: u8,
        limit: Option<u64>,
        remaining: u64,
        reset_in: u64,
    },
    Money(Option<u64>),
    Reset,
    Step(u32),
    Back(u32),
    Huge(u64),
}

fn ceiling(r: &Option<RawCeiling>) -> Option<Ceiling> {
    r.as_ref().map(|r| Ceiling {
        tokens: r.tokens,
        cost: r.cost,
        buckets: u32::from(r.buckets),
    })
}

fn limit(c: Option<Ceiling>, tokens: bool) -> Option<u64> {
    c.and_then(|c| if tokens { c.tokens } else { c.cost })
}

fuzz_target!(|input: (RawConfig, Vec<Op>)| {
    let (raw, ops) = input;
    let config = SpendConfig {
        price: Price::per_million_tokens(raw.input_price, raw.output_price),
        minute: ceiling(&raw.minute),
        day: ceiling(&raw.day),
        month: ceiling(&raw.month),
        throttle_below: f64::from(raw.throttle) / 65_536.0,
        money_open: Duration::from_secs(u64::from(raw.money_open_s)),
    };
    let Ok(policy) = SpendPolicy::new(config) else {
        return;
    };
    let Ok(mut breaker) = SpendBreaker::<_, 6, 24, 30>::new(&policy) else {
        return;
    };
    let mut clock = 0u64;
    // The latest `now` the breaker has seen: it answers an earlier `now` as of this.
    let mut latest = Instant::ZERO;
    let mut held: Vec<Reservation> = Vec::new();
    for op in ops.iter().take(1_000) {
        let now = Instant::from_nanos(clock);
        let calls_breaker = match op {
            Op::Step(_) | Op::Back(_) | Op::Huge(_) => false,
            Op::Settle { .. } | Op::Cancel { .. } => !held.is_empty(),
            _ => true,
        };
        if calls_breaker {
            latest = latest.max(now);
        }
        let mut transitions = [None; 1];
        match *op {
            Op::Reserve { input, output } => {
                let t = Tokens { input, output };
                let before = breaker.clone();
                match breaker.reserve(now, t) {
                    Ok(r) => {
                        transitions[0] = r.transition();
                        // Admitted only if it fit under every ceiling.
                        for span in Span::ALL {
                            let u = breaker.usage(now, span);
                            let c = policy.ceiling(span);
                            assert!(
                                limit(c, true)
                                    .is_none_or(|l| u.tokens <= l || u.tokens == u64::MAX)
                            );
                            assert!(
                                limit(c, false).is_none_or(|l| u.cost <= l || u.cost == u64::MAX)
                            );
                        }
                        held.push(r);
                    }
                    Err(no) => {
                        transitions[0] = no.transition;
                        assert!(!no.retry_after.is_zero());
                        let is_too_large = matches!(no.reason, RefuseReason::TooLarge { .. });
                        // Never fits: "never". (A wait can also saturate at the end of time.)
                        assert!(!is_too_large || no.retry_after == Duration::MAX);
                        assert_eq!(
                            no.reason == RefuseReason::MoneyLimit,
                            breaker.state(now) == SpendState::Open
                        );
                        if !is_too_large && no.retry_after != Duration::MAX {
                            let at = latest + no.retry_after;
                            if at < Instant::MAX {
                                let mut early = before.clone();
                                assert!(early.reserve(at - Duration::from_nanos(1), t).is_err());
                                if no.reason != RefuseReason::MoneyLimit {
                                    let mut then = before.clone();
                                    assert!(then.reserve(at, t).is_ok(), "{no:?}");
                                }
                            }
                        }
                    }
                }
            }
            Op::Settle {
                pick,
                input,
                output,
            } if !held.is_empty() => {
                let r = held.swap_remove(usize::from(pick) % held.len());
                let s = breaker.settle(now, r, Tokens { input, output });
                assert_eq!(s.charged.tokens, input.saturating_add(output));
                transitions[0] = s.transition;
            }
            Op::Cancel { pick, reported } if !held.is_empty() => {
                let r = held.swap_remove(usize::from(pick) % held.len());
                let estimate = r.estimate();
                let s = breaker.cancel(
                    now,
                    r,
                    reported.map(|(input, output)| Tokens { input, output }),
                );
                let want = reported.map_or(estimate.total(), |(i, o)| i.saturating_add(o));
                assert_eq!(s.charged.tokens, want);
                transitions[0] = s.transition;
            }
            Op::Observe {
                kind,
                limit,
                remaining,
                reset_in,
            } => {
                let update = QuotaUpdate {
                    kind: QuotaKind::ALL[usize::from(kind) % 4],
                    limit,
                    remaining,
                    reset: now + Duration::from_nanos(reset_in),
                };
                transitions[0] = breaker.observe(now, update);
            }
            Op::Money(reset) => {
                transitions[0] = breaker.money_signal(now, reset.map(Duration::from_nanos));
                assert_eq!(
                    breaker.state(now) == SpendState::Open,
                    breaker.open_until(now).is_some()
                );
            }
            Op::Reset => {
                transitions[0] = breaker.reset(now);
                assert_ne!(breaker.state(now), SpendState::Open);
            }
            Op::Step(d) => clock = clock.saturating_add(u64::from(d)),
            Op::Back(d) => clock = clock.saturating_sub(u64::from(d)),
            Op::Huge(d) => clock = clock.saturating_add(d),
            _ => {}
        }
        for t in transitions.into_iter().flatten() {
            assert_ne!(t.from, t.to);
            assert_eq!(t.to, breaker.state(now));
        }
    }
});

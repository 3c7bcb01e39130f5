use super::*;

const S: fn(u64) -> Instant = Instant::from_secs;

fn tok(input: u64, output: u64) -> Tokens {
    Tokens { input, output }
}

fn policy(config: SpendConfig) -> SpendPolicy {
    SpendPolicy::new(config).unwrap()
}

#[test]
fn a_ceiling_with_more_buckets_than_the_type_holds_is_refused() {
    let p = policy(SpendConfig {
        day: Some(Ceiling::tokens(10).with_buckets(48)),
        ..SpendConfig::new()
    });
    let err = SpendBreaker::<_, 6, 24, 30>::new(&p).unwrap_err();
    assert_eq!(err.field, "day.buckets");
    assert!(SpendBreaker::<_, 6, 48, 30>::new(&p).is_ok());
}

#[test]
fn cost_ceilings_refuse_what_would_pass_them_and_say_when_it_fits() {
    // $10 per Mtok both ways; at most $0.01 (10,000 micro-units) a day in 24 hourly buckets.
    let p = policy(SpendConfig {
        price: Price::per_million_tokens(10_000_000, 10_000_000),
        day: Some(Ceiling::cost(10_000).with_buckets(24)),
        ..SpendConfig::new()
    });
    let mut b: SpendBreaker<&SpendPolicy> = SpendBreaker::new(&p).unwrap();
    let r = b.reserve(S(100), tok(300, 300)).unwrap(); // 6,000
    assert_eq!(
        r.amount(),
        Amount {
            tokens: 600,
            cost: 6_000
        }
    );
    let _ = b.settle(S(200), r, tok(300, 300));
    let no = b.reserve(S(4_000), tok(300, 200)).unwrap_err(); // 5,000 more: 11,000
    assert_eq!(
        no.reason,
        RefuseReason::Ceiling {
            span: Span::Day,
            metric: Metric::Cost
        }
    );
    // The first hour's bucket leaves the day at 24 h.
    assert_eq!(no.retry_after, Duration::from_secs(24 * 3_600 - 4_000));
    let no = b.reserve(S(4_000), tok(600, 600)).unwrap_err();
    assert_eq!(no.retry_after, Duration::MAX);
    assert!(matches!(
        no.reason,
        RefuseReason::TooLarge {
            span: Span::Day,
            metric: Metric::Cost
        }
    ));
    assert!(b.reserve(S(24 * 3_600), tok(300, 200)).is_ok());
}

#[test]
fn a_cancelled_call_settles_to_the_report_or_the_estimate() {
    let p = policy(SpendConfig {
        minute: Some(Ceiling::tokens(1_000)),
        ..SpendConfig::new()
    });
    let mut b: SpendBreaker<&SpendPolicy> = SpendBreaker::new(&p).unwrap();
    let r = b.reserve(S(1), tok(100, 400)).unwrap();
    let s = b.cancel(S(2), r, None);
    assert_eq!(s.charged.tokens, 500);
    assert_eq!(b.usage(S(2), Span::Minute).tokens, 500);
    let r = b.reserve(S(3), tok(100, 400)).unwrap();
    let s = b.cancel(S(4), r, Some(tok(100, 10)));
    assert_eq!(s.charged.tokens, 110);
    assert_eq!(b.usage(S(4), Span::Minute).tokens, 610);
    // An overrun (the provider ignored max_tokens) is charged now.
    let r = b.reserve(S(5), tok(10, 10)).unwrap();
    let _ = b.settle(S(61), r, tok(10, 90));
    // The reservation's bucket (0-10 s) has left; the 80 extra were charged at 61 s.
    assert_eq!(b.usage(S(61), Span::Minute).tokens, 80);
}

#[test]
fn throttles_near_a_ceiling_and_recovers_as_usage_leaves() {
    let p = policy(SpendConfig {
        minute: Some(Ceiling::tokens(1_000)),
        throttle_below: 0.25,
        ..SpendConfig::new()
    });
    let mut b: SpendBreaker<&SpendPolicy> = SpendBreaker::new(&p).unwrap();
    let r = b.reserve(S(0), tok(700, 0)).unwrap();
    assert_eq!(r.transition(), None); // 300 of 1,000 left: not below 25%
    let r2 = b.reserve(S(1), tok(100, 0)).unwrap();
    assert_eq!(
        r2.transition(),
        Some(Transition {
            from: SpendState::Admitting,
            to: SpendState::Throttling,
            at: S(1)
        })
    );
    assert_eq!(b.state(S(59)), SpendState::Throttling);
    assert_eq!(b.state(S(60)), SpendState::Admitting);
    let s = b.settle(S(60), r, tok(700, 0));
    assert_eq!(s.transition.map(|t| t.to), Some(SpendState::Admitting));
    let _ = b.settle(S(60), r2, tok(1, 0));
}

#[test]
fn provider_quotas_make_it_wait_for_the_reset() {
    let p = policy(SpendConfig::new());
    let mut b: SpendBreaker<&SpendPolicy> = SpendBreaker::new(&p).unwrap();
    let t = b.observe(
        S(10),
        QuotaUpdate {
            kind: QuotaKind::Tokens,
            limit: Some(10_000),
            remaining: 1_500,
            reset: S(40),
        },
    );
    // 15% left: below the default 10%? No: admitting.
    assert_eq!(t, None);
    let r = b.reserve(S(11), tok(500, 500)).unwrap();
    assert_eq!(r.transition().map(|t| t.to), Some(SpendState::Throttling));
    let no = b.reserve(S(12), tok(500, 500)).unwrap_err();
    assert_eq!(no.reason, RefuseReason::ProviderQuota(QuotaKind::Tokens));
    assert_eq!(no.retry_after, Duration::from_secs(28));
    // At the reset the quota is forgotten.
    let ok = b.reserve(S(40), tok(500, 500)).unwrap();
    assert_eq!(ok.transition().map(|t| t.to), Some(SpendState::Admitting));
    // A request quota with no limit given: throttling at zero left.
    let _ = b.observe(
        S(41),
        QuotaUpdate {
            kind: QuotaKind::Requests,
            limit: None,
            remaining: 1,
            reset: S(50),
        },
    );
    let _last = b.reserve(S(41), tok(1, 1)).unwrap();
    assert_eq!(b.state(S(41)), SpendState::Throttling);
    let no = b.reserve(S(41), tok(1, 1)).unwrap_err();
    assert_eq!(no.reason, RefuseReason::ProviderQuota(QuotaKind::Requests));
    // A report whose reset has passed forgets the kind.
    let _ = b.observe(
        S(42),
        QuotaUpdate {
            kind: QuotaKind::Requests,
            limit: None,
            remaining: 0,
            reset: S(42),
        },
    );
    assert!(b.reserve(S(42), tok(1, 1)).is_ok());
}

#[test]
fn a_money_signal_opens_it_until_the_reset_and_is_never_shortened() {
    let p = policy(SpendConfig::new());
    let mut b: SpendBreaker<&SpendPolicy> = SpendBreaker::new(&p).unwrap();
    let t = b
        .money_signal(S(100), Some(Duration::from_secs(50)))
        .unwrap();
    assert_eq!((t.from, t.to), (SpendState::Admitting, SpendState::Open));
    assert_eq!(b.money_signal(S(101), Some(Duration::from_secs(1))), None);
    let no = b.reserve(S(120), tok(1, 1)).unwrap_err();
    assert_eq!(no.reason, RefuseReason::MoneyLimit);
    assert_eq!(no.retry_after, Duration::from_secs(30));
    assert_eq!(b.open_until(S(120)), Some(S(150)));
    let ok = b.reserve(S(150), tok(1, 1)).unwrap();
    assert_eq!(
        ok.transition().map(|t| (t.from, t.to)),
        Some((SpendState::Open, SpendState::Admitting))
    );
    // Without a reset from the provider: the policy's money_open (1 h).
    let _ = b.money_signal(S(200), None);
    assert_eq!(b.open_until(S(200)), Some(S(3_800)));
    let t = b.reset(S(201)).unwrap();
    assert_eq!(t.to, SpendState::Admitting);
    // A clock that steps back counts as the latest time.
    assert!(b.reserve(S(0), tok(1, 1)).is_ok());
}

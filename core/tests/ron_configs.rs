//! The configs of backoff, budgets, the retry policy and the throttle, as the simulator's scenario
//! files write them: every config round-trips through RON, the hand-written forms shown in the docs
//! parse to the named profiles, defaults fill in, and unknown fields are refused by name.
#![cfg(feature = "serde")]

use reliable_core::Duration;
use reliable_core::backoff::{BackoffConfig, Jitter, Shape};
use reliable_core::budget::{
    BudgetConfig, Calls, ConcurrencyConfig, QuotaConfig, RateWindow, RatioConfig,
    RetryBreakerConfig, Threshold, TokenBucketConfig,
};
use reliable_core::outcome::ErrorClass;
use reliable_core::retry::RetryConfig;
use reliable_core::throttle::ThrottleConfig;
use ron::extensions::Extensions;
use ron::ser::PrettyConfig;
use serde::Serialize;
use serde::de::DeserializeOwned;

fn round_trip<T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug>(value: &T) {
    for text in [
        ron::to_string(value).unwrap(),
        ron::ser::to_string_pretty(value, PrettyConfig::default()).unwrap(),
    ] {
        let back: T = ron::from_str(&text).unwrap_or_else(|e| panic!("{text}\n{e}"));
        assert_eq!(&back, value, "{text}");
    }
    // With the extensions a scenario loader may enable, output and input still agree.
    let ext = ron::Options::default()
        .with_default_extension(Extensions::UNWRAP_VARIANT_NEWTYPES | Extensions::IMPLICIT_SOME);
    let text = ext
        .to_string_pretty(value, PrettyConfig::default())
        .unwrap();
    let back: T = ext
        .from_str(&text)
        .unwrap_or_else(|e| panic!("{text}\n{e}"));
    assert_eq!(&back, value, "{text}");
}

fn parse<T: DeserializeOwned>(text: &str) -> T {
    ron::from_str(text).unwrap_or_else(|e| panic!("{text}\n{e}"))
}

fn backoffs() -> Vec<BackoffConfig> {
    vec![
        BackoffConfig::immediate(),
        BackoffConfig::constant(Duration::from_micros(250)),
        BackoffConfig::reliablekit(),
        BackoffConfig::aws_standard(),
        BackoffConfig::aws_2026(),
        BackoffConfig::brooker_2015(Jitter::None),
        BackoffConfig::brooker_2015(Jitter::Full),
        BackoffConfig::brooker_2015(Jitter::Equal),
        BackoffConfig::brooker_2015(Jitter::Decorrelated),
        BackoffConfig {
            shape: Shape::Linear {
                base: Duration::from_millis(100),
                step: Duration::from_millis(50),
            },
            cap: Some(Duration::from_secs(1)),
            jitter: Jitter::Proportional { fraction: 0.2 },
            first_exponent: 3,
        },
    ]
}

fn budgets() -> Vec<BudgetConfig> {
    vec![
        BudgetConfig::Unlimited,
        BudgetConfig::TokenBucket(TokenBucketConfig::grpc(10.0, 0.1)),
        BudgetConfig::TokenBucket(TokenBucketConfig::brooker_2022()),
        BudgetConfig::TokenBucket(TokenBucketConfig {
            initial_tokens: Some(2.5),
            ..TokenBucketConfig::yandex_2024()
        }),
        BudgetConfig::Ratio(RatioConfig::finagle()),
        BudgetConfig::Ratio(RatioConfig::percent(0.1)),
        BudgetConfig::Quota(QuotaConfig::aws_standard()),
        BudgetConfig::Quota(QuotaConfig {
            initial: Some(14),
            ..QuotaConfig::aws_2026()
        }),
        BudgetConfig::Concurrency(ConcurrencyConfig::envoy()),
        BudgetConfig::RetryBreaker(RetryBreakerConfig::brooker_2022()),
        BudgetConfig::RetryBreaker(RetryBreakerConfig {
            minimum_calls: 20,
            ..RetryBreakerConfig::yandex_2024()
        }),
    ]
}

#[test]
fn every_config_round_trips() {
    for b in backoffs() {
        round_trip(&b);
    }
    for b in budgets() {
        round_trip(&b);
    }
    for r in [
        RetryConfig::reliablekit(),
        RetryConfig::aws_standard(),
        RetryConfig::aws_2026(),
        RetryConfig {
            max_attempts: None,
            deadline: Some(Duration::from_millis(1_500)),
            retry_timeouts: false,
            ..RetryConfig::new(BackoffConfig::brooker_2015(Jitter::Decorrelated))
        },
    ] {
        round_trip(&r);
    }
    for t in [
        ThrottleConfig::google_sre(),
        ThrottleConfig {
            k: 1.5,
            window: Duration::from_secs(60),
            buckets: 6,
            max_rejection: Some(0.9),
        },
    ] {
        round_trip(&t);
    }
    for c in [
        ErrorClass::Transient,
        ErrorClass::Timeout,
        ErrorClass::Throttled {
            retry_after: Some(Duration::from_millis(1_500)),
        },
        ErrorClass::Throttled { retry_after: None },
        ErrorClass::Fatal,
        ErrorClass::DontRetry,
    ] {
        round_trip(&c);
    }
}

#[test]
fn hand_written_forms_parse_to_the_named_profiles() {
    // The metastable-collapse case: full jitter, U[0, 10 s * 2^k] before retry k.
    let collapse: BackoffConfig = parse(
        r#"(shape: Exponential(base: "10s"), cap: Some("40s"), jitter: Full, first_exponent: 1)"#,
    );
    assert_eq!(
        collapse,
        BackoffConfig {
            first_exponent: 1,
            ..BackoffConfig::exponential(
                Duration::from_secs(10),
                2.0,
                Duration::from_secs(40),
                Jitter::Full
            )
        }
    );
    // Immediate retries: defaults fill in the cap and the jitter.
    let immediate: BackoffConfig = parse(r#"(shape: Constant(delay: "0s"))"#);
    assert_eq!(immediate, BackoffConfig::immediate());
    let brooker: BackoffConfig = parse(
        r#"(shape: Exponential(base: "5ms", factor: 2.0), cap: Some("2s"), jitter: Decorrelated, first_exponent: 1)"#,
    );
    assert_eq!(brooker, BackoffConfig::brooker_2015(Jitter::Decorrelated));
    let seed: BackoffConfig = parse(
        r#"(shape: Exponential(base: "200ms"), cap: Some("18446744073.709551615s"), jitter: Proportional(fraction: 0.1))"#,
    );
    assert_eq!(seed, BackoffConfig::reliablekit());

    let budgets: Vec<BudgetConfig> = parse(
        r#"[
            Unlimited,
            TokenBucket((max_tokens: 5.0, first_try_credit: 0.1, retry_cost: 1.0, retry_when: Above(1.0))),
            TokenBucket((max_tokens: 10.0, success_credit: 0.1, failure_cost: 1.0, retry_when: Above(5.0))),
            TokenBucket((max_tokens: 30.0, success_credit: 0.1, retried_success_credit: Some(0.0), retry_cost: 1.0, retry_when: AtLeast(1.0))),
            Ratio((ratio: 0.1, min_per_sec: 0)),
            Quota(()),
            Quota((retry_cost: 14, timeout_cost: 14)),
            Concurrency(()),
            RetryBreaker(()),
            RetryBreaker((stop_when: AtLeast(0.1), calls: Attempts, window: Time(span: "200ms", buckets: 10))),
        ]"#,
    );
    assert_eq!(
        budgets,
        vec![
            BudgetConfig::Unlimited,
            BudgetConfig::TokenBucket(TokenBucketConfig::brooker_2022()),
            BudgetConfig::TokenBucket(TokenBucketConfig::grpc(10.0, 0.1)),
            BudgetConfig::TokenBucket(TokenBucketConfig::yandex_2024()),
            BudgetConfig::Ratio(RatioConfig::percent(0.1)),
            BudgetConfig::Quota(QuotaConfig::aws_standard()),
            BudgetConfig::Quota(QuotaConfig::aws_2026()),
            BudgetConfig::Concurrency(ConcurrencyConfig::envoy()),
            BudgetConfig::RetryBreaker(RetryBreakerConfig::brooker_2022()),
            BudgetConfig::RetryBreaker(RetryBreakerConfig::yandex_2024()),
        ]
    );
    // With the extensions, the inner parentheses and `Some` go.
    let ext = ron::Options::default()
        .with_default_extension(Extensions::UNWRAP_VARIANT_NEWTYPES | Extensions::IMPLICIT_SOME);
    let ratio: BudgetConfig = ext
        .from_str(r#"Ratio(ratio: 0.1, min_per_sec: 0, ttl: "10s")"#)
        .unwrap();
    assert_eq!(ratio, BudgetConfig::Ratio(RatioConfig::percent(0.1)));
    let breaker: BudgetConfig = ext
        .from_str(r#"RetryBreaker(stop_when: Above(0.1), calls: FirstTries, window: Cumulative)"#)
        .unwrap();
    assert_eq!(
        breaker,
        BudgetConfig::RetryBreaker(RetryBreakerConfig::brooker_2022())
    );
    let capped: BackoffConfig = ext
        .from_str(r#"(shape: Exponential(base: "50ms"), cap: "20s", jitter: Full)"#)
        .unwrap();
    assert_eq!(capped, BackoffConfig::aws_2026());

    let retry: RetryConfig = parse(
        r#"(
            max_attempts: Some(3),
            attempt_timeout: Some("3s"),
            backoff: (shape: Exponential(base: "10s"), cap: Some("40s"), jitter: Full, first_exponent: 1),
        )"#,
    );
    assert_eq!(
        retry,
        RetryConfig {
            attempt_timeout: Some(Duration::from_secs(3)),
            ..RetryConfig::new(collapse)
        }
    );
    let aws: RetryConfig = parse(
        r#"(
            backoff: (shape: Exponential(base: "50ms"), cap: Some("20s"), jitter: Full),
            throttled_backoff: Some((shape: Exponential(base: "1s"), cap: Some("20s"), jitter: Full)),
            max_server_delay: "5s",
        )"#,
    );
    assert_eq!(aws, RetryConfig::aws_2026());
    let no_limit: RetryConfig =
        parse(r#"(max_attempts: None, backoff: (shape: Constant(delay: "0s")))"#);
    assert_eq!(no_limit.max_attempts, None);

    let throttle: ThrottleConfig = parse("()");
    assert_eq!(throttle, ThrottleConfig::google_sre());
    let capped: ThrottleConfig = parse(r#"(k: 1.5, window: "1m", max_rejection: Some(0.9))"#);
    assert_eq!(capped.window, Duration::from_secs(60));
    assert_eq!(capped.buckets, 12);

    let throttled: ErrorClass = parse(r#"Throttled(retry_after: Some("1.5s"))"#);
    assert_eq!(throttled.retry_after(), Some(Duration::from_millis(1_500)));
    assert_eq!(parse::<Threshold>("AtLeast(0.1)"), Threshold::AtLeast(0.1));
    assert_eq!(parse::<Calls>("Attempts"), Calls::Attempts);
    assert_eq!(parse::<RateWindow>("Cumulative"), RateWindow::Cumulative);
}

#[test]
fn mistakes_are_refused_with_the_field_and_the_place() {
    let cases: [(&str, &str); 6] = [
        // A typo in a field name.
        (r#"(shape: Constant(delay: "1s"), jiter: Full)"#, "jiter"),
        // An unknown variant.
        (
            r#"(shape: Exponential(base: "1s"), cap: Some("2s"), jitter: Fuzzy)"#,
            "Fuzzy",
        ),
        // A duration without a unit.
        (r#"(shape: Constant(delay: "30"))"#, "missing unit"),
        // A field of another kind.
        (r#"(shape: Constant(delay: "1s", factor: 2.0))"#, "factor"),
        // A required field left out.
        (r#"(shape: Linear(base: "1s"), cap: Some("2s"))"#, "step"),
        (r#"(cap: Some("2s"))"#, "shape"),
    ];
    for (text, needle) in cases {
        let err = ron::from_str::<BackoffConfig>(text)
            .unwrap_err()
            .to_string();
        assert!(err.contains(needle), "{text}: {err}");
        assert!(err.starts_with("1:"), "has a position: {err}");
    }
    let err = ron::from_str::<BudgetConfig>("Ratio((ratio: 0.1, min_per_sec: 0, window: \"1s\"))")
        .unwrap_err()
        .to_string();
    assert!(err.contains("window"), "{err}");
    let err = ron::from_str::<BudgetConfig>("Ratio((ratio: 0.1))")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("min_per_sec"),
        "the reserve must be chosen: {err}"
    );
    let err =
        ron::from_str::<RetryConfig>(r#"(backoff: (shape: Constant(delay: "1s")), retries: 3)"#)
            .unwrap_err()
            .to_string();
    assert!(err.contains("retries"), "{err}");
    let err = ron::from_str::<ThrottleConfig>("(K: 2.0)")
        .unwrap_err()
        .to_string();
    assert!(err.contains('K'), "{err}");
}

#[test]
fn hedging_and_limit_configs_round_trip_and_parse_as_documented() {
    use reliable_core::hedge::{HedgeConfig, HedgeDelay, QuantileDelay};
    use reliable_core::ledger::Extra;
    use reliable_core::limit::{LimitRule, LimiterConfig, RateConfig};

    let hedges = [
        HedgeConfig::p95(),
        HedgeConfig {
            delay: HedgeDelay::Fixed(Duration::from_millis(50)),
            max_hedges: 2,
        },
    ];
    for h in &hedges {
        round_trip(h);
    }
    for l in [
        LimiterConfig::bulkhead(10),
        LimiterConfig::aimd(),
        LimiterConfig::gradient(),
    ] {
        round_trip(&l);
    }
    let rate = RateConfig {
        rate: 100,
        period: Duration::from_secs(1),
        burst: 10,
    };
    round_trip(&rate);
    round_trip(&Extra::Probe);
    // The forms the docs show.
    assert_eq!(
        parse::<HedgeConfig>("(delay: Quantile(()), max_hedges: 1)"),
        HedgeConfig::p95()
    );
    assert_eq!(
        parse::<HedgeConfig>(r#"(delay: Fixed("50ms"), max_hedges: 2)"#),
        hedges[1]
    );
    assert_eq!(
        parse::<QuantileDelay>(r#"(quantile: 0.99)"#),
        QuantileDelay {
            quantile: 0.99,
            ..QuantileDelay::p95()
        }
    );
    assert_eq!(
        parse::<LimiterConfig>(
            "(rule: Aimd(backoff: 0.9, increase: 1), initial: 20, min: 20, max: 200)"
        ),
        LimiterConfig::aimd()
    );
    assert_eq!(
        parse::<LimiterConfig>("(rule: Fixed, initial: 10, min: 10, max: 10)"),
        LimiterConfig::bulkhead(10)
    );
    assert!(matches!(
        parse::<LimiterConfig>(
            "(rule: Gradient(tolerance: 1.5, smoothing: 0.2, long_window: 600, queue: 4), initial: 20, min: 20, max: 200)"
        )
        .rule,
        LimitRule::Gradient { long_window: 600, .. }
    ));
    assert_eq!(
        parse::<RateConfig>(r#"(rate: 100, period: "1s", burst: 10)"#),
        rate
    );
    let err = ron::from_str::<RateConfig>(r#"(rate: 100, per: "1s", burst: 10)"#).unwrap_err();
    assert!(err.to_string().contains("per"), "{err}");
}

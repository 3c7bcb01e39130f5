//! Every provider signal, one table row each: status, headers and body in, the core's decision out.
//! The rows follow the providers' documentation; where it differs from the usual summary (Anthropic
//! answers a self-set spend limit with 400, not 429; OpenRouter's in-flight budget is a 402 that
//! is retried after its `Retry-After`) the row says so.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use reliable::ByType;
use reliable::llm::{ProviderError, Quota, classify, quotas};
use reliable_core::Duration as D;
use reliable_core::Instant;
use reliable_core::backoff::BackoffConfig;
use reliable_core::budget::Unlimited;
use reliable_core::outcome::ErrorClass;
use reliable_core::provider::{QuotaKind, Signal};
use reliable_core::retry::{RetryConfig, RetryDecision, RetryPolicy};

/// 2025-08-21T12:40:59Z.
const NOW: u64 = 1_755_780_059;

fn now() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(NOW)
}

const NO: &[(&str, &str)] = &[];

fn s(secs: u64) -> D {
    D::from_secs(secs)
}

/// A table row: name, status, headers, body, the signal expected.
type SignalRow<'a> = (
    &'a str,
    u16,
    Vec<(&'a str, &'a str)>,
    &'a str,
    Option<Signal>,
);
/// A table row: name, headers, the quotas expected.
type QuotaRow<'a> = (&'a str, Vec<(&'a str, &'a str)>, Vec<Quota>);

const SEPT_1: u64 = 1_756_684_800; // 2025-09-01T00:00:00Z

#[test]
fn every_signal_row() {
    let anthropic_spend = r#"{"type":"error","error":{"type":"rate_limit_error","message":"spend limit","details":{"error_code":"enforced_spend_limit_reached"}}}"#;
    let anthropic_rate = r#"{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}"#;
    let anthropic_self_limit = r#"{"type":"error","error":{"type":"invalid_request_error","message":"You have reached your specified API usage limits. You will regain access on 2025-09-01 at 00:00 UTC."}}"#;
    let anthropic_bad = r#"{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: Field required"}}"#;
    let overloaded =
        r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
    let openai_quota = r#"{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}"#;
    let openai_org =
        r#"{"error":{"type":"invalid_request_error","code":"organization_spend_limit_exceeded"}}"#;
    let openai_project =
        r#"{"error":{"type":"invalid_request_error","code":"project_spend_limit_exceeded"}}"#;
    let openai_credit =
        r#"{"error":{"type":"insufficient_quota","code":"credit_balance_exhausted"}}"#;
    let openai_usage =
        r#"{"error":{"type":"insufficient_quota","code":"organization_usage_limit_exceeded"}}"#;
    let openai_rate = r#"{"error":{"message":"Rate limit reached for requests","type":"requests","code":"rate_limit_exceeded"}}"#;
    let openrouter_credits = r#"{"error":{"code":402,"message":"Insufficient credits","metadata":{"limit_source":"openrouter_credits"}}}"#;
    let openrouter_in_flight = r#"{"error":{"code":402,"message":"In-flight budget exhausted","metadata":{"limit_source":"openrouter_in_flight_budget"}}}"#;
    let portkey = r#"{"status":"failure","message":"Budget exhausted for this virtual key"}"#;
    let litellm_400 = r#"{"error":{"message":"Budget has been exceeded! Current cost: 10.2, Max budget: 10.0","type":"budget_exceeded","param":null,"code":"400"}}"#;
    let litellm_429 = r#"{"error":{"message":"Max budget limit reached.","type":"budget_exceeded","code":"429"}}"#;
    let http_date = "Thu, 21 Aug 2025 12:41:09 GMT"; // NOW + 10 s
    let money = |reset: Option<D>| Some(Signal::MoneyLimit { reset_after: reset });

    #[rustfmt::skip]
    let rows: Vec<SignalRow<'_>> = vec![
        // Server-directed delay.
        ("429 retry-after-ms", 429, vec![("retry-after-ms", "1500")], "", Some(Signal::RetryAfter(D::from_millis(1_500)))),
        ("retry-after-ms wins over retry-after", 429, vec![("retry-after", "30"), ("retry-after-ms", "250")], "", Some(Signal::RetryAfter(D::from_millis(250)))),
        ("429 retry-after seconds", 429, vec![("retry-after", "7")], anthropic_rate, Some(Signal::RetryAfter(s(7)))),
        ("503 retry-after HTTP-date", 503, vec![("Retry-After", http_date)], "", Some(Signal::RetryAfter(s(10)))),
        ("a long delay is passed on (the retry policy clamps it)", 429, vec![("retry-after", "3600")], openai_rate, Some(Signal::RetryAfter(s(3_600)))),
        ("a malformed delay is no delay", 429, vec![("retry-after", "soon")], "", Some(Signal::Overloaded { retry_after: None })),
        // x-should-retry overrides the status rules.
        ("x-should-retry: false on a 500", 500, vec![("x-should-retry", "false")], "", Some(Signal::DontRetry)),
        ("x-should-retry: false on a 429", 429, vec![("x-should-retry", "false"), ("retry-after", "2")], "", Some(Signal::DontRetry)),
        ("x-should-retry: false on a 400", 400, vec![("x-should-retry", "false")], anthropic_bad, Some(Signal::Fatal)),
        ("x-should-retry: true on a 400", 400, vec![("x-should-retry", "true")], anthropic_bad, Some(Signal::Transient)),
        ("x-should-retry: true on a 404, with a delay", 404, vec![("x-should-retry", "TRUE"), ("retry-after", "1")], "", Some(Signal::RetryAfter(s(1)))),
        // Transient statuses.
        ("408", 408, vec![], "", Some(Signal::Transient)),
        ("409", 409, vec![], "", Some(Signal::Transient)),
        ("429 without a delay", 429, vec![], openai_rate, Some(Signal::Overloaded { retry_after: None })),
        ("500", 500, vec![], "", Some(Signal::Transient)),
        ("502", 502, vec![], "<html>bad gateway</html>", Some(Signal::Transient)),
        ("503", 503, vec![], "", Some(Signal::Overloaded { retry_after: None })),
        ("504", 504, vec![], "", Some(Signal::Transient)),
        // Provider-wide overload.
        ("Anthropic 529 overloaded_error", 529, vec![], overloaded, Some(Signal::Overloaded { retry_after: None })),
        ("529 with a delay", 529, vec![("retry-after", "5")], "", Some(Signal::Overloaded { retry_after: Some(s(5)) })),
        ("overloaded_error in a 200 stream's error event", 200, vec![], overloaded, Some(Signal::Overloaded { retry_after: None })),
        // Money: never retried, the spend breaker opens until the reset.
        ("Anthropic 429 enforced_spend_limit_reached: until the 1st", 429, vec![], anthropic_spend, money(Some(s(SEPT_1 - NOW)))),
        ("Anthropic 429 enforced_spend_limit_reached, x-should-retry: true", 429, vec![("x-should-retry", "true")], anthropic_spend, money(Some(s(SEPT_1 - NOW)))),
        ("Anthropic 400 self-set spend limit (docs: 400, not 429)", 400, vec![], anthropic_self_limit, money(None)),
        ("Anthropic 402 billing_error", 402, vec![], r#"{"type":"error","error":{"type":"billing_error","message":"x"}}"#, money(None)),
        ("OpenAI 429 insufficient_quota", 429, vec![], openai_quota, money(None)),
        ("OpenAI 429 organization_spend_limit_exceeded", 429, vec![], openai_org, money(None)),
        ("OpenAI 429 project_spend_limit_exceeded", 429, vec![], openai_project, money(None)),
        ("OpenAI 429 credit_balance_exhausted", 429, vec![], openai_credit, money(None)),
        ("OpenAI 429 organization_usage_limit_exceeded", 429, vec![], openai_usage, money(None)),
        ("OpenRouter 402 credits", 402, vec![], openrouter_credits, money(None)),
        ("OpenRouter 402 without a body", 402, vec![], "", money(None)),
        ("OpenRouter 402 in-flight budget with Retry-After (docs: transient)", 402, vec![("retry-after", "3")], openrouter_in_flight, Some(Signal::RetryAfter(s(3)))),
        ("Portkey 412 budget exhausted", 412, vec![], portkey, money(None)),
        ("LiteLLM 400 budget_exceeded", 400, vec![], litellm_400, money(None)),
        ("LiteLLM 429 budget_exceeded", 429, vec![], litellm_429, money(None)),
        ("a money limit with a Retry-After resets then", 429, vec![("retry-after", "120")], openai_org, money(Some(s(120)))),
        // Not errors, and plain client errors.
        ("200", 200, vec![], r#"{"id":"msg_1","type":"message"}"#, None),
        ("400 bad request", 400, vec![], anthropic_bad, Some(Signal::Fatal)),
        ("401", 401, vec![], "", Some(Signal::Fatal)),
        ("404", 404, vec![], "", Some(Signal::Fatal)),
        ("413", 413, vec![], "", Some(Signal::Fatal)),
    ];
    for (name, status, headers, body, want) in &rows {
        let got = classify(*status, &headers[..], body, now());
        assert_eq!(&got, want, "{name}");
        // What the retry policy, the budgets and a breaker make of it.
        if let Some(signal) = got {
            let money = matches!(signal, Signal::MoneyLimit { .. });
            assert_eq!(
                signal.is_retryable(),
                !money && !matches!(signal, Signal::DontRetry | Signal::Fatal),
                "{name}"
            );
            let err = ProviderError::new(*status, &headers[..], body, now()).unwrap();
            assert_eq!(ByType.error_of(&err), signal.error_class(), "{name}");
        }
    }
    assert_eq!(rows.len(), 42);
}

#[test]
fn a_long_server_delay_is_clamped_by_the_retry_policy() {
    let signal = classify(429, &[("retry-after", "3600")][..], "", now()).unwrap();
    let policy = RetryPolicy::new(RetryConfig::new(BackoffConfig::constant(D::ZERO))).unwrap();
    let mut budget = Unlimited;
    let t0 = Instant::from_secs(10);
    let mut state = policy.start(t0, &mut budget);
    let d = policy.on_failure_with(&mut state, signal.error_class(), t0, &mut budget, 0);
    // Clamped to the default max_server_delay, 30 s.
    assert_eq!(d, RetryDecision::RetryAt(t0 + s(30)));
    assert_eq!(
        signal.error_class(),
        ErrorClass::Throttled {
            retry_after: Some(s(3_600))
        }
    );
}

#[test]
fn every_quota_header_family() {
    let q = |kind, limit, remaining, secs: u64| Quota {
        kind,
        limit,
        remaining,
        reset_after: Duration::from_secs(secs),
    };
    #[rustfmt::skip]
    let rows: Vec<QuotaRow<'_>> = vec![
        ("Anthropic, all four limits (RFC 3339 resets)", vec![
            ("anthropic-ratelimit-requests-limit", "1000"), ("anthropic-ratelimit-requests-remaining", "999"), ("anthropic-ratelimit-requests-reset", "2025-08-21T12:41:00Z"),
            ("anthropic-ratelimit-tokens-limit", "96000"), ("anthropic-ratelimit-tokens-remaining", "500"), ("anthropic-ratelimit-tokens-reset", "2025-08-21T12:41:59Z"),
            ("anthropic-ratelimit-input-tokens-limit", "80000"), ("anthropic-ratelimit-input-tokens-remaining", "80000"), ("anthropic-ratelimit-input-tokens-reset", "2025-08-21T14:41:09+02:00"),
            ("anthropic-ratelimit-output-tokens-limit", "16000"), ("anthropic-ratelimit-output-tokens-remaining", "0"), ("anthropic-ratelimit-output-tokens-reset", "2025-08-21T12:40:00Z"),
        ], vec![
            q(QuotaKind::Requests, Some(1_000), 999, 1),
            q(QuotaKind::Tokens, Some(96_000), 500, 60),
            q(QuotaKind::InputTokens, Some(80_000), 80_000, 10),
            q(QuotaKind::OutputTokens, Some(16_000), 0, 0), // a reset in the past: refilled
        ]),
        ("OpenAI (Go-style durations)", vec![
            ("x-ratelimit-limit-requests", "5000"), ("x-ratelimit-remaining-requests", "4999"), ("x-ratelimit-reset-requests", "12ms"),
            ("x-ratelimit-limit-tokens", "160000"), ("x-ratelimit-remaining-tokens", "1200"), ("x-ratelimit-reset-tokens", "6m0s"),
        ], vec![
            Quota { kind: QuotaKind::Requests, limit: Some(5_000), remaining: 4_999, reset_after: Duration::from_millis(12) },
            q(QuotaKind::Tokens, Some(160_000), 1_200, 360),
        ]),
        ("OpenAI, no limit header", vec![("x-ratelimit-remaining-tokens", "10"), ("x-ratelimit-reset-tokens", "1m30s")],
            vec![q(QuotaKind::Tokens, None, 10, 90)]),
        ("IETF structured fields (draft 08+)", vec![("RateLimit", "\"default\";r=50;t=30"), ("RateLimit-Policy", "\"burst\";q=10;w=1, \"default\";q=100;w=60")],
            vec![q(QuotaKind::Requests, Some(100), 50, 30)]),
        ("IETF structured fields, a unit other than requests is skipped", vec![("RateLimit", "\"bytes\";r=50;t=30"), ("RateLimit-Policy", "\"bytes\";q=1000;qu=\"content-bytes\";w=60")],
            vec![]),
        ("IETF draft 06 fields", vec![("RateLimit-Limit", "100"), ("RateLimit-Remaining", "7"), ("RateLimit-Reset", "12")],
            vec![q(QuotaKind::Requests, Some(100), 7, 12)]),
        ("missing reset or remaining: skipped", vec![("x-ratelimit-remaining-requests", "5"), ("anthropic-ratelimit-tokens-reset", "2025-08-21T12:41:00Z"), ("anthropic-ratelimit-requests-remaining", "x"), ("anthropic-ratelimit-requests-reset", "2025-08-21T12:41:00Z")],
            vec![]),
        ("malformed values: skipped", vec![("anthropic-ratelimit-tokens-remaining", "10"), ("anthropic-ratelimit-tokens-reset", "tomorrow"), ("x-ratelimit-remaining-tokens", "-1"), ("x-ratelimit-reset-tokens", "1s")],
            vec![]),
    ];
    for (name, headers, want) in &rows {
        assert_eq!(&quotas(&headers[..], now()), want, "{name}");
    }
}

#[test]
fn quotas_feed_the_spend_breaker() {
    use reliable_core::spend::{
        RefuseReason, SpendBreaker, SpendConfig, SpendPolicy, SpendState, Tokens,
    };
    let headers = [
        ("x-ratelimit-limit-tokens", "40000"),
        ("x-ratelimit-remaining-tokens", "3000"),
        ("x-ratelimit-reset-tokens", "20s"),
    ];
    let policy = SpendPolicy::new(SpendConfig::new()).unwrap();
    let mut spend: SpendBreaker<&SpendPolicy> = SpendBreaker::new(&policy).unwrap();
    let t = Instant::from_secs(100);
    for q in quotas(&headers[..], now()) {
        let _ = spend.observe(t, q.update(t));
    }
    // 7.5% of the tokens left: throttling before any 429.
    assert_eq!(spend.state(t), SpendState::Throttling);
    let no = spend
        .reserve(
            t,
            Tokens {
                input: 2_000,
                output: 2_000,
            },
        )
        .unwrap_err();
    assert_eq!(no.reason, RefuseReason::ProviderQuota(QuotaKind::Tokens));
    assert_eq!(no.retry_after, s(20));
    // A money signal opens it until the reset the provider implies.
    let body = r#"{"type":"error","error":{"type":"rate_limit_error","details":{"error_code":"enforced_spend_limit_reached"}}}"#;
    let Some(Signal::MoneyLimit { reset_after }) = classify(429, NO, body, now()) else {
        panic!()
    };
    let _ = spend.money_signal(t, reset_after);
    assert_eq!(spend.open_until(t), Some(t + s(SEPT_1 - NOW)));
}

//! LLM provider signals: what an answer from OpenAI, Anthropic, OpenRouter, Portkey or LiteLLM
//! means for retrying ([`classify`] → the core's [`Signal`]), and how much of each rate limit is
//! left ([`quotas`] → [`Quota`], to feed a [`SpendBreaker`](reliable_core::spend::SpendBreaker)).
//!
//! LLM APIs fail in ways plain HTTP status rules get wrong: a 429 may be a per-minute token limit
//! (retry after the server's delay) or a spent budget (retrying costs round trips and cannot work
//! until the limit resets), and a 529 is the provider's whole fleet overloaded. This module reads
//! status, headers and the JSON error body; the generic header parsing (`retry-after-ms`,
//! `Retry-After` as seconds or HTTP-date, `x-should-retry`) is [`crate::http`]'s.
//!
//! | answer | [`Signal`] |
//! |---|---|
//! | below 400 | none (`None`) |
//! | a money limit (table below), whatever `x-should-retry` says | [`MoneyLimit`](Signal::MoneyLimit), with the reset when known |
//! | an `overloaded_error` event in a successful stream | [`Overloaded`](Signal::Overloaded), with the server's delay if any |
//! | anything else | the core's table ([`reliable_core::answer`]), with an `overloaded_error` body as its overload marker, refined: |
//! | — throttled, on a 529 or an `overloaded_error` body | [`Overloaded`](Signal::Overloaded), with the server's delay if any |
//! | — throttled, with a delay (`retry-after-ms`, else `Retry-After`) | [`RetryAfter`](Signal::RetryAfter) |
//! | — throttled, without a delay (a 429 or 503) | [`Overloaded`](Signal::Overloaded) without a delay |
//! | — transient (408, 409, other 5xx, `x-should-retry: true`) | [`Transient`](Signal::Transient) |
//! | — don't retry (`x-should-retry: false`) | [`DontRetry`](Signal::DontRetry) |
//! | — fatal (other 4xx), except OpenRouter's in-flight budget (retried) | [`Fatal`](Signal::Fatal) |
//!
//! Money limits ([`money`]), from the providers' error documentation:
//!
//! | provider | answer |
//! |---|---|
//! | Anthropic | 429 with `error.details.error_code: enforced_spend_limit_reached` (resets 00:00 UTC on the 1st of next month); 400 `invalid_request_error` "You have reached your specified (workspace) API usage limits"; 402 `billing_error` |
//! | OpenAI | 429 with `insufficient_quota` (type or code), `organization_spend_limit_exceeded`, `project_spend_limit_exceeded` (any `*_spend_limit_exceeded`), `credit_balance_exhausted`, `organization_usage_limit_exceeded` |
//! | OpenRouter | 402 (credits or key limit), except `limit_source: openrouter_in_flight_budget` with a `Retry-After`: transient, retried after the delay |
//! | Portkey | 412 |
//! | LiteLLM | `budget_exceeded` as the error type or code (400 in current proxies, 429 in older ones) |
//!
//! The server's delay is passed on as given; the retry policy clamps it to its
//! `max_server_delay` (30 s by default; the OpenAI and Anthropic SDKs honour up to 60 s).
//!
//! ```
//! use reliable::llm::{classify, quotas};
//! use reliable_core::provider::{QuotaKind, Signal};
//! use std::time::{Duration, SystemTime};
//!
//! let now = SystemTime::now();
//! let body = r#"{"error":{"type":"insufficient_quota","code":"insufficient_quota"}}"#;
//! assert_eq!(classify(429, &[("content-type", "application/json")][..], body, now),
//!            Some(Signal::MoneyLimit { reset_after: None }));
//! assert_eq!(classify(529, &[][..] as &[(&str, &str)], "", now),
//!            Some(Signal::Overloaded { retry_after: None }));
//!
//! let headers = [("x-ratelimit-remaining-tokens", "1200"), ("x-ratelimit-limit-tokens", "40000"),
//!                ("x-ratelimit-reset-tokens", "6m0s")];
//! let q = quotas(&headers[..], now);
//! assert_eq!((q[0].kind, q[0].remaining, q[0].reset_after), (QuotaKind::Tokens, 1200, Duration::from_secs(360)));
//! ```

mod calendar;
pub mod money;
mod quota;

pub use quota::{Quota, quotas};

use crate::classify::{ByType, Classify};
use crate::http::{HeaderSignals, Headers};
use reliable_core::outcome::ErrorClass;
use reliable_core::provider::Signal;
use std::time::SystemTime;

/// What an answer from an LLM provider means for retrying (see the module's table); `None` when
/// it is not an error (status below 400 and no error body that says otherwise).
///
/// `body` is the response body (JSON, or anything: what is not JSON is ignored); `now` is the wall
/// clock an HTTP-date or a monthly reset is measured from.
pub fn classify(
    status: u16,
    headers: &(impl Headers + ?Sized),
    body: &str,
    now: SystemTime,
) -> Option<Signal> {
    let signals = HeaderSignals::from_headers(headers, now);
    let delay = signals.retry_after.map(reliable_core::Duration::from);
    let error = money::ErrorBody::parse(body);
    if let Some(reset_after) = money::money_limit(status, &signals, &error, now) {
        return Some(Signal::MoneyLimit {
            reset_after: reset_after.map(reliable_core::Duration::from),
        });
    }
    let overloaded = error.is_type("overloaded_error");
    if overloaded && status < 400 {
        // An error event inside a successful stream.
        return Some(Signal::Overloaded { retry_after: delay });
    }
    let mut core = crate::http::answer(status, &signals);
    if let reliable_core::answer::Answer::Status { signals, .. } = &mut core {
        signals.overloaded = overloaded;
    }
    // The core's table decides; provider specifics only refine its classes.
    Some(match core.class()? {
        ErrorClass::Throttled { retry_after } if status == 529 || overloaded => {
            Signal::Overloaded { retry_after }
        }
        ErrorClass::Throttled {
            retry_after: Some(d),
        } => Signal::RetryAfter(d),
        // An overload answer without a delay (a 429 or 503): back off, count it.
        ErrorClass::Throttled { retry_after: None } => Signal::Overloaded { retry_after: None },
        // OpenRouter's in-flight budget: a 402 that is retried.
        ErrorClass::Fatal
            if signals.should_retry != Some(false)
                && money::is_in_flight_budget(status, &signals, &error) =>
        {
            retryable(delay)
        }
        ErrorClass::Fatal => Signal::Fatal,
        ErrorClass::DontRetry => Signal::DontRetry,
        ErrorClass::Transient | ErrorClass::Timeout | ErrorClass::Refused { .. } => {
            Signal::Transient
        }
    })
}

fn retryable(delay: Option<reliable_core::Duration>) -> Signal {
    match delay {
        Some(d) => Signal::RetryAfter(d),
        None => Signal::Transient,
    }
}

/// An error answer from an LLM provider, ready to return from a call through
/// [`Reliable`](crate::Reliable): its status, what it means, and the quotas its headers reported.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProviderError {
    /// The HTTP status.
    pub status: u16,
    /// What it means for retrying.
    pub signal: Signal,
    /// The rate limits the headers reported.
    pub quotas: Vec<Quota>,
}

impl ProviderError {
    /// The error of an answer with `status`, `headers` and `body`, or `None` if it is not an error.
    pub fn new(
        status: u16,
        headers: &(impl Headers + ?Sized),
        body: &str,
        now: SystemTime,
    ) -> Option<Self> {
        let signal = classify(status, headers, body, now)?;
        Some(ProviderError {
            status,
            signal,
            quotas: quotas(headers, now),
        })
    }
}

impl std::fmt::Display for ProviderError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.signal {
            Signal::MoneyLimit { .. } => {
                write!(f, "HTTP {}: a money limit was reached", self.status)
            }
            Signal::Overloaded { .. } => {
                write!(f, "HTTP {}: the provider is overloaded", self.status)
            }
            _ => write!(f, "HTTP {}", self.status),
        }
    }
}

impl std::error::Error for ProviderError {}

/// A provider's error by its signal.
impl<T: ?Sized> Classify<ProviderError, T> for ByType {
    fn error(&self, e: &ProviderError) -> ErrorClass {
        e.signal.error_class()
    }
}

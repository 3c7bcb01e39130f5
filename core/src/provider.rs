//! What an LLM provider's answer means for the client: [`Signal`] (retry or not, and how) and
//! [`QuotaUpdate`] (how much of a rate limit is left), as typed decisions.
//!
//! LLM providers answer in more ways than "ok" or "error": a 429 may be a per-minute token limit
//! (retry after the delay the server gives), or a spent budget (never retry: each retry costs a
//! round trip and fixes nothing until the limit resets); a 529 is the provider's whole fleet being
//! overloaded (back off and count it against the provider's health, whoever's limit it is); and
//! every response may carry the remaining quota, so a client can slow down *before* the 429. The
//! parsing of status codes, headers and bodies lives with the HTTP stack (the `reliable` crate);
//! the decisions are here, so the retry policy, the breaker and the
//! [`SpendBreaker`](crate::spend::SpendBreaker) read the same types on any target.
//!
//! | signal | retried? | breaker failure? | spend breaker |
//! |---|---|---|---|
//! | [`RetryAfter`](Signal::RetryAfter) (server-directed delay) | after the delay (clamped) | yes | — |
//! | [`Transient`](Signal::Transient) (408, 409, ≥ 500 but 503 and 529) | with backoff | yes | — |
//! | [`Overloaded`](Signal::Overloaded) (Anthropic 529; a 429 or 503 without delay) | with backoff, not before the delay | yes | — |
//! | [`MoneyLimit`](Signal::MoneyLimit) (a spend limit or budget exhausted) | never | no | opens until the reset |
//! | [`DontRetry`](Signal::DontRetry) (`x-should-retry: false`) | never | yes | — |
//! | [`Fatal`](Signal::Fatal) (other 4xx) | never | no | — |
//!
//! ```
//! use reliable_core::provider::Signal;
//! use reliable_core::outcome::ErrorClass;
//! use reliable_core::Duration;
//!
//! let overloaded = Signal::Overloaded { retry_after: None };
//! assert!(overloaded.is_retryable() && overloaded.counts_as_breaker_failure());
//! let money = Signal::MoneyLimit { reset_after: None };
//! assert!(!money.is_retryable() && !money.counts_as_breaker_failure());
//! assert_eq!(money.error_class(), ErrorClass::Fatal);
//! let wait = Signal::RetryAfter(Duration::from_secs(3));
//! assert_eq!(wait.error_class(), ErrorClass::Throttled { retry_after: Some(Duration::from_secs(3)) });
//! ```

use crate::outcome::ErrorClass;
use crate::time::{Duration, Instant};

/// What a failed answer from a provider tells the client to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
pub enum Signal {
    /// The server said when to come back (`retry-after-ms`, `retry-after`), on a retryable answer.
    /// The delay is as the server gave it; clamping is the retry policy's job.
    RetryAfter(Duration),
    /// A failure that may not happen again: 408, 409, ≥ 500 (but 503 and 529), a dropped
    /// connection. Retry with backoff.
    Transient,
    /// An overload answer: the provider as a whole is overloaded (Anthropic's 529
    /// `overloaded_error`), or a 429 or 503 without a delay (the core's table,
    /// [`answer`](crate::answer), calls both throttled). Back off (not before `retry_after` when
    /// given) and count it as a breaker failure.
    Overloaded {
        /// The server's delay, if it gave one.
        retry_after: Option<Duration>,
    },
    /// A money limit: a spend limit reached, quota or credits exhausted, a budget exceeded. Never
    /// retried; a [`SpendBreaker`](crate::spend::SpendBreaker) opens until the limit resets.
    MoneyLimit {
        /// How long until the limit resets, if the provider said.
        reset_after: Option<Duration>,
    },
    /// The server asked not to be retried (`x-should-retry: false`).
    DontRetry,
    /// A failure retrying cannot fix (a bad request, a missing model).
    Fatal,
}

impl Signal {
    /// Whether a retry may follow.
    pub const fn is_retryable(self) -> bool {
        self.error_class().is_retryable()
    }

    /// Whether a circuit breaker should count it as a failure of the provider. A money limit and a
    /// bad request say nothing about the provider's health.
    pub const fn counts_as_breaker_failure(self) -> bool {
        !matches!(self, Signal::MoneyLimit { .. } | Signal::Fatal)
    }

    /// The class the retry policy and the retry budgets read.
    pub const fn error_class(self) -> ErrorClass {
        match self {
            Signal::RetryAfter(d) => ErrorClass::Throttled {
                retry_after: Some(d),
            },
            Signal::Transient => ErrorClass::Transient,
            Signal::Overloaded { retry_after } => ErrorClass::Throttled { retry_after },
            Signal::MoneyLimit { .. } | Signal::Fatal => ErrorClass::Fatal,
            Signal::DontRetry => ErrorClass::DontRetry,
        }
    }
}

/// Which of a provider's rate limits a [`QuotaUpdate`] is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "kebab-case"))]
pub enum QuotaKind {
    /// Requests (RPM).
    Requests,
    /// Input plus output tokens (TPM).
    Tokens,
    /// Input tokens only (Anthropic's ITPM).
    InputTokens,
    /// Output tokens only (Anthropic's OTPM).
    OutputTokens,
}

impl QuotaKind {
    /// Every kind, in a fixed order (the index the spend breaker stores them under).
    pub const ALL: [QuotaKind; 4] = [
        QuotaKind::Requests,
        QuotaKind::Tokens,
        QuotaKind::InputTokens,
        QuotaKind::OutputTokens,
    ];

    /// Lower-case name: `requests`, `tokens`, `input-tokens`, `output-tokens`.
    pub const fn name(self) -> &'static str {
        match self {
            QuotaKind::Requests => "requests",
            QuotaKind::Tokens => "tokens",
            QuotaKind::InputTokens => "input-tokens",
            QuotaKind::OutputTokens => "output-tokens",
        }
    }

    pub(crate) const fn index(self) -> usize {
        match self {
            QuotaKind::Requests => 0,
            QuotaKind::Tokens => 1,
            QuotaKind::InputTokens => 2,
            QuotaKind::OutputTokens => 3,
        }
    }
}

/// A provider's report of one rate limit, read from response headers: `remaining` of `limit` are
/// left until `reset`. Feed it to [`SpendBreaker::observe`](crate::spend::SpendBreaker::observe)
/// so the client slows down before the provider answers 429.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct QuotaUpdate {
    /// Which limit.
    pub kind: QuotaKind,
    /// The limit per window, when the provider said (`None`: unknown).
    pub limit: Option<u64>,
    /// What is left in the current window.
    pub remaining: u64,
    /// When the window refills, on the caller's clock.
    pub reset: Instant,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decisions_say_what_the_table_says() {
        let d = Duration::from_secs(2);
        let all = [
            Signal::RetryAfter(d),
            Signal::Transient,
            Signal::Overloaded { retry_after: None },
            Signal::MoneyLimit { reset_after: None },
            Signal::DontRetry,
            Signal::Fatal,
        ];
        assert_eq!(
            all.map(Signal::is_retryable),
            [true, true, true, false, false, false]
        );
        assert_eq!(
            all.map(Signal::counts_as_breaker_failure),
            [true, true, true, false, true, false]
        );
        assert_eq!(
            Signal::Overloaded {
                retry_after: Some(d)
            }
            .error_class()
            .retry_after(),
            Some(d)
        );
        for (i, k) in QuotaKind::ALL.into_iter().enumerate() {
            assert_eq!(k.index(), i);
        }
        assert_eq!(QuotaKind::InputTokens.name(), "input-tokens");
    }
}

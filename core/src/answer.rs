//! One meaning of every answer: how an attempt's answer becomes an [`ErrorClass`], and what each
//! class does to every other piece (retry, backoff, breaker, adaptive throttle, budget).
//!
//! Every face of the project reads answers through this module and nothing else: the `reliable`
//! crate's HTTP classification and tower layers, the simulator's downstream answers, the emulator
//! and the MCP server. A face only *parses* transport details (a status line, headers, an I/O
//! error, its own local refusals) into an [`Answer`]; [`Answer::class`] and the class's
//! [`consequences`](ErrorClass::consequences) decide.
//!
//! # From an answer to a class
//!
//! One `match` over the answer ([`Answer::class`]); a line per arm, first match wins. "Overload"
//! is status 429, 503 or 529, or an explicit overload marker ([`Signals::overloaded`]: gRPC
//! `RESOURCE_EXHAUSTED`, an `overloaded_error` body). "Retried status" is 408, 409, 429 or ≥ 500.
//!
//! | answer | class |
//! |---|---|
//! | status < 400 | success (`None`) |
//! | `x-should-retry: false`, a 4xx other than 408 and 429, not overload | [`Fatal`](ErrorClass::Fatal) |
//! | `x-should-retry: false`, otherwise | [`DontRetry`](ErrorClass::DontRetry) |
//! | overload | [`Throttled`](ErrorClass::Throttled), with the server's delay if it gave one |
//! | a retried status or `x-should-retry: true`, with a server delay | [`Throttled`](ErrorClass::Throttled), with it |
//! | a retried status or `x-should-retry: true` | [`Transient`](ErrorClass::Transient) |
//! | any other 4xx | [`Fatal`](ErrorClass::Fatal) |
//! | the attempt's timer fired | [`Timeout`](ErrorClass::Timeout) |
//! | connection refused or reset, no answer | [`Transient`](ErrorClass::Transient) |
//! | refused locally (breaker, throttle, budget, limiter) | [`Refused`](ErrorClass::Refused), with its `retry_after` |
//!
//! # From a class to its consequences
//!
//! One `match` over the class ([`ErrorClass::consequences`]); a line per arm. "Accepted" is what
//! the adaptive throttle counts as accepted by the backend (a success always is). "Budget failure"
//! is what budgets that watch failures count (a token bucket's failure cost, a retry breaker's
//! rate); whether a retry is *charged* is the budget's own rule, asked only for a retry that
//! would be sent.
//!
//! "Limit" is what a concurrency limiter ([`Limiter::release`](crate::limit::Limiter::release))
//! reads (a success is always a [`Success`](Completion::Success) sample).
//!
//! | class | retried | backoff | server delay | breaker | accepted | budget failure | limit |
//! |---|---|---|---|---|---|---|---|
//! | [`Transient`](ErrorClass::Transient) | yes | `backoff` | — | failure | yes | yes | ignored |
//! | [`Timeout`](ErrorClass::Timeout) | if `retry_timeouts` | `backoff` | — | failure | no | yes | dropped |
//! | [`Throttled`](ErrorClass::Throttled) | yes | `throttled_backoff`, else `backoff` | honoured up to `max_server_delay` | failure | no | yes | dropped |
//! | [`Fatal`](ErrorClass::Fatal) | never | — | — | ignored | yes | no | ignored |
//! | [`DontRetry`](ErrorClass::DontRetry) | never | — | — | failure | yes | yes | ignored |
//! | [`Refused`](ErrorClass::Refused) | only if `wait_on_refusal` and the wait fits the deadline | `backoff` | its `retry_after`, up to `max_server_delay` | ignored | no | no, and a budget grant it held goes back unused | ignored |
//!
//! # The decisions, and why
//!
//! - **A 503 is an overload answer** ([`Throttled`](ErrorClass::Throttled)), like 429 and 529.
//!   HTTP defines 503 as "currently unable to handle the request due to a temporary overload or
//!   scheduled maintenance, which will likely be alleviated after some delay", with an optional
//!   `Retry-After` (RFC 9110, 15.6.4): it is the server pushing back, so it honours the server's
//!   delay and takes the throttled backoff, and the adaptive throttle counts it as a refusal. A
//!   simulated downstream whose queue is full answers exactly that.
//! - **Acceptance is what the backend was seen to accept** (Google SRE book, "Handling
//!   Overload": the throttle compares the requests a client sent with those the backend
//!   *accepted*). An answer the backend served, even a 500 or a 400, is an accept: reacting to
//!   errors is the breaker's job. An overload refusal is not. A timeout is not either: nothing
//!   shows the backend took the request, and in a latency-driven overload timeouts are the only
//!   signal there is, so counting them as accepts would blind the throttle exactly when it is
//!   needed. A local refusal never reached the backend. Acceptance is read from the class alone,
//!   so a face that knows only the class (a caller's own error type) decides it too; the price is
//!   one rare case, an overload status with `x-should-retry: false`, which is `DontRetry` and so
//!   counted as accepted: the server answered it deliberately and no retry will follow.
//! - **A local refusal inside a retry ends the call at once** with that refusal (an open breaker's
//!   `retry_after` is for the caller to read). Waiting it out holds a request for as long as the
//!   breaker stays open (30 s and more), which is the latency a breaker exists to remove; a
//!   policy may opt in with `wait_on_refusal`, and even then a wait that would pass the deadline
//!   ends the call instead. A refusal says nothing about the downstream: the breaker ignores it
//!   and the budget neither counts it as a failure nor keeps the grant of a retry it refused.
//! - **A concurrency limit moves on overload and on clean samples only.** An overload answer
//!   and a timeout are drops (the limit shrinks: a queue is building); a success is a latency
//!   sample. Any other failure is ignored: a fast 500 or 400 is not a fast service, and counting
//!   its latency as a sample would grow the limit while the downstream is broken (that is the
//!   breaker's job). A cancelled attempt (a losing hedge) is ignored too: it has no latency.
//!
//! ```
//! use reliable_core::answer::{Answer, Refuser, Signals};
//! use reliable_core::outcome::ErrorClass;
//! use reliable_core::Duration;
//!
//! let busy = Answer::status(503, Signals { retry_after: Some(Duration::from_secs(2)), ..Signals::NONE });
//! assert_eq!(busy.class(), Some(ErrorClass::Throttled { retry_after: Some(Duration::from_secs(2)) }));
//! assert!(!busy.accepted());
//! assert!(Answer::status(500, Signals::NONE).accepted());
//! assert!(!Answer::Timeout.accepted());
//! let open = Answer::Refused { by: Refuser::Breaker, retry_after: Some(Duration::from_secs(30)) };
//! assert_eq!(open.class(), Some(ErrorClass::Refused { retry_after: Some(Duration::from_secs(30)) }));
//! assert_eq!(Answer::status(204, Signals::NONE).class(), None);
//! ```

use crate::breaker::Outcome;
use crate::limit::Completion;
use crate::outcome::ErrorClass;
use crate::time::Duration;

/// What a response's headers (or body) say about retrying it, already parsed by the face.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Signals {
    /// The server's requested wait (`retry-after-ms`, else `Retry-After`), as it gave it.
    pub retry_after: Option<Duration>,
    /// `x-should-retry`, when present and `true` or `false`.
    pub should_retry: Option<bool>,
    /// An explicit overload marker besides the status (gRPC `RESOURCE_EXHAUSTED`, an
    /// `overloaded_error` body).
    pub overloaded: bool,
}

impl Signals {
    /// No signal at all.
    pub const NONE: Signals = Signals {
        retry_after: None,
        should_retry: None,
        overloaded: false,
    };
}

/// Who refused a call locally, without sending it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Refuser {
    /// A circuit breaker (open, half-open full, slow start, forced open).
    Breaker,
    /// Client-side adaptive throttling.
    Throttle,
    /// A retry budget.
    Budget,
    /// A rate or concurrency limiter, a spend breaker.
    Limiter,
}

/// How one attempt ended, as a face observed it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Answer {
    /// An answer with an HTTP-like status (gRPC codes and other protocols map to one).
    Status {
        /// The status code.
        status: u16,
        /// What came with it.
        signals: Signals,
    },
    /// The attempt's timer fired (its own timeout or the deadline) before any answer.
    Timeout,
    /// The connection was refused or reset before an answer.
    Connection,
    /// Refused locally: nothing was sent.
    Refused {
        /// Who refused.
        by: Refuser,
        /// When it would let a call through, if it knows (an open breaker's remaining open time).
        retry_after: Option<Duration>,
    },
}

/// 429, 503, 529, or an explicit overload marker.
const fn overload(status: u16, s: Signals) -> bool {
    matches!(status, 429 | 503 | 529) || s.overloaded
}

/// `x-should-retry: true`.
const fn should_retry(s: Signals) -> bool {
    matches!(s.should_retry, Some(true))
}

/// `x-should-retry: false`.
const fn should_not(s: Signals) -> bool {
    matches!(s.should_retry, Some(false))
}

/// Statuses retried without a signal saying so: 408, 409, 429, ≥ 500.
const fn retried_status(status: u16) -> bool {
    matches!(status, 408 | 409 | 429) || status >= 500
}

/// A client error: a 4xx other than 408 and 429.
const fn client_error(status: u16) -> bool {
    status >= 400 && status < 500 && !matches!(status, 408 | 429)
}

impl Answer {
    /// A status answer.
    pub const fn status(status: u16, signals: Signals) -> Self {
        Answer::Status { status, signals }
    }

    /// The first table in the [module docs](self): one arm per row. `None`: a success.
    #[rustfmt::skip]
    pub const fn class(self) -> Option<ErrorClass> {
        use ErrorClass::*;
        Some(match self {
            Answer::Status { status, .. } if status < 400 => return None,
            Answer::Status { status, signals: s } if should_not(s) && client_error(status) && !overload(status, s) => Fatal,
            Answer::Status { signals: s, .. } if should_not(s) => DontRetry,
            Answer::Status { status, signals: s } if overload(status, s) => Throttled { retry_after: s.retry_after },
            Answer::Status { status, signals: s } if (retried_status(status) || should_retry(s)) && s.retry_after.is_some() => Throttled { retry_after: s.retry_after },
            Answer::Status { status, signals: s } if retried_status(status) || should_retry(s) => Transient,
            Answer::Status { .. } => Fatal,
            Answer::Timeout => Timeout,
            Answer::Connection => Transient,
            Answer::Refused { retry_after, .. } => Refused { retry_after },
        })
    }

    /// Whether the backend accepted it (for the adaptive throttle): a success, or a failure whose
    /// class [is accepted](Consequences::accepted).
    pub const fn accepted(self) -> bool {
        match self.class() {
            None => true,
            Some(class) => class.consequences().accepted,
        }
    }
}

/// Whether a retry may follow a failure of some class.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Retried {
    /// Yes (within the attempt limit, the deadline and the budget).
    Yes,
    /// Only if the policy's `retry_timeouts` is on.
    IfTimeoutsRetried,
    /// Only if the policy's `wait_on_refusal` is on and the wait fits the deadline.
    IfWaitingOnRefusals,
    /// Never.
    Never,
}

/// Which backoff a retry after some class waits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BackoffKind {
    /// The policy's `backoff`.
    Backoff,
    /// The policy's `throttled_backoff` if set, else `backoff`.
    Throttled,
    /// None: the class is never retried.
    None,
}

/// Everything a failure of one class does (the second table in the [module docs](self)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Consequences {
    /// Retried or not.
    pub retried: Retried,
    /// The backoff before the retry.
    pub backoff: BackoffKind,
    /// Whether the class's delay (`retry_after`) is honoured, up to `max_server_delay`.
    pub server_delay: bool,
    /// What the breaker records.
    pub breaker: Outcome,
    /// Whether the adaptive throttle counts it as accepted by the backend.
    pub accepted: bool,
    /// Whether budgets that watch failures count it.
    pub budget_failure: bool,
    /// What a concurrency limiter reads.
    pub limit: Completion,
}

const fn consequence(
    retried: Retried,
    backoff: BackoffKind,
    server_delay: bool,
    breaker: Outcome,
    accepted: bool,
    budget_failure: bool,
    limit: Completion,
) -> Consequences {
    Consequences {
        retried,
        backoff,
        server_delay,
        breaker,
        accepted,
        budget_failure,
        limit,
    }
}

impl ErrorClass {
    /// The table in the [module docs](crate::answer): one arm per row.
    #[rustfmt::skip]
    pub const fn consequences(self) -> Consequences {
        use BackoffKind as B;
        use Retried as R;
        use Completion as L;
        match self {
            ErrorClass::Transient => consequence(R::Yes, B::Backoff, false, Outcome::Failure, true, true, L::Ignored),
            ErrorClass::Timeout => consequence(R::IfTimeoutsRetried, B::Backoff, false, Outcome::Failure, false, true, L::Dropped),
            ErrorClass::Throttled { .. } => consequence(R::Yes, B::Throttled, true, Outcome::Failure, false, true, L::Dropped),
            ErrorClass::Fatal => consequence(R::Never, B::None, false, Outcome::Ignored, true, false, L::Ignored),
            ErrorClass::DontRetry => consequence(R::Never, B::None, false, Outcome::Failure, true, true, L::Ignored),
            ErrorClass::Refused { .. } => consequence(R::IfWaitingOnRefusals, B::Backoff, true, Outcome::Ignored, false, false, L::Ignored),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_answer_table() {
        let none = Signals::NONE;
        let wait = Signals {
            retry_after: Some(Duration::from_secs(7)),
            ..none
        };
        let no = Signals {
            should_retry: Some(false),
            ..none
        };
        let yes = Signals {
            should_retry: Some(true),
            ..none
        };
        let marked = Signals {
            overloaded: true,
            ..none
        };
        let t = |ra: Option<u64>| {
            Some(ErrorClass::Throttled {
                retry_after: ra.map(Duration::from_secs),
            })
        };
        let cases = [
            (200, none, None, true),
            (304, none, None, true),
            (400, none, Some(ErrorClass::Fatal), true),
            (404, wait, Some(ErrorClass::Fatal), true),
            (408, none, Some(ErrorClass::Transient), true),
            (409, none, Some(ErrorClass::Transient), true),
            (429, none, t(None), false),
            (429, wait, t(Some(7)), false),
            (500, none, Some(ErrorClass::Transient), true),
            (500, wait, t(Some(7)), false),
            (503, none, t(None), false),
            (529, none, t(None), false),
            (400, marked, t(None), false),
            (500, no, Some(ErrorClass::DontRetry), true),
            (429, no, Some(ErrorClass::DontRetry), true),
            (400, no, Some(ErrorClass::Fatal), true),
            (400, yes, Some(ErrorClass::Transient), true),
            (429, yes, t(None), false),
            (200, no, None, true),
        ];
        for (status, s, class, accepted) in cases {
            let a = Answer::status(status, s);
            assert_eq!(
                (a.class(), a.accepted()),
                (class, accepted),
                "{status} {s:?}"
            );
        }
        assert_eq!(Answer::Timeout.class(), Some(ErrorClass::Timeout));
        assert!(!Answer::Timeout.accepted());
        assert_eq!(Answer::Connection.class(), Some(ErrorClass::Transient));
        assert!(Answer::Connection.accepted());
        let refused = Answer::Refused {
            by: Refuser::Throttle,
            retry_after: None,
        };
        assert_eq!(
            refused.class(),
            Some(ErrorClass::Refused { retry_after: None })
        );
        assert!(!refused.accepted());
    }

    #[test]
    fn consequences_agree_with_the_class_methods() {
        let all = [
            ErrorClass::Transient,
            ErrorClass::Timeout,
            ErrorClass::Throttled { retry_after: None },
            ErrorClass::Fatal,
            ErrorClass::DontRetry,
            ErrorClass::Refused { retry_after: None },
        ];
        for class in all {
            let c = class.consequences();
            assert_eq!(c.budget_failure, class.counts_as_failure(), "{class:?}");
            assert_eq!(c.breaker, Outcome::from(class), "{class:?}");
            let always = c.retried == Retried::Yes || c.retried == Retried::IfTimeoutsRetried;
            assert_eq!(always, class.is_retryable(), "{class:?}");
            assert_eq!(Completion::of(Some(class)), c.limit, "{class:?}");
        }
        assert_eq!(Completion::of(None), Completion::Success);
        assert_eq!(
            Completion::from(crate::outcome::AttemptOutcome::Cancelled),
            Completion::Ignored
        );
        // Only overload and timeouts shrink a limit.
        let dropped = all.map(|c| c.consequences().limit == Completion::Dropped);
        assert_eq!(dropped, [false, true, true, false, false, false]);
    }
}

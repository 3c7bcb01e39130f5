//! One meaning of every answer: how an attempt's answer becomes an [`ErrorClass`], and what each
//! class does to every other piece (retry, backoff, breaker, adaptive throttle, budget).
//!
//! Every face of the project reads answers through this module and nothing else: the `reliable`
//! crate's HTTP classification and tower layers, the simulator's downstream answers, the emulator
//! and the MCP server. A face only *parses* transport details (a status line, headers, an I/O
//! error, its own local refusals) into an [`Answer`]; [`Answer::meaning`] decides.
//!
//! # From an answer to a class
//!
//! One `match` over the answer ([`Answer::meaning`]); a line per arm, first match wins. "Overload"
//! is status 429, 503 or 529, or an explicit overload marker ([`Signals::overloaded`]: gRPC
//! `RESOURCE_EXHAUSTED`, an `overloaded_error` body). "Retried status" is 408, 409, 429 or ≥ 500.
//!
//! | answer | class | accepted by the backend? |
//! |---|---|---|
//! | status < 400 | success | yes |
//! | `x-should-retry: false`, a 4xx other than 408 and 429, not overload | [`Fatal`](ErrorClass::Fatal) | yes |
//! | `x-should-retry: false`, overload | [`DontRetry`](ErrorClass::DontRetry) | no: refused for overload |
//! | `x-should-retry: false`, otherwise | [`DontRetry`](ErrorClass::DontRetry) | yes |
//! | overload | [`Throttled`](ErrorClass::Throttled) with the server's delay | no |
//! | a retried status or `x-should-retry: true`, with a server delay | [`Throttled`](ErrorClass::Throttled) with it | no: the server pushes back |
//! | a retried status or `x-should-retry: true` | [`Transient`](ErrorClass::Transient) | yes |
//! | any other 4xx | [`Fatal`](ErrorClass::Fatal) | yes |
//! | the attempt's timer fired | [`Timeout`](ErrorClass::Timeout) | no |
//! | connection refused or reset, no answer | [`Transient`](ErrorClass::Transient) | yes |
//! | refused locally (breaker, throttle, budget, limiter) | [`Refused`](ErrorClass::Refused) with its `retry_after` | no |
//!
//! # From a class to its consequences
//!
//! One `match` over the class ([`ErrorClass::consequences`]); a line per arm. "Budget failure"
//! is what budgets that watch failures count (a token bucket's failure cost, a retry breaker's
//! rate); whether a retry is *charged* is the budget's own rule, asked only for a retry that
//! would be sent.
//!
//! | class | retried | backoff | server delay | breaker | budget failure |
//! |---|---|---|---|---|---|
//! | [`Transient`](ErrorClass::Transient) | yes | `backoff` | — | failure | yes |
//! | [`Timeout`](ErrorClass::Timeout) | if `retry_timeouts` | `backoff` | — | failure | yes |
//! | [`Throttled`](ErrorClass::Throttled) | yes | `throttled_backoff`, else `backoff` | honoured up to `max_server_delay` | failure | yes |
//! | [`Fatal`](ErrorClass::Fatal) | never | — | — | ignored | no |
//! | [`DontRetry`](ErrorClass::DontRetry) | never | — | — | failure | yes |
//! | [`Refused`](ErrorClass::Refused) | only if `wait_on_refusal` and the wait fits the deadline | `backoff` | its `retry_after`, up to `max_server_delay` | ignored | no, and a budget grant it held goes back unused |
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
//!   needed. A local refusal never reached the backend.
//! - **A local refusal inside a retry ends the call at once** with that refusal (an open breaker's
//!   `retry_after` is for the caller to read). Waiting it out holds a request for as long as the
//!   breaker stays open (30 s and more), which is the latency a breaker exists to remove; a
//!   policy may opt in with `wait_on_refusal`, and even then a wait that would pass the deadline
//!   ends the call instead. A refusal says nothing about the downstream: the breaker ignores it
//!   and the budget neither counts it as a failure nor keeps the grant of a retry it refused.
//!
//! ```
//! use reliable_core::answer::{Answer, Refuser, Signals};
//! use reliable_core::outcome::ErrorClass;
//! use reliable_core::Duration;
//!
//! let busy = Answer::status(503, Signals { retry_after: Some(Duration::from_secs(2)), ..Signals::NONE });
//! let m = busy.meaning();
//! assert_eq!(m.class, Some(ErrorClass::Throttled { retry_after: Some(Duration::from_secs(2)) }));
//! assert!(!m.accepted);
//! assert!(Answer::status(500, Signals::NONE).meaning().accepted);
//! assert!(!Answer::Timeout.meaning().accepted);
//! let open = Answer::Refused { by: Refuser::Breaker, retry_after: Some(Duration::from_secs(30)) };
//! assert_eq!(open.meaning().class, Some(ErrorClass::Refused { retry_after: Some(Duration::from_secs(30)) }));
//! assert_eq!(Answer::status(204, Signals::NONE).meaning().class, None);
//! ```

use crate::breaker::Outcome;
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

/// What an answer means: its class (`None`: a success) and whether the backend accepted it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Meaning {
    /// `None` for a success, else the failure's class.
    pub class: Option<ErrorClass>,
    /// Whether the adaptive throttle counts it as accepted by the backend.
    pub accepted: bool,
}

/// 429, 503, 529, or an explicit overload marker.
const fn overload(status: u16, s: Signals) -> bool {
    matches!(status, 429 | 503 | 529) || s.overloaded
}

/// Statuses retried without a signal saying so: 408, 409, 429, ≥ 500.
const fn retried_status(status: u16) -> bool {
    matches!(status, 408 | 409 | 429) || status >= 500
}

/// A client error: a 4xx other than 408 and 429.
const fn client_error(status: u16) -> bool {
    status >= 400 && status < 500 && !matches!(status, 408 | 429)
}

const fn failed(class: ErrorClass, accepted: bool) -> Meaning {
    Meaning {
        class: Some(class),
        accepted,
    }
}

impl Answer {
    /// A status answer.
    pub const fn status(status: u16, signals: Signals) -> Self {
        Answer::Status { status, signals }
    }

    /// The table in the [module docs](self): one arm per row.
    #[rustfmt::skip]
    pub const fn meaning(self) -> Meaning {
        use ErrorClass::*;
        match self {
            Answer::Status { status, .. } if status < 400 => Meaning {
                class: None,
                accepted: true,
            },
            Answer::Status { status, signals: s } if matches!(s.should_retry, Some(false)) && client_error(status) && !overload(status, s) => failed(Fatal, true),
            Answer::Status { status, signals: s } if matches!(s.should_retry, Some(false)) && overload(status, s) => failed(DontRetry, false),
            Answer::Status { signals: s, .. } if matches!(s.should_retry, Some(false)) => failed(DontRetry, true),
            Answer::Status { status, signals: s } if overload(status, s) => failed(Throttled { retry_after: s.retry_after }, false),
            Answer::Status { status, signals: s } if (retried_status(status) || matches!(s.should_retry, Some(true))) && s.retry_after.is_some() => failed(Throttled { retry_after: s.retry_after }, false),
            Answer::Status { status, signals: s } if retried_status(status) || matches!(s.should_retry, Some(true)) => failed(Transient, true),
            Answer::Status { .. } => failed(Fatal, true),
            Answer::Timeout => failed(Timeout, false),
            Answer::Connection => failed(Transient, true),
            Answer::Refused { retry_after, .. } => failed(Refused { retry_after }, false),
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
    /// Whether budgets that watch failures count it.
    pub budget_failure: bool,
}

const fn consequence(
    retried: Retried,
    backoff: BackoffKind,
    server_delay: bool,
    breaker: Outcome,
    budget_failure: bool,
) -> Consequences {
    Consequences {
        retried,
        backoff,
        server_delay,
        breaker,
        budget_failure,
    }
}

impl ErrorClass {
    /// The table in the [module docs](crate::answer): one arm per row.
    #[rustfmt::skip]
    pub const fn consequences(self) -> Consequences {
        use BackoffKind as B;
        use Retried as R;
        match self {
            ErrorClass::Transient => consequence(R::Yes, B::Backoff, false, Outcome::Failure, true),
            ErrorClass::Timeout => consequence(R::IfTimeoutsRetried, B::Backoff, false, Outcome::Failure, true),
            ErrorClass::Throttled { .. } => consequence(R::Yes, B::Throttled, true, Outcome::Failure, true),
            ErrorClass::Fatal => consequence(R::Never, B::None, false, Outcome::Ignored, false),
            ErrorClass::DontRetry => consequence(R::Never, B::None, false, Outcome::Failure, true),
            ErrorClass::Refused { .. } => consequence(R::IfWaitingOnRefusals, B::Backoff, true, Outcome::Ignored, false),
        }
    }

    /// Whether the adaptive throttle counts a failure of this class as accepted, for a face that
    /// knows only the class (a caller's own error type): every class but
    /// [`Throttled`](ErrorClass::Throttled), [`Timeout`](ErrorClass::Timeout) and
    /// [`Refused`](ErrorClass::Refused). A face that has the answer reads
    /// [`Meaning::accepted`], which also refuses an overload status marked "don't retry".
    pub const fn accepted(self) -> bool {
        !matches!(
            self,
            ErrorClass::Throttled { .. } | ErrorClass::Timeout | ErrorClass::Refused { .. }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st(status: u16, s: Signals) -> Meaning {
        Answer::status(status, s).meaning()
    }

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
            (429, no, Some(ErrorClass::DontRetry), false),
            (503, no, Some(ErrorClass::DontRetry), false),
            (400, no, Some(ErrorClass::Fatal), true),
            (400, yes, Some(ErrorClass::Transient), true),
            (429, yes, t(None), false),
            (200, no, None, true),
        ];
        for (status, s, class, accepted) in cases {
            assert_eq!(st(status, s), Meaning { class, accepted }, "{status} {s:?}");
        }
        assert_eq!(
            Answer::Timeout.meaning(),
            failed(ErrorClass::Timeout, false)
        );
        assert_eq!(
            Answer::Connection.meaning(),
            failed(ErrorClass::Transient, true)
        );
        let refused = Answer::Refused {
            by: Refuser::Throttle,
            retry_after: None,
        };
        assert_eq!(
            refused.meaning(),
            failed(ErrorClass::Refused { retry_after: None }, false)
        );
    }

    #[test]
    fn class_acceptance_agrees_with_the_answer_table_where_the_class_decides() {
        for status in 100..600u16 {
            for s in [
                Signals::NONE,
                Signals {
                    retry_after: Some(Duration::from_secs(1)),
                    ..Signals::NONE
                },
                Signals {
                    should_retry: Some(true),
                    ..Signals::NONE
                },
            ] {
                let m = st(status, s);
                if let Some(class) = m.class {
                    assert_eq!(class.accepted(), m.accepted, "{status} {s:?}");
                }
            }
        }
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
            assert_eq!(
                c.retried == Retried::Yes,
                class.is_retryable() && class != ErrorClass::Timeout,
                "{class:?}"
            );
        }
    }
}

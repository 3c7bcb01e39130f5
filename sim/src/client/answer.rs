//! [`Answer`]: what a layer hands to the layer above it.

use reliable_core::Duration;

/// How a call through a layer ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AnswerKind {
    /// Success.
    Ok,
    /// A transient error from the downstream, after it took the call (an injected error).
    Error,
    /// The downstream refused the call without serving it (full queue, refused connection during
    /// a fail-fast outage): a sign of overload or absence, which adaptive throttling counts.
    Unavailable,
    /// The attempt's timer ran out (or an enclosing deadline passed).
    Timeout,
    /// The downstream throttled the call, with a Retry-After hint.
    Throttled,
    /// A permanent error: retrying cannot help.
    Fatal,
    /// A conditional write lost a race (contended register).
    Conflict,
    /// Refused locally, without calling anything (breaker open, budget or throttle said no).
    Rejected,
}

impl AnswerKind {
    /// Whether this is a success.
    pub fn is_ok(self) -> bool {
        self == AnswerKind::Ok
    }

    /// Lower-case name for traces and reports.
    pub fn name(self) -> &'static str {
        match self {
            AnswerKind::Ok => "ok",
            AnswerKind::Error => "error",
            AnswerKind::Unavailable => "unavailable",
            AnswerKind::Timeout => "timeout",
            AnswerKind::Throttled => "throttled",
            AnswerKind::Fatal => "fatal",
            AnswerKind::Conflict => "conflict",
            AnswerKind::Rejected => "rejected",
        }
    }
}

/// An answer travelling up the stack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Answer {
    /// How it ended.
    pub kind: AnswerKind,
    /// The stack node that produced it (its `served_by` path names the layers it went through).
    pub by: u16,
    /// A Retry-After hint (throttling, an open breaker's `retry_after`); zero when none.
    pub retry_after: Duration,
    /// An LLM provider's money-limit answer (a 429 whose body says a spend limit is reached): only
    /// an LLM layer reading provider signals tells it from any other 429.
    pub money: bool,
}

impl AnswerKind {
    /// How the core's retry policy and budgets see this answer (for a failure). Local rejections
    /// (an open breaker inside the retry, a throttle) count as throttling, with the breaker's
    /// `retry_after` as the server delay, so a retry waits at least until the breaker would let a
    /// call through.
    pub fn error_class(
        self,
        retry_after: reliable_core::Duration,
    ) -> reliable_core::outcome::ErrorClass {
        use reliable_core::outcome::ErrorClass;
        let hint = (!retry_after.is_zero()).then_some(retry_after);
        match self {
            AnswerKind::Ok | AnswerKind::Error | AnswerKind::Unavailable | AnswerKind::Conflict => {
                ErrorClass::Transient
            }
            AnswerKind::Timeout => ErrorClass::Timeout,
            AnswerKind::Throttled | AnswerKind::Rejected => {
                ErrorClass::Throttled { retry_after: hint }
            }
            AnswerKind::Fatal => ErrorClass::Fatal,
        }
    }

    /// Whether adaptive throttling counts the call as accepted by the downstream: everything but
    /// throttling, refusals, timeouts (no sign of acceptance) and local rejections.
    pub fn accepted(self) -> bool {
        !matches!(
            self,
            AnswerKind::Throttled
                | AnswerKind::Unavailable
                | AnswerKind::Timeout
                | AnswerKind::Rejected
        )
    }
}

impl Answer {
    /// An answer of `kind` produced by node `by`, with no hint.
    pub fn new(kind: AnswerKind, by: u16) -> Self {
        Answer {
            kind,
            by,
            retry_after: Duration::ZERO,
            money: false,
        }
    }
}

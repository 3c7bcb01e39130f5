//! [`Answer`]: what a layer hands to the layer above it.

use reliable_core::Duration;

/// How a call through a layer ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AnswerKind {
    /// Success.
    Ok,
    /// A transient error from the downstream (injected error, full queue, refused connection).
    Error,
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
}

impl Answer {
    /// An answer of `kind` produced by node `by`, with no hint.
    pub fn new(kind: AnswerKind, by: u16) -> Self {
        Answer {
            kind,
            by,
            retry_after: Duration::ZERO,
        }
    }
}

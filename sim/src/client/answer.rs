//! [`Answer`]: what a layer hands to the layer above it.

use reliable_core::Duration;

/// How a call through a layer ended. Each kind stands for an HTTP-like status (or a transport
/// outcome) and means what the core's table ([`reliable_core::answer`]) says that answer means:
/// the simulator has no classification of its own.
///
/// | kind | stands for |
/// |---|---|
/// | `Ok` | 200 |
/// | `Error` | 500 |
/// | `Unavailable` | 503 (no `Retry-After`) |
/// | `Timeout` | the attempt's timer fired |
/// | `Throttled` | 429 with `Retry-After` (the answer's `retry_after`) |
/// | `Fatal` | 400 |
/// | `Conflict` | 409 |
/// | `Rejected` | a local refusal (breaker, throttle), with its `retry_after` |
///
/// A scripted downstream may answer any other status, with the signals its headers would carry,
/// or reset the connection ([`Answer::scripted`]); such an answer means what the core's table
/// says of it, and its kind is only `Ok` or `Error`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AnswerKind {
    /// Success: 200.
    Ok,
    /// A transient error from the downstream, after it took the call (an injected error): 500.
    Error,
    /// The downstream refused the call without serving it (full queue, refused connection during
    /// a fail-fast outage): 503, an overload answer.
    Unavailable,
    /// The attempt's timer ran out (or an enclosing deadline passed).
    Timeout,
    /// The downstream throttled the call: 429 with a Retry-After hint.
    Throttled,
    /// A permanent error, retrying cannot help: 400.
    Fatal,
    /// A conditional write lost a race (contended register): 409.
    Conflict,
    /// Refused locally, without calling anything (breaker open, budget or throttle said no).
    Rejected,
}

impl AnswerKind {
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
    /// A scripted downstream's answer as given (any status with its signals, a reset
    /// connection): when set, it is what the answer means, and `kind` only says whether it is a
    /// success (`Ok`) or not (`Error`), for counts and names.
    pub scripted: Option<reliable_core::answer::Answer>,
}

impl AnswerKind {
    /// The core's answer this kind stands for (see the table on [`AnswerKind`]), with
    /// `retry_after` (zero: none) as the server's or the refuser's delay.
    pub fn core(self, retry_after: Duration) -> reliable_core::answer::Answer {
        use reliable_core::answer::{Answer as Core, Refuser, Signals};
        let hint = (!retry_after.is_zero()).then_some(retry_after);
        let status = |status: u16, retry_after: Option<Duration>| {
            Core::status(
                status,
                Signals {
                    retry_after,
                    ..Signals::NONE
                },
            )
        };
        match self {
            AnswerKind::Ok => status(200, None),
            AnswerKind::Error => status(500, None),
            AnswerKind::Unavailable => status(503, None),
            AnswerKind::Timeout => Core::Timeout,
            AnswerKind::Throttled => status(429, hint),
            AnswerKind::Fatal => status(400, None),
            AnswerKind::Conflict => status(409, None),
            AnswerKind::Rejected => Core::Refused {
                by: if hint.is_some() {
                    Refuser::Breaker
                } else {
                    Refuser::Throttle
                },
                retry_after: hint,
            },
        }
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
            scripted: None,
        }
    }

    /// A scripted downstream's answer `a`, produced by node `by`.
    pub fn scripted(a: reliable_core::answer::Answer, by: u16) -> Self {
        let kind = match a.class() {
            None => AnswerKind::Ok,
            Some(_) => AnswerKind::Error,
        };
        Answer {
            scripted: Some(a),
            ..Answer::new(kind, by)
        }
    }

    /// The core's answer this stands for: the scripted one, or what its kind stands for.
    pub fn core(&self) -> reliable_core::answer::Answer {
        self.scripted
            .unwrap_or_else(|| self.kind.core(self.retry_after))
    }

    /// Its class by the core's table (`None`: a success).
    pub fn error_class(&self) -> Option<reliable_core::outcome::ErrorClass> {
        self.core().class()
    }

    /// Whether it is a success.
    pub fn is_ok(&self) -> bool {
        self.error_class().is_none()
    }

    /// Whether adaptive throttling counts it as accepted by the downstream (the core's table).
    pub fn accepted(&self) -> bool {
        self.core().accepted()
    }
}

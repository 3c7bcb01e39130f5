//! Hooks for logs, traces and metrics: the [`Observer`] trait.
//!
//! A [`Reliable`](crate::Reliable) tells each of its observers what it does, as plain values:
//! every attempt sent, every retry scheduled (with its class and wait), every refusal, every
//! breaker state change, every give-up, how each call ended, and for the extra-load controls
//! every hedge sent, refused and won, every losing attempt cancelled, every ledger draw and
//! refusal by kind, and every move of a concurrency limit. Every method has an empty default,
//! so an observer implements only what it needs. Observers run inline on the calling task: keep
//! them short and non-blocking. Under the `metrics` feature, `Builder::metrics`
//! adds one that exports through the `metrics` facade.
//!
//! ```
//! use reliable::observer::{CallEnd, Observer};
//! use reliable_core::breaker::Transition;
//!
//! #[derive(Debug)]
//! struct Log;
//! impl Observer for Log {
//!     fn on_transition(&self, name: &str, t: Transition) {
//!         eprintln!("{name}: {} -> {}", t.from, t.to);
//!     }
//!     fn on_call_end(&self, name: &str, end: &CallEnd) {
//!         eprintln!("{name}: {} after {} attempt(s) in {:?}", end.outcome, end.attempts, end.elapsed);
//!     }
//! }
//! let rel = reliable::Reliable::builder("llm").observer(Log).build()?;
//! # Ok::<(), reliable::BuildError>(())
//! ```

use crate::error::ShedReason;
use reliable_core::breaker::{RejectReason, Transition};
use reliable_core::ledger::Extra;
use reliable_core::outcome::ErrorClass;
use std::fmt::Debug;
use std::time::Duration;

/// Why a call (or a retry) was not sent: the breaker is open, or the call was shed locally
/// ([`ShedReason`]). The same two cases as [`Error::Open`](crate::Error::Open) and
/// [`Error::Rejected`](crate::Error::Rejected).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum NotSent {
    /// The breaker is open; `retry_after` is `None` when it was forced open.
    Open {
        /// Time until it turns half-open.
        retry_after: Option<Duration>,
    },
    /// Refused locally (probe slots full, slow start, throttling, budget, ledger, limits).
    Rejected(ShedReason),
}

impl NotSent {
    /// The error a call returns when it is refused, `last` being the error of the attempt before
    /// (a refused retry), if any.
    pub fn into_error<E>(self, last: Option<E>) -> crate::Error<E> {
        match self {
            NotSent::Open { retry_after } => crate::Error::Open { retry_after },
            NotSent::Rejected(why) => crate::Error::Rejected { why, last },
        }
    }

    /// Who refused, in the core's vocabulary.
    pub const fn refuser(self) -> reliable_core::answer::Refuser {
        match self {
            NotSent::Open { .. } => reliable_core::answer::Refuser::Breaker,
            NotSent::Rejected(why) => why.refuser(),
        }
    }
}

/// How a call ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CallOutcome {
    /// An attempt succeeded.
    Success,
    /// The breaker was open: the downstream was not called (again).
    Open,
    /// Refused locally: probe slots full, slow start, throttling, or the retry budget.
    Rejected,
    /// The last attempt ran out of time.
    Timeout,
    /// The last attempt failed and no retry followed.
    GaveUp,
    /// The call was dropped before it finished.
    Cancelled,
}

impl CallOutcome {
    /// Its name in logs and metric labels: `success`, `open`, `rejected`, `timeout`, `gave-up`,
    /// `cancelled`.
    pub const fn name(self) -> &'static str {
        match self {
            CallOutcome::Success => "success",
            CallOutcome::Open => "open",
            CallOutcome::Rejected => "rejected",
            CallOutcome::Timeout => "timeout",
            CallOutcome::GaveUp => "gave-up",
            CallOutcome::Cancelled => "cancelled",
        }
    }
}

/// The outcome's [`name`](CallOutcome::name), honouring width and alignment.
impl std::fmt::Display for CallOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.name())
    }
}

/// How a call ended, for [`Observer::on_call_end`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CallEnd {
    /// How it ended.
    pub outcome: CallOutcome,
    /// Attempts sent.
    pub attempts: u32,
    /// From the start of the call to its end, on the instance's clock (zero when the instance does
    /// not read its clock on a successful call: see [`Builder::clock`](crate::Builder::clock)).
    pub elapsed: Duration,
}

/// Receives what a [`Reliable`](crate::Reliable) does. `name` is the instance's name.
pub trait Observer: Send + Sync + Debug + 'static {
    /// Attempt number `attempt` (1 for the first try) is being sent.
    fn on_attempt(&self, name: &str, attempt: u32) {
        let _ = (name, attempt);
    }
    /// Attempt `attempt` ended: `None` a success, else the class it failed with (before the
    /// breaker records it and the retry policy decides). Reported by the calls of a
    /// [`Reliable`](crate::Reliable) and by the tower layers that drive the call engine.
    fn on_attempt_end(&self, name: &str, attempt: u32, class: Option<ErrorClass>) {
        let _ = (name, attempt, class);
    }
    /// Attempt `attempt` failed with `class`; the next one goes after `delay`.
    fn on_retry(&self, name: &str, attempt: u32, class: ErrorClass, delay: Duration) {
        let _ = (name, attempt, class, delay);
    }
    /// A call or a retry was refused before it was sent.
    fn on_reject(&self, name: &str, refusal: NotSent) {
        let _ = (name, refusal);
    }
    /// The breaker changed state (in shadow mode, a would-be transition: see
    /// [`Builder::shadow_breaker`](crate::Builder::shadow_breaker)).
    fn on_transition(&self, name: &str, transition: Transition) {
        let _ = (name, transition);
    }
    /// The breaker, in shadow mode, let a call through that it would have rejected for `reason`.
    fn on_would_reject(&self, name: &str, reason: RejectReason) {
        let _ = (name, reason);
    }
    /// The call gives up after `attempts` attempts; `reason` is a short name (`max-attempts`,
    /// `fatal`, `deadline`, `timeout-not-retried`, `dont-retry`, `budget`).
    fn on_give_up(&self, name: &str, attempts: u32, reason: &'static str) {
        let _ = (name, attempts, reason);
    }
    /// The call is over (once per call, cancelled calls included).
    fn on_call_end(&self, name: &str, end: &CallEnd) {
        let _ = (name, end);
    }
    /// Attempt `attempt` is a hedge: another copy of the attempt in flight, sent because it is
    /// slow (see [`Builder::hedge`](crate::Builder::hedge)). `on_attempt` follows.
    fn on_hedge(&self, name: &str, attempt: u32) {
        let _ = (name, attempt);
    }
    /// A hedge was due but not sent: refused locally (the ledger, a limit, the breaker). No other
    /// hedge of that attempt follows.
    fn on_hedge_refused(&self, name: &str, refusal: NotSent) {
        let _ = (name, refusal);
    }
    /// Attempt `attempt` succeeded first while other copies of it were in flight; `hedge`: it was
    /// a hedge (not the attempt the copies were made of).
    fn on_hedge_won(&self, name: &str, attempt: u32, hedge: bool) {
        let _ = (name, attempt, hedge);
    }
    /// Attempt `attempt` lost a race (another copy succeeded first): it is dropped, its permits
    /// and ledger draw settled.
    fn on_attempt_cancelled(&self, name: &str, attempt: u32) {
        let _ = (name, attempt);
    }
    /// The ledger of extra attempts granted (`granted`) or refused an extra attempt of `kind`.
    fn on_ledger(&self, name: &str, kind: Extra, granted: bool) {
        let _ = (name, kind, granted);
    }
    /// The concurrency limit moved from `from` to `to` calls.
    fn on_limit_change(&self, name: &str, from: u32, to: u32) {
        let _ = (name, from, to);
    }
    /// A chaos layer injected something ([`crate::chaos`]); the event's strategy names it as
    /// Polly does (`Chaos.OnFault`, `Chaos.OnLatency`, `Chaos.OnOutcome`, `Chaos.OnBehavior`).
    fn on_chaos(&self, name: &str, event: &crate::chaos::ChaosEvent) {
        let _ = (name, event);
    }
}

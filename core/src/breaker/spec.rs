//! The breaker's vocabulary: its [`State`]s, the [`Outcome`] of a call, the [`Permit`] for one call,
//! the [`Rejection`] of one, and the [`Transition`] between states.

use crate::outcome::{AttemptOutcome, ErrorClass};
use crate::time::{Duration, Instant};

/// The state of a breaker.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "kebab-case"))]
pub enum State {
    /// Calls go through; outcomes are watched.
    Closed,
    /// Calls are rejected until the open time is up.
    Open,
    /// A limited number of probes go through; their results decide.
    HalfOpen,
    /// Opened by hand: rejects everything until reset.
    ForcedOpen,
    /// Switched off by hand: admits everything and only keeps metrics, until reset.
    Disabled,
}

impl State {
    /// Lower-case name with a hyphen: `closed`, `open`, `half-open`, `forced-open`, `disabled`.
    pub const fn name(self) -> &'static str {
        match self {
            State::Closed => "closed",
            State::Open => "open",
            State::HalfOpen => "half-open",
            State::ForcedOpen => "forced-open",
            State::Disabled => "disabled",
        }
    }
}

impl core::fmt::Display for State {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

/// A state change, handed to the breaker's [`Observer`](super::Observer) as a plain value to log,
/// count or export.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Transition {
    /// The state before.
    pub from: State,
    /// The state after.
    pub to: State,
    /// When the breaker made the change (the `now` of the call that caused it).
    pub at: Instant,
}

/// How a call admitted by a [`Permit`] ended, as far as the downstream's health goes.
///
/// The retry side speaks [`ErrorClass`]; one classification serves both: `Outcome::from(class)`
/// counts every class as a failure except [`ErrorClass::Fatal`] (a bad request says nothing about
/// the downstream), which is [`Ignored`](Outcome::Ignored).
///
/// ```
/// use reliable_core::breaker::Outcome;
/// use reliable_core::outcome::{AttemptOutcome, ErrorClass};
///
/// assert_eq!(Outcome::from(ErrorClass::Timeout), Outcome::Failure);
/// assert_eq!(Outcome::from(ErrorClass::Fatal), Outcome::Ignored);
/// assert_eq!(Outcome::from(AttemptOutcome::Cancelled), Outcome::Ignored);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Outcome {
    /// The call succeeded (it may still count as slow).
    Success,
    /// The call failed in a way that says something about the downstream's health.
    Failure,
    /// The call ended in a way that says nothing about the downstream (cancelled by the caller, a
    /// request error): it frees the permit without counting.
    Ignored,
}

impl From<ErrorClass> for Outcome {
    /// A failure for every class that [counts as a failure](ErrorClass::counts_as_failure);
    /// [`Ignored`](Outcome::Ignored) for [`ErrorClass::Fatal`].
    fn from(class: ErrorClass) -> Self {
        if class.counts_as_failure() {
            Outcome::Failure
        } else {
            Outcome::Ignored
        }
    }
}

impl From<AttemptOutcome> for Outcome {
    /// Success for success, the class's outcome for a failure, ignored for a cancelled attempt.
    fn from(outcome: AttemptOutcome) -> Self {
        match outcome {
            AttemptOutcome::Success => Outcome::Success,
            AttemptOutcome::Failed(class) => class.into(),
            AttemptOutcome::Cancelled => Outcome::Ignored,
        }
    }
}

/// `Permit::lease` for a call that is not a probe.
pub(crate) const NOT_A_PROBE: u32 = 0;
/// `Permit::lease` for a probe of an ungated half-open state (nothing to lease).
pub(crate) const UNLEASED_PROBE: u32 = 1;
/// The first lease number; lease numbers are unique within a half-open round.
pub(crate) const FIRST_LEASE: u32 = 2;

/// Permission for one call: 16 bytes. Hand it back to the breaker's `record` with the outcome.
///
/// A permit is not `Clone`: each admitted call reports once.
#[must_use = "a permit must be handed back to `record`, or a half-open probe slot stays taken until its lease expires"]
#[derive(Debug, PartialEq, Eq)]
pub struct Permit {
    pub(crate) generation: u32,
    pub(crate) lease: u32,
    pub(crate) started: Instant,
}

impl Permit {
    #[inline]
    pub(crate) const fn new(generation: u32, lease: u32, started: Instant) -> Permit {
        Permit {
            generation,
            lease,
            started,
        }
    }
    /// When the call was admitted; the breaker measures latency from here.
    pub fn started(&self) -> Instant {
        self.started
    }
    /// The breaker generation this permit was issued in. When the breaker's generation has moved
    /// on, the permit's result is ignored.
    pub fn generation(&self) -> u32 {
        self.generation
    }
    /// Whether this call is a half-open probe.
    pub fn is_probe(&self) -> bool {
        self.lease != NOT_A_PROBE
    }
}

/// Why a call was not admitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RejectReason {
    /// The breaker is open; it will admit a probe in `retry_after`.
    Open {
        /// Time left until the breaker turns half-open. Never above the policy's maximum open time.
        retry_after: Duration,
    },
    /// Half-open and every probe slot is in use (or, with
    /// [`ProbeRule::Rate`](super::ProbeRule::Rate), every probe of the round was issued and the
    /// breaker waits for their results).
    HalfOpenFull,
    /// Opened by hand.
    ForcedOpen,
    /// Closed, but ramping up after a close, and this call fell outside the admitted share.
    SlowStart,
}

/// A rejected call, and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rejection {
    /// Why.
    pub reason: RejectReason,
}

impl Rejection {
    #[inline]
    pub(crate) const fn new(reason: RejectReason) -> Rejection {
        Rejection { reason }
    }
    /// How long until the breaker may admit calls again, when that is known.
    pub fn retry_after(&self) -> Option<Duration> {
        match self.reason {
            RejectReason::Open { retry_after } => Some(retry_after),
            _ => None,
        }
    }
}

impl core::fmt::Display for Rejection {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self.reason {
            RejectReason::Open { retry_after } => {
                write!(f, "circuit open; retry after {retry_after}")
            }
            RejectReason::HalfOpenFull => {
                f.write_str("circuit half-open; every probe slot is taken")
            }
            RejectReason::ForcedOpen => f.write_str("circuit forced open"),
            RejectReason::SlowStart => f.write_str("circuit ramping up after closing; call shed"),
        }
    }
}

impl core::error::Error for Rejection {}

//! One engine for a whole call: the ledger, the retry policy and its budget, the adaptive
//! throttle, the breaker, the concurrency and rate limits, hedging, the attempt and copy timeouts
//! and the deadline, interleaved for one logical request as every face must interleave them.
//!
//! A face (an async client, a blocking client, a tower layer, a simulator, a binding in another
//! language) owns only its I/O: it sends copies, keeps timers, cancels, and turns what comes back
//! into the core's [`Answer`]. Every decision is taken here, in the order the conformance suite
//! holds every face to.
//!
//! # Shape
//!
//! Like a sans-IO protocol machine (quinn-proto's `Connection`, smoltcp's sockets): no clock, no
//! timer, no I/O, no allocation. Inputs come in with the time; actions go out through polling.
//!
//! - In: a validated [`Plan`] (what the policy says about the call as a whole) and a reference to
//!   the [`Shared`] state it draws from (breaker, budget or ledger, throttle, hedger, limiter,
//!   rate limiter: shared across calls, and across threads when the face stores them so).
//! - [`Call::start`] at `now`; then [`Call::handle`] with an [`Input`]: the answer of copy `k`,
//!   copy `k` dropped, the caller cancelling, or just the time passing ([`Input::Tick`]).
//! - Out: [`Call::poll`] gives the next [`Action`] (send copy `k` with its deadline, cancel copy
//!   `k`, done with the result), [`Call::poll_timeout`] the instant to wake the call at.
//! - Decisions taken on the way (a retry and its wait, a local refusal, a hedge sent or refused,
//!   a loser cancelled, a limit moved, a give-up) go to [`Shared::note`] as they are taken, in
//!   order with the breaker's own transitions (which its observer reports).
//!
//! Copies are numbered across the call from 1, in the order they are sent (a hedge is a copy of
//! the current attempt, a retry the first copy of the next): the number is the copy's name in
//! every input and output. They are stored inline, up to `C` per attempt (the const parameter,
//! 4 by default: a first copy and three hedges); a hedge that would not fit is not sent.
//!
//! # The spec
//!
//! A call is in one of four phases. [`Call::handle`] is one `match` over (phase, input), and
//! [`Call::breaker_decided`] hands in the breaker's answer a face gives later:
//!
//! | phase | input | what happens |
//! |---|---|---|
//! | any | [`Input::Cancel`] | every copy in flight is cancelled, holdings (the call's too) back as ignored, the budget's grant back: done, cancelled |
//! | done | anything | nothing |
//! | racing | the answer of a live copy: a success | the other copies are cancelled (they lost); the success is recorded everywhere, the gates outside the retry last: done, ok |
//! | racing | the answer of a live copy: a failure, other copies live | that copy is settled as failed; the race goes on |
//! | racing | a timeout of a live copy at or after the attempt's deadline, other copies live | the attempt as a whole timed out: the other copies are cancelled as timed out, the attempt fails as a timeout |
//! | racing | the answer of the last live copy: a failure | the attempt failed: the gates inside the retry, the ledger and the hedger record it; the retry policy retries (waiting) or gives up (done) |
//! | racing | copy `k` dropped by the face | settled as ignored; if it was the last copy, the call is cancelled |
//! | racing | the time: a copy's deadline passed | that copy times out (cancelled as timed out), as its timeout answer would |
//! | racing | the time: a hedge is due | the hedge is asked of the hedger, the gates inside the retry but the throttle (in their order) and the ledger: sent, or refused (no other hedge of this attempt) |
//! | waiting | the time: the wait is over | the next attempt is admitted |
//! | asking | the breaker's answer ([`Call::breaker_decided`]) | the gates after the breaker are asked, and the call goes on as it would have had the breaker answered at once |
//! | not asking | the breaker's answer | its permit goes back unused (ignored) |
//! | anything else | | nothing |
//!
//! A breaker whose state is kept in a store the face asks in a round trip (a fleet's, decided
//! exactly) may answer later: [`Shared::breaker_ask`] says so, and the call is *asking* until
//! the face hands the answer in. Nothing is sent meanwhile; a cancel ends the call (what the
//! gates before the breaker gave goes back, and the permit when it comes). A hedge never waits
//! for a store: it asks [`Shared::breaker_acquire`], the answer at once.
//!
//! # Where the gates sit
//!
//! The stateful layers that admit calls (the *gates*: the adaptive throttle, the breaker, the
//! concurrency limit, the rate limit) each sit outside the retry or inside it, in an order the
//! plan's [`Nesting`] gives, as the policy format nests them (the simulator's model):
//!
//! | gate | outside the retry (per call) | inside the retry (per attempt) |
//! |---|---|---|
//! | throttle | asked once when the call starts (a request it counts); hears the call's end: a success, the last answer's acceptance, or a refusal (not accepted) | asked for every attempt (not each hedge); hears every attempt's end |
//! | breaker | asked once; hears the call's end (a refusal inside: ignored) | asked for every copy; hears every copy's answer; its opening on an answer ends the call (below) |
//! | limit | one slot for the whole call, waits included; moved by the call's end | one slot per copy, moved by its answer |
//! | rate limit | counts the call | counts every copy |
//!
//! Starting a call asks the gates outside the retry, outermost first; the retry budget starts
//! (a ledger takes the call's deposit) where the ledger sits among them. Admitting an attempt
//! asks the gates inside the retry, outermost first (the default, `Ledger → Retry → Throttle →
//! Breaker → Limit → RateLimit → Hedge → Call`, asks the throttle, the breaker, the limit, then
//! the rate limit). A half-open probe of a breaker inside the ledger draws from it. A refusal
//! sends nothing, and what the gates outside the refuser hold goes back (a throttle among them
//! hears a refusal: not accepted). Inside the retry, the policy waits it out if it waits on
//! refusals and the wait fits (the retry policy decides), else the call ends refused; outside,
//! the call ends refused. An end reaches the gates innermost first.
//!
//! An answer is taken as it comes: a success after the copy's deadline (a face that cannot
//! interrupt its work, such as a blocking call) is a success, never discarded and retried. An
//! attempt whose failure opens the breaker ends the call at once, refused by the breaker, with
//! that answer as the last (the gates outside the retry hear it as the call's end): it waits
//! only if the policy waits on refusals and the breaker's remaining open time fits the
//! deadline.

use heapless::{Deque, Vec};

use crate::answer::Answer;
use crate::breaker::{Outcome, Permit, RejectReason, Rejection};
use crate::budget::{Budget, Denied};
use crate::hedge::{HedgedCall, Hedger, Idempotency, NoHedge};
use crate::ledger::{AnyLedger, Draw, Extra};
use crate::limit::{Completion, LimitPermit, LimitReached, Limiter, RateLimited, RateLimiter};
use crate::outcome::{AttemptOutcome, ErrorClass};
use crate::retry::{GiveUpReason, RetryDecision, RetryPolicy, RetryState};
use crate::throttle::{AnyThrottle, Shed};
use crate::time::{Duration, Instant};

#[cfg(feature = "policy")]
mod stack;
#[cfg(feature = "policy")]
pub use stack::{Stack, StackError};
#[cfg(test)]
mod tests;

/// Where the breaker sits in the stack.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BreakerScope {
    /// `Retry(Throttle(Breaker(..)))`: every attempt (and hedge) asks the breaker and reports to
    /// it (the default).
    PerAttempt,
    /// `Throttle(Breaker(Retry(..)))`: the call asks once and reports its end.
    PerCall,
}

/// A layer that admits calls (or attempts) and hears how they ended: the stateful layers whose
/// place in the stack the [`Nesting`] gives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Gate {
    /// The adaptive throttle.
    Throttle,
    /// The circuit breaker.
    Breaker,
    /// The concurrency limit.
    Limit,
    /// The rate limit.
    Rate,
}

/// Where the gates sit around the retry, outermost first: those outside it admit the call once
/// and hear its end (per call), those inside admit every attempt and hear its answer (per
/// attempt); and where the call starts its retry budget (the ledger's deposit) among the gates
/// outside. Each gate at most once; a gate the [`Shared`] state does not have is skipped
/// wherever it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Nesting {
    gates: [Gate; 4],
    len: u8,
    outside: u8,
    ledger_at: u8,
    /// The gates outside the retry and inside it, a bit each (`Gate::bit`).
    outside_bits: u8,
    inside_bits: u8,
    /// The limit sits inside the breaker: an end reaches it first.
    limit_first: bool,
}

impl Gate {
    const fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

/// Why a [`Nesting`] cannot be built: a gate named twice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Twice(pub Gate);

impl Nesting {
    /// `Ledger → Retry → Throttle → Breaker → Limit → RateLimit`: every gate per attempt (the
    /// default).
    pub const PER_ATTEMPT: Nesting = Nesting {
        gates: [Gate::Throttle, Gate::Breaker, Gate::Limit, Gate::Rate],
        len: 4,
        outside: 0,
        ledger_at: 0,
        outside_bits: 0,
        inside_bits: 0b1111,
        limit_first: true,
    };

    /// `Throttle → Ledger → Breaker → Retry → Limit → RateLimit`: the throttle and the breaker
    /// judge the call, the limits every attempt ([`BreakerScope::PerCall`]).
    pub const BREAKER_PER_CALL: Nesting = Nesting {
        gates: [Gate::Throttle, Gate::Breaker, Gate::Limit, Gate::Rate],
        len: 4,
        outside: 2,
        ledger_at: 1,
        outside_bits: Gate::Throttle.bit() | Gate::Breaker.bit(),
        inside_bits: Gate::Limit.bit() | Gate::Rate.bit(),
        limit_first: true,
    };

    /// The gates `outside` the retry (outermost first; the budget starts, and the ledger takes
    /// its deposit, after the first `ledger_at` of them) and `inside` it (outermost first).
    pub fn new(outside: &[Gate], ledger_at: usize, inside: &[Gate]) -> Result<Self, Twice> {
        let mut n = Nesting {
            gates: [Gate::Throttle; 4],
            len: 0,
            outside: 0,
            ledger_at: 0,
            outside_bits: 0,
            inside_bits: 0,
            limit_first: true,
        };
        for &g in outside.iter().chain(inside) {
            if n.gates().contains(&g) {
                return Err(Twice(g));
            }
            // At most four distinct gates: there is room.
            if let Some(slot) = n.gates.get_mut(usize::from(n.len)) {
                *slot = g;
                n.len += 1;
            }
        }
        n.outside = outside.len() as u8;
        n.ledger_at = ledger_at.min(outside.len()) as u8;
        n.outside_bits = outside.iter().fold(0, |b, g| b | g.bit());
        n.inside_bits = inside.iter().fold(0, |b, g| b | g.bit());
        let at = |gate| n.gates().iter().position(|&g| g == gate);
        n.limit_first = at(Gate::Limit) >= at(Gate::Breaker);
        Ok(n)
    }

    /// Every gate, outermost first.
    pub fn gates(&self) -> &[Gate] {
        self.gates.get(..usize::from(self.len)).unwrap_or(&[])
    }

    /// The gates outside the retry (per call), outermost first.
    pub fn outside(&self) -> &[Gate] {
        self.gates.get(..usize::from(self.outside)).unwrap_or(&[])
    }

    /// The gates outside the retry, outermost first: those before the budget starts (the
    /// ledger's deposit), then those after.
    fn around_budget(&self) -> (&[Gate], &[Gate]) {
        let outside = self.outside();
        // (`new` keeps `ledger_at` within them: the fallback is never taken, and keeps the
        // engine free of a panic path.)
        outside
            .split_at_checked(usize::from(self.ledger_at))
            .unwrap_or((outside, &[]))
    }

    /// The gates inside the retry (per attempt), outermost first.
    pub fn inside(&self) -> &[Gate] {
        let all = self.gates();
        all.get(usize::from(self.outside)..).unwrap_or(&[])
    }

    /// How many of the gates outside the retry come before the budget's start (the ledger's
    /// deposit).
    pub fn ledger_at(&self) -> usize {
        usize::from(self.ledger_at)
    }

    /// Whether `gate` is inside the retry (it sees every attempt). A gate not named is neither.
    pub fn per_attempt(&self, gate: Gate) -> bool {
        self.inside_bits & gate.bit() != 0
    }

    /// Whether `gate` is outside the retry (it sees the call once).
    pub fn per_call(&self, gate: Gate) -> bool {
        self.outside_bits & gate.bit() != 0
    }
}

impl Default for Nesting {
    fn default() -> Self {
        Nesting::PER_ATTEMPT
    }
}

/// What a policy says about a call as a whole, validated: the retry policy (attempts, timeouts,
/// deadline, backoff, waiting on refusals), where each gate sits around the retry (the
/// [`Nesting`]), whether the call may be sent twice (only then is it hedged) and each copy's own
/// timeout. The stateful layers are the [`Shared`] state's.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Plan {
    retry: RetryPolicy,
    nesting: Nesting,
    idempotency: Idempotency,
    copy_timeout: Option<Duration>,
}

impl Plan {
    /// A plan with `retry`, every gate per attempt, calls not idempotent, no copy timeout.
    pub const fn new(retry: RetryPolicy) -> Self {
        Plan {
            retry,
            nesting: Nesting::PER_ATTEMPT,
            idempotency: Idempotency::NotIdempotent,
            copy_timeout: None,
        }
    }

    /// Where the breaker sits: per attempt ([`Nesting::PER_ATTEMPT`]), or per call with the
    /// throttle ([`Nesting::BREAKER_PER_CALL`]).
    pub const fn scope(mut self, scope: BreakerScope) -> Self {
        self.nesting = match scope {
            BreakerScope::PerAttempt => Nesting::PER_ATTEMPT,
            BreakerScope::PerCall => Nesting::BREAKER_PER_CALL,
        };
        self
    }

    /// Where every gate sits.
    pub const fn nesting(mut self, nesting: Nesting) -> Self {
        self.nesting = nesting;
        self
    }

    /// Whether the calls may be sent twice.
    pub const fn idempotency(mut self, idempotency: Idempotency) -> Self {
        self.idempotency = idempotency;
        self
    }

    /// Each copy's own timeout, from its own send (the policy format's `Call` timeout under a
    /// `Hedge`); the attempt's timeout and the deadline still bound it.
    pub const fn copy_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.copy_timeout = timeout;
        self
    }

    /// The retry policy.
    pub const fn retry(&self) -> &RetryPolicy {
        &self.retry
    }

    /// Where the gates sit.
    pub const fn gates(&self) -> &Nesting {
        &self.nesting
    }

    /// Where the breaker sits.
    pub fn breaker_scope(&self) -> BreakerScope {
        if self.nesting.per_call(Gate::Breaker) {
            BreakerScope::PerCall
        } else {
            BreakerScope::PerAttempt
        }
    }
}

/// Which decision a random sample is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SampleFor {
    /// The backoff's jitter.
    Backoff,
    /// The adaptive throttle's decision.
    Throttle,
}

/// The state a call draws from, shared with other calls: each stateful layer of the stack, or
/// none (the default methods: no such layer). A face stores them as it needs (behind locks for
/// threads, in cells on one core) and hands each to the closure. Three closures call back, so
/// what they reach must be stored apart from what they hold: the budget's and the throttle's
/// draw a [`sample`](Self::sample) (the budget's only when a jittered backoff needs one), and
/// the hedger's asks the [`ledger`](Self::ledger) for a hedge's draw.
pub trait Shared {
    /// Asks the breaker at `now`; `None`: no breaker.
    fn breaker_acquire(&self, now: Instant) -> Option<Result<Permit, Rejection>> {
        let _ = now;
        None
    }
    /// Asks the breaker at `now` for an attempt (or, outside the retry, the call), when its
    /// answer may come later: [`Asked::Later`] means the face asked a store and hands the answer
    /// to [`Call::breaker_decided`] when it comes. `None`: no breaker. By default, the answer of
    /// [`breaker_acquire`](Self::breaker_acquire), at once.
    fn breaker_ask(&self, now: Instant) -> Option<Asked> {
        self.breaker_acquire(now).map(Asked::Now)
    }
    /// Reports a permitted call's end to the breaker.
    fn breaker_record(&self, permit: Permit, outcome: Outcome, now: Instant) {
        let _ = (permit, outcome, now);
    }
    /// While the breaker refuses calls at `now` (it is open): how long until it admits a probe
    /// (`Duration::MAX`: not until it is reset). `None`: it admits calls, or there is none.
    fn breaker_refuses(&self, now: Instant) -> Option<Duration> {
        let _ = now;
        None
    }
    /// The retry budget: the ledger's retry side when there is a ledger, else the budget, else
    /// [`Unlimited`](crate::budget::Unlimited).
    fn budget<R>(&self, f: impl FnOnce(&mut dyn Budget) -> R) -> R {
        f(&mut crate::budget::Unlimited)
    }
    /// The adaptive throttle (of any window).
    fn throttle<R>(&self, f: impl FnOnce(&mut dyn AnyThrottle) -> R) -> Option<R> {
        let _ = f;
        None
    }
    /// The ledger of extra attempts (probes and hedges draw here; retries through
    /// [`budget`](Self::budget)).
    fn ledger<R>(&self, f: impl FnOnce(&mut dyn AnyLedger) -> R) -> Option<R> {
        let _ = f;
        None
    }
    /// The hedger.
    fn hedger<R>(&self, f: impl FnOnce(&mut Hedger) -> R) -> Option<R> {
        let _ = f;
        None
    }
    /// The concurrency limit.
    fn limiter<R>(&self, f: impl FnOnce(&mut Limiter) -> R) -> Option<R> {
        let _ = f;
        None
    }
    /// The rate limit.
    fn rate<R>(&self, f: impl FnOnce(&mut RateLimiter) -> R) -> Option<R> {
        let _ = f;
        None
    }
    /// A uniform random `u64` for `what`, drawn only when the decision uses it.
    fn sample(&self, what: SampleFor) -> u64 {
        let _ = what;
        0
    }
    /// A decision was taken (see [`Note`]): for traces, metrics and logs.
    fn note(&self, note: Note) {
        let _ = note;
    }
}

/// The breaker's answer to [`Shared::breaker_ask`].
#[derive(Debug, PartialEq, Eq)]
pub enum Asked {
    /// At once: a permit, or a refusal.
    Now(Result<Permit, Rejection>),
    /// Later: the face asked a store, and hands its answer to [`Call::breaker_decided`].
    Later,
}

/// Who refused an attempt or a hedge locally, and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The breaker (open, forced open, half-open probes full, slow start).
    Breaker(RejectReason),
    /// The adaptive throttle.
    Throttle(Shed),
    /// The ledger (a half-open probe or a hedge it could not pay for).
    Ledger(Denied),
    /// The concurrency limit.
    Limit(LimitReached),
    /// The rate limit.
    Rate(RateLimited),
}

impl Refusal {
    /// When the refuser would admit a call, if it says.
    pub fn retry_after(self) -> Option<Duration> {
        match self {
            Refusal::Breaker(RejectReason::Open { retry_after }) => Some(retry_after),
            Refusal::Rate(r) => Some(r.retry_after),
            _ => None,
        }
    }
}

/// A decision taken on the way, reported to [`Shared::note`] as it is taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Note {
    /// Copy `n` goes out as a hedge (its [`Action::Send`] follows).
    Hedge {
        /// The copy.
        n: u32,
    },
    /// A hedge was due and refused; no other hedge of this attempt follows.
    NoHedge(Refusal),
    /// Copy `n` lost the race (another copy succeeded) and is cancelled.
    Lost {
        /// The copy.
        n: u32,
    },
    /// An attempt was refused locally.
    Refused(Refusal),
    /// The policy retries after `after` (a refusal waited out, or a failed attempt of `class`).
    Retry {
        /// The wait.
        after: Duration,
        /// What failed (a refusal's class for a refusal waited out).
        class: ErrorClass,
        /// Attempts sent so far.
        attempts: u32,
    },
    /// The concurrency limit's whole part moved.
    Limit {
        /// Before.
        from: u32,
        /// After.
        to: u32,
    },
    /// The ledger answered an extra attempt of `kind`.
    Ledger {
        /// Retry, hedge or probe.
        kind: Extra,
        /// Granted or refused.
        granted: bool,
    },
    /// Copy `n` ended (its answer was taken; a success is `None`).
    Ended {
        /// The copy.
        n: u32,
        /// Its class.
        class: Option<ErrorClass>,
    },
    /// The retry policy gave up.
    GaveUp(GiveUpReason),
}

/// What the face must do, from [`Call::poll`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Send copy `n`; it times out at `deadline` (answer [`Answer::Timeout`] then, or let the
    /// call's timer do it: [`Call::poll_timeout`] includes it).
    Send {
        /// The copy's number, from 1 across the call.
        n: u32,
        /// When it times out, if ever.
        deadline: Option<Instant>,
        /// Whether it is a hedge of the attempt in flight.
        hedge: bool,
    },
    /// Stop copy `n` and drop whatever it would answer.
    Cancel {
        /// The copy.
        n: u32,
        /// Why.
        why: Cancelled,
    },
    /// The call is over.
    Done(End),
}

/// Why a copy is cancelled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Cancelled {
    /// Another copy succeeded first.
    Lost,
    /// Its deadline passed (it is a timeout).
    TimedOut,
    /// The call is over (the caller cancelled).
    CallOver,
}

/// How a call ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct End {
    /// The result.
    pub result: Ended,
    /// Copies sent.
    pub attempts: u32,
    /// The last answer taken: its copy and its class (`None`: a success).
    pub last: Option<(u32, Option<ErrorClass>)>,
}

/// The result of a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// Copy `n` succeeded.
    Ok {
        /// The winning copy.
        n: u32,
    },
    /// The retry policy gave up after the last answer.
    GaveUp(GiveUpReason),
    /// An attempt was refused locally (and not waited out).
    Refused(Refusal),
    /// The caller cancelled, or the face dropped the last copy.
    Cancelled,
}

/// What happens to a call: the inputs of [`Call::handle`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Input {
    /// Time passed (a timer the call asked for fired, or any other reason to look).
    Tick,
    /// Copy `n` answered; [`Answer::Timeout`] when the face's timer for it fired.
    Answer {
        /// The copy.
        n: u32,
        /// Its answer.
        answer: Answer,
    },
    /// Copy `n` answered, already classified by the face's own rule (`None`: a success).
    Classified {
        /// The copy.
        n: u32,
        /// Its class.
        class: Option<ErrorClass>,
    },
    /// The face lost copy `n` without an answer (its task dropped).
    Dropped {
        /// The copy.
        n: u32,
    },
    /// The caller cancels the call.
    Cancel,
}

/// The phases of a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Copies in flight.
    Racing,
    /// Waiting to admit the next attempt.
    Waiting { until: Instant },
    /// Waiting for the breaker's answer, to go on asking the gates of `stage` from `next`.
    Asking { stage: Stage, next: u8 },
    /// Over.
    Done,
}

/// Where a call asks its gates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    /// Outside the retry, before the budget starts (the ledger's deposit).
    Before,
    /// Outside the retry, after it.
    After,
    /// Inside the retry: an attempt.
    Attempt,
}

/// Why a pass through the gates stopped.
enum Stop {
    /// A gate refused.
    Refused(Refusal),
    /// The breaker, gate number `.0` of those asked, answers later.
    Asked(usize),
}

impl From<Refusal> for Stop {
    fn from(r: Refusal) -> Self {
        Stop::Refused(r)
    }
}

/// One copy of the current attempt and what it holds until it ends.
#[derive(Debug)]
struct Sent {
    n: u32,
    breaker: Option<Permit>,
    limit: Option<LimitPermit>,
    draw: Option<Draw>,
    sent: Instant,
    deadline: Option<Instant>,
    live: bool,
}

/// What an attempt (or, outside the retry, the call) holds once admitted.
#[derive(Debug, Default)]
struct Holdings {
    breaker: Option<Permit>,
    limit: Option<LimitPermit>,
    draw: Option<Draw>,
    /// It passed a throttle, which hears how it ended.
    throttle: bool,
}

/// The actions a call may hold unpolled by default: enough for a call of up to 12 copies (one
/// input queues a cancel per copy, a send and the end at most; a call of `C` copies needs
/// `C + 4` with room to spare, [`CallState`]'s `Q`).
const QUEUE: usize = 16;

/// An [`Action`] waiting to be polled, in as few bytes as it can be: a call keeps
/// [`QUEUE`] of them inline, and on a microcontroller that is most of a call's RAM (an
/// `Action` is 56 bytes, as big as the [`End`] it may carry; this is 16). The end is kept once
/// beside the queue, and a send's deadline is `Instant::MAX` when it has none (a deadline that
/// far is none: no timer reaches it).
#[derive(Clone, Copy, Debug)]
enum Queued {
    Send {
        n: u32,
        hedge: bool,
        deadline: Instant,
    },
    Cancel {
        n: u32,
        why: Cancelled,
    },
    Done,
}

/// One call in progress, holding its plan and shared state. See the [module docs](self).
///
/// It borrows both for its whole life. A face that must keep a call where a borrow cannot
/// live (a table across the exports of a WebAssembly module, an object handed to Python, a
/// simulator's event queue) keeps a [`CallState`] instead and hands it the plan and the
/// shared state at each step.
#[derive(Debug)]
pub struct Call<'a, S: ?Sized, const C: usize = 4, const Q: usize = QUEUE> {
    plan: &'a Plan,
    shared: &'a S,
    st: CallState<C, Q>,
}

/// One call in progress, without its plan and shared state: a [`Call`] that owns nothing
/// borrowed, so it can be stored anywhere and moved freely.
///
/// Every step takes the plan and the shared state the call was started with. Handing another
/// is a logic error the call cannot see: it decides with what it is given (nothing unsafe
/// follows, but the decisions are no longer those of one policy).
///
/// `C` is the copies an attempt may have at once (1 to 12: a first copy and its hedges), `Q`
/// the actions it holds until polled: at least `C + 4` (what one input may queue, with room to
/// spare), 16 by default. Each is checked when the call starts, at compile time. A face that
/// keeps many calls at once (a simulator's every request in flight) takes the least, `C + 4`:
/// each queued action is 16 bytes.
#[derive(Debug)]
pub struct CallState<const C: usize = 4, const Q: usize = QUEUE> {
    phase: Phase,
    retry: RetryState,
    copies: Vec<Sent, C>,
    /// The current attempt's hedging schedule, while a hedge may still be sent.
    hedged: Option<HedgedCall>,
    /// The current attempt's deadline (its own timeout or the call's deadline).
    attempt_deadline: Option<Instant>,
    /// What the gates outside the retry hold for the call; while an attempt waits for the
    /// breaker's answer, also what the gates inside the retry before it gave (each gate sits
    /// once, so the fields those fill are free here: [`Deciding::stash`]).
    call_held: Holdings,
    attempts: u32,
    last: Option<(u32, Option<ErrorClass>)>,
    out: Deque<Queued, Q>,
    /// How the call ended, once it has ([`Queued::Done`] stands for it in the queue).
    end: Option<End>,
}

/// A call's state with its plan and shared state, for the length of one step: where every
/// decision is taken, for [`Call`] and [`CallState`] alike.
struct Deciding<'a, 'b, S: ?Sized, const C: usize, const Q: usize> {
    plan: &'a Plan,
    shared: &'a S,
    st: &'b mut CallState<C, Q>,
}

impl<'a, S: Shared + ?Sized, const C: usize, const Q: usize> Call<'a, S, C, Q> {
    /// Starts a call at `now`: its first attempt is admitted (or refused) at once; poll for what
    /// to do.
    pub fn start(plan: &'a Plan, shared: &'a S, now: Instant) -> Self {
        Call {
            plan,
            shared,
            st: CallState::start(plan, shared, now),
        }
    }

    /// A call whose first attempt the face already sent at `started` on a fast path of its
    /// own, holding `permit` from the breaker (asked per attempt; nothing else on the stack
    /// admits attempts: no throttle, ledger, limit, rate limit or hedger). Hand it that
    /// attempt's answer as copy 1 next; from then on it is the call [`start`](Self::start)
    /// would have made.
    pub fn resume(plan: &'a Plan, shared: &'a S, started: Instant, permit: Option<Permit>) -> Self {
        Call {
            plan,
            shared,
            st: CallState::resume(plan, shared, started, permit),
        }
    }

    /// Takes an input at `now`: one arm per row of the [spec](self).
    pub fn handle(&mut self, now: Instant, input: Input) {
        self.st.handle(self.plan, self.shared, now, input);
    }

    /// Hands in the breaker's answer at `now`, after it said it would answer later
    /// ([`Asked::Later`]); one that comes when the call no longer waits for it (cancelled
    /// meanwhile) goes back to the breaker unused.
    pub fn breaker_decided(&mut self, now: Instant, answer: Result<Permit, Rejection>) {
        self.st.breaker_decided(self.plan, self.shared, now, answer);
    }

    /// The next thing to do, if any.
    pub fn poll(&mut self) -> Option<Action> {
        self.st.poll()
    }

    /// How many actions are queued, not polled yet (a face that hands several across a boundary
    /// at once knows from it whether to ask again).
    pub fn queued(&self) -> usize {
        self.st.queued()
    }

    /// When to wake the call (hand it [`Input::Tick`] then), if it waits for the time.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.st.poll_timeout(self.shared)
    }

    /// Whether the call is over.
    pub fn is_done(&self) -> bool {
        self.st.is_done()
    }

    /// Copies sent so far.
    pub fn attempts(&self) -> u32 {
        self.st.attempts
    }

    /// The call's state without its borrows, to keep and step with [`CallState::handle`].
    pub fn into_state(self) -> CallState<C, Q> {
        self.st
    }
}

impl<const C: usize, const Q: usize> CallState<C, Q> {
    /// [`Call::start`], keeping only the state.
    pub fn start<S: Shared + ?Sized>(plan: &Plan, shared: &S, now: Instant) -> Self {
        let mut st = Self::blank(plan, now);
        Deciding {
            plan,
            shared,
            st: &mut st,
        }
        .begin(now);
        st
    }

    /// [`CallState::start`] in this state's place, whatever call it held: a face that keeps
    /// many calls (a simulator's every request in flight) reuses their room rather than move a
    /// new state into it.
    pub fn restart<S: Shared + ?Sized>(&mut self, plan: &Plan, shared: &S, now: Instant) {
        *self = Self::blank(plan, now);
        Deciding {
            plan,
            shared,
            st: self,
        }
        .begin(now);
    }

    /// A state before its call begins.
    #[inline(always)]
    fn blank(plan: &Plan, now: Instant) -> Self {
        const {
            assert!(C >= 1 && C <= 12, "a call holds 1 to 12 copies at once");
            assert!(Q >= C + 4, "a call of C copies queues up to C + 4 actions");
        };
        CallState {
            phase: Phase::Done,
            retry: plan.retry.start(now, &mut crate::budget::Unlimited),
            copies: Vec::new(),
            hedged: None,
            attempt_deadline: None,
            call_held: Holdings::default(),
            attempts: 0,
            last: None,
            out: Deque::new(),
            end: None,
        }
    }

    /// [`Call::resume`], keeping only the state.
    pub fn resume<S: Shared + ?Sized>(
        plan: &Plan,
        shared: &S,
        started: Instant,
        permit: Option<Permit>,
    ) -> Self {
        const {
            assert!(C >= 1 && C <= 12, "a call holds 1 to 12 copies at once");
            assert!(Q >= C + 4, "a call of C copies queues up to C + 4 actions");
        };
        let retry = shared.budget(|b| plan.retry.start(started, b));
        let deadline = plan.retry.attempt_deadline(&retry, started);
        let attempt_deadline = (deadline != Instant::MAX).then_some(deadline);
        let own = plan.copy_timeout.map(|t| started.saturating_add(t));
        let mut copies = Vec::new();
        let _ = copies.push(Sent {
            n: 1,
            breaker: permit,
            limit: None,
            draw: None,
            sent: started,
            deadline: own.into_iter().chain(attempt_deadline).min(),
            live: true,
        });
        CallState {
            phase: Phase::Racing,
            retry,
            copies,
            hedged: None,
            attempt_deadline,
            call_held: Holdings::default(),
            attempts: 1,
            last: None,
            out: Deque::new(),
            end: None,
        }
    }

    /// [`Call::breaker_decided`], given the call's plan and shared state.
    pub fn breaker_decided<S: Shared + ?Sized>(
        &mut self,
        plan: &Plan,
        shared: &S,
        now: Instant,
        answer: Result<Permit, Rejection>,
    ) {
        Deciding {
            plan,
            shared,
            st: self,
        }
        .decided(now, answer);
    }

    /// Whether the call waits for the breaker's answer ([`Asked::Later`]).
    pub fn is_asking(&self) -> bool {
        matches!(self.phase, Phase::Asking { .. })
    }

    /// [`Call::handle`], given the call's plan and shared state.
    pub fn handle<S: Shared + ?Sized>(
        &mut self,
        plan: &Plan,
        shared: &S,
        now: Instant,
        input: Input,
    ) {
        Deciding {
            plan,
            shared,
            st: self,
        }
        .handle(now, input);
    }

    /// [`Call::poll`].
    pub fn poll(&mut self) -> Option<Action> {
        Some(match self.out.pop_front()? {
            Queued::Send { n, hedge, deadline } => Action::Send {
                n,
                deadline: (deadline != Instant::MAX).then_some(deadline),
                hedge,
            },
            Queued::Cancel { n, why } => Action::Cancel { n, why },
            Queued::Done => Action::Done(self.end?),
        })
    }

    /// [`Call::queued`].
    pub fn queued(&self) -> usize {
        self.out.len()
    }

    /// [`Call::poll_timeout`], given the call's shared state (its hedger knows when a hedge is
    /// due).
    pub fn poll_timeout<S: Shared + ?Sized>(&self, shared: &S) -> Option<Instant> {
        match self.phase {
            Phase::Done | Phase::Asking { .. } => None,
            Phase::Waiting { until } => Some(until),
            Phase::Racing => {
                let copy = self
                    .copies
                    .iter()
                    .filter(|c| c.live)
                    .filter_map(|c| c.deadline)
                    .min();
                copy.into_iter().chain(self.hedge_due(shared)).min()
            }
        }
    }

    /// [`Call::is_done`].
    pub fn is_done(&self) -> bool {
        self.phase == Phase::Done
    }

    /// [`Call::attempts`].
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// When the current attempt's next hedge is due, if one may be sent.
    fn hedge_due<S: Shared + ?Sized>(&self, shared: &S) -> Option<Instant> {
        let call = self.hedged?;
        shared.hedger(|h| h.next_hedge_at(&call)).flatten()
    }
}

impl<S: Shared + ?Sized, const C: usize, const Q: usize> Deciding<'_, '_, S, C, Q> {
    /// The start of [`CallState::start`], once the state is made.
    fn begin(&mut self, now: Instant) {
        if self.plan.nesting.outside().is_empty() {
            // No gate outside the retry (the default stack): the budget starts, the first
            // attempt is admitted.
            let (plan, shared) = (self.plan, self.shared);
            self.st.retry = shared.budget(|b| plan.retry.start(now, b));
            return self.admit(now);
        }
        self.outside(Stage::Before, 0, now);
    }

    /// Asks the gates outside the retry from gate `next` of `stage` on, starts the budget
    /// between those before and after it, then admits the first attempt.
    fn outside(&mut self, stage: Stage, next: usize, now: Instant) {
        let (plan, shared) = (self.plan, self.shared);
        let (before, after) = plan.nesting.around_budget();
        let mut next = next;
        if stage == Stage::Before {
            let gates = before.get(next..).unwrap_or_default();
            if !gates.is_empty() {
                match self.pass_call(gates, false, now) {
                    Ok(()) => {}
                    // Refused before the budget started: it never heard of the call.
                    Err(Stop::Refused(refusal)) => return self.refused_before(refusal, now),
                    Err(Stop::Asked(i)) => return self.asking(Stage::Before, next + i),
                }
            }
            self.st.retry = shared.budget(|b| plan.retry.start(now, b));
            next = 0;
        }
        let gates = after.get(next..).unwrap_or_default();
        if !gates.is_empty() {
            match self.pass_call(gates, true, now) {
                Ok(()) => {}
                Err(Stop::Refused(refusal)) => {
                    self.finish(now);
                    return self.refuse(refusal);
                }
                Err(Stop::Asked(i)) => return self.asking(Stage::After, next + i),
            }
        }
        self.admit(now);
    }

    /// Refused outside the retry before the budget started (it never heard of the call).
    fn refused_before(&mut self, refusal: Refusal, now: Instant) {
        self.settle_call(AttemptOutcome::Cancelled, now);
        self.refuse(refusal);
    }

    /// Keeps what the gates inside the retry before the breaker gave an attempt (a throttle
    /// passed, a limit's slot: nothing else comes before the breaker's permit) in the call's
    /// holdings while it waits for the breaker: those gates are not outside the retry too, so
    /// the fields they fill are free there.
    fn stash(&mut self, held: Holdings) {
        let call = &mut self.st.call_held;
        call.throttle |= held.throttle;
        if let Some(limit) = held.limit {
            call.limit = Some(limit);
        }
    }

    /// Takes back what [`stash`](Self::stash) kept for the gates inside the retry before gate
    /// `next - 1` (the breaker).
    fn unstash(&mut self, next: usize) -> Holdings {
        let before = next.saturating_sub(1);
        let gates = self.plan.nesting.inside();
        let call = &mut self.st.call_held;
        let mut held = Holdings::default();
        for gate in gates.get(..before).unwrap_or_default() {
            match gate {
                Gate::Throttle => held.throttle = core::mem::take(&mut call.throttle),
                Gate::Limit => held.limit = call.limit.take(),
                Gate::Breaker | Gate::Rate => {}
            }
        }
        held
    }

    /// The breaker, gate `at` of `stage`, answers later.
    fn asking(&mut self, stage: Stage, at: usize) {
        let next = u8::try_from(at.saturating_add(1)).unwrap_or(u8::MAX);
        self.st.phase = Phase::Asking { stage, next };
    }

    /// The breaker's answer came at `now`: the call goes on from the gate after it, as it would
    /// have had the answer come at once; or, if the call no longer waits for one, the permit
    /// goes back unused.
    fn decided(&mut self, now: Instant, answer: Result<Permit, Rejection>) {
        let Phase::Asking { stage, next } = self.st.phase else {
            if let Ok(permit) = answer {
                self.shared.breaker_record(permit, Outcome::Ignored, now);
            }
            return;
        };
        let next = usize::from(next);
        let mut held = match stage {
            Stage::Attempt => self.unstash(next),
            Stage::Before | Stage::After => core::mem::take(&mut self.st.call_held),
        };
        // A probe draws from the ledger when the breaker is inside it: within the retry, or
        // outside it after the budget starts.
        let passed = match answer {
            Err(r) => Err(Refusal::Breaker(r.reason)),
            Ok(permit) => {
                let probe = permit.is_probe() && stage != Stage::Before;
                held.breaker = Some(permit);
                if probe {
                    self.probe_draw(now).map(|draw| held.draw = draw)
                } else {
                    Ok(())
                }
            }
        };
        match stage {
            Stage::Attempt => match passed {
                Ok(()) => self.admit_from(next, held, now),
                Err(refusal) => self.refused(refusal, held, now),
            },
            Stage::Before | Stage::After => {
                if let Some(d) = held.draw.take() {
                    self.shared.ledger(|l| l.settle(d, now));
                }
                self.st.call_held = held;
                match (passed, stage) {
                    (Ok(()), _) => self.outside(stage, next, now),
                    (Err(refusal), Stage::Before) => self.refused_before(refusal, now),
                    (Err(refusal), _) => {
                        self.finish(now);
                        self.refuse(refusal);
                    }
                }
            }
        }
    }

    /// Takes an input at `now`: one arm per row of the [spec](self).
    fn handle(&mut self, now: Instant, input: Input) {
        match (self.st.phase, input) {
            (Phase::Done, _) => {}
            (_, Input::Cancel) => self.cancel(now),
            (Phase::Racing, Input::Answer { n, answer }) => self.answer(n, answer.class(), now),
            (Phase::Racing, Input::Classified { n, class }) => self.answer(n, class, now),
            (Phase::Racing, Input::Dropped { n }) => self.dropped(n, now),
            (Phase::Racing, Input::Tick) => self.timers(now),
            (Phase::Waiting { until }, Input::Tick) if now >= until => self.admit(now),
            (Phase::Waiting { .. } | Phase::Asking { .. }, _) => {}
        }
    }

    fn push(&mut self, action: Queued) {
        // Never full: an input queues at most a cancel per copy (`C` ≤ 12, checked in `start`),
        // a send and the end.
        let _ = self.st.out.push_back(action);
    }

    fn note(&self, note: Note) {
        self.shared.note(note);
    }

    fn throttle_acquire(&self, now: Instant) -> Option<Result<(), Shed>> {
        let shared = self.shared;
        shared.throttle(|t| t.try_acquire_with(now, shared.sample(SampleFor::Throttle)))
    }

    /// Asks `gates` in order at `now`, filling `held`; a copy (a hedge) skips the throttle,
    /// which admits attempts, and a half-open probe draws from the ledger when `probes_draw`
    /// (the breaker is inside the ledger) and it is no copy. On a refusal, `held` keeps what the
    /// gates before the refuser gave: the caller hands it back.
    fn pass(
        &mut self,
        gates: &[Gate],
        held: &mut Holdings,
        now: Instant,
        copy: bool,
        probes_draw: bool,
    ) -> Result<(), Stop> {
        let shared = self.shared;
        for (i, &gate) in gates.iter().enumerate() {
            match gate {
                Gate::Throttle if copy => {}
                Gate::Throttle => match self.throttle_acquire(now) {
                    Some(Err(shed)) => return Err(Refusal::Throttle(shed).into()),
                    Some(Ok(())) => held.throttle = true,
                    None => {}
                },
                Gate::Breaker => {
                    // A hedge never waits for a store's answer.
                    let asked = if copy {
                        shared.breaker_acquire(now).map(Asked::Now)
                    } else {
                        shared.breaker_ask(now)
                    };
                    match asked {
                        None => {}
                        Some(Asked::Later) => return Err(Stop::Asked(i)),
                        Some(Asked::Now(Err(r))) => {
                            return Err(Refusal::Breaker(r.reason).into());
                        }
                        Some(Asked::Now(Ok(p))) => {
                            let probe = p.is_probe() && probes_draw && !copy;
                            held.breaker = Some(p);
                            if probe {
                                held.draw = self.probe_draw(now)?;
                            }
                        }
                    }
                }
                Gate::Limit => match shared.limiter(|l| l.try_acquire(now)) {
                    None => {}
                    Some(Ok(p)) => held.limit = Some(p),
                    Some(Err(r)) => return Err(Refusal::Limit(r).into()),
                },
                Gate::Rate => {
                    if let Some(Err(limited)) = shared.rate(|r| r.try_acquire(now)) {
                        return Err(Refusal::Rate(limited).into());
                    }
                }
            }
        }
        Ok(())
    }

    /// A half-open probe draws from the ledger, if there is one.
    fn probe_draw(&mut self, now: Instant) -> Result<Option<Draw>, Refusal> {
        match self.shared.ledger(|l| l.try_draw(Extra::Probe, now)) {
            None => Ok(None),
            Some(Ok(draw)) => {
                self.note(Note::Ledger {
                    kind: Extra::Probe,
                    granted: true,
                });
                Ok(Some(draw))
            }
            Some(Err(denied)) => {
                self.note(Note::Ledger {
                    kind: Extra::Probe,
                    granted: false,
                });
                Err(Refusal::Ledger(denied))
            }
        }
    }

    /// Asks `gates`, outside the retry, for the call; a probe's draw is settled at once.
    fn pass_call(&mut self, gates: &[Gate], probes_draw: bool, now: Instant) -> Result<(), Stop> {
        let mut held = core::mem::take(&mut self.st.call_held);
        let passed = self.pass(gates, &mut held, now, false, probes_draw);
        if let Some(d) = held.draw.take() {
            self.shared.ledger(|l| l.settle(d, now));
        }
        self.st.call_held = held;
        passed
    }

    /// The call is over as `end` says: the gates outside the retry hear it.
    fn settle_call(&mut self, end: AttemptOutcome, now: Instant) {
        if self.plan.nesting.outside().is_empty() {
            return;
        }
        let held = core::mem::take(&mut self.st.call_held);
        self.settle(held, end, now);
    }

    fn release_limit(&self, permit: LimitPermit, completion: Completion, now: Instant) {
        let moved = self.shared.limiter(|l| {
            let from = l.limit();
            l.release(permit, completion, now);
            (from, l.limit())
        });
        if let Some((from, to)) = moved
            && from != to
        {
            self.note(Note::Limit { from, to });
        }
    }

    /// Hands back what an attempt (or the call) held, as `end` says, the inner of the limit and
    /// the breaker first (an answer reaches it first; the throttle and the ledger keep no order
    /// with them).
    fn settle(&self, h: Holdings, end: AttemptOutcome, now: Instant) {
        let limit_first = self.plan.nesting.limit_first;
        let mut limit = h.limit;
        if limit_first && let Some(p) = limit.take() {
            self.release_limit(p, Completion::from(end), now);
        }
        if let Some(p) = h.breaker {
            let outcome = match end {
                AttemptOutcome::Success => Outcome::Success,
                AttemptOutcome::Failed(class) => Outcome::from(class),
                AttemptOutcome::Cancelled => Outcome::Ignored,
            };
            self.shared.breaker_record(p, outcome, now);
        }
        if let Some(p) = limit {
            self.release_limit(p, Completion::from(end), now);
        }
        if h.throttle {
            let accepted = match end {
                AttemptOutcome::Success => true,
                AttemptOutcome::Failed(class) => class.consequences().accepted,
                AttemptOutcome::Cancelled => false,
            };
            self.shared.throttle(|t| t.record(now, accepted));
        }
        if let Some(d) = h.draw {
            self.shared.ledger(|l| l.settle(d, now));
        }
    }

    /// Settles copy `slot` as `end` (a copy cancelled in flight reports its time so far).
    fn settle_copy(&mut self, slot: usize, end: AttemptOutcome, now: Instant) {
        let Some(c) = self.st.copies.get_mut(slot) else {
            return;
        };
        if !c.live {
            return;
        }
        c.live = false;
        let h = Holdings {
            breaker: c.breaker.take(),
            limit: c.limit.take(),
            draw: c.draw.take(),
            throttle: false,
        };
        let elapsed = now.saturating_duration_since(c.sent);
        self.settle(h, end, now);
        self.shared.hedger(|hd| hd.copy_ended(elapsed, end));
    }

    /// Admits the next attempt at `now` (see the [module docs](self)).
    #[inline]
    fn admit(&mut self, now: Instant) {
        self.admit_from(0, Holdings::default(), now);
    }

    /// Admits the next attempt at `now`, asking the gates inside the retry from gate `next` on
    /// (`held`: what those before it gave).
    fn admit_from(&mut self, next: usize, mut held: Holdings, now: Instant) {
        let gates = self.plan.nesting.inside().get(next..).unwrap_or_default();
        match self.pass(gates, &mut held, now, false, true) {
            Ok(()) => {}
            Err(Stop::Refused(refusal)) => return self.refused(refusal, held, now),
            Err(Stop::Asked(i)) => {
                self.stash(held);
                return self.asking(Stage::Attempt, next + i);
            }
        }
        // A throttle inside the retry hears the attempt's end, not each copy's.
        held.throttle = false;
        self.st.attempts = self.st.attempts.saturating_add(1);
        let n = self.st.attempts;
        self.st.hedged = self.shared.hedger(|h| h.start(now, self.plan.idempotency));
        let deadline = self.plan.retry.attempt_deadline(&self.st.retry, now);
        self.st.attempt_deadline = (deadline != Instant::MAX).then_some(deadline);
        self.st.copies.clear();
        self.send(n, held, now, false);
        self.st.phase = Phase::Racing;
    }

    /// Records copy `n` as sent at `now` and asks the face to send it.
    fn send(&mut self, n: u32, held: Holdings, now: Instant, hedge: bool) {
        let own = self.plan.copy_timeout.map(|t| now.saturating_add(t));
        let deadline = own.into_iter().chain(self.st.attempt_deadline).min();
        let copy = Sent {
            n,
            breaker: held.breaker,
            limit: held.limit,
            draw: held.draw,
            sent: now,
            deadline,
            live: true,
        };
        if let Err(copy) = self.st.copies.push(copy) {
            // Only hedges can overflow, and `try_hedge` checks for room first.
            let h = Holdings {
                breaker: copy.breaker,
                limit: copy.limit,
                draw: copy.draw,
                throttle: false,
            };
            self.settle(h, AttemptOutcome::Cancelled, now);
            return;
        }
        let deadline = deadline.unwrap_or(Instant::MAX);
        self.push(Queued::Send { n, hedge, deadline });
    }

    /// An attempt was refused locally at `now` by a gate inside the retry: what it held goes
    /// back (a throttle it passed hears a refusal: not accepted); the refusal is waited out if
    /// the policy says so and the wait fits, else the call ends refused.
    fn refused(&mut self, refusal: Refusal, held: Holdings, now: Instant) {
        self.settle(held, AttemptOutcome::Cancelled, now);
        if self.wait_out(refusal, now) {
            return;
        }
        self.finish(now);
        self.refuse(refusal);
    }

    /// With a policy that waits on refusals, asks the retry policy, which waits only if the
    /// wait fits the deadline, the attempts and the budget.
    fn wait_out(&mut self, refusal: Refusal, now: Instant) -> bool {
        let plan = self.plan;
        if !plan.retry.config().wait_on_refusal {
            return false;
        }
        let retry_after = refusal.retry_after();
        let class = ErrorClass::Refused { retry_after };
        let shared = self.shared;
        let state = &mut self.st.retry;
        let decision = shared.budget(|b| {
            plan.retry
                .on_failure_drawing(state, class, now, b, || shared.sample(SampleFor::Backoff))
        });
        let RetryDecision::RetryAt(at) = decision else {
            return false;
        };
        self.note(Note::Refused(refusal));
        self.wait(at, class, now);
        true
    }

    /// Waits until `at` after a failure of `class` (a zero wait admits at once).
    fn wait(&mut self, at: Instant, class: ErrorClass, now: Instant) {
        self.note(Note::Retry {
            after: at.saturating_duration_since(now),
            class,
            attempts: self.st.attempts,
        });
        if at <= now {
            self.admit(now);
        } else {
            self.st.phase = Phase::Waiting { until: at };
        }
    }

    /// The call ends refused.
    fn refuse(&mut self, refusal: Refusal) {
        self.note(Note::Refused(refusal));
        self.done(Ended::Refused(refusal));
    }

    fn done(&mut self, result: Ended) {
        self.st.phase = Phase::Done;
        let end = End {
            result,
            attempts: self.st.attempts,
            last: self.st.last,
        };
        self.st.end = Some(end);
        self.push(Queued::Done);
    }

    /// Ends the call early: copies in flight cancelled, what the gates outside the retry hold
    /// back unused, the budget's grant returned.
    fn finish(&mut self, now: Instant) {
        for slot in 0..self.st.copies.len() {
            if let Some(c) = self.st.copies.get(slot)
                && c.live
            {
                let n = c.n;
                self.settle_copy(slot, AttemptOutcome::Cancelled, now);
                self.push(Queued::Cancel {
                    n,
                    why: Cancelled::CallOver,
                });
            }
        }
        self.st.hedged = None;
        self.settle_call(AttemptOutcome::Cancelled, now);
        let (plan, state) = (self.plan, &mut self.st.retry);
        self.shared.budget(|b| plan.retry.abandon(state, now, b));
    }

    fn cancel(&mut self, now: Instant) {
        match self.st.phase {
            Phase::Asking {
                stage: Stage::Before,
                ..
            } => {
                // The budget never heard of the call.
                self.settle_call(AttemptOutcome::Cancelled, now);
                return self.done(Ended::Cancelled);
            }
            Phase::Asking {
                stage: Stage::Attempt,
                next,
            } => {
                let held = self.unstash(usize::from(next));
                self.settle(held, AttemptOutcome::Cancelled, now);
            }
            _ => {}
        }
        self.finish(now);
        self.done(Ended::Cancelled);
    }

    fn slot(&self, n: u32) -> Option<usize> {
        self.st.copies.iter().position(|c| c.n == n && c.live)
    }

    fn live(&self) -> usize {
        self.st.copies.iter().filter(|c| c.live).count()
    }

    /// Copy `n` answered `class` at `now`.
    fn answer(&mut self, n: u32, class: Option<ErrorClass>, now: Instant) {
        let Some(slot) = self.slot(n) else {
            return;
        };
        self.st.last = Some((n, class));
        self.note(Note::Ended { n, class });
        let Some(class) = class else {
            return self.succeeded(slot, now);
        };
        let timed_out =
            class == ErrorClass::Timeout && self.st.attempt_deadline.is_some_and(|d| now >= d);
        if self.live() > 1 && !timed_out {
            // The race goes on.
            return self.settle_copy(slot, AttemptOutcome::Failed(class), now);
        }
        // The attempt as a whole is over: the copies still in flight time out with it.
        for other in 0..self.st.copies.len() {
            if other != slot
                && let Some(c) = self.st.copies.get(other)
                && c.live
            {
                let m = c.n;
                self.settle_copy(other, AttemptOutcome::Cancelled, now);
                self.push(Queued::Cancel {
                    n: m,
                    why: Cancelled::TimedOut,
                });
            }
        }
        self.failed(slot, class, now);
    }

    /// Copy `slot` succeeded: the others lost; the call is over.
    fn succeeded(&mut self, slot: usize, now: Instant) {
        for other in 0..self.st.copies.len() {
            if other != slot
                && let Some(c) = self.st.copies.get(other)
                && c.live
            {
                let m = c.n;
                self.note(Note::Lost { n: m });
                self.settle_copy(other, AttemptOutcome::Cancelled, now);
                self.push(Queued::Cancel {
                    n: m,
                    why: Cancelled::Lost,
                });
            }
        }
        self.st.hedged = None;
        let n = self.st.copies.get(slot).map_or(0, |c| c.n);
        self.settle_copy(slot, AttemptOutcome::Success, now);
        let (plan, state) = (self.plan, &mut self.st.retry);
        self.shared.budget(|b| plan.retry.on_success(state, now, b));
        if plan.nesting.per_attempt(Gate::Throttle) {
            self.shared.throttle(|t| t.record(now, true));
        }
        self.settle_call(AttemptOutcome::Success, now);
        self.done(Ended::Ok { n });
    }

    /// The attempt (its last copy, `slot`) failed with `class` at `now`.
    fn failed(&mut self, slot: usize, class: ErrorClass, now: Instant) {
        self.st.hedged = None;
        self.settle_copy(slot, AttemptOutcome::Failed(class), now);
        let plan = self.plan;
        if plan.nesting.per_attempt(Gate::Throttle) {
            self.shared
                .throttle(|t| t.record(now, class.consequences().accepted));
        }
        let shared = self.shared;
        let state = &mut self.st.retry;
        let decision = shared.budget(|b| {
            plan.retry
                .on_failure_drawing(state, class, now, b, || shared.sample(SampleFor::Backoff))
        });
        if self.shared.ledger(|_| ()).is_some() {
            match decision {
                RetryDecision::RetryAt(_) => self.note(Note::Ledger {
                    kind: Extra::Retry,
                    granted: true,
                }),
                RetryDecision::GiveUp(GiveUpReason::Budget(_)) => self.note(Note::Ledger {
                    kind: Extra::Retry,
                    granted: false,
                }),
                RetryDecision::GiveUp(_) => {}
            }
        }
        match decision {
            RetryDecision::RetryAt(at) => match self.shared.breaker_refuses(now) {
                Some(open) if plan.nesting.per_attempt(Gate::Breaker) => {
                    self.opened(at, class, open, now)
                }
                _ => self.wait(at, class, now),
            },
            RetryDecision::GiveUp(reason) => {
                self.settle_call(AttemptOutcome::Failed(class), now);
                self.note(Note::GaveUp(reason));
                self.done(Ended::GaveUp(reason));
            }
        }
    }

    /// The retry policy would retry at `at`, but the attempt's failure left the breaker refusing
    /// for `open` (it opened): the call ends now, refused by the breaker, with this answer as the
    /// last; unless the policy waits on refusals and the breaker's open time fits the deadline,
    /// then it waits the longer of the backoff and the open time.
    fn opened(&mut self, at: Instant, class: ErrorClass, open: Duration, now: Instant) {
        let refusal = Refusal::Breaker(RejectReason::Open { retry_after: open });
        if self.plan.retry.config().wait_on_refusal {
            let at = at.max(now.saturating_add(open));
            if self.st.retry.deadline().is_none_or(|d| at < d) {
                self.note(Note::Refused(refusal));
                return self.wait(at, class, now);
            }
        }
        // The call ends on this answer: the gates outside the retry hear it.
        self.settle_call(AttemptOutcome::Failed(class), now);
        self.finish(now);
        self.refuse(refusal);
    }

    /// A copy the face lost without an answer.
    fn dropped(&mut self, n: u32, now: Instant) {
        let Some(slot) = self.slot(n) else {
            return;
        };
        self.settle_copy(slot, AttemptOutcome::Cancelled, now);
        if self.live() == 0 {
            self.cancel(now);
        }
    }

    /// The time passed: copies past their deadline time out, then a hedge due is asked for.
    fn timers(&mut self, now: Instant) {
        while self.st.phase == Phase::Racing {
            let late = self
                .st
                .copies
                .iter()
                .find(|c| c.live && c.deadline.is_some_and(|d| now >= d))
                .map(|c| c.n);
            if let Some(n) = late {
                self.push(Queued::Cancel {
                    n,
                    why: Cancelled::TimedOut,
                });
                self.answer(n, Some(ErrorClass::Timeout), now);
                continue;
            }
            if self.st.hedge_due(self.shared).is_some_and(|at| now >= at) {
                self.try_hedge(now);
                continue;
            }
            break;
        }
    }

    /// A hedge is due at `now`: the hedger, the breaker, the limits and the ledger decide.
    fn try_hedge(&mut self, now: Instant) {
        let Some(mut call) = self.st.hedged else {
            return;
        };
        let shared = self.shared;
        let room = self.st.copies.len() < C;
        if !room || shared.hedger(|h| h.decide(&call, now)) != Some(Ok(())) {
            self.st.hedged = None;
            return;
        }
        let mut held = Holdings::default();
        if let Err(stop) = self.pass(self.plan.nesting.inside(), &mut held, now, true, false) {
            self.settle(held, AttemptOutcome::Cancelled, now);
            // (A hedge asks the breaker for an answer at once: it never waits.)
            return match stop {
                Stop::Refused(refusal) => self.no_hedge(refusal),
                Stop::Asked(_) => self.st.hedged = None,
            };
        }
        let drawn = shared
            .hedger(
                |h| match shared.ledger(|l| h.try_hedge_from(&mut call, now, l)) {
                    Some(r) => (true, r.map(Some)),
                    None => (false, h.try_hedge(&mut call, now).map(|()| None)),
                },
            )
            .unwrap_or((false, Err(NoHedge::MaxHedges)));
        let draw = match drawn {
            (ledger, Ok(draw)) => {
                if ledger {
                    self.note(Note::Ledger {
                        kind: Extra::Hedge,
                        granted: true,
                    });
                }
                draw
            }
            (_, Err(NoHedge::Ledger(denied))) => {
                self.note(Note::Ledger {
                    kind: Extra::Hedge,
                    granted: false,
                });
                self.settle(held, AttemptOutcome::Cancelled, now);
                return self.no_hedge(Refusal::Ledger(denied));
            }
            (_, Err(_)) => {
                self.settle(held, AttemptOutcome::Cancelled, now);
                self.st.hedged = None;
                return;
            }
        };
        self.st.hedged = Some(call);
        self.st.attempts = self.st.attempts.saturating_add(1);
        let n = self.st.attempts;
        self.note(Note::Hedge { n });
        held.draw = draw;
        self.send(n, held, now, true);
    }

    fn no_hedge(&mut self, refusal: Refusal) {
        self.st.hedged = None;
        self.note(Note::NoHedge(refusal));
    }
}

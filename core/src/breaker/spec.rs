//! The breaker's rules, in one place: a pure function of (state snapshot, event, policy) →
//! decision, [`step`], that [`CircuitBreaker`](super::CircuitBreaker) and
//! [`SharedBreaker`](super::SharedBreaker) both apply; and its vocabulary: the [`State`]s, the
//! [`Outcome`] of a call, the [`Permit`] for one, its [`Rejection`], the [`Transition`]s.
//!
//! Neither breaker decides anything itself. Each reads its state into a [`View`], asks [`step`]
//! what an event does, and carries the [`Decision`] out: the `&mut` breaker by writing fields, the
//! shared one by compare-and-swap (asking again if another thread changed the state first).
//!
//! # The transition table
//!
//! One `match` over (state, event); a line per arm. `until` is when the open time is up,
//! `in flight` the probes holding a lease, `round` the half-open round's tallies.
//!
//! | state | event | decision |
//! |---|---|---|
//! | closed | acquire, no ramp | admit |
//! | closed | acquire, ramp over | admit, ramp off |
//! | closed | acquire, ramping | admit the ramp's share of calls (error diffusion), shed the rest |
//! | closed | result, ignored | nothing |
//! | closed | result | count it; trip (→ open) if failures in a row or a window rate reach their limit |
//! | open | acquire, open time not over (`now < until`; `now <= until` with `strictly_after`) | reject: open, with `retry_after` to the first instant it is over |
//! | open | acquire, open time over | → half-open, then decide again |
//! | half-open | acquire, the round began `max_wait` ago or more | → open again (a failed round), or → closed with `max_wait_closes`; then decide again |
//! | half-open | acquire, no probe gate | admit as a probe |
//! | half-open | acquire, `in flight = max` or every probe of a `Rate` round issued | reject: half-open full |
//! | half-open | acquire | admit as a probe, with a lease |
//! | half-open | leases expired | count them as failed probes: `Consecutive` → open again (the call is rejected as open); `Rate` → its verdict |
//! | half-open | result, ignored | free the slot; a `Rate` round issues one more probe |
//! | half-open | result, failed or slow, `Consecutive` | → open again (open time grows) |
//! | half-open | result, good, `Consecutive` | count it; `successes` in a row → closed (ramp if slow start) |
//! | half-open | result, `Rate` | count it; once the quorum reported (`calls`, or `min(minimum_calls, calls)` with `decide_at_minimum`): rate limit reached → open again, else → closed |
//! | forced open | acquire | reject: forced open |
//! | disabled | acquire | admit (results only feed the window) |
//! | closed | command: half-open | nothing (a closed breaker has nothing to probe) |
//! | any | command: open until `t`, half-open, close, force open, disable, reset | obey it (→ open until `t`; → half-open, a new round; → closed as the probes close it; → forced open; → disabled; → closed with nothing remembered) |
//! | any | result of an older generation | nothing (the caller checks the permit's generation) |
//! | other | other | nothing |
//!
//! What the table leaves to the breakers is storage: the window's counts, the probe slots and
//! their leases, the generation that makes permits of an earlier state stale, and the time of the
//! latest call (a `now` earlier than it counts as it).

use super::config::{BreakerPolicy, ProbeRule};
use super::window::Counts;
use crate::error::PPM;
use crate::outcome::{AttemptOutcome, ErrorClass};
use crate::sample::splitmix64;
use crate::time::{Duration, Instant};

/// A breaker's state as the rules read it, at one instant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct View {
    /// The stored state (an open breaker whose time is up is still `Open` here).
    pub state: State,
    /// The latest `now` seen.
    pub now: Instant,
    /// Open: when the open time is up.
    pub until: Instant,
    /// Closed: whether a slow-start ramp is on, and its credit (ppm of a call).
    pub ramping: bool,
    /// Closed and ramping: how far into the ramp. Half-open: how long since the round began.
    pub elapsed: Duration,
    pub credit: u32,
    /// Closed: failures in a row.
    pub consecutive: u32,
    /// Half-open: the round's tallies and the probes holding a lease.
    pub round: ProbeRound,
    pub in_flight: u32,
}

/// The tallies of a half-open round: what the rules read to close or re-open it, and what
/// [`Snapshot::probe_round`] shows (all zero outside half-open).
///
/// Under [`ProbeRule::Consecutive`] a round keeps only its `successes` in a row (a failed, slow
/// or expired probe ends the round), so the others read 0. Under [`ProbeRule::Rate`] it keeps all
/// four.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ProbeRound {
    /// Probes that succeeded (slow ones included, under `Rate`).
    pub successes: u32,
    /// Probes that failed, or whose lease expired.
    pub failures: u32,
    /// Probes that were slow, failed or not.
    pub slow: u32,
    /// Probes issued in the round (a probe whose result said nothing gives its place back); 0
    /// without a probe gate (`max_in_flight: None`), where every call is a probe.
    pub issued: u32,
}

impl ProbeRound {
    /// The round as a caller reads it: none outside half-open, only `successes` under
    /// `Consecutive` (the breakers count the rest only where the rules read them).
    #[inline]
    pub(crate) fn readable(self, p: &BreakerPolicy, state: State) -> ProbeRound {
        match (state, p.rule) {
            // Without a probe gate every call is a probe: none is counted as issued.
            (State::HalfOpen, ProbeRule::Rate { .. }) if p.max_in_flight == u32::MAX => {
                ProbeRound { issued: 0, ..self }
            }
            (State::HalfOpen, ProbeRule::Rate { .. }) => self,
            (State::HalfOpen, ProbeRule::Consecutive { .. }) => ProbeRound {
                successes: self.successes,
                ..ProbeRound::default()
            },
            _ => ProbeRound::default(),
        }
    }
}

/// What happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Event {
    /// A call asks to go through.
    Acquire,
    /// `n` probe leases ran out (their slots are freed by the caller).
    Expired(u32),
    /// A permit of the current generation came back. `window` is the window's counts with this
    /// call recorded (the caller records it when [`counts_in_window`] says so; zero where the
    /// counts cannot matter).
    Result {
        outcome: Outcome,
        slow: bool,
        window: Counts,
    },
    /// An operator's command.
    Command(Command),
}

/// What an operator can tell a breaker to do, whatever it would decide itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Command {
    /// Open until this instant, then probe as after a trip.
    OpenUntil(Instant),
    /// Half-open now: the next calls are probes.
    HalfOpen,
    /// Closed, as when the probes close it (window cleared, slow start if configured).
    Close,
    /// Forced open until reset.
    ForceOpen,
    /// Disabled until reset.
    Disable,
    /// Closed with nothing remembered and no slow start.
    Reset,
}

/// Where a decision takes the breaker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Target {
    /// Closed → open: re-opens 0, the first open time.
    Trip,
    /// Half-open → open: one more re-open, a longer open time.
    Reopen,
    /// Open → half-open: a new round.
    HalfOpen,
    /// Half-open → closed: counters cleared, window cleared, slow start if configured.
    Close,
    /// Any → open until the instant of the operator's command, re-opens kept. (The instant stays
    /// with the command, so that a decision stays as small as the hot path wants it.)
    OpenByHand,
    /// Any → forced open, counters kept.
    ForceOpen,
    /// Any → disabled, counters kept.
    Disable,
    /// Any → closed, everything cleared, no slow start.
    Reset,
}

/// What the breaker does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Admit the call, as a probe or not.
    Admit { probe: bool },
    /// Reject the call.
    Reject(RejectReason),
    /// Slow start: keep `credit`; admit the call or shed it.
    Ramp { admit: bool, credit: u32 },
    /// Slow start is over: admit, and stop ramping.
    RampDone,
    /// Change state (and, for an acquire, decide again in the new state).
    Go(Target),
    /// Closed, no state change: failures in a row become this.
    Consecutive(u32),
    /// Half-open, no state change: the round's tallies become these.
    Tally(ProbeRound),
    /// Nothing changes.
    Nothing,
}

/// The rules: what a breaker in `v` does on `event` under `p`. Pure; both breakers call it.
#[inline(always)]
pub(crate) fn step(p: &BreakerPolicy, v: View, event: Event) -> Decision {
    let v = &v;
    use Decision::*;
    use State::*;
    match (v.state, event) {
        // Closed: every call goes through, unless slow start sheds part of them.
        (Closed, Event::Acquire) if !v.ramping => Admit { probe: false },
        (Closed, Event::Acquire) if v.elapsed >= p.ramp => RampDone,
        (Closed, Event::Acquire) => ramp(p, v.credit, v.elapsed),
        // Closed: results count; a trip rule that fires opens it.
        (
            Closed,
            Event::Result {
                outcome: Outcome::Ignored,
                ..
            },
        ) => Nothing,
        (
            Closed,
            Event::Result {
                outcome, window, ..
            },
        ) => closed_result(p, v.consecutive, outcome, window),
        // Open: reject until the open time is up, then probe.
        (Open, Event::Acquire) if !open_over(p, v.now, v.until) => Reject(RejectReason::Open {
            retry_after: open_left(p, v.now, v.until),
        }),
        (Open, Event::Acquire) => Go(Target::HalfOpen),
        // Half-open: a round that outlived its maximum wait ends undecided; then decide again.
        (HalfOpen, Event::Acquire) if max_wait_over(p, v.elapsed) => Go(after_max_wait(p)),
        // Half-open: admit probes up to the gate.
        (HalfOpen, Event::Acquire) if p.max_in_flight == u32::MAX => Admit { probe: true },
        (HalfOpen, Event::Acquire) if probes_full(p, v.in_flight, v.round) => {
            Reject(RejectReason::HalfOpenFull)
        }
        (HalfOpen, Event::Acquire) => Admit { probe: true },
        // Half-open: an expired lease is a failed probe.
        (HalfOpen, Event::Expired(n)) => expired(p, v.round, n),
        // Half-open: results decide.
        (HalfOpen, Event::Result { outcome, slow, .. }) => probe_result(p, v.round, outcome, slow),
        // Manual states: forced open rejects everything, disabled admits everything.
        (ForcedOpen, Event::Acquire) => Reject(RejectReason::ForcedOpen),
        (Disabled, Event::Acquire) => Admit { probe: false },
        // An operator's commands: a closed breaker has nothing to probe; the rest are obeyed.
        (Closed, Event::Command(Command::HalfOpen)) => Nothing,
        (_, Event::Command(command)) => Go(command.target()),
        // Results while open, forced open or disabled, and expiries outside half-open.
        _ => Nothing,
    }
}

impl Command {
    /// Where the command takes the breaker.
    const fn target(self) -> Target {
        match self {
            Command::OpenUntil(_) => Target::OpenByHand,
            Command::HalfOpen => Target::HalfOpen,
            Command::Close => Target::Close,
            Command::ForceOpen => Target::ForceOpen,
            Command::Disable => Target::Disable,
            Command::Reset => Target::Reset,
        }
    }
}

/// The state a caller sees: an open breaker whose time is up reads as half-open, since the next
/// call will be a probe.
#[inline]
pub(crate) fn visible(
    p: &BreakerPolicy,
    state: State,
    now: Instant,
    until: impl FnOnce() -> Instant,
) -> State {
    match state {
        State::Open if open_over(p, now, until()) => State::HalfOpen,
        s => s,
    }
}

/// How long until a breaker in `state` (open until `until`) admits a call, as of `now`: the time
/// left while it is open, `None` otherwise (closed, half-open, forced open, disabled). Pure: the
/// same rule an acquire's rejection reports.
#[inline]
pub(crate) fn retry_after(
    p: &BreakerPolicy,
    state: State,
    now: Instant,
    until: impl FnOnce() -> Instant,
) -> Option<Duration> {
    match state {
        State::Open => {
            let until = until();
            (!open_over(p, now, until)).then(|| open_left(p, now, until))
        }
        _ => None,
    }
}

/// Whether a half-open round that began `elapsed` ago has outlived
/// [`HalfOpenConfig::max_wait`](super::HalfOpenConfig::max_wait).
#[inline]
fn max_wait_over(p: &BreakerPolicy, elapsed: Duration) -> bool {
    p.max_wait != Duration::MAX && elapsed >= p.max_wait
}

/// Where a round that outlived its maximum wait goes: open again, or closed
/// ([`HalfOpenConfig::max_wait_closes`](super::HalfOpenConfig::max_wait_closes)).
#[inline]
fn after_max_wait(p: &BreakerPolicy) -> Target {
    if p.max_wait_closes {
        Target::Close
    } else {
        Target::Reopen
    }
}

/// Whether an open time that ends at `until` is over at `now`: at its end, or only strictly after
/// it ([`OpenConfig::strictly_after`](super::OpenConfig::strictly_after)).
#[inline]
pub(crate) fn open_over(p: &BreakerPolicy, now: Instant, until: Instant) -> bool {
    if p.strictly_after {
        now > until
    } else {
        now >= until
    }
}

/// How long until an open time that ends at `until` is over: to its end, or to the nanosecond
/// after it.
#[inline]
pub(crate) fn open_left(p: &BreakerPolicy, now: Instant, until: Instant) -> Duration {
    let left = until.saturating_duration_since(now);
    if p.strictly_after {
        left.saturating_add(Duration::from_nanos(1))
    } else {
        left
    }
}

/// Whether a result in `state` is recorded in the window: closed and disabled breakers keep
/// metrics of every call that said something.
#[inline(always)]
pub(crate) fn counts_in_window(state: State, outcome: Outcome) -> bool {
    matches!(state, State::Closed | State::Disabled) && outcome != Outcome::Ignored
}

/// Slow start: error diffusion admits the ramp's share of calls.
#[inline]
fn ramp(p: &BreakerPolicy, credit: u32, elapsed: Duration) -> Decision {
    let credit = credit.saturating_add(p.ramp_share(elapsed));
    if credit < PPM {
        Decision::Ramp {
            admit: false,
            credit,
        }
    } else {
        Decision::Ramp {
            admit: true,
            credit: credit - PPM,
        }
    }
}

#[inline(always)]
fn closed_result(
    p: &BreakerPolicy,
    consecutive: u32,
    outcome: Outcome,
    window: Counts,
) -> Decision {
    let consecutive = if outcome == Outcome::Failure {
        consecutive.saturating_add(1)
    } else {
        0
    };
    if p.consecutive_trips(consecutive) || p.window_trips(window) {
        Decision::Go(Target::Trip)
    } else {
        Decision::Consecutive(consecutive)
    }
}

/// Whether a result leaves a breaker exactly as it is, so that the rules need not be asked: a
/// closed breaker with no failures in a row, a call that did not fail, and no failed or slow call
/// in the window (counted with this call, so a slow call that the window keeps is in it).
///
/// Derived from the rules' closed row ([`step`], [`closed_result`]): an ignored result changes
/// nothing; a success sets the failures in a row to 0, which no consecutive limit reaches (a
/// limit is at least 1), and a rate rule fires only on a window holding a failed or slow call
/// ([`BreakerPolicy::rates_trip`]). So the rules answer `Nothing` or `Consecutive(0)`, and the
/// breaker already holds 0. Whether the call was slow is not asked: the closed row reads it only
/// through the window. The tests below check this against `step` over many policies and states,
/// and that each condition is needed.
#[inline(always)]
pub(crate) fn quiet_result(
    state: State,
    consecutive: u32,
    outcome: Outcome,
    window: Counts,
) -> bool {
    // The window first: with a bad call in it, one test decides.
    (window.failures | window.slow) == 0
        && state == State::Closed
        && outcome != Outcome::Failure
        && consecutive == 0
}

/// Whether half-open admits no more probes: every slot in use, or every probe of a `Rate` round
/// issued.
fn probes_full(p: &BreakerPolicy, in_flight: u32, round: ProbeRound) -> bool {
    in_flight >= p.max_in_flight || !round_has_room(p, round)
}

/// Whether the round may issue another probe: a `Rate` round issues exactly `calls`.
pub(crate) fn round_has_room(p: &BreakerPolicy, r: ProbeRound) -> bool {
    !matches!(p.rule, ProbeRule::Rate { calls } if r.issued >= calls)
}

fn expired(p: &BreakerPolicy, round: ProbeRound, n: u32) -> Decision {
    match (n, p.rule) {
        (0, _) => Decision::Nothing,
        (_, ProbeRule::Consecutive { .. }) => Decision::Go(Target::Reopen),
        (_, ProbeRule::Rate { .. }) => verdict(p, tally(p, round, Event::Expired(n))),
    }
}

fn probe_result(p: &BreakerPolicy, round: ProbeRound, outcome: Outcome, slow: bool) -> Decision {
    let event = Event::Result {
        outcome,
        slow,
        window: Counts::default(),
    };
    match (outcome, p.rule) {
        (Outcome::Ignored, _) => verdict(p, tally(p, round, event)),
        // Consecutive: one bad probe re-opens, `successes` good ones in a row close.
        (Outcome::Failure, ProbeRule::Consecutive { .. }) => Decision::Go(Target::Reopen),
        (Outcome::Success, ProbeRule::Consecutive { .. }) if slow => Decision::Go(Target::Reopen),
        (Outcome::Success, ProbeRule::Consecutive { successes }) => {
            let round = tally(p, round, event);
            if round.successes >= successes {
                Decision::Go(Target::Close)
            } else {
                Decision::Tally(round)
            }
        }
        // Rate: count it; the round decides once every probe reported.
        (_, ProbeRule::Rate { .. }) => verdict(p, tally(p, round, event)),
    }
}

/// A half-open round's tallies after `event`. The shared breaker updates its round word with this
/// in a compare-and-swap loop, then asks [`step`] with the tallies it replaced.
pub(crate) fn tally(p: &BreakerPolicy, r: ProbeRound, event: Event) -> ProbeRound {
    let rate = matches!(p.rule, ProbeRule::Rate { .. });
    match event {
        Event::Acquire => ProbeRound {
            issued: r.issued.saturating_add(1),
            ..r
        },
        Event::Expired(n) => ProbeRound {
            failures: r.failures.saturating_add(n),
            ..r
        },
        // The probe said nothing: a `Rate` round issues another in its place.
        Event::Result {
            outcome: Outcome::Ignored,
            ..
        } if rate => ProbeRound {
            issued: r.issued.saturating_sub(1),
            ..r
        },
        Event::Result {
            outcome: Outcome::Ignored,
            ..
        } => r,
        Event::Result {
            outcome: Outcome::Failure,
            slow,
            ..
        } if rate => ProbeRound {
            failures: r.failures.saturating_add(1),
            slow: r.slow.saturating_add(u32::from(slow)),
            ..r
        },
        Event::Result { slow, .. } if rate => ProbeRound {
            successes: r.successes.saturating_add(1),
            slow: r.slow.saturating_add(u32::from(slow)),
            ..r
        },
        Event::Result {
            outcome: Outcome::Success,
            ..
        } => ProbeRound {
            successes: r.successes.saturating_add(1),
            ..r
        },
        Event::Result { .. } | Event::Command(_) => r,
    }
}

/// A `Rate` round's verdict on `round` once its quorum reported (all `calls`, or the minimum with
/// `decide_at_minimum`), or the new tallies while it is undecided.
fn verdict(p: &BreakerPolicy, round: ProbeRound) -> Decision {
    if !matches!(p.rule, ProbeRule::Rate { .. }) {
        return Decision::Tally(round);
    }
    let done = round.successes.saturating_add(round.failures);
    if done < p.quorum {
        return Decision::Tally(round);
    }
    // A round does not split its slow probes: no rule reads the split.
    let counts = Counts {
        calls: u64::from(done),
        failures: u64::from(round.failures),
        slow: u64::from(round.slow),
        slow_failures: 0,
    };
    Decision::Go(if p.rates_trip(counts) {
        Target::Reopen
    } else {
        Target::Close
    })
}

/// The open-time jitter sample of the opening that leaves generation `generation`: one draw per
/// opening, derived from the breaker's seed, so no generator state is kept.
#[inline]
pub(crate) fn jitter_sample(seed: u64, generation: u32) -> u64 {
    splitmix64(seed ^ u64::from(generation).wrapping_mul(0x2545_F491_4F6C_DD1D))
}

impl BreakerPolicy {
    /// Whether a call that started at `started` and ended at `now` counts as slow.
    #[inline]
    pub(crate) fn is_slow(&self, started: Instant, now: Instant) -> bool {
        // Without the slow-call rule the threshold is `Duration::MAX`, which nothing exceeds.
        now.saturating_duration_since(started) > self.slow_threshold
    }

    /// Whether the rate rules fire on `c` (inclusive thresholds, fixed point).
    #[inline]
    pub(crate) fn rates_trip(&self, c: Counts) -> bool {
        let over = |n: u64, ppm: u32| ppm != 0 && n * u64::from(PPM) >= u64::from(ppm) * c.calls;
        // Rates are positive when on, so nothing bad in the window trips nothing: the healthy
        // case skips the arithmetic.
        (c.failures | c.slow) != 0
            && c.calls > 0
            && (over(c.failures, self.failure_ppm) || over(c.slow, self.slow_ppm))
    }

    /// Whether the window's counts trip a closed breaker: once it holds `minimum_calls`, a rate at
    /// or above its limit.
    #[inline(always)]
    pub(crate) fn window_trips(&self, c: Counts) -> bool {
        c.calls >= self.decide_from && self.rates_trip(c)
    }

    /// Whether `consecutive` failures in a row trip the breaker.
    #[inline(always)]
    pub(crate) fn consecutive_trips(&self, consecutive: u32) -> bool {
        u64::from(consecutive) >= self.consecutive_limit
    }

    /// The counts a closed breaker's window rules need, with `calls` in the window: none before
    /// the window holds `minimum_calls` (so an atomic window need not count its bits), and then
    /// only the kinds the rules read.
    #[inline(always)]
    #[cfg(target_has_atomic = "64")]
    pub(crate) fn counts_needed(&self, calls: u64) -> Option<(bool, bool)> {
        (calls >= self.decide_from).then_some((self.failure_ppm != 0, self.slow_ppm != 0))
    }
}

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

/// The state's name, honouring width, fill and alignment (`{:>9}`), so tables line up.
///
/// ```
/// use reliable_core::breaker::State;
/// assert_eq!(format!("[{:>9}]", State::Open), "[     open]");
/// assert_eq!(format!("[{:<9}]", State::HalfOpen), "[half-open]");
/// assert_eq!(format!("[{:-^8}]", State::Closed), "[-closed-]");
/// ```
impl core::fmt::Display for State {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.pad(self.name())
    }
}

/// A breaker's state as of one instant, as plain data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Snapshot {
    /// The state (an open breaker whose time is up reads as half-open).
    pub state: State,
    /// Changes on every state change; permits of an older generation are ignored.
    pub generation: u32,
    /// Failures in a row while closed.
    pub consecutive_failures: u32,
    /// Failed probe rounds since the breaker last closed.
    pub reopens: u32,
    /// Half-open probes in flight (with bounded probes; 0 otherwise).
    pub probes_in_flight: u32,
    /// Outcomes in the window, slow calls split into slow failures and slow successes.
    pub counts: Counts,
    /// The half-open round's tallies so far (all zero outside half-open).
    pub probe_round: ProbeRound,
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
/// `Permit::lease` of a shadow permit: a call shadow mode admits though the rules rejected it.
/// Above every lease number either breaker hands out.
pub(crate) const SHADOW_LEASE: u32 = u32::MAX;

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
    /// A permit of a breaker outside this crate that a face asks through the call engine's
    /// [`Shared`](crate::engine::Shared) seam (a breaker whose state a fleet shares in a store):
    /// the engine only carries it back to
    /// [`Shared::breaker_record`](crate::engine::Shared::breaker_record), and reads
    /// [`is_probe`](Self::is_probe) (a probe draws from the ledger). `token` is the outside
    /// breaker's own, read back as [`generation`](Self::generation).
    ///
    /// Handed to one of this crate's breakers, it is taken as a permit of generation `token`:
    /// give it back only to the breaker that made it.
    pub const fn foreign(token: u32, probe: bool, started: Instant) -> Permit {
        Permit::new(
            token,
            if probe { UNLEASED_PROBE } else { NOT_A_PROBE },
            started,
        )
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
        self.lease != NOT_A_PROBE && self.lease != SHADOW_LEASE
    }
    /// Whether the breaker, in shadow mode, admitted this call though its rules rejected it (a
    /// would-be rejection). Its result is ignored: the live breaker would not have made the call.
    pub fn is_shadow(&self) -> bool {
        self.lease == SHADOW_LEASE
    }
    /// A shadow permit: issued with the generation before `generation`, so that `record` ignores
    /// its result as a late one, with no test of its own.
    #[inline]
    pub(crate) const fn shadow(generation: u32, now: Instant) -> Permit {
        Permit::new(generation.wrapping_sub(1), SHADOW_LEASE, now)
    }
}

/// Why a call was not admitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RejectReason {
    /// The breaker is open; it will admit a probe in `retry_after`.
    Open {
        /// Time left until the breaker turns half-open. Never above the policy's maximum open time
        /// (by more than the 1 ns of [`OpenConfig::strictly_after`](super::OpenConfig::strictly_after))
        /// unless an operator opened it for longer.
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

/// How a breaker answers a call its rules rejected for `reason`: with the rejection, or, in shadow
/// mode, with a shadow permit (an operator's forced open still rejects: it is a command, not the
/// rules' decision). Either way the observer hears of it.
#[cold]
#[inline(never)]
pub(crate) fn refuse<O: super::Observer>(
    p: &BreakerPolicy,
    observer: &O,
    reason: RejectReason,
    generation: u32,
    now: Instant,
) -> Result<Permit, Rejection> {
    let shadow = p.shadow && reason != RejectReason::ForcedOpen;
    observer.on_reject(reason, shadow);
    if shadow {
        Ok(Permit::shadow(generation, now))
    } else {
        Err(Rejection::new(reason))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::breaker::config::{BreakerConfig, SlowCallRule, SlowStartConfig, WindowConfig};
    use crate::sample::splitmix64;

    /// A draw in `0..n` from the generator state `x`.
    fn draw(x: &mut u64, n: u64) -> u64 {
        *x = splitmix64(*x);
        *x % n
    }

    /// Valid policies over every trip rule and both window kinds (an invalid draw is skipped), with
    /// slow start half the time; each with a view of a closed breaker in random other respects.
    fn cases(n: usize) -> impl Iterator<Item = (BreakerPolicy, View)> {
        let mut x = 7u64;
        core::iter::from_fn(move || {
            loop {
                let calls = 1 + draw(&mut x, 128) as u32;
                let rate = |x: &mut u64| (1 + draw(x, 1_000_000)) as f64 / 1e6;
                let config = BreakerConfig {
                    consecutive_failures: (draw(&mut x, 2) == 0)
                        .then(|| 1 + draw(&mut x, 5) as u32),
                    failure_rate: (draw(&mut x, 2) == 0).then(|| rate(&mut x)),
                    slow_calls: (draw(&mut x, 2) == 0).then(|| SlowCallRule {
                        threshold: Duration::from_nanos(draw(&mut x, 1_000)),
                        rate: rate(&mut x),
                    }),
                    minimum_calls: 1 + draw(&mut x, u64::from(calls)) as u32,
                    window: if draw(&mut x, 2) == 0 {
                        WindowConfig::Count { calls }
                    } else {
                        WindowConfig::Time {
                            span: Duration::from_secs(1 + draw(&mut x, 60)),
                            buckets: 1 + draw(&mut x, 10) as u32,
                        }
                    },
                    slow_start: (draw(&mut x, 2) == 0).then(|| SlowStartConfig {
                        ramp: Duration::from_secs(1 + draw(&mut x, 60)),
                        initial: 0.1,
                    }),
                    ..BreakerConfig::new()
                };
                let Ok(policy) = BreakerPolicy::new(config) else {
                    continue;
                };
                let view = View {
                    state: State::Closed,
                    now: Instant::from_nanos(draw(&mut x, u64::MAX)),
                    until: Instant::from_nanos(draw(&mut x, u64::MAX)),
                    ramping: draw(&mut x, 2) == 0,
                    elapsed: Duration::from_nanos(draw(&mut x, 100_000_000_000)),
                    credit: draw(&mut x, 1_000_000) as u32,
                    consecutive: 0,
                    round: ProbeRound::default(),
                    in_flight: 0,
                };
                return Some((policy, view));
            }
        })
        .take(n)
    }

    /// Over random policies, states and results: wherever `quiet_result` holds, the rules leave
    /// the breaker as it is.
    #[test]
    fn the_rules_change_nothing_on_a_quiet_result() {
        let states = [
            State::Closed,
            State::Open,
            State::HalfOpen,
            State::ForcedOpen,
            State::Disabled,
        ];
        let outcomes = [Outcome::Success, Outcome::Failure, Outcome::Ignored];
        let mut x = 11u64;
        let mut quiet = 0;
        for (policy, view) in cases(50_000) {
            let state = states[draw(&mut x, 5) as usize];
            let consecutive = draw(&mut x, 3) as u32;
            let view = View {
                state,
                consecutive,
                ..view
            };
            let outcome = outcomes[draw(&mut x, 3) as usize];
            let calls = draw(&mut x, 200);
            let window = Counts {
                calls,
                failures: draw(&mut x, 2).min(calls),
                slow: draw(&mut x, 2).min(calls),
                slow_failures: 0,
            };
            // Slow or not: a slow call the window keeps shows in its counts.
            let slow = draw(&mut x, 2) == 0;
            if !quiet_result(state, consecutive, outcome, window) {
                continue;
            }
            quiet += 1;
            let event = Event::Result {
                outcome,
                slow,
                window,
            };
            let decision = step(&policy, view, event);
            assert!(
                decision == Decision::Nothing || decision == Decision::Consecutive(consecutive),
                "{policy:?} {view:?} {event:?}: {decision:?}"
            );
        }
        // About 1 in 90: 1/5 closed × 2/3 not failed × 1/3 none in a row × 1/4 nothing bad.
        assert!(quiet > 300, "{quiet} quiet results drawn");
    }

    /// Each condition of a quiet result is needed: without it, the rules change something.
    #[test]
    fn each_condition_of_a_quiet_result_is_needed() {
        let policy = |config: BreakerConfig| {
            BreakerPolicy::new(BreakerConfig {
                minimum_calls: 2,
                ..config
            })
            .unwrap()
        };
        let failures = policy(BreakerConfig {
            failure_rate: Some(0.5),
            ..BreakerConfig::new()
        });
        let slow = policy(BreakerConfig {
            slow_calls: Some(SlowCallRule {
                threshold: Duration::from_millis(1),
                rate: 0.5,
            }),
            ..BreakerConfig::new()
        });
        let consecutive = policy(BreakerConfig {
            consecutive_failures: Some(1),
            ..BreakerConfig::new()
        });
        let (_, view) = cases(1).next().unwrap();
        let closed = View {
            ramping: false,
            ..view
        };
        let counts = |calls, failures, slow| Counts {
            calls,
            failures,
            slow,
            slow_failures: 0,
        };
        use {Decision::*, Outcome::*, Target::*};
        // Policy, state, result, and what the rules answer instead of leaving it as it is.
        let needed = [
            // A failed call in the window: the failure rule trips.
            (&failures, closed, Success, false, counts(2, 1, 0), Go(Trip)),
            // A slow call in the window: the slow-call rule trips.
            (&slow, closed, Success, true, counts(2, 0, 1), Go(Trip)),
            // A failure: a trip with a limit of 1, or one in a row.
            (
                &consecutive,
                closed,
                Failure,
                false,
                counts(0, 0, 0),
                Go(Trip),
            ),
            (
                &failures,
                closed,
                Failure,
                false,
                counts(0, 0, 0),
                Consecutive(1),
            ),
            // Failures in a row before a success: it resets them.
            (
                &failures,
                View {
                    consecutive: 1,
                    ..closed
                },
                Success,
                false,
                counts(0, 0, 0),
                Consecutive(0),
            ),
            // Another state: a half-open probe's success closes the breaker.
            (
                &failures,
                View {
                    state: State::HalfOpen,
                    ..closed
                },
                Success,
                false,
                counts(0, 0, 0),
                Go(Close),
            ),
        ];
        for (policy, view, outcome, slow, window, answer) in needed {
            assert!(!quiet_result(view.state, view.consecutive, outcome, window));
            let event = Event::Result {
                outcome,
                slow,
                window,
            };
            assert_eq!(step(policy, view, event), answer, "{view:?} {event:?}");
        }
    }
}

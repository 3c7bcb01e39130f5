//! Circuit breakers: stop calling a downstream that is failing, and probe carefully before trusting
//! it again.
//!
//! A breaker sits in front of calls to one downstream. While **closed** it lets calls through and
//! watches their outcomes. When a trip rule fires (failures in a row, failure rate or slow-call rate
//! over a window, after a minimum number of calls) it **opens**: calls are rejected at once, with a
//! `retry_after`, so a struggling downstream gets no load from this client and callers do not wait on
//! it. When the open time is up it goes **half-open** and admits a few probes, each a lease that
//! expires after `probe_timeout`; their results close it again or re-open it for a (possibly longer,
//! jittered) open time. Manual controls force it open, disable it (metrics only) or reset it.
//!
//! Every answer carries its reason: [`CircuitBreaker::try_acquire`] returns a [`Permit`] or a
//! [`Rejection`]; state changes come back as [`Transition`] values. Permits carry the breaker's
//! generation, so a result that arrives after the state moved on (a late reply from before the trip)
//! cannot close or re-open it.
//!
//! The rules live in a [`BreakerPolicy`] (validated once, shared by reference); the breaker holds only
//! state, so it is small: `CircuitBreaker<CountWindow<1>, 1>` (64-call window, one probe slot) is
//! 120 bytes on 64-bit targets (`cargo run -p reliable-core --example sizes` prints them all).
//!
//! One breaker shared by many threads is a [`SharedBreaker`] (on targets with 64-bit atomics): the
//! same policy and decisions through `&self`, with its state packed into atomics, lock-free and
//! without `unsafe`; its windows are the [`AtomicWindow`] kinds.
//!
//! ```
//! use reliable_core::breaker::{BreakerConfig, BreakerPolicy, CircuitBreaker, NoWindow, Outcome, RejectReason, State};
//! use reliable_core::{Duration, Instant};
//!
//! // Opens after 2 failures in a row, stays open 20 s, then lets one trial through.
//! let policy = BreakerPolicy::new(BreakerConfig::layered_exercise()).unwrap();
//! let mut breaker = CircuitBreaker::<NoWindow, 1>::new(&policy).unwrap();
//! let t = Instant::from_secs;
//!
//! for now in [15, 20] {
//!     let permit = breaker.try_acquire(t(now)).unwrap();
//!     breaker.record(permit, Outcome::Failure, t(now));
//! }
//! assert_eq!(breaker.state(t(20)), State::Open);
//! let rejection = breaker.try_acquire(t(25)).unwrap_err();
//! assert_eq!(rejection.reason, RejectReason::Open { retry_after: Duration::from_secs(15) });
//!
//! let trial = breaker.try_acquire(t(40)).unwrap(); // half-open: one trial
//! assert!(breaker.try_acquire(t(41)).is_err()); // the only probe slot is taken
//! let closed = breaker.record(trial, Outcome::Success, t(42)).unwrap();
//! assert_eq!((closed.from, closed.to), (State::HalfOpen, State::Closed));
//! ```

#[cfg(target_has_atomic = "64")]
mod atomic_window;
mod config;
mod count_window;
#[cfg(target_has_atomic = "64")]
mod shared;
mod time_window;
mod window;

#[cfg(target_has_atomic = "64")]
pub use atomic_window::{AtomicAnyWindow, AtomicCountWindow, AtomicTimeWindow, AtomicWindow};
pub use config::{
    BreakerConfig, BreakerPolicy, HalfOpenConfig, OpenConfig, ProbeRule, SlowCallRule,
    SlowStartConfig, WindowConfig, WindowSpec,
};
pub use count_window::CountWindow;
#[cfg(target_has_atomic = "64")]
pub use shared::SharedBreaker;
pub use time_window::TimeWindow;
pub use window::{AnyWindow, Counts, NoWindow, Window};

use config::{Verdict, jitter_sample};

use crate::error::{ConfigError, PPM};
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
    /// Opened by hand: rejects everything until [`CircuitBreaker::reset`].
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

/// A state change, returned as a value so callers can log or export it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Transition {
    /// The state before.
    pub from: State,
    /// The state after.
    pub to: State,
    /// When the breaker made the change (the `now` of the call that caused it).
    pub at: Instant,
}

/// How a call admitted by a [`Permit`] ended.
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

/// `Permit::lease` for a call that is not a probe.
const NOT_A_PROBE: u32 = 0;
/// `Permit::lease` for a probe of an ungated half-open state (nothing to lease).
const UNLEASED_PROBE: u32 = 1;
/// The first lease number; lease numbers are unique within a half-open round.
const FIRST_LEASE: u32 = 2;

/// Permission for one call. Hand it back to [`CircuitBreaker::record`] with the outcome.
///
/// A permit is not `Clone`: each admitted call reports once.
#[must_use = "a permit must be handed back to `record`, or a half-open probe slot stays taken until its lease expires"]
#[derive(Debug, PartialEq, Eq)]
pub struct Permit {
    generation: u32,
    lease: u32,
    started: Instant,
    transition: Option<Transition>,
}

impl Permit {
    /// When the call was admitted; the breaker measures latency from here.
    pub fn started(&self) -> Instant {
        self.started
    }
    /// The breaker generation this permit was issued in. When the breaker's
    /// [`generation`](CircuitBreaker::generation) has moved on, the permit's result is ignored.
    pub fn generation(&self) -> u32 {
        self.generation
    }
    /// Whether this call is a half-open probe.
    pub fn is_probe(&self) -> bool {
        self.lease != NOT_A_PROBE
    }
    /// The state change that admitting this call caused (open → half-open), if any.
    pub fn transition(&self) -> Option<Transition> {
        self.transition
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
    /// Half-open and every probe slot is in use (or, with [`ProbeRule::Rate`], every probe of the
    /// round was issued and the breaker waits for their results).
    HalfOpenFull,
    /// Opened by hand.
    ForcedOpen,
    /// Closed, but ramping up after a close, and this call fell outside the admitted share.
    SlowStart,
}

/// A rejected call: why, and the state change that deciding it caused (half-open → open when a
/// probe lease expired), if any.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rejection {
    /// Why.
    pub reason: RejectReason,
    /// The state change this call caused, if any.
    pub transition: Option<Transition>,
}

impl Rejection {
    /// How long until the breaker may admit calls again, when that is known.
    pub fn retry_after(&self) -> Option<Duration> {
        match self.reason {
            RejectReason::Open { retry_after } => Some(retry_after),
            _ => None,
        }
    }
}

/// Half-open probe bookkeeping: lease slots and the round's tallies.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Probes<const P: usize> {
    /// When each slot's lease runs out; meaningful where `lease` is not 0.
    expires: [Instant; P],
    /// The lease number held in each slot, 0 when free. A permit names its lease, so the late answer
    /// of a probe whose lease already expired (and counted as a failure) cannot free a slot that was
    /// leased again since, nor count twice.
    lease: [u32; P],
    next_lease: u32,
    /// Probes issued in this round (for [`ProbeRule::Rate`]).
    issued: u32,
    successes: u32,
    failures: u32,
    slow: u32,
}

impl<const P: usize> Probes<P> {
    const EMPTY: Self = Probes {
        expires: [Instant::ZERO; P],
        lease: [0; P],
        next_lease: FIRST_LEASE,
        issued: 0,
        successes: 0,
        failures: 0,
        slow: 0,
    };
}

/// A circuit breaker: state only, borrowing its [`BreakerPolicy`].
///
/// `W` stores the outcomes the rate rules read ([`NoWindow`], [`CountWindow`], [`TimeWindow`] or
/// [`AnyWindow`]); `P` is the number of half-open probe slots (at most 64). Both are checked against
/// the policy by [`CircuitBreaker::new`]. All methods take `now`; a `now` earlier than the latest seen
/// counts as the latest (no time passed), so a clock that steps back cannot reopen or shorten anything.
#[derive(Clone, Debug)]
pub struct CircuitBreaker<'p, W = CountWindow<1>, const P: usize = 1> {
    policy: &'p BreakerPolicy,
    window: W,
    latest: Instant,
    /// Open: when the open time is up. Closed: when it last closed (slow start). Otherwise unused.
    since: Instant,
    seed: u64,
    generation: u32,
    consecutive: u32,
    reopens: u32,
    /// Slow-start error-diffusion credit, in ppm of one call.
    credit: u32,
    state: State,
    /// Closed and still inside the slow-start ramp that began at `since`.
    ramping: bool,
    probes: Probes<P>,
}

impl<'p, W: Window, const P: usize> CircuitBreaker<'p, W, P> {
    /// A closed breaker for `policy`. Fails if `W` cannot hold the policy's window or `P` slots are
    /// fewer than the policy's probes in flight.
    pub fn new(policy: &'p BreakerPolicy) -> Result<Self, ConfigError> {
        const { assert!(P <= 64, "at most 64 probe slots") };
        let window = policy.build_window(W::new, W::is_recording)?;
        policy.check_probe_slots(P)?;
        Ok(CircuitBreaker {
            policy,
            window,
            latest: Instant::ZERO,
            since: Instant::ZERO,
            seed: 0,
            generation: 0,
            consecutive: 0,
            reopens: 0,
            credit: 0,
            state: State::Closed,
            ramping: false,
            probes: Probes::EMPTY,
        })
    }

    /// Sets the seed of the open-time jitter. Give each breaker its own seed (a client id, a hash of
    /// the downstream's name), or breakers that trip together will also probe together.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// The policy this breaker follows.
    pub fn policy(&self) -> &'p BreakerPolicy {
        self.policy
    }

    /// The state as of `now`: an open breaker whose time is up reports [`State::HalfOpen`], since the
    /// next call will be a probe.
    pub fn state(&self, now: Instant) -> State {
        match self.state {
            State::Open if now.max(self.latest) >= self.since => State::HalfOpen,
            s => s,
        }
    }

    /// Outcomes in the window as of `now` (calls, failures, slow calls).
    pub fn counts(&self, now: Instant) -> Counts {
        self.window.counts(now.max(self.latest))
    }

    /// Failures in a row while closed.
    pub fn consecutive_failures(&self) -> u32 {
        self.consecutive
    }

    /// Failed probe rounds since the breaker last closed (drives the open-time growth).
    pub fn reopens(&self) -> u32 {
        self.reopens
    }

    /// Half-open probes currently in flight (with bounded probes; 0 otherwise).
    pub fn probes_in_flight(&self) -> u32 {
        self.probes.lease.iter().filter(|&&l| l != 0).count() as u32
    }

    /// The generation: it changes on every state change, and permits from an older one are ignored.
    pub fn generation(&self) -> u32 {
        self.generation
    }

    #[inline]
    fn observe(&mut self, now: Instant) -> Instant {
        if now > self.latest {
            self.latest = now;
        }
        self.latest
    }

    fn go(&mut self, to: State, now: Instant) -> Option<Transition> {
        let from = self.state;
        self.state = to;
        self.generation = self.generation.wrapping_add(1);
        self.probes = Probes::EMPTY;
        (from != to).then_some(Transition { from, to, at: now })
    }

    #[inline(never)]
    fn open(&mut self, now: Instant) -> Option<Transition> {
        let sample = jitter_sample(self.seed, self.generation);
        self.since = now + self.policy.open_time(self.reopens, sample);
        self.consecutive = 0;
        self.go(State::Open, now)
    }

    fn reopen(&mut self, now: Instant) -> Option<Transition> {
        self.reopens = self.reopens.saturating_add(1);
        self.open(now)
    }

    fn close(&mut self, now: Instant) -> Option<Transition> {
        self.reopens = 0;
        self.consecutive = 0;
        self.credit = 0;
        self.window.clear();
        self.since = now;
        self.ramping = !self.policy.ramp.is_zero();
        self.go(State::Closed, now)
    }

    fn permit(&self, now: Instant, lease: u32, transition: Option<Transition>) -> Permit {
        Permit {
            generation: self.generation,
            lease,
            started: now,
            transition,
        }
    }

    /// Asks to make one call. On `Ok`, make the call and hand the permit back to [`record`](Self::record).
    #[inline]
    pub fn try_acquire(&mut self, now: Instant) -> Result<Permit, Rejection> {
        let now = self.observe(now);
        // The two answers of a healthy or a failed downstream stay inline; the rest is out of line.
        match self.state {
            State::Closed if !self.ramping => Ok(self.permit(now, NOT_A_PROBE, None)),
            State::Open if now < self.since => Err(Rejection {
                reason: RejectReason::Open {
                    retry_after: self.since.saturating_duration_since(now),
                },
                transition: None,
            }),
            _ => self.acquire_other(now),
        }
    }

    #[inline(never)]
    fn acquire_other(&mut self, now: Instant) -> Result<Permit, Rejection> {
        match self.state {
            State::Closed => self.acquire_closed(now),
            State::Disabled => Ok(self.permit(now, NOT_A_PROBE, None)),
            State::ForcedOpen => Err(Rejection {
                reason: RejectReason::ForcedOpen,
                transition: None,
            }),
            State::Open if now < self.since => Err(Rejection {
                reason: RejectReason::Open {
                    retry_after: self.since.saturating_duration_since(now),
                },
                transition: None,
            }),
            State::Open => {
                let t = self.go(State::HalfOpen, now);
                self.acquire_half_open(now, t)
            }
            State::HalfOpen => self.acquire_half_open(now, None),
        }
    }

    #[inline]
    fn acquire_closed(&mut self, now: Instant) -> Result<Permit, Rejection> {
        if self.ramping {
            let ramp = self.policy.ramp;
            let elapsed = now.saturating_duration_since(self.since);
            if elapsed >= ramp {
                self.ramping = false;
            } else {
                let share = self.policy.ramp_share(elapsed);
                self.credit = self.credit.saturating_add(share);
                if self.credit < PPM {
                    return Err(Rejection {
                        reason: RejectReason::SlowStart,
                        transition: None,
                    });
                }
                self.credit -= PPM;
            }
        }
        Ok(self.permit(now, NOT_A_PROBE, None))
    }

    fn acquire_half_open(
        &mut self,
        now: Instant,
        entered: Option<Transition>,
    ) -> Result<Permit, Rejection> {
        let policy = self.policy;
        if policy.max_in_flight == u32::MAX {
            // No gate: every call is a probe (no lease to expire).
            self.probes.issued = self.probes.issued.saturating_add(1);
            return Ok(self.permit(now, UNLEASED_PROBE, entered));
        }
        // Leases that ran out count as failed probes.
        let mut expired = 0u32;
        for (lease, expires) in self.probes.lease.iter_mut().zip(&self.probes.expires) {
            if *lease != 0 && *expires <= now {
                *lease = 0;
                expired += 1;
            }
        }
        if expired > 0 {
            let verdict = match policy.rule {
                ProbeRule::Consecutive { .. } => Verdict::Reopen,
                ProbeRule::Rate { .. } => {
                    self.probes.failures = self.probes.failures.saturating_add(expired);
                    self.rate_verdict()
                }
            };
            match verdict {
                Verdict::Reopen => {
                    let t = self.reopen(now);
                    return Err(Rejection {
                        reason: RejectReason::Open {
                            retry_after: self.since.saturating_duration_since(now),
                        },
                        transition: t,
                    });
                }
                Verdict::Close => {
                    let t = self.close(now);
                    return match self.acquire_closed(now) {
                        Ok(p) => Ok(Permit { transition: t, ..p }),
                        Err(r) => Err(Rejection { transition: t, ..r }),
                    };
                }
                Verdict::Undecided => {}
            }
        }
        let full = self.probes_in_flight() >= policy.max_in_flight
            || matches!(policy.rule, ProbeRule::Rate { calls } if self.probes.issued >= calls);
        let free = self.probes.lease.iter().position(|&l| l == 0);
        let (false, Some(slot)) = (full, free) else {
            return Err(Rejection {
                reason: RejectReason::HalfOpenFull,
                transition: entered,
            });
        };
        let lease = self.probes.next_lease;
        self.probes.next_lease = lease.checked_add(1).unwrap_or(FIRST_LEASE);
        if let (Some(l), Some(e)) = (
            self.probes.lease.get_mut(slot),
            self.probes.expires.get_mut(slot),
        ) {
            *l = lease;
            *e = now.saturating_add(policy.probe_timeout);
        }
        self.probes.issued = self.probes.issued.saturating_add(1);
        Ok(self.permit(now, lease, entered))
    }

    /// The verdict of a [`ProbeRule::Rate`] round so far.
    fn rate_verdict(&self) -> Verdict {
        self.policy.rate_verdict(
            self.probes.successes,
            self.probes.failures,
            self.probes.slow,
        )
    }

    /// Reports how a permitted call ended. Returns the state change it caused, if any. Results from
    /// permits of an earlier generation are ignored.
    #[inline]
    pub fn record(&mut self, permit: Permit, outcome: Outcome, now: Instant) -> Option<Transition> {
        let now = self.observe(now);
        if permit.generation != self.generation {
            return None;
        }
        let slow = self.policy.is_slow(permit.started, now);
        if self.state == State::Closed {
            if outcome == Outcome::Ignored {
                return None;
            }
            let failure = outcome == Outcome::Failure;
            self.consecutive = if failure {
                self.consecutive.saturating_add(1)
            } else {
                0
            };
            let counts = self.window.record(now, failure, slow);
            return if self.policy.trips(self.consecutive, counts) {
                self.open(now)
            } else {
                None
            };
        }
        self.record_other(permit, outcome, slow, now)
    }

    #[inline(never)]
    fn record_other(
        &mut self,
        permit: Permit,
        outcome: Outcome,
        slow: bool,
        now: Instant,
    ) -> Option<Transition> {
        match self.state {
            State::Disabled => {
                if outcome != Outcome::Ignored {
                    self.window.record(now, outcome == Outcome::Failure, slow);
                }
                None
            }
            State::HalfOpen => self.record_probe(permit, outcome, slow, now),
            State::Closed | State::Open | State::ForcedOpen => None,
        }
    }

    fn record_probe(
        &mut self,
        permit: Permit,
        outcome: Outcome,
        slow: bool,
        now: Instant,
    ) -> Option<Transition> {
        if permit.lease >= FIRST_LEASE {
            match self.probes.lease.iter_mut().find(|l| **l == permit.lease) {
                Some(l) => *l = 0,
                // Its lease expired and already counted as a failed probe.
                None => return None,
            }
        }
        let bad = outcome == Outcome::Failure || slow;
        let verdict = match (outcome, self.policy.rule) {
            (Outcome::Ignored, _) => {
                // The probe said nothing: let another one take its place.
                self.probes.issued = self.probes.issued.saturating_sub(1);
                Verdict::Undecided
            }
            (_, ProbeRule::Consecutive { .. }) if bad => Verdict::Reopen,
            (_, ProbeRule::Consecutive { successes }) => {
                self.probes.successes = self.probes.successes.saturating_add(1);
                if self.probes.successes >= successes {
                    Verdict::Close
                } else {
                    Verdict::Undecided
                }
            }
            (_, ProbeRule::Rate { .. }) => {
                if outcome == Outcome::Failure {
                    self.probes.failures = self.probes.failures.saturating_add(1);
                } else {
                    self.probes.successes = self.probes.successes.saturating_add(1);
                }
                self.probes.slow = self.probes.slow.saturating_add(u32::from(slow));
                self.rate_verdict()
            }
        };
        match verdict {
            Verdict::Undecided => None,
            Verdict::Close => self.close(now),
            Verdict::Reopen => self.reopen(now),
        }
    }

    /// Opens the breaker by hand until [`reset`](Self::reset). Permits already out become stale.
    pub fn force_open(&mut self, now: Instant) -> Option<Transition> {
        let now = self.observe(now);
        self.go(State::ForcedOpen, now)
    }

    /// Switches the breaker off until [`reset`](Self::reset): every call is admitted and outcomes only
    /// feed the window's metrics.
    pub fn disable(&mut self, now: Instant) -> Option<Transition> {
        let now = self.observe(now);
        self.go(State::Disabled, now)
    }

    /// Back to closed with nothing remembered: window, counters and open-time growth cleared, no slow
    /// start. Permits already out become stale.
    pub fn reset(&mut self, now: Instant) -> Option<Transition> {
        let now = self.observe(now);
        self.reopens = 0;
        self.consecutive = 0;
        self.credit = 0;
        self.window.clear();
        // A reset is a deliberate fresh start: no ramp.
        self.ramping = false;
        self.go(State::Closed, now)
    }
}

#[cfg(test)]
mod tests;

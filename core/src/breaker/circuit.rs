//! [`CircuitBreaker`]: the breaker for one owner, through `&mut self`.

use core::borrow::Borrow;

use super::config::{BreakerPolicy, ProbeRule, Verdict, jitter_sample};
use super::count_window::CountWindow;
use super::observer::Observer;
use super::spec::{
    FIRST_LEASE, NOT_A_PROBE, Outcome, Permit, RejectReason, Rejection, State, Transition,
    UNLEASED_PROBE,
};
use super::window::{Counts, Window};
use crate::error::{ConfigError, PPM};
use crate::sample::instance_seed;
use crate::time::Instant;

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

/// A circuit breaker for one owner (`&mut self`): its state, its policy and its observer.
///
/// - `R` holds the [`BreakerPolicy`]: the policy itself (the default: the breaker owns it and is
///   `'static`), a `&BreakerPolicy` (many breakers share one, as in a registry on a
///   microcontroller; the breaker is then 120 bytes with the default window), or any other
///   `Borrow<BreakerPolicy>` such as an `Arc`.
/// - `W` stores the outcomes the rate rules read ([`NoWindow`](super::NoWindow),
///   [`CountWindow`] with its capacity in calls, [`TimeWindow`](super::TimeWindow) or
///   [`AnyWindow`](super::AnyWindow)); the default holds 64 calls.
/// - `P` is the number of half-open probe slots (at most 64; checked at build time).
/// - `O` receives the [`Transition`]s (see [`Observer`]); the default, `()`, ignores them.
///
/// [`CircuitBreaker::new`] takes the default window and probe slots;
/// [`CircuitBreaker::with_storage`] any others. Both check the storage against the policy. All
/// methods take `now`; a `now` earlier than the latest seen counts as the latest (no time passed),
/// so a clock that steps back cannot reopen or shorten anything.
///
/// ```
/// use reliable_core::breaker::{BreakerConfig, BreakerPolicy, CircuitBreaker, CountWindow};
///
/// let policy = BreakerPolicy::new(BreakerConfig::resilience4j())?;
/// // A 100-call window and 10 probe slots, sharing the policy by reference.
/// let b = CircuitBreaker::<_, CountWindow<100, 2>, 10>::with_storage(&policy)?;
/// // Owning the policy: 'static, so it can live in a struct, a static or another thread.
/// let owned = CircuitBreaker::<_, CountWindow<100, 2>, 10>::with_storage(policy)?;
/// std::thread::spawn(move || drop(owned)).join().unwrap();
/// # Ok::<(), reliable_core::ConfigError>(())
/// ```
#[derive(Clone, Debug)]
pub struct CircuitBreaker<R = BreakerPolicy, W = CountWindow<64>, const P: usize = 1, O = ()> {
    policy: R,
    observer: O,
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

impl<R: Borrow<BreakerPolicy>> CircuitBreaker<R> {
    /// A closed breaker for `policy` with the default storage: a 64-call window and one probe
    /// slot. Fails if the policy asks for more (use [`with_storage`](Self::with_storage)).
    ///
    /// Its open-time jitter gets a seed of its own ([`instance_seed`]); set one with
    /// [`with_seed`](Self::with_seed) for reproducible runs.
    pub fn new(policy: R) -> Result<Self, ConfigError> {
        Self::with_storage(policy)
    }
}

impl<R: Borrow<BreakerPolicy>, W: Window, const P: usize, O: Observer + Default>
    CircuitBreaker<R, W, P, O>
{
    /// A closed breaker for `policy` with window `W` and `P` probe slots, named in the type
    /// (`CircuitBreaker::<_, CountWindow<100, 2>, 10>::with_storage(&policy)`). Fails if `W`
    /// cannot hold the policy's window or `P` slots are fewer than the policy's probes in flight.
    pub fn with_storage(policy: R) -> Result<Self, ConfigError> {
        const { assert!(P <= 64, "at most 64 probe slots") };
        let rules = policy.borrow();
        let window = rules.build_window(W::new, W::is_recording)?;
        rules.check_probe_slots(P)?;
        Ok(CircuitBreaker {
            policy,
            observer: O::default(),
            window,
            latest: Instant::ZERO,
            since: Instant::ZERO,
            seed: instance_seed(),
            generation: 0,
            consecutive: 0,
            reopens: 0,
            credit: 0,
            state: State::Closed,
            ramping: false,
            probes: Probes::EMPTY,
        })
    }
}

impl<R: Borrow<BreakerPolicy>, W: Window, const P: usize, O: Observer> CircuitBreaker<R, W, P, O> {
    /// The same breaker, reporting its transitions to `observer` (see [`Observer`]).
    pub fn observe<O2: Observer>(self, observer: O2) -> CircuitBreaker<R, W, P, O2> {
        CircuitBreaker {
            policy: self.policy,
            observer,
            window: self.window,
            latest: self.latest,
            since: self.since,
            seed: self.seed,
            generation: self.generation,
            consecutive: self.consecutive,
            reopens: self.reopens,
            credit: self.credit,
            state: self.state,
            ramping: self.ramping,
            probes: self.probes,
        }
    }

    /// Sets the seed of the open-time jitter. Each breaker gets a seed of its own by default, so
    /// breakers built the same way do not re-open in lockstep; a seed set here makes runs
    /// reproducible. Give each breaker its own (a client id, a hash of the downstream's name).
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// The seed of the open-time jitter.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The policy this breaker follows.
    #[inline]
    pub fn policy(&self) -> &BreakerPolicy {
        self.policy.borrow()
    }

    /// The observer its transitions go to.
    pub fn observer(&self) -> &O {
        &self.observer
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
    fn observe_now(&mut self, now: Instant) -> Instant {
        if now > self.latest {
            self.latest = now;
        }
        self.latest
    }

    /// Every state change goes through here, and so does every report of one.
    fn go(&mut self, to: State, now: Instant) {
        let from = self.state;
        self.state = to;
        self.generation = self.generation.wrapping_add(1);
        self.probes = Probes::EMPTY;
        if from != to {
            self.observer
                .on_transition(Transition { from, to, at: now });
        }
    }

    #[inline(never)]
    fn open(&mut self, now: Instant) {
        let sample = jitter_sample(self.seed, self.generation);
        self.since = now + self.policy.borrow().open_time(self.reopens, sample);
        self.consecutive = 0;
        self.go(State::Open, now)
    }

    fn reopen(&mut self, now: Instant) {
        self.reopens = self.reopens.saturating_add(1);
        self.open(now)
    }

    fn close(&mut self, now: Instant) {
        self.reopens = 0;
        self.consecutive = 0;
        self.credit = 0;
        self.window.clear();
        self.since = now;
        self.ramping = !self.policy.borrow().ramp.is_zero();
        self.go(State::Closed, now)
    }

    #[inline]
    fn permit(&self, now: Instant, lease: u32) -> Permit {
        Permit::new(self.generation, lease, now)
    }

    #[inline]
    fn open_rejection(&self, now: Instant) -> Rejection {
        Rejection::new(RejectReason::Open {
            retry_after: self.since.saturating_duration_since(now),
        })
    }

    /// Asks to make one call. On `Ok`, make the call and hand the permit back to [`record`](Self::record).
    #[inline]
    pub fn try_acquire(&mut self, now: Instant) -> Result<Permit, Rejection> {
        let now = self.observe_now(now);
        // The two answers of a healthy or a failed downstream stay inline; the rest is out of line.
        match self.state {
            State::Closed if !self.ramping => Ok(self.permit(now, NOT_A_PROBE)),
            State::Open if now < self.since => Err(self.open_rejection(now)),
            _ => self.acquire_other(now),
        }
    }

    #[inline(never)]
    fn acquire_other(&mut self, now: Instant) -> Result<Permit, Rejection> {
        match self.state {
            State::Closed => self.acquire_closed(now),
            State::Disabled => Ok(self.permit(now, NOT_A_PROBE)),
            State::ForcedOpen => Err(Rejection::new(RejectReason::ForcedOpen)),
            State::Open if now < self.since => Err(self.open_rejection(now)),
            State::Open => {
                self.go(State::HalfOpen, now);
                self.acquire_half_open(now)
            }
            State::HalfOpen => self.acquire_half_open(now),
        }
    }

    #[inline]
    fn acquire_closed(&mut self, now: Instant) -> Result<Permit, Rejection> {
        if self.ramping {
            let policy = self.policy.borrow();
            let elapsed = now.saturating_duration_since(self.since);
            if elapsed >= policy.ramp {
                self.ramping = false;
            } else {
                let share = policy.ramp_share(elapsed);
                self.credit = self.credit.saturating_add(share);
                if self.credit < PPM {
                    return Err(Rejection::new(RejectReason::SlowStart));
                }
                self.credit -= PPM;
            }
        }
        Ok(self.permit(now, NOT_A_PROBE))
    }

    fn acquire_half_open(&mut self, now: Instant) -> Result<Permit, Rejection> {
        let policy = self.policy.borrow();
        let (max_in_flight, rule, probe_timeout) =
            (policy.max_in_flight, policy.rule, policy.probe_timeout);
        if max_in_flight == u32::MAX {
            // No gate: every call is a probe (no lease to expire).
            self.probes.issued = self.probes.issued.saturating_add(1);
            return Ok(self.permit(now, UNLEASED_PROBE));
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
            let verdict = match rule {
                ProbeRule::Consecutive { .. } => Verdict::Reopen,
                ProbeRule::Rate { .. } => {
                    self.probes.failures = self.probes.failures.saturating_add(expired);
                    self.rate_verdict()
                }
            };
            match verdict {
                Verdict::Reopen => {
                    self.reopen(now);
                    return Err(self.open_rejection(now));
                }
                Verdict::Close => {
                    self.close(now);
                    return self.acquire_closed(now);
                }
                Verdict::Undecided => {}
            }
        }
        let full = self.probes_in_flight() >= max_in_flight
            || matches!(rule, ProbeRule::Rate { calls } if self.probes.issued >= calls);
        let free = self.probes.lease.iter().position(|&l| l == 0);
        let (false, Some(slot)) = (full, free) else {
            return Err(Rejection::new(RejectReason::HalfOpenFull));
        };
        let lease = self.probes.next_lease;
        self.probes.next_lease = lease.checked_add(1).unwrap_or(FIRST_LEASE);
        if let (Some(l), Some(e)) = (
            self.probes.lease.get_mut(slot),
            self.probes.expires.get_mut(slot),
        ) {
            *l = lease;
            *e = now.saturating_add(probe_timeout);
        }
        self.probes.issued = self.probes.issued.saturating_add(1);
        Ok(self.permit(now, lease))
    }

    /// The verdict of a [`ProbeRule::Rate`] round so far.
    fn rate_verdict(&self) -> Verdict {
        self.policy.borrow().rate_verdict(
            self.probes.successes,
            self.probes.failures,
            self.probes.slow,
        )
    }

    /// Reports how a permitted call ended. A state change it causes goes to the observer. Results
    /// from permits of an earlier generation are ignored.
    #[inline]
    pub fn record(&mut self, permit: Permit, outcome: Outcome, now: Instant) {
        let now = self.observe_now(now);
        if permit.generation != self.generation {
            return;
        }
        let policy = self.policy.borrow();
        let slow = policy.is_slow(permit.started, now);
        if self.state == State::Closed {
            if outcome == Outcome::Ignored {
                return;
            }
            let failure = outcome == Outcome::Failure;
            self.consecutive = if failure {
                self.consecutive.saturating_add(1)
            } else {
                0
            };
            let counts = self.window.record(now, failure, slow);
            if policy.trips(self.consecutive, counts) {
                self.open(now);
            }
            return;
        }
        self.record_other(permit, outcome, slow, now)
    }

    #[inline(never)]
    fn record_other(&mut self, permit: Permit, outcome: Outcome, slow: bool, now: Instant) {
        match self.state {
            State::Disabled if outcome != Outcome::Ignored => {
                self.window.record(now, outcome == Outcome::Failure, slow);
            }
            State::Disabled => {}
            State::HalfOpen => self.record_probe(permit, outcome, slow, now),
            State::Closed | State::Open | State::ForcedOpen => {}
        }
    }

    fn record_probe(&mut self, permit: Permit, outcome: Outcome, slow: bool, now: Instant) {
        if permit.lease >= FIRST_LEASE {
            match self.probes.lease.iter_mut().find(|l| **l == permit.lease) {
                Some(l) => *l = 0,
                // Its lease expired and already counted as a failed probe.
                None => return,
            }
        }
        let bad = outcome == Outcome::Failure || slow;
        let verdict = match (outcome, self.policy.borrow().rule) {
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
            Verdict::Undecided => {}
            Verdict::Close => self.close(now),
            Verdict::Reopen => self.reopen(now),
        }
    }

    /// Opens the breaker by hand until [`reset`](Self::reset). Permits already out become stale.
    pub fn force_open(&mut self, now: Instant) {
        let now = self.observe_now(now);
        self.go(State::ForcedOpen, now)
    }

    /// Switches the breaker off until [`reset`](Self::reset): every call is admitted and outcomes only
    /// feed the window's metrics.
    pub fn disable(&mut self, now: Instant) {
        let now = self.observe_now(now);
        self.go(State::Disabled, now)
    }

    /// Back to closed with nothing remembered: window, counters and open-time growth cleared, no
    /// slow start. Permits already out become stale.
    pub fn reset(&mut self, now: Instant) {
        let now = self.observe_now(now);
        self.reopens = 0;
        self.consecutive = 0;
        self.credit = 0;
        self.window.clear();
        // A reset is a deliberate fresh start: no ramp.
        self.ramping = false;
        self.go(State::Closed, now)
    }
}

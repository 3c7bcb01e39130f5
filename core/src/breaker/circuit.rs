//! [`CircuitBreaker`]: the breaker for one owner, through `&mut self`.

use core::borrow::Borrow;

use super::config::BreakerPolicy;
use super::count_window::CountWindow;
use super::observer::Observer;
use super::spec::{
    Command, Decision, Event, FIRST_LEASE, NOT_A_PROBE, Outcome, Permit, ProbeRound, RejectReason,
    Rejection, SHADOW_LEASE, State, Target, Transition, UNLEASED_PROBE, View, counts_in_window,
    jitter_sample, open_left, quiet_result, refuse, retry_after, step, tally, visible,
};
use super::window::{Counts, Window};
use crate::error::ConfigError;
use crate::sample::instance_seed;
use crate::time::{Duration, Instant};

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
    /// The round's tallies.
    round: ProbeRound,
}

impl<const P: usize> Probes<P> {
    const EMPTY: Self = Probes {
        expires: [Instant::ZERO; P],
        lease: [0; P],
        next_lease: FIRST_LEASE,
        round: ProbeRound {
            successes: 0,
            failures: 0,
            slow: 0,
            issued: 0,
        },
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
    /// Open: when the open time is up. Half-open: when the round began. Closed: when it last
    /// closed (slow start). Otherwise unused.
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
    /// A breaker for `policy` (closed, unless its `initial_state` says otherwise) with the default storage: a 64-call window and one probe
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
    /// A breaker for `policy` (in its [initial state](super::BreakerConfig::initial_state),
    /// closed by default) with window `W` and `P` probe slots, named in the type
    /// (`CircuitBreaker::<_, CountWindow<100, 2>, 10>::with_storage(&policy)`). Fails if `W`
    /// cannot hold the policy's window or `P` slots are fewer than the policy's probes in flight.
    pub fn with_storage(policy: R) -> Result<Self, ConfigError> {
        const { assert!(P <= 64, "at most 64 probe slots") };
        let rules = policy.borrow();
        let window = rules.build_window(W::new, W::is_recording)?;
        rules.check_probe_slots(P)?;
        let state = rules.initial_state;
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
            state,
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
        visible(
            self.policy.borrow(),
            self.state,
            now.max(self.latest),
            || self.since,
        )
    }

    /// The stored state: an open breaker whose time is up is still open (for the model checks).
    #[cfg(all(test, loom))]
    pub(crate) fn stored_state(&self) -> State {
        self.state
    }

    /// While the breaker is open at `now`, how long until it admits a probe; `None` otherwise.
    /// Changes nothing (an acquire at `now` would be rejected with this `retry_after`).
    pub fn retry_after(&self, now: Instant) -> Option<Duration> {
        retry_after(
            self.policy.borrow(),
            self.state,
            now.max(self.latest),
            || self.since,
        )
    }

    /// A permit if the breaker is closed and not in a slow-start ramp, judged without the time;
    /// `None` otherwise, having changed nothing. The permit is stamped with the latest time the
    /// breaker has seen (see [`SharedBreaker::try_acquire_closed`](super::SharedBreaker::try_acquire_closed)).
    #[inline(always)]
    pub fn try_acquire_closed(&mut self) -> Option<Permit> {
        (self.state == State::Closed && !self.ramping)
            .then(|| Permit::new(self.generation, NOT_A_PROBE, self.latest))
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

    /// The half-open round's tallies so far (all zero outside half-open; see [`ProbeRound`]).
    pub fn probe_round(&self) -> ProbeRound {
        self.probes.round.readable(self.policy.borrow(), self.state)
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

    /// What the rules read, as of `now` (the latest time seen). Only an acquire in half-open reads
    /// the probes in flight; other calls pass 0 rather than count them.
    #[inline(always)]
    fn view(&self, now: Instant, in_flight: u32) -> View {
        View {
            state: self.state,
            now,
            until: self.since,
            ramping: self.ramping,
            elapsed: if self.ramping || self.state == State::HalfOpen {
                now.saturating_duration_since(self.since)
            } else {
                Duration::ZERO
            },
            credit: self.credit,
            consecutive: self.consecutive,
            round: self.probes.round,
            in_flight,
        }
    }

    /// Carries out a change of state the rules decided.
    #[inline(never)]
    fn go_to(&mut self, target: Target, now: Instant) {
        match target {
            Target::Trip => self.open(now),
            Target::Reopen => {
                self.reopens = self.reopens.saturating_add(1);
                self.open(now)
            }
            Target::HalfOpen => {
                // From forced open or disabled, failures in a row are no longer kept.
                self.consecutive = 0;
                // When the round began (the open time, kept here while open, is over).
                self.since = now;
                self.go(State::HalfOpen, now)
            }
            Target::Close => {
                self.reopens = 0;
                self.consecutive = 0;
                self.credit = 0;
                self.window.clear();
                self.since = now;
                self.ramping = !self.policy.borrow().ramp.is_zero();
                self.go(State::Closed, now)
            }
            // The caller has set `since` to the command's instant.
            Target::OpenByHand => {
                self.consecutive = 0;
                self.go(State::Open, now)
            }
            Target::ForceOpen => self.go(State::ForcedOpen, now),
            Target::Disable => self.go(State::Disabled, now),
            Target::Reset => {
                self.reopens = 0;
                self.consecutive = 0;
                self.credit = 0;
                self.window.clear();
                // A reset is a deliberate fresh start: no ramp.
                self.ramping = false;
                self.go(State::Closed, now)
            }
        }
    }

    fn open(&mut self, now: Instant) {
        let sample = jitter_sample(self.seed, self.generation);
        self.since = now + self.policy.borrow().open_time(self.reopens, sample);
        self.consecutive = 0;
        self.go(State::Open, now)
    }

    #[inline]
    fn permit(&self, now: Instant, lease: u32) -> Permit {
        Permit::new(self.generation, lease, now)
    }

    /// Asks to make one call. On `Ok`, make the call and hand the permit back to [`record`](Self::record).
    #[inline(always)]
    pub fn try_acquire(&mut self, now: Instant) -> Result<Permit, Rejection> {
        let now = self.observe_now(now);
        // A healthy downstream's answer stays inline; the rest is out of line (rejections, which
        // the observer hears and shadow mode turns into permits; half-open, which first frees
        // expired leases and counts the probes in flight; slow start).
        match step(self.policy.borrow(), self.view(now, 0), Event::Acquire) {
            Decision::Admit { probe: false } => Ok(self.permit(now, NOT_A_PROBE)),
            _ => self.acquire_other(now),
        }
    }

    /// A call the rules rejected: its rejection, or, in shadow mode, a shadow permit.
    fn refuse(&self, reason: RejectReason, now: Instant) -> Result<Permit, Rejection> {
        refuse(
            self.policy.borrow(),
            &self.observer,
            reason,
            self.generation,
            now,
        )
    }

    /// The rest of the table: expired leases, probes, slow start, state changes.
    #[inline(never)]
    fn acquire_other(&mut self, now: Instant) -> Result<Permit, Rejection> {
        match self.decide_other(now) {
            Err(r) => self.refuse(r.reason, now),
            admitted => admitted,
        }
    }

    fn decide_other(&mut self, now: Instant) -> Result<Permit, Rejection> {
        // A decision changes the state at most twice (open → half-open, expiry → closed or open)
        // before it answers; the bound only keeps the loop finite by construction.
        for _ in 0..4 {
            let mut decision = Decision::Nothing;
            if self.state == State::HalfOpen {
                let expired = self.expire_leases(now);
                if expired > 0 {
                    decision = step(
                        self.policy.borrow(),
                        self.view(now, 0),
                        Event::Expired(expired),
                    );
                }
            }
            if decision == Decision::Nothing {
                let in_flight = self.probes_in_flight();
                decision = step(
                    self.policy.borrow(),
                    self.view(now, in_flight),
                    Event::Acquire,
                );
            }
            match decision {
                Decision::Admit { probe: false } => return Ok(self.permit(now, NOT_A_PROBE)),
                Decision::Admit { probe: true } => return Ok(self.lease(now)),
                Decision::Reject(reason) => return Err(Rejection::new(reason)),
                Decision::Ramp { admit, credit } => {
                    self.credit = credit;
                    return if admit {
                        Ok(self.permit(now, NOT_A_PROBE))
                    } else {
                        Err(Rejection::new(RejectReason::SlowStart))
                    };
                }
                Decision::RampDone => {
                    self.ramping = false;
                    return Ok(self.permit(now, NOT_A_PROBE));
                }
                Decision::Go(target) => {
                    self.go_to(target, now);
                    if target == Target::Reopen {
                        // The call whose expired probes re-opened it is rejected as open.
                        return Err(Rejection::new(RejectReason::Open {
                            retry_after: open_left(self.policy.borrow(), now, self.since),
                        }));
                    }
                }
                Decision::Tally(round) => self.probes.round = round,
                Decision::Consecutive(consecutive) => self.consecutive = consecutive,
                Decision::Nothing => {}
            }
        }
        Err(Rejection::new(RejectReason::HalfOpenFull))
    }

    /// Frees the leases that ran out by `now`; returns how many.
    fn expire_leases(&mut self, now: Instant) -> u32 {
        let mut expired = 0u32;
        for (lease, expires) in self.probes.lease.iter_mut().zip(&self.probes.expires) {
            if *lease != 0 && *expires <= now {
                *lease = 0;
                expired += 1;
            }
        }
        expired
    }

    /// A probe permit: with a lease in a free slot when probes are gated.
    fn lease(&mut self, now: Instant) -> Permit {
        let policy = self.policy.borrow();
        self.probes.round = tally(policy, self.probes.round, Event::Acquire);
        if policy.max_in_flight == u32::MAX {
            // No gate: nothing to lease.
            return self.permit(now, UNLEASED_PROBE);
        }
        let timeout = policy.probe_timeout;
        let lease = self.probes.next_lease;
        // Lease numbers stop short of the shadow permit's.
        self.probes.next_lease = match lease.checked_add(1) {
            Some(next) if next < SHADOW_LEASE => next,
            _ => FIRST_LEASE,
        };
        // The rules admitted a probe only with a slot free (in flight < max_in_flight <= P).
        if let Some(slot) = self.probes.lease.iter().position(|&l| l == 0)
            && let (Some(l), Some(e)) = (
                self.probes.lease.get_mut(slot),
                self.probes.expires.get_mut(slot),
            )
        {
            *l = lease;
            *e = now.saturating_add(timeout);
        }
        self.permit(now, lease)
    }

    /// Reports how a permitted call ended. A state change it causes goes to the observer. Results
    /// from permits of an earlier generation are ignored.
    #[inline(always)]
    pub fn record(&mut self, permit: Permit, outcome: Outcome, now: Instant) {
        let now = self.observe_now(now);
        if permit.generation != self.generation {
            return;
        }
        // A closed breaker's results stay inline (they are most results); the rest is out of line.
        // Both ask the same rules. The state is passed as a constant where it is known, so the
        // rules' dispatch on it folds away.
        if self.state == State::Closed {
            self.record_result(State::Closed, &permit, outcome, now);
        } else {
            self.record_other(&permit, outcome, now);
        }
    }

    /// Reports how a permitted call ended, with the latency the caller measured itself (from its
    /// own clock, or one the call reported) rather than from the permit to `now`: the slow-call
    /// rule judges `latency`. Otherwise as [`record`](Self::record).
    pub fn record_latency(
        &mut self,
        permit: Permit,
        outcome: Outcome,
        latency: Duration,
        now: Instant,
    ) {
        let now = self.observe_now(now);
        let started = now.saturating_sub(latency);
        self.record(Permit { started, ..permit }, outcome, now)
    }

    #[inline(never)]
    fn record_other(&mut self, permit: &Permit, outcome: Outcome, now: Instant) {
        if self.state == State::HalfOpen && !self.release(permit) {
            // Its lease expired and already counted as a failed probe.
            return;
        }
        self.record_result(self.state, permit, outcome, now);
    }

    /// A result in `state`, which is `self.state`.
    #[inline(always)]
    fn record_result(&mut self, state: State, permit: &Permit, outcome: Outcome, now: Instant) {
        let policy = self.policy.borrow();
        let slow = policy.is_slow(permit.started, now);
        let window = if counts_in_window(state, outcome) {
            self.window.record(now, outcome == Outcome::Failure, slow)
        } else {
            Counts::default()
        };
        // A healthy downstream's result: the rules would keep every field as it is.
        if quiet_result(state, self.consecutive, outcome, window) {
            return;
        }
        let event = Event::Result {
            outcome,
            slow,
            window,
        };
        let view = View {
            state,
            ..self.view(now, 0)
        };
        match step(policy, view, event) {
            Decision::Consecutive(consecutive) => self.consecutive = consecutive,
            Decision::Tally(round) => self.probes.round = round,
            Decision::Go(target) => self.go_to(target, now),
            _ => {}
        }
    }

    /// Frees the slot of a probe's lease; false if the lease already expired.
    fn release(&mut self, permit: &Permit) -> bool {
        if permit.lease < FIRST_LEASE {
            return true;
        }
        match self.probes.lease.iter_mut().find(|l| **l == permit.lease) {
            Some(l) => {
                *l = 0;
                true
            }
            None => false,
        }
    }

    /// Carries out an operator's command as the rules decide it; false if they refuse it (a
    /// closed breaker told to go half-open).
    fn command(&mut self, command: Command, now: Instant) -> bool {
        let now = self.observe_now(now);
        match step(
            self.policy.borrow(),
            self.view(now, 0),
            Event::Command(command),
        ) {
            Decision::Go(target) => {
                if let Command::OpenUntil(until) = command {
                    self.since = until;
                }
                self.go_to(target, now);
                true
            }
            _ => false,
        }
    }

    /// Opens the breaker by hand until `until`; then it probes as after a trip. Permits already
    /// out become stale.
    pub fn open_until(&mut self, until: Instant, now: Instant) {
        self.command(Command::OpenUntil(until), now);
    }

    /// Opens the breaker by hand for `duration` from `now` (see [`open_until`](Self::open_until)).
    pub fn open_for(&mut self, duration: Duration, now: Instant) {
        let now = self.observe_now(now);
        self.open_until(now.saturating_add(duration), now)
    }

    /// Half-open now, with a fresh probe round, from any state but closed; false (nothing changed)
    /// if the breaker is closed, which has nothing to probe.
    pub fn half_open(&mut self, now: Instant) -> bool {
        self.command(Command::HalfOpen, now)
    }

    /// Closes the breaker by hand, as probes that succeeded would: window and counters cleared,
    /// slow start if configured. Permits already out become stale.
    pub fn close(&mut self, now: Instant) {
        self.command(Command::Close, now);
    }

    /// Opens the breaker by hand until [`reset`](Self::reset). Permits already out become stale.
    pub fn force_open(&mut self, now: Instant) {
        self.command(Command::ForceOpen, now);
    }

    /// Switches the breaker off until [`reset`](Self::reset): every call is admitted and outcomes only
    /// feed the window's metrics.
    pub fn disable(&mut self, now: Instant) {
        self.command(Command::Disable, now);
    }

    /// Back to closed with nothing remembered: window, counters and open-time growth cleared, no
    /// slow start. Permits already out become stale.
    pub fn reset(&mut self, now: Instant) {
        self.command(Command::Reset, now);
    }
}

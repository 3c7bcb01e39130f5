//! [`State`]: what the calls of one [`Reliable`](crate::Reliable) share (a breaker, a retry
//! budget, the random draws, and any other layer through [`Extra`]), in `static`-friendly form:
//! each part behind its own `critical_section::Mutex`, held only while the core's call engine
//! decides (never across an `.await`).

use core::cell::{Cell, RefCell};

use critical_section::Mutex;
use reliable_core::breaker::{Breaker, Outcome, Permit, Rejection, State as BreakerState};
use reliable_core::budget::Budget;
use reliable_core::engine::{Note, SampleFor, Shared};
use reliable_core::hedge::Hedger;
use reliable_core::ledger::ExtraLedger;
use reliable_core::limit::{Limiter, RateLimiter};
use reliable_core::sample::splitmix64;
use reliable_core::throttle::AdaptiveThrottle;
use reliable_core::{Duration, Instant};

/// One part of the state (a breaker, a budget, a throttle...) behind a critical section: held
/// only while a closure runs, which never waits. A closure that reached the same part again (an
/// observer of the breaker calling back into its own [`Reliable`](crate::Reliable)) finds it
/// busy: the step goes on without it, never a panic.
pub struct Part<T>(Mutex<RefCell<T>>);

impl<T> core::fmt::Debug for Part<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("Part")
    }
}

impl<T> Part<T> {
    /// `value`, behind its lock.
    pub const fn new(value: T) -> Self {
        Part(Mutex::new(RefCell::new(value)))
    }

    /// Runs `f` on the value; `None` if it is busy.
    pub fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> Option<R> {
        critical_section::with(|cs| {
            self.0
                .borrow(cs)
                .try_borrow_mut()
                .ok()
                .map(|mut v| f(&mut v))
        })
    }
}

impl<T: Budget> Part<T> {
    /// Runs `f` on the budget, or gives `f` back if it is busy.
    fn try_budget<R, F: FnOnce(&mut dyn Budget) -> R>(&self, f: F) -> Result<R, F> {
        critical_section::with(|cs| match self.0.borrow(cs).try_borrow_mut() {
            Ok(mut v) => Ok(f(&mut *v)),
            Err(_) => Err(f),
        })
    }
}

/// A circuit breaker, or none ([`NoBreaker`]): every reliable-core [`Breaker`] is one.
pub trait MaybeBreaker {
    /// Asks for a permit at `now`; `None`: there is no breaker.
    fn acquire(&mut self, now: Instant) -> Option<Result<Permit, Rejection>>;
    /// Reports a permitted attempt's end.
    fn record(&mut self, permit: Permit, outcome: Outcome, now: Instant);
    /// While it refuses calls at `now`: how long until it admits one (`Duration::MAX`: forced
    /// open, until reset).
    fn refuses(&self, now: Instant) -> Option<Duration>;
}

impl<B: Breaker> MaybeBreaker for B {
    fn acquire(&mut self, now: Instant) -> Option<Result<Permit, Rejection>> {
        Some(self.try_acquire(now))
    }
    fn record(&mut self, permit: Permit, outcome: Outcome, now: Instant) {
        Breaker::record(self, permit, outcome, now);
    }
    fn refuses(&self, now: Instant) -> Option<Duration> {
        match self.retry_after(now) {
            Some(after) => Some(after),
            None if self.state(now) == BreakerState::ForcedOpen => Some(Duration::MAX),
            None => None,
        }
    }
}

/// No circuit breaker: every attempt goes out as far as the breaker is concerned.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoBreaker;

impl MaybeBreaker for NoBreaker {
    fn acquire(&mut self, _: Instant) -> Option<Result<Permit, Rejection>> {
        None
    }
    fn record(&mut self, _: Permit, _: Outcome, _: Instant) {}
    fn refuses(&self, _: Instant) -> Option<Duration> {
        None
    }
}

/// The layers of a policy beyond the breaker and the retry budget (each `None` by default: no
/// such layer), where the random draws come from, and where the engine's decisions go. `()` has
/// none of them; [`Extras`] holds any of them; implement it to add your own (a log of the
/// decisions, draws from a hardware RNG).
pub trait Extra {
    /// The adaptive throttle.
    fn throttle(&self) -> Option<&Part<AdaptiveThrottle>> {
        None
    }
    /// The ledger of extra attempts: when there is one, it is also the retry budget.
    fn ledger(&self) -> Option<&Part<ExtraLedger>> {
        None
    }
    /// The hedger (a [`Reliable`](crate::Reliable) with room for more than one copy sends
    /// hedges).
    fn hedger(&self) -> Option<&Part<Hedger>> {
        None
    }
    /// The concurrency limit.
    fn limiter(&self) -> Option<&Part<Limiter>> {
        None
    }
    /// The rate limit.
    fn rate(&self) -> Option<&Part<RateLimiter>> {
        None
    }
    /// A uniform random `u64` for `what`; `None`: the state's own draws (SplitMix64 from its
    /// seed).
    fn sample(&self, what: SampleFor) -> Option<u64> {
        let _ = what;
        None
    }
    /// A decision the engine took (a retry and its wait, a refusal, a hedge, a loser cancelled,
    /// a limit moved, an attempt's end, a give-up), as it takes it.
    fn note(&self, note: Note) {
        let _ = note;
    }
}

impl Extra for () {}

/// Any of the other layers, each optional and behind its own lock.
#[derive(Default)]
pub struct Extras {
    throttle: Option<Part<AdaptiveThrottle>>,
    ledger: Option<Part<ExtraLedger>>,
    hedger: Option<Part<Hedger>>,
    limiter: Option<Part<Limiter>>,
    rate: Option<Part<RateLimiter>>,
}

impl core::fmt::Debug for Extras {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Extras")
            .field("throttle", &self.throttle.is_some())
            .field("ledger", &self.ledger.is_some())
            .field("hedger", &self.hedger.is_some())
            .field("limiter", &self.limiter.is_some())
            .field("rate", &self.rate.is_some())
            .finish()
    }
}

impl Extras {
    /// None of them.
    pub const fn new() -> Self {
        Extras {
            throttle: None,
            ledger: None,
            hedger: None,
            limiter: None,
            rate: None,
        }
    }
    /// With an adaptive throttle (around each attempt, inside the retry).
    pub fn with_throttle(mut self, throttle: AdaptiveThrottle) -> Self {
        self.throttle = Some(Part::new(throttle));
        self
    }
    /// With a ledger of extra attempts (retries, hedges and half-open probes draw from it).
    pub fn with_ledger(mut self, ledger: ExtraLedger) -> Self {
        self.ledger = Some(Part::new(ledger));
        self
    }
    /// With hedging (for calls that may be sent twice, on a `Reliable` with room for copies).
    pub fn with_hedger(mut self, hedger: Hedger) -> Self {
        self.hedger = Some(Part::new(hedger));
        self
    }
    /// With a concurrency limit on attempts in flight.
    pub fn with_limiter(mut self, limiter: Limiter) -> Self {
        self.limiter = Some(Part::new(limiter));
        self
    }
    /// With a rate limit on attempts sent.
    pub fn with_rate(mut self, rate: RateLimiter) -> Self {
        self.rate = Some(Part::new(rate));
        self
    }
}

impl Extra for Extras {
    fn throttle(&self) -> Option<&Part<AdaptiveThrottle>> {
        self.throttle.as_ref()
    }
    fn ledger(&self) -> Option<&Part<ExtraLedger>> {
        self.ledger.as_ref()
    }
    fn hedger(&self) -> Option<&Part<Hedger>> {
        self.hedger.as_ref()
    }
    fn limiter(&self) -> Option<&Part<Limiter>> {
        self.limiter.as_ref()
    }
    fn rate(&self) -> Option<&Part<RateLimiter>> {
        self.rate.as_ref()
    }
}

/// The state the calls of a [`Reliable`](crate::Reliable) share: a breaker (or
/// [`NoBreaker`]), a retry budget ([`Unlimited`](reliable_core::budget::Unlimited) for none),
/// the random state of the backoff's jitter, and any other layer ([`Extra`]). It is the core's
/// [`Shared`] state, which the call engine draws from; put it in a `static` (through
/// `static_cell`) or pass it by `&` to tasks of one executor or of several priorities.
pub struct State<Br, B, X = ()> {
    breaker: Part<Br>,
    budget: Part<B>,
    random: Mutex<Cell<u64>>,
    extra: X,
}

impl<Br, B, X> core::fmt::Debug for State<Br, B, X> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("State").finish_non_exhaustive()
    }
}

impl<Br: MaybeBreaker, B: Budget> State<Br, B> {
    /// A breaker and a retry budget; `seed` starts the backoff's random draws: give each device
    /// its own, or their retries synchronise.
    pub const fn new(breaker: Br, budget: B, seed: u64) -> Self {
        State::with_extra(breaker, budget, seed, ())
    }
}

impl<Br: MaybeBreaker, B: Budget, X: Extra> State<Br, B, X> {
    /// A breaker, a retry budget and the other layers `extra` holds.
    pub const fn with_extra(breaker: Br, budget: B, seed: u64, extra: X) -> Self {
        State {
            breaker: Part::new(breaker),
            budget: Part::new(budget),
            random: Mutex::new(Cell::new(seed)),
            extra,
        }
    }

    /// Reads the breaker (its state, its counts) as of now; `None` while it is busy (read from
    /// inside one of its own observers).
    pub fn breaker<T>(&self, read: impl FnOnce(&Br) -> T) -> Option<T> {
        self.breaker.with(|b| read(b))
    }

    /// Reads the retry budget; `None` while it is busy.
    pub fn budget<T>(&self, read: impl FnOnce(&B) -> T) -> Option<T> {
        self.budget.with(|b| read(b))
    }

    /// The other layers.
    pub fn extra(&self) -> &X {
        &self.extra
    }
}

impl<Br: MaybeBreaker, B: Budget, X: Extra> State<Br, B, X> {
    /// `f` on the retry budget, or on none while it is busy.
    fn budget_or_none<R>(&self, f: impl FnOnce(&mut dyn Budget) -> R) -> R {
        match self.budget.try_budget(f) {
            Ok(r) => r,
            Err(f) => f(&mut reliable_core::budget::Unlimited),
        }
    }
}

impl<Br: MaybeBreaker, B: Budget, X: Extra> Shared for State<Br, B, X> {
    fn breaker_acquire(&self, now: Instant) -> Option<Result<Permit, Rejection>> {
        self.breaker.with(|b| b.acquire(now)).flatten()
    }
    fn breaker_record(&self, permit: Permit, outcome: Outcome, now: Instant) {
        self.breaker.with(|b| b.record(permit, outcome, now));
    }
    fn breaker_refuses(&self, now: Instant) -> Option<Duration> {
        self.breaker.with(|b| b.refuses(now)).flatten()
    }
    fn budget<R>(&self, f: impl FnOnce(&mut dyn Budget) -> R) -> R {
        // The ledger is the retry budget when there is one.
        let f = match self.extra.ledger() {
            Some(ledger) => match ledger.try_budget(f) {
                Ok(r) => return r,
                Err(f) => f,
            },
            None => f,
        };
        self.budget_or_none(f)
    }
    fn throttle<R>(
        &self,
        f: impl FnOnce(&mut dyn reliable_core::throttle::AnyThrottle) -> R,
    ) -> Option<R> {
        self.extra.throttle()?.with(|t| f(t))
    }
    fn ledger<R>(
        &self,
        f: impl FnOnce(&mut dyn reliable_core::ledger::AnyLedger) -> R,
    ) -> Option<R> {
        self.extra.ledger()?.with(|l| f(l))
    }
    fn hedger<R>(&self, f: impl FnOnce(&mut Hedger) -> R) -> Option<R> {
        self.extra.hedger()?.with(f)
    }
    fn limiter<R>(&self, f: impl FnOnce(&mut Limiter) -> R) -> Option<R> {
        self.extra.limiter()?.with(f)
    }
    fn rate<R>(&self, f: impl FnOnce(&mut RateLimiter) -> R) -> Option<R> {
        self.extra.rate()?.with(f)
    }
    fn sample(&self, what: SampleFor) -> u64 {
        if let Some(s) = self.extra.sample(what) {
            return s;
        }
        critical_section::with(|cs| {
            let cell = self.random.borrow(cs);
            let next = splitmix64(cell.get());
            cell.set(next);
            next
        })
    }
    fn note(&self, note: Note) {
        self.extra.note(note);
    }
}

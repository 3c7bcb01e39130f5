//! [`SharedBreaker`]: the circuit breaker for many threads, through `&self`, without locks,
//! allocation or `unsafe`.
//!
//! It takes the same [`BreakerPolicy`] as [`CircuitBreaker`](super::CircuitBreaker), the same kinds
//! of window (in their atomic form: [`AtomicCountWindow`], [`AtomicTimeWindow`],
//! [`AtomicAnyWindow`], [`NoWindow`]) and hands out the same [`Permit`]s. For any sequential history
//! (one call at a time, from any threads) it makes **exactly the same decisions**: the same permits,
//! rejection reasons and `retry_after`, transitions, states and counts. The reference-model test
//! drives both breakers with the same operations to show it.
//!
//! ```
//! use reliable_core::breaker::{AtomicCountWindow, BreakerConfig, BreakerPolicy, Outcome, SharedBreaker, State};
//! use reliable_core::{Duration, Instant};
//!
//! use std::sync::Arc;
//!
//! let policy = BreakerPolicy::new(BreakerConfig::reliablekit())?;
//! // It owns its policy, so an `Arc` of it is 'static + Send + Sync.
//! let breaker = Arc::new(SharedBreaker::new(policy)?);
//!
//! // Four threads share one breaker in front of a downstream that fails every call.
//! let threads: Vec<_> = (0..4)
//!     .map(|_| {
//!         let breaker = Arc::clone(&breaker);
//!         std::thread::spawn(move || {
//!             for ms in 0..10 {
//!                 let now = Instant::from_millis(ms);
//!                 if let Ok(permit) = breaker.try_acquire(now) {
//!                     breaker.record(permit, Outcome::Failure, now);
//!                 }
//!             }
//!         })
//!     })
//!     .collect();
//! for t in threads {
//!     t.join().unwrap();
//! }
//! // The 20-call window filled with failures and tripped it: rejected for the next 30 s.
//! let rejection = breaker.try_acquire(Instant::from_millis(10)).unwrap_err();
//! assert!(rejection.retry_after() > Some(Duration::from_secs(29)));
//! assert_eq!(breaker.state(Instant::from_millis(10)), State::Open);
//! # Ok::<(), reliable_core::ConfigError>(())
//! ```
//!
//! [`SharedBreaker`]'s documentation describes how the state is packed, the limits that packing
//! sets, and what holds when calls race.

use core::borrow::Borrow;
use core::sync::atomic::AtomicU64;
use core::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};

use super::api::Snapshot;
use super::atomic_window::{AtomicCountWindow, AtomicWindow, Line};
use super::config::{BreakerPolicy, FP_ONE, ProbeRule, Verdict, jitter_sample};
use super::observer::Observer;
use super::spec::{
    FIRST_LEASE, NOT_A_PROBE, Outcome, Permit, RejectReason, Rejection, State, Transition,
    UNLEASED_PROBE,
};
use super::window::Counts;
use crate::error::{ConfigError, PPM, Problem};
use crate::sample::instance_seed;
use crate::time::Instant;

/// The largest count the control word holds (consecutive failures, re-opens).
const MAX_COUNT: u32 = (1 << 28) - 1;
/// The largest `ProbeRule::Rate { calls }` the round word holds.
const MAX_RATE_CALLS: u32 = u8::MAX as u32;

const CLOSED: u64 = 0;
const OPEN: u64 = 1;
const HALF_OPEN: u64 = 2;
const FORCED_OPEN: u64 = 3;
const DISABLED: u64 = 4;
const STATE_MASK: u64 = 0b111;
/// Closed: ramping. Forced open / disabled: the count holds consecutive failures, not re-opens.
const FLAG: u64 = 1 << 3;
const COUNT_SHIFT: u32 = 4;

/// The control word: `state (3 bits) | flag (1) | count (28) | generation (32)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Ctl(u64);

impl Ctl {
    #[inline]
    fn new(state: u64, flag: bool, count: u32, generation: u32) -> Ctl {
        Ctl(state
            | if flag { FLAG } else { 0 }
            | (u64::from(count.min(MAX_COUNT)) << COUNT_SHIFT)
            | (u64::from(generation) << 32))
    }
    #[inline]
    fn code(self) -> u64 {
        self.0 & STATE_MASK
    }
    #[inline]
    fn state(self) -> State {
        match self.code() {
            CLOSED => State::Closed,
            OPEN => State::Open,
            HALF_OPEN => State::HalfOpen,
            FORCED_OPEN => State::ForcedOpen,
            _ => State::Disabled,
        }
    }
    #[inline]
    fn flag(self) -> bool {
        self.0 & FLAG != 0
    }
    #[inline]
    fn count(self) -> u32 {
        ((self.0 >> COUNT_SHIFT) as u32) & MAX_COUNT
    }
    #[inline]
    fn generation(self) -> u32 {
        (self.0 >> 32) as u32
    }
    #[inline]
    fn next(self, state: u64, flag: bool, count: u32) -> Ctl {
        Ctl::new(state, flag, count, self.generation().wrapping_add(1))
    }
    fn consecutive(self) -> u32 {
        match self.code() {
            CLOSED => self.count(),
            FORCED_OPEN | DISABLED if self.flag() => self.count(),
            _ => 0,
        }
    }
    fn reopens(self) -> u32 {
        match self.code() {
            OPEN | HALF_OPEN => self.count(),
            FORCED_OPEN | DISABLED if !self.flag() => self.count(),
            _ => 0,
        }
    }
    /// Into a manual state: the counters are kept (one of them is zero), as in the `&mut` breaker.
    fn manual(self, state: u64) -> Ctl {
        match self.code() {
            CLOSED => self.next(state, true, self.count()),
            FORCED_OPEN | DISABLED => self.next(state, self.flag(), self.count()),
            _ => self.next(state, false, self.count()),
        }
    }
}

/// A lease slot: `generation (32) | lease number (25) | unused (5) | slot state (2)`.
const SLOT_FREE: u64 = 0;
const SLOT_CLAIMING: u64 = 1;
const SLOT_LEASED: u64 = 2;
const SEQ_SHIFT: u32 = 7;
const SEQ_MASK: u64 = (1 << 25) - 1;

#[inline]
fn slot_word(generation: u32, seq: u64, state: u64) -> u64 {
    (u64::from(generation) << 32) | ((seq & SEQ_MASK) << SEQ_SHIFT) | state
}
#[inline]
fn slot_generation(w: u64) -> u32 {
    (w >> 32) as u32
}
#[inline]
fn slot_seq(w: u64) -> u64 {
    (w >> SEQ_SHIFT) & SEQ_MASK
}
#[inline]
fn slot_state(w: u64) -> u64 {
    w & 0b11
}
/// A permit's lease for slot `slot` with lease number `seq`: above `FIRST_LEASE`, so
/// [`Permit::is_probe`] holds.
#[inline]
fn lease_of(slot: usize, seq: u64) -> u32 {
    FIRST_LEASE + (((seq as u32) << 6) | slot as u32)
}

/// The tallies of a half-open round. [`ProbeRule::Consecutive`] uses all 32 bits for successes;
/// [`ProbeRule::Rate`] packs successes, failures, slow probes and probes issued in 8 bits each.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Tallies {
    successes: u32,
    failures: u32,
    slow: u32,
    issued: u32,
}

impl Tallies {
    fn pack(self, rate: bool) -> u32 {
        if rate {
            let b = |n: u32| n.min(MAX_RATE_CALLS);
            b(self.successes) | b(self.failures) << 8 | b(self.slow) << 16 | b(self.issued) << 24
        } else {
            self.successes
        }
    }
    fn unpack(v: u32, rate: bool) -> Tallies {
        if rate {
            Tallies {
                successes: v & 0xff,
                failures: (v >> 8) & 0xff,
                slow: (v >> 16) & 0xff,
                issued: v >> 24,
            }
        } else {
            Tallies {
                successes: v,
                ..Tallies::default()
            }
        }
    }
}

/// A word tagged with a generation: `generation (32) | value (32)`.
#[inline]
fn tagged(generation: u32, value: u32) -> u64 {
    (u64::from(generation) << 32) | u64::from(value)
}

/// What a step of a call decided: an answer, or "the state changed under me, read it again".
enum Step<T> {
    Done(T),
    Retry,
}

/// A circuit breaker shared by many threads: [`CircuitBreaker`](super::CircuitBreaker)'s decisions
/// through `&self`, in atomics, lock-free and allocation-free.
///
/// `W` is an [`AtomicWindow`] ([`AtomicCountWindow`](super::AtomicCountWindow),
/// [`AtomicTimeWindow`](super::AtomicTimeWindow), [`AtomicAnyWindow`](super::AtomicAnyWindow) or
/// [`NoWindow`](super::NoWindow)); `P` is the number of half-open probe slots (at most 64). For any
/// sequential history it answers exactly as a `CircuitBreaker` with the same policy, seed and window
/// size would. `R` holds the policy and `O` observes the transitions, as for `CircuitBreaker`; with
/// an owned policy (the default) and a `Sync` observer, `Arc<SharedBreaker>` is `'static + Send +
/// Sync`.
///
/// # How the state is kept
///
/// - **One control word** (`AtomicU64`) holds the state, the 32-bit generation and the counter that
///   must change together with the state: consecutive failures while closed, re-opens while open or
///   half-open. A transition, the generation bump and the reset of that counter are one
///   compare-and-swap, so exactly one thread wins each transition and a permit of an older
///   generation is ignored as in the `&mut` breaker.
/// - **The instant of the last transition** into open or into a slow-start ramp is an atomic maximum,
///   written *before* the transition is published. The open-until instant is that plus the open time,
///   which is a pure function of the policy, the re-opens, the seed and the generation, so a reader
///   never sees a half-written deadline.
/// - **Half-open probes** claim lease slots by compare-and-swap. Only the first `max_in_flight` slots
///   can be claimed, so the probe limit holds under any interleaving. A slot word carries the
///   generation and a per-slot lease number, so a probe's late answer cannot free a slot leased again
///   since, and slots of an earlier round are free without being cleared. The round's tallies
///   (successes, failures, slow probes, probes issued) are one generation-tagged word.
/// - **Slow-start credit** is one generation-tagged word.
/// - **The latest `now`** (a `now` earlier than it counts as it, as in the `&mut` breaker) is a plain
///   store, made only when a call's `now` is later than the value it read: no read-modify-write on
///   the hot path. One call at a time, it is exactly the maximum.
///
/// The closed, not-ramping fast path takes no lock and makes no read-modify-write of its own: a
/// success after a success stores the latest `now` (when it grows) and claims a window position
/// (one `fetch_add`, none with `NoWindow`). Those two words are each on a cache line of their own;
/// the control word and the window's bits, read by every call but rarely written, sit apart, so
/// the cores keep them shared. (So a `SharedBreaker` is 64-byte aligned and a few cache lines long:
/// 256 bytes with a count window.)
///
/// # Limits of the packing
///
/// [`SharedBreaker::new`] refuses, with a [`ConfigError`] naming the field, policies beyond them:
///
/// | field | limit | why |
/// |---|---|---|
/// | `consecutive_failures` | at most 268,435,455 (2²⁸ − 1) | the count shares the control word |
/// | `half_open.rule` `Rate { calls }` | at most 255 | four 8-bit tallies share one word |
/// | `open.growth` | must reach `open.max` within 2²⁸ − 1 re-opens | re-opens saturate there |
/// | `half_open.max_in_flight` | at most `P` (at most 64) | as for `CircuitBreaker` |
///
/// Counters that only report saturate where the `&mut` breaker's saturate at `u32::MAX`:
/// [`consecutive_failures`](SharedBreaker::consecutive_failures) (it can pass the threshold only
/// when the consecutive rule is off) and [`reopens`](SharedBreaker::reopens) at 2²⁸ − 1. A lease
/// number repeats after 2²⁵ leases of one slot in one half-open round (the `&mut` breaker's after
/// 2³² − 2 in one round). 64-bit atomics are required, so this type does not exist on targets
/// without them (Cortex-M, for example); use [`CircuitBreaker`](super::CircuitBreaker) there.
///
/// # Under concurrency
///
/// Guaranteed, whatever the interleaving:
/// - at most `max_in_flight` probes of one half-open round are in flight;
/// - each transition is made by exactly one call and reported by that call only, and a call makes
///   at most one (one that made a transition and then lost a race rejects with
///   [`HalfOpenFull`](RejectReason::HalfOpenFull) rather than make a second);
/// - a result whose permit is of an earlier generation than the one `record` reads changes nothing;
/// - every operation completes in a bounded number of its own steps unless other threads keep
///   changing the same words (lock-free: a retry means another call made progress);
/// - counts never exceed the window, and `retry_after` never exceeds the maximum open time.
///
/// Not guaranteed (these are races in the caller's own history, with no sequential order to match):
/// - a result that races a state change is judged by the state it read: it may be ignored though
///   the change came "after" it, or it may land in the window that a close is clearing (and
///   survive the clear, or be lost with it);
/// - when calls race a trip, the open time starts at the latest `now` among the racing trip
///   attempts, not necessarily the winner's;
/// - a reader racing a writer may see the window's counts without that writer's call, and a time
///   window's bucket rolling over may drop a racing call;
/// - two calls raising the latest `now` at once may leave the earlier of their two `now`s, so a call
///   racing them may judge by a slightly earlier time than the latest seen (never earlier than its
///   own `now`; the next call with a later clock restores it): it decides as it would have a moment
///   earlier (an open time, a lease or a ramp ends a little later for it; an open time it starts
///   begins at its own `now`).
#[derive(Debug)]
#[repr(C)]
pub struct SharedBreaker<R = BreakerPolicy, W = AtomicCountWindow<64>, const P: usize = 1, O = ()> {
    /// Written by every call: on a cache line of its own, away from the read-mostly words.
    hot: Hot<W>,
    control: AtomicU64,
    policy: R,
    observer: O,
    seed: u64,
    /// The `now` of the latest transition into open or into a slow-start ramp (an atomic maximum).
    since: AtomicU64,
    /// The half-open round's [`Tallies`], tagged with its generation.
    round: AtomicU64,
    /// Slow-start credit in ppm of one call, tagged with the generation of the close.
    credit: AtomicU64,
    slots: [AtomicU64; P],
    expires: [AtomicU64; P],
}

/// The words a closed breaker writes on every call, each on a cache line of its own: the latest
/// `now` here, the window's call counter in the window. (Two threads on one breaker with a
/// 100-call window were 15-40% slower with both on one line, or with the window's bits beside
/// them.) The control word's line stays shared by the cores while the state holds.
#[derive(Debug)]
#[repr(C)]
struct Hot<W> {
    latest: Line<AtomicU64>,
    window: W,
}

impl<R: Borrow<BreakerPolicy>> SharedBreaker<R> {
    /// A closed breaker for `policy` with the default storage: a 64-call window and one probe
    /// slot. Fails as [`with_storage`](Self::with_storage) does. Its open-time jitter gets a seed of
    /// its own, as for [`CircuitBreaker::new`](super::CircuitBreaker::new).
    pub fn new(policy: R) -> Result<Self, ConfigError> {
        Self::with_storage(policy)
    }
}

impl<R: Borrow<BreakerPolicy>, W: AtomicWindow, const P: usize, O: Observer + Default>
    SharedBreaker<R, W, P, O>
{
    /// A closed breaker for `policy` with window `W` and `P` probe slots, named in the type. Fails if
    /// `W` cannot hold the policy's window, if `P` slots are fewer than the policy's probes in
    /// flight, or if the policy is beyond the limits of the packing (see [the type's
    /// documentation](SharedBreaker#limits-of-the-packing)).
    pub fn with_storage(policy_holder: R) -> Result<Self, ConfigError> {
        const { assert!(P <= 64, "at most 64 probe slots") };
        let policy = policy_holder.borrow();
        let window = policy.build_window(W::new, W::is_recording)?;
        policy.check_probe_slots(P)?;
        if policy.consecutive > MAX_COUNT {
            return Err(ConfigError::new(
                "consecutive_failures",
                Problem::ExceedsCapacity {
                    requested: u64::from(policy.consecutive),
                    capacity: u64::from(MAX_COUNT),
                },
            ));
        }
        if let ProbeRule::Rate { calls } = policy.rule
            && calls > MAX_RATE_CALLS
        {
            return Err(ConfigError::new(
                "half_open.rule.calls",
                Problem::ExceedsCapacity {
                    requested: u64::from(calls),
                    capacity: u64::from(MAX_RATE_CALLS),
                },
            ));
        }
        if policy.growth_fp != FP_ONE && policy.open_time_before_jitter(MAX_COUNT) < policy.open_max
        {
            return Err(ConfigError::new(
                "open.growth",
                Problem::Inconsistent(
                    "so close to 1 that the open time would still grow after 268,435,455 re-opens, \
                     where a SharedBreaker's count stops",
                ),
            ));
        }
        Ok(SharedBreaker {
            hot: Hot {
                latest: Line(AtomicU64::new(0)),
                window,
            },
            policy: policy_holder,
            observer: O::default(),
            seed: instance_seed(),
            control: AtomicU64::new(Ctl::new(CLOSED, false, 0, 0).0),

            since: AtomicU64::new(0),
            round: AtomicU64::new(0),
            credit: AtomicU64::new(0),
            slots: [const { AtomicU64::new(0) }; P],
            expires: [const { AtomicU64::new(0) }; P],
        })
    }
}

impl<R: Borrow<BreakerPolicy>, W: AtomicWindow, const P: usize, O: Observer>
    SharedBreaker<R, W, P, O>
{
    /// The same breaker, reporting its transitions to `observer` (see [`Observer`]).
    pub fn observe<O2: Observer>(self, observer: O2) -> SharedBreaker<R, W, P, O2> {
        SharedBreaker {
            hot: self.hot,
            control: self.control,
            policy: self.policy,
            observer,
            seed: self.seed,
            since: self.since,
            round: self.round,
            credit: self.credit,
            slots: self.slots,
            expires: self.expires,
        }
    }

    /// Sets the seed of the open-time jitter (see
    /// [`CircuitBreaker::with_seed`](super::CircuitBreaker::with_seed)).
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

    /// Everything a caller can read, as of `now` (each field read on its own: under concurrency
    /// they may come from moments a few instructions apart).
    pub fn snapshot(&self, now: Instant) -> Snapshot {
        Snapshot {
            state: self.state(now),
            generation: self.generation(),
            consecutive_failures: self.consecutive_failures(),
            reopens: self.reopens(),
            probes_in_flight: self.probes_in_flight(),
            counts: self.counts(now),
        }
    }

    #[inline]
    fn load(&self) -> Ctl {
        Ctl(self.control.load(Acquire))
    }

    /// The latest `now` seen, including `now`. A plain store when it grows (see "Under
    /// concurrency" in the type's documentation for what racing stores may do).
    #[inline]
    fn observe_now(&self, now: Instant) -> Instant {
        let now = now.as_nanos();
        let seen = self.hot.latest.load(Relaxed);
        if now <= seen {
            return Instant::from_nanos(seen);
        }
        self.hot.latest.store(now, Relaxed);
        Instant::from_nanos(now)
    }

    #[inline]
    fn query_time(&self, now: Instant) -> Instant {
        now.max(Instant::from_nanos(self.hot.latest.load(Relaxed)))
    }

    /// When an open breaker in `c` turns half-open.
    fn open_until(&self, c: Ctl) -> Instant {
        // The jitter draw of the opening that left generation `c - 1`, as the `&mut` breaker does.
        let sample = jitter_sample(self.seed, c.generation().wrapping_sub(1));
        Instant::from_nanos(self.since.load(Acquire))
            .saturating_add(self.policy().open_time(c.reopens(), sample))
    }

    /// Makes the transition `from` → `to` if nobody else changed the state first, and reports it:
    /// every state change goes through here. `Ok(true)` if the state changed.
    fn go(&self, from: Ctl, to: Ctl, now: Instant) -> Result<bool, ()> {
        let stamps = to.code() == OPEN || (to.code() == CLOSED && to.flag());
        if stamps {
            // Before publishing: whoever sees `to` also sees its start instant.
            self.since.fetch_max(now.as_nanos(), Release);
        }
        self.control
            .compare_exchange(from.0, to.0, AcqRel, Acquire)
            .map_err(|_| ())?;
        if to.code() == CLOSED {
            self.hot.window.clear();
        }
        let (from, to) = (from.state(), to.state());
        if from == to {
            return Ok(false);
        }
        self.observer
            .on_transition(Transition { from, to, at: now });
        Ok(true)
    }

    /// The state as of `now`: an open breaker whose time is up reports [`State::HalfOpen`].
    pub fn state(&self, now: Instant) -> State {
        let c = self.load();
        match c.state() {
            State::Open if self.query_time(now) >= self.open_until(c) => State::HalfOpen,
            s => s,
        }
    }

    /// Outcomes in the window as of `now` (calls, failures, slow calls).
    pub fn counts(&self, now: Instant) -> Counts {
        self.hot.window.counts(self.query_time(now))
    }

    /// Failures in a row while closed (saturates at 2²⁸ − 1).
    pub fn consecutive_failures(&self) -> u32 {
        self.load().consecutive()
    }

    /// Failed probe rounds since the breaker last closed (saturates at 2²⁸ − 1).
    pub fn reopens(&self) -> u32 {
        self.load().reopens()
    }

    /// Half-open probes currently in flight (with bounded probes; 0 otherwise).
    pub fn probes_in_flight(&self) -> u32 {
        let g = self.load().generation();
        self.slots
            .iter()
            .filter(|s| {
                let w = s.load(Acquire);
                slot_generation(w) == g && slot_state(w) != SLOT_FREE
            })
            .count() as u32
    }

    /// The generation: it changes on every state change, and permits from an older one are ignored.
    pub fn generation(&self) -> u32 {
        self.load().generation()
    }

    #[inline]
    fn permit(generation: u32, lease: u32, now: Instant) -> Permit {
        Permit::new(generation, lease, now)
    }

    /// Asks to make one call. On `Ok`, make the call and hand the permit back to
    /// [`record`](Self::record).
    #[inline]
    pub fn try_acquire(&self, now: Instant) -> Result<Permit, Rejection> {
        let now = self.observe_now(now);
        let c = self.load();
        if c.code() == CLOSED && !c.flag() {
            return Ok(Self::permit(c.generation(), NOT_A_PROBE, now));
        }
        self.acquire_slow(c, now)
    }

    fn acquire_slow(&self, mut c: Ctl, now: Instant) -> Result<Permit, Rejection> {
        // Whether this call made a transition already (it makes at most one).
        let mut caused = false;
        let answer = loop {
            let step = match c.state() {
                State::Closed => self.acquire_closed(c, now),
                State::Disabled => Step::Done(Ok(Self::permit(c.generation(), NOT_A_PROBE, now))),
                State::ForcedOpen => Step::Done(Err(RejectReason::ForcedOpen)),
                State::Open => {
                    let until = self.open_until(c);
                    if now < until {
                        Step::Done(Err(RejectReason::Open {
                            retry_after: until.saturating_duration_since(now),
                        }))
                    } else if caused {
                        // This call already made one transition and lost a race since: it makes
                        // no second one.
                        Step::Done(Err(RejectReason::HalfOpenFull))
                    } else {
                        let half = c.next(HALF_OPEN, false, c.count());
                        match self.go(c, half, now) {
                            Ok(t) => {
                                caused = t;
                                self.acquire_half_open(half, now, &mut caused)
                            }
                            Err(()) => Step::Retry,
                        }
                    }
                }
                State::HalfOpen => self.acquire_half_open(c, now, &mut caused),
            };
            match step {
                Step::Done(answer) => break answer,
                Step::Retry => c = self.load(),
            }
        };
        answer.map_err(Rejection::new)
    }

    fn acquire_closed(&self, c: Ctl, now: Instant) -> Step<Result<Permit, RejectReason>> {
        let g = c.generation();
        if !c.flag() {
            return Step::Done(Ok(Self::permit(g, NOT_A_PROBE, now)));
        }
        let policy = self.policy();
        let elapsed = now.saturating_duration_since(Instant::from_nanos(self.since.load(Acquire)));
        if elapsed >= policy.ramp {
            let done = Ctl::new(CLOSED, false, c.count(), g);
            return match self.control.compare_exchange(c.0, done.0, AcqRel, Acquire) {
                Ok(_) => Step::Done(Ok(Self::permit(g, NOT_A_PROBE, now))),
                Err(_) => Step::Retry,
            };
        }
        let share = policy.ramp_share(elapsed);
        let mut w = self.credit.load(Acquire);
        loop {
            let credit = if (w >> 32) as u32 == g {
                w as u32
            } else if self.load().generation() != g {
                return Step::Retry;
            } else {
                0
            };
            let credit = credit.saturating_add(share);
            let (left, admit) = if credit < PPM {
                (credit, false)
            } else {
                (credit - PPM, true)
            };
            match self
                .credit
                .compare_exchange_weak(w, tagged(g, left), AcqRel, Acquire)
            {
                Ok(_) if admit => return Step::Done(Ok(Self::permit(g, NOT_A_PROBE, now))),
                Ok(_) => return Step::Done(Err(RejectReason::SlowStart)),
                Err(x) => w = x,
            }
        }
    }

    /// Updates the tallies of the round of generation `g` with `f` (which may refuse with `None`).
    /// `Err` if the round is over (the state moved on).
    fn update_round(
        &self,
        g: u32,
        f: impl Fn(Tallies) -> Option<Tallies>,
    ) -> Result<Option<Tallies>, ()> {
        let rate = matches!(self.policy().rule, ProbeRule::Rate { .. });
        let mut w = self.round.load(Acquire);
        loop {
            let current = if (w >> 32) as u32 == g {
                Tallies::unpack(w as u32, rate)
            } else if self.load().generation() != g {
                return Err(());
            } else {
                Tallies::default()
            };
            let Some(next) = f(current) else {
                return Ok(None);
            };
            match self
                .round
                .compare_exchange_weak(w, tagged(g, next.pack(rate)), AcqRel, Acquire)
            {
                Ok(_) => return Ok(Some(next)),
                Err(x) => w = x,
            }
        }
    }

    fn round(&self, g: u32) -> Tallies {
        let w = self.round.load(Acquire);
        if (w >> 32) as u32 == g {
            Tallies::unpack(
                w as u32,
                matches!(self.policy().rule, ProbeRule::Rate { .. }),
            )
        } else {
            Tallies::default()
        }
    }

    /// Acts on a verdict of the round of `c`: `None` if undecided.
    fn decide(
        &self,
        c: Ctl,
        verdict: Verdict,
        now: Instant,
        caused: &mut bool,
    ) -> Option<Step<Result<Permit, RejectReason>>> {
        match verdict {
            Verdict::Undecided => None,
            Verdict::Reopen => {
                let open = c.next(OPEN, false, c.count().saturating_add(1));
                Some(match self.go(c, open, now) {
                    Ok(t) => {
                        *caused = t;
                        Step::Done(Err(RejectReason::Open {
                            retry_after: self.open_until(open).saturating_duration_since(now),
                        }))
                    }
                    Err(()) => Step::Retry,
                })
            }
            Verdict::Close => {
                let closed = c.next(CLOSED, !self.policy().ramp.is_zero(), 0);
                Some(match self.go(c, closed, now) {
                    Ok(t) => {
                        *caused = t;
                        self.acquire_closed(closed, now)
                    }
                    Err(()) => Step::Retry,
                })
            }
        }
    }

    fn acquire_half_open(
        &self,
        c: Ctl,
        now: Instant,
        caused: &mut bool,
    ) -> Step<Result<Permit, RejectReason>> {
        let policy = self.policy();
        let g = c.generation();
        if policy.max_in_flight == u32::MAX {
            // No gate: every call is a probe, with nothing to lease and no count to keep.
            return Step::Done(Ok(Self::permit(g, UNLEASED_PROBE, now)));
        }
        let slots = self
            .slots
            .get(..policy.max_in_flight as usize)
            .unwrap_or(&[]);
        // Leases that ran out count as failed probes; each is counted by the call that frees it.
        // A call that already made a transition (and lost a race since) leaves them to the next
        // call, so that it makes no second one.
        let mut expired = 0u32;
        for (slot, expires) in slots.iter().zip(&self.expires) {
            if *caused {
                break;
            }
            let w = slot.load(Acquire);
            if slot_generation(w) == g
                && slot_state(w) == SLOT_LEASED
                && expires.load(Relaxed) <= now.as_nanos()
                && slot.compare_exchange(w, w & !0b11, AcqRel, Relaxed).is_ok()
            {
                expired += 1;
            }
        }
        if expired > 0 {
            let verdict = match policy.rule {
                ProbeRule::Consecutive { .. } => Verdict::Reopen,
                ProbeRule::Rate { .. } => match self.update_round(g, |t| {
                    Some(Tallies {
                        failures: t.failures.saturating_add(expired),
                        ..t
                    })
                }) {
                    Ok(Some(t)) => policy.rate_verdict(t.successes, t.failures, t.slow),
                    _ => return Step::Retry,
                },
            };
            if let Some(step) = self.decide(c, verdict, now, caused) {
                return step;
            }
        }
        // The first free slot among the first `max_in_flight`.
        let Some((index, slot, w)) = slots.iter().enumerate().find_map(|(i, s)| {
            let w = s.load(Acquire);
            (slot_generation(w) != g || slot_state(w) == SLOT_FREE).then_some((i, s, w))
        }) else {
            return Step::Done(Err(RejectReason::HalfOpenFull));
        };
        if let ProbeRule::Rate { calls } = policy.rule
            && self.round(g).issued >= calls
        {
            return Step::Done(Err(RejectReason::HalfOpenFull));
        }
        if slot_generation(w) != g && self.load().generation() != g {
            // A slot of a later round: this call's view is stale.
            return Step::Retry;
        }
        let seq = slot_seq(w).wrapping_add(1);
        let claiming = slot_word(g, seq, SLOT_CLAIMING);
        if slot.compare_exchange(w, claiming, AcqRel, Acquire).is_err() {
            return Step::Retry;
        }
        let release = || {
            let _ = slot.compare_exchange(claiming, slot_word(g, seq, SLOT_FREE), AcqRel, Relaxed);
        };
        if let ProbeRule::Rate { calls } = policy.rule {
            match self.update_round(g, |t| {
                (t.issued < calls).then_some(Tallies {
                    issued: t.issued + 1,
                    ..t
                })
            }) {
                Ok(Some(_)) => {}
                Ok(None) => {
                    release();
                    return Step::Done(Err(RejectReason::HalfOpenFull));
                }
                Err(()) => {
                    release();
                    return Step::Retry;
                }
            }
        }
        if let Some(e) = self.expires.get(index) {
            e.store(now.saturating_add(policy.probe_timeout).as_nanos(), Relaxed);
        }
        if slot
            .compare_exchange(claiming, slot_word(g, seq, SLOT_LEASED), AcqRel, Acquire)
            .is_err()
        {
            // A later round took the slot: this round is over.
            return Step::Retry;
        }
        Step::Done(Ok(Self::permit(g, lease_of(index, seq), now)))
    }

    /// Reports how a permitted call ended. A state change it causes goes to the observer. Results
    /// from permits of an earlier generation are ignored.
    #[inline]
    pub fn record(&self, permit: Permit, outcome: Outcome, now: Instant) {
        let now = self.observe_now(now);
        let c = self.load();
        if permit.generation != c.generation() {
            return;
        }
        let policy = self.policy();
        let slow = policy.is_slow(permit.started, now);
        match c.code() {
            CLOSED => {
                if outcome == Outcome::Ignored {
                    return;
                }
                let failure = outcome == Outcome::Failure;
                let window = &self.hot.window;
                let calls = window.record(now, failure, slow);
                let rates = policy.rates_fire(calls, |f, s| window.counts_of(now, f, s));
                self.record_closed(c, failure, rates, now)
            }
            DISABLED if outcome != Outcome::Ignored => {
                self.hot
                    .window
                    .record(now, outcome == Outcome::Failure, slow);
            }
            HALF_OPEN => self.record_probe(c, permit, outcome, slow, now),
            _ => {}
        }
    }

    #[inline]
    fn record_closed(&self, mut c: Ctl, failure: bool, rates: bool, now: Instant) {
        let g = c.generation();
        loop {
            let consecutive = if failure {
                c.count().saturating_add(1).min(MAX_COUNT)
            } else {
                0
            };
            let done = if rates || self.policy().consecutive_trips(consecutive) {
                // Closed always has zero re-opens.
                self.go(c, c.next(OPEN, false, 0), now).is_ok()
            } else if consecutive != c.count() {
                let next = Ctl::new(CLOSED, c.flag(), consecutive, g);
                self.control
                    .compare_exchange(c.0, next.0, AcqRel, Acquire)
                    .is_ok()
            } else {
                true
            };
            if done {
                return;
            }
            c = self.load();
            if c.generation() != g {
                return;
            }
        }
    }

    fn record_probe(&self, c: Ctl, permit: Permit, outcome: Outcome, slow: bool, now: Instant) {
        let g = c.generation();
        let policy = self.policy();
        if permit.lease >= FIRST_LEASE {
            let lease = permit.lease - FIRST_LEASE;
            let (index, seq) = ((lease & 63) as usize, u64::from(lease >> 6));
            let Some(slot) = self.slots.get(index) else {
                return;
            };
            if slot
                .compare_exchange(
                    slot_word(g, seq, SLOT_LEASED),
                    slot_word(g, seq, SLOT_FREE),
                    AcqRel,
                    Relaxed,
                )
                .is_err()
            {
                // Its lease expired and already counted as a failed probe.
                return;
            }
        }
        let bad = outcome == Outcome::Failure || slow;
        let verdict = match (outcome, policy.rule) {
            (Outcome::Ignored, ProbeRule::Rate { .. }) => {
                // The probe said nothing: let another one take its place.
                let _ = self.update_round(g, |t| {
                    Some(Tallies {
                        issued: t.issued.saturating_sub(1),
                        ..t
                    })
                });
                Verdict::Undecided
            }
            (Outcome::Ignored, _) => Verdict::Undecided,
            (_, ProbeRule::Consecutive { .. }) if bad => Verdict::Reopen,
            (_, ProbeRule::Consecutive { successes }) => {
                match self.update_round(g, |t| {
                    Some(Tallies {
                        successes: t.successes.saturating_add(1),
                        ..t
                    })
                }) {
                    Ok(Some(t)) if t.successes >= successes => Verdict::Close,
                    _ => Verdict::Undecided,
                }
            }
            (_, ProbeRule::Rate { .. }) => {
                let failure = outcome == Outcome::Failure;
                match self.update_round(g, |t| {
                    Some(Tallies {
                        successes: t.successes + u32::from(!failure),
                        failures: t.failures + u32::from(failure),
                        slow: t.slow + u32::from(slow),
                        ..t
                    })
                }) {
                    Ok(Some(t)) => policy.rate_verdict(t.successes, t.failures, t.slow),
                    _ => Verdict::Undecided,
                }
            }
        };
        let to = match verdict {
            Verdict::Undecided => return,
            Verdict::Close => c.next(CLOSED, !policy.ramp.is_zero(), 0),
            Verdict::Reopen => c.next(OPEN, false, c.count().saturating_add(1)),
        };
        let _ = self.go(c, to, now);
    }

    /// Makes the manual transition `to(c)` from whatever state the breaker is in.
    fn manual(&self, now: Instant, to: impl Fn(Ctl) -> Ctl) {
        let now = self.observe_now(now);
        loop {
            let c = self.load();
            if self.go(c, to(c), now).is_ok() {
                return;
            }
        }
    }

    /// Opens the breaker by hand until [`reset`](Self::reset). Permits already out become stale.
    pub fn force_open(&self, now: Instant) {
        self.manual(now, |c| c.manual(FORCED_OPEN))
    }

    /// Switches the breaker off until [`reset`](Self::reset): every call is admitted and outcomes
    /// only feed the window's metrics.
    pub fn disable(&self, now: Instant) {
        self.manual(now, |c| c.manual(DISABLED))
    }

    /// Back to closed with nothing remembered: window, counters and open-time growth cleared, no
    /// slow start. Permits already out become stale.
    pub fn reset(&self, now: Instant) {
        self.manual(now, |c| c.next(CLOSED, false, 0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Duration;
    use crate::breaker::{AtomicCountWindow, BreakerConfig, HalfOpenConfig, NoWindow, OpenConfig};

    #[test]
    fn control_word_round_trips() {
        for state in [CLOSED, OPEN, HALF_OPEN, FORCED_OPEN, DISABLED] {
            for flag in [false, true] {
                for count in [0, 1, 12345, MAX_COUNT] {
                    for g in [0, 1, u32::MAX] {
                        let c = Ctl::new(state, flag, count, g);
                        assert_eq!((c.code(), c.flag(), c.count()), (state, flag, count));
                        assert_eq!(c.generation(), g);
                    }
                }
            }
        }
        let c = Ctl::new(CLOSED, false, 7, u32::MAX);
        assert_eq!(c.next(OPEN, false, 0).generation(), 0);
        assert_eq!(Ctl::new(CLOSED, false, u32::MAX, 0).count(), MAX_COUNT);
    }

    #[test]
    fn tallies_and_leases_round_trip() {
        let t = Tallies {
            successes: 3,
            failures: 255,
            slow: 0,
            issued: 200,
        };
        assert_eq!(Tallies::unpack(t.pack(true), true), t);
        let c = Tallies {
            successes: u32::MAX,
            ..Tallies::default()
        };
        assert_eq!(Tallies::unpack(c.pack(false), false), c);
        for (slot, seq) in [(0usize, 0u64), (63, SEQ_MASK), (5, 1234)] {
            let lease = lease_of(slot, seq) - FIRST_LEASE;
            assert_eq!(((lease & 63) as usize, u64::from(lease >> 6)), (slot, seq));
        }
    }

    #[test]
    fn refuses_policies_beyond_the_packing_by_field() {
        let policy = |config| BreakerPolicy::new(config).unwrap();
        let p = policy(BreakerConfig {
            consecutive_failures: Some(MAX_COUNT + 1),
            ..BreakerConfig::layered_exercise()
        });
        let e = SharedBreaker::<_, NoWindow>::with_storage(&p).unwrap_err();
        assert_eq!(e.field, "consecutive_failures");
        let p = policy(BreakerConfig {
            half_open: HalfOpenConfig {
                max_in_flight: None,
                rule: ProbeRule::Rate { calls: 256 },
                ..HalfOpenConfig::default()
            },
            ..BreakerConfig::reliablekit()
        });
        let e = SharedBreaker::<_, AtomicCountWindow<64>>::with_storage(&p).unwrap_err();
        assert_eq!(e.field, "half_open.rule.calls");
        let p = policy(BreakerConfig {
            open: OpenConfig {
                duration: Duration::from_secs(1),
                growth: 1.000_000_001,
                max: Some(Duration::from_secs(3_600)),
                jitter: 0.0,
            },
            ..BreakerConfig::layered_exercise()
        });
        let e = SharedBreaker::<_, NoWindow>::with_storage(&p).unwrap_err();
        assert_eq!(e.field, "open.growth");
        let p = policy(BreakerConfig::resilience4j());
        let e = SharedBreaker::<_, AtomicCountWindow<100, 2>, 4>::with_storage(&p).unwrap_err();
        assert_eq!(e.field, "half_open.max_in_flight");
        assert!(SharedBreaker::<_, AtomicCountWindow<100, 2>, 10>::with_storage(&p).is_ok());
        let e = SharedBreaker::<_, NoWindow, 10>::with_storage(&p).unwrap_err();
        assert_eq!(e.field, "window");
    }
}

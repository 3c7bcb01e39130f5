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
use core::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};

use super::atomic_window::{AtomicCountWindow, AtomicWindow, Line};
use super::config::{BreakerPolicy, FP_ONE, ProbeRule};
use super::observer::Observer;
use super::spec::{
    self, Command, Decision, Event, FIRST_LEASE, NOT_A_PROBE, Outcome, Permit, ProbeRound,
    RejectReason, Rejection, Snapshot, State, Target, Transition, UNLEASED_PROBE, View,
    counts_in_window, jitter_sample, open_left, quiet_result, refuse, round_has_room, step, tally,
    visible,
};
use super::window::Counts;
use crate::error::{ConfigError, Problem};
use crate::sample::instance_seed;
use crate::sync::{AtomicU64, zeroed};
use crate::time::{Duration, Instant};

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
/// Closed: ramping. Open: opened by hand, until the `deadline` word. Forced open / disabled: the
/// count holds consecutive failures, not re-opens.
const FLAG: u64 = 1 << 3;
const COUNT_SHIFT: u32 = 4;

/// The control word's code for `state`.
const fn code_of(state: State) -> u64 {
    match state {
        State::Closed => CLOSED,
        State::Open => OPEN,
        State::HalfOpen => HALF_OPEN,
        State::ForcedOpen => FORCED_OPEN,
        State::Disabled => DISABLED,
    }
}

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
/// Being claimed by a probe, or held by one whose result is being reported.
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

/// The tallies of a half-open round in one 32-bit word: [`ProbeRule::Consecutive`] uses all 32
/// bits for successes; [`ProbeRule::Rate`] packs successes, failures, slow probes and probes issued
/// in 8 bits each.
fn pack(r: ProbeRound, rate: bool) -> u32 {
    if rate {
        let b = |n: u32| n.min(MAX_RATE_CALLS);
        b(r.successes) | b(r.failures) << 8 | b(r.slow) << 16 | b(r.issued) << 24
    } else {
        r.successes
    }
}

fn unpack(v: u32, rate: bool) -> ProbeRound {
    if rate {
        ProbeRound {
            successes: v & 0xff,
            failures: (v >> 8) & 0xff,
            slow: (v >> 16) & 0xff,
            issued: v >> 24,
        }
    } else {
        ProbeRound {
            successes: v,
            ..ProbeRound::default()
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
///   since, and slots of an earlier round are free without being cleared. A probe's slot stays
///   taken while its result is tallied and decided, and a probe claimed meanwhile checks that its
///   round is still on, so no probe is admitted into a round its predecessor's result just ended.
///   The round's tallies (successes, failures, slow probes, probes issued) are one
///   generation-tagged word; the instant it began (for `max_wait`) an atomic maximum written
///   before the transition is published, kept apart from the open time's start, which a call
///   still reading the open state may be computing from.
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
/// 256 bytes with a 64-call count window, the jitter seed riding on the latest `now`'s line.)
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
/// - counts never exceed the window, and `retry_after` never exceeds the maximum open time (by
///   more than the 1 ns of `strictly_after`) unless an operator opened it for longer.
///
/// The model checks (`loom`, every interleaving of two or three threads over short histories, up
/// to two preemptions each; CI job `loom`) check these, and that each such history is one that
/// some order of the same calls, one at a time, gives on a [`CircuitBreaker`](super::CircuitBreaker)
/// (an acquire that finds the open time over counts as the spec's two steps, → half-open and then
/// the decision, which other calls may come between), when racing calls pass the same `now`.
///
/// Not guaranteed (these are races in the caller's own history, with no sequential order to match):
/// - a result that races a state change is judged by the state it read: it may be ignored though
///   the change came "after" it, or it may land in the window that a close is clearing (and
///   survive the clear, or be lost with it);
/// - when calls race a trip, the open time starts at the latest `now` among the racing trip
///   attempts, not necessarily the winner's;
/// - a reader racing a writer may see the window's counts without that writer's call, and a time
///   window's bucket rolling over may drop a racing call; in a count window, two calls a lap apart
///   (more calls than the window holds recorded while one is being written) may interleave their
///   writes to one position and lose both outcomes (the model checks find it with a window of 2
///   and 3 threads);
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
    /// The `now` of the latest transition into open or a slow-start ramp (an atomic maximum).
    since: AtomicU64,
    /// The half-open round's [`Tallies`], tagged with its generation.
    round: AtomicU64,
    /// Slow-start credit in ppm of one call, tagged with the generation of the close.
    credit: AtomicU64,
    /// Open by hand (the control word's flag): when the open time is up, written before the
    /// transition is published.
    deadline: AtomicU64,
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
    latest: Line<Clock>,
    window: W,
}

/// The latest `now`, and beside it two words read off the hot path: the open-time jitter's seed
/// (it never changes; read only when an open time is computed) and when the half-open round began
/// (written once a round). Sharing the line costs them nothing, and the breaker keeps to four
/// cache lines with a 64-call window.
#[derive(Debug)]
#[repr(C)]
struct Clock {
    now: AtomicU64,
    seed: u64,
    /// When the latest half-open round began (an atomic maximum, written before the transition is
    /// published): read only by half-open acquires, written once a round.
    round_began: AtomicU64,
}

impl<R: Borrow<BreakerPolicy>> SharedBreaker<R> {
    /// A breaker for `policy` (closed, unless its `initial_state` says otherwise) with the default storage: a 64-call window and one probe
    /// slot. Fails as [`with_storage`](Self::with_storage) does. Its open-time jitter gets a seed of
    /// its own, as for [`CircuitBreaker::new`](super::CircuitBreaker::new).
    pub fn new(policy: R) -> Result<Self, ConfigError> {
        Self::with_storage(policy)
    }
}

impl<R: Borrow<BreakerPolicy>, W: AtomicWindow, const P: usize, O: Observer + Default>
    SharedBreaker<R, W, P, O>
{
    /// A breaker for `policy` (closed, unless its `initial_state` says otherwise) with window `W` and `P` probe slots, named in the type. Fails if
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
        let initial = code_of(policy.initial_state);
        Ok(SharedBreaker {
            hot: Hot {
                latest: Line(Clock {
                    now: AtomicU64::new(0),
                    seed: instance_seed(),
                    round_began: AtomicU64::new(0),
                }),
                window,
            },
            policy: policy_holder,
            observer: O::default(),
            control: AtomicU64::new(Ctl::new(initial, false, 0, 0).0),

            since: AtomicU64::new(0),
            round: AtomicU64::new(0),
            credit: AtomicU64::new(0),
            deadline: AtomicU64::new(0),
            slots: zeroed(),
            expires: zeroed(),
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
            since: self.since,
            round: self.round,
            credit: self.credit,
            deadline: self.deadline,
            slots: self.slots,
            expires: self.expires,
        }
    }

    /// Sets the seed of the open-time jitter (see
    /// [`CircuitBreaker::with_seed`](super::CircuitBreaker::with_seed)).
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.hot.latest.0.seed = seed;
        self
    }

    /// The seed of the open-time jitter.
    pub fn seed(&self) -> u64 {
        self.hot.latest.seed
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
            probe_round: self.probe_round(),
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
        let seen = self.hot.latest.now.load(Relaxed);
        if now <= seen {
            return Instant::from_nanos(seen);
        }
        self.hot.latest.now.store(now, Relaxed);
        Instant::from_nanos(now)
    }

    #[inline]
    fn query_time(&self, now: Instant) -> Instant {
        now.max(Instant::from_nanos(self.hot.latest.now.load(Relaxed)))
    }

    /// When an open breaker in `c` turns half-open.
    fn until(&self, c: Ctl) -> Instant {
        if c.flag() {
            return Instant::from_nanos(self.deadline.load(Acquire));
        }
        // The jitter draw of the opening that left generation `c - 1`, as the `&mut` breaker does.
        let sample = jitter_sample(self.hot.latest.seed, c.generation().wrapping_sub(1));
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
        } else if to.code() == HALF_OPEN {
            // Not in `since`: a call still reading the open state computes its open time from it.
            self.hot
                .latest
                .round_began
                .fetch_max(now.as_nanos(), Release);
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
        visible(self.policy(), c.state(), self.query_time(now), || {
            self.until(c)
        })
    }

    /// While the breaker is open at `now`, how long until it admits a probe; `None` otherwise.
    /// Changes nothing (an acquire at `now` would be rejected with this `retry_after`).
    pub fn retry_after(&self, now: Instant) -> Option<Duration> {
        let c = self.load();
        spec::retry_after(self.policy(), c.state(), self.query_time(now), || {
            self.until(c)
        })
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
        self.in_flight(self.load().generation())
    }

    /// The generation: it changes on every state change, and permits from an older one are ignored.
    pub fn generation(&self) -> u32 {
        self.load().generation()
    }

    /// The half-open round's tallies so far (all zero outside half-open; see [`ProbeRound`]).
    pub fn probe_round(&self) -> ProbeRound {
        let c = self.load();
        self.round(c.generation())
            .readable(self.policy(), c.state())
    }

    #[inline]
    fn permit(generation: u32, lease: u32, now: Instant) -> Permit {
        Permit::new(generation, lease, now)
    }

    /// Asks to make one call. On `Ok`, make the call and hand the permit back to
    /// [`record`](Self::record).
    #[inline(always)]
    pub fn try_acquire(&self, now: Instant) -> Result<Permit, Rejection> {
        let now = self.observe_now(now);
        let c = self.load();
        if c.code() == CLOSED && !c.flag() {
            return Ok(Self::permit(c.generation(), NOT_A_PROBE, now));
        }
        self.acquire_slow(c, now)
    }

    /// A permit if the breaker is closed and not in a slow-start ramp, judged without the time
    /// (such a breaker admits every call, whenever it comes); `None` otherwise, having changed
    /// nothing. For callers that read the clock only when they must: on `None`, read it and ask
    /// [`try_acquire`](Self::try_acquire). The permit is stamped with the latest time the breaker
    /// has seen.
    #[inline(always)]
    pub fn try_acquire_closed(&self) -> Option<Permit> {
        let c = self.load();
        (c.code() == CLOSED && !c.flag()).then(|| {
            let seen = Instant::from_nanos(self.hot.latest.now.load(Relaxed));
            Self::permit(c.generation(), NOT_A_PROBE, seen)
        })
    }

    #[inline(never)]
    fn acquire_slow(&self, mut c: Ctl, now: Instant) -> Result<Permit, Rejection> {
        // Whether this call made a transition already: it makes at most one.
        let mut caused = false;
        loop {
            match self.acquire_step(c, now, &mut caused) {
                Step::Done(Ok(permit)) => return Ok(permit),
                Step::Done(Err(reason)) => {
                    let g = self.load().generation();
                    return refuse(self.policy(), &self.observer, reason, g, now);
                }
                Step::Retry => c = self.load(),
            }
        }
    }

    /// What the rules read, from control word `c` as of `now`; `credit` and `round` are those of
    /// `c`'s generation. Only what the state can use is loaded.
    #[inline(always)]
    fn view(&self, c: Ctl, now: Instant, credit: u32, round: ProbeRound) -> View {
        let state = c.state();
        let closed = c.code() == CLOSED;
        let ramping = closed && c.flag();
        View {
            state,
            now,
            until: if state == State::Open {
                self.until(c)
            } else {
                Instant::ZERO
            },
            ramping,
            elapsed: if ramping {
                now.saturating_duration_since(Instant::from_nanos(self.since.load(Acquire)))
            } else if state == State::HalfOpen {
                let began = self.hot.latest.round_began.load(Acquire);
                now.saturating_duration_since(Instant::from_nanos(began))
            } else {
                crate::time::Duration::ZERO
            },
            credit,
            // Only a closed breaker's results read it.
            consecutive: if closed { c.count() } else { 0 },
            round,
            in_flight: if state == State::HalfOpen {
                self.in_flight(c.generation())
            } else {
                0
            },
        }
    }

    /// The control word a decided change of state leads to from `c`.
    fn target(&self, c: Ctl, target: Target) -> Ctl {
        match target {
            // Closed always has zero re-opens.
            Target::Trip => c.next(OPEN, false, 0),
            Target::Reopen => c.next(OPEN, false, c.count().saturating_add(1)),
            Target::HalfOpen => c.next(HALF_OPEN, false, c.reopens()),
            Target::Close => c.next(CLOSED, !self.policy().ramp.is_zero(), 0),
            Target::OpenByHand => c.next(OPEN, true, c.reopens()),
            Target::ForceOpen => c.manual(FORCED_OPEN),
            Target::Disable => c.manual(DISABLED),
            Target::Reset => c.next(CLOSED, false, 0),
        }
    }

    /// One pass of an acquire: read the state, ask the rules, try to carry the decision out.
    fn acquire_step(
        &self,
        c: Ctl,
        now: Instant,
        caused: &mut bool,
    ) -> Step<Result<Permit, RejectReason>> {
        let policy = self.policy();
        let g = c.generation();
        let mut decision = Decision::Nothing;
        if c.code() == HALF_OPEN && !*caused {
            // Leases that ran out count as failed probes, each counted by the call that frees it.
            // A call that already made a transition leaves them to the next call.
            let expired = self.expire_leases(g, now);
            if expired > 0 {
                let event = Event::Expired(expired);
                let Ok(Some((before, _))) = self.update_round(g, |t| Some(tally(policy, t, event)))
                else {
                    return Step::Retry;
                };
                decision = step(policy, self.view(c, now, 0, before), event);
            }
        }
        let (credit_word, credit) = if c.code() == CLOSED && c.flag() {
            match self.credit_of(g) {
                Some(w) => w,
                None => return Step::Retry,
            }
        } else {
            (0, 0)
        };
        if decision == Decision::Nothing {
            decision = step(
                policy,
                self.view(c, now, credit, self.round(g)),
                Event::Acquire,
            );
        }
        match decision {
            Decision::Admit { probe: false } => Step::Done(Ok(Self::permit(g, NOT_A_PROBE, now))),
            Decision::Admit { probe: true } => self.claim_probe(c, now),
            Decision::Reject(reason) => Step::Done(Err(reason)),
            Decision::Ramp { admit, credit } => match self.credit.compare_exchange_weak(
                credit_word,
                tagged(g, credit),
                AcqRel,
                Acquire,
            ) {
                Ok(_) if admit => Step::Done(Ok(Self::permit(g, NOT_A_PROBE, now))),
                Ok(_) => Step::Done(Err(RejectReason::SlowStart)),
                Err(_) => Step::Retry,
            },
            Decision::RampDone => {
                let done = Ctl::new(CLOSED, false, c.count(), g);
                match self.control.compare_exchange(c.0, done.0, AcqRel, Acquire) {
                    Ok(_) => Step::Done(Ok(Self::permit(g, NOT_A_PROBE, now))),
                    Err(_) => Step::Retry,
                }
            }
            // A call that made a transition and lost a race since rejects rather than make a
            // second one.
            Decision::Go(_) if *caused => Step::Done(Err(RejectReason::HalfOpenFull)),
            Decision::Go(target) => {
                let to = self.target(c, target);
                if self.go(c, to, now).is_err() {
                    return Step::Retry;
                }
                *caused = true;
                if target == Target::Reopen {
                    // The call whose expired probes re-opened it is rejected as open.
                    return Step::Done(Err(RejectReason::Open {
                        retry_after: open_left(policy, now, self.until(to)),
                    }));
                }
                // Decide again in the new state.
                Step::Retry
            }
            // The expired probes left the round undecided (their tallies are written).
            Decision::Consecutive(_) | Decision::Tally(_) | Decision::Nothing => Step::Retry,
        }
    }

    /// The slow-start credit word and the credit of generation `g` (0 if the word is of an older
    /// one); `None` if the state moved on.
    fn credit_of(&self, g: u32) -> Option<(u64, u32)> {
        let w = self.credit.load(Acquire);
        if (w >> 32) as u32 == g {
            Some((w, w as u32))
        } else if self.load().generation() != g {
            None
        } else {
            Some((w, 0))
        }
    }

    /// Probes of generation `g` holding a lease.
    fn in_flight(&self, g: u32) -> u32 {
        self.slots
            .iter()
            .filter(|s| {
                let w = s.load(Acquire);
                slot_generation(w) == g && slot_state(w) != SLOT_FREE
            })
            .count() as u32
    }

    /// Frees the leases of generation `g` that ran out by `now`; returns how many this call freed.
    fn expire_leases(&self, g: u32, now: Instant) -> u32 {
        let slots = self
            .slots
            .get(..self.policy().max_in_flight as usize)
            .unwrap_or(&[]);
        let mut expired = 0u32;
        for (slot, expires) in slots.iter().zip(&self.expires) {
            let w = slot.load(Acquire);
            if slot_generation(w) == g
                && slot_state(w) == SLOT_LEASED
                && expires.load(Relaxed) <= now.as_nanos()
                && slot.compare_exchange(w, w & !0b11, AcqRel, Relaxed).is_ok()
            {
                expired += 1;
            }
        }
        expired
    }

    /// Updates the tallies of the round of generation `g` with `f` (which may refuse with `None`):
    /// the tallies before and after. `Err` if the round is over (the state moved on).
    fn update_round(
        &self,
        g: u32,
        f: impl Fn(ProbeRound) -> Option<ProbeRound>,
    ) -> Result<Option<(ProbeRound, ProbeRound)>, ()> {
        let rate = matches!(self.policy().rule, ProbeRule::Rate { .. });
        let mut w = self.round.load(Acquire);
        loop {
            let current = if (w >> 32) as u32 == g {
                unpack(w as u32, rate)
            } else if self.load().generation() != g {
                return Err(());
            } else {
                ProbeRound::default()
            };
            let Some(next) = f(current) else {
                return Ok(None);
            };
            match self
                .round
                .compare_exchange_weak(w, tagged(g, pack(next, rate)), AcqRel, Acquire)
            {
                Ok(_) => return Ok(Some((current, next))),
                Err(x) => w = x,
            }
        }
    }

    fn round(&self, g: u32) -> ProbeRound {
        let w = self.round.load(Acquire);
        if (w >> 32) as u32 == g {
            unpack(
                w as u32,
                matches!(self.policy().rule, ProbeRule::Rate { .. }),
            )
        } else {
            ProbeRound::default()
        }
    }

    /// Claims a lease slot for a probe the rules admitted in `c`.
    fn claim_probe(&self, c: Ctl, now: Instant) -> Step<Result<Permit, RejectReason>> {
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
        // The first free slot among the first `max_in_flight` (none: another call took it).
        let Some((index, slot, w)) = slots.iter().enumerate().find_map(|(i, s)| {
            let w = s.load(Acquire);
            (slot_generation(w) != g || slot_state(w) == SLOT_FREE).then_some((i, s, w))
        }) else {
            return Step::Retry;
        };
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
        if matches!(policy.rule, ProbeRule::Rate { .. }) {
            // Issue it in the round's tallies, if the round still has room for it.
            match self.update_round(g, |t| {
                round_has_room(policy, t).then(|| tally(policy, t, Event::Acquire))
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
        if self.load().generation() != g {
            // The round ended while the slot was being claimed (a probe's result, reported
            // before it freed this slot, closed or re-opened the breaker): not a probe of it.
            return Step::Retry;
        }
        Step::Done(Ok(Self::permit(g, lease_of(index, seq), now)))
    }

    /// Reports how a permitted call ended. A state change it causes goes to the observer. Results
    /// from permits of an earlier generation are ignored.
    #[inline(always)]
    pub fn record(&self, permit: Permit, outcome: Outcome, now: Instant) {
        let now = self.observe_now(now);
        let c = self.load();
        if permit.generation != c.generation() {
            return;
        }
        // A closed breaker's results stay inline (they are most results); the rest is out of line.
        // Both ask the same rules.
        if c.code() == CLOSED {
            let slow = self.policy().is_slow(permit.started, now);
            // A healthy downstream's call: a good one, which the window takes only while it holds
            // no bad call, so that its counts with this call hold none either: a quiet result,
            // which leaves the breaker as it is. (Counting the window's bits is the costly part.)
            if outcome == Outcome::Success
                && !slow
                && quiet_result(State::Closed, c.count(), outcome, Counts::default())
                && self.hot.window.record_good_if_clear(now)
            {
                return;
            }
            self.record_result(c, outcome, slow, now);
        } else {
            self.record_slow(c, &permit, outcome, now);
        }
    }

    /// Reports how a permitted call ended, with the latency the caller measured itself (from its
    /// own clock, or one the call reported) rather than from the permit to `now`: the slow-call
    /// rule judges `latency`. Otherwise as [`record`](Self::record).
    pub fn record_latency(
        &self,
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
    fn record_slow(&self, c: Ctl, permit: &Permit, outcome: Outcome, now: Instant) {
        let held = if c.state() == State::HalfOpen {
            match self.hold(c, permit) {
                Some(held) => held,
                // Its lease expired and already counted as a failed probe.
                None => return,
            }
        } else {
            None
        };
        let slow = self.policy().is_slow(permit.started, now);
        self.record_result(c, outcome, slow, now);
        if let Some((slot, reporting)) = held {
            // Only now, after the result is tallied and decided: a caller that takes this slot
            // sees the round as this result left it (a round it closed or re-opened is over).
            let free = reporting & !0b11;
            let _ = slot.compare_exchange(reporting, free, AcqRel, Relaxed);
        }
    }

    /// A result: recorded in the window if it counts there, then decided by the rules.
    #[inline(always)]
    fn record_result(&self, c: Ctl, outcome: Outcome, slow: bool, now: Instant) {
        let state = c.state();
        let policy = self.policy();
        let window = if counts_in_window(state, outcome) {
            let window = &self.hot.window;
            let calls = window.record(now, outcome == Outcome::Failure, slow);
            // Counting the bits is the costly part of an atomic window: only when the rules can
            // decide, and only the kinds they read.
            match policy.counts_needed(calls) {
                Some((f, s)) => window.counts_of(now, f, s),
                None => Counts {
                    calls,
                    ..Counts::default()
                },
            }
        } else {
            Counts::default()
        };
        let event = Event::Result {
            outcome,
            slow,
            window,
        };
        if state == State::HalfOpen {
            self.record_probe(c, event, now)
        } else {
            self.record_other(c, event, now)
        }
    }

    /// A result outside half-open: carried out on the control word, retried while only the
    /// counter changed under it.
    #[inline(always)]
    fn record_other(&self, mut c: Ctl, event: Event, now: Instant) {
        let g = c.generation();
        loop {
            let done = match step(
                self.policy(),
                self.view(c, now, 0, ProbeRound::default()),
                event,
            ) {
                Decision::Go(target) => self.go(c, self.target(c, target), now).is_ok(),
                Decision::Consecutive(consecutive) if consecutive != c.count() => {
                    let next = Ctl::new(c.code(), c.flag(), consecutive, g);
                    self.control
                        .compare_exchange(c.0, next.0, AcqRel, Acquire)
                        .is_ok()
                }
                _ => true,
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

    /// A probe's result: counted in the round's tallies by compare-and-swap, then decided on the
    /// tallies it replaced.
    #[inline(never)]
    fn record_probe(&self, c: Ctl, event: Event, now: Instant) {
        let policy = self.policy();
        let Ok(Some((before, _))) =
            self.update_round(c.generation(), |t| Some(tally(policy, t, event)))
        else {
            return;
        };
        if let Decision::Go(target) = step(policy, self.view(c, now, 0, before), event) {
            let _ = self.go(c, self.target(c, target), now);
        }
    }

    /// Holds the slot of a probe's lease while its result is reported (the slot is still in
    /// use, and no longer expires): the slot and the word that marks it so, `Some(None)` for a
    /// permit without a lease, `None` if the lease already expired.
    fn hold(&self, c: Ctl, permit: &Permit) -> Option<Option<(&AtomicU64, u64)>> {
        if permit.lease < FIRST_LEASE {
            return Some(None);
        }
        let g = c.generation();
        let lease = permit.lease - FIRST_LEASE;
        let (index, seq) = ((lease & 63) as usize, u64::from(lease >> 6));
        let slot = self.slots.get(index)?;
        let reporting = slot_word(g, seq, SLOT_CLAIMING);
        slot.compare_exchange(slot_word(g, seq, SLOT_LEASED), reporting, AcqRel, Relaxed)
            .ok()
            .map(|_| Some((slot, reporting)))
    }

    /// Carries out an operator's command as the rules decide it, from whatever state the breaker
    /// is in; false if they refuse it (a closed breaker told to go half-open).
    fn command(&self, command: Command, now: Instant) -> bool {
        let now = self.observe_now(now);
        loop {
            let c = self.load();
            let view = self.view(c, now, 0, ProbeRound::default());
            let Decision::Go(target) = step(self.policy(), view, Event::Command(command)) else {
                return false;
            };
            if let Command::OpenUntil(until) = command {
                // Before publishing, as for `since`. Two commands racing may leave either's
                // deadline with the other's state change: an operator's race, not the rules'.
                self.deadline.store(until.as_nanos(), Release);
            }
            if self.go(c, self.target(c, target), now).is_ok() {
                return true;
            }
        }
    }

    /// Opens the breaker by hand until `until`; then it probes as after a trip. Permits already
    /// out become stale.
    pub fn open_until(&self, until: Instant, now: Instant) {
        self.command(Command::OpenUntil(until), now);
    }

    /// Opens the breaker by hand for `duration` from `now` (see [`open_until`](Self::open_until)).
    pub fn open_for(&self, duration: Duration, now: Instant) {
        let now = self.observe_now(now);
        self.open_until(now.saturating_add(duration), now)
    }

    /// Half-open now, with a fresh probe round, from any state but closed; false (nothing changed)
    /// if the breaker is closed, which has nothing to probe.
    pub fn half_open(&self, now: Instant) -> bool {
        self.command(Command::HalfOpen, now)
    }

    /// Closes the breaker by hand, as probes that succeeded would: window and counters cleared,
    /// slow start if configured. Permits already out become stale.
    pub fn close(&self, now: Instant) {
        self.command(Command::Close, now);
    }

    /// Opens the breaker by hand until [`reset`](Self::reset). Permits already out become stale.
    pub fn force_open(&self, now: Instant) {
        self.command(Command::ForceOpen, now);
    }

    /// Switches the breaker off until [`reset`](Self::reset): every call is admitted and outcomes
    /// only feed the window's metrics.
    pub fn disable(&self, now: Instant) {
        self.command(Command::Disable, now);
    }

    /// Back to closed with nothing remembered: window, counters and open-time growth cleared, no
    /// slow start. Permits already out become stale.
    pub fn reset(&self, now: Instant) {
        self.command(Command::Reset, now);
    }
}

#[cfg(all(test, not(loom)))]
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
        let t = ProbeRound {
            successes: 3,
            failures: 255,
            slow: 0,
            issued: 200,
        };
        assert_eq!(unpack(pack(t, true), true), t);
        let c = ProbeRound {
            successes: u32::MAX,
            ..ProbeRound::default()
        };
        assert_eq!(unpack(pack(c, false), false), c);
        for (slot, seq) in [(0usize, 0u64), (63, SEQ_MASK), (5, 1234)] {
            let lease = lease_of(slot, seq) - FIRST_LEASE;
            assert_eq!(((lease & 63) as usize, u64::from(lease >> 6)), (slot, seq));
        }
    }

    #[test]
    fn a_permit_without_the_time_only_while_plainly_closed() {
        let p = BreakerPolicy::new(BreakerConfig {
            consecutive_failures: Some(1),
            slow_start: Some(crate::breaker::SlowStartConfig {
                ramp: Duration::from_secs(10),
                initial: 0.5,
            }),
            ..BreakerConfig::layered_exercise()
        })
        .unwrap();
        let b = SharedBreaker::<_, NoWindow>::with_storage(&p).unwrap();
        let t = Instant::from_secs;
        // Closed: the same permit `try_acquire` gives at the latest time seen.
        let first = b.try_acquire(t(5)).unwrap();
        let quick = b.try_acquire_closed().unwrap();
        assert_eq!(quick, first);
        b.record(quick, Outcome::Success, t(5));
        // Open, half-open, ramping, forced open, disabled: `None`, and nothing moves.
        let tripped = b.try_acquire(t(6)).unwrap();
        b.record(tripped, Outcome::Failure, t(6));
        let unmoved = |b: &SharedBreaker<_, NoWindow>| {
            let (g, s) = (b.generation(), b.snapshot(t(6)));
            assert_eq!(b.try_acquire_closed(), None);
            assert_eq!((b.generation(), b.snapshot(t(6))), (g, s));
        };
        assert_eq!(b.state(t(6)), State::Open);
        unmoved(&b);
        let probe = b.try_acquire(t(3_600)).unwrap();
        assert!(probe.is_probe());
        unmoved(&b);
        b.record(probe, Outcome::Success, t(3_600));
        assert_eq!(b.state(t(3_600)), State::Closed);
        unmoved(&b);
        b.force_open(t(3_600));
        unmoved(&b);
        b.disable(t(3_600));
        unmoved(&b);
        b.reset(t(3_600));
        assert!(b.try_acquire_closed().is_some());
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
                strictly_after: false,
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

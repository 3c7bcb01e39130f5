//! A fleet's breaker: one breaker for every client instance, kept in a store the scenario
//! declares, decided as `reliable::fleet::FleetBreaker` decides.
//!
//! A breaker node of `Fleet` scope keeps `1 + clients` core breakers in its [`Breakers`]: number 0
//! is the store's (the fleet's state: a store runs the core's breaker, as `reliable::fleet`'s
//! `MemoryStore` does and its Redis scripts transcribe), number `1 + c` is client `c`'s own, fed
//! with its own results, which decides while the store fails. Each client also keeps a
//! [`FleetClient`]: when it leaves the store alone, what it saw while the store failed, and its
//! cached view.
//!
//! The rules, `reliable::fleet`'s (`fleet_breaker.rs`, `guard.rs`):
//!
//! - **Exact**: a decision is a round trip to the store, and the attempt waits for it (its
//!   round trip, at most `wait`). The result goes to the store in another round trip.
//! - **Cached**, as a `Reliable` decides (`FleetBreaker::decide`: the call engine never waits for a
//!   round trip, and a policy file's `Fleet` scope reaches a service through it): a decision is
//!   made at once on the client's view of the store's state. A view older than `refresh` starts
//!   a refresh (one at a time, in the background) that sends the results admitted on the view and
//!   reads the state; its answer is the view one round trip later. A view that aged because no
//!   call came is still the fleet's last word (its open gate is one the client's own breaker knows
//!   nothing of); once the store has failed, a view older than `2 × refresh + wait` is not
//!   trusted and the decision is the fallback's. No view yet: the client's own breaker decides,
//!   and its results go to the store with the first refresh (which reads the generation first).
//!   A view that says half-open (or open with its time up): probes are the store's, so the call is
//!   refused and the refresh it starts asks the store for one, which the client's next call takes
//!   once the answer is back; a probe no call takes within `refresh` is given back as ignored.
//! - **The store fails** (an outage, a round trip longer than `wait`, the client's own network
//!   down): the decision is the fallback's: the client's own breaker (`Local`, fail open) or a
//!   refusal (`Refuse`, fail closed). The client leaves the store alone for [`REST_NS`], then asks
//!   it again. Results its own breaker admitted meanwhile are kept (at most [`OUTAGE_KEPT`]) and
//!   replayed into the store's breaker when the store answers again (while the fleet's breaker
//!   is closed and in the generation it was then), as `reconcile` does.
//! - A result whose operation timed out on a store that runs slowly was counted there (the
//!   store ran it, the answer came late); on a store that hangs it was not; a result whose
//!   operation surely did not reach the store (resting, refused) is kept for the replay.
//!
//! Where the simulator is simpler than a service, on purpose: the store decides at the moment
//! the client asks (not half a round trip later); a result's round trip does not delay the
//! answer going up (a service awaits it: at most `wait` more latency); the replay after an
//! outage takes effect at once (a service spends two more round trips on it); while a client's
//! first ask after a rest is out, its other calls ask too (a service lets one through); a probe
//! no call took is given back at the client's next decision after its hold, not on a timer. Each
//! of these is below a round trip (the last, below the time between a client's calls), against
//! breaker windows of seconds.

use reliable_core::breaker::{Outcome, Permit, State, Transition};
use reliable_core::policy::{FleetMode, FleetScope, OnStoreFailure};
use reliable_core::{Duration, Instant};

use crate::client::breakers::Breakers;
use crate::engine::{Stream, StreamId};
use crate::model::Sampler;
use crate::scenario::{OutageMode, Store, StoreFault};

/// How long a client leaves its store alone after a failure (`reliable::fleet::FleetConfig`'s
/// `rest`, default 250 ms).
pub const REST_NS: u64 = 250_000_000;
/// Results kept while the store fails, to replay when it answers (the oldest are dropped), as
/// `reliable::fleet` keeps.
pub const OUTAGE_KEPT: usize = 4096;
/// Cached results sent early when this many wait for the next refresh.
pub const PENDING_FLUSH: usize = 256;

/// A store as one run sees it: its round trips and its faults.
#[derive(Debug)]
pub struct StoreSim {
    round_trip: Sampler,
    rng: Stream,
    /// `(from, until, fault)`, in ns.
    faults: Vec<(u64, u64, StoreFault)>,
}

/// How one operation sent to a store at some time goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reach {
    /// It answers after this round trip (ns).
    Answer(u64),
    /// It never answers (a store that hangs).
    Hang,
    /// It fails at once (refused).
    Refused,
}

impl StoreSim {
    /// Store number `index` of a run with seed `seed`.
    pub fn new(store: &Store, index: u16, seed: u64) -> Self {
        StoreSim {
            round_trip: Sampler::new(&store.round_trip),
            rng: Stream::new(seed, StreamId::Store(index)),
            faults: store
                .faults
                .iter()
                .map(|f| {
                    let (from, until) = f.window();
                    (from.as_nanos(), until.as_nanos(), f.clone())
                })
                .collect(),
        }
    }

    fn op(&mut self, now: u64) -> Reach {
        let mut extra = 0u64;
        for (from, until, f) in &self.faults {
            if !(*from..*until).contains(&now) {
                continue;
            }
            match f {
                StoreFault::Outage { mode, .. } => {
                    return match mode {
                        OutageMode::Hang => Reach::Hang,
                        OutageMode::FailFast => Reach::Refused,
                    };
                }
                StoreFault::Slow { extra: e, .. } => extra = extra.saturating_add(e.as_nanos()),
            }
        }
        Reach::Answer(self.round_trip.sample(self.rng.rng()).saturating_add(extra))
    }
}

/// What a client's fleet decisions and its store did in one run (summed over clients).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FleetCounters {
    /// Operations sent to a store.
    pub store_ops: u64,
    /// Of which failed (timed out, refused, or the client's network down).
    pub store_failures: u64,
    /// Calls decided by the store (exact, or a half-open probe).
    pub by_store: u64,
    /// Calls decided on a cached view.
    pub by_cache: u64,
    /// Calls decided by the client's own breaker because the store failed, rested or the view
    /// was too old.
    pub by_local: u64,
    /// Calls refused because the store failed and the scope fails closed.
    pub store_refusals: u64,
    /// Results replayed into the store's breaker when it answered again.
    pub reconciled: u64,
    /// Decisions that waited for the store, and their total and longest wait (ns).
    pub waits: u64,
    /// Total wait, ns.
    pub wait_ns: u64,
    /// Longest wait, ns.
    pub longest_wait_ns: u64,
    /// Times the store's breaker (the fleet's) opened.
    pub fleet_opens: u64,
    /// When it first opened, ns.
    pub first_fleet_open_ns: Option<u64>,
}

/// Who decided a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decider {
    /// The store, in one round trip.
    Store,
    /// The client, on its cached view.
    Cache,
    /// The client's own breaker.
    Local,
}

/// A call's permits: the store's (exact) and the client's own breaker's.
#[derive(Debug)]
pub struct Held {
    store: Option<Permit>,
    local: Option<Permit>,
    decider: Decider,
    generation: u32,
}

impl Held {
    /// Whether the call is a fleet-wide half-open probe (the store's), as
    /// `reliable::fleet::FleetPermit::is_probe` says.
    pub fn is_probe(&self) -> bool {
        self.store.as_ref().is_some_and(Permit::is_probe)
    }
}

/// Why a call was refused, and how long until one might be admitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The breaker's rules (the fleet's, or the client's own while the store fails).
    Breaker(Duration),
    /// The store failed and the scope fails closed.
    StoreUnavailable,
}

/// A decision: how long the call waited for the store (ns), and the permits or why not.
#[derive(Debug)]
pub struct Decision {
    /// The wait, at most the scope's `wait`.
    pub delay: u64,
    /// The permits, or the refusal.
    pub result: Result<Held, Refusal>,
}

/// How an operation the client sent ended, when it failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fate {
    /// It surely did not reach the store's state (resting, refused, the network down).
    Unsent,
    /// It timed out on a store that hangs: it did not run.
    Lost,
    /// It timed out on a slow store: it ran, its answer came late.
    Applied,
}

#[derive(Clone, Copy, Debug)]
struct View {
    /// When the answer it comes from arrived, ns.
    fetched: u64,
    state: State,
    generation: u32,
    /// While open: until when, ns.
    until: u64,
}

/// What a client knows of its store's health: `reliable::fleet`'s guard. After a failure the
/// store is left alone for [`REST_NS`]; it is down from a failure until the owner says it
/// answered again ([`StoreGuard::up`]).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct StoreGuard {
    /// The store is left alone until then (ns), after a failure.
    rest_until: u64,
    /// The store failed since it last answered.
    pub(crate) down: bool,
}

/// One operation's counts: sent, and of which failed.
pub(crate) struct OpCounts<'a> {
    pub(crate) ops: &'a mut u64,
    pub(crate) failures: &'a mut u64,
}

impl StoreGuard {
    /// One operation to `store` at `now`, waiting at most `wait`: its round trip, or how long
    /// the caller waited and what became of the operation.
    pub(crate) fn ask(
        &mut self,
        store: &mut StoreSim,
        network_down: bool,
        now: u64,
        wait: u64,
        counts: OpCounts<'_>,
    ) -> Result<u64, (u64, Fate)> {
        if now < self.rest_until {
            return Err((0, Fate::Unsent));
        }
        *counts.ops += 1;
        let reach = if network_down {
            Reach::Refused
        } else {
            store.op(now)
        };
        let failed = match reach {
            Reach::Answer(rtt) if rtt <= wait => return Ok(rtt),
            Reach::Answer(_) => (wait, Fate::Applied),
            Reach::Hang => (wait, Fate::Lost),
            Reach::Refused => (0, Fate::Unsent),
        };
        *counts.failures += 1;
        self.rest_until = now.saturating_add(failed.0).saturating_add(REST_NS);
        self.down = true;
        Err(failed)
    }

    /// The store answered again.
    pub(crate) fn up(&mut self) {
        self.down = false;
    }
}

/// The generation of results decided before the client's first view (sent with the first
/// refresh, in the generation it reads).
const BEFORE_VIEW: u32 = u32::MAX;

/// A probe (or, closed, a permit) a refresh took from the store for the client's next call.
#[derive(Debug)]
struct Reserved {
    permit: Permit,
    generation: u32,
    /// The answer is back then (ns): the next call from then on takes it.
    arrives: u64,
    /// Given back (as ignored) if no call took it by then (ns).
    until: u64,
}

/// One client's dealings with the store of one fleet breaker.
#[derive(Debug, Default)]
pub struct FleetClient {
    /// Its store's health; down: replay `kept` when it answers.
    guard: StoreGuard,
    /// Results decided without the store, to replay.
    kept: Vec<Outcome>,
    view: Option<View>,
    /// A refresh's answer, seen from its time on.
    incoming: Option<View>,
    /// A refresh is out until then (ns): one at a time.
    refreshing_until: u64,
    /// Results admitted on the view, with its generation, for the next refresh.
    pending: Vec<(u32, Outcome)>,
    /// A call met a half-open view: the next refresh asks the store for a probe.
    wants_probe: bool,
    /// The probe it took, for the next call.
    reserved: Option<Reserved>,
}

impl Clone for FleetClient {
    /// A fresh client's state (what a run starts each client with): a reserved permit is the
    /// store's and is never copied.
    fn clone(&self) -> Self {
        FleetClient {
            guard: self.guard,
            kept: self.kept.clone(),
            view: self.view,
            incoming: self.incoming,
            refreshing_until: self.refreshing_until,
            pending: self.pending.clone(),
            wants_probe: self.wants_probe,
            reserved: None,
        }
    }
}

/// Where a decision sends transitions: the breaker (0 is the store's) and the transition.
pub type Note<'a> = &'a mut dyn FnMut(usize, Option<Transition>);

/// Everything one decision touches.
pub struct Ctx<'a> {
    /// The scope's settings.
    pub scope: FleetScope,
    /// Its store.
    pub store: &'a mut StoreSim,
    /// The node's breakers: 0 is the store's, `1 + c` client `c`'s.
    pub breakers: &'a mut dyn Breakers,
    /// The client.
    pub client: u32,
    /// Whether the client's own network is down.
    pub network_down: bool,
    /// Now, ns.
    pub now: u64,
    /// The run's counters.
    pub counters: &'a mut FleetCounters,
}

impl Ctx<'_> {
    fn local(&self) -> usize {
        1 + self.client as usize
    }
    fn at(&self) -> Instant {
        Instant::from_nanos(self.now)
    }
    fn wait(&self) -> u64 {
        self.scope.wait.as_nanos()
    }
}

impl FleetClient {
    /// Bytes of one, empty (what a client keeps between outages).
    pub const BYTES: usize = std::mem::size_of::<FleetClient>();

    /// Asks to make one call.
    pub fn acquire(&mut self, cx: &mut Ctx<'_>, note: Note<'_>) -> Decision {
        match cx.scope.mode {
            FleetMode::Cached { refresh } => self.cached(cx, refresh.as_nanos(), note),
            FleetMode::Exact => self.exact(cx, note),
        }
    }

    /// While the fleet's breaker refuses this client's calls as it last saw it (open, its time
    /// not up), or, while the store fails, its own breaker (`local`) does: how long.
    pub fn refuses(
        &self,
        local: &dyn reliable_core::breaker::Breaker,
        now: u64,
    ) -> Option<Duration> {
        if self.guard.down {
            return local.retry_after(Instant::from_nanos(now));
        }
        let seen = match self.incoming {
            Some(v) if v.fetched <= now => Some(v),
            _ => self.view,
        };
        seen.filter(|v| v.state == State::Open && v.until > now)
            .map(|v| Duration::from_nanos(v.until - now))
    }

    /// Reports how a call it permitted ended.
    pub fn record(&mut self, held: Held, outcome: Outcome, cx: &mut Ctx<'_>, note: Note<'_>) {
        let at = cx.at();
        if let Some(p) = held.local {
            let t = cx.breakers.record(cx.local(), p, outcome, at);
            note(cx.local(), t);
        }
        match held.decider {
            Decider::Store => {
                let Some(p) = held.store else { return };
                match self.ask(cx) {
                    Ok(_) => {
                        let t = cx.breakers.record(0, p, outcome, at);
                        note(0, t);
                        self.reconcile(cx, note);
                    }
                    Err((_, Fate::Applied)) => {
                        let t = cx.breakers.record(0, p, outcome, at);
                        note(0, t);
                    }
                    Err((_, Fate::Unsent)) => self.keep(outcome),
                    // The store may have counted it: a result counts at most once.
                    Err((_, Fate::Lost)) => {}
                }
            }
            Decider::Cache => {
                self.pending.push((held.generation, outcome));
                if self.pending.len() >= PENDING_FLUSH {
                    let refresh = match cx.scope.mode {
                        FleetMode::Cached { refresh } => refresh.as_nanos(),
                        FleetMode::Exact => cx.wait(),
                    };
                    self.refresh(cx, refresh, note);
                }
            }
            Decider::Local => self.keep(outcome),
        }
    }

    /// One operation to the store at `cx.now`: its round trip, or how long the caller waited and
    /// what became of the operation.
    fn ask(&mut self, cx: &mut Ctx<'_>) -> Result<u64, (u64, Fate)> {
        let wait = cx.wait();
        let counts = OpCounts {
            ops: &mut cx.counters.store_ops,
            failures: &mut cx.counters.store_failures,
        };
        self.guard
            .ask(cx.store, cx.network_down, cx.now, wait, counts)
    }

    fn waited(cx: &mut Ctx<'_>, ns: u64) {
        if ns > 0 {
            cx.counters.waits += 1;
            cx.counters.wait_ns = cx.counters.wait_ns.saturating_add(ns);
            cx.counters.longest_wait_ns = cx.counters.longest_wait_ns.max(ns);
        }
    }

    fn exact(&mut self, cx: &mut Ctx<'_>, note: Note<'_>) -> Decision {
        let at = cx.at();
        match self.ask(cx) {
            Ok(rtt) => {
                Self::waited(cx, rtt);
                self.reconcile(cx, note);
                let (d, t) = cx.breakers.try_acquire(0, at);
                note(0, t);
                self.see(cx, cx.now.saturating_add(rtt));
                cx.counters.by_store += 1;
                let result = match d {
                    Ok(p) => Ok(Held {
                        store: Some(p),
                        local: self.local_permit(cx, note),
                        decider: Decider::Store,
                        generation: 0,
                    }),
                    Err(r) => Err(Refusal::Breaker(r.retry_after().unwrap_or(Duration::ZERO))),
                };
                Decision { delay: rtt, result }
            }
            Err((waited, fate)) => {
                Self::waited(cx, waited);
                if fate == Fate::Applied {
                    // The store ran it: a probe it leased stays out until its lease ends.
                    let (_, t) = cx.breakers.try_acquire(0, at);
                    note(0, t);
                }
                Decision {
                    delay: waited,
                    result: self.fallback(cx, note),
                }
            }
        }
    }

    fn local_permit(&mut self, cx: &mut Ctx<'_>, note: Note<'_>) -> Option<Permit> {
        let (d, t) = cx.breakers.try_acquire(cx.local(), cx.at());
        note(cx.local(), t);
        d.ok()
    }

    fn fallback(&mut self, cx: &mut Ctx<'_>, note: Note<'_>) -> Result<Held, Refusal> {
        match cx.scope.on_store_failure {
            OnStoreFailure::Refuse => {
                cx.counters.store_refusals += 1;
                Err(Refusal::StoreUnavailable)
            }
            OnStoreFailure::Local => {
                cx.counters.by_local += 1;
                let (d, t) = cx.breakers.try_acquire(cx.local(), cx.at());
                note(cx.local(), t);
                match d {
                    Ok(p) => Ok(Held {
                        store: None,
                        local: Some(p),
                        decider: Decider::Local,
                        generation: 0,
                    }),
                    Err(r) => Err(Refusal::Breaker(r.retry_after().unwrap_or(Duration::ZERO))),
                }
            }
        }
    }

    fn keep(&mut self, outcome: Outcome) {
        if outcome == Outcome::Ignored {
            return;
        }
        if self.kept.len() >= OUTAGE_KEPT {
            self.kept.remove(0);
        }
        self.kept.push(outcome);
    }

    /// The store answered: if it had failed, replay what was decided without it, on the
    /// fleet's current generation, while the fleet's breaker is closed.
    fn reconcile(&mut self, cx: &mut Ctx<'_>, note: Note<'_>) {
        if !self.guard.down {
            return;
        }
        self.guard.up();
        let kept = std::mem::take(&mut self.kept);
        self.apply(cx, cx.breakers.generation(0), kept.into_iter(), note, true);
    }

    /// Applies `outcomes` to the store's breaker as one batch (`BreakerOp::Batch`).
    fn apply(
        &mut self,
        cx: &mut Ctx<'_>,
        generation: u32,
        outcomes: impl Iterator<Item = Outcome>,
        note: Note<'_>,
        replay: bool,
    ) {
        let at = cx.at();
        for o in outcomes {
            if cx.breakers.generation(0) != generation
                || cx.breakers.get(0).state(at) != State::Closed
            {
                break;
            }
            let (d, t) = cx.breakers.try_acquire(0, at);
            note(0, t);
            if let Ok(p) = d {
                let t = cx.breakers.record(0, p, o, at);
                note(0, t);
                if replay {
                    cx.counters.reconciled += 1;
                }
            }
        }
    }

    /// The store's state as the client sees it from `seen` on.
    fn see(&mut self, cx: &Ctx<'_>, seen: u64) {
        let at = cx.at();
        let b = cx.breakers.get(0);
        let state = b.state(at);
        let until = b
            .retry_after(at)
            .map_or(0, |d| cx.now.saturating_add(d.as_nanos()));
        self.incoming = Some(View {
            fetched: seen,
            state,
            generation: cx.breakers.generation(0),
            until,
        });
    }

    fn cached(&mut self, cx: &mut Ctx<'_>, refresh: u64, note: Note<'_>) -> Decision {
        if let Some(v) = self.incoming
            && v.fetched <= cx.now
        {
            self.view = Some(v);
            self.incoming = None;
        }
        self.give_back(cx, note);
        let Some(view) = self.view else {
            // No view yet: the client's own breaker decides until the first refresh lands.
            self.refresh(cx, refresh, note);
            cx.counters.by_local += 1;
            let (d, t) = cx.breakers.try_acquire(cx.local(), cx.at());
            note(cx.local(), t);
            let result = match d {
                Ok(p) => Ok(Held {
                    store: None,
                    local: Some(p),
                    decider: Decider::Cache,
                    generation: BEFORE_VIEW,
                }),
                Err(r) => Err(Refusal::Breaker(r.retry_after().unwrap_or(Duration::ZERO))),
            };
            return Decision { delay: 0, result };
        };
        let age = cx.now.saturating_sub(view.fetched);
        if age >= refresh {
            self.refresh(cx, refresh, note);
        }
        if self.guard.down && age > refresh.saturating_mul(2).saturating_add(cx.wait()) {
            // No refresh got through since the store failed: it is not answering.
            let result = self.fallback(cx, note);
            return Decision { delay: 0, result };
        }
        let result = match view.state {
            State::Closed => {
                cx.counters.by_cache += 1;
                Ok(Held {
                    store: None,
                    local: self.local_permit(cx, note),
                    decider: Decider::Cache,
                    generation: view.generation,
                })
            }
            State::Open if view.until > cx.now => {
                cx.counters.by_cache += 1;
                Err(Refusal::Breaker(Duration::from_nanos(view.until - cx.now)))
            }
            // Half-open, or open with its time up: probes are the store's.
            _ => self.probe(cx, refresh, note),
        };
        Decision { delay: 0, result }
    }

    /// A call meeting a half-open view: the probe a refresh took for it, else refused while the
    /// refresh it starts asks the store for one.
    fn probe(&mut self, cx: &mut Ctx<'_>, refresh: u64, note: Note<'_>) -> Result<Held, Refusal> {
        if let Some(r) = self.reserved.take_if(|r| r.arrives <= cx.now) {
            cx.counters.by_store += 1;
            return Ok(Held {
                store: Some(r.permit),
                local: self.local_permit(cx, note),
                decider: Decider::Store,
                generation: r.generation,
            });
        }
        self.wants_probe = true;
        self.refresh(cx, refresh, note);
        cx.counters.by_cache += 1;
        Err(Refusal::Breaker(Duration::ZERO))
    }

    /// A reserved permit no call took within its hold: freed in the store as ignored.
    fn give_back(&mut self, cx: &mut Ctx<'_>, note: Note<'_>) {
        let Some(r) = self.reserved.take_if(|r| r.until <= cx.now) else {
            return;
        };
        match self.ask(cx) {
            Ok(_) | Err((_, Fate::Applied)) => {
                let t = cx.breakers.record(0, r.permit, Outcome::Ignored, cx.at());
                note(0, t);
            }
            // The store frees it when its lease ends.
            Err(_) => {}
        }
    }

    /// Sends the results admitted on the view (of its generation, and those decided before the
    /// first view) and reads the store's state, or takes a probe a call asked for; the answer is
    /// the view one round trip later. The caller does not wait.
    fn refresh(&mut self, cx: &mut Ctx<'_>, refresh: u64, note: Note<'_>) {
        if cx.now < self.refreshing_until {
            return;
        }
        let mut waited = 0;
        if self.view.is_none() && self.incoming.is_none() {
            // The first refresh reads the generation the results decided before it belong to.
            match self.ask(cx) {
                Ok(rtt) => {
                    waited = rtt;
                    self.see(cx, cx.now.saturating_add(rtt));
                }
                Err((w, _)) => {
                    self.refreshing_until = cx.now.saturating_add(w);
                    return;
                }
            }
        }
        let generation = self.incoming.or(self.view).map_or(0, |v| v.generation);
        let pending = std::mem::take(&mut self.pending);
        let outcomes: Vec<Outcome> = pending
            .into_iter()
            .filter(|(g, _)| *g == generation || *g == BEFORE_VIEW)
            .map(|(_, o)| o)
            .collect();
        let probe =
            outcomes.is_empty() && std::mem::take(&mut self.wants_probe) && self.reserved.is_none();
        match self.ask(cx) {
            Ok(rtt) => {
                let back = cx.now.saturating_add(waited).saturating_add(rtt);
                self.refreshing_until = back;
                self.apply(cx, generation, outcomes.into_iter(), note, false);
                self.reconcile(cx, note);
                if probe {
                    let (d, t) = cx.breakers.try_acquire(0, cx.at());
                    note(0, t);
                    if let Ok(permit) = d {
                        self.reserved = Some(Reserved {
                            permit,
                            generation: cx.breakers.generation(0),
                            arrives: back,
                            until: back.saturating_add(refresh),
                        });
                    }
                }
                self.see(cx, back);
            }
            Err((w, fate)) => {
                self.refreshing_until = cx.now.saturating_add(waited).saturating_add(w);
                match fate {
                    Fate::Unsent => outcomes.into_iter().for_each(|o| self.keep(o)),
                    Fate::Applied => self.apply(cx, generation, outcomes.into_iter(), note, false),
                    Fate::Lost => {}
                }
            }
        }
    }
}

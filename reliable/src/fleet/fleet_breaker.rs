//! A circuit breaker shared by a fleet of processes through a [`Store`].

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use reliable_core::breaker::{Outcome, Permit, RejectReason, State};
use reliable_core::{Duration, Instant};

use super::guard::{EventSink, FleetConfig, FleetStats, Guard, Mode, OnStoreFailure};
use super::memory::CoreBreaker;
use super::store::{
    BreakerAnswer, BreakerOp, BreakerReply, BreakerSpec, SpecError, Store, StoreError,
    StoreErrorKind, check_name,
};

/// Local results kept while the store is down, to send when it is back (the oldest are dropped).
const OUTAGE_KEPT: usize = 4096;
/// The generation of a call decided before the first view: its result counts in the generation
/// the first refresh reads (while the fleet's breaker is closed, as every batched result).
const BEFORE_VIEW: u64 = u64::MAX;
/// Cached results sent early when this many wait for the next refresh.
const PENDING_FLUSH: usize = 256;

/// Who took a decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Decider {
    /// The store, in one round trip.
    Store,
    /// This process, on its cached view of the fleet's state.
    Cache,
    /// This process alone: the store failed (or rests after failing).
    Local,
}

/// Permission for one call; hand it back to [`FleetBreaker::record`].
#[must_use = "a permit must be handed back to `record`, or a probe holds its slot until its lease ends"]
#[derive(Debug)]
pub struct FleetPermit {
    kind: Kind,
    local: Option<Permit>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Store {
        generation: u64,
        lease: u64,
        probe: bool,
    },
    Cached {
        generation: u64,
    },
    Local,
}

impl FleetPermit {
    /// Whether this call is a fleet-wide half-open probe.
    pub fn is_probe(&self) -> bool {
        matches!(self.kind, Kind::Store { probe: true, .. })
    }
    /// Who admitted the call.
    pub fn decided_by(&self) -> Decider {
        match self.kind {
            Kind::Store { .. } => Decider::Store,
            Kind::Cached { .. } => Decider::Cache,
            Kind::Local => Decider::Local,
        }
    }
}

/// Why a call was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FleetReason {
    /// The breaker's rules (the fleet's, or this process's while the store is down).
    Breaker(RejectReason),
    /// The store failed and the breaker fails closed ([`OnStoreFailure::Refuse`]).
    StoreUnavailable,
}

/// A refused call: why, and who decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FleetRejection {
    /// Why.
    pub reason: FleetReason,
    /// Who decided.
    pub decided_by: Decider,
}

impl fmt::Display for FleetRejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.reason {
            FleetReason::Breaker(r) => write!(
                f,
                "{} (fleet breaker, decided by {:?})",
                reliable_core::breaker::Rejection { reason: r },
                self.decided_by
            ),
            FleetReason::StoreUnavailable => f.write_str("fleet store unavailable; failing closed"),
        }
    }
}

impl std::error::Error for FleetRejection {}

/// The cached view of the fleet's breaker.
#[derive(Debug, Default)]
struct View {
    fetched: Option<tokio::time::Instant>,
    state: Option<State>,
    generation: u64,
    until: Option<tokio::time::Instant>,
    /// Results of calls admitted on the view, with the generation they were admitted in.
    pending: Vec<(u64, Outcome)>,
}

/// A circuit breaker shared by every process using the same store and name.
///
/// The fleet's state lives in the store; each decision is the store's (exact mode), or this
/// process's on a view of it refreshed every `refresh` (cached mode). Every process also keeps
/// its own core breaker, fed with its own results: while the store fails, it decides (or, with
/// [`OnStoreFailure::Refuse`], calls are refused), and the results it admitted are sent to the
/// store when the store answers again.
///
/// # Staleness (cached mode)
///
/// A process decides on a view at most `refresh + wait` old (past that it decides locally), and
/// its results reach the store at most `refresh + wait` after they happened. So the fleet breaker
/// trips at its threshold plus at most the results the fleet makes in one `refresh + wait`, and
/// a process keeps admitting for at most `refresh + wait` after the fleet tripped. Half-open
/// probes are always the store's decision: at most `max_in_flight` fleet-wide in both modes.
///
/// Needs a tokio runtime (the wait bound is a tokio timer; cached refreshes are spawned).
#[derive(Clone)]
pub struct FleetBreaker {
    inner: Arc<Inner>,
}

struct Inner {
    name: String,
    spec: BreakerSpec,
    store: Arc<dyn Store>,
    config: FleetConfig,
    guard: Guard,
    local: Mutex<CoreBreaker>,
    origin: tokio::time::Instant,
    view: Mutex<View>,
    refreshing: AtomicBool,
    reconciling: AtomicBool,
    outage: Mutex<Vec<Outcome>>,
    /// The runtime it was made in: a decision taken outside any (a blocking call) still
    /// refreshes its view there.
    runtime: Option<tokio::runtime::Handle>,
    /// A call decided at once ([`FleetBreaker::decide`]) met a half-open view: the next refresh
    /// asks the store for a probe.
    wants_probe: AtomicBool,
    /// A permit the store gave a refresh for the next call decided at once, and when.
    reserved: Mutex<Option<(FleetPermit, tokio::time::Instant)>>,
}

impl fmt::Debug for FleetBreaker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FleetBreaker")
            .field("name", &self.inner.name)
            .field("store", &self.inner.store.describe())
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl FleetBreaker {
    /// The breaker `name` in `store`, run by `spec`'s rules.
    pub fn new(
        store: Arc<dyn Store>,
        name: &str,
        spec: BreakerSpec,
        config: FleetConfig,
    ) -> Result<Self, SpecError> {
        Self::with_events(store, name, spec, config, None)
    }

    /// As [`new`](Self::new), telling `events` when the store goes down and comes back.
    pub fn with_events(
        store: Arc<dyn Store>,
        name: &str,
        spec: BreakerSpec,
        config: FleetConfig,
        events: Option<EventSink>,
    ) -> Result<Self, SpecError> {
        check_name(name)?;
        let local = CoreBreaker::with_storage(spec.policy)?;
        Ok(FleetBreaker {
            inner: Arc::new(Inner {
                name: name.to_owned(),
                guard: Guard::new(name, &config, events)?,
                spec,
                store,
                config,
                local: Mutex::new(local),
                origin: tokio::time::Instant::now(),
                view: Mutex::new(View::default()),
                refreshing: AtomicBool::new(false),
                reconciling: AtomicBool::new(false),
                outage: Mutex::new(Vec::new()),
                runtime: tokio::runtime::Handle::try_current().ok(),
                wants_probe: AtomicBool::new(false),
                reserved: Mutex::new(None),
            }),
        })
    }

    /// How it uses its store.
    pub fn config(&self) -> &FleetConfig {
        &self.inner.config
    }

    /// Counts of this process's dealings with the store.
    pub fn stats(&self) -> &FleetStats {
        &self.inner.guard.stats
    }

    /// This process's own breaker's state (what it decides on while the store is down).
    pub fn local_state(&self) -> State {
        let i = &self.inner;
        lock(&i.local).state(i.now())
    }

    /// Asks to make one call.
    pub async fn acquire(&self) -> Result<FleetPermit, FleetRejection> {
        let i = &self.inner;
        if let Mode::Cached { refresh } = i.config.mode
            && let Some(decision) = i.cached(refresh)
        {
            return decision;
        }
        let reply = i
            .guard
            .run(i.store.breaker(&i.name, &i.spec, 0, BreakerOp::Acquire))
            .await;
        let reply = match reply {
            Ok(r) => r,
            Err(_) => return i.fallback(),
        };
        i.answered(&reply);
        let store = |lease, probe| Kind::Store {
            generation: reply.generation,
            lease,
            probe,
        };
        let rejected = |reason| FleetRejection {
            reason: FleetReason::Breaker(reason),
            decided_by: Decider::Store,
        };
        match reply.answer {
            BreakerAnswer::Admitted { lease } => Ok(FleetPermit {
                kind: store(lease, false),
                local: i.local_permit(),
            }),
            BreakerAnswer::Probe { lease } => Ok(FleetPermit {
                kind: store(lease, true),
                local: i.local_permit(),
            }),
            BreakerAnswer::Open { retry_after } => {
                Err(rejected(RejectReason::Open { retry_after }))
            }
            BreakerAnswer::HalfOpenFull => Err(rejected(RejectReason::HalfOpenFull)),
            BreakerAnswer::Done => i.fallback(),
        }
    }

    /// Reports how a permitted call ended.
    pub async fn record(&self, permit: FleetPermit, outcome: Outcome) {
        let i = &self.inner;
        if let Some(p) = permit.local {
            lock(&i.local).record(p, outcome, i.now());
        }
        match permit.kind {
            Kind::Store {
                generation, lease, ..
            } => i.send_record(generation, lease, outcome).await,
            Kind::Cached { generation } => i.pend(generation, outcome),
            Kind::Local => i.keep(outcome),
        }
    }

    /// Decides at once, without waiting for the store: what the call engine asks when this
    /// breaker sits in a [`Reliable`](crate::Reliable) (the engine is sans-IO: it cannot wait
    /// for a round trip in the middle of a decision).
    ///
    /// The decision is cached mode's, on the view refreshed in the background (with
    /// [`Mode::Exact`], a view refreshed every `wait`): closed admits, open refuses for the time
    /// left. Half-open probes stay the store's, at most `max_in_flight` fleet-wide: a call that
    /// meets a half-open view is refused ([`RejectReason::HalfOpenFull`]) and the refresh it
    /// starts asks the store for a probe, which the next call decided at once takes; a probe
    /// nobody takes within `refresh` is given back to the store as ignored, so that an idle
    /// process does not hold a fleet's probe slot. Before its first view, the process's own
    /// breaker decides. A view older than `2 × refresh + wait` because no call came is still
    /// decided on (the fleet's last word, whose open or half-open gate this process's own
    /// breaker knows nothing of) while a refresh runs; once the store has failed, the process
    /// decides alone (as [`OnStoreFailure`] says).
    ///
    /// Refreshes run on the tokio runtime this breaker was made in (or the caller's): made
    /// outside any runtime and called outside any, it never refreshes and decides alone.
    pub fn decide(&self) -> Result<FleetPermit, FleetRejection> {
        let i = &self.inner;
        let refresh = match i.config.mode {
            Mode::Cached { refresh } => refresh,
            Mode::Exact => i.config.wait,
        };
        match i.idle(refresh) {
            Some(Some(decision)) => return decision,
            // An idle view whose open time is up: a probe is the store's (below).
            Some(None) => {}
            None => {
                if let Some(decision) = i.cached(refresh) {
                    return decision;
                }
                if lock(&i.view).state.is_none() {
                    // No view yet: this process's own breaker decides until the first refresh
                    // lands; the result goes to the store with it, in the generation it reads.
                    i.start_refresh();
                    return match lock(&i.local).try_acquire(i.now()) {
                        Ok(p) => Ok(FleetPermit {
                            kind: Kind::Cached {
                                generation: BEFORE_VIEW,
                            },
                            local: Some(p),
                        }),
                        Err(r) => Err(FleetRejection {
                            reason: FleetReason::Breaker(r.reason),
                            decided_by: Decider::Local,
                        }),
                    };
                }
            }
        }
        if let Some((mut permit, _)) = lock(&i.reserved).take() {
            permit.local = i.local_permit();
            return Ok(permit);
        }
        i.wants_probe.store(true, Ordering::Release);
        i.start_refresh();
        Err(FleetRejection {
            reason: FleetReason::Breaker(RejectReason::HalfOpenFull),
            decided_by: Decider::Cache,
        })
    }

    /// [`record`](Self::record) without waiting: a result for the store is sent in the
    /// background (on the runtime, as [`decide`](Self::decide) says).
    pub fn record_now(&self, permit: FleetPermit, outcome: Outcome) {
        let i = &self.inner;
        if let Some(p) = permit.local {
            lock(&i.local).record(p, outcome, i.now());
        }
        match permit.kind {
            Kind::Store {
                generation, lease, ..
            } => {
                let me = Arc::clone(i);
                i.spawn(async move { me.send_record(generation, lease, outcome).await });
            }
            Kind::Cached { generation } => i.pend(generation, outcome),
            Kind::Local => i.keep(outcome),
        }
    }

    /// Sends the results waiting for the next refresh and reads the fleet's state now, waiting
    /// for the store at most `wait`: for a process whose calls are rare (a tool server), so that
    /// its results reach the store and its view is the store's before it reports or decides.
    pub async fn sync(&self) {
        self.inner.refresh().await;
    }

    /// The fleet's state as this process last saw it (`None` before its first view).
    pub fn fleet_state(&self) -> Option<State> {
        lock(&self.inner.view).state
    }

    /// While the view says the fleet's breaker is open: the time left.
    pub fn open_for(&self) -> Option<Duration> {
        let now = tokio::time::Instant::now();
        let v = lock(&self.inner.view);
        match (v.state, v.until) {
            (Some(State::Open), Some(until)) if until > now => Some(Duration::from(until - now)),
            _ => None,
        }
    }
}

impl Inner {
    /// Runs `fut` on the caller's runtime, else on the one this breaker was made in, else not
    /// at all (the view then ages and decisions fall back to this process).
    fn spawn(&self, fut: impl std::future::Future<Output = ()> + Send + 'static) {
        match tokio::runtime::Handle::try_current() {
            Ok(h) => drop(h.spawn(fut)),
            Err(_) => {
                if let Some(h) = &self.runtime {
                    drop(h.spawn(fut));
                }
            }
        }
    }

    async fn send_record(self: &Arc<Self>, generation: u64, lease: u64, outcome: Outcome) {
        let op = BreakerOp::Record {
            generation,
            lease,
            outcome,
        };
        match self
            .guard
            .run(self.store.breaker(&self.name, &self.spec, 0, op))
            .await
        {
            Ok(reply) => self.answered(&reply),
            Err(e) if unsent(&e) => self.keep(outcome),
            // The store may have counted it (a timeout): not sent again, so that a
            // result counts at most once.
            Err(_) => {}
        }
    }

    /// A result of a call admitted on the view, for the next refresh.
    fn pend(self: &Arc<Self>, generation: u64, outcome: Outcome) {
        let flush = {
            let mut v = lock(&self.view);
            v.pending.push((generation, outcome));
            v.pending.len() >= PENDING_FLUSH
        };
        if flush {
            self.start_refresh();
        }
    }
}

/// Whether a failed operation surely did not reach the store's state: refused (a script runs
/// whole or not at all) or never sent (resting, not connected). A timeout or a garbled answer
/// may have been applied.
fn unsent(e: &StoreError) -> bool {
    matches!(
        e.kind,
        StoreErrorKind::Refused | StoreErrorKind::Unavailable
    )
}

impl Inner {
    fn now(&self) -> Instant {
        Instant::from_nanos(self.origin.elapsed().as_nanos() as u64)
    }

    fn local_permit(&self) -> Option<Permit> {
        lock(&self.local).try_acquire(self.now()).ok()
    }

    /// A decision without the store: the local breaker's, or a refusal.
    fn fallback(&self) -> Result<FleetPermit, FleetRejection> {
        self.guard.fallback();
        match self.config.on_store_failure {
            OnStoreFailure::Refuse => Err(FleetRejection {
                reason: FleetReason::StoreUnavailable,
                decided_by: Decider::Local,
            }),
            OnStoreFailure::Local => match lock(&self.local).try_acquire(self.now()) {
                Ok(p) => Ok(FleetPermit {
                    kind: Kind::Local,
                    local: Some(p),
                }),
                Err(r) => Err(FleetRejection {
                    reason: FleetReason::Breaker(r.reason),
                    decided_by: Decider::Local,
                }),
            },
        }
    }

    /// A result the store has not seen, to send when it answers again.
    fn keep(&self, outcome: Outcome) {
        if outcome == Outcome::Ignored {
            return;
        }
        let mut o = lock(&self.outage);
        if o.len() >= OUTAGE_KEPT {
            o.remove(0);
        }
        o.push(outcome);
    }

    /// The store answered: update the view; if it had been down, reconcile (in the background).
    fn answered(self: &Arc<Self>, reply: &BreakerReply) {
        self.see(reply);
        if self.guard.is_down() && !self.reconciling.swap(true, Ordering::AcqRel) {
            let me = Arc::clone(self);
            self.spawn(async move {
                me.reconcile().await;
                me.reconciling.store(false, Ordering::Release);
            });
        }
    }

    fn see(&self, reply: &BreakerReply) {
        let now = tokio::time::Instant::now();
        let mut v = lock(&self.view);
        v.fetched = Some(now);
        v.state = Some(reply.state);
        v.generation = reply.generation;
        v.until = (reply.state == State::Open).then(|| {
            now + std::time::Duration::from_micros(reply.until_us.saturating_sub(reply.now_us))
        });
    }

    /// Sends the results decided locally while the store was down, on the fleet's current
    /// generation (the store counts them only while the fleet breaker is closed).
    async fn reconcile(self: &Arc<Self>) {
        let outcomes = std::mem::take(&mut *lock(&self.outage));
        if outcomes.is_empty() {
            self.guard.up(0);
            return;
        }
        let view = self
            .guard
            .run(
                self.store
                    .breaker(&self.name, &self.spec, 0, BreakerOp::View),
            )
            .await;
        let sent = match view {
            Ok(reply) => {
                let n = outcomes.len();
                let op = BreakerOp::Batch {
                    generation: reply.generation,
                    outcomes: outcomes.clone(),
                };
                match self
                    .guard
                    .run(self.store.breaker(&self.name, &self.spec, 0, op))
                    .await
                {
                    Ok(reply) => {
                        self.see(&reply);
                        Some(n)
                    }
                    Err(_) => None,
                }
            }
            Err(_) => None,
        };
        match sent {
            Some(n) => self.guard.up(n),
            None => {
                let mut o = lock(&self.outage);
                let mut back = outcomes;
                back.append(&mut o);
                let excess = back.len().saturating_sub(OUTAGE_KEPT);
                back.drain(..excess);
                *o = back;
            }
        }
    }

    /// Cached mode: a decision on the view, or `None` to ask the store (no view yet, or the view
    /// says half-open: probes are the store's).
    fn cached(
        self: &Arc<Self>,
        refresh: std::time::Duration,
    ) -> Option<Result<FleetPermit, FleetRejection>> {
        let now = tokio::time::Instant::now();
        let (fetched, state, generation, until) = {
            let v = lock(&self.view);
            (v.fetched?, v.state?, v.generation, v.until)
        };
        let age = now.saturating_duration_since(fetched);
        if age >= refresh {
            self.start_refresh();
        }
        if age > refresh * 2 + self.config.wait {
            // No refresh got through: the store is not answering.
            return Some(self.fallback());
        }
        match state {
            State::Closed => {
                self.guard
                    .stats
                    .cached
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                Some(Ok(FleetPermit {
                    kind: Kind::Cached { generation },
                    local: self.local_permit(),
                }))
            }
            State::Open => match until {
                Some(until) if until > now => Some(Err(FleetRejection {
                    reason: FleetReason::Breaker(RejectReason::Open {
                        retry_after: Duration::from(until - now),
                    }),
                    decided_by: Decider::Cache,
                })),
                _ => None,
            },
            _ => None,
        }
    }

    fn start_refresh(self: &Arc<Self>) {
        if self.refreshing.swap(true, Ordering::AcqRel) {
            return;
        }
        let me = Arc::clone(self);
        self.spawn(async move {
            me.refresh().await;
            me.refreshing.store(false, Ordering::Release);
        });
    }

    /// Sends the cached results of the current generation and reads the fleet's state.
    async fn refresh(self: &Arc<Self>) {
        if lock(&self.view).fetched.is_none() {
            // The first refresh reads the generation that results decided before it belong to.
            match self
                .guard
                .run(
                    self.store
                        .breaker(&self.name, &self.spec, 0, BreakerOp::View),
                )
                .await
            {
                Ok(reply) => self.answered(&reply),
                Err(_) => return,
            }
        }
        let (generation, outcomes) = {
            let mut v = lock(&self.view);
            let g = v.generation;
            let pending = std::mem::take(&mut v.pending);
            // Results of an older generation are stale for the store too.
            let outcomes: Vec<Outcome> = pending
                .into_iter()
                .filter(|(pg, _)| *pg == g || *pg == BEFORE_VIEW)
                .map(|(_, o)| o)
                .collect();
            (g, outcomes)
        };
        // A call decided at once met a half-open view: ask the store for a probe for the next
        // one (the view after the opening has no results of its own to send).
        let probe = outcomes.is_empty()
            && self.wants_probe.swap(false, Ordering::AcqRel)
            && lock(&self.reserved).is_none();
        let op = if probe {
            BreakerOp::Acquire
        } else if outcomes.is_empty() {
            BreakerOp::View
        } else {
            BreakerOp::Batch {
                generation,
                outcomes: outcomes.clone(),
            }
        };
        match self
            .guard
            .run(self.store.breaker(&self.name, &self.spec, 0, op))
            .await
        {
            Ok(reply) => {
                self.answered(&reply);
                if probe {
                    self.reserve(&reply);
                }
            }
            Err(e) if unsent(&e) => {
                for o in outcomes {
                    self.keep(o);
                }
            }
            Err(_) => {}
        }
    }

    /// A refresh's acquire answered: keep the permit for the next call decided at once, and
    /// give it back as ignored if no call takes it within `refresh` (an idle process must not
    /// hold one of the fleet's probe slots until its lease ends).
    fn reserve(self: &Arc<Self>, reply: &BreakerReply) {
        let (lease, probe) = match reply.answer {
            BreakerAnswer::Probe { lease } => (lease, true),
            BreakerAnswer::Admitted { lease } => (lease, false),
            _ => return,
        };
        let generation = reply.generation;
        let permit = FleetPermit {
            kind: Kind::Store {
                generation,
                lease,
                probe,
            },
            local: None,
        };
        let unused = lock(&self.reserved).replace((permit, tokio::time::Instant::now()));
        if let Some((old, _)) = unused {
            self.give_back(old);
        }
        let hold = match self.config.mode {
            Mode::Cached { refresh } => refresh,
            Mode::Exact => self.config.wait,
        };
        let me = Arc::clone(self);
        self.spawn(async move {
            tokio::time::sleep(hold).await;
            let mut r = lock(&me.reserved);
            let mine = matches!(r.as_ref(), Some((FleetPermit { kind: Kind::Store { lease: l, generation: g, .. }, .. }, _)) if *l == lease && *g == generation);
            if mine && let Some((old, _)) = r.take() {
                drop(r);
                me.give_back(old);
            }
        });
    }

    /// A decision at once on a view that aged because no call came (the store has not failed
    /// since): the view is still the fleet's last word, and deciding on it keeps an open or
    /// half-open fleet breaker's gate, which this process's own breaker knows nothing of. A
    /// refresh is started. `None` for a fresh view, or while the store fails (then `cached`
    /// falls back); `Some(None)`: the view says a probe is due.
    #[allow(clippy::option_option)]
    fn idle(
        self: &Arc<Self>,
        refresh: std::time::Duration,
    ) -> Option<Option<Result<FleetPermit, FleetRejection>>> {
        let now = tokio::time::Instant::now();
        let (state, generation, until) = {
            let v = lock(&self.view);
            let age = now.saturating_duration_since(v.fetched?);
            if age <= refresh * 2 + self.config.wait || self.guard.is_down() {
                return None;
            }
            (v.state?, v.generation, v.until)
        };
        self.start_refresh();
        Some(match state {
            State::Closed => Some(Ok(FleetPermit {
                kind: Kind::Cached { generation },
                local: self.local_permit(),
            })),
            State::Open => match until {
                Some(until) if until > now => Some(Err(FleetRejection {
                    reason: FleetReason::Breaker(RejectReason::Open {
                        retry_after: Duration::from(until - now),
                    }),
                    decided_by: Decider::Cache,
                })),
                // Its time is up: a probe is the store's.
                _ => None,
            },
            _ => None,
        })
    }

    /// A reserved permit no call took: freed in the store as ignored.
    fn give_back(self: &Arc<Self>, permit: FleetPermit) {
        if let Kind::Store {
            generation, lease, ..
        } = permit.kind
        {
            let me = Arc::clone(self);
            self.spawn(async move { me.send_record(generation, lease, Outcome::Ignored).await });
        }
    }
}

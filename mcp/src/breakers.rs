//! Named circuit breakers, one per downstream an agent calls: created by `create_breaker`, read
//! by `get_breaker_state` and `reliable://breaker/{name}`, and consulted by `reliable_http_call`.
//!
//! Each is reliable-core's lock-free [`SharedBreaker`], driven by the server's monotonic clock,
//! with a short log of its recent transitions (what an agent or an operator diagnosing it needs).
//!
//! This is the adapter over the core until the `reliable` crate's registry is merged. The core's
//! breakers borrow their policy, so policies live for the process: they are interned (one per
//! distinct config) and capped at [`MAX_POLICIES`], which bounds that memory.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant as WallInstant;

use reliable_core::Instant;
use reliable_core::breaker::{
    AtomicAnyWindow, BreakerConfig, BreakerPolicy, Outcome, Permit, ProbeRule, Rejection,
    SharedBreaker, State, Transition, WindowConfig,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::duration::{ms, parse_duration};

/// Breakers at most.
pub const MAX_BREAKERS: usize = 64;
/// Distinct breaker configs at most over the server's life.
pub const MAX_POLICIES: usize = 256;
/// Transitions kept per breaker.
pub const TRANSITIONS_KEPT: usize = 32;
/// Longest count window, in calls.
pub const MAX_WINDOW_CALLS: u32 = 256;
/// Most probes in flight at once.
pub const MAX_PROBES: u32 = 16;

type Inner = SharedBreaker<'static, AtomicAnyWindow<4, 64>, 16>;

/// A named preset to start from.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Preset {
    /// The Python seed library's breaker: trips at >= 50% failures over the last 20 calls, stays
    /// open 30 s, then every call is a probe; 3 successes in a row close it.
    #[default]
    Reliablekit,
    /// Opens after 2 failures in a row, open 20 s, one trial call.
    LayeredExercise,
    /// resilience4j's defaults: >= 50% over 100 calls, open 60 s, 10 probes judged together.
    Resilience4j,
}

/// Arguments of `create_breaker`: a preset, and the seed library's parameters to change in it.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateBreakerArgs {
    /// The breaker's name, e.g. the downstream it protects ("openai", "search-api"): 1 to 64
    /// letters, digits, '-', '_' or '.'.
    pub name: String,
    /// Preset to start from. Default reliablekit (the seed library's breaker).
    #[serde(default)]
    pub preset: Option<Preset>,
    /// Trip when failures ÷ calls in the window reaches this, in (0, 1].
    #[serde(default)]
    pub failure_rate: Option<f64>,
    /// Window: the last this many calls, 1 to 256.
    #[serde(default)]
    pub window: Option<u32>,
    /// No rate decision before the window holds this many calls (at most the window).
    #[serde(default)]
    pub minimum_calls: Option<u32>,
    /// Also trip after this many failures in a row.
    #[serde(default)]
    pub consecutive_failures: Option<u32>,
    /// How long it stays open before probing, e.g. "30s".
    #[serde(default)]
    pub cooldown: Option<String>,
    /// Successes in a row (half-open) that close it.
    #[serde(default)]
    pub probes: Option<u32>,
    /// Probes allowed in flight at once, 1 to 16 (the seed library has no limit: omit it there).
    #[serde(default)]
    pub max_probes_in_flight: Option<u32>,
}

impl CreateBreakerArgs {
    /// The core's config, or an error naming the field.
    pub fn config(&self) -> Result<BreakerConfig, String> {
        check_name(&self.name)?;
        let mut c = match self.preset.unwrap_or_default() {
            Preset::Reliablekit => BreakerConfig::reliablekit(),
            Preset::LayeredExercise => BreakerConfig::layered_exercise(),
            Preset::Resilience4j => BreakerConfig::resilience4j(),
        };
        if let Some(r) = self.failure_rate {
            c.failure_rate = Some(r);
        }
        if let Some(w) = self.window {
            if !(1..=MAX_WINDOW_CALLS).contains(&w) {
                return Err(format!(
                    "window: {w} calls is outside 1..={MAX_WINDOW_CALLS}"
                ));
            }
            c.window = WindowConfig::Count { calls: w };
            c.minimum_calls = c.minimum_calls.min(w);
        }
        if let Some(m) = self.minimum_calls {
            c.minimum_calls = m;
        }
        if self.consecutive_failures.is_some() {
            c.consecutive_failures = self.consecutive_failures;
        }
        c.open.duration = parse_duration("cooldown", self.cooldown.as_deref(), c.open.duration)?;
        if let Some(p) = self.probes {
            c.half_open.rule = ProbeRule::Consecutive { successes: p };
        }
        if let Some(p) = self.max_probes_in_flight {
            if !(1..=MAX_PROBES).contains(&p) {
                return Err(format!(
                    "max_probes_in_flight: {p} is outside 1..={MAX_PROBES}"
                ));
            }
            c.half_open.max_in_flight = Some(p);
        }
        Ok(c)
    }
}

/// Checks a breaker name (it appears in resource URIs).
pub fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "name: {name:?} must be 1 to 64 letters, digits, '-', '_' or '.'"
        ))
    }
}

/// A state change, for reports.
#[derive(Clone, Debug, Serialize, JsonSchema, PartialEq)]
pub struct TransitionRecord {
    /// State before.
    pub from: String,
    /// State after.
    pub to: String,
    /// When, in seconds since the server started.
    pub at_s: f64,
}

/// Calls, failures and slow calls in the window.
#[derive(Clone, Debug, Serialize, JsonSchema, PartialEq)]
pub struct WindowCounts {
    /// Calls recorded.
    pub calls: u64,
    /// Of which failed.
    pub failures: u64,
    /// Of which were slow.
    pub slow: u64,
    /// failures ÷ calls, if there were calls.
    pub failure_rate: Option<f64>,
}

/// What `get_breaker_state` and the resource return.
#[derive(Clone, Debug, Serialize, JsonSchema, PartialEq)]
pub struct BreakerState {
    /// The name.
    pub name: String,
    /// closed, open, half-open, forced-open or disabled.
    pub state: String,
    /// While open: milliseconds until it lets a probe through.
    pub retry_after_ms: Option<f64>,
    /// The window's counts now.
    pub window: WindowCounts,
    /// Failures in a row.
    pub consecutive_failures: u32,
    /// Re-opens since it last closed.
    pub reopens: u32,
    /// Probes in flight.
    pub probes_in_flight: u32,
    /// Calls it admitted.
    pub admitted: u64,
    /// Calls it rejected.
    pub rejected: u64,
    /// Recent transitions, oldest first (at most 32).
    pub transitions: Vec<TransitionRecord>,
    /// Its config, as in the simulator's scenario files.
    pub config: serde_json::Value,
    /// Seconds since the server started, when this was read.
    pub now_s: f64,
}

/// One named breaker.
#[derive(Debug)]
pub struct NamedBreaker {
    name: String,
    config: BreakerConfig,
    breaker: Inner,
    log: Mutex<Log>,
    clock: Clock,
}

#[derive(Debug, Default)]
struct Log {
    transitions: VecDeque<Transition>,
    admitted: u64,
    rejected: u64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // The guarded data is a log; a panic elsewhere cannot leave it inconsistent.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl NamedBreaker {
    fn note(&self, t: Option<Transition>, admitted: bool) {
        let mut log = lock(&self.log);
        if admitted {
            log.admitted += 1;
        } else {
            log.rejected += 1;
        }
        if let Some(t) = t {
            if log.transitions.len() == TRANSITIONS_KEPT {
                log.transitions.pop_front();
            }
            log.transitions.push_back(t);
        }
    }

    /// Asks to make a call now.
    pub fn acquire(&self) -> Result<Permit, Rejection> {
        let r = self.breaker.try_acquire(self.clock.now());
        match &r {
            Ok(p) => self.note(p.transition(), true),
            Err(rej) => self.note(rej.transition, false),
        }
        r
    }

    /// Reports how a permitted call ended.
    pub fn record(&self, permit: Permit, outcome: Outcome) {
        let t = self.breaker.record(permit, outcome, self.clock.now());
        if t.is_some() {
            let mut log = lock(&self.log);
            if log.transitions.len() == TRANSITIONS_KEPT {
                log.transitions.pop_front();
            }
            log.transitions.extend(t);
        }
    }

    /// The state now, as a word.
    pub fn state_name(&self) -> &'static str {
        self.breaker.state(self.clock.now()).name()
    }

    /// Its state, counts and recent transitions.
    pub fn snapshot(&self) -> BreakerState {
        let now = self.clock.now();
        let state = self.breaker.state(now);
        let counts = self.breaker.counts(now);
        let log = lock(&self.log);
        // Open since the last transition into open, for the open time of this re-open (exact:
        // these breakers have no open-time jitter).
        let retry_after_ms = (state == State::Open).then(|| {
            let opened = log.transitions.iter().rev().find(|t| t.to == State::Open);
            let open_time = self
                .breaker
                .policy()
                .open_time_before_jitter(self.breaker.reopens());
            opened.map_or(0.0, |t| {
                ms(t.at
                    .saturating_add(open_time)
                    .saturating_duration_since(now))
            })
        });
        BreakerState {
            name: self.name.clone(),
            state: state.name().to_string(),
            retry_after_ms,
            window: WindowCounts {
                calls: counts.calls,
                failures: counts.failures,
                slow: counts.slow,
                failure_rate: (counts.calls > 0)
                    .then(|| counts.failures as f64 / counts.calls as f64),
            },
            consecutive_failures: self.breaker.consecutive_failures(),
            reopens: self.breaker.reopens(),
            probes_in_flight: self.breaker.probes_in_flight(),
            admitted: log.admitted,
            rejected: log.rejected,
            transitions: log
                .transitions
                .iter()
                .map(|t| TransitionRecord {
                    from: t.from.name().into(),
                    to: t.to.name().into(),
                    at_s: t.at.since_origin().as_nanos() as f64 / 1e9,
                })
                .collect(),
            config: serde_json::to_value(self.config).unwrap_or(serde_json::Value::Null),
            now_s: now.since_origin().as_nanos() as f64 / 1e9,
        }
    }
}

/// The server's monotonic clock, as reliable-core instants since the server started.
#[derive(Clone, Copy, Debug)]
pub struct Clock(WallInstant);

impl Clock {
    /// Starts now.
    pub fn start() -> Self {
        Clock(WallInstant::now())
    }

    /// Time since the start.
    pub fn now(&self) -> Instant {
        Instant::from_nanos(u64::try_from(self.0.elapsed().as_nanos()).unwrap_or(u64::MAX))
    }
}

/// What `create_breaker` did.
#[derive(Clone, Debug, Serialize, JsonSchema, PartialEq)]
pub struct Created {
    /// `created`, `unchanged` (same name and config: its state is kept) or `replaced` (a new
    /// config: the old breaker's state is gone).
    pub action: String,
    /// The breaker now.
    pub breaker: BreakerState,
}

/// Every named breaker of the server.
#[derive(Debug)]
pub struct Breakers {
    clock: Clock,
    by_name: Mutex<BTreeMap<String, Arc<NamedBreaker>>>,
    policies: Mutex<HashMap<String, &'static BreakerPolicy>>,
}

impl Default for Breakers {
    fn default() -> Self {
        Breakers::new(Clock::start())
    }
}

impl Breakers {
    /// No breakers yet.
    pub fn new(clock: Clock) -> Self {
        Breakers {
            clock,
            by_name: Mutex::new(BTreeMap::new()),
            policies: Mutex::new(HashMap::new()),
        }
    }

    fn policy(&self, config: BreakerConfig) -> Result<&'static BreakerPolicy, String> {
        let key = format!("{config:?}");
        let mut policies = lock(&self.policies);
        if let Some(p) = policies.get(&key) {
            return Ok(p);
        }
        if policies.len() >= MAX_POLICIES {
            return Err(format!(
                "this server has built {MAX_POLICIES} distinct breaker configs, its limit; reuse one"
            ));
        }
        let policy = BreakerPolicy::new(config).map_err(|e| e.to_string())?;
        // Lives for the process (the core's breakers borrow their policy); bounded above.
        let policy: &'static BreakerPolicy = Box::leak(Box::new(policy));
        policies.insert(key, policy);
        Ok(policy)
    }

    /// Creates (or keeps, or replaces) the breaker `name`.
    pub fn create(&self, args: &CreateBreakerArgs) -> Result<Created, String> {
        let config = args.config()?;
        if let Some(b) = self.get(&args.name)
            && b.config == config
        {
            return Ok(Created {
                action: "unchanged".into(),
                breaker: b.snapshot(),
            });
        }
        // Validate before touching the registry, so a bad config leaves the old breaker in place.
        BreakerPolicy::new(config).map_err(|e| e.to_string())?;
        let mut by_name = lock(&self.by_name);
        if !by_name.contains_key(&args.name) && by_name.len() >= MAX_BREAKERS {
            return Err(format!(
                "this server holds {MAX_BREAKERS} breakers, its limit"
            ));
        }
        let policy = self.policy(config)?;
        let seed = reliable_core::sample::splitmix64(
            args.name
                .bytes()
                .fold(0u64, |h, b| h.rotate_left(5) ^ u64::from(b)),
        );
        let breaker = Inner::new(policy)
            .map_err(|e| e.to_string())?
            .with_seed(seed);
        let named = Arc::new(NamedBreaker {
            name: args.name.clone(),
            config,
            breaker,
            log: Mutex::new(Log::default()),
            clock: self.clock,
        });
        let replaced = by_name.insert(args.name.clone(), named.clone()).is_some();
        drop(by_name);
        Ok(Created {
            action: if replaced { "replaced" } else { "created" }.into(),
            breaker: named.snapshot(),
        })
    }

    /// The breaker `name`.
    pub fn get(&self, name: &str) -> Option<Arc<NamedBreaker>> {
        lock(&self.by_name).get(name).cloned()
    }

    /// Every breaker's name, sorted.
    pub fn names(&self) -> Vec<String> {
        lock(&self.by_name).keys().cloned().collect()
    }

    /// The breaker `name`'s snapshot, or an error listing the names there are.
    pub fn snapshot(&self, name: &str) -> Result<BreakerState, String> {
        match self.get(name) {
            Some(b) => Ok(b.snapshot()),
            None => Err(unknown(name, &self.names())),
        }
    }
}

/// The message for a name with no breaker.
pub fn unknown(name: &str, names: &[String]) -> String {
    if names.is_empty() {
        format!("no breaker named {name:?}; there are none yet: create one with create_breaker")
    } else {
        format!("no breaker named {name:?}; there are: {}", names.join(", "))
    }
}

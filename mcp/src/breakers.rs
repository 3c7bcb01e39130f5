//! Named downstreams, one per service an agent calls: each a [`Reliable`] (a circuit breaker and
//! the retry policy of calls through it) in the `reliable` crate's [`Registry`], created by
//! `create_breaker`, read by `get_breaker_state` and `reliable://breaker/{name}`, and used by
//! `reliable_http_call`.
//!
//! Beside each instance the server keeps what a diagnosis needs and the instance does not report:
//! its config, and a log of its recent state changes (from an [`Observer`]), with the time until
//! an open breaker lets a probe through.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration as StdDuration, Instant as WallInstant};

use reliable::fleet::{BreakerSpec, FleetBreaker, FleetConfig, Mode, SpecError, Store};
use reliable::observer::{NotSent, Observer};
use reliable::{Registry, Reliable};
use reliable_core::breaker::{
    BreakerConfig, BreakerPolicy, Counts, ProbeRule, State, Transition, WindowConfig,
};
use reliable_core::retry::RetryConfig;
#[allow(deprecated)] // rmcp marks logging legacy; the 2025 protocol has it.
use rmcp::model::LoggingLevel;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::backoff::BackoffSpec;
use crate::duration::parse_duration;
use crate::notify::{Event, Hub};
use crate::server::BREAKER_URI;
use crate::ssrf::Limits;

/// Breakers at most.
pub const MAX_BREAKERS: usize = 64;
/// Transitions kept per breaker.
pub const TRANSITIONS_KEPT: usize = 32;
/// Longest count window, in calls.
pub const MAX_WINDOW_CALLS: u32 = 1000;
/// Most probes in flight at once.
pub const MAX_PROBES: u32 = 16;

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

/// Arguments of `create_breaker`: a preset, the seed library's parameters to change in it, and
/// the retry policy of calls made through it.
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
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
    /// Window: the last this many calls, 1 to 1000.
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
    /// Shadow mode, to roll a breaker out safely: it decides and reports what it would do (its
    /// state, transitions and would_reject count) but lets every call through. Default false.
    #[serde(default)]
    pub shadow: Option<bool>,
    /// Attempts per call made through this breaker (reliable_http_call), from 1 to the server's
    /// ceiling (this field's maximum, set by the operator). Default 3, or the ceiling if lower.
    #[serde(default)]
    pub attempts: Option<u32>,
    /// Per-attempt timeout of calls through it, e.g. "10s". Default "10s".
    #[serde(default)]
    pub timeout: Option<String>,
    /// Backoff between attempts. Default: 200ms doubling up to 10s, full jitter.
    #[serde(default)]
    pub backoff: Option<BackoffSpec>,
}

impl CreateBreakerArgs {
    /// A breaker `name` with every default.
    pub fn named(name: &str) -> Self {
        CreateBreakerArgs {
            name: name.to_string(),
            ..CreateBreakerArgs::default()
        }
    }

    /// The core's breaker config, or an error naming the field.
    pub fn breaker_config(&self) -> Result<BreakerConfig, String> {
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
        if let Some(shadow) = self.shadow {
            c.shadow = shadow;
        }
        BreakerPolicy::new(c).map_err(|e| e.to_string())?;
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
            "name: {} must be 1 to 64 letters, digits, '-', '_' or '.'",
            crate::echo::quoted(name)
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
    /// Of which were slow (`slow_successes + slow_failures`).
    pub slow: u64,
    /// Slow calls that succeeded.
    pub slow_successes: u64,
    /// Slow calls that failed (also counted in `failures`).
    pub slow_failures: u64,
    /// failures ÷ calls, if there were calls.
    pub failure_rate: Option<f64>,
}

impl From<Counts> for WindowCounts {
    fn from(c: Counts) -> Self {
        WindowCounts {
            calls: c.calls,
            failures: c.failures,
            slow: c.slow,
            slow_successes: c.slow_successes(),
            slow_failures: c.slow_failures,
            failure_rate: (c.calls > 0).then(|| c.failures as f64 / c.calls as f64),
        }
    }
}

/// Calls through the breaker since it was created.
#[derive(Clone, Debug, Serialize, JsonSchema, PartialEq)]
pub struct Totals {
    /// Calls that succeeded.
    pub succeeded: u64,
    /// Calls that failed after their attempts.
    pub failed: u64,
    /// Calls refused (breaker open, probes full).
    pub refused: u64,
    /// Calls dropped before they finished.
    pub cancelled: u64,
    /// Retries sent.
    pub retries: u64,
    /// Calls shadow mode let through that the breaker would have refused.
    pub would_reject: u64,
}

/// What `get_breaker_state` and the resource return.
#[derive(Clone, Debug, Serialize, JsonSchema, PartialEq)]
pub struct BreakerState {
    /// The name.
    pub name: String,
    /// The layers a call goes through, e.g. retry(breaker(api)).
    pub layers: String,
    /// closed, open, half-open, forced-open or disabled.
    pub state: String,
    /// Whether it runs in shadow mode: every call goes through, and its state and transitions
    /// are what it would do live.
    pub shadow: bool,
    /// While open: milliseconds until it lets a probe through.
    pub retry_after_ms: Option<f64>,
    /// The window's counts now.
    pub window: WindowCounts,
    /// Failures in a row.
    pub consecutive_failures: u32,
    /// Calls through it since it was created.
    pub totals: Totals,
    /// Recent transitions, oldest first (at most 32).
    pub transitions: Vec<TransitionRecord>,
    /// Its breaker config, as in the simulator's scenario files.
    pub config: serde_json::Value,
    /// The retry policy of calls through it.
    pub retry: serde_json::Value,
    /// Seconds since the server started, when this was read.
    pub now_s: f64,
}

/// The server's monotonic clock: seconds since it started.
#[derive(Clone, Copy, Debug)]
pub struct Clock(WallInstant);

impl Clock {
    /// Starts now.
    pub fn start() -> Self {
        Clock(WallInstant::now())
    }

    /// Time since the start.
    pub fn elapsed(&self) -> StdDuration {
        self.0.elapsed()
    }
}

/// The transitions an instance reported, each stamped on the server's clock.
#[derive(Debug, Default)]
struct Log {
    transitions: VecDeque<(Transition, StdDuration)>,
}

/// Receives an instance's transitions into its [`Log`], and tells clients ([`Hub`]).
#[derive(Debug)]
struct Recorder {
    log: Arc<Mutex<Log>>,
    clock: Clock,
    hub: Option<Arc<Hub>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every update is one step; a panic elsewhere cannot leave the data inconsistent.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[allow(deprecated)] // rmcp marks logging legacy; the 2025 protocol has it.
impl Observer for Recorder {
    fn on_transition(&self, name: &str, t: Transition) {
        let at = self.clock.elapsed();
        let mut log = lock(&self.log);
        if log.transitions.len() == TRANSITIONS_KEPT {
            log.transitions.pop_front();
        }
        log.transitions.push_back((t, at));
        drop(log);
        if let Some(hub) = &self.hub {
            let to = t.to.name();
            let level = if matches!(to, "open" | "forced-open") {
                LoggingLevel::Warning
            } else {
                LoggingLevel::Info
            };
            hub.emit(Event::Log(
                level,
                serde_json::json!({
                    "breaker": name,
                    "transition": {"from": t.from.name(), "to": to},
                    "at_s": at.as_secs_f64(),
                    "message": format!("breaker {name}: {} -> {to}", t.from.name()),
                }),
            ));
            hub.emit(Event::Updated(format!("{BREAKER_URI}{name}")));
        }
    }

    fn on_reject(&self, name: &str, refusal: NotSent) {
        let Some(hub) = &self.hub else {
            return;
        };
        let (why, retry_after) = match refusal {
            NotSent::Open { retry_after } => ("the breaker is open".to_string(), retry_after),
            NotSent::Rejected(reason) => (format!("refused: {reason:?}"), None),
        };
        hub.emit(Event::Log(
            LoggingLevel::Warning,
            serde_json::json!({
                "breaker": name,
                "refused": why,
                "retry_after_ms": retry_after.map(|d| d.as_secs_f64() * 1e3),
                "message": format!("breaker {name} refused a call: {why}"),
            }),
        ));
    }
}

/// How a breaker kept in the store (`--store`) uses it: decisions on a view refreshed every
/// 100 ms while calls come, and synced before every report and after every call (see
/// [`NamedBreaker::sync`]); the store waited for at most 50 ms, then each server decides on its
/// own (fail-open), resting the store for a second.
pub fn store_config() -> FleetConfig {
    FleetConfig {
        mode: Mode::Cached {
            refresh: StdDuration::from_millis(100),
        },
        wait: StdDuration::from_millis(50),
        rest: StdDuration::from_secs(1),
        ..FleetConfig::default()
    }
}

/// One named downstream: its instance and what the server keeps beside it.
#[derive(Debug, Clone)]
pub struct NamedBreaker {
    /// The instance calls go through.
    pub reliable: Reliable,
    /// Its breaker when the server keeps breakers in a store (`--store`).
    fleet: Option<FleetBreaker>,
    config: BreakerConfig,
    retry: RetryConfig,
    log: Arc<Mutex<Log>>,
    clock: Clock,
}

impl NamedBreaker {
    /// With a store: sends this server's results to it and reads the breaker's state there
    /// (waiting at most [`store_config`]'s bound; a store that fails leaves the last view).
    pub async fn sync(&self) {
        if let Some(f) = &self.fleet {
            f.sync().await;
        }
    }

    /// The state now, as a word.
    pub fn state_name(&self) -> &'static str {
        self.reliable.state().map_or("none", State::name)
    }

    /// While open: the time until it lets a probe through, as the breaker itself tells a call it
    /// refuses.
    pub fn retry_after(&self) -> Option<StdDuration> {
        match &self.fleet {
            Some(f) => f.open_for().map(Into::into),
            None => self.reliable.snapshot().retry_after,
        }
    }

    /// Its state, counts, totals and recent transitions.
    pub fn snapshot(&self) -> BreakerState {
        let s = self.reliable.snapshot();
        let retry_after_ms = self.retry_after().map(|d| d.as_secs_f64() * 1e3);
        let log = lock(&self.log);
        BreakerState {
            name: s.name,
            layers: s.label,
            state: s.state.map_or("none", State::name).to_string(),
            shadow: s.shadow,
            retry_after_ms,
            window: s.window.into(),
            consecutive_failures: s.consecutive_failures,
            totals: Totals {
                succeeded: s.succeeded,
                failed: s.failed,
                refused: s.refused,
                cancelled: s.cancelled,
                retries: s.retries,
                would_reject: s.would_reject,
            },
            transitions: log
                .transitions
                .iter()
                .map(|(t, at)| TransitionRecord {
                    from: t.from.name().into(),
                    to: t.to.name().into(),
                    at_s: at.as_secs_f64(),
                })
                .collect(),
            config: serde_json::to_value(self.config).unwrap_or_default(),
            retry: serde_json::to_value(self.retry).unwrap_or_default(),
            now_s: self.clock.elapsed().as_secs_f64(),
        }
    }
}

/// What `create_breaker` did.
#[derive(Clone, Debug, Serialize, JsonSchema, PartialEq)]
pub struct Created {
    /// `created`, `unchanged` (same name and settings: its state is kept) or `replaced` (new
    /// settings: the old breaker's state is gone).
    pub action: String,
    /// The breaker now.
    pub breaker: BreakerState,
}

/// Every named downstream of the server.
#[derive(Debug)]
pub struct Breakers {
    clock: Clock,
    limits: Limits,
    registry: Registry,
    extra: Mutex<BTreeMap<String, NamedBreaker>>,
    instrument: crate::instrument::Instrument,
    hub: Option<Arc<Hub>>,
    /// Where breakers live when the server shares them (`--store`).
    store: Option<Arc<dyn Store>>,
}

impl Breakers {
    /// None yet; calls through them keep within `limits`.
    pub fn new(limits: Limits) -> Self {
        Breakers {
            clock: Clock::start(),
            limits,
            registry: Registry::with_limit(MAX_BREAKERS),
            extra: Mutex::new(BTreeMap::new()),
            instrument: Default::default(),
            hub: None,
            store: None,
        }
    }

    /// The same, keeping every breaker it creates in `store` (by name, in the store's
    /// namespace): servers on one store share their breakers, and a restarted server finds its
    /// breakers' states again when it creates them.
    pub fn with_store(mut self, store: Arc<dyn Store>) -> Self {
        self.store = Some(store);
        self
    }

    /// The store the breakers live in (`--store`), if any: a `policy` argument's `Fleet` scope
    /// keeps its state there too.
    pub fn store(&self) -> Option<&Arc<dyn Store>> {
        self.store.as_ref()
    }

    /// The same, telling `hub`'s clients of creations, transitions and refused calls.
    pub fn with_hub(mut self, hub: Arc<Hub>) -> Self {
        self.hub = Some(hub);
        self
    }

    /// The same, adding `instrument` to every breaker it creates (time, observers).
    pub fn instrumented(mut self, instrument: crate::instrument::Instrument) -> Self {
        self.instrument = instrument;
        self
    }

    /// Creates (or keeps, or replaces) the breaker `args.name`.
    pub fn create(&self, args: &CreateBreakerArgs) -> Result<Created, String> {
        let config = args.breaker_config()?;
        let retry = crate::retry::config(
            args.attempts,
            args.timeout.as_deref(),
            args.backoff.as_ref(),
            true,
            &self.limits,
        )?;
        let mut extra = lock(&self.extra);
        if let Some(b) = extra.get(&args.name)
            && b.config == config
            && b.retry == retry
        {
            return Ok(Created {
                action: "unchanged".into(),
                breaker: b.snapshot(),
            });
        }
        let fleet = match &self.store {
            Some(store) => {
                // A probe's lease in the store: no call through the breaker outlives the
                // server's longest call time, so a server that dies mid-probe frees its slot
                // then at the latest.
                let mut leased = config;
                if leased.half_open.probe_timeout == reliable_core::Duration::MAX {
                    leased.half_open.probe_timeout = self.limits.max_call_time.into();
                }
                let policy = BreakerPolicy::new(leased).map_err(|e| e.to_string())?;
                let spec = BreakerSpec::new(&policy)
                    .map_err(|e| format!("{} (a breaker kept in the store)", store_field(&e)))?;
                Some(
                    FleetBreaker::new(store.clone(), &args.name, spec, store_config())
                        .map_err(|e| e.to_string())?,
                )
            }
            None => None,
        };
        let log = Arc::new(Mutex::new(Log::default()));
        let recorder = Recorder {
            log: log.clone(),
            clock: self.clock,
            hub: self.hub.clone(),
        };
        let mut builder = Reliable::builder(&args.name)
            .breaker(config)
            .retry(retry)
            .observer(recorder);
        if let Some(f) = &fleet {
            builder = builder.fleet_breaker(f.clone());
        }
        let builder = self.instrument.apply(builder);
        let replaced = self.registry.remove(&args.name).is_some();
        let reliable = match self.registry.create(builder) {
            Ok(r) => r,
            Err(e) => {
                extra.remove(&args.name);
                return Err(e.to_string());
            }
        };
        let named = NamedBreaker {
            reliable,
            fleet,
            config,
            retry,
            log,
            clock: self.clock,
        };
        extra.insert(args.name.clone(), named.clone());
        drop(extra);
        if let Some(hub) = &self.hub {
            hub.emit(if replaced {
                Event::Updated(format!("{BREAKER_URI}{}", args.name))
            } else {
                Event::ListChanged
            });
        }
        Ok(Created {
            action: if replaced { "replaced" } else { "created" }.into(),
            breaker: named.snapshot(),
        })
    }

    /// The breaker `name`.
    pub fn get(&self, name: &str) -> Option<NamedBreaker> {
        lock(&self.extra).get(name).cloned()
    }

    /// Every breaker's name, sorted.
    pub fn names(&self) -> Vec<String> {
        self.registry.names()
    }

    /// The breaker `name`'s snapshot after syncing it with the store (if there is one).
    pub async fn synced_snapshot(&self, name: &str) -> Result<BreakerState, String> {
        match self.get(name) {
            Some(b) => {
                b.sync().await;
                Ok(b.snapshot())
            }
            None => Err(unknown(name, &self.names())),
        }
    }

    /// The breaker `name`'s snapshot, or an error listing the names there are.
    pub fn snapshot(&self, name: &str) -> Result<BreakerState, String> {
        match self.get(name) {
            Some(b) => Ok(b.snapshot()),
            None => Err(unknown(name, &self.names())),
        }
    }
}

/// A setting a breaker kept in the store cannot have, named as `create_breaker` names it.
fn store_field(e: &SpecError) -> String {
    match e {
        SpecError::Unsupported { field, why } => {
            let field = match *field {
                "half_open.max_in_flight" => "max_probes_in_flight",
                "half_open.rule" => "probes",
                "open.jitter" => "preset (its open time has jitter)",
                "window" | "window.calls" => "window",
                f => f,
            };
            format!("{field}: {why}")
        }
        SpecError::Config(c) => c.to_string(),
    }
}

/// The message for a name with no breaker.
pub fn unknown(name: &str, names: &[String]) -> String {
    if names.is_empty() {
        format!(
            "no breaker named {}; there are none yet: create one with create_breaker",
            crate::echo::quoted(name)
        )
    } else {
        format!(
            "no breaker named {}; there are: {}",
            crate::echo::quoted(name),
            names.join(", ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_breaker_in_shadow_mode_says_so() {
        let b = Breakers::new(Limits::default());
        let args = CreateBreakerArgs {
            shadow: Some(true),
            ..CreateBreakerArgs::named("api")
        };
        assert!(args.breaker_config().unwrap().shadow);
        b.create(&args).unwrap();
        let state = b.get("api").unwrap().snapshot();
        assert!(state.shadow);
        assert_eq!(state.totals.would_reject, 0);
        assert_eq!(state.config["shadow"], serde_json::Value::Bool(true));
        b.create(&CreateBreakerArgs::named("live")).unwrap();
        assert!(!b.get("live").unwrap().snapshot().shadow);
    }

    #[test]
    fn create_keeps_replaces_and_names_bad_fields() {
        let b = Breakers::new(Limits::default());
        assert_eq!(
            b.create(&CreateBreakerArgs::named("api")).unwrap().action,
            "created"
        );
        assert_eq!(
            b.create(&CreateBreakerArgs::named("api")).unwrap().action,
            "unchanged"
        );
        let other = CreateBreakerArgs {
            window: Some(50),
            ..CreateBreakerArgs::named("api")
        };
        assert_eq!(b.create(&other).unwrap().action, "replaced");
        assert_eq!(b.names(), ["api"]);
        let e = |a: CreateBreakerArgs| b.create(&a).unwrap_err();
        assert!(e(CreateBreakerArgs::named("bad name")).starts_with("name"));
        assert!(
            e(CreateBreakerArgs {
                failure_rate: Some(1.5),
                ..CreateBreakerArgs::named("x")
            })
            .contains("failure_rate")
        );
        assert!(
            e(CreateBreakerArgs {
                window: Some(0),
                ..CreateBreakerArgs::named("x")
            })
            .starts_with("window")
        );
        assert!(
            e(CreateBreakerArgs {
                cooldown: Some("later".into()),
                ..CreateBreakerArgs::named("x")
            })
            .starts_with("cooldown")
        );
        assert!(
            e(CreateBreakerArgs {
                attempts: Some(6),
                ..CreateBreakerArgs::named("x")
            })
            .starts_with("attempts")
        );
        assert!(
            e(CreateBreakerArgs {
                max_probes_in_flight: Some(0),
                ..CreateBreakerArgs::named("x")
            })
            .starts_with("max_probes")
        );
        assert!(b.snapshot("x").unwrap_err().contains("there are: api"));
    }

    #[test]
    fn window_counts_split_slow_calls() {
        let w = WindowCounts::from(Counts {
            calls: 8,
            failures: 2,
            slow: 3,
            slow_failures: 1,
        });
        assert_eq!((w.slow, w.slow_successes, w.slow_failures), (3, 2, 1));
        assert_eq!(w.failure_rate, Some(0.25));
    }

    #[test]
    fn the_registry_is_bounded() {
        let b = Breakers::new(Limits::default());
        for i in 0..MAX_BREAKERS {
            b.create(&CreateBreakerArgs::named(&format!("b{i}")))
                .unwrap();
        }
        assert!(
            b.create(&CreateBreakerArgs::named("one-more"))
                .unwrap_err()
                .contains("full")
        );
    }
}

//! Chaos injection: faults, latency, chosen answers and callbacks injected into real calls, on the
//! core's decisions ([`reliable_core::chaos`]), and a scenario's fault timeline replayed by wall
//! clock.
//!
//! [`ChaosSwitch`] holds one layer's validated [`ChaosConfig`]: its four strategies, each with an
//! injection rate, a seed and an `enabled` switch that can be flipped at run time
//! ([`ChaosSwitch::set_enabled`]), and the attempt counter the decisions are drawn from. Faces:
//!
//! - `ChaosLayer` (feature `tower`, module `tower`): a tower layer over HTTP services, or any
//!   service with an `Inject` telling how an injected answer becomes a response or an error;
//! - `ChaosMiddleware` (feature `reqwest`, `reqwest` module): a `reqwest-middleware` middleware;
//! - `TimelineLayer` (feature `tower`): a scenario's client-visible faults ([`ClientFault`]) played
//!   from a start instant with the simulator's meaning; `scenario_faults` (feature `policy`)
//!   loads them from a scenario file and refuses, with the reason, the faults only a server or
//!   the workload can make.
//!
//! Injected answers are real responses (a 503 with its `Retry-After` header, a reset connection
//! as an `io::Error` of kind `ConnectionReset`, a hang that only a timeout ends), so everything
//! above the layer reads them through the core's answer table exactly as it reads real ones.
//!
//! **Safe by default.** Nothing is injected unless configured; a switch with every strategy off
//! costs a call one atomic load and one branch ([`ChaosSwitch::decide`]); and [`kill_all`] stops
//! every chaos layer of the process at once, whatever their switches say.
//!
//! Each injection is reported to the switch's observers ([`Observer::on_chaos`]), as a `tracing`
//! event whose message is Polly's event name (`Chaos.OnFault`, `Chaos.OnLatency`,
//! `Chaos.OnOutcome`, `Chaos.OnBehavior`) and as the counter `reliable_chaos_injections_total`.
//!
//! ```
//! use reliable::chaos::ChaosSwitch;
//! use reliable_core::chaos::{ChaosConfig, FaultConfig, Injected, Strategy};
//! use reliable_core::Duration;
//!
//! let chaos = ChaosSwitch::new("api", ChaosConfig {
//!     fault: Some(FaultConfig {
//!         rate: 0.1,
//!         enabled: false, // armed, switched on later
//!         seed: 42,
//!         answer: Injected::Status { status: 503, retry_after: Some(Duration::from_secs(1)), should_retry: None },
//!     }),
//!     ..ChaosConfig::OFF
//! })?;
//! assert!(chaos.decide().is_none()); // off: one load, one branch
//! chaos.set_enabled(Strategy::Fault, true);
//! let hits = (0..1000).filter(|_| chaos.decide().is_some()).count();
//! assert!((60..140).contains(&hits));
//! # Ok::<(), reliable_core::ConfigError>(())
//! ```

use crate::observer::Observer;
use reliable_core::ConfigError;
use reliable_core::answer::{Answer, Signals};
use reliable_core::chaos::{Chaos, ChaosConfig, Decision, Enabled, Strategy};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering::Relaxed};
use std::time::Duration;

#[cfg(feature = "reqwest")]
pub mod reqwest;
#[cfg(feature = "policy")]
mod scenario;
#[cfg(feature = "tower")]
pub mod tower;

#[cfg(feature = "policy")]
pub use scenario::{ScenarioFaults, UnplayableFault, scenario_faults};

pub use reliable_core::chaos::{ClientFault, FaultWindow};

/// The process-wide kill switch: when set, no chaos layer injects anything.
static KILLED: AtomicBool = AtomicBool::new(false);

/// Stops (`true`) or allows again (`false`) every chaos injection in the process, whatever each
/// layer's switches say. Takes effect for the next attempt of every layer.
pub fn kill_all(killed: bool) {
    KILLED.store(killed, Relaxed);
}

/// Whether [`kill_all`] has stopped every injection.
pub fn killed() -> bool {
    KILLED.load(Relaxed)
}

/// One injection, as the observers see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChaosEvent {
    /// Which strategy; its [`event`](Strategy::event) is Polly's name for it.
    pub strategy: Strategy,
    /// The attempt's number through the layer, from 0.
    pub attempt: u64,
    /// The injected delay (latency).
    pub delay: Option<Duration>,
    /// The injected answer (fault, outcome).
    pub answer: Option<Answer>,
}

/// A user's callback, for the behaviour strategy.
pub type Behavior = Arc<dyn Fn() + Send + Sync>;

struct Inner {
    name: Arc<str>,
    chaos: Chaos,
    on: AtomicU8,
    attempts: AtomicU64,
    observers: Vec<Arc<dyn Observer>>,
    behavior: Option<Behavior>,
}

/// One chaos layer's strategies, switches and attempt counter; clones share them.
#[derive(Clone)]
pub struct ChaosSwitch {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for ChaosSwitch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChaosSwitch")
            .field("name", &self.inner.name)
            .field("chaos", &self.inner.chaos)
            .field("enabled", &self.enabled())
            .finish_non_exhaustive()
    }
}

/// Builds a [`ChaosSwitch`] with observers and a behaviour callback.
pub struct ChaosBuilder {
    name: Arc<str>,
    config: ChaosConfig,
    observers: Vec<Arc<dyn Observer>>,
    behavior: Option<Behavior>,
}

impl std::fmt::Debug for ChaosBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChaosBuilder")
            .field("name", &self.name)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl ChaosBuilder {
    /// Reports each injection to `observer`.
    pub fn observer(mut self, observer: impl Observer) -> Self {
        self.observers.push(Arc::new(observer));
        self
    }

    /// Reports each injection as a `tracing` event (feature `tracing`).
    #[cfg(feature = "tracing")]
    pub fn tracing(self) -> Self {
        self.observer(crate::traces::TracingObserver)
    }

    /// Counts each injection in `reliable_chaos_injections_total` (feature `metrics`).
    #[cfg(feature = "metrics")]
    pub fn metrics(mut self) -> Self {
        let m = crate::metrics::Metrics::new(&self.name, None);
        self.observers.push(Arc::new(m));
        self
    }

    /// The behaviour strategy's callback, run before an attempt it hits.
    pub fn behavior(mut self, callback: impl Fn() + Send + Sync + 'static) -> Self {
        self.behavior = Some(Arc::new(callback));
        self
    }

    /// Validates the config (the error names the field, such as `fault.rate`).
    pub fn build(self) -> Result<ChaosSwitch, ConfigError> {
        let chaos = Chaos::new(self.config)?;
        Ok(ChaosSwitch {
            inner: Arc::new(Inner {
                name: self.name,
                on: AtomicU8::new(chaos.enabled().0),
                chaos,
                attempts: AtomicU64::new(0),
                observers: self.observers,
                behavior: self.behavior,
            }),
        })
    }
}

impl ChaosSwitch {
    /// A switch named `name` (for observers and metric labels) over `config`, without observers.
    pub fn new(name: &str, config: ChaosConfig) -> Result<Self, ConfigError> {
        Self::builder(name, config).build()
    }

    /// A builder, to add observers and a behaviour callback.
    pub fn builder(name: &str, config: ChaosConfig) -> ChaosBuilder {
        ChaosBuilder {
            name: Arc::from(name),
            config,
            observers: Vec::new(),
            behavior: None,
        }
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Switches `strategy` on or off for the next attempts. A strategy the config does not have
    /// stays off.
    pub fn set_enabled(&self, strategy: Strategy, on: bool) {
        let mask = self.inner.chaos.configured().0 & strategy.bit();
        if on {
            self.inner.on.fetch_or(mask, Relaxed);
        } else {
            self.inner.on.fetch_and(!strategy.bit(), Relaxed);
        }
    }

    /// The strategies switched on now.
    pub fn enabled(&self) -> Enabled {
        Enabled(self.inner.on.load(Relaxed))
    }

    /// Attempts counted so far (only while some strategy was on).
    pub fn attempts(&self) -> u64 {
        self.inner.attempts.load(Relaxed)
    }

    /// What the next attempt gets, `None` when nothing is injected. With every strategy off this
    /// is one atomic load and one branch; otherwise it also reads the kill switch, counts the
    /// attempt, and reports each injection to the observers.
    #[inline]
    pub fn decide(&self) -> Option<Decision> {
        let on = self.inner.on.load(Relaxed);
        if on == 0 {
            return None;
        }
        self.decide_armed(Enabled(on))
    }

    #[inline(never)]
    fn decide_armed(&self, on: Enabled) -> Option<Decision> {
        if killed() {
            return None;
        }
        let n = self.inner.attempts.fetch_add(1, Relaxed);
        let d = self.inner.chaos.decide(n, on);
        if d.is_none() {
            return None;
        }
        if d.behavior {
            self.report(ChaosEvent {
                strategy: Strategy::Behavior,
                attempt: n,
                delay: None,
                answer: None,
            });
            if let Some(callback) = &self.inner.behavior {
                callback();
            }
        }
        if let Some(delay) = d.latency {
            self.report(ChaosEvent {
                strategy: Strategy::Latency,
                attempt: n,
                delay: Some(delay.into()),
                answer: None,
            });
        }
        if let Some((strategy, injected)) = d.answer {
            self.report(ChaosEvent {
                strategy,
                attempt: n,
                delay: None,
                answer: Some(injected.answer()),
            });
        }
        Some(d)
    }

    /// Tells the observers of an injection (the timeline layer reports through this too).
    pub fn report(&self, event: ChaosEvent) {
        for o in &self.inner.observers {
            o.on_chaos(&self.inner.name, &event);
        }
    }
}

/// The headers an injected status answer carries: `Retry-After` in whole seconds (rounded up),
/// `retry-after-ms` as well when the delay is not whole seconds, `x-should-retry` when set.
pub fn injected_headers(signals: Signals) -> Vec<(&'static str, String)> {
    let mut h = Vec::new();
    if let Some(after) = signals.retry_after {
        let ms = after.as_millis();
        h.push(("retry-after", ms.div_ceil(1000).to_string()));
        if ms % 1000 != 0 {
            h.push(("retry-after-ms", ms.to_string()));
        }
    }
    if let Some(retry) = signals.should_retry {
        h.push(("x-should-retry", retry.to_string()));
    }
    h
}

/// The error an injected reset becomes: an `io::Error` of kind `ConnectionReset`, which the
/// answer table reads as a dropped connection (transient).
pub fn reset_error() -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::ConnectionReset,
        "chaos: connection reset injected",
    )
}

//! Chaos injection, decided purely: whether an attempt gets an injected fault, latency, outcome
//! or behaviour, and what a scenario's fault timeline does to an attempt at time `t`.
//!
//! Four strategies, as Polly v8 has them (and names their telemetry events):
//!
//! | strategy | injects | event |
//! |---|---|---|
//! | [`Fault`](Strategy::Fault) | a failure instead of the real answer: a status with its signals (a 503 with `Retry-After`), a reset connection, or no answer at all (a hang, ended by the attempt's timer) | `Chaos.OnFault` |
//! | [`Latency`](Strategy::Latency) | a delay before the attempt is sent: fixed, or uniform in `[min, max]` | `Chaos.OnLatency` |
//! | [`Outcome`](Strategy::Outcome) | a chosen answer instead of the real one, success or not | `Chaos.OnOutcome` |
//! | [`Behavior`](Strategy::Behavior) | a call of the user's callback before the attempt | `Chaos.OnBehavior` |
//!
//! Each strategy has an injection rate, an `enabled` flag and a seed. Whether attempt `n` (the
//! `n`-th attempt through the layer, from 0) is hit is a function of those alone
//! ([`Injection::injects`]), so every face (the Rust layers, the Python and TypeScript wrappers)
//! injects the same answers at the same attempts for the same seed: the sample is
//! [`draw`]`(seed, stream, n)` with the strategy's [stream](Strategy::stream), and the attempt is
//! hit when `bernoulli_ppm` of it says so for the rate in parts
//! per million. A disabled strategy draws nothing.
//!
//! Injected answers are the core's [`Answer`]s: a face turns them into the response (or error)
//! the answer stands for, and the answer table reads them like any real answer.
//!
//! The order within one attempt is fixed: behaviour, then latency, then the answer (a fault wins
//! over an outcome when both hit).
//!
//! # A scenario's fault timeline
//!
//! [`Timeline`] plays the client-visible faults of a simulator scenario ([`ClientFault`]) by the
//! time since the replay started, with the simulator's meaning: overlapping error rates combine as
//! independent chances (`1 − Π(1 − p)`), latency factors multiply, an outage fails at once (a
//! 503) unless one of the active outages hangs, the first active throttle answers a share of
//! arrivals with a 429 and its `Retry-After`, and a partition holds traffic until the latest end
//! among the active partitions. A capacity loss or a server's queue are the server's own state and
//! have no client-side form: a loader refuses them.
//!
//! ```
//! use reliable_core::chaos::{Chaos, ChaosConfig, FaultConfig, Injected, Strategy, Enabled};
//! use reliable_core::Duration;
//!
//! let chaos = Chaos::new(ChaosConfig {
//!     fault: Some(FaultConfig {
//!         rate: 0.25,
//!         enabled: true,
//!         seed: 7,
//!         answer: Injected::Status { status: 503, retry_after: Some(Duration::from_secs(2)), should_retry: None },
//!     }),
//!     ..ChaosConfig::OFF
//! })?;
//! let hits = (0..10_000).filter(|&n| chaos.decide(n, chaos.enabled()).answer.is_some()).count();
//! assert!((2_300..2_700).contains(&hits));
//! // Switched off at run time: nothing is drawn, nothing injected.
//! assert!(chaos.decide(0, Enabled::NONE).is_none());
//! assert_eq!(Strategy::Fault.event(), "Chaos.OnFault");
//! # Ok::<(), reliable_core::ConfigError>(())
//! ```

use crate::answer::{Answer, Signals};
use crate::error::{ConfigError, Problem, fraction_ppm, in_range, tri};
use crate::sample::{bernoulli_ppm, splitmix64, uniform_between};
use crate::time::Duration;

/// One of the four chaos strategies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Strategy {
    /// A failure instead of the real answer.
    Fault,
    /// A delay before the attempt.
    Latency,
    /// A chosen answer instead of the real one.
    Outcome,
    /// The user's callback before the attempt.
    Behavior,
}

impl Strategy {
    /// All four, in the order of their [streams](Strategy::stream) (an attempt meets them in another
    /// order: see the [module docs](self)).
    pub const ALL: [Strategy; 4] = [
        Strategy::Fault,
        Strategy::Latency,
        Strategy::Outcome,
        Strategy::Behavior,
    ];

    /// The telemetry event an injection reports, as Polly names it: `Chaos.OnFault`,
    /// `Chaos.OnLatency`, `Chaos.OnOutcome`, `Chaos.OnBehavior`.
    pub const fn event(self) -> &'static str {
        match self {
            Strategy::Fault => "Chaos.OnFault",
            Strategy::Latency => "Chaos.OnLatency",
            Strategy::Outcome => "Chaos.OnOutcome",
            Strategy::Behavior => "Chaos.OnBehavior",
        }
    }

    /// A short lower-case name for metric labels: `fault`, `latency`, `outcome`, `behavior`.
    pub const fn name(self) -> &'static str {
        match self {
            Strategy::Fault => "fault",
            Strategy::Latency => "latency",
            Strategy::Outcome => "outcome",
            Strategy::Behavior => "behavior",
        }
    }

    /// The strategy's random stream in [`draw`]: 0, 1, 2, 3 in the order of [`Strategy::ALL`].
    pub const fn stream(self) -> u64 {
        match self {
            Strategy::Fault => 0,
            Strategy::Latency => 1,
            Strategy::Outcome => 2,
            Strategy::Behavior => 3,
        }
    }

    /// Its bit in [`Enabled`].
    pub const fn bit(self) -> u8 {
        1 << self.stream()
    }
}

/// Stream of the latency strategy's delay sample (the decision uses [`Strategy::stream`]).
pub const DELAY_STREAM: u64 = 4;
/// Stream of a timeline's throttle decisions.
pub const THROTTLE_STREAM: u64 = 5;
/// Stream of a timeline's error-rate decisions.
pub const ERROR_STREAM: u64 = 6;

/// The sample of attempt `n` on `stream` for `seed`: `splitmix64(splitmix64(seed + stream) ^ n)`
/// (wrapping addition). Written out so that another language draws the same numbers.
pub const fn draw(seed: u64, stream: u64, n: u64) -> u64 {
    splitmix64(splitmix64(seed.wrapping_add(stream)) ^ n)
}

/// Which strategies are switched on right now, one bit per strategy ([`Strategy::bit`]). A face
/// keeps it in one atomic byte, so a layer with every strategy off costs one load and one branch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Enabled(pub u8);

impl Enabled {
    /// Nothing enabled.
    pub const NONE: Enabled = Enabled(0);

    /// Whether `s` is on.
    pub const fn has(self, s: Strategy) -> bool {
        self.0 & s.bit() != 0
    }

    /// With `s` switched to `on`.
    pub const fn with(self, s: Strategy, on: bool) -> Enabled {
        if on {
            Enabled(self.0 | s.bit())
        } else {
            Enabled(self.0 & !s.bit())
        }
    }

    /// Whether nothing is on.
    pub const fn is_none(self) -> bool {
        self.0 == 0
    }
}

/// An answer to inject, as a config writes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
pub enum Injected {
    /// A response with this status and the signals its headers carry.
    Status {
        /// The status, 100 to 599.
        status: u16,
        /// A `Retry-After` to send with it.
        #[cfg_attr(feature = "serde", serde(default))]
        retry_after: Option<Duration>,
        /// An `x-should-retry` to send with it.
        #[cfg_attr(feature = "serde", serde(default))]
        should_retry: Option<bool>,
    },
    /// The connection is reset before an answer.
    Reset,
    /// No answer ever comes: only the attempt's timer (or the caller) ends it.
    Hang,
}

impl Injected {
    /// The core's answer it stands for (a hang ends as the attempt's [`Answer::Timeout`]).
    pub const fn answer(self) -> Answer {
        match self {
            Injected::Status {
                status,
                retry_after,
                should_retry,
            } => Answer::status(
                status,
                Signals {
                    retry_after,
                    should_retry,
                    overloaded: false,
                },
            ),
            Injected::Reset => Answer::Connection,
            Injected::Hang => Answer::Timeout,
        }
    }

    const fn check(self, field: &'static str) -> Result<Injected, ConfigError> {
        if let Injected::Status { status, .. } = self
            && (status < 100 || status > 599)
        {
            return Err(ConfigError::new(
                field,
                Problem::OutOfRange {
                    value: status as f64,
                    min: 100.0,
                    max: 599.0,
                },
            ));
        }
        Ok(self)
    }
}

/// How long an injected latency lasts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
pub enum Delay {
    /// Always this long.
    Fixed {
        /// The delay.
        delay: Duration,
    },
    /// Uniform in `[min, max]`, both included (to the nanosecond).
    Uniform {
        /// Shortest.
        min: Duration,
        /// Longest.
        max: Duration,
    },
}

impl Delay {
    /// The delay for a uniform sample.
    pub const fn sample(self, sample: u64) -> Duration {
        match self {
            Delay::Fixed { delay } => delay,
            Delay::Uniform { min, max } => {
                Duration::from_nanos(uniform_between(sample, min.as_nanos(), max.as_nanos()))
            }
        }
    }
}

/// The fault strategy's config.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
pub struct FaultConfig {
    /// Share of attempts hit, in `[0, 1]`.
    pub rate: f64,
    /// Switched on at the start. Default on.
    #[cfg_attr(feature = "serde", serde(default = "on"))]
    pub enabled: bool,
    /// The seed of its decisions. Default 0.
    #[cfg_attr(feature = "serde", serde(default))]
    pub seed: u64,
    /// What a hit attempt gets: a failure (a status the answer table reads as one, a reset, a
    /// hang).
    pub answer: Injected,
}

/// The latency strategy's config.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
pub struct LatencyConfig {
    /// Share of attempts hit, in `[0, 1]`.
    pub rate: f64,
    /// Switched on at the start. Default on.
    #[cfg_attr(feature = "serde", serde(default = "on"))]
    pub enabled: bool,
    /// The seed of its decisions and delays. Default 0.
    #[cfg_attr(feature = "serde", serde(default))]
    pub seed: u64,
    /// How long.
    pub delay: Delay,
}

/// The outcome strategy's config.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
pub struct OutcomeConfig {
    /// Share of attempts hit, in `[0, 1]`.
    pub rate: f64,
    /// Switched on at the start. Default on.
    #[cfg_attr(feature = "serde", serde(default = "on"))]
    pub enabled: bool,
    /// The seed of its decisions. Default 0.
    #[cfg_attr(feature = "serde", serde(default))]
    pub seed: u64,
    /// The answer a hit attempt gets, success or not.
    pub answer: Injected,
}

/// The behaviour strategy's config (the callback itself is the face's).
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
pub struct BehaviorConfig {
    /// Share of attempts hit, in `[0, 1]`.
    pub rate: f64,
    /// Switched on at the start. Default on.
    #[cfg_attr(feature = "serde", serde(default = "on"))]
    pub enabled: bool,
    /// The seed of its decisions. Default 0.
    #[cfg_attr(feature = "serde", serde(default))]
    pub seed: u64,
}

#[cfg(feature = "serde")]
fn on() -> bool {
    true
}

/// Which strategies a chaos layer runs; each absent one is off for good. The default,
/// [`ChaosConfig::OFF`], injects nothing.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields, default))]
pub struct ChaosConfig {
    /// Injected failures.
    pub fault: Option<FaultConfig>,
    /// Injected delays.
    pub latency: Option<LatencyConfig>,
    /// Injected answers.
    pub outcome: Option<OutcomeConfig>,
    /// The user's callback.
    pub behavior: Option<BehaviorConfig>,
}

impl ChaosConfig {
    /// No strategy at all.
    pub const OFF: ChaosConfig = ChaosConfig {
        fault: None,
        latency: None,
        outcome: None,
        behavior: None,
    };
}

/// One strategy's validated rate and seed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Injection {
    rate_ppm: u32,
    seed: u64,
    stream: u64,
}

impl Injection {
    /// Validates `rate` (named `field`) for `strategy`.
    pub const fn new(
        field: &'static str,
        strategy: Strategy,
        rate: f64,
        seed: u64,
    ) -> Result<Injection, ConfigError> {
        let rate_ppm = tri!(fraction_ppm(field, rate, true, true));
        Ok(Injection {
            rate_ppm,
            seed,
            stream: strategy.stream(),
        })
    }

    /// The rate in parts per million.
    pub const fn rate_ppm(self) -> u32 {
        self.rate_ppm
    }

    /// Whether attempt `n` is hit, when the strategy is `enabled`. Draws nothing when it is not.
    #[inline]
    pub const fn injects(self, enabled: bool, n: u64) -> bool {
        enabled && bernoulli_ppm(draw(self.seed, self.stream, n), self.rate_ppm)
    }
}

/// A validated [`ChaosConfig`]: decides, per attempt, what to inject.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Chaos {
    fault: Option<(Injection, Injected)>,
    latency: Option<(Injection, Delay)>,
    outcome: Option<(Injection, Injected)>,
    behavior: Option<Injection>,
    enabled: Enabled,
}

/// What one attempt gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Decision {
    /// Run the user's callback first.
    pub behavior: bool,
    /// Wait this long before sending (or answering).
    pub latency: Option<Duration>,
    /// Answer this instead of sending: the strategy ([`Fault`](Strategy::Fault) or
    /// [`Outcome`](Strategy::Outcome)) and what it injects.
    pub answer: Option<(Strategy, Injected)>,
}

impl Decision {
    /// Nothing injected.
    pub const fn is_none(&self) -> bool {
        !self.behavior && self.latency.is_none() && self.answer.is_none()
    }
}

impl Chaos {
    /// Validates `config`: each rate a fraction in `[0, 1]` (`fault.rate`, ...), a fault's answer a
    /// failure (`fault.answer`), statuses in 100-599, a uniform delay's `min` at most its `max`.
    pub const fn new(config: ChaosConfig) -> Result<Chaos, ConfigError> {
        let mut enabled = Enabled::NONE;
        let fault = match config.fault {
            Some(c) => {
                let inj = tri!(Injection::new(
                    "fault.rate",
                    Strategy::Fault,
                    c.rate,
                    c.seed
                ));
                let answer = tri!(c.answer.check("fault.answer.status"));
                if answer.answer().class().is_none() {
                    return Err(ConfigError::new(
                        "fault.answer",
                        Problem::Inconsistent(
                            "a fault must be a failure; inject a success as an outcome",
                        ),
                    ));
                }
                enabled = enabled.with(Strategy::Fault, c.enabled);
                Some((inj, answer))
            }
            None => None,
        };
        let latency = match config.latency {
            Some(c) => {
                let inj = tri!(Injection::new(
                    "latency.rate",
                    Strategy::Latency,
                    c.rate,
                    c.seed
                ));
                if let Delay::Uniform { min, max } = c.delay
                    && min.as_nanos() > max.as_nanos()
                {
                    return Err(ConfigError::new(
                        "latency.delay.max",
                        Problem::Inconsistent("a uniform delay's max must be at least its min"),
                    ));
                }
                enabled = enabled.with(Strategy::Latency, c.enabled);
                Some((inj, c.delay))
            }
            None => None,
        };
        let outcome = match config.outcome {
            Some(c) => {
                let inj = tri!(Injection::new(
                    "outcome.rate",
                    Strategy::Outcome,
                    c.rate,
                    c.seed
                ));
                let answer = tri!(c.answer.check("outcome.answer.status"));
                enabled = enabled.with(Strategy::Outcome, c.enabled);
                Some((inj, answer))
            }
            None => None,
        };
        let behavior = match config.behavior {
            Some(c) => {
                let inj = tri!(Injection::new(
                    "behavior.rate",
                    Strategy::Behavior,
                    c.rate,
                    c.seed
                ));
                enabled = enabled.with(Strategy::Behavior, c.enabled);
                Some(inj)
            }
            None => None,
        };
        Ok(Chaos {
            fault,
            latency,
            outcome,
            behavior,
            enabled,
        })
    }

    /// The strategies switched on at the start (a configured strategy with `enabled: true`).
    pub const fn enabled(&self) -> Enabled {
        self.enabled
    }

    /// The strategies configured at all (only these can be switched on at run time).
    pub const fn configured(&self) -> Enabled {
        let mut e = Enabled::NONE;
        e = e.with(Strategy::Fault, self.fault.is_some());
        e = e.with(Strategy::Latency, self.latency.is_some());
        e = e.with(Strategy::Outcome, self.outcome.is_some());
        e.with(Strategy::Behavior, self.behavior.is_some())
    }

    /// What attempt `n` (from 0, counted by the layer) gets while the strategies `on` are
    /// switched on.
    pub const fn decide(&self, n: u64, on: Enabled) -> Decision {
        let behavior = match self.behavior {
            Some(inj) => inj.injects(on.has(Strategy::Behavior), n),
            None => false,
        };
        let latency = match self.latency {
            Some((inj, delay)) if inj.injects(on.has(Strategy::Latency), n) => {
                Some(delay.sample(draw(inj.seed, DELAY_STREAM, n)))
            }
            _ => None,
        };
        let fault = match self.fault {
            Some((inj, answer)) if inj.injects(on.has(Strategy::Fault), n) => {
                Some((Strategy::Fault, answer))
            }
            _ => None,
        };
        let answer = match fault {
            Some(f) => Some(f),
            None => match self.outcome {
                Some((inj, answer)) if inj.injects(on.has(Strategy::Outcome), n) => {
                    Some((Strategy::Outcome, answer))
                }
                _ => None,
            },
        };
        Decision {
            behavior,
            latency,
            answer,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// A scenario's fault timeline, client side.

/// A simulator fault that a client can play, with its simulator meaning.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ClientFault {
    /// The downstream is down: attempts fail at once with a 503 (`hang: false`), or never get an
    /// answer (`hang: true`: only the attempt's timer ends them).
    Outage {
        /// No answer at all instead of a fast failure.
        hang: bool,
    },
    /// The network holds traffic: attempts sent and answers arriving in the window are delivered
    /// when it ends.
    Partition,
    /// Answers arriving in the window fail (a 500) with this probability, after being served.
    ErrorRate {
        /// In `[0, 1]`.
        rate: f64,
    },
    /// Attempts sent in the window take `factor` times as long.
    LatencyInflation {
        /// At least 1.
        factor: f64,
    },
    /// A `share` of attempts sent in the window get a 429 with this `Retry-After`.
    Throttle {
        /// In `(0, 1]`.
        share: f64,
        /// The hint sent back.
        retry_after: Duration,
    },
}

/// A fault active over `[from, until)`, times since the replay started.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FaultWindow {
    /// Start.
    pub from: Duration,
    /// End (exclusive).
    pub until: Duration,
    /// What it does.
    pub fault: ClientFault,
}

impl FaultWindow {
    /// Validates the window (`until` after `from`) and the fault's numbers; the error's field is
    /// relative to the fault (`until`, `rate`, `factor`, `share`).
    pub const fn check(self) -> Result<FaultWindow, ConfigError> {
        if self.until.as_nanos() <= self.from.as_nanos() {
            return Err(ConfigError::new(
                "until",
                Problem::Inconsistent("a fault must end after it starts"),
            ));
        }
        match self.fault {
            ClientFault::ErrorRate { rate } => {
                tri!(fraction_ppm("rate", rate, true, true));
            }
            ClientFault::LatencyInflation { factor } => {
                tri!(in_range("factor", factor, 1.0, f64::INFINITY));
            }
            ClientFault::Throttle { share, .. } => {
                tri!(fraction_ppm("share", share, false, true));
            }
            ClientFault::Outage { .. } | ClientFault::Partition => {}
        }
        Ok(self)
    }

    /// Whether it is active at `t`.
    #[inline]
    pub const fn active(&self, t: Duration) -> bool {
        self.from.as_nanos() <= t.as_nanos() && t.as_nanos() < self.until.as_nanos()
    }
}

/// Overlapping error rates as independent chances: `1 − Π(1 − p)`, multiplied in order.
pub fn combined_error_rate(rates: impl Iterator<Item = f64>) -> f64 {
    let mut ok = 1.0;
    for rate in rates {
        ok *= 1.0 - rate;
    }
    1.0 - ok
}

/// Overlapping latency factors multiply, in order (1 when none).
pub fn combined_latency_factor(factors: impl Iterator<Item = f64>) -> f64 {
    factors.fold(1.0, |a, b| a * b)
}

/// What an attempt meets when it is sent at some `t`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum AtSend {
    /// Send it; its real latency is then stretched by `latency_factor` (1: unchanged).
    Send {
        /// The active latency inflation.
        latency_factor: f64,
    },
    /// A partition: hold it until this time, then meet the timeline again.
    Hold {
        /// When the partition heals.
        until: Duration,
    },
    /// Answer this instead of sending (an outage's 503, a throttle's 429).
    Answer(Answer),
    /// Never answer (a hanging outage).
    Hang,
}

/// What a real answer meets when it comes back at some `t`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum AtAnswer {
    /// Deliver it as it is.
    Deliver,
    /// A partition: hold it until this time.
    Hold {
        /// When the partition heals.
        until: Duration,
    },
    /// Replace the success with this failure (an error rate's 500).
    Fail(Answer),
}

/// The faults of one downstream, validated, played by time since the replay started.
#[derive(Clone, Copy, Debug)]
pub struct Timeline<'a> {
    faults: &'a [FaultWindow],
    seed: u64,
}

impl<'a> Timeline<'a> {
    /// Validates each window ([`FaultWindow::check`]; the error's field is the fault's own). The
    /// throttle and error-rate draws come from `seed` and the attempt's number.
    pub fn new(faults: &'a [FaultWindow], seed: u64) -> Result<Self, (usize, ConfigError)> {
        for (i, f) in faults.iter().enumerate() {
            if let Err(e) = f.check() {
                return Err((i, e));
            }
        }
        Ok(Timeline { faults, seed })
    }

    /// The faults.
    pub fn faults(&self) -> &'a [FaultWindow] {
        self.faults
    }

    fn active(&self, t: Duration) -> impl Iterator<Item = &'a FaultWindow> {
        self.faults.iter().filter(move |f| f.active(t))
    }

    /// The latest end among the partitions active at `t`.
    pub fn held_until(&self, t: Duration) -> Option<Duration> {
        self.active(t)
            .filter(|f| matches!(f.fault, ClientFault::Partition))
            .map(|f| f.until)
            .max()
    }

    /// The combined error rate at `t`.
    pub fn error_rate(&self, t: Duration) -> f64 {
        combined_error_rate(self.active(t).filter_map(|f| match f.fault {
            ClientFault::ErrorRate { rate } => Some(rate),
            _ => None,
        }))
    }

    /// The combined latency factor at `t`.
    pub fn latency_factor(&self, t: Duration) -> f64 {
        combined_latency_factor(self.active(t).filter_map(|f| match f.fault {
            ClientFault::LatencyInflation { factor } => Some(factor),
            _ => None,
        }))
    }

    /// Attempt `n` sent at `t`: held by a partition first, then an outage (a hang wins over a
    /// fast failure), then the first active throttle's share, else sent.
    pub fn at_send(&self, t: Duration, n: u64) -> AtSend {
        if let Some(until) = self.held_until(t) {
            return AtSend::Hold { until };
        }
        let mut outage = None;
        let mut throttle = None;
        for f in self.active(t) {
            match f.fault {
                ClientFault::Outage { hang } => outage = Some(hang || outage == Some(true)),
                ClientFault::Throttle { share, retry_after } if throttle.is_none() => {
                    throttle = Some((share, retry_after));
                }
                _ => {}
            }
        }
        match outage {
            Some(true) => return AtSend::Hang,
            Some(false) => return AtSend::Answer(Answer::status(503, Signals::NONE)),
            None => {}
        }
        if let Some((share, retry_after)) = throttle
            && chance(draw(self.seed, THROTTLE_STREAM, n), share)
        {
            return AtSend::Answer(Answer::status(
                429,
                Signals {
                    retry_after: Some(retry_after),
                    ..Signals::NONE
                },
            ));
        }
        AtSend::Send {
            latency_factor: self.latency_factor(t),
        }
    }

    /// The answer of attempt `n` arriving at `t` (`success`: the answer table reads it as one):
    /// held by a partition, or a success failed by the active error rate.
    pub fn at_answer(&self, t: Duration, n: u64, success: bool) -> AtAnswer {
        if let Some(until) = self.held_until(t) {
            return AtAnswer::Hold { until };
        }
        if success {
            let p = self.error_rate(t);
            if p > 0.0 && chance(draw(self.seed, ERROR_STREAM, n), p) {
                return AtAnswer::Fail(Answer::status(500, Signals::NONE));
            }
        }
        AtAnswer::Deliver
    }

    /// Where the timeline ends: the last end among its faults (zero when empty).
    pub fn end(&self) -> Duration {
        let mut end = Duration::ZERO;
        for f in self.faults {
            if f.until.as_nanos() > end.as_nanos() {
                end = f.until;
            }
        }
        end
    }
}

/// `true` with probability `p` (clamped to `[0, 1]`) for a uniform sample, to a part per million.
fn chance(sample: u64, p: f64) -> bool {
    let ppm = if p >= 1.0 {
        crate::PPM
    } else if p > 0.0 {
        (p * crate::PPM as f64 + 0.5) as u32
    } else {
        0
    };
    bernoulli_ppm(sample, ppm)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::ErrorClass;

    fn fault(rate: f64, answer: Injected) -> ChaosConfig {
        ChaosConfig {
            fault: Some(FaultConfig {
                rate,
                enabled: true,
                seed: 1,
                answer,
            }),
            ..ChaosConfig::OFF
        }
    }

    const BUSY: Injected = Injected::Status {
        status: 503,
        retry_after: Some(Duration::from_secs(2)),
        should_retry: None,
    };

    #[test]
    fn off_injects_nothing() {
        let c = Chaos::new(ChaosConfig::OFF).unwrap();
        assert!(c.enabled().is_none());
        for n in 0..1000 {
            assert!(c.decide(n, Enabled(0xff)).is_none());
        }
    }

    #[test]
    fn rate_one_always_rate_zero_never() {
        let all = Chaos::new(fault(1.0, BUSY)).unwrap();
        let none = Chaos::new(fault(0.0, BUSY)).unwrap();
        for n in 0..1000 {
            assert_eq!(
                all.decide(n, all.enabled()).answer,
                Some((Strategy::Fault, BUSY))
            );
            assert!(none.decide(n, none.enabled()).is_none());
            assert!(all.decide(n, Enabled::NONE).is_none());
        }
    }

    #[test]
    fn injected_answers_mean_what_the_table_says() {
        assert_eq!(
            BUSY.answer().class(),
            Some(ErrorClass::Throttled {
                retry_after: Some(Duration::from_secs(2))
            })
        );
        assert_eq!(
            Injected::Reset.answer().class(),
            Some(ErrorClass::Transient)
        );
        assert_eq!(Injected::Hang.answer().class(), Some(ErrorClass::Timeout));
    }

    #[test]
    fn configs_are_refused_with_the_field_named() {
        assert_eq!(
            Chaos::new(fault(1.5, BUSY)).unwrap_err().field,
            "fault.rate"
        );
        assert_eq!(
            Chaos::new(fault(f64::NAN, BUSY)).unwrap_err().field,
            "fault.rate"
        );
        let ok = Injected::Status {
            status: 200,
            retry_after: None,
            should_retry: None,
        };
        assert_eq!(
            Chaos::new(fault(0.1, ok)).unwrap_err().field,
            "fault.answer"
        );
        let bad = Injected::Status {
            status: 42,
            retry_after: None,
            should_retry: None,
        };
        assert_eq!(
            Chaos::new(fault(0.1, bad)).unwrap_err().field,
            "fault.answer.status"
        );
        let lat = ChaosConfig {
            latency: Some(LatencyConfig {
                rate: 0.5,
                enabled: true,
                seed: 0,
                delay: Delay::Uniform {
                    min: Duration::from_millis(5),
                    max: Duration::from_millis(1),
                },
            }),
            ..ChaosConfig::OFF
        };
        assert_eq!(Chaos::new(lat).unwrap_err().field, "latency.delay.max");
        let beh = ChaosConfig {
            behavior: Some(BehaviorConfig {
                rate: -0.1,
                enabled: true,
                seed: 0,
            }),
            ..ChaosConfig::OFF
        };
        assert_eq!(Chaos::new(beh).unwrap_err().field, "behavior.rate");
    }

    #[test]
    fn the_same_seed_hits_the_same_attempts_and_the_draw_is_pinned() {
        let a = Chaos::new(fault(0.3, Injected::Reset)).unwrap();
        let b = Chaos::new(fault(0.3, Injected::Reset)).unwrap();
        let hits = |c: &Chaos| {
            (0..64)
                .filter(|&n| c.decide(n, c.enabled()).answer.is_some())
                .fold(0u64, |m, n| m | 1 << n)
        };
        assert_eq!(hits(&a), hits(&b));
        // Pinned so that other languages can check their port against it.
        assert_eq!(draw(1, 0, 0), splitmix64(splitmix64(1)));
        assert_eq!(draw(0, 0, 0), 0xA706_DD2F_4D19_7E6F);
    }

    #[test]
    fn a_fault_wins_over_an_outcome_and_latency_comes_from_its_range() {
        let c = Chaos::new(ChaosConfig {
            fault: Some(FaultConfig {
                rate: 1.0,
                enabled: true,
                seed: 0,
                answer: Injected::Reset,
            }),
            outcome: Some(OutcomeConfig {
                rate: 1.0,
                enabled: true,
                seed: 0,
                answer: Injected::Status {
                    status: 200,
                    retry_after: None,
                    should_retry: None,
                },
            }),
            latency: Some(LatencyConfig {
                rate: 1.0,
                enabled: true,
                seed: 3,
                delay: Delay::Uniform {
                    min: Duration::from_millis(10),
                    max: Duration::from_millis(20),
                },
            }),
            behavior: Some(BehaviorConfig {
                rate: 1.0,
                enabled: false,
                seed: 0,
            }),
        })
        .unwrap();
        let d = c.decide(5, c.enabled());
        assert_eq!(d.answer, Some((Strategy::Fault, Injected::Reset)));
        assert!(!d.behavior);
        let l = d.latency.unwrap();
        assert!(l >= Duration::from_millis(10) && l <= Duration::from_millis(20));
        let no_fault = c.enabled().with(Strategy::Fault, false);
        assert_eq!(c.decide(5, no_fault).answer.unwrap().0, Strategy::Outcome);
        assert!(c.decide(5, c.configured()).behavior);
    }

    fn w(from: u64, until: u64, fault: ClientFault) -> FaultWindow {
        FaultWindow {
            from: Duration::from_secs(from),
            until: Duration::from_secs(until),
            fault,
        }
    }

    #[test]
    fn the_timeline_means_what_the_simulator_means() {
        let faults = [
            w(10, 20, ClientFault::Outage { hang: false }),
            w(15, 18, ClientFault::Outage { hang: true }),
            w(30, 40, ClientFault::Partition),
            w(35, 50, ClientFault::Partition),
            w(
                60,
                70,
                ClientFault::Throttle {
                    share: 1.0,
                    retry_after: Duration::from_secs(3),
                },
            ),
            w(80, 90, ClientFault::ErrorRate { rate: 0.5 }),
            w(85, 90, ClientFault::ErrorRate { rate: 0.5 }),
            w(80, 90, ClientFault::LatencyInflation { factor: 2.0 }),
            w(85, 90, ClientFault::LatencyInflation { factor: 3.0 }),
        ];
        let tl = Timeline::new(&faults, 9).unwrap();
        let s = Duration::from_secs;
        assert_eq!(
            tl.at_send(s(5), 0),
            AtSend::Send {
                latency_factor: 1.0
            }
        );
        assert_eq!(
            tl.at_send(s(10), 0),
            AtSend::Answer(Answer::status(503, Signals::NONE))
        );
        assert_eq!(tl.at_send(s(16), 0), AtSend::Hang);
        assert_eq!(tl.at_send(s(36), 0), AtSend::Hold { until: s(50) });
        assert_eq!(
            tl.at_answer(s(31), 0, true),
            AtAnswer::Hold { until: s(40) }
        );
        match tl.at_send(s(61), 0) {
            AtSend::Answer(a) => assert_eq!(
                a.class(),
                Some(ErrorClass::Throttled {
                    retry_after: Some(s(3))
                })
            ),
            other => panic!("{other:?}"),
        }
        assert_eq!(tl.error_rate(s(81)), 0.5);
        assert_eq!(tl.error_rate(s(86)), 0.75);
        assert_eq!(
            tl.at_send(s(86), 0),
            AtSend::Send {
                latency_factor: 6.0
            }
        );
        let failed = (0..10_000)
            .filter(|&n| matches!(tl.at_answer(s(86), n, true), AtAnswer::Fail(_)))
            .count();
        assert!((7_300..7_700).contains(&failed), "{failed}");
        assert_eq!(tl.at_answer(s(86), 1, false), AtAnswer::Deliver);
        assert_eq!(tl.end(), s(90));
    }

    #[test]
    fn bad_windows_are_refused_with_the_fault_and_field() {
        let bad = [
            w(0, 1, ClientFault::Partition),
            w(5, 5, ClientFault::Partition),
        ];
        let (i, e) = Timeline::new(&bad, 0).unwrap_err();
        assert_eq!((i, e.field), (1, "until"));
        let bad = [w(0, 1, ClientFault::LatencyInflation { factor: 0.5 })];
        assert_eq!(Timeline::new(&bad, 0).unwrap_err().1.field, "factor");
        let bad = [w(
            0,
            1,
            ClientFault::Throttle {
                share: 0.0,
                retry_after: Duration::ZERO,
            },
        )];
        assert_eq!(Timeline::new(&bad, 0).unwrap_err().1.field, "share");
    }
}

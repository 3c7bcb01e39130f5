//! Chaos for Python: `reliable.Chaos` (the four strategies of `reliable_core::chaos`, decided by
//! the core through the std crate's [`ChaosSwitch`], so the kill switch, the run-time switches and
//! the attempt counter behave exactly as the Rust layers do) and `reliable.ChaosTimeline` (a
//! scenario file's client-visible faults, played by the core's [`Timeline`]).
//!
//! This file only reads the Python arguments (refused by name: `fault.rate: ...`) and hands the
//! decisions back as plain tuples; `reliable/__init__.py` carries them out around each attempt:
//! an injected status is raised as an HTTP-shaped error (or returned, for a success) that the
//! decorator's `classify` reads through the core's answer table like a real one.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyList, PyTuple};

use reliable::chaos::{
    ChaosEvent, ChaosSwitch, FaultWindow, injected_headers, kill_all, killed, scenario_faults,
};
use reliable::observer::Observer;
use reliable_core::answer::Answer;
use reliable_core::chaos::{
    AtAnswer, AtSend, BehaviorConfig, ChaosConfig, Delay, FaultConfig, Injected, LatencyConfig,
    OutcomeConfig, Strategy, Timeline,
};
use reliable_core::{ConfigError, Duration};

use super::{Clock, bad_value, callable, float_of, int_of, seconds};

/// The longest scenario text read (a scenario file is a few tens of KiB).
const MAX_TEXT: usize = 1 << 20;

thread_local! {
    /// The events of the decision this thread is taking: the switch reports them to its
    /// observer inline, in the deciding thread, so no other thread's events mix in.
    static DECIDED: RefCell<Vec<ChaosEvent>> = const { RefCell::new(Vec::new()) };
}

/// Keeps each injection for the thread that decided it.
#[derive(Debug)]
struct Collect;

impl Observer for Collect {
    fn on_chaos(&self, _: &str, event: &ChaosEvent) {
        DECIDED.with(|d| d.borrow_mut().push(*event));
    }
}

/// What a fault or an outcome gives besides the core's answer: the user's exception to raise
/// (a fault) or value to return (an outcome).
#[derive(Debug)]
enum Payload {
    Answer,
    Raise(Py<PyAny>),
    Value(Py<PyAny>),
}

/// A strategy's dict, its keys checked against `allowed` (a key it does not know is refused).
fn strategy<'py>(
    name: &str,
    value: Option<Bound<'py, PyAny>>,
    allowed: &[&str],
) -> PyResult<Option<Bound<'py, PyDict>>> {
    let Some(v) = value.filter(|v| !v.is_none()) else {
        return Ok(None);
    };
    let d = v.cast_into::<PyDict>().map_err(|e| {
        let got = e
            .into_inner()
            .get_type()
            .name()
            .map_or_else(|_| "?".to_string(), |n| n.to_string());
        PyTypeError::new_err(format!("{name}: must be a dict or None, got {got}"))
    })?;
    for key in d.keys() {
        let key: String = key
            .extract()
            .map_err(|_| PyTypeError::new_err(format!("{name}: keys must be strings")))?;
        if !allowed.contains(&key.as_str()) {
            return Err(PyTypeError::new_err(format!(
                "{name}.{key}: unknown key, expected one of {allowed:?}"
            )));
        }
    }
    Ok(Some(d))
}

fn get<'py>(d: &Bound<'py, PyDict>, key: &str) -> PyResult<Option<Bound<'py, PyAny>>> {
    Ok(d.get_item(key)?.filter(|v| !v.is_none()))
}

fn rate(name: &str, d: &Bound<'_, PyDict>) -> PyResult<f64> {
    match get(d, "rate")? {
        Some(v) => float_of(&format!("{name}.rate"), &v),
        None => Err(PyTypeError::new_err(format!(
            "{name}.rate: required (a fraction in [0, 1])"
        ))),
    }
}

fn enabled(name: &str, d: &Bound<'_, PyDict>) -> PyResult<bool> {
    match get(d, "enabled")? {
        None => Ok(true),
        Some(v) if v.is_instance_of::<PyBool>() => v.extract(),
        Some(v) => Err(super::type_error(&format!("{name}.enabled"), "a bool", &v)),
    }
}

/// A seed: an int in `[0, 2**64)` (every language draws the same numbers from it).
fn seed(name: &str, d: &Bound<'_, PyDict>) -> PyResult<u64> {
    let param = format!("{name}.seed");
    match get(d, "seed")? {
        None => Ok(0),
        Some(v) if v.is_instance_of::<PyBool>() || !v.is_instance_of::<pyo3::types::PyInt>() => {
            Err(super::type_error(&param, "an int", &v))
        }
        Some(v) => v
            .extract::<u64>()
            .map_err(|_| bad_value(&param, "must be an int in [0, 2**64)")),
    }
}

fn opt_seconds(param: &str, v: Option<Bound<'_, PyAny>>) -> PyResult<Option<Duration>> {
    v.map(|v| seconds(param, float_of(param, &v)?, false))
        .transpose()
}

/// The answer a fault or an outcome injects, and what Python adds to it: `status` (with
/// `retry_after` seconds and `should_retry`), `reset=True`, `hang=True`, or (Python only) `error`
/// (an exception to raise: a fault) or `value` (to return: an outcome).
fn answer(name: &str, d: &Bound<'_, PyDict>, fault: bool) -> PyResult<(Injected, Payload)> {
    let flag = |key: &str| -> PyResult<bool> {
        match get(d, key)? {
            None => Ok(false),
            Some(v) if v.is_instance_of::<PyBool>() => v.extract(),
            Some(v) => Err(super::type_error(&format!("{name}.{key}"), "a bool", &v)),
        }
    };
    let status = get(d, "status")?;
    let (reset, hang) = (flag("reset")?, flag("hang")?);
    let other = if fault { "error" } else { "value" };
    let user = get(d, other)?;
    let given = [status.is_some(), reset, hang, user.is_some()];
    if given.iter().filter(|g| **g).count() != 1 {
        return Err(PyTypeError::new_err(format!(
            "{name}: give exactly one of status, reset=True, hang=True, {other}"
        )));
    }
    let signals_given = get(d, "retry_after")?.is_some() || get(d, "should_retry")?.is_some();
    if signals_given && status.is_none() {
        return Err(PyTypeError::new_err(format!(
            "{name}.retry_after: only a status answer carries headers"
        )));
    }
    if let Some(s) = status {
        let param = format!("{name}.status");
        let code = int_of(&param, &s)?;
        let code = u16::try_from(code)
            .ok()
            .filter(|c| (100..=599).contains(c))
            .ok_or_else(|| {
                bad_value(
                    &param,
                    format!("must be an HTTP status in [100, 599], got {code}"),
                )
            })?;
        let retry_after = opt_seconds(&format!("{name}.retry_after"), get(d, "retry_after")?)?;
        let should_retry = match get(d, "should_retry")? {
            None => None,
            Some(v) if v.is_instance_of::<PyBool>() => Some(v.extract()?),
            Some(v) => {
                return Err(super::type_error(
                    &format!("{name}.should_retry"),
                    "a bool or None",
                    &v,
                ));
            }
        };
        let injected = Injected::Status {
            status: code,
            retry_after,
            should_retry,
        };
        return Ok((injected, Payload::Answer));
    }
    if reset {
        return Ok((Injected::Reset, Payload::Answer));
    }
    if hang {
        return Ok((Injected::Hang, Payload::Answer));
    }
    let Some(user) = user else {
        return Ok((Injected::Reset, Payload::Answer));
    };
    if fault {
        let is_exception = user
            .py()
            .get_type::<pyo3::exceptions::PyBaseException>()
            .is_instance(&user)
            .unwrap_or(false)
            || user.is_instance_of::<pyo3::exceptions::PyBaseException>();
        if !is_exception {
            return Err(super::type_error(
                &format!("{name}.error"),
                "an exception instance or class",
                &user,
            ));
        }
        // The core decides with a transport failure in its place (transient, as `classify`
        // reads an unknown exception); Python raises the user's exception instead.
        Ok((Injected::Reset, Payload::Raise(user.unbind())))
    } else {
        // Likewise a success in its place; Python returns the value.
        let ok = Injected::Status {
            status: 200,
            retry_after: None,
            should_retry: None,
        };
        Ok((ok, Payload::Value(user.unbind())))
    }
}

/// The core's field names, as the Python keys that set them.
const FIELDS: [(&str, &str); 9] = [
    ("fault.rate", "fault.rate"),
    ("fault.answer", "fault.status"),
    ("fault.answer.status", "fault.status"),
    ("latency.rate", "latency.rate"),
    ("latency.delay.max", "latency.max"),
    ("outcome.rate", "outcome.rate"),
    ("outcome.answer", "outcome.status"),
    ("outcome.answer.status", "outcome.status"),
    ("behavior.rate", "behavior.rate"),
];

fn config_error(e: ConfigError) -> PyErr {
    super::config_error(e, &FIELDS)
}

/// Chaos injection: the four strategies of Polly v8, each with a `rate`, an `enabled` switch and
/// a `seed`; whether attempt `n` through it is hit depends only on them (the Rust layers and the
/// TypeScript package hit the same attempts for the same seed).
#[pyclass(module = "reliable", name = "Chaos", frozen)]
#[derive(Debug)]
pub(crate) struct PyChaos {
    switch: ChaosSwitch,
    fault: Option<Payload>,
    outcome: Option<Payload>,
    behavior: Option<Py<PyAny>>,
}

fn strategy_of(name: &str) -> PyResult<Strategy> {
    Strategy::ALL
        .into_iter()
        .find(|s| s.name() == name || (name == "behaviour" && *s == Strategy::Behavior))
        .ok_or_else(|| {
            bad_value(
                "strategy",
                format!("{name:?} is not fault, latency, outcome or behavior"),
            )
        })
}

/// An injected answer as Python reads it: `("status", code, headers)`, `("reset",)`, `("hang",)`.
fn answer_tuple<'py>(py: Python<'py>, a: Answer) -> PyResult<Bound<'py, PyTuple>> {
    Ok(match a {
        Answer::Status { status, signals } => {
            let headers: Vec<(&str, String)> = injected_headers(signals);
            ("status", status, headers).into_pyobject(py)?
        }
        Answer::Timeout => ("hang",).into_pyobject(py)?,
        _ => ("reset",).into_pyobject(py)?,
    })
}

#[pymethods]
impl PyChaos {
    #[new]
    #[pyo3(signature = (*, fault = None, latency = None, outcome = None, behavior = None, name = "chaos"))]
    fn new(
        fault: Option<Bound<'_, PyAny>>,
        latency: Option<Bound<'_, PyAny>>,
        outcome: Option<Bound<'_, PyAny>>,
        behavior: Option<Bound<'_, PyAny>>,
        name: &str,
    ) -> PyResult<Self> {
        const ANSWER_KEYS: [&str; 9] = [
            "rate",
            "enabled",
            "seed",
            "status",
            "retry_after",
            "should_retry",
            "reset",
            "hang",
            "error",
        ];
        let mut config = ChaosConfig::OFF;
        let mut fault_payload = None;
        if let Some(d) = strategy("fault", fault, &ANSWER_KEYS)? {
            let (injected, payload) = answer("fault", &d, true)?;
            config.fault = Some(FaultConfig {
                rate: rate("fault", &d)?,
                enabled: enabled("fault", &d)?,
                seed: seed("fault", &d)?,
                answer: injected,
            });
            fault_payload = Some(payload);
        }
        if let Some(d) = strategy(
            "latency",
            latency,
            &["rate", "enabled", "seed", "delay", "min", "max"],
        )? {
            let (delay, min, max) = (get(&d, "delay")?, get(&d, "min")?, get(&d, "max")?);
            let delay = match (delay, min, max) {
                (Some(delay), None, None) => Delay::Fixed {
                    delay: seconds("latency.delay", float_of("latency.delay", &delay)?, false)?,
                },
                (None, Some(min), Some(max)) => Delay::Uniform {
                    min: seconds("latency.min", float_of("latency.min", &min)?, false)?,
                    max: seconds("latency.max", float_of("latency.max", &max)?, false)?,
                },
                _ => {
                    return Err(PyTypeError::new_err(
                        "latency: give delay (seconds), or min and max (seconds) for a uniform delay",
                    ));
                }
            };
            config.latency = Some(LatencyConfig {
                rate: rate("latency", &d)?,
                enabled: enabled("latency", &d)?,
                seed: seed("latency", &d)?,
                delay,
            });
        }
        let mut outcome_payload = None;
        let mut keys = ANSWER_KEYS;
        keys[8] = "value";
        if let Some(d) = strategy("outcome", outcome, &keys)? {
            let (injected, payload) = answer("outcome", &d, false)?;
            config.outcome = Some(OutcomeConfig {
                rate: rate("outcome", &d)?,
                enabled: enabled("outcome", &d)?,
                seed: seed("outcome", &d)?,
                answer: injected,
            });
            outcome_payload = Some(payload);
        }
        let mut callback = None;
        if let Some(d) = strategy(
            "behavior",
            behavior,
            &["rate", "enabled", "seed", "callback"],
        )? {
            callback = callable("behavior.callback", get(&d, "callback")?)?;
            if callback.is_none() {
                return Err(PyTypeError::new_err(
                    "behavior.callback: required (called before each attempt it hits)",
                ));
            }
            config.behavior = Some(BehaviorConfig {
                rate: rate("behavior", &d)?,
                enabled: enabled("behavior", &d)?,
                seed: seed("behavior", &d)?,
            });
        }
        let switch = ChaosSwitch::builder(name, config)
            .observer(Collect)
            .build()
            .map_err(config_error)?;
        Ok(PyChaos {
            switch,
            fault: fault_payload,
            outcome: outcome_payload,
            behavior: callback,
        })
    }

    /// Switches `strategy` (`"fault"`, `"latency"`, `"outcome"`, `"behavior"`) on or off for the
    /// next attempts; a strategy not configured stays off.
    fn set_enabled(&self, strategy: &str, on: &Bound<'_, PyAny>) -> PyResult<()> {
        if !on.is_instance_of::<PyBool>() {
            return Err(super::type_error("on", "a bool", on));
        }
        self.switch
            .set_enabled(strategy_of(strategy)?, on.extract()?);
        Ok(())
    }

    /// The strategies switched on now.
    #[getter]
    fn enabled(&self) -> Vec<&'static str> {
        let on = self.switch.enabled();
        Strategy::ALL
            .into_iter()
            .filter(|s| on.has(*s))
            .map(Strategy::name)
            .collect()
    }

    /// Attempts counted so far (only while some strategy was on and chaos not killed).
    #[getter]
    fn attempts(&self) -> u64 {
        self.switch.attempts()
    }

    /// Stops (`True`) or allows again (`False`) every chaos injection in the process, whatever
    /// each `Chaos`'s switches say (the Rust layers' `kill_all`).
    #[staticmethod]
    #[pyo3(signature = (killed = None))]
    fn kill_all(killed: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        let killed = match killed {
            None => true,
            Some(k) if k.is_instance_of::<PyBool>() => k.extract()?,
            Some(k) => return Err(super::type_error("killed", "a bool", k)),
        };
        kill_all(killed);
        Ok(())
    }

    /// Whether `kill_all` stopped every injection.
    #[staticmethod]
    fn killed() -> bool {
        killed()
    }

    /// What the next attempt gets: `None` (nothing injected: one atomic load when every strategy
    /// is off), or `(events, behavior, delay, answer)`: the injections as `(event, attempt,
    /// delay)` in order (Polly's names), the callback to run, the delay in seconds, and what to
    /// answer instead of calling: `("status", code, headers)`, `("reset",)`, `("hang",)`,
    /// `("raise", exception)` or `("value", value)`.
    fn _decide<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyTuple>>> {
        // Nothing is reported when nothing is injected: the fast path touches no thread-local.
        let Some(d) = self.switch.decide() else {
            return Ok(None);
        };
        let events = PyList::empty(py);
        for e in DECIDED.with(|d| std::mem::take(&mut *d.borrow_mut())) {
            let delay = e.delay.map(|d| d.as_secs_f64());
            events.append((e.strategy.event(), e.attempt, delay))?;
        }
        let behavior = match (d.behavior, &self.behavior) {
            (true, Some(cb)) => Some(cb.clone_ref(py)),
            _ => None,
        };
        let delay = d.latency.map(|l| l.as_secs_f64());
        let answer: Option<Bound<'py, PyTuple>> = match d.answer {
            None => None,
            Some((strategy, injected)) => {
                let payload = match strategy {
                    Strategy::Fault => &self.fault,
                    _ => &self.outcome,
                };
                Some(match payload {
                    Some(Payload::Raise(e)) => ("raise", e.clone_ref(py)).into_pyobject(py)?,
                    Some(Payload::Value(v)) => ("value", v.clone_ref(py)).into_pyobject(py)?,
                    _ => answer_tuple(py, injected.answer())?,
                })
            }
        };
        Ok(Some((events, behavior, delay, answer).into_pyobject(py)?))
    }
}

// ---------------------------------------------------------------------------------------------
// A scenario's fault timeline.

/// A scenario file's client-visible faults of one downstream (outage, partition, error rate,
/// latency inflation, throttle), played by wall clock from the moment it is made (or
/// `restart()`ed), with the simulator's meaning (`reliable_core::chaos::Timeline`).
#[pyclass(module = "reliable", name = "ChaosTimeline", frozen)]
#[derive(Debug)]
pub(crate) struct PyTimeline {
    faults: Vec<FaultWindow>,
    seed: u64,
    clock: Clock,
    /// The start, in nanoseconds on the clock.
    start: AtomicU64,
    attempts: AtomicU64,
}

impl PyTimeline {
    fn now(&self, py: Python<'_>) -> PyResult<Duration> {
        let now = self.clock.now(py)?;
        Ok(Duration::from_nanos(
            now.as_nanos()
                .saturating_sub(self.start.load(Ordering::Relaxed)),
        ))
    }

    fn timeline(&self) -> Option<Timeline<'_>> {
        // Validated when made: this cannot fail.
        Timeline::new(&self.faults, self.seed).ok()
    }
}

fn fault_kind(f: &FaultWindow) -> &'static str {
    use reliable_core::chaos::ClientFault;
    match f.fault {
        ClientFault::Outage { hang: false } => "outage",
        ClientFault::Outage { hang: true } => "outage-hang",
        ClientFault::Partition => "partition",
        ClientFault::ErrorRate { .. } => "error-rate",
        ClientFault::LatencyInflation { .. } => "latency-inflation",
        ClientFault::Throttle { .. } => "throttle",
    }
}

#[pymethods]
impl PyTimeline {
    /// The faults of `downstream` in a scenario file (RON, as the simulator reads it). A fault
    /// only a server or the workload can make (a capacity loss, a load spike) is refused with
    /// the reason, as the Rust loader refuses it: `ValueError: faults[2]: CapacityLoss refused:
    /// ...`. The throttle and error-rate draws come from `seed`; `clock()` in seconds (default
    /// the monotonic clock).
    #[staticmethod]
    #[pyo3(signature = (text, downstream, *, seed = None, clock = None))]
    fn from_scenario(
        py: Python<'_>,
        text: &str,
        downstream: &str,
        seed: Option<&Bound<'_, PyAny>>,
        clock: Option<Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        if text.len() > MAX_TEXT {
            return Err(bad_value(
                "text",
                format!("{} bytes: a scenario is at most {MAX_TEXT}", text.len()),
            ));
        }
        let seed = match seed {
            Some(s) if !s.is_none() => {
                if s.is_instance_of::<PyBool>() || !s.is_instance_of::<pyo3::types::PyInt>() {
                    return Err(super::type_error("seed", "an int", s));
                }
                s.extract::<u64>()
                    .map_err(|_| bad_value("seed", "must be an int in [0, 2**64)"))?
            }
            _ => 0,
        };
        let faults = scenario_faults(text, downstream).map_err(|e| bad_value("text", e))?;
        if !faults.refused.is_empty() {
            let why: Vec<String> = faults.refused.iter().map(ToString::to_string).collect();
            return Err(PyValueError::new_err(why.join("; ")));
        }
        let clock = Clock(callable("clock", clock)?);
        let start = clock.now(py)?.as_nanos();
        Ok(PyTimeline {
            faults: faults.client,
            seed,
            clock,
            start: AtomicU64::new(start),
            attempts: AtomicU64::new(0),
        })
    }

    /// Plays the faults again from now.
    fn restart(&self, py: Python<'_>) -> PyResult<()> {
        let now = self.clock.now(py)?.as_nanos();
        self.start.store(now, Ordering::Relaxed);
        Ok(())
    }

    /// The faults, as `(kind, from_seconds, until_seconds)`.
    #[getter]
    fn faults(&self) -> Vec<(&'static str, f64, f64)> {
        self.faults
            .iter()
            .map(|f| (fault_kind(f), f.from.as_secs_f64(), f.until.as_secs_f64()))
            .collect()
    }

    /// Attempts through it so far.
    #[getter]
    fn attempts(&self) -> u64 {
        self.attempts.load(Ordering::Relaxed)
    }

    /// Seconds since the replay started, on its clock (to stretch an attempt's real latency).
    fn _elapsed(&self, py: Python<'_>) -> PyResult<f64> {
        Ok(self.now(py)?.as_secs_f64())
    }

    /// Attempt `n` (`None`: the next one, counted) about to be sent now: `(n, action)` with
    /// `action` `("send", latency_factor)`, `("hold", seconds)` (a partition: wait, then ask
    /// again with `n`), `("status", code, headers)` (an outage's 503, a throttle's 429) or
    /// `("hang",)`. With every chaos killed: `(n, ("send", 1.0))`.
    #[pyo3(signature = (n = None))]
    fn _send<'py>(&self, py: Python<'py>, n: Option<u64>) -> PyResult<Bound<'py, PyTuple>> {
        // Killed, an attempt is not counted (as the Rust `TimelineLayer` passes it by).
        let n = match n {
            Some(n) => n,
            None if killed() => self.attempts.load(Ordering::Relaxed),
            None => self.attempts.fetch_add(1, Ordering::Relaxed),
        };
        let now = self.now(py)?;
        let action = match (killed(), self.timeline()) {
            (false, Some(tl)) => tl.at_send(now, n),
            _ => AtSend::Send {
                latency_factor: 1.0,
            },
        };
        let action: Bound<'py, PyTuple> = match action {
            AtSend::Send { latency_factor } => ("send", latency_factor).into_pyobject(py)?,
            AtSend::Hold { until } => {
                ("hold", until.saturating_sub(now).as_secs_f64()).into_pyobject(py)?
            }
            AtSend::Answer(a) => answer_tuple(py, a)?,
            AtSend::Hang => ("hang",).into_pyobject(py)?,
        };
        (n, action).into_pyobject(py)
    }

    /// The answer of attempt `n` arriving now (`success`: the call returned): `("deliver",)`,
    /// `("hold", seconds)` (then ask again) or `("status", 500, headers)` (an error rate failed
    /// it).
    fn _answer<'py>(
        &self,
        py: Python<'py>,
        n: u64,
        success: bool,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let now = self.now(py)?;
        let at = match (killed(), self.timeline()) {
            (false, Some(tl)) => tl.at_answer(now, n, success),
            _ => AtAnswer::Deliver,
        };
        match at {
            AtAnswer::Deliver => ("deliver",).into_pyobject(py),
            AtAnswer::Hold { until } => {
                ("hold", until.saturating_sub(now).as_secs_f64()).into_pyobject(py)
            }
            AtAnswer::Fail(a) => answer_tuple(py, a),
        }
    }
}

/// The core's draw (`reliable_core::chaos::draw`): for tests that pin another language's port.
#[pyfunction]
pub(crate) fn chaos_draw(seed: u64, stream: u64, n: u64) -> u64 {
    reliable_core::chaos::draw(seed, stream, n)
}

/// Registers the chaos classes and functions in the extension module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyChaos>()?;
    m.add_class::<PyTimeline>()?;
    m.add_function(wrap_pyfunction!(chaos_draw, m)?)?;
    Ok(())
}

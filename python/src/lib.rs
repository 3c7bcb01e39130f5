//! `reliable._core`: the decisions of `reliable-core` for the Python package `reliablekit`.
//!
//! The Python side (`reliable/__init__.py`) runs the user's function, keeps timers, cancels and
//! raises; every decision of a call is taken by the core's call engine (`engine`: a [`Policy`]
//! and one [`Run`] per call), which asks the layers a policy has: the breaker ([`SharedBreaker`],
//! lock-free, so one breaker serves many threads), the retry policy and its budget or ledger,
//! the throttle, the hedger and the limits. This crate only builds them from the seed's
//! arguments or from a policy file, and hands the engine what happened.
//!
//! [`Policy`]: engine::Policy
//! [`Run`]: engine::Run
//!
//! Every argument is checked here and refused with a `ValueError` or `TypeError` naming the Python
//! parameter; after that nothing can panic (the core is panic-free by construction and no code
//! here indexes, unwraps or divides unchecked), so no `PanicException` reaches Python.

#![forbid(unsafe_code)]
// No panic can reach Python: no unwrap, expect, panic or unchecked indexing here (the core denies
// them too); CI also fails if a test run prints a Rust panic.
#![deny(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod chaos;
mod engine;
mod fleet;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyInt};

use reliable_core::backoff::{BackoffConfig, BackoffPolicy, Jitter, Shape};
use reliable_core::breaker::{
    AtomicAnyWindow, BreakerConfig, BreakerPolicy, HalfOpenConfig, Observer, OpenConfig, Outcome,
    Permit, ProbeRule, RejectReason, SharedBreaker, State, Transition, WindowConfig,
};
use reliable_core::budget::{
    AnyBudget, BudgetConfig, BudgetPolicy, RatioConfig, Threshold, TokenBucketConfig,
};
use reliable_core::outcome::ErrorClass;
use reliable_core::retry::{RetryConfig, RetryPolicy};
use reliable_core::sample::splitmix64;
use reliable_core::spend::{
    Ceiling, Price, RefuseReason, Reservation, Span, SpendBreaker, SpendConfig, SpendPolicy, Tokens,
};
use reliable_core::{ConfigError, Duration, Instant};

/// The largest `window` a breaker accepts, in calls (16 words of 64 bits per outcome kind).
const MAX_WINDOW: usize = 1024;
const WINDOW_WORDS: usize = MAX_WINDOW / 64;
/// The most buckets a time window (from a policy file) may have: as in the Rust crate and the
/// simulator, so that a policy file loads in every face.
const MAX_BUCKETS: usize = 64;
/// The largest `probe_limit` (half-open probes in flight) a breaker accepts.
const PROBE_SLOTS: usize = 16;
/// The longest duration any parameter accepts: about 31 years, far from `u64` nanoseconds' end.
const MAX_SECONDS: f64 = 1e9;

type Storage = SharedBreaker<
    BreakerPolicy,
    AtomicAnyWindow<MAX_WINDOW, MAX_BUCKETS, WINDOW_WORDS>,
    PROBE_SLOTS,
    Queue,
>;

// ---------------------------------------------------------------------------------------------
// Arguments: checked once, refused by the Python parameter's name.

fn bad_value(param: &str, why: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(format!("{param}: {why}"))
}

/// A core `ConfigError` names a config field; the user wrote a Python parameter.
fn config_error(err: ConfigError, names: &[(&str, &str)]) -> PyErr {
    let param = names
        .iter()
        .find(|(field, _)| *field == err.field)
        .map_or(err.field, |(_, param)| *param);
    let text = err.to_string();
    let why = text
        .strip_prefix(err.field)
        .and_then(|t| t.strip_prefix(": "))
        .unwrap_or(&text);
    bad_value(param, why)
}

/// A number argument, refused by name when it is not one (`True` is not a number here).
fn float_of(param: &str, value: &Bound<'_, PyAny>) -> PyResult<f64> {
    if value.is_instance_of::<PyBool>() {
        return Err(type_error(param, "a number", value));
    }
    value
        .extract::<f64>()
        .map_err(|_| type_error(param, "a number", value))
}

/// An integer argument, refused by name when it is not an `int` (or is out of `i64`).
fn int_of(param: &str, value: &Bound<'_, PyAny>) -> PyResult<i64> {
    if value.is_instance_of::<PyBool>() || !value.is_instance_of::<PyInt>() {
        return Err(type_error(param, "an int", value));
    }
    value
        .extract::<i64>()
        .map_err(|_| bad_value(param, "is out of range"))
}

fn type_error(param: &str, want: &str, value: &Bound<'_, PyAny>) -> PyErr {
    let got = value
        .get_type()
        .name()
        .map_or_else(|_| "?".to_string(), |n| n.to_string());
    PyTypeError::new_err(format!("{param}: must be {want}, got {got}"))
}

fn opt_float_of(param: &str, value: Option<&Bound<'_, PyAny>>) -> PyResult<Option<f64>> {
    match value {
        Some(v) if !v.is_none() => float_of(param, v).map(Some),
        _ => Ok(None),
    }
}

fn opt_int_of(param: &str, value: Option<&Bound<'_, PyAny>>) -> PyResult<Option<i64>> {
    match value {
        Some(v) if !v.is_none() => int_of(param, v).map(Some),
        _ => Ok(None),
    }
}

/// A number of seconds: finite, at least `min` (`> 0` when `positive`), at most [`MAX_SECONDS`].
fn seconds(param: &str, value: f64, positive: bool) -> PyResult<Duration> {
    let ok =
        value.is_finite() && value <= MAX_SECONDS && (value > 0.0 || (!positive && value == 0.0));
    if !ok {
        let want = if positive { "> 0" } else { ">= 0" };
        return Err(bad_value(
            param,
            format!("must be a finite number of seconds {want} and <= 1e9, got {value}"),
        ));
    }
    // To the nearest nanosecond (`0.3` is a hair under 300 ms as a double).
    Ok(Duration::from_nanos((value * 1e9).round() as u64))
}

fn count(param: &str, value: i64, min: i64, max: i64) -> PyResult<u32> {
    if value < min || value > max {
        return Err(bad_value(
            param,
            format!("must be an integer in [{min}, {max}], got {value}"),
        ));
    }
    Ok(value as u32)
}

fn fraction(param: &str, value: f64, zero_ok: bool) -> PyResult<f64> {
    let ok = value.is_finite() && value <= 1.0 && (value > 0.0 || (zero_ok && value == 0.0));
    if !ok {
        let low = if zero_ok { "[0" } else { "(0" };
        return Err(bad_value(
            param,
            format!("must be a fraction in {low}, 1], got {value}"),
        ));
    }
    Ok(value)
}

/// A callable argument, or `None`.
fn callable(param: &str, value: Option<Bound<'_, PyAny>>) -> PyResult<Option<Py<PyAny>>> {
    match value {
        Some(v) if v.is_none() => Ok(None),
        Some(v) if v.is_callable() => Ok(Some(v.unbind())),
        Some(v) => Err(PyTypeError::new_err(format!(
            "{param}: must be callable or None, got {}",
            v.get_type()
                .name()
                .map_or_else(|_| "?".to_string(), |n| n.to_string())
        ))),
        None => Ok(None),
    }
}

// ---------------------------------------------------------------------------------------------
// Time and randomness: injected by the user or read here.

/// The process's time origin: every default clock counts from it, so a budget shared by several
/// decorated functions sees one timeline.
fn origin() -> std::time::Instant {
    static ORIGIN: OnceLock<std::time::Instant> = OnceLock::new();
    *ORIGIN.get_or_init(std::time::Instant::now)
}

/// `clock()` in seconds (the seed's injectable clock), or the monotonic clock.
#[derive(Debug)]
struct Clock(Option<Py<PyAny>>);

impl Clock {
    fn now(&self, py: Python<'_>) -> PyResult<Instant> {
        let Some(clock) = &self.0 else {
            return Ok(Instant::from_nanos(origin().elapsed().as_nanos() as u64));
        };
        let value = clock.call0(py)?;
        let secs: f64 = value
            .extract(py)
            .map_err(|_| PyTypeError::new_err("clock: must return a number of seconds"))?;
        if !secs.is_finite() || !(0.0..=MAX_SECONDS * 4.0).contains(&secs) {
            return Err(bad_value(
                "clock",
                format!("returned {secs}: want finite seconds in [0, 4e9]"),
            ));
        }
        // To the nearest nanosecond: `0.3` is a hair under 300 ms as a double, and a clock
        // that reads whole milliseconds must not see a timer due at 300 ms as not yet due.
        Ok(Instant::from_nanos((secs * 1e9).round() as u64))
    }

    fn clone_ref(&self, py: Python<'_>) -> Clock {
        Clock(self.0.as_ref().map(|c| c.clone_ref(py)))
    }
}

fn as_seconds(at: Instant) -> f64 {
    at.since_origin().as_secs_f64()
}

/// `rng()` in [0, 1) (the seed's injectable rng), or a splitmix64 stream.
#[derive(Debug)]
struct Random {
    user: Option<Py<PyAny>>,
    state: AtomicU64,
}

impl Random {
    /// The user's `rng`: a callable returning a float in [0, 1) (the seed's), or a
    /// `random.Random` (its `random` method), or `None` for a splitmix64 stream.
    fn new(py: Python<'_>, rng: Option<Bound<'_, PyAny>>) -> PyResult<Random> {
        let user = match rng {
            Some(r) if r.is_none() => None,
            Some(r) if r.is_callable() => Some(r.unbind()),
            Some(r) => {
                let random = r.getattr("random").ok().filter(|m| m.is_callable());
                match random {
                    Some(m) => Some(m.unbind()),
                    None => return Err(engine::rng_error(&r)),
                }
            }
            None => None,
        };
        let _ = py;
        let seed = origin().elapsed().as_nanos() as u64 ^ (std::process::id() as u64) << 32;
        Ok(Random {
            user,
            state: AtomicU64::new(splitmix64(seed)),
        })
    }

    /// One uniform `u64`: the core's randomness input.
    fn sample(&self, py: Python<'_>) -> PyResult<u64> {
        let Some(rng) = &self.user else {
            let s = self
                .state
                .fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed);
            return Ok(splitmix64(s));
        };
        let u: f64 = rng
            .call0(py)?
            .extract(py)
            .map_err(|_| PyTypeError::new_err("rng: must return a float in [0, 1]"))?;
        if !(0.0..=1.0).contains(&u) {
            return Err(bad_value(
                "rng",
                format!("returned {u}: want a float in [0, 1]"),
            ));
        }
        // [0, 1] onto the whole u64 range; `as` saturates at 1.0.
        Ok((u * 18_446_744_073_709_551_616.0) as u64)
    }
}

// ---------------------------------------------------------------------------------------------
// The breaker.

/// Transitions waiting for the user's `on_transition` hook and the calls' events.
#[derive(Debug, Default)]
struct Queue {
    pending: AtomicBool,
    items: Mutex<Vec<Transition>>,
}

impl Queue {
    fn lock(&self) -> MutexGuard<'_, Vec<Transition>> {
        // A poisoned lock only means a push was interrupted; the vector is still valid.
        self.items.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Observer for Queue {
    fn on_transition(&self, transition: Transition) {
        // Kept for whoever looks next (a call through the engine, or the breaker's own
        // methods); transitions are rare, and each look takes them all.
        self.lock().push(transition);
        self.pending.store(true, Ordering::Release);
    }
}

fn state_name(state: State) -> &'static str {
    match state {
        State::Closed => "closed",
        State::Open => "open",
        State::HalfOpen => "half_open",
        State::ForcedOpen => "forced_open",
        State::Disabled => "disabled",
    }
}

const BREAKER_FIELDS: [(&str, &str); 10] = [
    ("failure_rate", "failure_rate"),
    ("window.calls", "window"),
    ("minimum_calls", "minimum_calls"),
    ("open.duration", "cooldown"),
    ("open.growth", "cooldown_growth"),
    ("open.max", "cooldown_max"),
    ("open.jitter", "cooldown_jitter"),
    ("half_open.rule.successes", "probe"),
    ("half_open.max_in_flight", "probe_limit"),
    ("half_open.probe_timeout", "probe_timeout"),
];

/// One admitted call's ticket, handed back with its result.
#[pyclass(module = "reliable._core", frozen)]
#[derive(Debug)]
struct Ticket(Mutex<Option<Permit>>);

/// A sliding-window circuit breaker (the seed's `CircuitBreaker`), thread-safe and lock-free.
#[pyclass(module = "reliable", name = "CircuitBreaker", frozen, subclass)]
#[derive(Debug)]
struct CircuitBreaker {
    /// Boxed: the breaker's window is 64-byte aligned (a cache line), more than a Python object
    /// is; the heap honours it.
    inner: Box<Storage>,
    clock: Clock,
    on_transition: Option<Py<PyAny>>,
}

impl CircuitBreaker {
    /// Hands queued transitions to the hook; a hook that raises is reported as unraisable, since
    /// the call it interrupted has already been counted.
    fn notify(&self, py: Python<'_>) {
        if !self.inner.observer().pending.swap(false, Ordering::Acquire) {
            return;
        }
        let items = std::mem::take(&mut *self.inner.observer().lock());
        let Some(hook) = &self.on_transition else {
            return;
        };
        for t in items {
            let args = (state_name(t.from), state_name(t.to), as_seconds(t.at));
            if let Err(e) = hook.call1(py, args) {
                e.write_unraisable(py, Some(hook.bind(py)));
            }
        }
    }

    fn acquire(&self, py: Python<'_>) -> PyResult<Result<Permit, Option<f64>>> {
        let now = self.clock.now(py)?;
        let answer = self.inner.try_acquire(now).map_err(|r| match r.reason {
            RejectReason::Open { retry_after } => Some(retry_after.as_secs_f64()),
            _ => None,
        });
        self.notify(py);
        Ok(answer)
    }

    fn record(&self, py: Python<'_>, permit: Permit, outcome: Outcome) -> PyResult<()> {
        let now = self.clock.now(py);
        // Even when the clock fails, the permit goes back (at the latest time seen).
        self.inner
            .record(permit, outcome, *now.as_ref().unwrap_or(&Instant::ZERO));
        self.notify(py);
        now.map(|_| ())
    }
}

#[pymethods]
impl CircuitBreaker {
    #[new]
    #[pyo3(signature = (
        failure_rate = None, window = None, cooldown = None, probe = None, clock = None, rng = None,
        *, minimum_calls = None, probe_limit = None, probe_timeout = None,
        cooldown_growth = None, cooldown_max = None, cooldown_jitter = None, on_transition = None,
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        failure_rate: Option<&Bound<'_, PyAny>>,
        window: Option<&Bound<'_, PyAny>>,
        cooldown: Option<&Bound<'_, PyAny>>,
        probe: Option<&Bound<'_, PyAny>>,
        clock: Option<Bound<'_, PyAny>>,
        rng: Option<Bound<'_, PyAny>>,
        minimum_calls: Option<&Bound<'_, PyAny>>,
        probe_limit: Option<&Bound<'_, PyAny>>,
        probe_timeout: Option<&Bound<'_, PyAny>>,
        cooldown_growth: Option<&Bound<'_, PyAny>>,
        cooldown_max: Option<&Bound<'_, PyAny>>,
        cooldown_jitter: Option<&Bound<'_, PyAny>>,
        on_transition: Option<Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let failure_rate = opt_float_of("failure_rate", failure_rate)?.unwrap_or(0.5);
        let window = opt_int_of("window", window)?.unwrap_or(20);
        let cooldown = opt_float_of("cooldown", cooldown)?.unwrap_or(30.0);
        let probe = opt_int_of("probe", probe)?.unwrap_or(3);
        let minimum_calls = opt_int_of("minimum_calls", minimum_calls)?;
        let probe_limit = opt_int_of("probe_limit", probe_limit)?;
        let probe_timeout = opt_float_of("probe_timeout", probe_timeout)?.unwrap_or(30.0);
        let cooldown_growth = opt_float_of("cooldown_growth", cooldown_growth)?.unwrap_or(1.0);
        let cooldown_max = opt_float_of("cooldown_max", cooldown_max)?;
        let cooldown_jitter = opt_float_of("cooldown_jitter", cooldown_jitter)?.unwrap_or(0.0);
        let failure_rate = fraction("failure_rate", failure_rate, false)?;
        let window = count("window", window, 1, MAX_WINDOW as i64)?;
        let minimum_calls = match minimum_calls {
            Some(m) => count("minimum_calls", m, 1, i64::from(window))?,
            None => window,
        };
        let probe = count("probe", probe, 1, i64::from(u32::MAX >> 4))?;
        let max_in_flight = match probe_limit {
            Some(n) => Some(count("probe_limit", n, 1, PROBE_SLOTS as i64)?),
            None => None,
        };
        let probe_timeout = match max_in_flight {
            Some(_) => seconds("probe_timeout", probe_timeout, true)?,
            // Without a probe gate nothing is leased (the seed's half-open).
            None => {
                seconds("probe_timeout", probe_timeout, true)?;
                Duration::MAX
            }
        };
        if !cooldown_growth.is_finite() || !(1.0..=1000.0).contains(&cooldown_growth) {
            return Err(bad_value(
                "cooldown_growth",
                format!("must be in [1, 1000], got {cooldown_growth}"),
            ));
        }
        if cooldown_growth > 1.0 && cooldown_max.is_none() {
            return Err(bad_value(
                "cooldown_growth",
                "a growth above 1 needs cooldown_max",
            ));
        }
        let config = BreakerConfig {
            failure_rate: Some(failure_rate),
            minimum_calls,
            window: WindowConfig::Count { calls: window },
            open: OpenConfig {
                duration: seconds("cooldown", cooldown, true)?,
                growth: cooldown_growth,
                max: cooldown_max
                    .map(|m| seconds("cooldown_max", m, true))
                    .transpose()?,
                jitter: cooldown_jitter,
                strictly_after: false,
            },
            half_open: HalfOpenConfig {
                max_in_flight,
                rule: ProbeRule::Consecutive { successes: probe },
                probe_timeout,
                decide_at_minimum: false,
                max_wait: None,
                max_wait_closes: false,
            },
            ..BreakerConfig::new()
        };
        let clock = Clock(callable("clock", clock)?);
        let rng = Random::new(py, rng)?;
        let on_transition = callable("on_transition", on_transition)?;
        let policy = BreakerPolicy::new(config).map_err(|e| config_error(e, &BREAKER_FIELDS))?;
        let storage = Storage::with_storage(policy)
            .map_err(|e| config_error(e, &BREAKER_FIELDS))?
            .observe(Queue::default())
            .with_seed(rng.sample(py)?);
        Ok(CircuitBreaker {
            inner: Box::new(storage),
            clock,
            on_transition,
        })
    }

    /// "closed", "open" or "half_open" ("forced_open" / "disabled" after a manual switch).
    #[getter]
    fn state(&self, py: Python<'_>) -> PyResult<&'static str> {
        Ok(state_name(self.inner.state(self.clock.now(py)?)))
    }

    /// Seconds until an open breaker admits a probe; `None` unless open.
    #[getter]
    fn retry_after(&self, py: Python<'_>) -> PyResult<Option<f64>> {
        let now = self.clock.now(py)?;
        Ok(match self.inner.state(now) {
            State::Open => self.open_left(now),
            _ => None,
        })
    }

    /// The breaker's counters: state, calls and failures in the window, failure rate, probes in
    /// flight, re-opens, generation.
    #[getter]
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let now = self.clock.now(py)?;
        let s = self.inner.snapshot(now);
        let d = PyDict::new(py);
        d.set_item("state", state_name(s.state))?;
        d.set_item("calls", s.counts.calls)?;
        d.set_item("failures", s.counts.failures)?;
        let rate = if s.counts.calls == 0 {
            0.0
        } else {
            s.counts.failures as f64 / s.counts.calls as f64
        };
        d.set_item("failure_rate", rate)?;
        d.set_item("consecutive_failures", s.consecutive_failures)?;
        d.set_item("probes_in_flight", s.probes_in_flight)?;
        d.set_item("reopens", s.reopens)?;
        d.set_item("generation", s.generation)?;
        d.set_item(
            "window",
            self.inner.policy().config().minimum_calls.max(
                match self.inner.policy().config().window {
                    WindowConfig::Count { calls } => calls,
                    WindowConfig::Time { buckets, .. } => buckets,
                },
            ),
        )?;
        Ok(d)
    }

    /// Back to closed with an empty window.
    fn reset(&self, py: Python<'_>) -> PyResult<()> {
        let now = self.clock.now(py)?;
        self.inner.reset(now);
        self.notify(py);
        Ok(())
    }

    /// Open by hand until `reset()`.
    fn force_open(&self, py: Python<'_>) -> PyResult<()> {
        let now = self.clock.now(py)?;
        self.inner.force_open(now);
        self.notify(py);
        Ok(())
    }

    /// Asks to make one call: a ticket, or the seconds until a probe is admitted (`None` when not
    /// known: probes full, forced open).
    fn _acquire(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        Ok(match self.acquire(py)? {
            Ok(permit) => Ticket(Mutex::new(Some(permit)))
                .into_pyobject(py)?
                .into_any()
                .unbind(),
            Err(retry_after) => retry_after.into_pyobject(py)?.into_any().unbind(),
        })
    }

    /// Hands a ticket back: `outcome` is "success", "failure" or "ignored" (cancelled; frees a
    /// half-open probe slot without counting). A ticket counts once; later calls do nothing.
    fn _record(&self, py: Python<'_>, ticket: &Ticket, outcome: &str) -> PyResult<()> {
        let outcome = match outcome {
            "success" => Outcome::Success,
            "failure" => Outcome::Failure,
            "ignored" => Outcome::Ignored,
            other => {
                return Err(bad_value(
                    "outcome",
                    format!("'{other}' is not success, failure or ignored"),
                ));
            }
        };
        let permit = ticket.0.lock().unwrap_or_else(|e| e.into_inner()).take();
        match permit {
            Some(p) => self.record(py, p, outcome),
            None => Ok(()),
        }
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let c = self.inner.policy().config();
        Ok(format!(
            "CircuitBreaker(failure_rate={}, window={}, cooldown={}, probe={}, state='{}')",
            c.failure_rate.unwrap_or(0.0),
            window_calls(c),
            c.open.duration.as_secs_f64(),
            match c.half_open.rule {
                ProbeRule::Consecutive { successes } => successes,
                ProbeRule::Rate { calls } => calls,
            },
            self.state(py)?
        ))
    }
}

/// The `window` the breaker was built with (its count window's size).
fn window_calls(config: &BreakerConfig) -> u32 {
    match config.window {
        WindowConfig::Count { calls } => calls,
        WindowConfig::Time { buckets, .. } => buckets,
    }
}

impl CircuitBreaker {
    /// Seconds an open breaker stays open, from a rejection's `retry_after`.
    fn open_left(&self, now: Instant) -> Option<f64> {
        match self.inner.try_acquire(now) {
            Err(r) => r.retry_after().map(|d| d.as_secs_f64()),
            Ok(p) => {
                self.inner.record(p, Outcome::Ignored, now);
                None
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Retry budgets.

/// A retry budget shared by any number of decorated functions: retries are at most `ratio` of
/// first tries over the last `ttl` seconds, plus `min_per_sec` (Finagle's `RetryBudget`).
#[pyclass(module = "reliable", name = "RetryBudget", frozen)]
#[derive(Debug)]
struct RetryBudget {
    inner: Mutex<AnyBudget>,
}

impl RetryBudget {
    fn lock(&self) -> MutexGuard<'_, AnyBudget> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[pymethods]
impl RetryBudget {
    #[new]
    #[pyo3(signature = (ratio = None, *, min_per_sec = None, ttl = None))]
    fn new(
        ratio: Option<&Bound<'_, PyAny>>,
        min_per_sec: Option<&Bound<'_, PyAny>>,
        ttl: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let ratio = opt_float_of("ratio", ratio)?.unwrap_or(0.1);
        let min_per_sec = opt_int_of("min_per_sec", min_per_sec)?.unwrap_or(10);
        let ttl = opt_float_of("ttl", ttl)?.unwrap_or(10.0);
        if !ratio.is_finite() || !(0.0..=1000.0).contains(&ratio) {
            return Err(bad_value(
                "ratio",
                format!("must be in [0, 1000], got {ratio}"),
            ));
        }
        let config = BudgetConfig::Ratio(RatioConfig {
            ratio,
            min_per_sec: count("min_per_sec", min_per_sec, 0, 1_000_000)?,
            ttl: seconds("ttl", ttl, true)?,
            slots: 10,
        });
        let names = [
            ("ratio", "ratio"),
            ("ttl", "ttl"),
            ("min_per_sec", "min_per_sec"),
        ];
        let policy = BudgetPolicy::new(config).map_err(|e| config_error(e, &names))?;
        let budget = AnyBudget::new(&policy).map_err(|e| config_error(e, &names))?;
        Ok(RetryBudget {
            inner: Mutex::new(budget),
        })
    }

    /// A token bucket instead (gRPC A6, Brooker 2022): starts full with `max_tokens`; every failed
    /// attempt takes `failure_cost`, a retry is granted only while at least `retry_cost` tokens
    /// are left (more than `retry_above`, when given) and takes `retry_cost`; every first try adds
    /// `first_try_credit` and every successful call `success_credit`, up to `max_tokens`.
    #[staticmethod]
    #[pyo3(signature = (
        max_tokens, *, retry_cost = None, failure_cost = None, success_credit = None,
        first_try_credit = None, retry_above = None,
    ))]
    fn token_bucket(
        max_tokens: &Bound<'_, PyAny>,
        retry_cost: Option<&Bound<'_, PyAny>>,
        failure_cost: Option<&Bound<'_, PyAny>>,
        success_credit: Option<&Bound<'_, PyAny>>,
        first_try_credit: Option<&Bound<'_, PyAny>>,
        retry_above: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let max_tokens = float_of("max_tokens", max_tokens)?;
        let retry_cost = opt_float_of("retry_cost", retry_cost)?.unwrap_or(1.0);
        let retry_when = match opt_float_of("retry_above", retry_above)? {
            Some(v) => Threshold::Above(v),
            None => Threshold::AtLeast(retry_cost),
        };
        let config = BudgetConfig::TokenBucket(TokenBucketConfig {
            max_tokens,
            initial_tokens: None,
            first_try_credit: opt_float_of("first_try_credit", first_try_credit)?.unwrap_or(0.0),
            success_credit: opt_float_of("success_credit", success_credit)?.unwrap_or(0.0),
            retried_success_credit: None,
            failure_cost: opt_float_of("failure_cost", failure_cost)?.unwrap_or(0.0),
            retry_cost,
            retry_when,
        });
        let names = [
            ("max_tokens", "max_tokens"),
            ("first_try_credit", "first_try_credit"),
            ("success_credit", "success_credit"),
            ("failure_cost", "failure_cost"),
            ("retry_cost", "retry_cost"),
            ("retry_when", "retry_above"),
        ];
        let policy = BudgetPolicy::new(config).map_err(|e| config_error(e, &names))?;
        let budget = AnyBudget::new(&policy).map_err(|e| config_error(e, &names))?;
        Ok(RetryBudget {
            inner: Mutex::new(budget),
        })
    }

    fn __repr__(&self) -> String {
        format!("RetryBudget({:?})", self.lock())
    }
}

// ---------------------------------------------------------------------------------------------
// The LLM spend budget.

/// Dollars (or any currency unit) as the core's integer micro-units.
fn micro(param: &str, value: f64) -> PyResult<u64> {
    if !value.is_finite() || !(0.0..=1e12).contains(&value) {
        return Err(bad_value(
            param,
            format!("must be an amount in [0, 1e12], got {value}"),
        ));
    }
    Ok((value * 1e6).round() as u64)
}

fn tokens_of(param: &str, value: i64) -> PyResult<u64> {
    if !(0..=1_000_000_000_000).contains(&value) {
        return Err(bad_value(
            param,
            format!("must be a token count in [0, 1e12], got {value}"),
        ));
    }
    Ok(value as u64)
}

fn ceiling(
    tokens_param: &str,
    tokens: Option<&Bound<'_, PyAny>>,
    cost_param: &str,
    cost: Option<&Bound<'_, PyAny>>,
) -> PyResult<Option<Ceiling>> {
    let tokens = opt_int_of(tokens_param, tokens)?
        .map(|t| tokens_of(tokens_param, t))
        .transpose()?;
    let cost = opt_float_of(cost_param, cost)?
        .map(|c| micro(cost_param, c))
        .transpose()?;
    Ok(match (tokens, cost) {
        (None, None) => None,
        (tokens, cost) => Some(Ceiling {
            tokens,
            cost,
            ..Ceiling::tokens(0)
        }),
    })
}

fn span_name(span: Span) -> &'static str {
    span.name()
}

/// Token and cost ceilings for LLM calls over the last minute, day and 30 days (the core's spend
/// breaker): reserve the worst case before a call, settle the real usage after it.
#[pyclass(module = "reliable", name = "SpendBudget", frozen)]
#[derive(Debug)]
struct SpendBudget {
    inner: Mutex<SpendBreaker>,
    clock: Clock,
}

/// Room held for one call until it is settled or cancelled.
#[pyclass(module = "reliable", name = "Reservation", frozen)]
#[derive(Debug)]
struct SpendTicket(Mutex<Option<Reservation>>);

impl SpendTicket {
    fn take(&self) -> Option<Reservation> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}

impl SpendBudget {
    fn with<T>(&self, f: impl FnOnce(&mut SpendBreaker) -> T) -> T {
        f(&mut self.inner.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

#[pymethods]
impl SpendBudget {
    #[new]
    #[pyo3(signature = (
        *, price_in = None, price_out = None, minute_tokens = None, minute_cost = None,
        day_tokens = None, day_cost = None, month_tokens = None, month_cost = None,
        throttle_below = None, clock = None,
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        price_in: Option<&Bound<'_, PyAny>>,
        price_out: Option<&Bound<'_, PyAny>>,
        minute_tokens: Option<&Bound<'_, PyAny>>,
        minute_cost: Option<&Bound<'_, PyAny>>,
        day_tokens: Option<&Bound<'_, PyAny>>,
        day_cost: Option<&Bound<'_, PyAny>>,
        month_tokens: Option<&Bound<'_, PyAny>>,
        month_cost: Option<&Bound<'_, PyAny>>,
        throttle_below: Option<&Bound<'_, PyAny>>,
        clock: Option<Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let price_in = micro(
            "price_in",
            opt_float_of("price_in", price_in)?.unwrap_or(0.0),
        )?;
        let price_out = micro(
            "price_out",
            opt_float_of("price_out", price_out)?.unwrap_or(0.0),
        )?;
        let throttle_below = opt_float_of("throttle_below", throttle_below)?.unwrap_or(0.1);
        let config = SpendConfig {
            price: Price::per_million_tokens(price_in, price_out),
            minute: ceiling("minute_tokens", minute_tokens, "minute_cost", minute_cost)?,
            day: ceiling("day_tokens", day_tokens, "day_cost", day_cost)?,
            month: ceiling("month_tokens", month_tokens, "month_cost", month_cost)?,
            throttle_below,
            ..SpendConfig::new()
        };
        let names = [("throttle_below", "throttle_below")];
        let policy = SpendPolicy::new(config).map_err(|e| config_error(e, &names))?;
        let breaker = SpendBreaker::new(policy).map_err(|e| config_error(e, &names))?;
        Ok(SpendBudget {
            inner: Mutex::new(breaker),
            clock: Clock(callable("clock", clock)?),
        })
    }

    /// Holds room for a call of `input_tokens` in and up to `max_output_tokens` out: a
    /// reservation, or `(reason, retry_after_seconds)` when it does not fit.
    fn _reserve(
        &self,
        py: Python<'_>,
        input_tokens: &Bound<'_, PyAny>,
        max_output_tokens: &Bound<'_, PyAny>,
    ) -> PyResult<Py<PyAny>> {
        let input = tokens_of("input_tokens", int_of("input_tokens", input_tokens)?)?;
        let output = tokens_of(
            "max_output_tokens",
            int_of("max_output_tokens", max_output_tokens)?,
        )?;
        let now = self.clock.now(py)?;
        Ok(
            match self.with(|b| b.reserve(now, Tokens { input, output })) {
                Ok(r) => SpendTicket(Mutex::new(Some(r)))
                    .into_pyobject(py)?
                    .into_any()
                    .unbind(),
                Err(refusal) => {
                    let reason = match refusal.reason {
                        RefuseReason::MoneyLimit => "money-limit".to_string(),
                        RefuseReason::Ceiling { span, .. } => {
                            format!("{}-ceiling", span_name(span))
                        }
                        RefuseReason::TooLarge { span, .. } => {
                            format!("too-large-for-{}", span_name(span))
                        }
                        RefuseReason::ProviderQuota(_) => "provider-quota".to_string(),
                    };
                    (reason, refusal.retry_after.as_secs_f64())
                        .into_pyobject(py)?
                        .into_any()
                        .unbind()
                }
            },
        )
    }

    /// Settles a reservation with the usage the provider reported; returns the cost charged.
    /// A reservation settles once; later calls charge nothing.
    fn settle(
        &self,
        py: Python<'_>,
        reservation: &SpendTicket,
        input_tokens: &Bound<'_, PyAny>,
        output_tokens: &Bound<'_, PyAny>,
    ) -> PyResult<f64> {
        let input = tokens_of("input_tokens", int_of("input_tokens", input_tokens)?)?;
        let output = tokens_of("output_tokens", int_of("output_tokens", output_tokens)?)?;
        let now = self.clock.now(py)?;
        Ok(match reservation.take() {
            Some(r) => {
                self.with(|b| b.settle(now, r, Tokens { input, output }))
                    .charged
                    .cost as f64
                    / 1e6
            }
            None => 0.0,
        })
    }

    /// Settles a call that was cancelled or failed without a usage report: the whole estimate
    /// is charged (the provider may have billed it).
    fn cancel(&self, py: Python<'_>, reservation: &SpendTicket) -> PyResult<f64> {
        let now = self.clock.now(py)?;
        Ok(match reservation.take() {
            Some(r) => self.with(|b| b.cancel(now, r, None)).charged.cost as f64 / 1e6,
            None => 0.0,
        })
    }

    /// The provider said the account is out of money: refuse everything for `reset_after`
    /// seconds (an hour when `None`).
    #[pyo3(signature = (reset_after = None))]
    fn money_limit(&self, py: Python<'_>, reset_after: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        let reset = opt_float_of("reset_after", reset_after)?
            .map(|s| seconds("reset_after", s, false))
            .transpose()?;
        let now = self.clock.now(py)?;
        self.with(|b| b.money_signal(now, reset));
        Ok(())
    }

    /// "admitting", "throttling" or "open".
    #[getter]
    fn state(&self, py: Python<'_>) -> PyResult<&'static str> {
        let now = self.clock.now(py)?;
        Ok(self.with(|b| b.state(now)).name())
    }

    /// Tokens and cost (in currency units) used over the last minute, day and 30 days.
    #[getter]
    fn usage<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let now = self.clock.now(py)?;
        let d = PyDict::new(py);
        for span in [Span::Minute, Span::Day, Span::Month] {
            let a = self.with(|b| b.usage(now, span));
            d.set_item(span_name(span), (a.tokens, a.cost as f64 / 1e6))?;
        }
        Ok(d)
    }
}

// ---------------------------------------------------------------------------------------------
// The retry loop of one logical call.

const RETRY_FIELDS: [(&str, &str); 6] = [
    ("max_attempts", "max_attempts"),
    ("attempt_timeout", "timeout"),
    ("backoff.shape.base", "base_delay"),
    ("backoff.shape.factor", "factor"),
    ("backoff.cap", "max_delay"),
    ("backoff.jitter.fraction", "jitter"),
];

fn backoff_config(
    base: f64,
    factor: f64,
    jitter: f64,
    cap: Option<Duration>,
) -> PyResult<BackoffConfig> {
    if !factor.is_finite() || !(1.0..=1000.0).contains(&factor) {
        return Err(bad_value(
            "factor",
            format!("must be in [1, 1000], got {factor}"),
        ));
    }
    let jitter = match fraction("jitter", jitter, true)? {
        0.0 => Jitter::None,
        // The core's proportional jitter takes fractions below 1.
        f if f < 1.0 => Jitter::Proportional { fraction: f },
        _ => Jitter::Full,
    };
    let base = seconds("base_delay", base, false)?;
    Ok(BackoffConfig {
        // No wait at all (a test's base_delay=0) is a constant zero; the core's exponential
        // shape needs a positive base.
        shape: if base.is_zero() {
            Shape::Constant { delay: base }
        } else {
            Shape::Exponential { base, factor }
        },
        cap: Some(cap.unwrap_or(Duration::MAX)),
        jitter,
        first_exponent: 0,
    })
}

/// The seed's retry arguments as the engine's policy, through `breaker` and `budget` (timed by
/// the breaker's clock).
#[pyfunction]
#[pyo3(signature = (*, breaker, timeout, max_attempts, base_delay, factor, jitter, rng, budget, max_delay, retry_after_cap, clock = None))]
#[allow(clippy::too_many_arguments)]
fn seed_policy(
    py: Python<'_>,
    breaker: Option<Bound<'_, PyAny>>,
    timeout: Option<&Bound<'_, PyAny>>,
    max_attempts: &Bound<'_, PyAny>,
    base_delay: &Bound<'_, PyAny>,
    factor: Option<&Bound<'_, PyAny>>,
    jitter: Option<&Bound<'_, PyAny>>,
    rng: Option<Bound<'_, PyAny>>,
    budget: Option<Bound<'_, PyAny>>,
    max_delay: Option<&Bound<'_, PyAny>>,
    retry_after_cap: &Bound<'_, PyAny>,
    clock: Option<Bound<'_, PyAny>>,
) -> PyResult<engine::Policy> {
    let clock = callable("clock", clock)?;
    let timeout = opt_float_of("timeout", timeout)?;
    let max_attempts = int_of("max_attempts", max_attempts)?;
    let base_delay = float_of("base_delay", base_delay)?;
    let factor = opt_float_of("factor", factor)?.unwrap_or(2.0);
    let jitter = opt_float_of("jitter", jitter)?.unwrap_or(0.1);
    let max_delay = opt_float_of("max_delay", max_delay)?;
    let retry_after_cap = float_of("retry_after_cap", retry_after_cap)?;
    let breaker = match breaker {
        Some(b) if !b.is_none() => Some(
            b.cast_into::<CircuitBreaker>()
                .map_err(|_| PyTypeError::new_err("breaker: must be a CircuitBreaker or None"))?
                .unbind(),
        ),
        _ => None,
    };
    let budget = match budget {
        Some(b) if !b.is_none() => Some(
            b.cast_into::<RetryBudget>()
                .map_err(|_| PyTypeError::new_err("budget: must be a RetryBudget or None"))?
                .unbind(),
        ),
        _ => None,
    };
    let cap = max_delay
        .map(|m| seconds("max_delay", m, true))
        .transpose()?;
    // The core's defaults for every other field (no deadline, one backoff for every class,
    // timeouts retried, ...): the seed has none of them.
    let config = RetryConfig {
        max_attempts: Some(count("max_attempts", max_attempts, 1, 1_000_000)?),
        attempt_timeout: timeout.map(|t| seconds("timeout", t, true)).transpose()?,
        max_server_delay: seconds("retry_after_cap", retry_after_cap, false)?,
        ..RetryConfig::new(backoff_config(base_delay, factor, jitter, cap)?)
    };
    let retry = RetryPolicy::new(config).map_err(|e| config_error(e, &RETRY_FIELDS))?;
    let rng = Random::new(py, rng)?;
    Ok(engine::Policy::seed(py, retry, breaker, budget, rng, clock))
}

// ---------------------------------------------------------------------------------------------
// What an HTTP answer means.

/// At most this many headers are read from one response (the rest are ignored): a response is
/// hostile input.
const MAX_HEADERS: usize = 256;

fn class_name(class: ErrorClass) -> (&'static str, Option<f64>) {
    // Not an exhaustive `match`: the core may add classes an HTTP answer never has (a local
    // refusal); those read as transient here rather than failing to build.
    if let ErrorClass::Throttled { retry_after } = class {
        ("throttled", retry_after.map(|d| d.as_secs_f64()))
    } else if class == ErrorClass::Timeout {
        ("timeout", None)
    } else if class == ErrorClass::Fatal {
        ("fatal", None)
    } else if class == ErrorClass::DontRetry {
        ("dont_retry", None)
    } else {
        ("transient", None)
    }
}

fn signals(headers: &[(String, String)]) -> reliable::http::HeaderSignals {
    let headers = headers.get(..MAX_HEADERS).unwrap_or(headers);
    reliable::http::HeaderSignals::from_headers(headers, std::time::SystemTime::now())
}

/// The error class of an HTTP answer with `status` and `headers` (name/value pairs), as every
/// face reads it: `(kind, retry_after_seconds)`, or `None` when the status is not an error.
#[pyfunction]
fn classify_http(
    status: &Bound<'_, PyAny>,
    headers: Vec<(String, String)>,
) -> PyResult<Option<(&'static str, Option<f64>)>> {
    let status = int_of("status", status)?;
    let status = u16::try_from(status)
        .ok()
        .filter(|s| (100..=599).contains(s))
        .ok_or_else(|| {
            bad_value(
                "status",
                format!("must be an HTTP status in [100, 599], got {status}"),
            )
        })?;
    Ok(reliable::http::classify_status(status, &signals(&headers)).map(class_name))
}

/// The server's requested wait in seconds (`retry-after-ms`, else `Retry-After` as seconds or an
/// HTTP-date), or `None`.
#[pyfunction]
fn server_delay(headers: Vec<(String, String)>) -> Option<f64> {
    signals(&headers).retry_after.map(|d| d.as_secs_f64())
}

// ---------------------------------------------------------------------------------------------
// exp_backoff.

/// The seed's `exp_backoff(attempt, base, factor, jitter, rng)`: the wait in seconds before retry
/// `attempt` (1 = the first retry): `base * factor**(attempt-1)`, spread by ±`jitter`.
#[pyfunction]
#[pyo3(signature = (attempt, base = None, factor = None, jitter = None, rng = None))]
fn exp_backoff(
    py: Python<'_>,
    attempt: &Bound<'_, PyAny>,
    base: Option<&Bound<'_, PyAny>>,
    factor: Option<&Bound<'_, PyAny>>,
    jitter: Option<&Bound<'_, PyAny>>,
    rng: Option<Bound<'_, PyAny>>,
) -> PyResult<f64> {
    let attempt = int_of("attempt", attempt)?;
    let base = opt_float_of("base", base)?.unwrap_or(0.2);
    let factor = opt_float_of("factor", factor)?.unwrap_or(2.0);
    let jitter = opt_float_of("jitter", jitter)?.unwrap_or(0.1);
    let attempt = count("attempt", attempt, 1, i64::from(u32::MAX))?;
    let config = backoff_config(base, factor, jitter, None)?;
    let names = [
        ("shape.base", "base"),
        ("shape.factor", "factor"),
        ("jitter.fraction", "jitter"),
        ("cap", "base"),
    ];
    let policy = BackoffPolicy::new(config).map_err(|e| config_error(e, &names))?;
    let sample = if policy.is_random() {
        Random::new(py, rng)?.sample(py)?
    } else {
        0
    };
    Ok(policy.delay(attempt, Duration::ZERO, sample).as_secs_f64())
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<CircuitBreaker>()?;
    m.add_class::<RetryBudget>()?;
    m.add_class::<SpendBudget>()?;
    m.add_class::<SpendTicket>()?;
    m.add_class::<engine::Policy>()?;
    m.add_class::<fleet::Store>()?;
    m.add_class::<engine::Run>()?;
    m.add_function(wrap_pyfunction!(seed_policy, m)?)?;
    m.add_class::<Ticket>()?;
    m.add_function(wrap_pyfunction!(exp_backoff, m)?)?;
    m.add_function(wrap_pyfunction!(classify_http, m)?)?;
    m.add_function(wrap_pyfunction!(server_delay, m)?)?;
    chaos::register(m)?;
    Ok(())
}

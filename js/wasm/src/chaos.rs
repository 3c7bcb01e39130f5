//! Chaos for JavaScript: a table of chaos layers, each the core's [`Chaos`] (its four strategies
//! validated), the strategies switched on now and its attempt counter, counted as the std crate's
//! `ChaosSwitch` counts them: an attempt is numbered only while some strategy is on, so every
//! language hits the same attempts for the same seed. The process-wide kill switch is the
//! TypeScript side's (it asks nothing here while killed, as the Rust switch draws nothing then).
//!
//! A config crosses as [`CONFIG`] numbers written into the module's input buffer (see
//! [`config_of`]); a decision comes back as [`OUT`] numbers in a record JavaScript reads in place.

use core::cell::{Cell, RefCell};

use reliable_core::answer::Answer;
use reliable_core::chaos::{
    AtAnswer, AtSend, BehaviorConfig, Chaos, ChaosConfig, ClientFault, Delay, Enabled, FaultConfig,
    FaultWindow, Injected, LatencyConfig, OutcomeConfig, Strategy, Timeline,
};
use reliable_core::{ConfigError, Problem};

use crate::{Failure, Slots, duration, millis};

/// Chaos layers alive at once.
pub const MAX_CHAOS: usize = 256;
/// Numbers per strategy in a config: present, rate, enabled, seed's high and low 32 bits, kind,
/// and three of the kind's own.
pub const PER_STRATEGY: usize = 9;
/// Numbers in a config: the four strategies in the order fault, latency, outcome, behaviour.
pub const CONFIG: usize = 4 * PER_STRATEGY;
/// Numbers in a decision's record: the attempt's number through the layer, the behaviour (1
/// or 0), the delay (ms, -1 none), the answering strategy (its stream: 0 fault, 2 outcome; -1
/// none), the answer's kind (0 a status, 1 a reset, 2 a hang), its status, its retry-after (ms,
/// -1 none) and its should-retry (1, 0, -1 none).
pub const OUT: usize = 8;

/// One layer: its validated strategies, those switched on, attempts counted.
#[derive(Clone, Copy, Debug)]
struct Slot {
    chaos: Chaos,
    on: u8,
    drawn: u64,
}

/// The chaos layers of the module.
#[derive(Debug)]
pub struct Table {
    slots: [Cell<Option<Slot>>; MAX_CHAOS],
    used: Slots<MAX_CHAOS>,
    out: Cell<[f64; OUT]>,
    /// The fault timelines.
    pub timelines: Timelines,
}

impl Default for Table {
    fn default() -> Self {
        Self::new()
    }
}

fn refused(field: &'static str, value: f64, min: f64, max: f64) -> Failure {
    Failure::Config(ConfigError::new(
        field,
        Problem::OutOfRange { value, min, max },
    ))
}

/// A seed from its two 32-bit halves (each a whole number in `[0, 2^32)`).
fn seed(field: &'static str, hi: f64, lo: f64) -> Result<u64, Failure> {
    let half = |v: f64| {
        // Whole: `as` truncates (no `fract` without std).
        ((0.0..4_294_967_296.0).contains(&v) && v == (v as u64) as f64)
            .then_some(v as u64)
            .ok_or(refused(field, v, 0.0, 4_294_967_295.0))
    };
    Ok(half(hi)? << 32 | half(lo)?)
}

/// An injected answer: kind 0 a status (`a` the status, `b` the retry-after in ms or negative for
/// none, `c` should-retry 1, 0 or anything else for none), 1 a reset, 2 a hang.
fn injected(field: &'static str, n: &[f64]) -> Result<Injected, Failure> {
    let at = |i: usize| n.get(i).copied().unwrap_or(f64::NAN);
    Ok(match at(5) as i32 {
        0 => {
            let status = at(6);
            if !(100.0..=599.0).contains(&status) || status != f64::from(status as u16) {
                return Err(refused(field, status, 100.0, 599.0));
            }
            Injected::Status {
                status: status as u16,
                retry_after: (at(7) >= 0.0).then(|| duration(at(7))),
                should_retry: match at(8) as i32 {
                    0 => Some(false),
                    1 => Some(true),
                    _ => None,
                },
            }
        }
        1 => Injected::Reset,
        _ => Injected::Hang,
    })
}

/// A config from its [`CONFIG`] numbers (each strategy's block: present, rate, enabled, seed
/// high, seed low, kind, a, b, c). Durations are milliseconds, checked finite and not negative by
/// the TypeScript side; statuses and seeds are checked here; rates and the rest by the core.
pub fn config_of(n: &[f64]) -> Result<ChaosConfig, Failure> {
    let block = |s: usize| {
        n.get(s * PER_STRATEGY..(s + 1) * PER_STRATEGY)
            .unwrap_or_default()
    };
    let at = |b: &[f64], i: usize| b.get(i).copied().unwrap_or(f64::NAN);
    let mut config = ChaosConfig::OFF;
    let b = block(0);
    if at(b, 0) == 1.0 {
        config.fault = Some(FaultConfig {
            rate: at(b, 1),
            enabled: at(b, 2) == 1.0,
            seed: seed("fault.seed", at(b, 3), at(b, 4))?,
            answer: injected("fault.answer.status", b)?,
        });
    }
    let b = block(1);
    if at(b, 0) == 1.0 {
        config.latency = Some(LatencyConfig {
            rate: at(b, 1),
            enabled: at(b, 2) == 1.0,
            seed: seed("latency.seed", at(b, 3), at(b, 4))?,
            delay: match at(b, 5) as i32 {
                0 => Delay::Fixed {
                    delay: duration(at(b, 6)),
                },
                _ => Delay::Uniform {
                    min: duration(at(b, 6)),
                    max: duration(at(b, 7)),
                },
            },
        });
    }
    let b = block(2);
    if at(b, 0) == 1.0 {
        config.outcome = Some(OutcomeConfig {
            rate: at(b, 1),
            enabled: at(b, 2) == 1.0,
            seed: seed("outcome.seed", at(b, 3), at(b, 4))?,
            answer: injected("outcome.answer.status", b)?,
        });
    }
    let b = block(3);
    if at(b, 0) == 1.0 {
        config.behavior = Some(BehaviorConfig {
            rate: at(b, 1),
            enabled: at(b, 2) == 1.0,
            seed: seed("behavior.seed", at(b, 3), at(b, 4))?,
        });
    }
    Ok(config)
}

impl Table {
    /// No layer.
    pub fn new() -> Self {
        Table {
            slots: [const { Cell::new(None) }; MAX_CHAOS],
            used: Slots::new(),
            out: Cell::new([0.0; OUT]),
            timelines: Timelines::new(),
        }
    }

    /// A layer from a config's numbers ([`config_of`]), validated by the core: its handle.
    pub fn add(&self, numbers: &[f64]) -> Result<u32, Failure> {
        let chaos = Chaos::new(config_of(numbers)?)?;
        let h = self.used.take().ok_or(Failure::Full(crate::Table::Chaos))?;
        let slot = self.slots.get(h).ok_or(Failure::BadHandle)?;
        slot.set(Some(Slot {
            on: chaos.enabled().0,
            chaos,
            drawn: 0,
        }));
        Ok(h as u32)
    }

    /// Frees a layer (a handle freed twice is ignored).
    pub fn free(&self, h: u32) {
        if !self.used.is_used(h) {
            return;
        }
        if let Some(slot) = self.slots.get(h as usize) {
            slot.set(None);
        }
        self.used.give_back(h);
    }

    fn with<R>(&self, h: u32, f: impl FnOnce(&mut Slot) -> R) -> Result<R, Failure> {
        if !self.used.is_used(h) {
            return Err(Failure::BadHandle);
        }
        let cell = self.slots.get(h as usize).ok_or(Failure::BadHandle)?;
        let mut slot = cell.get().ok_or(Failure::BadHandle)?;
        let r = f(&mut slot);
        cell.set(Some(slot));
        Ok(r)
    }

    /// Switches the strategy of stream `stream` (0 fault, 1 latency, 2 outcome, 3 behaviour) on
    /// or off (a strategy not configured stays off): the strategies on now, one bit each.
    pub fn set(&self, h: u32, stream: u32, on: bool) -> Result<u32, Failure> {
        let strategy = *Strategy::ALL
            .get(stream as usize)
            .ok_or(Failure::BadHandle)?;
        self.with(h, |s| {
            let mask = s.chaos.configured().0 & strategy.bit();
            s.on = if on {
                s.on | mask
            } else {
                s.on & !strategy.bit()
            };
            u32::from(s.on)
        })
    }

    /// The strategies on now, one bit each.
    pub fn enabled(&self, h: u32) -> Result<u32, Failure> {
        self.with(h, |s| u32::from(s.on))
    }

    /// Attempts counted so far.
    pub fn attempts(&self, h: u32) -> Result<f64, Failure> {
        self.with(h, |s| s.drawn as f64)
    }

    /// What the next attempt through layer `h` gets: 1 something (the record says what), 0
    /// nothing (every strategy off: nothing counted; or none hit).
    pub fn decide(&self, h: u32) -> Result<u32, Failure> {
        let (n, d) = match self.with(h, |s| {
            if s.on == 0 {
                return None;
            }
            let n = s.drawn;
            s.drawn += 1;
            Some((n, s.chaos.decide(n, Enabled(s.on))))
        })? {
            Some(found) => found,
            None => return Ok(0),
        };
        if d.is_none() {
            return Ok(0);
        }
        let (strategy, kind, status, after, retry) = match d.answer {
            None => (-1.0, 0.0, 0.0, -1.0, -1.0),
            Some((
                s,
                Injected::Status {
                    status,
                    retry_after,
                    should_retry,
                },
            )) => (
                s.stream() as f64,
                0.0,
                f64::from(status),
                retry_after.map_or(-1.0, millis),
                should_retry.map_or(-1.0, |r| f64::from(u8::from(r))),
            ),
            Some((s, Injected::Reset)) => (s.stream() as f64, 1.0, 0.0, -1.0, -1.0),
            Some((s, Injected::Hang)) => (s.stream() as f64, 2.0, 0.0, -1.0, -1.0),
        };
        self.out.set([
            n as f64,
            f64::from(u8::from(d.behavior)),
            d.latency.map_or(-1.0, millis),
            strategy,
            kind,
            status,
            after,
            retry,
        ]);
        Ok(1)
    }

    /// Where the latest decision's record lives (the table never moves).
    pub fn out_ptr(&self) -> *const f64 {
        self.out.as_ptr().cast()
    }

    /// The latest decision's record.
    pub fn out(&self) -> [f64; OUT] {
        self.out.get()
    }
}

// ---------------------------------------------------------------------------------------------
// A scenario's fault timeline.

/// Timelines alive at once.
pub const MAX_TIMELINES: usize = 64;
/// Faults one timeline holds at most.
pub const MAX_FAULTS: usize = 32;

/// One timeline: its checked faults, the seed of its draws, attempts counted.
#[derive(Clone, Debug)]
struct Replay {
    faults: heapless::Vec<FaultWindow, MAX_FAULTS>,
    seed: u64,
    drawn: u64,
}

/// The timelines of the module, and the one being built.
#[derive(Debug)]
pub struct Timelines {
    slots: [RefCell<Option<Replay>>; MAX_TIMELINES],
    used: Slots<MAX_TIMELINES>,
    building: RefCell<Option<Replay>>,
    out: Cell<[f64; 3]>,
}

impl Default for Timelines {
    fn default() -> Self {
        Self::new()
    }
}

impl Timelines {
    /// None.
    pub fn new() -> Self {
        Timelines {
            slots: [const { RefCell::new(None) }; MAX_TIMELINES],
            used: Slots::new(),
            building: RefCell::new(None),
            out: Cell::new([0.0; 3]),
        }
    }

    /// Starts a timeline whose draws come from the seed of these halves.
    pub fn begin(&self, hi: f64, lo: f64) -> Result<(), Failure> {
        let seed = seed("seed", hi, lo)?;
        let mut b = self
            .building
            .try_borrow_mut()
            .map_err(|_| Failure::BadHandle)?;
        *b = Some(Replay {
            faults: heapless::Vec::new(),
            seed,
            drawn: 0,
        });
        Ok(())
    }

    /// Adds a fault over `[from_ms, until_ms)`: kind 0 an outage (`a` 1: it hangs), 1 a
    /// partition, 2 an error rate (`a`), 3 a latency inflation (factor `a`), 4 a throttle (share
    /// `a`, retry-after `b` ms). Checked by the core (`until`, `rate`, `factor`, `share`).
    pub fn fault(&self, kind: u32, from: f64, until: f64, a: f64, b: f64) -> Result<(), Failure> {
        let fault = match kind {
            0 => ClientFault::Outage { hang: a == 1.0 },
            1 => ClientFault::Partition,
            2 => ClientFault::ErrorRate { rate: a },
            3 => ClientFault::LatencyInflation { factor: a },
            _ => ClientFault::Throttle {
                share: a,
                retry_after: duration(b),
            },
        };
        let window = FaultWindow {
            from: duration(from),
            until: duration(until),
            fault,
        }
        .check()?;
        let mut building = self
            .building
            .try_borrow_mut()
            .map_err(|_| Failure::BadHandle)?;
        let r = building.as_mut().ok_or(Failure::BadHandle)?;
        r.faults.push(window).map_err(|_| {
            Failure::Config(ConfigError::new(
                "faults",
                Problem::ExceedsCapacity {
                    requested: MAX_FAULTS as u64 + 1,
                    capacity: MAX_FAULTS as u64,
                },
            ))
        })
    }

    /// The timeline built: its handle.
    pub fn finish(&self) -> Result<u32, Failure> {
        let r = self
            .building
            .try_borrow_mut()
            .map_err(|_| Failure::BadHandle)?
            .take()
            .ok_or(Failure::BadHandle)?;
        let h = self
            .used
            .take()
            .ok_or(Failure::Full(crate::Table::Timelines))?;
        let slot = self.slots.get(h).ok_or(Failure::BadHandle)?;
        *slot.try_borrow_mut().map_err(|_| Failure::BadHandle)? = Some(r);
        Ok(h as u32)
    }

    /// Frees a timeline (a handle freed twice is ignored).
    pub fn free(&self, h: u32) {
        if !self.used.is_used(h) {
            return;
        }
        if let Some(Ok(mut s)) = self.slots.get(h as usize).map(RefCell::try_borrow_mut) {
            *s = None;
        }
        self.used.give_back(h);
    }

    fn with<R>(&self, h: u32, f: impl FnOnce(&mut Replay) -> R) -> Result<R, Failure> {
        if !self.used.is_used(h) {
            return Err(Failure::BadHandle);
        }
        let cell = self.slots.get(h as usize).ok_or(Failure::BadHandle)?;
        let mut r = cell.try_borrow_mut().map_err(|_| Failure::BadHandle)?;
        Ok(f(r.as_mut().ok_or(Failure::BadHandle)?))
    }

    /// Attempt `n` (negative: the next one, counted) sent at `t_ms` since the replay started:
    /// 0 send (record: the latency factor), 1 hold (until, ms), 2 answer (status, retry-after ms
    /// or -1), 3 hang; the record's last number is `n`.
    pub fn send(&self, h: u32, t_ms: f64, n: f64) -> Result<u32, Failure> {
        let (code, a, b, n) = self.with(h, |r| {
            let n = if n >= 0.0 {
                n as u64
            } else {
                r.drawn += 1;
                r.drawn - 1
            };
            let tl = Timeline::new(&r.faults, r.seed).ok();
            let at = tl.map_or(
                AtSend::Send {
                    latency_factor: 1.0,
                },
                |tl| tl.at_send(duration(t_ms), n),
            );
            match at {
                AtSend::Send { latency_factor } => (0, latency_factor, 0.0, n),
                AtSend::Hold { until } => (1, millis(until), 0.0, n),
                AtSend::Answer(Answer::Status { status, signals }) => (
                    2,
                    f64::from(status),
                    signals.retry_after.map_or(-1.0, millis),
                    n,
                ),
                AtSend::Answer(_) | AtSend::Hang => (3, 0.0, 0.0, n),
            }
        })?;
        self.out.set([a, b, n as f64]);
        Ok(code)
    }

    /// The answer of attempt `n` arriving at `t_ms` (`success`: a success by the core's table):
    /// 0 deliver, 1 hold (until, ms), 2 fail (the status).
    pub fn answer(&self, h: u32, t_ms: f64, n: f64, success: bool) -> Result<u32, Failure> {
        let (code, a) = self.with(h, |r| {
            let at = Timeline::new(&r.faults, r.seed)
                .ok()
                .map_or(AtAnswer::Deliver, |tl| {
                    tl.at_answer(duration(t_ms), n.max(0.0) as u64, success)
                });
            match at {
                AtAnswer::Deliver => (0, 0.0),
                AtAnswer::Hold { until } => (1, millis(until)),
                AtAnswer::Fail(Answer::Status { status, .. }) => (2, f64::from(status)),
                AtAnswer::Fail(_) => (2, 500.0),
            }
        })?;
        self.out.set([a, -1.0, n]);
        Ok(code)
    }

    /// Where the latest answer's numbers live.
    pub fn out_ptr(&self) -> *const f64 {
        self.out.as_ptr().cast()
    }
}

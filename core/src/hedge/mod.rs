//! Hedged requests: when an idempotent call is slower than usual, send another copy and take
//! whichever succeeds first (Dean & Barroso, "The Tail at Scale", CACM 2013); a copy that fails
//! waits for the others.
//!
//! A hedge is sent `delay` after the call started, a second one `2 × delay` after, and so on up to
//! `max_hedges`. The delay is fixed, or a quantile (p95 by default) of recent attempt latencies
//! from a [`LatencyQuantile`] (fixed memory; its error bound is in [its docs](quantile)), so only
//! about 5% of calls are hedged: the tail is cut for a few percent more load. Calls not marked
//! idempotent are never hedged: two copies of a payment are two payments.
//!
//! Hedging multiplies load exactly when a downstream is slow, which is when it is overloaded, so
//! a hedge may also be drawn from the client's [`ExtraLedger`](crate::ledger::ExtraLedger), the budget every extra attempt
//! shares ([`Hedger::try_hedge_from`]).
//!
//! ## The decision
//!
//! One `match` in [`Hedger::decide`], in this order; `k` is the hedges already sent:
//!
//! | call | condition | decision |
//! |---|---|---|
//! | not idempotent | | [`NoHedge::NotIdempotent`] |
//! | `k = max_hedges` | | [`NoHedge::MaxHedges`] |
//! | quantile delay | fewer than `min_samples` latencies recorded | [`NoHedge::Warming`] |
//! | | `now < started + (k + 1) × delay` | [`NoHedge::NotYet`], with the time left |
//! | | the ledger refuses | [`NoHedge::Ledger`] |
//! | | otherwise | hedge; `k + 1` |
//!
//! The delay is `clamp(estimate, min, max)` for a quantile delay, read when the decision is made.
//! Report every copy that ends (first tries and hedges alike) with [`Hedger::copy_ended`], its
//! time measured from its own send: the one rule of what feeds the quantile. A copy that answered
//! gives its latency (a success, or a failure the downstream sent); a copy that timed out, or was
//! cancelled because another copy won or the attempt ended, gives its time so far, a lower bound
//! of its latency. Those are exactly the slow copies: an estimate that left them out (as tower's
//! `hedge` leaves out cancelled losers) would see only the calls that hedging made fast, settle
//! below the quantile it aims at and hedge more than the quantile says; one that left out
//! timeouts would hedge more the slower a downstream gets. With them, a p95 delay hedges about 5%
//! of calls, and when most copies time out the delay grows to the timeout and hedging stops.
//!
//! Each copy is timed from its own send: a policy's `Call` timeout under a `Hedge` is each
//! copy's, while the retry's attempt timeout and the call's deadline bound the hedged attempt as
//! a whole. The attempt ends when a copy succeeds or every copy has ended.
//!
//! ```
//! use reliable_core::hedge::{HedgeConfig, HedgeDelay, Hedger, HedgePolicy, Idempotency, NoHedge};
//! use reliable_core::{Duration, Instant};
//!
//! let mut hedger = Hedger::new(HedgePolicy::new(HedgeConfig {
//!     delay: HedgeDelay::Fixed(Duration::from_millis(50)),
//!     max_hedges: 1,
//! })?);
//! let start = Instant::from_secs(1);
//! let mut call = hedger.start(start, Idempotency::Idempotent);
//! assert_eq!(hedger.next_hedge_at(&call), Some(start + Duration::from_millis(50)));
//! assert_eq!(
//!     hedger.try_hedge(&mut call, start + Duration::from_millis(10)),
//!     Err(NoHedge::NotYet { retry_after: Duration::from_millis(40) })
//! );
//! assert_eq!(hedger.try_hedge(&mut call, start + Duration::from_millis(50)), Ok(()));
//! assert_eq!(hedger.try_hedge(&mut call, start + Duration::from_secs(1)), Err(NoHedge::MaxHedges));
//! let mut payment = hedger.start(start, Idempotency::NotIdempotent);
//! assert_eq!(hedger.try_hedge(&mut payment, start + Duration::from_secs(1)), Err(NoHedge::NotIdempotent));
//! # Ok::<(), reliable_core::ConfigError>(())
//! ```

pub mod quantile;

pub use quantile::LatencyQuantile;

use crate::budget::Denied;
use crate::error::{ConfigError, Problem, fraction_ppm, tri};
use crate::ledger::{AnyLedger, Draw, Extra};
use crate::outcome::AttemptOutcome;
use crate::time::{Duration, Instant};

/// A delay from a latency quantile. Defaults: p95 over a window of 1,000 samples, from 20 samples,
/// at least 1 ms, at most 10 s.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields, default))]
pub struct QuantileDelay {
    /// The quantile, in (0, 1]. Default 0.95.
    pub quantile: f64,
    /// Samples held before they start to fade (halved), in [2, 65,535]. Default 1,000.
    pub window: u32,
    /// No hedge until this many latencies are held, in [1, window / 2]. Default 20.
    pub min_samples: u32,
    /// The shortest delay. Default 1 ms.
    pub min: Duration,
    /// The longest delay, at least `min`. Default 10 s.
    pub max: Duration,
}

impl Default for QuantileDelay {
    fn default() -> Self {
        QuantileDelay::p95()
    }
}

impl QuantileDelay {
    /// p95 over 1,000 samples, from 20, between 1 ms and 10 s.
    pub const fn p95() -> Self {
        QuantileDelay {
            quantile: 0.95,
            window: 1_000,
            min_samples: 20,
            min: Duration::from_millis(1),
            max: Duration::from_secs(10),
        }
    }
}

/// When a hedge is sent.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum HedgeDelay {
    /// A fixed delay, more than zero.
    Fixed(Duration),
    /// A quantile of recent latencies.
    Quantile(QuantileDelay),
}

/// A hedging policy. In RON: `(delay: Quantile(()), max_hedges: 1)` or `(delay: Fixed("50ms"),
/// max_hedges: 2)`.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
pub struct HedgeConfig {
    /// When a hedge is sent.
    pub delay: HedgeDelay,
    /// Hedges per call at most, at least 1.
    pub max_hedges: u32,
}

impl HedgeConfig {
    /// One hedge at p95 ([`QuantileDelay::p95`]).
    pub const fn p95() -> Self {
        HedgeConfig {
            delay: HedgeDelay::Quantile(QuantileDelay::p95()),
            max_hedges: 1,
        }
    }
}

/// A validated [`HedgeConfig`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HedgePolicy {
    delay: Delay,
    max_hedges: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Delay {
    Fixed(Duration),
    Quantile {
        quantile_ppm: u32,
        window: u32,
        min_samples: u32,
        min: Duration,
        max: Duration,
    },
}

impl HedgePolicy {
    /// Validates `config`. Errors name the field: `max_hedges`, `delay`, `delay.quantile`,
    /// `delay.window`, `delay.min_samples`, `delay.max`.
    pub const fn new(config: HedgeConfig) -> Result<Self, ConfigError> {
        if config.max_hedges == 0 {
            return Err(ConfigError::new("max_hedges", Problem::Zero));
        }
        let delay = match config.delay {
            HedgeDelay::Fixed(d) => {
                if d.is_zero() {
                    return Err(ConfigError::new("delay", Problem::Zero));
                }
                Delay::Fixed(d)
            }
            HedgeDelay::Quantile(q) => {
                let quantile_ppm = tri!(fraction_ppm("delay.quantile", q.quantile, false, true));
                if quantile_ppm == 0 {
                    return Err(ConfigError::new("delay.quantile", Problem::Zero));
                }
                if q.window < 2 || q.window > u16::MAX as u32 {
                    return Err(ConfigError::new(
                        "delay.window",
                        Problem::OutOfRange {
                            value: q.window as f64,
                            min: 2.0,
                            max: u16::MAX as f64,
                        },
                    ));
                }
                if q.min_samples == 0 || q.min_samples > q.window / 2 {
                    return Err(ConfigError::new(
                        "delay.min_samples",
                        Problem::OutOfRange {
                            value: q.min_samples as f64,
                            min: 1.0,
                            max: (q.window / 2) as f64,
                        },
                    ));
                }
                if q.max.as_nanos() < q.min.as_nanos() || q.max.is_zero() {
                    return Err(ConfigError::new(
                        "delay.max",
                        Problem::Inconsistent("max is zero or below min"),
                    ));
                }
                Delay::Quantile {
                    quantile_ppm,
                    window: q.window,
                    min_samples: q.min_samples,
                    min: q.min,
                    max: q.max,
                }
            }
        };
        Ok(HedgePolicy {
            delay,
            max_hedges: config.max_hedges,
        })
    }

    /// Hedges per call at most.
    pub const fn max_hedges(&self) -> u32 {
        self.max_hedges
    }
}

/// Whether a call may be sent twice. Only idempotent calls are hedged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Idempotency {
    /// Sending it twice has the effect of sending it once (a read, a PUT, a keyed write).
    Idempotent,
    /// Sending it twice may do it twice.
    NotIdempotent,
}

/// One logical call being hedged, from [`Hedger::start`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HedgedCall {
    started: Instant,
    hedges: u32,
    idempotency: Idempotency,
}

impl HedgedCall {
    /// When the call started.
    pub const fn started(&self) -> Instant {
        self.started
    }

    /// Hedges sent so far.
    pub const fn hedges(&self) -> u32 {
        self.hedges
    }

    /// Whether it may be hedged.
    pub const fn idempotency(&self) -> Idempotency {
        self.idempotency
    }
}

/// Why no hedge is sent now.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NoHedge {
    /// The call is not idempotent.
    NotIdempotent,
    /// The call has had its hedges.
    MaxHedges,
    /// Too few latencies recorded for the quantile yet.
    Warming,
    /// Not yet: the next hedge is due in `retry_after`.
    NotYet {
        /// Time until the next hedge is due.
        retry_after: Duration,
    },
    /// The ledger of extra attempts refused it.
    Ledger(Denied),
}

/// Decides hedges for the calls of one client (or one downstream), and keeps the latency
/// quantile they are timed by. Fixed size (about 1.2 KiB, the quantile's buckets).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hedger {
    policy: HedgePolicy,
    latencies: LatencyQuantile,
}

impl Hedger {
    /// A hedger with no latency recorded.
    pub const fn new(policy: HedgePolicy) -> Self {
        let latencies = match policy.delay {
            Delay::Fixed(_) => LatencyQuantile::new(0, 2),
            Delay::Quantile {
                quantile_ppm,
                window,
                ..
            } => LatencyQuantile::new(quantile_ppm, window),
        };
        Hedger { policy, latencies }
    }

    /// The policy.
    pub fn policy(&self) -> &HedgePolicy {
        &self.policy
    }

    /// The latency quantile (empty for a fixed delay).
    pub fn latencies(&self) -> &LatencyQuantile {
        &self.latencies
    }

    /// A call starts at `now`.
    #[inline]
    pub const fn start(&self, now: Instant, idempotency: Idempotency) -> HedgedCall {
        HedgedCall {
            started: now,
            hedges: 0,
            idempotency,
        }
    }

    /// A copy ended `latency` after its own send: answered, or timed out or cancelled (then
    /// `latency` is its time so far, a lower bound; see [the module docs](self)). Only a quantile
    /// delay reads it.
    #[inline]
    pub fn record(&mut self, latency: Duration) {
        if let Delay::Quantile { .. } = self.policy.delay {
            self.latencies.record(latency);
        }
    }

    /// A copy ended `elapsed` after its own send, as `end` says (see the [module docs](self)).
    /// Every face reports its copies here, and only copies that were sent.
    #[inline]
    pub fn copy_ended(&mut self, elapsed: Duration, end: AttemptOutcome) {
        // An answer gives its latency; a timeout or a cancelled copy its time so far, a lower
        // bound. Every end is named, so a new one is decided here.
        match end {
            AttemptOutcome::Success | AttemptOutcome::Failed(_) | AttemptOutcome::Cancelled => {
                self.record(elapsed)
            }
        }
    }

    /// The delay between hedges now, `None` while a quantile delay is warming up.
    #[inline]
    pub fn delay(&self) -> Option<Duration> {
        match self.policy.delay {
            Delay::Fixed(d) => Some(d),
            Delay::Quantile { min_samples, .. } if self.latencies.samples() < min_samples => None,
            Delay::Quantile { min, max, .. } => self.latencies.estimate().map(|e| {
                // Not `clamp`, which asserts min <= max (the policy checked it): no panic path.
                Duration::from_nanos(e.as_nanos().max(min.as_nanos()).min(max.as_nanos()))
            }),
        }
    }

    /// What the rules say for `call` at `now`, without sending anything. See the [module
    /// docs](self) for the table; the ledger's row is left to the caller.
    #[inline]
    pub fn decide(&self, call: &HedgedCall, now: Instant) -> Result<(), NoHedge> {
        let due = self.delay().map(|d| due(call, d));
        match (call.idempotency, due) {
            (Idempotency::NotIdempotent, _) => Err(NoHedge::NotIdempotent),
            _ if call.hedges >= self.policy.max_hedges => Err(NoHedge::MaxHedges),
            (_, None) => Err(NoHedge::Warming),
            (_, Some(at)) if now < at => Err(NoHedge::NotYet {
                retry_after: at.saturating_duration_since(now),
            }),
            (_, Some(_)) => Ok(()),
        }
    }

    /// When the next hedge of `call` is due, if one can ever be (as the delay stands now): the
    /// time to set a timer for.
    pub fn next_hedge_at(&self, call: &HedgedCall) -> Option<Instant> {
        match (call.idempotency, self.delay()) {
            (Idempotency::Idempotent, Some(d)) if call.hedges < self.policy.max_hedges => {
                Some(due(call, d))
            }
            _ => None,
        }
    }

    /// Sends a hedge of `call` at `now` if the rules allow it, without a ledger.
    #[inline]
    pub fn try_hedge(&self, call: &mut HedgedCall, now: Instant) -> Result<(), NoHedge> {
        self.decide(call, now)?;
        call.hedges += 1;
        Ok(())
    }

    /// Sends a hedge of `call` at `now` if the rules allow it and `ledger` grants an extra
    /// attempt (asked only when everything else says yes). Settle the [`Draw`] when the hedge
    /// ends, won, lost or cancelled.
    #[inline]
    pub fn try_hedge_from<L: AnyLedger + ?Sized>(
        &self,
        call: &mut HedgedCall,
        now: Instant,
        ledger: &mut L,
    ) -> Result<Draw, NoHedge> {
        self.decide(call, now)?;
        let draw = ledger
            .try_draw(Extra::Hedge, now)
            .map_err(NoHedge::Ledger)?;
        call.hedges += 1;
        Ok(draw)
    }
}

/// When hedge `k + 1` of a call with `k` sent is due: `started + (k + 1) × delay`.
#[inline]
fn due(call: &HedgedCall, delay: Duration) -> Instant {
    call.started
        .saturating_add(delay.saturating_mul(u64::from(call.hedges) + 1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::budget::RatioConfig;
    use crate::outcome::ErrorClass;

    fn hedger(delay: HedgeDelay, max_hedges: u32) -> Hedger {
        Hedger::new(HedgePolicy::new(HedgeConfig { delay, max_hedges }).unwrap())
    }

    #[test]
    fn the_decision_table_row_by_row() {
        let ms = Duration::from_millis;
        let t0 = Instant::from_secs(1);
        let mut h = hedger(
            HedgeDelay::Quantile(QuantileDelay {
                min_samples: 3,
                window: 100,
                min: ms(5),
                max: ms(200),
                ..QuantileDelay::p95()
            }),
            2,
        );
        let mut call = h.start(t0, Idempotency::Idempotent);
        // Warming: two samples of three.
        h.record(ms(1));
        h.record(ms(1));
        assert_eq!(h.decide(&call, t0 + ms(999)), Err(NoHedge::Warming));
        assert_eq!(h.next_hedge_at(&call), None);
        // The third: p95 of {1, 1, 1} ms is under the minimum: 5 ms.
        h.record(ms(1));
        assert_eq!(h.delay(), Some(ms(5)));
        assert_eq!(
            h.decide(&call, t0 + ms(4)),
            Err(NoHedge::NotYet { retry_after: ms(1) })
        );
        assert_eq!(h.try_hedge(&mut call, t0 + ms(5)), Ok(()));
        // The second hedge is due at 2 × 5 ms.
        assert_eq!(h.next_hedge_at(&call), Some(t0 + ms(10)));
        // Slow samples raise the delay (to the max, 200 ms); the second hedge waits for 400 ms.
        for _ in 0..10 {
            h.record(ms(900));
        }
        assert_eq!(h.delay(), Some(ms(200)));
        assert_eq!(
            h.decide(&call, t0 + ms(10)),
            Err(NoHedge::NotYet {
                retry_after: ms(390)
            })
        );
        assert_eq!(h.try_hedge(&mut call, t0 + ms(400)), Ok(()));
        assert_eq!(call.hedges(), 2);
        assert_eq!(h.decide(&call, Instant::MAX), Err(NoHedge::MaxHedges));
        assert_eq!(h.next_hedge_at(&call), None);
        let write = h.start(t0, Idempotency::NotIdempotent);
        assert_eq!(h.decide(&write, Instant::MAX), Err(NoHedge::NotIdempotent));
        assert_eq!(h.next_hedge_at(&write), None);
    }

    #[test]
    fn every_copy_that_ends_feeds_the_quantile() {
        let ms = Duration::from_millis;
        let quantile = QuantileDelay {
            min_samples: 1,
            window: 100,
            min: ms(1),
            max: ms(10_000),
            ..QuantileDelay::p95()
        };
        let mut h = hedger(HedgeDelay::Quantile(quantile), 1);
        h.copy_ended(ms(10), AttemptOutcome::Success);
        h.copy_ended(ms(10), AttemptOutcome::Failed(ErrorClass::Transient));
        assert_eq!(h.latencies().samples(), 2);
        assert!(h.delay().is_some_and(|d| d < ms(11)), "{:?}", h.delay());
        // A timeout and a loser are at least this slow: the delay follows them up.
        h.copy_ended(ms(900), AttemptOutcome::Failed(ErrorClass::Timeout));
        h.copy_ended(ms(900), AttemptOutcome::Cancelled);
        assert_eq!(h.latencies().samples(), 4);
        assert!(h.delay().is_some_and(|d| d > ms(800)), "{:?}", h.delay());
    }

    #[test]
    fn hedges_draw_from_the_ledger() {
        let h = hedger(HedgeDelay::Fixed(Duration::from_millis(10)), 3);
        let mut ledger: crate::ledger::ExtraLedger =
            crate::ledger::ExtraLedger::from_config(RatioConfig::percent(0.5)).unwrap();
        let now = Instant::from_secs(1);
        ledger.on_first_try(now);
        ledger.on_first_try(now);
        let mut call = h.start(now, Idempotency::Idempotent);
        let late = now + Duration::from_secs(1);
        let draw = h.try_hedge_from(&mut call, late, &mut ledger).unwrap();
        assert_eq!(draw.kind(), Extra::Hedge);
        // The ledger is spent: refused, and the hedge is not counted as sent.
        assert_eq!(
            h.try_hedge_from(&mut call, late, &mut ledger),
            Err(NoHedge::Ledger(Denied::Ratio))
        );
        assert_eq!(call.hedges(), 1);
        // A call the rules refuse never reaches the ledger.
        let mut early = h.start(late, Idempotency::Idempotent);
        assert!(matches!(
            h.try_hedge_from(&mut early, late, &mut ledger),
            Err(NoHedge::NotYet { .. })
        ));
        assert_eq!(
            (ledger.drawn(Extra::Hedge), ledger.denied(Extra::Hedge)),
            (1, 1)
        );
        ledger.settle(draw, late);
        assert_eq!(ledger.outstanding(Extra::Hedge), 0);
    }

    #[test]
    fn rejects_each_bad_field_by_name() {
        let field = |c| HedgePolicy::new(c).unwrap_err().field;
        let q = |f: fn(&mut QuantileDelay)| {
            let mut d = QuantileDelay::p95();
            f(&mut d);
            HedgeConfig {
                delay: HedgeDelay::Quantile(d),
                max_hedges: 1,
            }
        };
        assert_eq!(
            field(HedgeConfig {
                max_hedges: 0,
                ..HedgeConfig::p95()
            }),
            "max_hedges"
        );
        assert_eq!(
            field(HedgeConfig {
                delay: HedgeDelay::Fixed(Duration::ZERO),
                max_hedges: 1
            }),
            "delay"
        );
        assert_eq!(field(q(|d| d.quantile = 0.0)), "delay.quantile");
        assert_eq!(field(q(|d| d.quantile = 1e-9)), "delay.quantile");
        assert_eq!(field(q(|d| d.quantile = f64::NAN)), "delay.quantile");
        assert_eq!(field(q(|d| d.window = 1)), "delay.window");
        assert_eq!(field(q(|d| d.window = 70_000)), "delay.window");
        assert_eq!(field(q(|d| d.min_samples = 0)), "delay.min_samples");
        assert_eq!(field(q(|d| d.min_samples = 501)), "delay.min_samples");
        assert_eq!(field(q(|d| d.max = Duration::ZERO)), "delay.max");
        assert_eq!(field(q(|d| d.min = Duration::from_secs(11))), "delay.max");
        HedgePolicy::new(q(|d| {
            d.quantile = 1.0;
            d.window = 2;
            d.min_samples = 1;
            d.min = Duration::ZERO;
            d.max = Duration::MAX;
        }))
        .unwrap();
        assert_eq!(QuantileDelay::default(), QuantileDelay::p95());
    }
}

//! The spend breaker: ceilings on tokens and money for calls to an LLM provider, enforced before
//! each call.
//!
//! An LLM call costs money in proportion to its tokens, and an agent in a loop (or a fleet of them
//! retrying through an incident) can spend a month's budget in an afternoon. A [`SpendBreaker`]
//! holds ceilings on tokens and on cost (integer micro-units of money, so sums are exact) over
//! sliding windows of a minute, a day and 30 days, and answers every call before it is made:
//!
//! 1. **Reserve** the worst case before the call: input tokens plus `max_tokens` of output
//!    ([`SpendBreaker::reserve`]). It fits under every ceiling (and under the quota the provider
//!    last reported) or it is refused with a reason and a `retry_after`.
//! 2. **Settle** after the call with the usage the provider reports ([`SpendBreaker::settle`]): the
//!    unused part of the estimate is refunded, an overrun is charged. A cancelled call settles to
//!    what the provider reported, or to the whole estimate when nothing came back
//!    ([`SpendBreaker::cancel`]): the tokens may have been billed.
//!
//! It is in one of three states ([`SpendState`]):
//!
//! - **admitting**: every ceiling and quota has more than `throttle_below` of itself left;
//! - **throttling**: something is nearly spent; the breaker admits only what fits and tells each
//!   refused call when it will fit (when enough usage leaves the window, or the provider's quota
//!   resets). Provider quotas ([`SpendBreaker::observe`], from `x-ratelimit-remaining-*`
//!   headers) count too, so a client slows down *before* the provider answers 429;
//! - **open**: the provider reported a money limit ([`SpendBreaker::money_signal`]): nothing is
//!   admitted until the reset instant, because retrying a spent budget costs round trips and
//!   fixes nothing.
//!
//! State changes come back as [`Transition`] values, as with the circuit breaker. Time is an input
//! (a `now` earlier than the latest seen counts as the latest); nothing allocates or panics.
//!
//! Usage leaves a window a bucket at a time (`buckets` per ceiling, at most the const generic of
//! that window: `M` for the minute, `D` for the day, `MO` for the month). A refund goes back into
//! the bucket its reservation was charged to, if that bucket is still in the window (usage that has
//! already left has nothing to refund); an overrun is charged now.
//!
//! The breaker holds state only and borrows its [`SpendPolicy`]: with the default 6 + 24 + 30
//! buckets it is 1,240 bytes on 64-bit targets, 328 bytes with one bucket per window
//! (`cargo run -p reliable-core --example sizes`).
//!
//! ```
//! use reliable_core::spend::{Ceiling, Price, RefuseReason, Span, SpendBreaker, SpendConfig, SpendPolicy, SpendState, Tokens};
//! use reliable_core::{Duration, Instant};
//!
//! let policy = SpendPolicy::new(SpendConfig {
//!     price: Price::per_million_tokens(3_000_000, 15_000_000), // $3 / $15 per Mtok
//!     minute: Some(Ceiling::tokens(10_000)),
//!     throttle_below: 0.2,
//!     ..SpendConfig::new()
//! })?;
//! let mut spend: SpendBreaker<&SpendPolicy> = SpendBreaker::new(&policy)?;
//! let now = Instant::from_secs(5);
//!
//! // 2,000 tokens in, up to 4,000 out: 6,000 reserved.
//! let call = spend.reserve(now, Tokens { input: 2_000, output: 4_000 }).unwrap();
//! // Another such call would pass the minute's ceiling.
//! let refused = spend.reserve(now, Tokens { input: 2_000, output: 4_000 }).unwrap_err();
//! assert!(matches!(refused.reason, RefuseReason::Ceiling { span: Span::Minute, .. }));
//! assert_eq!(refused.retry_after, Duration::from_secs(55)); // when the first call's bucket leaves
//!
//! // It used 500 output tokens: 3,500 are refunded, and the second call fits now.
//! let settled = spend.settle(now, call, Tokens { input: 2_000, output: 500 });
//! assert_eq!(settled.charged.cost, 13_500); // micro-dollars
//! assert!(spend.reserve(now, Tokens { input: 2_000, output: 4_000 }).is_ok());
//! assert_eq!(spend.state(now), SpendState::Throttling); // 1,500 of 10,000 left: below 20%
//! # Ok::<(), reliable_core::ConfigError>(())
//! ```

mod config;
mod window;

pub use config::{Ceiling, Price, Span, SpendConfig, SpendPolicy};
pub use window::{Amount, Metric};

use window::{Limits, SpendWindow};

use core::borrow::Borrow;

use crate::error::{ConfigError, Problem};
use crate::provider::{QuotaKind, QuotaUpdate};
use crate::time::{Duration, Instant};

/// The state of a spend breaker.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "kebab-case"))]
pub enum SpendState {
    /// Every ceiling and provider quota has more than the threshold left.
    Admitting,
    /// Some ceiling or quota is nearly spent: only what fits is admitted.
    Throttling,
    /// A money limit was reported: nothing is admitted until it resets.
    Open,
}

impl SpendState {
    /// `admitting`, `throttling` or `open`.
    pub const fn name(self) -> &'static str {
        match self {
            SpendState::Admitting => "admitting",
            SpendState::Throttling => "throttling",
            SpendState::Open => "open",
        }
    }
}

impl core::fmt::Display for SpendState {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

/// A state change of a spend breaker, returned as a value to log or export.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Transition {
    /// The state before.
    pub from: SpendState,
    /// The state after.
    pub to: SpendState,
    /// The `now` of the call that caused it.
    pub at: Instant,
}

/// Tokens of one call: input (the prompt) and output (generated; `max_tokens` in an estimate).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Tokens {
    /// Input tokens.
    pub input: u64,
    /// Output tokens.
    pub output: u64,
}

impl Tokens {
    /// Input plus output, saturating.
    pub const fn total(self) -> u64 {
        self.input.saturating_add(self.output)
    }
}

/// Room held for one call. Hand it back to [`SpendBreaker::settle`] or [`SpendBreaker::cancel`].
#[must_use = "a reservation holds room under the ceilings until it is settled or cancelled"]
#[derive(Debug, PartialEq, Eq)]
pub struct Reservation {
    at: Instant,
    estimate: Tokens,
    amount: Amount,
    transition: Option<Transition>,
}

impl Reservation {
    /// When it was made (the bucket a refund goes back to).
    pub fn at(&self) -> Instant {
        self.at
    }
    /// The tokens reserved.
    pub fn estimate(&self) -> Tokens {
        self.estimate
    }
    /// The tokens and cost reserved.
    pub fn amount(&self) -> Amount {
        self.amount
    }
    /// The state change that reserving caused, if any.
    pub fn transition(&self) -> Option<Transition> {
        self.transition
    }
}

/// Why a call was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RefuseReason {
    /// Open after a money signal from the provider: never retried before the reset.
    MoneyLimit,
    /// The call would pass this ceiling now; it fits after `retry_after`.
    Ceiling {
        /// Which window.
        span: Span,
        /// Tokens or cost.
        metric: Metric,
    },
    /// The call alone is larger than this ceiling: it never fits (`retry_after` is
    /// [`Duration::MAX`]).
    TooLarge {
        /// Which window.
        span: Span,
        /// Tokens or cost.
        metric: Metric,
    },
    /// The provider reported less of this quota left than the call needs; it resets after
    /// `retry_after`.
    ProviderQuota(QuotaKind),
}

/// A refused call: why, when to try again, and the state change deciding it caused, if any.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Refusal {
    /// Why.
    pub reason: RefuseReason,
    /// How long until the same call would be admitted, if nothing else is spent meanwhile
    /// ([`Duration::MAX`]: never).
    pub retry_after: Duration,
    /// The state change this call caused, if any.
    pub transition: Option<Transition>,
}

/// What settling a reservation charged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Settlement {
    /// The call's final tokens and cost.
    pub charged: Amount,
    /// The state change settling caused, if any.
    pub transition: Option<Transition>,
}

/// The last quota a provider reported for one [`QuotaKind`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Quota {
    /// `None`: the provider did not say.
    limit: Option<u64>,
    remaining: u64,
    reset: Instant,
}

const NO_QUOTA: Quota = Quota {
    limit: None,
    remaining: 0,
    reset: Instant::ZERO,
};

/// A spend breaker: its state and its [`SpendPolicy`], owned or borrowed.
///
/// `R` holds the policy, as for the circuit breakers: the policy itself (the default: the breaker
/// is `'static`), a `&SpendPolicy` (many breakers share one), or any other `Borrow<SpendPolicy>`
/// such as an `Arc`. `M`, `D` and `MO` are the bucket capacities of the minute, day and month windows (each ceiling's
/// `buckets` must fit; checked by [`SpendBreaker::new`]).
#[derive(Clone, Debug)]
pub struct SpendBreaker<
    R = SpendPolicy,
    const M: usize = 6,
    const D: usize = 24,
    const MO: usize = 30,
> {
    policy: R,
    minute: SpendWindow<M>,
    day: SpendWindow<D>,
    month: SpendWindow<MO>,
    quotas: [Quota; 4],
    latest: Instant,
    /// Open until this instant after a money signal; `Instant::ZERO` when not open.
    open_until: Instant,
    state: SpendState,
}

impl<R: Borrow<SpendPolicy>, const M: usize, const D: usize, const MO: usize>
    SpendBreaker<R, M, D, MO>
{
    /// An admitting breaker with nothing spent. Fails if a ceiling has more buckets than its
    /// window's const generic.
    pub fn new(policy: R) -> Result<Self, ConfigError> {
        let rules = policy.borrow();
        let (minute, day, month) = (
            window(rules, Span::Minute, "minute.buckets")?,
            window(rules, Span::Day, "day.buckets")?,
            window(rules, Span::Month, "month.buckets")?,
        );
        Ok(SpendBreaker {
            policy,
            minute,
            day,
            month,
            quotas: [NO_QUOTA; 4],
            latest: Instant::ZERO,
            open_until: Instant::ZERO,
            state: SpendState::Admitting,
        })
    }

    /// The policy this breaker follows.
    pub fn policy(&self) -> &SpendPolicy {
        self.policy.borrow()
    }

    /// The state as of `now`.
    pub fn state(&self, now: Instant) -> SpendState {
        let now = now.max(self.latest);
        if now < self.open_until {
            SpendState::Open
        } else if self.is_low(now) {
            SpendState::Throttling
        } else {
            SpendState::Admitting
        }
    }

    /// When an open breaker admits again (`None` when it is not open as of `now`).
    pub fn open_until(&self, now: Instant) -> Option<Instant> {
        (now.max(self.latest) < self.open_until).then_some(self.open_until)
    }

    /// Tokens and cost in the `span` window as of `now` (zero for a span without a ceiling: it is
    /// not kept).
    pub fn usage(&self, now: Instant, span: Span) -> Amount {
        let now = now.max(self.latest);
        match span {
            Span::Minute => self.minute.totals_at(now),
            Span::Day => self.day.totals_at(now),
            Span::Month => self.month.totals_at(now),
        }
    }

    /// Reserves room for a call of `estimate` tokens (input + `max_tokens`), or says why not and
    /// when it would fit.
    pub fn reserve(&mut self, now: Instant, estimate: Tokens) -> Result<Reservation, Refusal> {
        let now = self.advance(now);
        let amount = Amount {
            tokens: estimate.total(),
            cost: self.policy().cost(estimate.input, estimate.output),
        };
        if let Some((reason, retry_after)) = self.refusal(now, estimate, amount) {
            return Err(Refusal {
                reason,
                retry_after,
                transition: self.update_state(now),
            });
        }
        self.minute.add(amount);
        self.day.add(amount);
        self.month.add(amount);
        for kind in QuotaKind::ALL {
            if let Some(q) = self.quotas.get_mut(kind.index()) {
                q.remaining = q.remaining.saturating_sub(need(kind, estimate));
            }
        }
        Ok(Reservation {
            at: now,
            estimate,
            amount,
            transition: self.update_state(now),
        })
    }

    /// Settles a call with the tokens the provider reported: refunds what the estimate held beyond
    /// them, charges any overrun now.
    pub fn settle(&mut self, now: Instant, reservation: Reservation, actual: Tokens) -> Settlement {
        let now = self.advance(now);
        let held = reservation.amount;
        let charged = Amount {
            tokens: actual.total(),
            cost: self.policy().cost(actual.input, actual.output),
        };
        let (refund, extra) = (held.minus(charged), charged.minus(held));
        self.minute.refund(reservation.at, refund);
        self.day.refund(reservation.at, refund);
        self.month.refund(reservation.at, refund);
        self.minute.add(extra);
        self.day.add(extra);
        self.month.add(extra);
        Settlement {
            charged,
            transition: self.update_state(now),
        }
    }

    /// Settles a call that was cancelled or lost: to the usage the provider `reported`, or to the
    /// whole estimate when nothing came back (the provider may have billed it).
    pub fn cancel(
        &mut self,
        now: Instant,
        reservation: Reservation,
        reported: Option<Tokens>,
    ) -> Settlement {
        let actual = reported.unwrap_or(reservation.estimate);
        self.settle(now, reservation, actual)
    }

    /// Takes in a provider's report of a rate limit (from response headers); the latest report of
    /// each kind wins. Calls that need more than is left wait for its reset. A report whose reset has
    /// already passed forgets that kind.
    pub fn observe(&mut self, now: Instant, update: QuotaUpdate) -> Option<Transition> {
        let now = self.advance(now);
        if let Some(q) = self.quotas.get_mut(update.kind.index()) {
            *q = if update.reset > now {
                Quota {
                    limit: update.limit,
                    remaining: update.remaining,
                    reset: update.reset,
                }
            } else {
                NO_QUOTA
            };
        }
        self.update_state(now)
    }

    /// The provider reported a money limit: open until `reset_after` from now (the policy's
    /// `money_open` when the provider gave none). An open breaker is never shortened by a later
    /// signal; [`reset`](Self::reset) closes it by hand.
    pub fn money_signal(
        &mut self,
        now: Instant,
        reset_after: Option<Duration>,
    ) -> Option<Transition> {
        let now = self.advance(now);
        let until = now + reset_after.unwrap_or(self.policy().config().money_open);
        self.open_until = self.open_until.max(until);
        self.update_state(now)
    }

    /// Closes an open breaker by hand (the budget was raised); usage is kept.
    pub fn reset(&mut self, now: Instant) -> Option<Transition> {
        let now = self.advance(now);
        self.open_until = Instant::ZERO;
        self.update_state(now)
    }

    fn advance(&mut self, now: Instant) -> Instant {
        let now = now.max(self.latest);
        self.latest = now;
        self.minute.advance(now);
        self.day.advance(now);
        self.month.advance(now);
        for q in &mut self.quotas {
            if q.reset <= now {
                *q = NO_QUOTA;
            }
        }
        now
    }

    fn update_state(&mut self, now: Instant) -> Option<Transition> {
        let to = self.state(now);
        let from = core::mem::replace(&mut self.state, to);
        (from != to).then_some(Transition { from, to, at: now })
    }

    /// Why `estimate` cannot be admitted now, and when it could be; `None` if it can. A call that
    /// never fits wins over one that must wait; among waits the longest (the first in span and
    /// quota order on a tie).
    fn refusal(
        &self,
        now: Instant,
        estimate: Tokens,
        amount: Amount,
    ) -> Option<(RefuseReason, Duration)> {
        if now < self.open_until {
            return Some((RefuseReason::MoneyLimit, self.open_until - now));
        }
        let mut worst: Option<(RefuseReason, Duration)> = None;
        let mut consider = |reason: RefuseReason, wait: Duration| {
            if worst.is_none_or(|(_, w)| wait > w) {
                worst = Some((reason, wait));
            }
        };
        let waits = [
            (
                Span::Minute,
                self.minute.wait(now, amount, self.limits(Span::Minute)),
            ),
            (
                Span::Day,
                self.day.wait(now, amount, self.limits(Span::Day)),
            ),
            (
                Span::Month,
                self.month.wait(now, amount, self.limits(Span::Month)),
            ),
        ];
        for (span, wait) in waits {
            if let Some((metric, wait)) = wait {
                let reason = if wait == Duration::MAX {
                    RefuseReason::TooLarge { span, metric }
                } else {
                    RefuseReason::Ceiling { span, metric }
                };
                consider(reason, wait);
            }
        }
        for kind in QuotaKind::ALL {
            if let Some(q) = self.quotas.get(kind.index())
                && q.reset > now
                && need(kind, estimate) > q.remaining
            {
                consider(RefuseReason::ProviderQuota(kind), q.reset - now);
            }
        }
        worst
    }

    fn limits(&self, span: Span) -> Limits {
        let c = self.policy().ceiling(span);
        Limits {
            tokens: c.and_then(|c| c.tokens),
            cost: c.and_then(|c| c.cost),
        }
    }

    /// Whether any ceiling or live provider quota has less than the threshold left.
    fn is_low(&self, now: Instant) -> bool {
        let used = [
            self.minute.totals_at(now),
            self.day.totals_at(now),
            self.month.totals_at(now),
        ];
        let ceilings = Span::ALL.into_iter().zip(used).any(|(span, used)| {
            let l = self.limits(span);
            let low = |limit: Option<u64>, used: u64| {
                limit.is_some_and(|limit| self.policy().is_low(limit.saturating_sub(used), limit))
            };
            low(l.tokens, used.tokens) || low(l.cost, used.cost)
        });
        ceilings
            || self.quotas.iter().any(|q| {
                q.reset > now
                    && match q.limit {
                        Some(limit) => self.policy().is_low(q.remaining, limit),
                        None => q.remaining == 0,
                    }
            })
    }
}

/// What a call of `estimate` takes from a provider quota of `kind`.
fn need(kind: QuotaKind, estimate: Tokens) -> u64 {
    match kind {
        QuotaKind::Requests => 1,
        QuotaKind::Tokens => estimate.total(),
        QuotaKind::InputTokens => estimate.input,
        QuotaKind::OutputTokens => estimate.output,
    }
}

fn window<const N: usize>(
    policy: &SpendPolicy,
    span: Span,
    field: &'static str,
) -> Result<SpendWindow<N>, ConfigError> {
    let Some(c) = policy.ceiling(span) else {
        return Ok(SpendWindow::off());
    };
    if c.buckets as usize > N {
        return Err(ConfigError::new(
            field,
            Problem::ExceedsCapacity {
                requested: u64::from(c.buckets),
                capacity: N as u64,
            },
        ));
    }
    Ok(SpendWindow::new(span.length(), c.buckets))
}

#[cfg(test)]
mod tests;

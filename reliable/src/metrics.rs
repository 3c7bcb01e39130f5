//! Metrics through the [`metrics`] 0.24 facade (feature `metrics`): add them with
//! [`Builder::metrics`](crate::Builder::metrics); they go to whatever recorder the application
//! installed (Prometheus, StatsD, …), and cost a no-op call without one.
//!
//! | series | kind | labels |
//! |---|---|---|
//! | `reliable_calls_total` | counter | `name`, `outcome` (`success`, `open`, `rejected`, `timeout`, `gave-up`, `cancelled`) |
//! | `reliable_breaker_transitions_total` | counter | `name`, `from`, `to` (`closed`, `open`, `half-open`, `forced-open`, `disabled`) |
//! | `reliable_breaker_state` | gauge | `name`; 0 closed, 1 open, 2 half-open, 3 forced open, 4 disabled |
//! | `reliable_breaker_shadow` | gauge | `name`; 1 when the breaker runs in shadow mode (its transitions are would-be ones), else 0 |
//! | `reliable_breaker_would_reject_total` | counter | `name`, `reason` (`open`, `half-open-full`, `forced-open`, `slow-start`): calls shadow mode let through |
//! | `reliable_call_attempts` | histogram | `name` |
//! | `reliable_call_duration_seconds` | histogram | `name` |
//! | `reliable_rejections_total` | counter | `name`, `reason` (`open`, `half-open-full`, `slow-start`, `throttled`, `budget`, `ledger`, `limit`, `rate-limited`): calls and retries refused locally |
//! | `reliable_hedges_total` | counter | `name`, `result` (`sent`, `won`, `refused`): hedges sent, calls a hedge won, hedges due but refused (ledger, limit, breaker) |
//! | `reliable_attempts_cancelled_total` | counter | `name`: losing copies of a hedged attempt dropped |
//! | `reliable_ledger_total` | counter | `name`, `kind` (`retry`, `hedge`, `probe`), `result` (`drawn`, `denied`): the ledger of extra attempts |
//! | `reliable_concurrency_limit` | gauge | `name`: the concurrency limit after each move |
//! | `reliable_chaos_injections_total` | counter | `name`, `strategy` (`fault`, `latency`, `outcome`, `behavior`), `event` (Polly's name: `Chaos.OnFault`, ...): injections by a chaos layer |
//!
//! Labels stay low-cardinality: the instance's name (one per downstream), never a URL or a
//! prompt. Durations are measured on the instance's clock.

use crate::observer::{CallEnd, NotSent, Observer};
use metrics::{SharedString, counter, gauge, histogram};
use reliable_core::breaker::{RejectReason, State, Transition};
use reliable_core::ledger::Extra;
use std::sync::Arc;

/// The gauge value of a state.
pub fn state_code(state: State) -> f64 {
    match state {
        State::Closed => 0.0,
        State::Open => 1.0,
        State::HalfOpen => 2.0,
        State::ForcedOpen => 3.0,
        State::Disabled => 4.0,
    }
}

fn reason_name(reason: RejectReason) -> &'static str {
    match reason {
        RejectReason::Open { .. } => "open",
        RejectReason::HalfOpenFull => "half-open-full",
        RejectReason::ForcedOpen => "forced-open",
        RejectReason::SlowStart => "slow-start",
    }
}

/// The observer [`Builder::metrics`](crate::Builder::metrics) adds.
#[derive(Debug)]
pub(crate) struct Metrics {
    name: SharedString,
}

impl Metrics {
    /// Also publishes the breaker's initial state (and whether it runs in shadow mode, when
    /// `breaker` is `Some(shadow)`), so the gauges exist from the start.
    pub fn new(name: &Arc<str>, breaker: Option<bool>) -> Self {
        let name = SharedString::from(name.clone());
        if let Some(shadow) = breaker {
            gauge!("reliable_breaker_state", "name" => name.clone()).set(state_code(State::Closed));
            gauge!("reliable_breaker_shadow", "name" => name.clone())
                .set(f64::from(u8::from(shadow)));
        }
        Metrics { name }
    }
}

impl Observer for Metrics {
    fn on_transition(&self, _: &str, t: Transition) {
        let name = self.name.clone();
        counter!("reliable_breaker_transitions_total", "name" => name.clone(), "from" => t.from.name(), "to" => t.to.name())
            .increment(1);
        gauge!("reliable_breaker_state", "name" => name).set(state_code(t.to));
    }

    fn on_would_reject(&self, _: &str, reason: RejectReason) {
        counter!("reliable_breaker_would_reject_total", "name" => self.name.clone(), "reason" => reason_name(reason))
            .increment(1);
    }

    fn on_reject(&self, _: &str, refusal: NotSent) {
        let reason = match refusal {
            NotSent::Open { .. } => "open",
            NotSent::Rejected(why) => why.name(),
        };
        counter!("reliable_rejections_total", "name" => self.name.clone(), "reason" => reason)
            .increment(1);
    }

    fn on_hedge(&self, _: &str, _: u32) {
        counter!("reliable_hedges_total", "name" => self.name.clone(), "result" => "sent")
            .increment(1);
    }

    fn on_hedge_refused(&self, _: &str, _: NotSent) {
        counter!("reliable_hedges_total", "name" => self.name.clone(), "result" => "refused")
            .increment(1);
    }

    fn on_hedge_won(&self, _: &str, _: u32, hedge: bool) {
        if hedge {
            counter!("reliable_hedges_total", "name" => self.name.clone(), "result" => "won")
                .increment(1);
        }
    }

    fn on_attempt_cancelled(&self, _: &str, _: u32) {
        counter!("reliable_attempts_cancelled_total", "name" => self.name.clone()).increment(1);
    }

    fn on_ledger(&self, _: &str, kind: Extra, granted: bool) {
        let result = if granted { "drawn" } else { "denied" };
        counter!("reliable_ledger_total", "name" => self.name.clone(), "kind" => kind.name(), "result" => result)
            .increment(1);
    }

    fn on_limit_change(&self, _: &str, _: u32, to: u32) {
        gauge!("reliable_concurrency_limit", "name" => self.name.clone()).set(f64::from(to));
    }

    fn on_chaos(&self, _: &str, event: &crate::chaos::ChaosEvent) {
        let s = event.strategy;
        counter!("reliable_chaos_injections_total", "name" => self.name.clone(), "strategy" => s.name(), "event" => s.event())
            .increment(1);
    }

    fn on_call_end(&self, _: &str, end: &CallEnd) {
        let name = self.name.clone();
        counter!("reliable_calls_total", "name" => name.clone(), "outcome" => end.outcome.name())
            .increment(1);
        histogram!("reliable_call_attempts", "name" => name.clone())
            .record(f64::from(end.attempts));
        histogram!("reliable_call_duration_seconds", "name" => name)
            .record(end.elapsed.as_secs_f64());
    }
}

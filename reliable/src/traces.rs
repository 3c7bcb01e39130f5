//! `tracing` spans and events (feature `tracing`).
//!
//! Every call, async or blocking, runs in a span; [`Builder::tracing`](crate::Builder::tracing)
//! adds the events (an observer: without it, a successful call stays as cheap as without the
//! feature). All carry the target `reliable`:
//!
//! | name | kind, level | fields | when |
//! |---|---|---|---|
//! | `reliable.call` | span, INFO | `name` (the instance) | around each call |
//! | `attempt` | event, DEBUG | `name`, `attempt` (1 for the first try) | an attempt is sent |
//! | `retry` | event, INFO | `name`, `attempt` (the one that failed), `class`, `delay_ms` | a retry is scheduled |
//! | `refused` | event, WARN | `name`, `refusal` | a call or retry refused locally (breaker open, probes full, throttle, budget, ledger, limits) |
//! | `transition` | event, WARN | `name`, `from`, `to` | the breaker changed state |
//! | `gave up` | event, WARN | `name`, `attempts`, `reason` | no retry followed a failure |
//! | `call end` | event, DEBUG | `name`, `outcome`, `attempts`, `elapsed_ms` | a call is over |
//! | `hedge` | event, DEBUG | `name`, `attempt` | a hedge is sent as that attempt |
//! | `hedge refused` | event, DEBUG | `name`, `refusal` | a hedge was due and refused (ledger, limit, breaker) |
//! | `hedge race won` | event, DEBUG | `name`, `attempt`, `hedge` (whether the winner is a hedge) | a hedged attempt succeeded |
//! | `attempt cancelled` | event, DEBUG | `name`, `attempt` | a losing copy was dropped |
//! | `limit` | event, INFO | `name`, `from`, `to` | the concurrency limit moved |
//! | `Chaos.OnFault`, `Chaos.OnLatency`, `Chaos.OnOutcome`, `Chaos.OnBehavior` | event, INFO | `name`, `attempt`, `delay_ms` (latency), `answer` (fault, outcome) | a chaos layer injected something ([`crate::chaos`]) |
//!
//! The event's message is its name, so `RUST_LOG=reliable=info` with `tracing-subscriber` shows
//! retries, refusals and transitions.

use crate::observer::{CallEnd, NotSent, Observer};
use reliable_core::breaker::Transition;
use reliable_core::outcome::ErrorClass;
use std::time::Duration;

/// The span a call runs in.
pub(crate) fn call_span(name: &str) -> tracing::Span {
    tracing::info_span!(target: "reliable", "reliable.call", name)
}

/// The observer that emits the events above; added by
/// [`Builder::tracing`](crate::Builder::tracing).
#[derive(Clone, Copy, Debug, Default)]
pub struct TracingObserver;

impl Observer for TracingObserver {
    fn on_attempt(&self, name: &str, attempt: u32) {
        tracing::debug!(target: "reliable", name, attempt, "attempt");
    }

    fn on_retry(&self, name: &str, attempt: u32, class: ErrorClass, delay: Duration) {
        let delay_ms = delay.as_millis() as u64;
        tracing::info!(target: "reliable", name, attempt, class = ?class, delay_ms, "retry");
    }

    fn on_reject(&self, name: &str, refusal: NotSent) {
        tracing::warn!(target: "reliable", name, refusal = ?refusal, "refused");
    }

    fn on_transition(&self, name: &str, transition: Transition) {
        let (from, to) = (transition.from.name(), transition.to.name());
        tracing::warn!(target: "reliable", name, from, to, "transition");
    }

    fn on_give_up(&self, name: &str, attempts: u32, reason: &'static str) {
        tracing::warn!(target: "reliable", name, attempts, reason, "gave up");
    }

    fn on_call_end(&self, name: &str, end: &CallEnd) {
        let elapsed_ms = end.elapsed.as_millis() as u64;
        let (outcome, attempts) = (end.outcome.name(), end.attempts);
        tracing::debug!(target: "reliable", name, outcome, attempts, elapsed_ms, "call end");
    }

    fn on_hedge(&self, name: &str, attempt: u32) {
        tracing::debug!(target: "reliable", name, attempt, "hedge");
    }

    fn on_hedge_refused(&self, name: &str, refusal: NotSent) {
        tracing::debug!(target: "reliable", name, refusal = ?refusal, "hedge refused");
    }

    fn on_hedge_won(&self, name: &str, attempt: u32, hedge: bool) {
        tracing::debug!(target: "reliable", name, attempt, hedge, "hedge race won");
    }

    fn on_attempt_cancelled(&self, name: &str, attempt: u32) {
        tracing::debug!(target: "reliable", name, attempt, "attempt cancelled");
    }

    fn on_limit_change(&self, name: &str, from: u32, to: u32) {
        tracing::info!(target: "reliable", name, from, to, "limit");
    }

    fn on_chaos(&self, name: &str, event: &crate::chaos::ChaosEvent) {
        let attempt = event.attempt;
        let delay_ms = event.delay.map(|d| d.as_millis() as u64);
        let answer = event.answer.map(tracing::field::debug);
        tracing::info!(target: "reliable", name, attempt, delay_ms, answer, "{}", event.strategy.event());
    }
}

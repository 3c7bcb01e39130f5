//! The simulator's face: a sequence becomes a one-downstream scenario (the policy block as a stack
//! of the simulator's own layers, `Ledger(Retry(Throttle(Breaker(Limit(RateLimit(Hedge(Call)))))))`
//! without the layers the block leaves out, in the order `Reliable` applies them, and a `Scripted`
//! downstream playing the answers), loaded like any scenario file and run by the simulator's
//! world one call after another ([`sim::run::run_calls`]); its recorded decisions are written as
//! the trace.
//!
//! The runner only *parses*: a status's headers become the signals of a scripted `Status`
//! answer (with the same header parser the `reliable` faces use); what an answer means is the
//! core's table, which the simulator's stack applies.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use reliable::ShedReason;
use reliable::http::HeaderSignals;
use reliable::observer::{NotSent, Observer};
use reliable_core::Duration;
use reliable_core::answer::Refuser;
use reliable_core::budget::Denied;
use sim::run::Decision;

use crate::{Scripted, Sequence, Trace};

/// A duration as the simulator's scenario files write it.
fn ron_duration(ms: u64) -> String {
    format!("\"{}\"", Duration::from_millis(ms))
}

/// One scripted answer in the simulator's words.
fn ron_answer(a: &Scripted) -> String {
    match a {
        Scripted::Status(status, headers) => {
            let s = HeaderSignals::from_headers(&headers[..], SystemTime::now());
            let delay = s.retry_after.map_or("None".to_string(), |d| {
                format!("Some(\"{}\")", Duration::from_nanos(d.as_nanos() as u64))
            });
            let should = s
                .should_retry
                .map_or("None".to_string(), |b| format!("Some({b})"));
            format!("Status(status: {status}, retry_after: {delay}, should_retry: {should})")
        }
        Scripted::Reset => "Reset".into(),
        Scripted::Hang => "Hang".into(),
    }
}

/// A core config in RON, written with the extensions the simulator reads scenarios with.
fn ron<T: serde::Serialize>(what: &str, value: &T) -> Result<String, String> {
    use ron::extensions::Extensions;
    ron::Options::default()
        .with_default_extension(Extensions::IMPLICIT_SOME | Extensions::UNWRAP_VARIANT_NEWTYPES)
        .to_string(value)
        .map_err(|e| format!("{what}: {e}"))
}

/// The config of layer `name`, which the block nests and so sets.
pub(crate) fn set<T>(config: Option<T>, name: &str) -> Result<T, String> {
    config.ok_or_else(|| format!("nesting: {name:?} is not set in the policy block"))
}

/// The sequence as a scenario: its text, and where each call's answers start in the script.
pub fn scenario(s: &Sequence) -> Result<(String, Vec<(u64, u64)>), String> {
    let mut script = Vec::new();
    let mut latencies = Vec::new();
    let mut calls = Vec::new();
    for (i, call) in s.calls.iter().enumerate() {
        calls.push((call.start_ms * 1_000_000, script.len() as u64));
        for a in &call.answers {
            let kind = a.kind().map_err(|e| format!("call {i}: {e}"))?;
            script.push(ron_answer(&kind));
            latencies.push(ron_duration(a.latency_ms));
        }
    }
    let call = match s.policy.copy_timeout() {
        Some(t) => format!("Call(downstream: \"scripted\", timeout: \"{t}\")"),
        None => "Call(downstream: \"scripted\")".to_string(),
    };
    let p = &s.policy;
    let mut stack = match p.hedge() {
        Some(h) => format!(
            "Hedge(config: {}, idempotent: {}, inner: {call})",
            ron("hedge", &h)?,
            p.idempotent
        ),
        None => call,
    };
    // The layers as the block nests them (by default the order `Reliable` applies them in); a
    // ledger is the retry budget, outside the retry, so each call's first try deposits once.
    for name in p.order().into_iter().rev() {
        stack = match name {
            "ledger" => format!(
                "Ledger(config: {}, inner: {stack})",
                ron("ledger", &set(p.ledger(), name)?)?
            ),
            "retry" => {
                let budget = match p.budget() {
                    Some(b) => format!("Some({})", ron("budget", &b)?),
                    None => "None".into(),
                };
                format!(
                    "Retry(policy: {}, budget: {budget}, inner: {stack})",
                    ron("retry", &p.retry())?
                )
            }
            "throttle" => format!(
                "Throttle(config: {}, inner: {stack})",
                ron("throttle", &set(p.throttle().map(|t| t.0), name)?)?
            ),
            "breaker" => format!(
                "Breaker(config: {}, inner: {stack})",
                ron("breaker", &set(p.breaker(), name)?)?
            ),
            "limit" => format!(
                "Limit(config: {}, inner: {stack})",
                ron("limit", &set(p.limit(), name)?)?
            ),
            _ => format!(
                "RateLimit(config: {}, inner: {stack})",
                ron("rate_limit", &set(p.rate_limit(), name)?)?
            ),
        };
    }
    // Long enough for any sequence: the calls, each bounded by its attempts and waits.
    let horizon = "\"8000h\"";
    // Work that cannot be interrupted: a blocking client, waiting on each answer.
    let interruptible = !p.uninterruptible;
    let text = format!(
        "Scenario(name: \"{name}\", horizon: {horizon}, bucket: \"1h\", workload: JobSet(clients: 1), interruptible: {interruptible},\n\
         downstreams: [(name: \"scripted\", model: Scripted(script: [{script}], then: Hang, latencies: [{latencies}]))],\n\
         policies: [(name: \"conformance\", stack: {stack})])\n",
        name = s.name,
        script = script.join(", "),
        latencies = latencies.join(", "),
    );
    Ok((text, calls))
}

/// Runs a sequence through the simulator's client stack; its trace.
pub fn run(s: &Sequence) -> Result<String, String> {
    let (text, calls) = scenario(s)?;
    let compiled = sim::load(&text, &format!("{}.ron", s.name)).map_err(|e| e.to_string())?;
    let draws = s.policy.throttle().map(|(_, d)| d).unwrap_or_default();
    let decisions = sim::run::run_calls(&compiled, 0, 1, &calls, draws.samples())
        .map_err(|e| format!("{}: {e}", s.name))?;
    let now = Arc::new(AtomicU64::new(0));
    let clock = now.clone();
    let trace = Trace::new(Arc::new(move || clock.load(Ordering::SeqCst)));
    let rec = trace.observer();
    let mut call = 0;
    trace.start_call(0);
    for (t, d) in decisions {
        // At the next whole millisecond, as a millisecond timer (tokio's) acts on an instant
        // between two: a quantile hedge delay is rarely a whole number of milliseconds.
        now.store(t.div_ceil(1_000_000), Ordering::SeqCst);
        match d {
            Decision::Attempt => {
                if trace.attempt() as usize > s.calls[call].answers.len() {
                    return Err(format!("{}: call {call}: script exhausted", s.name));
                }
            }
            Decision::Answer { n, class, accepted } => trace.answer(n, class, accepted),
            Decision::Breaker(t) => rec.on_transition("", t),
            Decision::Refused(by) => rec.on_reject("", refusal(by)),
            Decision::Hedge => rec.on_hedge("", trace.attempts() + 1),
            Decision::NoHedge(by) => rec.on_hedge_refused("", refusal(by)),
            Decision::Cancelled(n) => rec.on_attempt_cancelled("", n),
            Decision::Limit { from, to } => rec.on_limit_change("", from, to),
            Decision::Retry(delay) => rec.on_retry(
                "",
                trace.attempts(),
                reliable_core::outcome::ErrorClass::Transient,
                std::time::Duration::from_nanos(delay.as_nanos()),
            ),
            Decision::GiveUp(reason) => rec.on_give_up("", trace.attempts(), reason),
            Decision::End { ok } => {
                trace.end(ok);
                call += 1;
                trace.start_call(call);
            }
        }
    }
    Ok(trace.text())
}

/// The `reliable` refusal a trace names like the simulator's refuser. The simulator's only local
/// refusal by a budget is its ledger's (of a probe or a hedge): a retry budget that refuses
/// gives up instead.
fn refusal(by: Refuser) -> NotSent {
    match by {
        Refuser::Breaker => NotSent::Open { retry_after: None },
        Refuser::Throttle => NotSent::Rejected(ShedReason::Throttled { probability: 0.0 }),
        Refuser::Budget => NotSent::Rejected(ShedReason::Ledger(Denied::Ratio)),
        Refuser::Limiter => NotSent::Rejected(ShedReason::Limit { limit: 0 }),
    }
}

/// Why the simulator cannot run a sequence, or `None`: none (its stack is the core's engine,
/// which runs every policy the format writes, and a scenario's clients may be blocking ones,
/// whose attempts no timer interrupts).
pub fn skips(_: &Sequence) -> Option<String> {
    None
}

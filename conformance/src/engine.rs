//! The engine face: the core's call engine (`reliable_core::engine`) driven directly, in virtual
//! time, with the scripted answers. It owns only what every face owns: sending (taking the next
//! scripted answer), a timer per copy at the deadline the engine gives it, the engine's own
//! wake-up time, and turning a status and its headers into the core's `Answer` (with
//! `reliable::http`'s header parser, as the other Rust faces read headers). The sequence's policy
//! block is written as a policy format stack and read into the engine's plan by
//! `reliable_core::engine::Stack`, as a policy file would be.

use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use reliable_core::Instant;
use reliable_core::answer::Answer;
use reliable_core::breaker::{
    BreakerPolicy, CircuitBreaker, CountWindow, Observer, Outcome, Permit, Rejection, Transition,
};
use reliable_core::budget::{AnyBudget, Budget, Unlimited};
use reliable_core::chaos::{Chaos, Enabled, Injected};
use reliable_core::engine::{Action, CallState, Ended, Note, Refusal, SampleFor, Shared, Stack};
use reliable_core::hedge::{HedgePolicy, Hedger};
use reliable_core::ledger::ExtraLedger;
use reliable_core::limit::{Limiter, LimiterPolicy, RateLimiter, RatePolicy};
use reliable_core::policy::{Layer, Scope};
use reliable_core::throttle::{AdaptiveThrottle, ThrottlePolicy};

use crate::{Draws, Scripted, Sequence, Trace};

/// The breaker's transitions, written into the trace as they happen.
struct Lines(Trace);

impl Observer for Lines {
    fn on_transition(&self, t: Transition) {
        self.0.push(
            "breaker",
            &format!(",\"from\":\"{}\",\"to\":\"{}\"", t.from.name(), t.to.name()),
        );
    }
}

type Cb = CircuitBreaker<BreakerPolicy, CountWindow<64>, 1, Lines>;

/// The shared state of one sequence's calls (one thread: cells).
struct Parts {
    breaker: Option<RefCell<Cb>>,
    budget: Option<RefCell<AnyBudget>>,
    ledger: Option<RefCell<ExtraLedger>>,
    throttle: Option<RefCell<AdaptiveThrottle>>,
    hedger: Option<RefCell<Hedger>>,
    limiter: Option<RefCell<Limiter>>,
    rate: Option<RefCell<RateLimiter>>,
    draws: Draws,
    trace: Trace,
}

fn with<T, R>(cell: &Option<RefCell<T>>, f: impl FnOnce(&mut T) -> R) -> Option<R> {
    cell.as_ref().map(|c| f(&mut c.borrow_mut()))
}

impl Shared for Parts {
    fn breaker_acquire(&self, now: Instant) -> Option<Result<Permit, Rejection>> {
        with(&self.breaker, |b| b.try_acquire(now))
    }
    fn breaker_record(&self, permit: Permit, outcome: Outcome, now: Instant) {
        with(&self.breaker, |b| b.record(permit, outcome, now));
    }
    fn breaker_refuses(&self, now: Instant) -> Option<reliable_core::Duration> {
        with(&self.breaker, |b| b.retry_after(now)).flatten()
    }
    fn budget<R>(&self, f: impl FnOnce(&mut dyn Budget) -> R) -> R {
        match (&self.ledger, &self.budget) {
            (Some(l), _) => f(&mut *l.borrow_mut()),
            (None, Some(b)) => f(&mut *b.borrow_mut()),
            (None, None) => f(&mut Unlimited),
        }
    }
    fn throttle<R>(
        &self,
        f: impl FnOnce(&mut dyn reliable_core::throttle::AnyThrottle) -> R,
    ) -> Option<R> {
        with(&self.throttle, |t| f(t))
    }
    fn ledger<R>(
        &self,
        f: impl FnOnce(&mut dyn reliable_core::ledger::AnyLedger) -> R,
    ) -> Option<R> {
        with(&self.ledger, |l| f(l))
    }
    fn hedger<R>(&self, f: impl FnOnce(&mut Hedger) -> R) -> Option<R> {
        with(&self.hedger, f)
    }
    fn limiter<R>(&self, f: impl FnOnce(&mut Limiter) -> R) -> Option<R> {
        with(&self.limiter, f)
    }
    fn rate<R>(&self, f: impl FnOnce(&mut RateLimiter) -> R) -> Option<R> {
        with(&self.rate, f)
    }
    fn sample(&self, what: SampleFor) -> u64 {
        match what {
            SampleFor::Throttle => self.draws.next(),
            SampleFor::Backoff => 0,
        }
    }
    fn note(&self, note: Note) {
        let t = &self.trace;
        match note {
            Note::Hedge { n } => t.push("hedge", &format!(",\"n\":{n}")),
            Note::NoHedge(r) => t.push("no-hedge", &format!(",\"by\":\"{}\"", by(r))),
            Note::Lost { n } => t.push("cancelled", &format!(",\"n\":{n}")),
            Note::Refused(r) => t.push("refused", &format!(",\"by\":\"{}\"", by(r))),
            Note::Retry { after, .. } => {
                t.push("retry", &format!(",\"delay_ms\":{}", after.as_millis()))
            }
            Note::Limit { from, to } => t.push("limit", &format!(",\"from\":{from},\"to\":{to}")),
            Note::Ledger { .. } | Note::Ended { .. } | Note::GaveUp(_) => {}
        }
    }
}

/// Who refused, as a trace names it.
fn by(r: Refusal) -> &'static str {
    match r {
        Refusal::Breaker(_) => "breaker",
        Refusal::Throttle(_) => "throttle",
        Refusal::Ledger(_) => "ledger",
        Refusal::Limit(_) | Refusal::Rate(_) => "limiter",
    }
}

fn cell<T>(t: T) -> RefCell<T> {
    RefCell::new(t)
}

fn built<T, E: std::fmt::Display>(r: Result<T, E>) -> Result<T, String> {
    r.map_err(|e| e.to_string())
}

/// The sequence's policy in the policy format, the layers nested as the block says (by default
/// in the order the README gives, `Ledger(Retry(Throttle(Breaker(Limit(RateLimit(Hedge(Call)))))))`,
/// without those the block leaves out), each layer's state one per client.
pub fn stack(s: &Sequence) -> Result<Layer<()>, String> {
    use crate::simulator::set;
    let p = &s.policy;
    let scope = Scope::PerClient;
    let mut layer = Layer::Call {
        downstream: "conformance".into(),
        timeout: p.copy_timeout(),
        timeout_dist: None,
    };
    if let Some(config) = p.hedge() {
        layer = Layer::Hedge {
            config,
            idempotent: p.idempotent,
            scope,
            inner: Box::new(layer),
        };
    }
    for name in p.order().into_iter().rev() {
        let inner = Box::new(layer);
        layer = match name {
            "ledger" => Layer::Ledger {
                config: set(p.ledger(), name)?,
                scope,
                inner,
            },
            "retry" => Layer::Retry {
                policy: p.retry(),
                budget: p.budget(),
                budget_scope: scope,
                inner,
            },
            "throttle" => Layer::Throttle {
                config: set(p.throttle(), name)?.0,
                scope,
                inner,
            },
            "breaker" => Layer::Breaker {
                config: set(p.breaker(), name)?,
                scope,
                inner,
            },
            "limit" => Layer::Limit {
                config: set(p.limit(), name)?,
                scope,
                inner,
            },
            // `load` holds the names to `LAYERS`: the last is the rate limit.
            _ => Layer::RateLimit {
                config: set(p.rate_limit(), name)?,
                scope,
                inner,
            },
        };
    }
    Ok(layer)
}

/// The shared state a stack draws from, built from its configs.
fn parts(stack: &Stack, trace: &Trace, draws: Draws) -> Result<Parts, String> {
    let breaker = match stack.breaker {
        Some((c, _)) => {
            let b: CircuitBreaker<BreakerPolicy, CountWindow<64>, 1, ()> =
                built(CircuitBreaker::with_storage(built(BreakerPolicy::new(c))?))?;
            Some(cell(b.with_seed(1).observe(Lines(trace.clone()))))
        }
        None => None,
    };
    Ok(Parts {
        breaker,
        budget: stack
            .budget
            .map(|(c, _)| built(AnyBudget::from_config(c)).map(cell))
            .transpose()?,
        ledger: stack
            .ledger
            .map(|(c, _)| built(ExtraLedger::from_config(c)).map(cell))
            .transpose()?,
        throttle: stack
            .throttle
            .map(|(c, _)| built(ThrottlePolicy::new(c).and_then(AdaptiveThrottle::new)).map(cell))
            .transpose()?,
        hedger: stack
            .hedge
            .map(|(c, _)| built(HedgePolicy::new(c)).map(|h| cell(Hedger::new(h))))
            .transpose()?,
        limiter: stack
            .limit
            .map(|(c, _)| built(LimiterPolicy::new(c)).map(|l| cell(Limiter::new(l))))
            .transpose()?,
        rate: stack
            .rate
            .map(|(c, _)| built(RatePolicy::new(c)).map(|r| cell(RateLimiter::new(r))))
            .transpose()?,
        draws,
        trace: trace.clone(),
    })
}

/// A copy in flight: its number, when its answer arrives (`None`: never), its deadline.
struct Flying {
    n: u32,
    arrives: Option<u64>,
    deadline: Option<u64>,
    answer: Option<Answer>,
    /// Delayed by the chaos layer: when it reaches the downstream (then takes its answer).
    reaches: Option<u64>,
}

/// Copy `f` reaches the scripted downstream at `now`: its `attempt` line, and the next scripted
/// answer, due after its latency.
fn reach(
    f: &mut Flying,
    now: u64,
    trace: &Trace,
    answers: &[Scripted],
    script: &crate::CallScript,
    name: &str,
    i: usize,
) -> Result<(), String> {
    let k = trace.attempt();
    if k != f.n {
        return Err(format!("{name}: call {i}: copy {} sent as {k}", f.n));
    }
    let r = trace.reach();
    let (Some(a), Some(scripted)) = (answers.get(r), script.answers.get(r)) else {
        return Err(format!("{name}: call {i}: script exhausted"));
    };
    f.reaches = None;
    f.answer = answer_of(a);
    f.arrives = f.answer.map(|_| now + scripted.latency_ms);
    Ok(())
}

fn ms(i: Instant) -> u64 {
    i.as_nanos() / 1_000_000
}

/// The scripted answer as the core's `Answer` (`None`: it never comes).
pub(crate) fn answer_of(a: &Scripted) -> Option<Answer> {
    match a {
        Scripted::Status(code, headers) => {
            let signals =
                reliable::http::HeaderSignals::from_headers(&headers[..], SystemTime::now());
            Some(reliable::http::answer(*code, &signals))
        }
        Scripted::Reset => Some(Answer::Connection),
        Scripted::Hang => None,
    }
}

/// Writes an answer line as every face does.
fn answer_line(trace: &Trace, n: u32, answer: Answer) {
    trace.answer(n, answer.class(), answer.accepted());
}

/// Runs a sequence through the engine.
pub fn run(s: &Sequence) -> Result<String, String> {
    let clock = Arc::new(AtomicU64::new(0));
    let c = clock.clone();
    let trace = Trace::new(Arc::new(move || c.load(Ordering::SeqCst)));
    let draws = s.policy.throttle().map(|(_, d)| d).unwrap_or_default();
    // The policy as a policy file would write it, read as the engine reads one.
    let stack = built(Stack::from_layer(&stack(s)?))?;
    let parts = parts(&stack, &trace, draws.clone())?;
    let plan = stack.plan;
    // The chaos layer below every layer: the core's decisions, counted as a `ChaosSwitch` counts
    // them (an attempt is numbered only while some strategy is on).
    let chaos = match &s.policy.chaos {
        Some(c) => Some(built(Chaos::new(c.config()))?),
        None => None,
    };
    let mut on = chaos.map_or(Enabled::NONE, |c| c.enabled());
    let mut drawn = 0u64;
    let mut now = 0u64;
    for (i, script) in s.calls.iter().enumerate() {
        now = now.max(script.start_ms);
        clock.store(now, Ordering::SeqCst);
        trace.start_call(i);
        if let Some(c) = &chaos {
            for (strategy, set) in script.chaos_switches() {
                on = Enabled(on.with(strategy, set).0 & c.configured().0);
            }
        }
        let answers: Vec<Scripted> = script
            .answers
            .iter()
            .filter_map(|a| a.kind().ok())
            .collect();
        // The borrow-free form of a call (a `Call` is this state with its two references; every
        // other Rust face drives `Call`, so the suite holds both).
        let mut call: CallState<4> = CallState::start(&plan, &parts, Instant::from_millis(now));
        let mut flying: Vec<Flying> = Vec::new();
        let mut steps = 0u32;
        loop {
            steps += 1;
            if steps > 100_000 {
                return Err(format!("{}: call {i}: stuck at {now} ms", s.name));
            }
            // What the engine asks for.
            let mut over = false;
            while let Some(action) = call.poll() {
                match action {
                    Action::Send { n, deadline, .. } => {
                        let decided = match &chaos {
                            Some(c) if !on.is_none() => {
                                drawn += 1;
                                Some((drawn - 1, c.decide(drawn - 1, on)))
                            }
                            _ => None,
                        };
                        let (draw, d) = decided.unwrap_or_default();
                        let delay = d.latency.map_or(0, |l| l.as_millis());
                        if d.latency.is_some() {
                            trace.delayed(draw, delay);
                        }
                        let deadline = deadline.map(ms);
                        if let Some((strategy, injected)) = d.answer {
                            // Answered by the chaos layer (after its delay): nothing reaches
                            // the script.
                            let k = trace.injected(strategy.event(), draw);
                            if k != n {
                                return Err(format!("{}: call {i}: copy {n} sent as {k}", s.name));
                            }
                            let hang = injected == Injected::Hang;
                            flying.push(Flying {
                                n,
                                arrives: (!hang).then_some(now + delay),
                                deadline,
                                answer: (!hang).then(|| injected.answer()),
                                reaches: None,
                            });
                            continue;
                        }
                        let mut f = Flying {
                            n,
                            arrives: None,
                            deadline,
                            answer: None,
                            reaches: Some(now + delay),
                        };
                        if delay == 0 {
                            reach(&mut f, now, &trace, &answers, script, &s.name, i)?;
                        }
                        flying.push(f);
                    }
                    Action::Cancel { n, .. } => flying.retain(|f| f.n != n),
                    Action::Done(end) => {
                        let rest = match end.result {
                            Ended::Ok { .. } => "\"result\":\"ok\"".to_string(),
                            Ended::Refused(_) => "\"result\":\"refused\"".to_string(),
                            Ended::GaveUp(r) => {
                                format!("\"result\":\"gave-up\",\"reason\":\"{}\"", r.name())
                            }
                            Ended::Cancelled => "\"result\":\"cancelled\"".to_string(),
                        };
                        trace.push("end", &format!(",{rest},\"attempts\":{}", end.attempts));
                        over = true;
                    }
                }
            }
            if over {
                break;
            }
            // The next thing to happen: an answer, a copy's timer, the engine's timer.
            let answer_at = flying.iter().filter_map(|f| f.arrives).min();
            // Work that cannot be interrupted is waited for: no timer runs while it is out.
            let blocked = s.policy.uninterruptible && !flying.is_empty();
            let timer_at = flying
                .iter()
                .filter(|_| !blocked)
                .filter(|f| f.arrives.is_none_or(|a| f.deadline.is_some_and(|d| d <= a)))
                .filter_map(|f| f.deadline)
                .min();
            // A millisecond timer, as tokio's: a wake-up between two ticks fires at the next.
            let wake_at = call
                .poll_timeout(&parts)
                .filter(|_| !blocked)
                .map(|t| t.as_nanos().div_ceil(1_000_000));
            let reach_at = flying.iter().filter_map(|f| f.reaches).min();
            let Some(next) = [answer_at, timer_at, wake_at, reach_at]
                .into_iter()
                .flatten()
                .min()
            else {
                return Err(format!("{}: call {i}: a timeout with no timer", s.name));
            };
            now = now.max(next);
            clock.store(now, Ordering::SeqCst);
            let at = Instant::from_millis(now);
            if answer_at == Some(next) && timer_at.is_none_or(|t| t > next) {
                // The first answer due (in send order).
                let Some(pos) = flying.iter().position(|f| f.arrives == Some(next)) else {
                    continue;
                };
                let f = flying.remove(pos);
                let Some(answer) = f.answer else { continue };
                answer_line(&trace, f.n, answer);
                call.handle(
                    &plan,
                    &parts,
                    at,
                    reliable_core::engine::Input::Answer { n: f.n, answer },
                );
            } else if timer_at == Some(next) {
                // Every copy whose timer fires now times out: all their lines first (their
                // timers fire together), then the engine hears each in send order.
                let (late, rest): (Vec<Flying>, Vec<Flying>) = flying
                    .into_iter()
                    .partition(|f| f.deadline == Some(next) && f.arrives.is_none_or(|a| a >= next));
                flying = rest;
                for f in &late {
                    answer_line(&trace, f.n, Answer::Timeout);
                }
                for f in &late {
                    call.handle(
                        &plan,
                        &parts,
                        at,
                        reliable_core::engine::Input::Answer {
                            n: f.n,
                            answer: Answer::Timeout,
                        },
                    );
                }
            } else if reach_at == Some(next) {
                // A copy the chaos layer delayed goes on now.
                if let Some(f) = flying.iter_mut().find(|f| f.reaches == Some(next)) {
                    reach(f, next, &trace, &answers, script, &s.name, i)?;
                }
            } else {
                call.handle(&plan, &parts, at, reliable_core::engine::Input::Tick);
            }
        }
    }
    if draws.exhausted() {
        return Err(format!("{}: throttle draws exhausted", s.name));
    }
    Ok(trace.text())
}

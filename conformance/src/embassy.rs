//! The embassy face: `reliable_embassy::Reliable::call` on embassy-time's mock driver, each copy
//! an async attempt that sleeps its scripted latency on an embassy `Timer` and then answers (or
//! never does), dropped when the engine cancels or times it out. Its shared state is the
//! wrapper's own (`State`, `Extras`: critical-section parts), built from the sequence's policy
//! written as a policy format stack and read by `reliable_core::engine::Stack`, as the engine
//! face reads it; the answers are the scripted statuses and headers read into the core's
//! `Answer`, classed by the core's table.
//!
//! Time: the executor polls the call again at once when it asked to be (its copies start at the
//! poll after the engine asks for them), and otherwise moves the mock clock by 1 ms, so every
//! timer fires on its whole millisecond (a quantile hedge's delay too: the next whole
//! millisecond, as the README says a millisecond timer acts). The mock driver's clock is global:
//! one sequence at a time, in one thread.

use std::future::{Future, pending};
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Wake, Waker};

use embassy_time::{MockDriver, Timer};
use reliable_core::answer::Answer;
use reliable_core::breaker::{BreakerPolicy, CircuitBreaker, CountWindow, Observer, Transition};
use reliable_core::budget::{AnyBudget, Budget, Unlimited};
use reliable_core::engine::{Note, Plan, Refusal, SampleFor, Stack};
use reliable_core::hedge::{HedgePolicy, Hedger};
use reliable_core::ledger::ExtraLedger;
use reliable_core::limit::{Limiter, LimiterPolicy, RateLimiter, RatePolicy};
use reliable_core::outcome::ErrorClass;
use reliable_core::throttle::{AdaptiveThrottle, ThrottlePolicy};
use reliable_embassy::{
    EmbassyClock, Error, Extra, Extras, MaybeBreaker, NoBreaker, Part, Reliable, State,
};

use crate::{Draws, Sequence, Trace};

/// The face's copies in flight at once: a first copy and up to three hedges (as the engine's
/// default).
const COPIES: usize = 4;

/// Why the embassy face cannot run `s`, or `None`.
pub fn skips(s: &Sequence) -> Option<String> {
    s.policy.uninterruptible.then(|| {
        "uninterruptible: an async attempt is a future, dropped (interrupted) at its timer".into()
    })
}

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

/// The other layers, the throttle's scripted draws, and the engine's notes into the trace.
struct Parts {
    extras: Extras,
    draws: Draws,
    trace: Trace,
}

impl Extra for Parts {
    fn throttle(&self) -> Option<&Part<AdaptiveThrottle>> {
        self.extras.throttle()
    }
    fn ledger(&self) -> Option<&Part<ExtraLedger>> {
        self.extras.ledger()
    }
    fn hedger(&self) -> Option<&Part<Hedger>> {
        self.extras.hedger()
    }
    fn limiter(&self) -> Option<&Part<Limiter>> {
        self.extras.limiter()
    }
    fn rate(&self) -> Option<&Part<RateLimiter>> {
        self.extras.rate()
    }
    fn sample(&self, what: SampleFor) -> Option<u64> {
        match what {
            SampleFor::Throttle => Some(self.draws.next()),
            // No jitter in any sequence: the state's own draws.
            SampleFor::Backoff => None,
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
            // The answer the engine took, as it takes it (a timeout its timer decided too).
            Note::Ended { n, class } => {
                t.answer(n, class, class.is_none_or(reliable::classify::accepted))
            }
            Note::Ledger { .. } | Note::GaveUp(_) => {}
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

fn built<T, E: std::fmt::Display>(r: Result<T, E>) -> Result<T, String> {
    r.map_err(|e| e.to_string())
}

/// The other layers of a stack, built from its configs.
fn extras(stack: &Stack) -> Result<Extras, String> {
    let mut x = Extras::new();
    if let Some((c, _)) = stack.throttle {
        x = x.with_throttle(built(
            ThrottlePolicy::new(c).and_then(AdaptiveThrottle::new),
        )?);
    }
    if let Some((c, _)) = stack.ledger {
        x = x.with_ledger(built(ExtraLedger::from_config(c))?);
    }
    if let Some((c, _)) = stack.hedge {
        x = x.with_hedger(Hedger::new(built(HedgePolicy::new(c))?));
    }
    if let Some((c, _)) = stack.limit {
        x = x.with_limiter(Limiter::new(built(LimiterPolicy::new(c))?));
    }
    if let Some((c, _)) = stack.rate {
        x = x.with_rate(RateLimiter::new(built(RatePolicy::new(c))?));
    }
    Ok(x)
}

/// Runs a sequence on the embassy face.
pub fn run(s: &Sequence) -> Result<String, String> {
    let t0 = embassy_time::Instant::now();
    let trace = Trace::new(Arc::new(move || {
        (embassy_time::Instant::now() - t0).as_millis()
    }));
    let draws = s.policy.throttle().map(|(_, d)| d).unwrap_or_default();
    let stack = built(Stack::from_layer(&crate::engine::stack(s)?))?;
    let extra = Parts {
        extras: extras(&stack)?,
        draws: draws.clone(),
        trace: trace.clone(),
    };
    let budget: AnyBudget = match stack.budget {
        Some((c, _)) => built(AnyBudget::from_config(c))?,
        None => AnyBudget::Unlimited(Unlimited),
    };
    let text = match stack.breaker {
        Some((c, _)) => {
            let b: CircuitBreaker<BreakerPolicy, CountWindow<64>, 1, ()> =
                built(CircuitBreaker::with_storage(built(BreakerPolicy::new(c))?))?;
            let b = b.with_seed(1).observe(Lines(trace.clone()));
            calls(s, t0, &trace, stack.plan, b, budget, extra)
        }
        None => calls(s, t0, &trace, stack.plan, NoBreaker, budget, extra),
    }?;
    if draws.exhausted() {
        return Err(format!("{}: throttle draws exhausted", s.name));
    }
    Ok(text)
}

/// The sequence's calls, one after another, through one `Reliable`.
fn calls<Br: MaybeBreaker, B: Budget>(
    s: &Sequence,
    t0: embassy_time::Instant,
    trace: &Trace,
    plan: Plan,
    breaker: Br,
    budget: B,
    extra: Parts,
) -> Result<String, String> {
    let state = State::with_extra(breaker, budget, 1, extra);
    let rel: Reliable<_, EmbassyClock, Plan, COPIES> = Reliable::new(state, plan, EmbassyClock);
    let driver = MockDriver::get();
    for (i, script) in s.calls.iter().enumerate() {
        let start = t0 + embassy_time::Duration::from_millis(script.start_ms);
        let now = embassy_time::Instant::now();
        if start > now {
            driver.advance(start - now);
        }
        trace.start_call(i);
        let exhausted = AtomicBool::new(false);
        let call = rel.call(
            |a: &Answer| a.class().unwrap_or(ErrorClass::Transient),
            || {
                let n = trace.attempt();
                let k = n as usize - 1;
                let scripted = script.answers.get(k);
                let kind = scripted.and_then(|a| a.kind().ok());
                let latency = scripted.map_or(0, |a| a.latency_ms);
                if kind.is_none() {
                    exhausted.store(true, Ordering::SeqCst);
                }
                async move {
                    let answer = match kind {
                        Some(a) => crate::engine::answer_of(&a),
                        None => Some(Answer::Connection),
                    };
                    let Some(answer) = answer else {
                        // No answer ever: the engine's timer decides.
                        return pending().await;
                    };
                    Timer::after_millis(latency).await;
                    match answer.class() {
                        None => Ok(()),
                        Some(_) => Err(answer),
                    }
                }
            },
        );
        let result = block_on(call).map_err(|e| format!("{}: call {i}: {e}", s.name))?;
        if exhausted.load(Ordering::SeqCst) {
            return Err(format!("{}: call {i}: script exhausted", s.name));
        }
        let rest = match result {
            Ok(()) => "\"result\":\"ok\"".to_string(),
            Err(Error::Open { .. } | Error::Refused { .. }) => "\"result\":\"refused\"".into(),
            Err(Error::GaveUp { reason, .. } | Error::Timeout { reason, .. }) => {
                format!("\"result\":\"gave-up\",\"reason\":\"{}\"", reason.name())
            }
            Err(Error::Cancelled { .. }) => "\"result\":\"cancelled\"".into(),
        };
        trace.push("end", &format!(",{rest},\"attempts\":{}", trace.attempts()));
    }
    Ok(trace.text())
}

/// Records that the task asked to be polled again.
struct Woken(AtomicBool);

impl Wake for Woken {
    fn wake(self: Arc<Self>) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// Polls `fut` on the mock clock: again at once when it asked to be, else after moving the
/// clock 1 ms; at most an hour of virtual time.
fn block_on<F: Future>(fut: F) -> Result<F::Output, String> {
    let driver = MockDriver::get();
    let woken = Arc::new(Woken(AtomicBool::new(false)));
    let waker = Waker::from(Arc::clone(&woken));
    let mut fut = pin!(fut);
    let mut cx = Context::from_waker(&waker);
    let mut steps = 0u32;
    let mut polls = 0u32;
    loop {
        woken.0.store(false, Ordering::SeqCst);
        if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return Ok(v);
        }
        polls += 1;
        if polls > 10_000_000 {
            return Err("the call never waits (it asks to be polled forever)".into());
        }
        if !woken.0.load(Ordering::SeqCst) {
            steps += 1;
            if steps > 3_600_000 {
                return Err("the call did not end within an hour of virtual time".into());
            }
            driver.advance(embassy_time::Duration::from_millis(1));
        }
    }
}

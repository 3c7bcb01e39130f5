//! Whole calls through the core's call engine ([`reliable_core::engine::Call`]): one plan (a
//! retry policy with an attempt timeout, hedging for calls that may be sent twice), one breaker,
//! one token bucket and one hedger shared by the calls, and a script of answers each copy gets
//! (a status, a server delay, a latency, or no answer ever). The driver here is what every face
//! is: it sends the copies the engine asks for (each takes the next scripted answer), drops those
//! it cancels, hands each answer back when it arrives, and wakes the engine at its
//! `poll_timeout`. Every note the engine takes and every action it asks for is a line.

use core::cell::RefCell;
use core::hint::black_box;

use heapless::Vec;
use reliable_core::answer::{Answer, Signals};
use reliable_core::backoff::BackoffConfig;
use reliable_core::breaker::{
    BreakerConfig, BreakerPolicy, CircuitBreaker, NoWindow, Outcome, Permit, Rejection,
};
use reliable_core::budget::{Budget, TokenBucket, TokenBucketConfig, TokenBucketPolicy};
use reliable_core::engine::{
    Action, Call, Cancelled, Ended, Input, Note, Plan, Refusal, SampleFor, Shared,
};
use reliable_core::hedge::{HedgeConfig, HedgeDelay, HedgePolicy, Hedger, Idempotency};
use reliable_core::outcome::ErrorClass;
use reliable_core::retry::{RetryConfig, RetryPolicy};
use reliable_core::sample::splitmix64;
use reliable_core::{ConfigError, Duration, Instant};

use crate::Trace;

/// Each attempt: at most 300 ms; three attempts; 100 ms then 200 ms between them.
const RETRY: RetryConfig = RetryConfig {
    max_attempts: Some(3),
    attempt_timeout: Some(Duration::from_millis(300)),
    ..RetryConfig::new(BackoffConfig::exponential(
        Duration::from_millis(100),
        2.0,
        Duration::from_secs(1),
        reliable_core::backoff::Jitter::None,
    ))
};

/// A hedge 50 ms after an attempt is sent while it is unanswered, one at most.
const HEDGE: HedgeConfig = HedgeConfig {
    delay: HedgeDelay::Fixed(Duration::from_millis(50)),
    max_hedges: 1,
};

/// What a copy gets: `status` (0: no answer ever), a server delay, and when it arrives.
#[derive(Clone, Copy)]
struct Scripted {
    status: u16,
    retry_after_ms: Option<u64>,
    latency_ms: u64,
}

const fn answer(status: u16, latency_ms: u64) -> Scripted {
    Scripted {
        status,
        retry_after_ms: None,
        latency_ms,
    }
}

/// No answer ever: the engine's timer decides.
const HANG: Scripted = answer(0, 0);

/// The calls: when each starts (ms) and the answers its copies get, in the order they are sent.
const CALLS: [(u64, &[Scripted]); 8] = [
    // A 503, retried after the backoff; then a success.
    (0, &[answer(503, 20), answer(200, 30)]),
    // The first copy never answers: a hedge at 50 ms wins, the first is cancelled.
    (1_000, &[HANG, answer(200, 10)]),
    // A 500, retried; the second is the second failure in a row: the breaker opens on it, and
    // the call ends at once, refused by the breaker, with that answer as its last.
    (2_000, &[answer(500, 10), answer(500, 10), answer(500, 10)]),
    // Open: refused before anything is sent.
    (2_500, &[]),
    // After the open time, a probe: it succeeds and closes the breaker.
    (5_000, &[answer(200, 10)]),
    // A 429 with a server delay of 1 s: the retry waits it, not the backoff.
    (
        6_000,
        &[
            Scripted {
                status: 429,
                retry_after_ms: Some(1_000),
                latency_ms: 5,
            },
            answer(200, 5),
        ],
    ),
    // Nothing answers: each attempt is hedged, both copies time out at 300 ms; the token bucket
    // (drained by the failures so far) refuses the second retry.
    (9_000, &[HANG, HANG, HANG, HANG, HANG, HANG]),
    // A 400: fatal, not retried.
    (20_000, &[answer(400, 10)]),
];

/// The calls' shared state (one thread: cells; a busy cell is skipped, never a panic).
struct Parts {
    breaker: RefCell<CircuitBreaker<BreakerPolicy, NoWindow>>,
    budget: RefCell<TokenBucket>,
    hedger: RefCell<Hedger>,
    random: RefCell<u64>,
    notes: RefCell<Vec<Note, 16>>,
}

impl Shared for Parts {
    fn breaker_acquire(&self, now: Instant) -> Option<Result<Permit, Rejection>> {
        let mut b = self.breaker.try_borrow_mut().ok()?;
        Some(reliable_core::breaker::Breaker::try_acquire(&mut *b, now))
    }
    fn breaker_record(&self, permit: Permit, outcome: Outcome, now: Instant) {
        if let Ok(mut b) = self.breaker.try_borrow_mut() {
            reliable_core::breaker::Breaker::record(&mut *b, permit, outcome, now);
        }
    }
    fn breaker_refuses(&self, now: Instant) -> Option<Duration> {
        let b = self.breaker.try_borrow().ok()?;
        reliable_core::breaker::Breaker::retry_after(&*b, now)
    }
    fn budget<R>(&self, f: impl FnOnce(&mut dyn Budget) -> R) -> R {
        match self.budget.try_borrow_mut() {
            Ok(mut b) => f(&mut *b),
            Err(_) => f(&mut reliable_core::budget::Unlimited),
        }
    }
    fn hedger<R>(&self, f: impl FnOnce(&mut Hedger) -> R) -> Option<R> {
        let mut h = self.hedger.try_borrow_mut().ok()?;
        Some(f(&mut h))
    }
    fn sample(&self, _: SampleFor) -> u64 {
        match self.random.try_borrow_mut() {
            Ok(mut r) => {
                *r = splitmix64(*r);
                *r
            }
            Err(_) => 0,
        }
    }
    fn note(&self, note: Note) {
        if let Ok(mut notes) = self.notes.try_borrow_mut() {
            // Sixteen notes between two looks at the queue is more than one input takes.
            let _ = notes.push(note);
        }
    }
}

fn parts() -> Result<(Plan, Parts), ConfigError> {
    let retry = RetryPolicy::new(black_box(RETRY))?;
    let mut breaker = BreakerConfig::new();
    breaker.consecutive_failures = Some(2);
    breaker.open.duration = Duration::from_secs(2);
    breaker.half_open.max_in_flight = Some(1);
    let breaker = CircuitBreaker::with_storage(BreakerPolicy::new(black_box(breaker))?)?;
    let budget = TokenBucket::new(TokenBucketPolicy::new(black_box(
        TokenBucketConfig::brooker_2022(),
    ))?);
    let hedger = Hedger::new(HedgePolicy::new(black_box(HEDGE))?);
    let plan = Plan::new(retry).idempotency(Idempotency::Idempotent);
    let parts = Parts {
        breaker: RefCell::new(breaker),
        budget: RefCell::new(budget),
        hedger: RefCell::new(hedger),
        random: RefCell::new(0x5EED),
        notes: RefCell::new(Vec::new()),
    };
    Ok((plan, parts))
}

/// A copy in flight: its number, when its answer arrives (`None`: never), the answer.
#[derive(Clone, Copy)]
struct Flying {
    n: u32,
    arrives: Option<Instant>,
    answer: Answer,
}

fn class_name(class: Option<ErrorClass>) -> &'static str {
    class.map_or("ok", ErrorClass::name)
}

fn refusal_name(r: Refusal) -> &'static str {
    match r {
        Refusal::Breaker(_) => "breaker",
        Refusal::Throttle(_) => "throttle",
        Refusal::Ledger(_) => "ledger",
        Refusal::Limit(_) => "limit",
        Refusal::Rate(_) => "rate",
    }
}

/// Starts a line of call `i` at `now`.
fn line<'t, 'o>(t: &'t mut Trace<'o>, i: usize, now: Instant, what: &str) -> &'t mut Trace<'o> {
    t.s("call")
        .kv("i", i as u64)
        .kv("t", now.as_nanos())
        .s(" ")
        .s(what)
}

/// Writes the notes taken since the last look.
fn notes(t: &mut Trace<'_>, parts: &Parts, i: usize, now: Instant) {
    let taken = match parts.notes.try_borrow_mut() {
        Ok(mut notes) => core::mem::take(&mut *notes),
        Err(_) => Vec::new(),
    };
    for note in taken {
        let l = line(t, i, now, "note ");
        match note {
            Note::Hedge { n } => l.s("hedge").kv("n", n.into()),
            Note::NoHedge(r) => l.s("no-hedge by=").s(refusal_name(r)),
            Note::Lost { n } => l.s("lost").kv("n", n.into()),
            Note::Refused(r) => l.s("refused by=").s(refusal_name(r)),
            Note::Retry {
                after,
                class,
                attempts,
            } => l
                .s("retry")
                .kv("after", after.as_nanos())
                .s(" class=")
                .s(class_name(Some(class)))
                .kv("attempts", attempts.into()),
            Note::Limit { from, to } => l.s("limit").kv("from", from.into()).kv("to", to.into()),
            Note::Ledger { granted, .. } => l.s("ledger").kv("granted", granted.into()),
            Note::Ended { n, class } => l
                .s("ended")
                .kv("n", n.into())
                .s(" class=")
                .s(class_name(class)),
            Note::GaveUp(reason) => l.s("gave-up ").s(reason.name()),
        }
        .end();
    }
}

pub(crate) fn all(t: &mut Trace<'_>) {
    let (plan, parts) = match parts() {
        Ok(p) => p,
        Err(e) => return t.refused("calls", e),
    };
    let mut now = Instant::ZERO;
    for (i, (start, script)) in CALLS.iter().enumerate() {
        now = now.max(Instant::from_millis(*start));
        call(t, &plan, &parts, i, script, &mut now);
        let state = match parts.breaker.try_borrow() {
            Ok(b) => reliable_core::breaker::Breaker::state(&*b, now).name(),
            Err(_) => "busy",
        };
        line(t, i, now, "breaker ").s(state).end();
    }
}

/// One call, driven to its end; `now` moves with it.
fn call(
    t: &mut Trace<'_>,
    plan: &Plan,
    parts: &Parts,
    i: usize,
    script: &[Scripted],
    now: &mut Instant,
) {
    let mut call: Call<'_, Parts, 2> = Call::start(plan, parts, *now);
    let mut flying: Vec<Flying, 2> = Vec::new();
    // Bounded: every step either ends the call or moves the time to something due.
    for _ in 0..1_000 {
        notes(t, parts, i, *now);
        while let Some(action) = call.poll() {
            match action {
                Action::Send { n, deadline, hedge } => {
                    let l = line(t, i, *now, "send").kv("n", n.into());
                    match deadline {
                        Some(d) => l.kv("deadline", d.as_nanos()),
                        None => l.s(" deadline=none"),
                    }
                    .kv("hedge", hedge.into())
                    .end();
                    let s = script.get(n as usize - 1).copied().unwrap_or(HANG);
                    let signals = Signals {
                        retry_after: s.retry_after_ms.map(Duration::from_millis),
                        ..Signals::NONE
                    };
                    let copy = Flying {
                        n,
                        arrives: (s.status != 0)
                            .then(|| now.saturating_add(Duration::from_millis(s.latency_ms))),
                        answer: Answer::status(s.status, signals),
                    };
                    if flying.push(copy).is_err() {
                        call.handle(*now, Input::Dropped { n });
                    }
                }
                Action::Cancel { n, why } => {
                    let why = match why {
                        Cancelled::Lost => "lost",
                        Cancelled::TimedOut => "timed-out",
                        Cancelled::CallOver => "call-over",
                    };
                    line(t, i, *now, "cancel")
                        .kv("n", n.into())
                        .s(" why=")
                        .s(why)
                        .end();
                    flying.retain(|f| f.n != n);
                }
                Action::Done(end) => {
                    let l = line(t, i, *now, "end ");
                    match end.result {
                        Ended::Ok { n } => l.s("ok").kv("n", n.into()),
                        Ended::GaveUp(reason) => l.s("gave-up ").s(reason.name()),
                        Ended::Refused(r) => l.s("refused by=").s(refusal_name(r)),
                        Ended::Cancelled => l.s("cancelled"),
                    };
                    l.kv("attempts", end.attempts.into());
                    if let Some((n, class)) = end.last {
                        l.kv("last", n.into())
                            .s(" last_class=")
                            .s(class_name(class));
                    }
                    l.end();
                    notes(t, parts, i, *now);
                    return;
                }
            }
        }
        // The next thing due: an answer (the first sent, at a tie), or the engine's timer.
        let answer = flying
            .iter()
            .filter_map(|f| f.arrives.map(|at| (at, f.n)))
            .min();
        let wake = call.poll_timeout();
        match (answer, wake) {
            (Some((at, n)), wake) if wake.is_none_or(|w| at < w) => {
                *now = (*now).max(at);
                let Some(pos) = flying.iter().position(|f| f.n == n) else {
                    continue;
                };
                let copy = flying.swap_remove(pos);
                let class = copy.answer.class();
                line(t, i, *now, "answer")
                    .kv("n", n.into())
                    .s(" class=")
                    .s(class_name(class))
                    .end();
                call.handle(
                    *now,
                    Input::Answer {
                        n,
                        answer: copy.answer,
                    },
                );
            }
            (_, Some(w)) => {
                *now = (*now).max(w);
                call.handle(*now, Input::Tick);
            }
            (_, None) => {
                line(t, i, *now, "stuck").end();
                return;
            }
        }
    }
    line(t, i, *now, "too-many-steps").end();
}

//! Drives the core with no std and no allocator; exits 0 if every answer is as expected.
#![no_std]
#![no_main]

use core::panic::PanicInfo;

use reliable_core::backoff::{BackoffConfig, Jitter};
use reliable_core::breaker::{
    AtomicCountWindow, BreakerConfig, BreakerPolicy, CircuitBreaker, CountWindow, LastTransition,
    NoWindow, Outcome, RejectReason, SharedBreaker, State,
};
use reliable_core::budget::{AnyBudget, BudgetConfig, RatioConfig};
use reliable_core::hedge::{HedgeConfig, HedgePolicy, Hedger, Idempotency, NoHedge};
use reliable_core::ledger::{Extra, ExtraLedger};
use reliable_core::limit::{
    Completion, Limiter, LimiterConfig, LimiterPolicy, RateConfig, RateLimiter, RatePolicy,
};
use reliable_core::outcome::ErrorClass;
use reliable_core::registry::Registry;
use reliable_core::retry::{RetryConfig, RetryDecision, RetryPolicy};
use reliable_core::throttle::{AdaptiveThrottle, ThrottleConfig, ThrottlePolicy};
use reliable_core::{Duration, Instant};

#[panic_handler]
fn panic(_: &PanicInfo<'_>) -> ! {
    // No unwinding and no std: leave with a distinct status through libc.
    unsafe extern "C" {
        fn _exit(code: i32) -> !;
    }
    // SAFETY: `_exit` never returns and takes a plain integer.
    unsafe { _exit(101) }
}

fn check(ok: bool, code: i32) -> Result<(), i32> {
    if ok { Ok(()) } else { Err(code) }
}

fn breaker_timeline() -> Result<(), i32> {
    let policy = BreakerPolicy::new(BreakerConfig::layered_exercise()).map_err(|_| 10)?;
    let mut b = CircuitBreaker::<_, NoWindow>::with_storage(&policy)
        .map_err(|_| 11)?
        .observe(LastTransition::default());
    let t = Instant::from_secs;
    for now in [15, 20] {
        let p = b.try_acquire(t(now)).map_err(|_| 12)?;
        b.record(p, Outcome::Failure, t(now));
    }
    let r = b.try_acquire(t(25)).err().and_then(|r| r.retry_after());
    check(r == Some(Duration::from_secs(15)), 13)?;
    let trial = b.try_acquire(t(40)).map_err(|_| 14)?;
    b.record(trial, Outcome::Success, t(40));
    let closed = b.observer().take();
    check(closed.map(|c| c.to) == Some(State::Closed), 15)
}

fn windowed_registry() -> Result<(), i32> {
    let policy = BreakerPolicy::new(BreakerConfig::reliablekit()).map_err(|_| 20)?;
    let mut reg: Registry<CircuitBreaker<&BreakerPolicy, CountWindow<64>>, 4, 16> = Registry::new();
    reg.insert("primary", CircuitBreaker::new(&policy).map_err(|_| 21)?)
        .map_err(|_| 22)?;
    let b = reg.get_mut("primary").ok_or(23)?;
    let mut now = Instant::ZERO;
    for i in 0..40u64 {
        now += Duration::from_millis(10);
        if let Ok(p) = b.try_acquire(now) {
            b.record(
                p,
                if i % 2 == 0 {
                    Outcome::Failure
                } else {
                    Outcome::Success
                },
                now,
            );
        }
    }
    check(b.state(now) == State::Open, 24)
}

fn retry_with_budget_and_backoff() -> Result<(), i32> {
    let policy = RetryPolicy::new(RetryConfig {
        max_attempts: Some(3),
        ..RetryConfig::new(BackoffConfig::brooker_2015(Jitter::Full))
    })
    .map_err(|_| 30)?;
    let mut budget: AnyBudget<10> =
        AnyBudget::from_config(BudgetConfig::Ratio(RatioConfig::percent(0.1))).map_err(|_| 31)?;
    let now = Instant::from_secs(1);
    // A 10% budget: one first try alone earns no retry...
    let mut request = policy.start(now, &mut budget);
    let refused = policy.on_failure_with(&mut request, ErrorClass::Transient, now, &mut budget, 7);
    check(matches!(refused, RetryDecision::GiveUp(_)), 34)?;
    // ...ten more do.
    for _ in 0..10 {
        let _ = policy.start(now, &mut budget);
    }
    let mut request = policy.start(now, &mut budget);
    let mut sample = 0x9E37_79B9_7F4A_7C15u64;
    let decision = policy.on_failure_with(
        &mut request,
        ErrorClass::Transient,
        now,
        &mut budget,
        sample,
    );
    // Full jitter on 5 ms * 2^1: the retry is due within 10 ms.
    check(
        matches!(decision, RetryDecision::RetryAt(at) if at <= now + Duration::from_millis(10)),
        32,
    )?;
    let mut backoff = policy.backoff_for(ErrorClass::Transient).backoff();
    for _ in 0..20 {
        sample = reliable_core::sample::splitmix64(sample);
        check(
            backoff.next_delay_with(sample) <= Duration::from_secs(2),
            33,
        )?;
    }
    Ok(())
}

fn throttle() -> Result<(), i32> {
    let policy = ThrottlePolicy::new(ThrottleConfig::google_sre()).map_err(|_| 40)?;
    let mut throttle: AdaptiveThrottle<12> = AdaptiveThrottle::new(policy).map_err(|_| 41)?;
    let mut now = Instant::ZERO;
    let mut rejected = 0;
    for i in 0..1_000u64 {
        now += Duration::from_millis(10);
        match throttle.try_acquire_with(now, reliable_core::sample::splitmix64(i)) {
            // The downstream accepts nothing: the throttle should soon shed most calls locally.
            Ok(()) => throttle.record(now, false),
            Err(_) => rejected += 1,
        }
    }
    check(rejected > 500, 42)
}

/// The shared breaker, through `&self`: the timeline above, then a windowed breaker that trips.
fn shared_breaker() -> Result<(), i32> {
    let policy = BreakerPolicy::new(BreakerConfig::layered_exercise()).map_err(|_| 50)?;
    let b = SharedBreaker::<_, NoWindow>::with_storage(&policy)
        .map_err(|_| 51)?
        .observe(LastTransition::default());
    let t = Instant::from_secs;
    for now in [15, 20] {
        let p = b.try_acquire(t(now)).map_err(|_| 52)?;
        b.record(p, Outcome::Failure, t(now));
    }
    let r = b.try_acquire(t(25)).err().and_then(|r| r.retry_after());
    check(r == Some(Duration::from_secs(15)), 53)?;
    let trial = b.try_acquire(t(40)).map_err(|_| 54)?;
    let second = b.try_acquire(t(40)).err().map(|r| r.reason);
    check(second == Some(RejectReason::HalfOpenFull), 55)?;
    b.record(trial, Outcome::Success, t(40));
    let closed = b.observer().take();
    check(closed.map(|c| c.to) == Some(State::Closed), 56)?;

    let policy = BreakerPolicy::new(BreakerConfig::reliablekit()).map_err(|_| 57)?;
    let b = SharedBreaker::<_, AtomicCountWindow<64>>::with_storage(&policy).map_err(|_| 58)?;
    let mut now = Instant::ZERO;
    for i in 0..40u64 {
        now += Duration::from_millis(10);
        if let Ok(p) = b.try_acquire(now) {
            let outcome = if i % 2 == 0 {
                Outcome::Failure
            } else {
                Outcome::Success
            };
            b.record(p, outcome, now);
        }
    }
    check(
        b.state(now) == State::Open && b.counts(now).failures == 10,
        59,
    )
}

/// A hedge at p95 drawn from a 10% ledger of extra attempts; an AIMD limit that backs off on a
/// drop; a rate limiter that refuses past its burst.
fn extra_attempts_and_limits() -> Result<(), i32> {
    let mut hedger = Hedger::new(HedgePolicy::new(HedgeConfig::p95()).map_err(|_| 60)?);
    let mut ledger: ExtraLedger =
        ExtraLedger::from_config(RatioConfig::percent(0.1)).map_err(|_| 61)?;
    let start = Instant::from_secs(1);
    for i in 0..100u64 {
        hedger.record(Duration::from_millis(1 + i % 20));
        ledger.on_first_try(start);
    }
    // p95 of 1..=20 ms is 19 ms (within 1/16 above).
    let delay = hedger.delay().ok_or(62)?;
    check(
        delay >= Duration::from_millis(19) && delay < Duration::from_millis(21),
        63,
    )?;
    let mut call = hedger.start(start, Idempotency::Idempotent);
    let early = hedger.try_hedge_from(&mut call, start, &mut ledger);
    check(matches!(early, Err(NoHedge::NotYet { .. })), 64)?;
    let draw = hedger
        .try_hedge_from(&mut call, start + delay, &mut ledger)
        .map_err(|_| 65)?;
    ledger.settle(draw, start + delay);
    check(ledger.drawn(Extra::Hedge) == 1, 66)?;

    let mut limiter = Limiter::new(LimiterPolicy::new(LimiterConfig::aimd()).map_err(|_| 67)?);
    let permit = limiter.try_acquire(start).map_err(|_| 68)?;
    limiter.release(permit, Completion::Dropped, start + delay);
    check(limiter.limit() == 20, 69)?; // the minimum

    let mut rate = RateLimiter::new(
        RatePolicy::new(RateConfig {
            rate: 10,
            period: Duration::from_secs(1),
            burst: 2,
        })
        .map_err(|_| 70)?,
    );
    let admitted = (0..5).filter(|_| rate.try_acquire(start).is_ok()).count();
    check(admitted == 2, 71)
}

/// One whole call through the engine: a breaker, a hedger and a limiter in cells, a 500, a
/// hedge that wins the retry, and the call done.
fn engine_call() -> Result<(), i32> {
    use core::cell::RefCell;
    use reliable_core::answer::{Answer, Signals};
    use reliable_core::breaker::{Permit, Rejection};
    use reliable_core::engine::{Action, Call, Ended, Input, Plan, Shared};

    struct Parts {
        breaker: RefCell<CircuitBreaker<BreakerPolicy, NoWindow>>,
        hedger: RefCell<Hedger>,
        limiter: RefCell<Limiter>,
    }
    impl Shared for Parts {
        fn breaker_acquire(&self, now: Instant) -> Option<Result<Permit, Rejection>> {
            Some(self.breaker.borrow_mut().try_acquire(now))
        }
        fn breaker_record(&self, permit: Permit, outcome: Outcome, now: Instant) {
            self.breaker.borrow_mut().record(permit, outcome, now);
        }
        fn hedger<R>(&self, f: impl FnOnce(&mut Hedger) -> R) -> Option<R> {
            Some(f(&mut self.hedger.borrow_mut()))
        }
        fn limiter<R>(&self, f: impl FnOnce(&mut Limiter) -> R) -> Option<R> {
            Some(f(&mut self.limiter.borrow_mut()))
        }
    }
    let parts = Parts {
        breaker: RefCell::new(
            CircuitBreaker::with_storage(
                BreakerPolicy::new(BreakerConfig::layered_exercise()).map_err(|_| 80)?,
            )
            .map_err(|_| 81)?,
        ),
        hedger: RefCell::new(Hedger::new(
            HedgePolicy::new(HedgeConfig {
                delay: reliable_core::hedge::HedgeDelay::Fixed(Duration::from_millis(50)),
                max_hedges: 1,
            })
            .map_err(|_| 82)?,
        )),
        limiter: RefCell::new(Limiter::new(
            LimiterPolicy::new(LimiterConfig::aimd()).map_err(|_| 83)?,
        )),
    };
    let retry = RetryPolicy::new(RetryConfig {
        max_attempts: Some(3),
        attempt_timeout: Some(Duration::from_secs(1)),
        ..RetryConfig::new(BackoffConfig::constant(Duration::from_millis(100)))
    })
    .map_err(|_| 84)?;
    let plan = Plan::new(retry).idempotency(Idempotency::Idempotent);
    let t = Instant::from_millis;
    let mut call: Call<'_, Parts> = Call::start(&plan, &parts, t(0));
    check(matches!(call.poll(), Some(Action::Send { n: 1, .. })), 85)?;
    let e500 = Answer::status(500, Signals::NONE);
    call.handle(t(10), Input::Answer { n: 1, answer: e500 });
    check(call.poll_timeout() == Some(t(110)), 86)?;
    call.handle(t(110), Input::Tick);
    check(matches!(call.poll(), Some(Action::Send { n: 2, .. })), 87)?;
    call.handle(t(160), Input::Tick);
    check(
        matches!(
            call.poll(),
            Some(Action::Send {
                n: 3,
                hedge: true,
                ..
            })
        ),
        88,
    )?;
    let ok = Answer::status(200, Signals::NONE);
    call.handle(t(170), Input::Answer { n: 3, answer: ok });
    check(matches!(call.poll(), Some(Action::Cancel { n: 2, .. })), 89)?;
    let done = call.poll();
    check(
        matches!(done, Some(Action::Done(e)) if e.result == Ended::Ok { n: 3 } && e.attempts == 3),
        90,
    )
}

#[unsafe(no_mangle)]
extern "C" fn main(_argc: i32, _argv: *const *const u8) -> i32 {
    let all = breaker_timeline()
        .and_then(|()| windowed_registry())
        .and_then(|()| retry_with_budget_and_backoff())
        .and_then(|()| throttle())
        .and_then(|()| shared_breaker())
        .and_then(|()| extra_attempts_and_limits())
        .and_then(|()| engine_call());
    match all {
        Ok(()) => 0,
        Err(code) => code,
    }
}

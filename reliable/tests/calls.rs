//! What a call does, step by step, on injected time: retry schedules, server delays, error
//! classes, where the breaker sits, deadlines, budgets, throttling, timeouts and the observer.

use reliable::clock::ManualClock;
use reliable::http::HttpError;
use reliable::observer::{CallEnd, NotSent, Observer};
use reliable::{Error, OrOpen, Reliable, ShedReason};
use reliable_core::Duration as D;
use reliable_core::breaker::{BreakerConfig, State, Transition};
use reliable_core::budget::{BudgetConfig, Denied, RatioConfig};
use reliable_core::outcome::ErrorClass;
use reliable_core::retry::GiveUpReason;
use reliable_core::throttle::ThrottleConfig;
use std::cell::Cell;
use std::io::ErrorKind;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

/// Every event, as a line of text.
#[derive(Debug, Default, Clone)]
struct Log(Arc<Mutex<Vec<String>>>);

impl Log {
    fn push(&self, s: String) {
        self.0.lock().unwrap().push(s);
    }
    fn lines(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
    fn retries(&self) -> Vec<Duration> {
        self.lines()
            .iter()
            .filter_map(|l| l.strip_prefix("retry after "))
            .map(|ns| Duration::from_nanos(ns.parse().unwrap()))
            .collect()
    }
}

impl Observer for Log {
    fn on_attempt(&self, _: &str, attempt: u32) {
        self.push(format!("attempt {attempt}"));
    }
    fn on_retry(&self, _: &str, _: u32, _: ErrorClass, delay: Duration) {
        self.push(format!("retry after {}", delay.as_nanos()));
    }
    fn on_reject(&self, _: &str, refusal: NotSent) {
        self.push(format!("reject {refusal:?}"));
    }
    fn on_transition(&self, _: &str, t: Transition) {
        self.push(format!("{} -> {}", t.from, t.to));
    }
    fn on_give_up(&self, _: &str, attempts: u32, reason: &'static str) {
        self.push(format!("give up after {attempts}: {reason}"));
    }
    fn on_call_end(&self, _: &str, end: &CallEnd) {
        self.push(format!("end {} ({} attempts)", end.outcome, end.attempts));
    }
}

fn reset() -> std::io::Error {
    std::io::Error::from(ErrorKind::ConnectionReset)
}

/// A blocking call that fails `fails` times, then answers; counts the attempts in `calls`.
fn flaky(calls: &Cell<u32>, fails: u32) -> Result<u32, std::io::Error> {
    calls.set(calls.get() + 1);
    if calls.get() <= fails {
        Err(reset())
    } else {
        Ok(calls.get())
    }
}

#[test]
fn retries_follow_the_seed_schedule_and_a_seed_replays_it() {
    let schedule = |seed: u64| {
        let clock = ManualClock::new();
        let log = Log::default();
        let rel = Reliable::reliablekit("x")
            .no_breaker()
            .no_timeout()
            .manual_time(clock.clone())
            .seed(seed)
            .observer(log.clone())
            .build()
            .unwrap();
        let calls = Cell::new(0);
        assert_eq!(rel.call_blocking(|| flaky(&calls, 4)).unwrap(), 5);
        let waits = log.retries();
        // The manual sleep advanced the clock by exactly the waits.
        assert_eq!(clock_secs(&clock), waits.iter().sum::<Duration>());
        waits
    };
    let waits = schedule(1);
    assert_eq!(waits.len(), 4);
    for (k, w) in waits.iter().enumerate() {
        // 0.2 s · 2^k · U[0.9, 1.1]
        let base = 0.2 * 2f64.powi(k as i32);
        let s = w.as_secs_f64();
        assert!(
            s >= base * 0.9 - 1e-9 && s <= base * 1.1 + 1e-9,
            "retry {k}: {s}"
        );
    }
    assert_eq!(schedule(1), waits, "same seed, same waits");
    assert_ne!(schedule(2), waits, "another seed, other waits");
}

fn clock_secs(clock: &ManualClock) -> Duration {
    use reliable::clock::Clock;
    clock.now().since_origin().into()
}

#[test]
fn server_delays_are_honoured_up_to_the_limit() {
    let run = |max: Duration| {
        let log = Log::default();
        let rel = Reliable::builder("api")
            .no_breaker()
            .attempts(2)
            .no_timeout()
            .max_server_delay(max)
            .manual_time(ManualClock::new())
            .observer(log.clone())
            .build()
            .unwrap();
        let calls = Cell::new(0);
        let r = rel.call_blocking(|| {
            calls.set(calls.get() + 1);
            if calls.get() == 1 {
                Err(HttpError::new(
                    429,
                    &[("Retry-After", "3")][..],
                    SystemTime::now(),
                ))
            } else {
                Ok("ok")
            }
        });
        assert_eq!(r.unwrap(), "ok");
        log.retries()
    };
    assert_eq!(run(Duration::from_secs(30)), [Duration::from_secs(3)]);
    assert_eq!(
        run(Duration::from_secs(1)),
        [Duration::from_secs(1)],
        "clamped"
    );
}

#[test]
fn fatal_errors_are_neither_retried_nor_held_against_the_downstream() {
    let rel = Reliable::builder("api")
        .manual_time(ManualClock::new())
        .build()
        .unwrap();
    let calls = Cell::new(0);
    let err = rel
        .call_blocking(|| {
            calls.set(calls.get() + 1);
            Err::<(), _>(HttpError::new(404, &[("x", "y")][..], SystemTime::now()))
        })
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::GaveUp {
                reason: GiveUpReason::Fatal,
                attempts: 1,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(calls.get(), 1);
    let s = rel.snapshot();
    assert_eq!((s.window.calls, s.window.failures, s.failed), (0, 0, 1));

    // x-should-retry: false on a 503: not retried, but it is the downstream's failure.
    let err = rel
        .call_blocking(|| {
            Err::<(), _>(HttpError::new(
                503,
                &[("x-should-retry", "false")][..],
                SystemTime::now(),
            ))
        })
        .unwrap_err();
    assert!(matches!(
        err,
        Error::GaveUp {
            reason: GiveUpReason::DontRetry,
            attempts: 1,
            ..
        }
    ));
    assert_eq!(rel.snapshot().window.failures, 1);
}

/// The snapshot's window splits slow calls into slow failures and slow successes (resilience4j's
/// `getNumberOfSlowFailedCalls` and `getNumberOfSlowSuccessfulCalls`).
#[test]
fn the_window_splits_slow_calls_into_failures_and_successes() {
    let clock = ManualClock::new();
    let rel = Reliable::builder("api")
        .slow_call(Duration::from_secs(1), 1.0)
        .no_timeout()
        .manual_time(clock.clone())
        .build()
        .unwrap();
    let slow = || clock.advance(Duration::from_secs(2));
    // A slow 503 the server says not to retry: one slow failure.
    rel.call_blocking(|| {
        slow();
        Err::<(), _>(HttpError::new(
            503,
            &[("x-should-retry", "false")][..],
            SystemTime::now(),
        ))
    })
    .unwrap_err();
    // A slow success, then a fast one.
    rel.call_blocking(|| {
        slow();
        Ok::<_, HttpError>(())
    })
    .unwrap();
    rel.call_blocking(|| Ok::<_, HttpError>(())).unwrap();
    let w = rel.snapshot().window;
    assert_eq!((w.calls, w.failures, w.slow), (3, 1, 2));
    assert_eq!((w.slow_failures, w.slow_successes()), (1, 1));
}

fn two_in_a_row() -> BreakerConfig {
    BreakerConfig {
        consecutive_failures: Some(2),
        ..BreakerConfig::new()
    }
}

#[test]
fn a_breaker_per_attempt_stops_the_retries_of_a_call_when_it_opens() {
    let log = Log::default();
    let rel = Reliable::builder("api")
        .breaker(two_in_a_row())
        .attempts(5)
        .no_backoff()
        .no_timeout()
        .manual_time(ManualClock::new())
        .observer(log.clone())
        .build()
        .unwrap();
    let calls = Cell::new(0);
    let err = rel.call_blocking(|| flaky(&calls, 100)).unwrap_err();
    assert_eq!(calls.get(), 2, "the third attempt met the open breaker");
    assert_eq!(err.retry_after(), Some(Duration::from_secs(30)));
    assert!(err.is_open());
    assert_eq!(
        log.lines(),
        [
            "attempt 1",
            "retry after 0",
            "attempt 2",
            "closed -> open",
            // The answer that opened it ends the call at once: no retry is planned first.
            "reject Open { retry_after: Some(30s) }",
            "end open (2 attempts)",
        ]
    );
    // The seed's on_open: the next call is answered from the fallback without calling.
    let answer = rel
        .call_blocking(|| flaky(&calls, 0))
        .or_open(|_| 99)
        .unwrap();
    assert_eq!((answer, calls.get()), (99, 2));
}

#[test]
fn a_breaker_per_call_sees_one_outcome_per_call() {
    let rel = Reliable::builder("api")
        .breaker(two_in_a_row())
        .breaker_per_call()
        .attempts(3)
        .no_backoff()
        .no_timeout()
        .manual_time(ManualClock::new())
        .build()
        .unwrap();
    let calls = Cell::new(0);
    let err = rel.call_blocking(|| flaky(&calls, 100)).unwrap_err();
    assert!(matches!(
        err,
        Error::GaveUp {
            reason: GiveUpReason::MaxAttempts,
            attempts: 3,
            ..
        }
    ));
    assert_eq!(
        rel.snapshot().consecutive_failures,
        1,
        "three attempts, one verdict"
    );
    assert_eq!(rel.state(), Some(State::Closed));
    let _ = rel.call_blocking(|| flaky(&calls, 100));
    assert_eq!(rel.state(), Some(State::Open));
    assert_eq!(calls.get(), 6);
}

#[test]
fn the_deadline_stops_retries_that_would_start_after_it() {
    let rel = Reliable::builder("api")
        .no_breaker()
        .attempts(10)
        .retry(reliable_core::retry::RetryConfig {
            max_attempts: Some(10),
            deadline: Some(D::from_secs(1)),
            ..reliable_core::retry::RetryConfig::new(
                reliable_core::backoff::BackoffConfig::constant(D::from_millis(400)),
            )
        })
        .manual_time(ManualClock::new())
        .build()
        .unwrap();
    let calls = Cell::new(0);
    let err = rel.call_blocking(|| flaky(&calls, 100)).unwrap_err();
    // Attempts at 0, 0.4 s, 0.8 s; the next would start at 1.2 s, after the deadline.
    assert!(
        matches!(
            err,
            Error::GaveUp {
                reason: GiveUpReason::Deadline,
                attempts: 3,
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn a_retry_budget_bounds_retries_in_an_outage() {
    let rel = Reliable::builder("api")
        .no_breaker()
        .attempts(4)
        .no_backoff()
        .no_timeout()
        .budget(BudgetConfig::Ratio(RatioConfig {
            ratio: 0.1,
            min_per_sec: 0,
            ttl: D::from_secs(10),
            slots: 10,
        }))
        .manual_time(ManualClock::new())
        .build()
        .unwrap();
    let calls = Cell::new(0);
    let mut budget_refusals = 0;
    for _ in 0..200 {
        match rel.call_blocking(|| flaky(&calls, u32::MAX)) {
            Err(Error::Rejected {
                why: ShedReason::Budget(Denied::Ratio),
                last: Some(e),
            }) => {
                assert_eq!(e.kind(), ErrorKind::ConnectionReset);
                budget_refusals += 1;
            }
            Err(Error::GaveUp { .. }) => {}
            other => panic!("{other:?}"),
        }
    }
    // Without the budget: 800 attempts. With 10%: 200 first tries and at most 20 retries.
    assert!(calls.get() <= 220, "{} attempts", calls.get());
    assert!(budget_refusals >= 180, "{budget_refusals}");
    assert_eq!(rel.snapshot().retries, u64::from(calls.get() - 200));
}

#[test]
fn adaptive_throttling_rejects_locally_once_the_downstream_refuses_for_overload() {
    let clock = ManualClock::new();
    let rel = Reliable::builder("api")
        .no_breaker()
        .attempts(1)
        .no_timeout()
        .throttle(ThrottleConfig::google_sre())
        .manual_time(clock.clone())
        .seed(3)
        .build()
        .unwrap();
    let calls = Cell::new(0);
    let throttled = Cell::new(0);
    let call = |answer: ErrorClass| match rel.call_blocking(|| {
        calls.set(calls.get() + 1);
        Err::<u32, _>(answer)
    }) {
        Err(Error::Rejected {
            why: ShedReason::Throttled { probability },
            last: None,
        }) => {
            assert!(probability > 0.0 && probability < 1.0);
            throttled.set(throttled.get() + 1);
        }
        Err(_) => {}
        Ok(_) => unreachable!(),
    };
    // Failures that are not refusals (a 500, a timeout) are accepts: the throttle stays out of
    // the way and leaves them to the breaker.
    for i in 0..1_000 {
        call(if i % 2 == 0 {
            ErrorClass::Transient
        } else {
            ErrorClass::Timeout
        });
    }
    assert_eq!((calls.get(), throttled.get()), (1_000, 0));
    // Past the throttle's two-minute window, those accepts are forgotten.
    clock.advance(Duration::from_secs(121));
    // Overload refusals (429, 503) are not: the client sheds load itself.
    for _ in 0..1_000 {
        call(ErrorClass::Throttled { retry_after: None });
    }
    let throttled = throttled.get();
    assert_eq!(calls.get() - 1_000 + throttled, 1_000);
    assert!(throttled > 800, "{throttled} of 1000 rejected locally");
}

#[test]
fn a_blocking_answer_after_the_timeout_is_taken_as_it_comes() {
    let clock = ManualClock::new();
    let rel = Reliable::builder("api")
        .no_breaker()
        .attempts(3)
        .no_backoff()
        .timeout(Duration::from_secs(1))
        .manual_time(clock.clone())
        .build()
        .unwrap();
    // Nothing interrupted the work: its success, late as it is, is the call's, never retried.
    let calls = Cell::new(0);
    let answer = rel.call_blocking(|| {
        calls.set(calls.get() + 1);
        clock.advance(Duration::from_secs(2)); // overruns its second
        Ok::<_, std::io::Error>(calls.get())
    });
    assert_eq!(answer.unwrap(), 1, "the late success was kept");
    // A late failure is what its error says: a transient one is retried...
    calls.set(0);
    let answer = rel.call_blocking(|| {
        calls.set(calls.get() + 1);
        if calls.get() == 1 {
            clock.advance(Duration::from_secs(2));
            return Err(std::io::Error::other("late"));
        }
        Ok(calls.get())
    });
    assert_eq!(answer.unwrap(), 2, "the late transient failure was retried");
    // ... and a fatal one is not, though the attempt overran its timer (a timeout would be).
    calls.set(0);
    let answer = rel.call_blocking(|| {
        calls.set(calls.get() + 1);
        clock.advance(Duration::from_secs(2));
        Err::<u32, _>(std::io::Error::from(std::io::ErrorKind::NotFound))
    });
    assert!(
        matches!(answer, Err(reliable::Error::GaveUp { attempts: 1, .. })),
        "the late fatal failure ended the call: {answer:?}"
    );
    assert_eq!(calls.get(), 1);
}

#[tokio::test(start_paused = true)]
async fn async_timeouts_and_backoff_run_in_virtual_time() {
    let rel = Reliable::builder("api")
        .no_breaker()
        .attempts(3)
        .backoff(Duration::from_secs(1), 2.0, Duration::from_secs(60))
        .jitter(0.0)
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let t0 = tokio::time::Instant::now();
    let err = rel
        .call(|| async {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            Ok::<(), std::io::Error>(())
        })
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Timeout { attempts: 3 }), "{err:?}");
    // 5 s + 1 s + 5 s + 2 s + 5 s.
    assert_eq!(t0.elapsed(), Duration::from_secs(18));
}

#[test]
fn the_seed_preset_lets_every_call_through_half_open() {
    let clock = ManualClock::new();
    let rel = Reliable::reliablekit("seed")
        .attempts(1)
        .manual_time(clock.clone())
        .build()
        .unwrap();
    for _ in 0..20 {
        let _ = rel.call_blocking(|| Err::<(), _>(reset()));
    }
    assert_eq!(rel.state(), Some(State::Open));
    clock.advance(Duration::from_secs(30));
    // Ungated: two probes at once are both admitted (the default builder gates to one).
    let second =
        while_a_call_is_in_flight(&rel, || rel.call_blocking(|| Ok::<_, std::io::Error>(())));
    assert!(second.is_ok(), "{second:?}");
    let gated = Reliable::builder("gated")
        .attempts(1)
        .manual_time(clock.clone())
        .build()
        .unwrap();
    for _ in 0..20 {
        let _ = gated.call_blocking(|| Err::<(), _>(reset()));
    }
    clock.advance(Duration::from_secs(40));
    let second = while_a_call_is_in_flight(&gated, || {
        gated.call_blocking(|| Ok::<_, std::io::Error>(()))
    });
    assert!(
        matches!(
            second,
            Err(Error::Rejected {
                why: ShedReason::HalfOpenFull,
                last: None
            })
        ),
        "{second:?}"
    );
}

/// Runs `other` while a call of `rel` is in flight on another thread (its attempt waits until
/// `other` is done), then lets that call succeed.
fn while_a_call_is_in_flight<R>(rel: &Reliable, other: impl FnOnce() -> R) -> R {
    let (started, in_flight) = std::sync::mpsc::channel();
    let (release, released) = std::sync::mpsc::channel::<()>();
    std::thread::scope(|s| {
        let first = s.spawn(move || {
            rel.call_blocking(|| {
                let _ = started.send(());
                released
                    .recv_timeout(Duration::from_secs(10))
                    .map_err(|_| reset())
            })
        });
        in_flight.recv().unwrap();
        let out = other();
        release.send(()).unwrap();
        assert!(first.join().unwrap().is_ok());
        out
    })
}

#[test]
fn without_timers_or_observers_a_failed_first_attempt_continues_as_a_full_call() {
    // No timeout, deadline, budget, throttle or observer: the first attempt takes the fast path
    // (no clock read); its failure must carry on into retries exactly like any other.
    let clock = ManualClock::new();
    let rel = Reliable::builder("fast")
        .no_timeout()
        .attempts(3)
        .manual_time(clock.clone())
        .seed(9)
        .build()
        .unwrap();
    let calls = Cell::new(0);
    assert_eq!(rel.call_blocking(|| flaky(&calls, 2)).unwrap(), 3);
    let s = rel.snapshot();
    assert_eq!(
        (s.succeeded, s.retries, s.window.calls, s.window.failures),
        (1, 2, 3, 2)
    );
    assert!(
        clock_secs(&clock) >= Duration::from_millis(540),
        "two backoff waits"
    );
    calls.set(0);
    let err = rel.call_blocking(|| flaky(&calls, 100)).unwrap_err();
    assert!(matches!(
        err,
        Error::GaveUp {
            reason: GiveUpReason::MaxAttempts,
            attempts: 3,
            ..
        }
    ));
    assert_eq!(rel.snapshot().failed, 1);
}

#[test]
fn a_snapshot_of_an_open_breaker_says_when_it_admits_a_probe() {
    let clock = ManualClock::new();
    let mut config = two_in_a_row();
    config.open.duration = D::from_secs(30);
    config.open.max = Some(D::from_secs(40));
    config.open.jitter = 0.2;
    let rel = Reliable::builder("api")
        .breaker(config)
        .attempts(1)
        .no_timeout()
        .manual_time(clock.clone())
        .seed(11)
        .build()
        .unwrap();
    let calls = Cell::new(0);
    assert_eq!(rel.snapshot().retry_after, None, "closed");
    for _ in 0..2 {
        let _ = rel.call_blocking(|| flaky(&calls, u32::MAX));
    }
    clock.advance(Duration::from_secs(5));
    let snap = rel.snapshot();
    assert_eq!(snap.state, Some(State::Open));
    // A refused call gets the same delay, jitter included, and the snapshot changed nothing.
    let refused = rel.call_blocking(|| flaky(&calls, 0)).unwrap_err();
    assert_eq!(snap.retry_after, refused.retry_after());
    let left = snap.retry_after.unwrap();
    assert!(
        left > Duration::from_secs(19) && left < Duration::from_secs(35),
        "{left:?}"
    );
    assert_ne!(left, Duration::from_secs(25), "the open time is jittered");
    assert_eq!(rel.snapshot().refused, 1, "only the call was refused");
    clock.advance(left - Duration::from_millis(1));
    assert_eq!(rel.snapshot().retry_after, Some(Duration::from_millis(1)));
    clock.advance(Duration::from_millis(1));
    let snap = rel.snapshot();
    assert_eq!(
        (snap.state, snap.retry_after),
        (Some(State::HalfOpen), None)
    );
    assert_eq!(calls.get(), 2, "no probe was sent by a snapshot");
    let no_breaker = Reliable::builder("x").no_breaker().build().unwrap();
    assert_eq!(no_breaker.snapshot().retry_after, None);
}

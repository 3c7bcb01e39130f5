//! A call's first attempt takes a fast path when nothing reads the time of a success (no budget,
//! throttle, observer or timed breaker rule); adding an observer that does nothing turns it off.
//! The same script of answers (successes, failures, fatal errors, answers after the timeout)
//! must then give the same results, the same breaker history and the same counts either way,
//! blocking and async.

use reliable::clock::ManualClock;
use reliable::observer::Observer;
use reliable::{Error, Reliable};
use reliable_core::breaker::BreakerConfig;
use reliable_core::outcome::ErrorClass;
use std::cell::Cell;
use std::time::Duration;

#[derive(Debug)]
struct Quiet;
impl Observer for Quiet {}

/// What attempt `n` of the script does.
#[derive(Clone, Copy, Debug)]
enum Answer {
    Ok,
    Fail,
    Fatal,
    /// Answers, successfully, after the timeout.
    Late,
}

fn answer(n: u32) -> Answer {
    // Pairs of attempts answer alike (a call of two attempts can time out twice), in an order
    // with runs of failures long enough to open the breaker.
    const SCRIPT: [Answer; 9] = [
        Answer::Ok,
        Answer::Fail,
        Answer::Late,
        Answer::Fail,
        Answer::Ok,
        Answer::Fatal,
        Answer::Late,
        Answer::Ok,
        Answer::Ok,
    ];
    SCRIPT[((n / 2) % 9) as usize]
}

/// How long a late answer takes: longer than the 1 s timeout.
const LATE: Duration = Duration::from_millis(1500);

/// The next attempt's answer to call `call`, and whether it comes late.
fn next(n: &Cell<u32>, call: u32) -> (Result<u32, ErrorClass>, bool) {
    n.set(n.get() + 1);
    match answer(n.get()) {
        Answer::Ok => (Ok(call), false),
        Answer::Fail => (Err(ErrorClass::Transient), false),
        Answer::Fatal => (Err(ErrorClass::Fatal), false),
        Answer::Late => (Ok(call), true),
    }
}

fn builder(name: &str, observed: bool) -> reliable::Builder {
    let b = Reliable::builder(name)
        .breaker(BreakerConfig {
            consecutive_failures: Some(3),
            ..BreakerConfig::new()
        })
        .attempts(2)
        .backoff(Duration::from_millis(100), 2.0, Duration::from_secs(1))
        .jitter(0.1)
        .seed(5)
        .timeout(Duration::from_secs(1));
    if observed { b.observer(Quiet) } else { b }
}

fn outcome<T: std::fmt::Debug>(r: &Result<T, Error<ErrorClass>>) -> String {
    match r {
        Ok(v) => format!("ok {v:?}"),
        Err(e) => format!("{e:?}"),
    }
}

/// Results, the final snapshot's counts and the virtual time of every call of the script.
fn blocking(observed: bool) -> Vec<String> {
    let clock = ManualClock::new();
    let rel = builder("fast", observed)
        .manual_time(clock.clone())
        .build()
        .unwrap();
    let n = Cell::new(0);
    let mut lines = Vec::new();
    for call in 0..300 {
        let r = rel.call_blocking(|| {
            let (result, late) = next(&n, call);
            if late {
                clock.advance(LATE);
                // A late answer is taken as it comes: a late success is kept (nothing
                // interrupted the work); every other call's late answer is its own client's
                // timeout, and every fourth a late server failure.
                if call % 4 == 0 {
                    return Err(ErrorClass::Transient);
                }
                if call % 2 == 0 {
                    return Err(ErrorClass::Timeout);
                }
            }
            result
        });
        clock.advance(Duration::from_secs(2));
        lines.push(format!("{} at {:?}", outcome(&r), clock_now(&clock)));
    }
    lines.push(totals(&rel));
    lines
}

/// The breaker's state and the instance's counts.
fn totals(rel: &Reliable) -> String {
    let s = rel.snapshot();
    format!(
        "{:?} {} ok {} failed {} refused {} cancelled {} retries",
        s.state, s.succeeded, s.failed, s.refused, s.cancelled, s.retries
    )
}

fn clock_now(clock: &ManualClock) -> reliable_core::Instant {
    use reliable::clock::Clock;
    clock.now()
}

#[test]
fn blocking_calls_behave_the_same_on_the_fast_path() {
    let fast = blocking(false);
    let full = blocking(true);
    assert_eq!(fast, full);
    // The script does reach every case.
    let all = fast.join("\n");
    for seen in ["ok ", "Timeout", "GaveUp", "Open"] {
        assert!(all.contains(seen), "no {seen} in\n{all}");
    }
}

/// Under tokio's paused clock (the default clock and timer with the `tokio` feature).
#[cfg(feature = "tokio")]
async fn asynchronous(observed: bool) -> Vec<String> {
    let rel = builder("fast", observed).build().unwrap();
    let n = Cell::new(0);
    let t0 = tokio::time::Instant::now();
    let mut lines = Vec::new();
    for call in 0..300 {
        let r = rel
            .call(|| async {
                let (result, late) = next(&n, call);
                if late {
                    tokio::time::sleep(LATE).await;
                }
                result
            })
            .await;
        tokio::time::sleep(Duration::from_secs(2)).await;
        lines.push(format!("{} at {:?}", outcome(&r), t0.elapsed()));
    }
    lines.push(totals(&rel));
    lines
}

#[cfg(feature = "tokio")]
#[tokio::test(start_paused = true)]
async fn async_calls_behave_the_same_on_the_fast_path() {
    let fast = asynchronous(false).await;
    let full = asynchronous(true).await;
    assert_eq!(fast, full);
    let all = fast.join("\n");
    for seen in ["ok ", "Timeout", "GaveUp", "Open"] {
        assert!(all.contains(seen), "no {seen} in\n{all}");
    }
}

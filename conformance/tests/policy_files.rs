//! Policy files with the hedging, ledger, limit and rate-limit layers: each policy is written
//! once as a scenario, run by the simulator's own client stack one call after another
//! ([`sim::run::run_calls`]), and loaded unchanged with `reliable::policy` into a `Reliable`
//! (`Route::builder`; `Route::blocking_builder` for `call_blocking`, on a manual clock) and into
//! tower layers (`Route::route_layer`), driven on tokio's paused clock against a fake answering
//! the same script. What each sends and how each call ends must
//! be the same, at the same virtual times.
//!
//! The log compared is the calls' observable decisions: every attempt sent, every answer
//! received (by the core's class), every attempt dropped unanswered (timed out, or cancelled by
//! a copy that won), every call's end. (Refusals show as a call ending with no attempt; breaker
//! transitions are compared by the conformance sequences.)

use std::sync::{Arc, Mutex};
use std::time::Duration;

use reliable::clock::Clock;
use reliable::policy::Plan;
use reliable::tower::{BoxError, Policy};
use reliable_core::answer::{Answer, Signals};
use reliable_core::outcome::ErrorClass;
use sim::run::Decision;
use tower::{Layer, ServiceExt};

/// One call: when it starts (ms), and its attempts' answers in order: (status, latency ms).
type Call = (u64, Vec<(u16, u64)>);

/// A log line: virtual ms and what happened.
type Log = Vec<String>;

/// The core's class of a status, as every face reads it.
fn class(status: u16) -> Option<ErrorClass> {
    Answer::status(status, Signals::NONE).class()
}

/// The scenario: one scripted downstream playing `calls`, one policy with `stack`.
fn scenario(stack: &str, calls: &[Call]) -> (String, Vec<(u64, u64)>) {
    let (mut script, mut latencies, mut starts) = (Vec::new(), Vec::new(), Vec::new());
    for (start, answers) in calls {
        starts.push((start * 1_000_000, script.len() as u64));
        for (status, ms) in answers {
            script.push(format!(
                "Status(status: {status}, retry_after: None, should_retry: None)"
            ));
            latencies.push(format!("\"{ms}ms\""));
        }
    }
    let text = format!(
        "Scenario(name: \"policy-file\", horizon: \"1000h\", bucket: \"1h\", workload: JobSet(clients: 1),\n\
         downstreams: [(name: \"api\", model: Scripted(script: [{}], then: Hang, latencies: [{}]))],\n\
         policies: [(name: \"p\", stack: {stack})])\n",
        script.join(", "),
        latencies.join(", "),
    );
    (text, starts)
}

/// What the simulator's client stack does.
fn simulated(text: &str, starts: &[(u64, u64)]) -> Log {
    let compiled = sim::load(text, "policy-file.ron").unwrap_or_else(|e| panic!("{e}"));
    let decisions = sim::run::run_calls(&compiled, 0, 1, starts, &[]).unwrap();
    decisions
        .into_iter()
        .filter_map(|(t, d)| {
            let t = t / 1_000_000;
            match d {
                Decision::Attempt => Some(format!("{t} attempt")),
                // A timeout is no answer: the attempt was dropped at its timer.
                Decision::Answer {
                    class: Some(ErrorClass::Timeout),
                    ..
                }
                | Decision::Cancelled(_) => Some(format!("{t} dropped")),
                Decision::Answer { class, .. } => Some(format!("{t} answer {class:?}")),
                Decision::End { ok } => Some(format!("{t} end {ok}")),
                _ => None,
            }
        })
        .collect()
}

/// A log written by a face's fake and its caller, on tokio's paused clock.
#[derive(Clone)]
struct Recorder {
    lines: Arc<Mutex<Log>>,
    t0: tokio::time::Instant,
}

impl Recorder {
    fn new() -> Self {
        Recorder {
            lines: Arc::default(),
            t0: tokio::time::Instant::now(),
        }
    }
    fn push(&self, what: String) {
        let t = self.t0.elapsed().as_millis();
        self.lines.lock().unwrap().push(format!("{t} {what}"));
    }
    fn log(&self) -> Log {
        self.lines.lock().unwrap().clone()
    }
}

/// Logs `dropped` if the attempt it guards is dropped before it answers.
struct Unanswered(Option<Recorder>);

impl Drop for Unanswered {
    fn drop(&mut self) {
        if let Some(rec) = self.0.take() {
            rec.push("dropped".into());
        }
    }
}

/// The fake downstream: attempt `n` of call `call` answers `calls[call].1[n]` after its latency,
/// logging the attempt and the answer, or `dropped` if it is dropped before it answers.
fn answer(
    rec: &Recorder,
    calls: &[Call],
    call: usize,
    sent: &Mutex<usize>,
) -> impl Future<Output = u16> + Send + use<> {
    let n = {
        let mut s = sent.lock().unwrap();
        *s += 1;
        *s - 1
    };
    rec.push("attempt".into());
    let (status, ms) = calls[call].1[n];
    let mut guard = Unanswered(Some(rec.clone()));
    async move {
        tokio::time::sleep(Duration::from_millis(ms)).await;
        if let Some(rec) = guard.0.take() {
            rec.push(format!("answer {:?}", class(status)));
        }
        status
    }
}

fn paused() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap()
}

/// The policy loaded into a `Reliable`, its calls made with `Reliable::call`.
fn built(plan: &Plan, calls: &[Call]) -> Log {
    paused().block_on(async {
        let rel = plan
            .builder()
            .unwrap()
            .clock(reliable::clock::TokioClock::new())
            .sleep(reliable::sleep::TokioSleep)
            .seed(1)
            .build()
            .unwrap();
        let rec = Recorder::new();
        for (i, (start, _)) in calls.iter().enumerate() {
            tokio::time::sleep_until(rec.t0 + Duration::from_millis(*start)).await;
            let sent = Mutex::new(0);
            let result = rel
                .call(|| {
                    let fut = answer(&rec, calls, i, &sent);
                    async move {
                        match fut.await {
                            s if s < 400 => Ok(()),
                            s => {
                                let none: [(String, String); 0] = [];
                                Err(reliable::http::HttpError::new(
                                    s,
                                    &none[..],
                                    std::time::SystemTime::now(),
                                ))
                            }
                        }
                    }
                })
                .await;
            rec.push(format!("end {}", result.is_ok()));
        }
        rec.log()
    })
}

/// The policy loaded for blocking calls (`Route::blocking_builder`), its calls made with
/// `Reliable::call_blocking` on a manual clock that each answer's latency advances.
fn blocked(plan: &Plan, calls: &[Call]) -> Log {
    let clock = reliable::clock::ManualClock::new();
    let lines = Mutex::new(Log::new());
    let push = |what: String| {
        let t = clock.now().as_nanos() / 1_000_000;
        lines.lock().unwrap().push(format!("{t} {what}"));
    };
    let rel = plan
        .blocking_builder()
        .unwrap()
        .manual_time(clock.clone())
        .seed(1)
        .build()
        .unwrap();
    for (start, answers) in calls {
        clock.set(Duration::from_millis(*start));
        let mut n = 0;
        let result = rel.call_blocking(|| {
            push("attempt".into());
            let (status, ms) = answers[n];
            n += 1;
            clock.advance(Duration::from_millis(ms));
            push(format!("answer {:?}", class(status)));
            match status {
                s if s < 400 => Ok(()),
                s => {
                    let none: [(String, String); 0] = [];
                    Err(reliable::http::HttpError::new(
                        s,
                        &none[..],
                        std::time::SystemTime::now(),
                    ))
                }
            }
        });
        push(format!("end {}", result.is_ok()));
    }
    lines.into_inner().unwrap()
}

/// Requests are numbers, copied freely; a response is a status, read by the core's table.
#[derive(Clone, Copy, Debug)]
struct Statuses;

impl reliable::Classify<reliable::tower::BoxError, u16> for Statuses {
    fn error(&self, e: &reliable::tower::BoxError) -> reliable_core::outcome::ErrorClass {
        reliable::tower::error_class(e)
    }

    fn ok(&self, status: &u16) -> Option<ErrorClass> {
        class(*status)
    }
}

impl Policy<u32, u16> for Statuses {
    fn clone_request(&self, req: &u32) -> Option<u32> {
        Some(*req)
    }
}

/// The policy loaded into tower layers in its own order, over the fake.
fn towered(plan: &Plan, calls: &[Call]) -> Log {
    let calls: Arc<Vec<Call>> = Arc::new(calls.to_vec());
    paused().block_on(async {
        let rec = Recorder::new();
        let sent = Arc::new(Mutex::new(0));
        let (r, c, s) = (rec.clone(), calls.clone(), sent.clone());
        let fake = tower::service_fn(move |call: u32| {
            let fut = answer(&r, &c, call as usize, &s);
            async move { Ok::<u16, BoxError>(fut.await) }
        });
        let svc = plan.route_layer(Statuses).unwrap().layer(fake);
        for (i, (start, _)) in calls.iter().enumerate() {
            tokio::time::sleep_until(rec.t0 + Duration::from_millis(*start)).await;
            *sent.lock().unwrap() = 0;
            let ok = match svc.clone().oneshot(i as u32).await {
                Ok(status) => class(status).is_none(),
                Err(_) => false,
            };
            rec.push(format!("end {ok}"));
        }
        rec.log()
    })
}

/// Runs `stack` on `calls` in the simulator and in each target given; every log must be the
/// simulator's. Returns it.
fn same_decisions(stack: &str, calls: &[Call], into_reliable: bool) -> Log {
    let (text, starts) = scenario(stack, calls);
    let want = simulated(&text, &starts);
    let plan = Plan::from_scenario(&text, "policy-file.ron", "p").unwrap();
    assert_eq!(towered(&plan, calls), want, "tower layers, {stack}");
    if into_reliable {
        assert_eq!(built(&plan, calls), want, "Reliable, {stack}");
    }
    want
}

const CALL: &str = "Call(downstream: \"api\", timeout: \"1s\")";

fn hedge(inner: &str) -> String {
    format!(
        "Hedge(config: (delay: Fixed(\"30ms\"), max_hedges: 1), idempotent: true, inner: {inner})"
    )
}

/// A hedge after 30 ms: a slow first try is beaten by its hedge (and dropped), a fast one is
/// not hedged, a failure before the hedge is due ends the call, and a copy failing after the
/// hedge already won changes nothing.
#[test]
fn a_hedge_loaded_from_a_policy_file_hedges_as_the_simulator() {
    let calls: Vec<Call> = vec![
        (0, vec![(200, 100), (200, 10)]),
        (1_000, vec![(200, 10)]),
        (2_000, vec![(500, 10)]),
        (3_000, vec![(503, 100), (200, 10)]),
    ];
    let log = same_decisions(&hedge(CALL), &calls, true);
    assert_eq!(
        log[..5],
        [
            "0 attempt",
            "30 attempt",
            "40 answer None",
            "40 dropped",
            "40 end true",
        ]
    );
}

/// A ledger of 50% of first tries: the first call's hedge is refused (half a hedge in the
/// ledger), the second's is sent, the third's refused again; the simulator and both targets
/// send the same attempts.
#[test]
fn a_ledger_loaded_from_a_policy_file_bounds_hedges_as_the_simulator() {
    let stack = format!(
        "Ledger(config: (ratio: 0.5, min_per_sec: 0, ttl: \"10s\"), inner: {})",
        hedge(CALL)
    );
    let slow = vec![(200, 100), (200, 10)];
    let calls: Vec<Call> = vec![(0, slow.clone()), (1_000, slow.clone()), (2_000, slow)];
    let log = same_decisions(&stack, &calls, true);
    let attempts = |from: u64, to: u64| {
        log.iter()
            .filter(|l| l.ends_with("attempt"))
            .filter(|l| {
                let t: u64 = l.split(' ').next().unwrap().parse().unwrap();
                (from..to).contains(&t)
            })
            .count()
    };
    assert_eq!(
        [
            attempts(0, 1_000),
            attempts(1_000, 2_000),
            attempts(2_000, 3_000)
        ],
        [1, 2, 1]
    );
}

/// Retries and half-open probes draw from the ledger too: with a 40% ledger a breaker's first
/// probe is refused (the call ends without an attempt), the next call's closes it.
#[test]
fn a_ledger_loaded_from_a_policy_file_refuses_a_probe_as_the_simulator() {
    let breaker = "(consecutive_failures: 1, open: (duration: \"1s\", jitter: 0.0), half_open: (max_in_flight: 1, rule: Consecutive(successes: 1)))";
    let stack = format!(
        "Ledger(config: (ratio: 0.4, min_per_sec: 0, ttl: \"10s\"), inner: Retry(policy: (max_attempts: 2, backoff: (shape: Constant(delay: \"0s\"))), inner: Breaker(config: {breaker}, inner: {CALL})))"
    );
    let calls: Vec<Call> = vec![
        (0, vec![(500, 10)]),
        (2_000, vec![]),
        (3_000, vec![(200, 10)]),
    ];
    let log = same_decisions(&stack, &calls, true);
    let (text, _) = scenario(&stack, &calls);
    let plan = Plan::from_scenario(&text, "policy-file.ron", "p").unwrap();
    assert_eq!(blocked(&plan, &calls), log, "Reliable::call_blocking");
    assert!(log.contains(&"2000 end false".to_string()), "{log:?}");
    assert!(!log.contains(&"2000 attempt".to_string()), "{log:?}");
}

/// A limit around a hedged call holds one slot for all its copies (the simulator's `Limit`
/// admits the call once): a bulkhead of 1 still lets the hedge go. A `Reliable` loaded from the
/// file runs the same nesting (the limit judges the call: there is no `Retry`), and agrees.
#[test]
fn a_limit_around_a_hedge_holds_one_slot_as_the_simulator() {
    let stack = format!(
        "Limit(config: (rule: Fixed, initial: 1, min: 1, max: 1), scope: Shared, inner: {})",
        hedge(CALL)
    );
    let calls: Vec<Call> = vec![(0, vec![(200, 100), (200, 10)])];
    let log = same_decisions(&stack, &calls, true);
    assert_eq!(log.iter().filter(|l| l.ends_with("attempt")).count(), 2);
}

/// Each copy is timed from its own send (the `Call`'s timeout is each copy's): neither copy of
/// the first attempt answers, so the first is dropped at 1 s and its hedge at 1.03 s, and only
/// then does the retry go (100 ms later); the retry's slow copy is beaten by its hedge.
#[test]
fn each_hedged_copy_times_out_on_its_own_timer_as_the_simulator() {
    let stack = format!(
        "Retry(policy: (max_attempts: 2, backoff: (shape: Constant(delay: \"100ms\"))), inner: {})",
        hedge(CALL)
    );
    let calls: Vec<Call> = vec![(0, vec![(200, 5_000), (200, 5_000), (200, 50), (200, 10)])];
    let log = same_decisions(&stack, &calls, true);
    assert_eq!(
        log[..6],
        [
            "0 attempt",
            "30 attempt",
            "1000 dropped",
            "1030 dropped",
            "1130 attempt",
            "1160 attempt"
        ],
        "{log:?}"
    );
}

/// A rate limit of one attempt per second inside a limit, under a retry: the retry 100 ms after
/// a 500 is refused, which ends the call at once; a call at 500 ms is refused before any attempt;
/// one at 1 s goes. With `wait_on_refusal`, the refused retry waits the rate limit's 890 ms and
/// succeeds. The simulator, a `Reliable` (async and blocking) and the tower layers agree.
#[test]
fn a_rate_limit_loaded_from_a_policy_file_ends_or_waits_as_the_simulator() {
    let stack = |wait: bool| {
        format!(
            "Retry(policy: (max_attempts: 3, backoff: (shape: Constant(delay: \"100ms\")), wait_on_refusal: {wait}), \
             inner: Limit(config: (rule: Fixed, initial: 4, min: 4, max: 4), \
             inner: RateLimit(config: (rate: 1, period: \"1s\", burst: 1), inner: {CALL})))"
        )
    };
    // Each call has an answer to spare, so a face that sends what the simulator refuses shows
    // in the logs.
    let calls: Vec<Call> = vec![
        (0, vec![(500, 10), (200, 10)]),
        (500, vec![(200, 10)]),
        (1_000, vec![(200, 10)]),
    ];
    let log = same_decisions(&stack(false), &calls, true);
    assert_eq!(
        log,
        [
            "0 attempt",
            "10 answer Some(Transient)",
            "110 end false",
            "500 end false",
            "1000 attempt",
            "1010 answer None",
            "1010 end true"
        ]
    );
    let (text, _) = scenario(&stack(false), &calls);
    let plan = Plan::from_scenario(&text, "policy-file.ron", "p").unwrap();
    assert_eq!(blocked(&plan, &calls), log, "Reliable::call_blocking");

    let calls: Vec<Call> = vec![(0, vec![(500, 10), (200, 10), (200, 10)])];
    let log = same_decisions(&stack(true), &calls, true);
    assert_eq!(
        log,
        [
            "0 attempt",
            "10 answer Some(Transient)",
            "1000 attempt",
            "1010 answer None",
            "1010 end true"
        ]
    );
}

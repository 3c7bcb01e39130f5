//! The tower layers against `tower-test` mocks, in paused tokio time.
#![cfg(feature = "tower")]

use std::sync::{Arc, Mutex};
use std::time::Duration as StdDuration;

use reliable::observer::Observer;
use reliable::tower::{
    AnyOk, BoxError, BreakerLayer, Deadline, FallbackLayer, GaveUp, HttpPolicy, Open, Policy,
    ReliableConfig, ReliableLayer, RetryLayer, ServedBy, ThrottleLayer, Throttled, TimedOut,
};
use reliable_core::Duration;
use reliable_core::backoff::{BackoffConfig, Jitter, Shape};
use reliable_core::breaker::{BreakerConfig, ProbeRule, State};
use reliable_core::budget::{BudgetConfig, TokenBucketConfig};
use reliable_core::outcome::ErrorClass;
use reliable_core::retry::{GiveUpReason, RetryConfig};
use reliable_core::throttle::ThrottleConfig;
use tower::{Layer, Service, ServiceExt};
use tower_test::mock;

/// Requests are numbers; a response is a status code (>= 500 fails, 429 is throttled with a
/// 2 s hint); requests above 1000 cannot be sent twice.
#[derive(Clone, Copy, Debug)]
struct Codes;

impl reliable::Classify<reliable::tower::BoxError, u16> for Codes {
    fn error(&self, e: &reliable::tower::BoxError) -> reliable_core::outcome::ErrorClass {
        reliable::tower::error_class(e)
    }

    fn ok(&self, res: &u16) -> Option<ErrorClass> {
        match *res {
            429 => Some(ErrorClass::Throttled {
                retry_after: Some(Duration::from_secs(2)),
            }),
            500.. => Some(ErrorClass::Transient),
            _ => None,
        }
    }
}

impl Policy<u32, u16> for Codes {
    fn clone_request(&self, req: &u32) -> Option<u32> {
        (*req <= 1000).then_some(*req)
    }
}

fn consecutive(n: u32, open_s: u64) -> BreakerConfig {
    let mut c = BreakerConfig::reliablekit();
    c.consecutive_failures = Some(n);
    c.failure_rate = None;
    c.open.duration = Duration::from_secs(open_s);
    c.open.growth = 1.0;
    c.open.jitter = 0.0;
    c.half_open.probe_timeout = Duration::from_secs(600);
    c.half_open.rule = ProbeRule::Consecutive { successes: 1 };
    c
}

fn constant(attempts: u32, delay_ms: u64) -> RetryConfig {
    RetryConfig {
        max_attempts: Some(attempts),
        ..RetryConfig::new(BackoffConfig {
            shape: Shape::Constant {
                delay: Duration::from_millis(delay_ms),
            },
            cap: None,
            jitter: Jitter::None,
            first_exponent: 1,
        })
    }
}

#[tokio::test(start_paused = true)]
async fn open_breaker_is_ready_and_fails_in_call_with_retry_after() {
    let (svc, mut handle) = mock::pair::<u32, u16>();
    let mut svc = BreakerLayer::new(consecutive(2, 5), Codes)
        .unwrap()
        .layer(svc);
    for _ in 0..2 {
        let fut = svc.ready().await.unwrap().call(1);
        let (_, send) = handle.next_request().await.unwrap();
        send.send_response(500);
        assert_eq!(fut.await.unwrap(), 500);
    }
    assert_eq!(svc.state(), State::Open);
    // Still ready: poll_ready never fails or stalls because the breaker is open.
    let fut = svc.ready().await.unwrap().call(1);
    let err = fut.await.unwrap_err();
    let open = err.downcast_ref::<Open>().expect("an Open error");
    assert_eq!(open.retry_after, Some(StdDuration::from_secs(5)));
    // The downstream never saw it.
    assert!(
        tokio::time::timeout(StdDuration::from_millis(1), handle.next_request())
            .await
            .is_err()
    );
}

#[tokio::test(start_paused = true)]
async fn the_permit_is_taken_in_call_not_in_poll_ready() {
    let (svc, mut handle) = mock::pair::<u32, u16>();
    let mut cfg = consecutive(1, 5);
    cfg.half_open.max_in_flight = Some(1);
    let mut svc = BreakerLayer::new(cfg, Codes).unwrap().layer(svc);
    let fut = svc.ready().await.unwrap().call(1);
    handle.next_request().await.unwrap().1.send_response(500);
    fut.await.unwrap();
    tokio::time::advance(StdDuration::from_secs(5)).await;
    // Readying many times takes nothing: the single probe slot is still free for a call.
    for _ in 0..5 {
        svc.ready().await.unwrap();
    }
    let probe = svc.call(2);
    assert_eq!(svc.state(), State::HalfOpen);
    handle.next_request().await.unwrap().1.send_response(200);
    assert_eq!(probe.await.unwrap(), 200);
    assert_eq!(svc.state(), State::Closed);
}

#[tokio::test(start_paused = true)]
async fn a_dropped_probe_frees_its_slot_at_once() {
    let (svc, mut handle) = mock::pair::<u32, u16>();
    let mut cfg = consecutive(1, 5);
    cfg.half_open.max_in_flight = Some(1);
    let mut svc = BreakerLayer::new(cfg, Codes).unwrap().layer(svc);
    let fut = svc.ready().await.unwrap().call(1);
    handle.next_request().await.unwrap().1.send_response(500);
    fut.await.unwrap();
    tokio::time::advance(StdDuration::from_secs(5)).await;
    let probe = svc.ready().await.unwrap().call(2);
    let _req = handle.next_request().await.unwrap();
    // The only probe slot is taken: another call is refused.
    let refused = svc.ready().await.unwrap().call(3).await.unwrap_err();
    assert!(refused.is::<Open>());
    // Cancel the probe (a timeout above, a select!): Outcome::Ignored frees the slot now, not
    // after the 600 s probe timeout.
    drop(probe);
    let next = svc.ready().await.unwrap().call(4);
    let (req, send) = handle.next_request().await.unwrap();
    assert_eq!(req, 4);
    send.send_response(200);
    assert_eq!(next.await.unwrap(), 200);
}

#[tokio::test(start_paused = true)]
async fn retries_until_success_with_backoff() {
    let (svc, mut handle) = mock::pair::<u32, u16>();
    let svc = RetryLayer::new(constant(4, 100), Codes).unwrap().layer(svc);
    let start = tokio::time::Instant::now();
    let call = tokio::spawn(svc.oneshot(7));
    for code in [500, 503, 200] {
        let (req, send) = handle.next_request().await.unwrap();
        assert_eq!(req, 7);
        send.send_response(code);
    }
    assert_eq!(call.await.unwrap().unwrap(), 200);
    assert_eq!(start.elapsed(), StdDuration::from_millis(200));
}

#[tokio::test(start_paused = true)]
async fn retry_after_from_the_server_is_honoured_over_a_shorter_backoff() {
    let (svc, mut handle) = mock::pair::<u32, u16>();
    let svc = RetryLayer::new(constant(3, 100), Codes).unwrap().layer(svc);
    let start = tokio::time::Instant::now();
    let call = tokio::spawn(svc.oneshot(1));
    handle.next_request().await.unwrap().1.send_response(429);
    handle.next_request().await.unwrap().1.send_response(200);
    assert_eq!(call.await.unwrap().unwrap(), 200);
    assert_eq!(start.elapsed(), StdDuration::from_secs(2));
}

#[tokio::test(start_paused = true)]
async fn gives_up_at_max_attempts_with_the_last_response_or_a_reason() {
    #[derive(Clone, Debug, Default)]
    struct GiveUps(Arc<Mutex<Vec<&'static str>>>);
    impl Observer for GiveUps {
        fn on_give_up(&self, name: &str, attempts: u32, reason: &'static str) {
            assert_eq!((name, attempts), ("api", 2));
            self.0.lock().unwrap().push(reason);
        }
    }
    let reasons = GiveUps::default();
    let (svc, mut handle) = mock::pair::<u32, u16>();
    let svc = RetryLayer::new(constant(2, 10), Codes)
        .unwrap()
        .named("api")
        .observer(reasons.clone())
        .layer(svc);
    let call = tokio::spawn(svc.clone().oneshot(1));
    handle.next_request().await.unwrap().1.send_response(500);
    handle.next_request().await.unwrap().1.send_response(502);
    // An error response comes back as the response.
    assert_eq!(call.await.unwrap().unwrap(), 502);
    let call = tokio::spawn(svc.oneshot(1));
    for _ in 0..2 {
        let (_, send) = handle.next_request().await.unwrap();
        send.send_error("connection reset");
    }
    let err = call.await.unwrap().unwrap_err();
    let gave_up = err.downcast_ref::<GaveUp>().expect("GaveUp");
    assert_eq!(gave_up.reason, GiveUpReason::MaxAttempts);
    assert_eq!(gave_up.attempts, 2);
    assert_eq!(*reasons.0.lock().unwrap(), vec!["max-attempts"; 2]);
}

#[tokio::test(start_paused = true)]
async fn a_request_that_cannot_be_cloned_is_sent_once() {
    let (svc, mut handle) = mock::pair::<u32, u16>();
    let svc = RetryLayer::new(constant(5, 10), Codes).unwrap().layer(svc);
    let call = tokio::spawn(svc.oneshot(5000));
    handle.next_request().await.unwrap().1.send_response(500);
    assert_eq!(call.await.unwrap().unwrap(), 500);
    let again = tokio::time::timeout(StdDuration::from_secs(1), handle.next_request()).await;
    assert!(!matches!(again, Ok(Some(_))), "the request was sent again");
}

#[tokio::test(start_paused = true)]
async fn the_budget_shared_by_clones_stops_retries() {
    // A token bucket of 2 tokens, 1 per retry, no refill on success: two retries in all.
    let budget = BudgetConfig::TokenBucket(TokenBucketConfig {
        max_tokens: 2.0,
        initial_tokens: None,
        first_try_credit: 0.0,
        success_credit: 0.0,
        retried_success_credit: None,
        failure_cost: 0.0,
        retry_cost: 1.0,
        retry_when: reliable_core::budget::Threshold::AtLeast(1.0),
    });
    let (svc, mut handle) = mock::pair::<u32, u16>();
    let svc = RetryLayer::new(constant(10, 10), Codes)
        .unwrap()
        .budget(budget)
        .unwrap()
        .layer(svc);
    let mut sent = 0;
    let calls: Vec<_> = (0..3)
        .map(|i| tokio::spawn(svc.clone().oneshot(i)))
        .collect();
    while let Ok(Some((_, send))) =
        tokio::time::timeout(StdDuration::from_secs(1), handle.next_request()).await
    {
        sent += 1;
        send.send_response(500);
    }
    for c in calls {
        assert_eq!(c.await.unwrap().unwrap(), 500);
    }
    // Three first tries and the budget's two retries.
    assert_eq!(sent, 5);
}

#[tokio::test(start_paused = true)]
async fn an_attempt_that_runs_out_of_time_is_timed_out_and_retried() {
    let mut cfg = constant(2, 0);
    cfg.attempt_timeout = Some(Duration::from_millis(300));
    let (svc, mut handle) = mock::pair::<u32, u16>();
    let svc = RetryLayer::new(cfg, Codes).unwrap().layer(svc);
    let start = tokio::time::Instant::now();
    let call = tokio::spawn(svc.oneshot(1));
    let _hung = handle.next_request().await.unwrap();
    let _hung_too = handle.next_request().await.unwrap();
    let err = call.await.unwrap().unwrap_err();
    let gave_up = err.downcast_ref::<GaveUp>().expect("GaveUp");
    assert!(gave_up.last.is::<TimedOut>());
    // Nothing below enforces the deadline, so the retry layer drops each attempt itself, 1 ms
    // after it (the grace that lets a timeout below report first).
    assert_eq!(start.elapsed(), StdDuration::from_millis(602));
}

#[tokio::test(start_paused = true)]
async fn the_attempt_deadline_is_handed_to_the_request() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let inner = tower::service_fn(move |req: http::Request<()>| {
        log.lock()
            .unwrap()
            .push(req.extensions().get::<Deadline>().copied());
        async { Ok::<_, BoxError>(http::Response::builder().status(503).body(()).unwrap()) }
    });
    let mut cfg = constant(2, 50);
    cfg.attempt_timeout = Some(Duration::from_millis(300));
    let svc = RetryLayer::new(cfg, HttpPolicy::new())
        .unwrap()
        .layer(inner);
    let res = svc.oneshot(http::Request::new(())).await.unwrap();
    assert_eq!(res.status(), 503);
    // The clock started at 0: attempts at 0 and 50 ms, each with 300 ms.
    let deadlines: Vec<u64> = seen
        .lock()
        .unwrap()
        .iter()
        .map(|d| d.unwrap().0.as_nanos() / 1_000_000)
        .collect();
    assert_eq!(deadlines, vec![300, 350]);
}

#[tokio::test(start_paused = true)]
async fn the_throttle_refuses_locally_once_the_downstream_refuses() {
    let (svc, mut handle) = mock::pair::<u32, u16>();
    let cfg = ThrottleConfig {
        max_rejection: Some(0.9),
        ..ThrottleConfig::google_sre()
    };
    let mut svc = ThrottleLayer::new(cfg, Codes).unwrap().seed(7).layer(svc);
    let mut local = 0;
    for i in 0..200 {
        let fut = svc.ready().await.unwrap().call(i);
        let answered = async {
            let (_, send) = handle.next_request().await.unwrap();
            send.send_response(429);
        };
        match tokio::time::timeout(StdDuration::from_millis(1), answered).await {
            Ok(()) => assert_eq!(fut.await.unwrap(), 429),
            Err(_) => {
                let e = fut.await.unwrap_err();
                assert!(e.is::<Throttled>());
                local += 1;
            }
        }
    }
    // Every answer is a refusal: the rejection probability climbs towards its 0.9 cap.
    assert!(local > 120, "only {local} of 200 refused locally");
    assert!(svc.rejection_probability() > 0.85);
}

#[tokio::test(start_paused = true)]
async fn fallback_answers_and_says_who_served() {
    #[derive(Clone, Copy)]
    struct Http;
    impl reliable::Classify<reliable::tower::BoxError, http::Response<()>> for Http {
        fn error(&self, e: &reliable::tower::BoxError) -> reliable_core::outcome::ErrorClass {
            reliable::tower::error_class(e)
        }

        fn ok(&self, res: &http::Response<()>) -> Option<ErrorClass> {
            res.status()
                .is_server_error()
                .then_some(ErrorClass::Transient)
        }
    }
    impl Policy<u32, http::Response<()>> for Http {
        fn clone_request(&self, r: &u32) -> Option<u32> {
            Some(*r)
        }
    }
    let reply = |code: u16| http::Response::builder().status(code).body(()).unwrap();
    let primary = tower::service_fn(move |x: u32| async move {
        Ok::<_, BoxError>(reply(if x == 0 { 500 } else { 200 }))
    });
    let backup = tower::service_fn(move |_: u32| async move { Ok::<_, BoxError>(reply(200)) });
    let svc = FallbackLayer::new(backup, Http)
        .names("breaker(retry(primary))", "retry(backup)")
        .layer(primary);
    let by = |r: &http::Response<()>| r.extensions().get::<ServedBy>().unwrap().0.to_string();
    let ok = svc.clone().oneshot(1).await.unwrap();
    assert_eq!(by(&ok), "breaker(retry(primary))");
    let saved = svc.oneshot(0).await.unwrap();
    assert_eq!(saved.status(), 200);
    assert_eq!(by(&saved), "retry(backup)");
}

#[tokio::test(start_paused = true)]
async fn an_open_breaker_inside_the_retry_ends_the_call_at_once() {
    let (svc, mut handle) = mock::pair::<u32, u16>();
    let config = ReliableConfig {
        retry: constant(10, 100),
        budget: None,
        breaker: consecutive(3, 60),
        throttle: None,
    };
    let svc = ReliableLayer::new(config, Codes).unwrap().layer(svc);
    let t0 = tokio::time::Instant::now();
    let call = tokio::spawn(svc.oneshot(1));
    for _ in 0..3 {
        handle.next_request().await.unwrap().1.send_response(500);
    }
    // The 3rd failure opened the breaker: the call ends then, refused by the breaker, without
    // sleeping its backoff nor waiting out the 60 s (no deadline, 10 attempts allowed).
    let err = call.await.unwrap().unwrap_err();
    let open = err.downcast_ref::<Open>().expect("the breaker's refusal");
    assert_eq!(
        open.retry_after,
        Some(StdDuration::from_secs(60)),
        "opened by the last answer"
    );
    assert!(
        t0.elapsed() < StdDuration::from_secs(1),
        "{:?}",
        t0.elapsed()
    );
}

#[tokio::test(start_paused = true)]
async fn a_policy_that_waits_on_refusals_waits_only_within_its_deadline() {
    let run = |deadline: Option<u64>| async move {
        let (svc, mut handle) = mock::pair::<u32, u16>();
        let config = ReliableConfig {
            retry: RetryConfig {
                wait_on_refusal: true,
                max_server_delay: Duration::from_secs(60),
                deadline: deadline.map(Duration::from_secs),
                ..constant(10, 100)
            },
            budget: None,
            breaker: consecutive(3, 60),
            throttle: None,
        };
        let svc = ReliableLayer::new(config, Codes).unwrap().layer(svc);
        let t0 = tokio::time::Instant::now();
        let call = tokio::spawn(svc.oneshot(1));
        for _ in 0..3 {
            handle.next_request().await.unwrap().1.send_response(500);
        }
        if deadline.is_none() {
            // Waits for the breaker (60 s), then its probe succeeds.
            handle.next_request().await.unwrap().1.send_response(200);
        }
        let out = call.await.unwrap();
        (out.map_err(|e| e.is::<Open>()), t0.elapsed())
    };
    let (out, took) = run(None).await;
    assert_eq!(out, Ok(200));
    assert!(took >= StdDuration::from_secs(60), "{took:?}");
    // A 10 s deadline: waiting 60 s would pass it, so the call ends with the refusal at once.
    let (out, took) = run(Some(10)).await;
    assert_eq!(out, Err(true));
    assert!(took < StdDuration::from_secs(1), "{took:?}");
}

#[test]
fn invalid_configs_are_refused_naming_the_field() {
    let mut bad = constant(3, 10);
    bad.max_attempts = Some(0);
    let e = RetryLayer::new(bad, AnyOk).unwrap_err();
    assert_eq!(e.field, "max_attempts");
    let mut b = BreakerConfig::reliablekit();
    b.open.duration = Duration::ZERO;
    assert!(BreakerLayer::new(b, AnyOk).is_err());
}

/// A downstream that answers every request with `status` and counts the requests.
fn answering(
    status: u16,
    sent: &Arc<std::sync::atomic::AtomicU32>,
) -> impl Service<u32, Response = u16, Error = BoxError, Future: Send> + Clone + Send + 'static {
    let sent = sent.clone();
    tower::service_fn(move |_: u32| {
        sent.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        async move { Ok::<u16, BoxError>(status) }
    })
}

#[derive(Debug)]
struct Quiet;
impl Observer for Quiet {}

#[tokio::test(start_paused = true)]
async fn no_breaker_setter_undoes_shared() {
    type Setter = fn(BreakerLayer<Codes>) -> BreakerLayer<Codes>;
    let setters: [(&str, Setter); 5] = [
        ("named", |l| l.named("api")),
        ("seed", |l| l.seed(3)),
        ("observer", |l| l.observer(Quiet)),
        ("shadow", |l| l.shadow()),
        ("with_time", |l| {
            l.with_time(
                reliable::clock::TokioClock::new(),
                reliable::sleep::TokioSleep,
            )
        }),
    ];
    let sent = Arc::new(std::sync::atomic::AtomicU32::new(0));
    for (name, set) in setters {
        for layer in [
            set(BreakerLayer::new(consecutive(1, 5), Codes)
                .unwrap()
                .shared()),
            set(BreakerLayer::new(consecutive(1, 5), Codes).unwrap()).shared(),
        ] {
            let mut a = layer.layer(answering(500, &sent));
            let b = layer.layer(answering(500, &sent));
            a.ready().await.unwrap().call(1).await.unwrap();
            // One failure through `a` opened the breaker `b` shares.
            assert_eq!(b.state(), State::Open, "`{name}` undid `shared()`");
        }
    }
}

#[tokio::test(start_paused = true)]
async fn no_retry_setter_undoes_shared() {
    // Two retries in all, for every service of a shared layer.
    let budget = BudgetConfig::TokenBucket(TokenBucketConfig {
        max_tokens: 2.0,
        initial_tokens: None,
        first_try_credit: 0.0,
        success_credit: 0.0,
        retried_success_credit: None,
        failure_cost: 0.0,
        retry_cost: 1.0,
        retry_when: reliable_core::budget::Threshold::AtLeast(1.0),
    });
    type Setter = fn(RetryLayer<Codes>) -> RetryLayer<Codes>;
    let setters: [(&str, Setter); 4] = [
        ("named", |l| l.named("api")),
        ("seed", |l| l.seed(3)),
        ("observer", |l| l.observer(Quiet)),
        ("with_time", |l| {
            l.with_time(
                reliable::clock::TokioClock::new(),
                reliable::sleep::TokioSleep,
            )
        }),
    ];
    let layers = setters.into_iter().flat_map(|(name, set)| {
        let with_budget = RetryLayer::new(constant(10, 10), Codes)
            .unwrap()
            .budget(budget)
            .unwrap();
        [
            (name, set(with_budget.clone().shared())),
            (name, set(with_budget).shared()),
        ]
    });
    // `budget` itself, after `shared`.
    let budget_last = RetryLayer::new(constant(10, 10), Codes)
        .unwrap()
        .shared()
        .budget(budget)
        .unwrap();
    for (name, layer) in layers.chain([("budget", budget_last)]) {
        let sent = Arc::new(std::sync::atomic::AtomicU32::new(0));
        let a = layer.layer(answering(500, &sent));
        let b = layer.layer(answering(500, &sent));
        assert_eq!(a.oneshot(1).await.unwrap(), 500);
        assert_eq!(b.oneshot(2).await.unwrap(), 500);
        // `a` took both retries of the one budget: `b` got its first try only.
        let sent = sent.load(std::sync::atomic::Ordering::Relaxed);
        assert_eq!(sent, 4, "`{name}` undid `shared()`");
    }
}

#[tokio::test(start_paused = true)]
async fn no_throttle_setter_undoes_shared() {
    let cfg = ThrottleConfig {
        max_rejection: Some(0.9),
        ..ThrottleConfig::google_sre()
    };
    type Setter = fn(ThrottleLayer<Codes>) -> ThrottleLayer<Codes>;
    let setters: [(&str, Setter); 4] = [
        ("named", |l| l.named("api")),
        ("seed", |l| l.seed(3)),
        ("observer", |l| l.observer(Quiet)),
        ("with_time", |l| {
            l.with_time(
                reliable::clock::TokioClock::new(),
                reliable::sleep::TokioSleep,
            )
        }),
    ];
    let sent = Arc::new(std::sync::atomic::AtomicU32::new(0));
    for (name, set) in setters {
        for layer in [
            set(ThrottleLayer::new(cfg, Codes).unwrap().shared()),
            set(ThrottleLayer::new(cfg, Codes).unwrap()).shared(),
        ] {
            let mut a = layer.layer(answering(429, &sent));
            let b = layer.layer(answering(429, &sent));
            for i in 0..50 {
                let _ = a.ready().await.unwrap().call(i).await;
            }
            // `a`'s refused answers raised the throttle `b` shares.
            assert!(b.rejection_probability() > 0.5, "`{name}` undid `shared()`");
        }
    }
}

#[tokio::test(start_paused = true)]
async fn the_reliable_layer_stays_shared_whatever_the_order() {
    let config = ReliableConfig {
        retry: constant(1, 0),
        budget: None,
        breaker: consecutive(1, 5),
        throttle: None,
    };
    let new = || ReliableLayer::new(config, Codes).unwrap();
    let clock = || reliable::clock::TokioClock::new();
    for layer in [
        new().shared().observer(Quiet),
        new()
            .shared()
            .with_time(clock(), reliable::sleep::TokioSleep),
        new().observer(Quiet).shared(),
    ] {
        let sent = Arc::new(std::sync::atomic::AtomicU32::new(0));
        let a = layer.layer(answering(500, &sent));
        let b = layer.layer(answering(500, &sent));
        assert_eq!(a.oneshot(1).await.unwrap(), 500);
        // The breaker `a` opened refuses `b`'s call before it is sent.
        assert!(b.oneshot(2).await.unwrap_err().is::<Open>());
        assert_eq!(sent.load(std::sync::atomic::Ordering::Relaxed), 1);
    }
}

#[tokio::test(start_paused = true)]
async fn a_breaker_layer_in_shadow_mode_lets_every_request_through_and_reports() {
    #[derive(Clone, Debug, Default)]
    struct WouldReject(Arc<Mutex<u32>>);
    impl Observer for WouldReject {
        fn on_would_reject(&self, _: &str, _: reliable_core::breaker::RejectReason) {
            *self.0.lock().unwrap() += 1;
        }
    }
    let (svc, mut handle) = mock::pair::<u32, u16>();
    let seen = WouldReject::default();
    let mut svc = BreakerLayer::new(consecutive(2, 5), Codes)
        .unwrap()
        .observer(seen.clone())
        .shadow()
        .layer(svc);
    // Two failures open it; the next three calls would be rejected, and all reach the downstream.
    for i in 0..5 {
        let fut = svc.ready().await.unwrap().call(1);
        let (_, send) = tokio::time::timeout(StdDuration::from_millis(1), handle.next_request())
            .await
            .unwrap_or_else(|_| panic!("call {i} did not reach the downstream"))
            .unwrap();
        send.send_response(500);
        assert_eq!(fut.await.unwrap(), 500, "call {i}");
    }
    assert_eq!(svc.state(), State::Open);
    assert_eq!(*seen.0.lock().unwrap(), 3);
}

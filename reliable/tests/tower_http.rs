//! The tower layers over a real HTTP client (hyper) against a real hyper server on 127.0.0.1.
#![cfg(feature = "tower")]

mod support;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration as StdDuration;

use bytes::Bytes;
use http_body_util::Empty;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use reliable::tower::{HttpPolicy, Open, ReliableConfig, ReliableLayer};
use reliable_core::Duration;
use reliable_core::backoff::{BackoffConfig, Jitter, Shape};
use reliable_core::breaker::BreakerConfig;
use reliable_core::retry::RetryConfig;
use support::Reply;
use tower::{Layer, ServiceExt};

/// The shared scripted server, answering `answer(n)`: a status and a delay, no headers.
async fn server(
    answer: impl Fn(u32) -> (u16, u64) + Send + Sync + 'static,
) -> (SocketAddr, Arc<AtomicU32>) {
    support::server(move |n| {
        let (status, delay_ms) = answer(n);
        Reply {
            status,
            headers: &[],
            delay_ms,
        }
    })
    .await
}

fn config(attempts: u32, timeout_ms: u64) -> ReliableConfig {
    let mut breaker = BreakerConfig::reliablekit();
    breaker.consecutive_failures = Some(3);
    breaker.failure_rate = None;
    breaker.open.duration = Duration::from_secs(30);
    ReliableConfig {
        retry: RetryConfig {
            max_attempts: Some(attempts),
            attempt_timeout: Some(Duration::from_millis(timeout_ms)),
            ..RetryConfig::new(BackoffConfig {
                shape: Shape::Constant {
                    delay: Duration::from_millis(20),
                },
                cap: None,
                jitter: Jitter::None,
                first_exponent: 1,
            })
        },
        budget: None,
        breaker,
        throttle: None,
    }
}

fn get(addr: SocketAddr) -> http::Request<Empty<Bytes>> {
    http::Request::get(format!("http://{addr}/"))
        .body(Empty::new())
        .unwrap()
}

#[tokio::test]
async fn retries_503s_over_real_http_until_200() {
    let (addr, seen) = server(|n| (if n < 2 { 503 } else { 200 }, 0)).await;
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let svc = ReliableLayer::new(config(4, 1_000), HttpPolicy::new())
        .unwrap()
        .layer(client);
    let res = svc.oneshot(get(addr)).await.unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(seen.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn a_slow_attempt_times_out_and_the_retry_succeeds() {
    // The first request takes 5 s; the attempt timeout is 200 ms.
    let (addr, seen) = server(|n| (200, if n == 0 { 5_000 } else { 0 })).await;
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let svc = ReliableLayer::new(config(3, 200), HttpPolicy::new())
        .unwrap()
        .layer(client);
    let start = std::time::Instant::now();
    let res = svc.oneshot(get(addr)).await.unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(seen.load(Ordering::SeqCst), 2);
    assert!(start.elapsed() < StdDuration::from_secs(4));
}

#[tokio::test]
async fn an_open_breaker_keeps_calls_off_the_server() {
    let (addr, seen) = server(|_| (500, 0)).await;
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    // One attempt per call: the breaker sees each 500 once.
    let svc = ReliableLayer::new(config(1, 1_000), HttpPolicy::new())
        .unwrap()
        .layer(client);
    for _ in 0..3 {
        let res = svc.clone().oneshot(get(addr)).await.unwrap();
        assert_eq!(res.status(), 500);
    }
    for _ in 0..10 {
        let err = svc.clone().oneshot(get(addr)).await.unwrap_err();
        let open = err
            .downcast_ref::<reliable::tower::GaveUp>()
            .map_or(&err, |g| &g.last);
        assert!(open.is::<Open>(), "{err}");
    }
    assert_eq!(seen.load(Ordering::SeqCst), 3);
}

/// A `ReliableLayer` around a real HTTP client, with the breaker open and no deadline: a call
/// that may make 5 attempts (no deadline at all) answers with the breaker's refusal within
/// milliseconds, not after the breaker's 30 s open time.
#[tokio::test]
async fn an_open_breaker_inside_the_retry_answers_within_milliseconds() {
    let (addr, seen) = server(|_| (500, 0)).await;
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let mut c = config(5, 1_000);
    c.retry.attempt_timeout = None;
    assert_eq!(c.retry.deadline, None);
    let svc = ReliableLayer::new(c, HttpPolicy::new())
        .unwrap()
        .layer(client);
    // The first call's three 500s open the breaker; its 4th attempt is refused and ends it.
    let start = std::time::Instant::now();
    let err = svc.clone().oneshot(get(addr)).await.unwrap_err();
    assert!(err.is::<Open>(), "{err}");
    assert_eq!(seen.load(Ordering::SeqCst), 3);
    for _ in 0..10 {
        let start = std::time::Instant::now();
        let err = svc.clone().oneshot(get(addr)).await.unwrap_err();
        let open = err
            .downcast_ref::<Open>()
            .expect("the breaker's own refusal");
        assert!(open.retry_after > Some(StdDuration::from_secs(29)));
        assert!(
            start.elapsed() < StdDuration::from_millis(100),
            "{:?}",
            start.elapsed()
        );
    }
    assert!(
        start.elapsed() < StdDuration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(seen.load(Ordering::SeqCst), 3);
}

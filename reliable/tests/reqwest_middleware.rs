//! `ReliableMiddleware` in a `reqwest-middleware` client against a hyper server on 127.0.0.1.
#![cfg(feature = "reqwest")]

mod support;

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use reliable::Reliable;
use reliable::middleware::{Refused, ReliableMiddleware};
use reqwest_middleware::{ClientBuilder, ClientWithMiddleware};
use support::{Reply, server};

/// A reqwest client, ring installed as rustls's crypto provider first: the workspace builds
/// reqwest with `rustls-no-provider` (the MCP server's choice), whose clients need one, as an
/// application with that feature installs one (a second install is a no-op).
fn http_client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder().no_proxy().build().unwrap()
}

fn client(rel: Reliable) -> ClientWithMiddleware {
    let inner = http_client();
    ClientBuilder::new(inner)
        .with(ReliableMiddleware::new(rel))
        .build()
}

fn quick(name: &str) -> reliable::Builder {
    Reliable::builder(name)
        .base_delay(Duration::from_millis(1))
        .jitter(0.0)
        .timeout(Duration::from_secs(5))
}

fn refusal(err: &reqwest_middleware::Error) -> Refused {
    match err {
        reqwest_middleware::Error::Middleware(e) => *e.downcast_ref::<Refused>().unwrap(),
        other => panic!("not a refusal: {other:?}"),
    }
}

#[tokio::test]
async fn a_503_with_retry_after_is_waited_out_then_retried() {
    let (addr, seen) = server(|n| match n {
        0 => Reply {
            status: 503,
            headers: &[("retry-after-ms", "150")],
            delay_ms: 0,
        },
        _ => Reply {
            status: 200,
            headers: &[],
            delay_ms: 0,
        },
    })
    .await;
    let c = client(
        quick("retry-after")
            .no_breaker()
            .attempts(3)
            .build()
            .unwrap(),
    );
    let t0 = Instant::now();
    let resp = c.get(format!("http://{addr}/")).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(seen.load(Ordering::SeqCst), 2);
    assert!(
        t0.elapsed() >= Duration::from_millis(150),
        "{:?}",
        t0.elapsed()
    );
}

#[tokio::test]
async fn the_last_429_comes_back_after_the_attempts() {
    let (addr, seen) = server(|_| Reply {
        status: 429,
        headers: &[("retry-after-ms", "5")],
        delay_ms: 0,
    })
    .await;
    let c = client(quick("throttled").no_breaker().attempts(3).build().unwrap());
    let resp = c.get(format!("http://{addr}/")).send().await.unwrap();
    assert_eq!(resp.status(), 429);
    assert_eq!(resp.headers()["retry-after-ms"], "5");
    assert_eq!(seen.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn x_should_retry_false_is_not_retried() {
    let (addr, seen) = server(|_| Reply {
        status: 503,
        headers: &[("x-should-retry", "false")],
        delay_ms: 0,
    })
    .await;
    let c = client(
        quick("dont-retry")
            .no_breaker()
            .attempts(3)
            .build()
            .unwrap(),
    );
    let resp = c.get(format!("http://{addr}/")).send().await.unwrap();
    assert_eq!(resp.status(), 503);
    assert_eq!(seen.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn an_open_breaker_answers_at_once_without_calling() {
    let (addr, seen) = server(|_| Reply {
        status: 500,
        headers: &[],
        delay_ms: 0,
    })
    .await;
    let rel = quick("breaker")
        .attempts(1)
        .consecutive_failures(2)
        .cooldown(Duration::from_secs(30))
        .build()
        .unwrap();
    let c = client(rel);
    let url = format!("http://{addr}/");
    for _ in 0..2 {
        let resp = c.get(&url).send().await.unwrap();
        assert_eq!(resp.status(), 500);
    }
    assert_eq!(seen.load(Ordering::SeqCst), 2);
    let t0 = Instant::now();
    let err = c.get(&url).send().await.unwrap_err();
    let elapsed = t0.elapsed();
    match refusal(&err) {
        Refused::Open {
            retry_after: Some(after),
        } => assert!(after > Duration::from_secs(20)),
        other => panic!("{other:?}"),
    }
    assert_eq!(seen.load(Ordering::SeqCst), 2, "the server was called");
    assert!(elapsed < Duration::from_millis(50), "{elapsed:?}");
}

#[tokio::test]
async fn a_slow_server_times_out_each_attempt() {
    let (addr, seen) = server(|_| Reply {
        status: 200,
        headers: &[],
        delay_ms: 2_000,
    })
    .await;
    let rel = quick("slow")
        .no_breaker()
        .attempts(2)
        .timeout(Duration::from_millis(100))
        .build()
        .unwrap();
    let c = client(rel);
    let t0 = Instant::now();
    let err = c.get(format!("http://{addr}/")).send().await.unwrap_err();
    assert_eq!(refusal(&err), Refused::Timeout { attempts: 2 });
    assert!(
        t0.elapsed() < Duration::from_millis(1_500),
        "{:?}",
        t0.elapsed()
    );
    assert_eq!(seen.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn reqwest_errors_classify_through_the_core_table() {
    use reliable::ByType;
    use reliable_core::outcome::ErrorClass;
    // A request that cannot be built is no answer: fatal.
    let built = http_client().get("not a url").build().unwrap_err();
    assert_eq!(ByType.error_of(&built), ErrorClass::Fatal);
    // A refused connection (a port just freed on loopback): transient, as the core says.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let client = http_client();
    let refused = client
        .get(format!("http://{addr}/"))
        .send()
        .await
        .unwrap_err();
    assert_eq!(ByType.error_of(&refused), ErrorClass::Transient);
    // A status turned into an error by error_for_status: by the status (503: an overload answer).
    let (addr, _) = server(|_| Reply {
        status: 503,
        headers: &[],
        delay_ms: 0,
    })
    .await;
    let resp = client.get(format!("http://{addr}/")).send().await.unwrap();
    let status = resp.error_for_status().unwrap_err();
    assert_eq!(
        ByType.error_of(&status),
        ErrorClass::Throttled { retry_after: None }
    );
}

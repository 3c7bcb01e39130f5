//! `ChaosMiddleware` in a `reqwest-middleware` client, behind `ReliableMiddleware`, against a
//! hyper server on 127.0.0.1.
#![cfg(feature = "reqwest")]

mod support;

use std::sync::atomic::Ordering;
use std::time::Duration;

use reliable::Reliable;
use reliable::chaos::ChaosSwitch;
use reliable::chaos::reqwest::ChaosMiddleware;
use reliable::middleware::ReliableMiddleware;
use reliable_core::chaos::{ChaosConfig, FaultConfig, Injected, Strategy};
use reqwest_middleware::ClientBuilder;
use support::{Reply, server};

/// A reqwest client, ring installed as rustls's crypto provider first: the workspace builds
/// reqwest with `rustls-no-provider` (the MCP server's choice), whose clients need one, as an
/// application with that feature installs one (a second install is a no-op).
fn http_client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder().no_proxy().build().unwrap()
}

fn ok(_: u32) -> Reply {
    Reply {
        status: 200,
        headers: &[],
        delay_ms: 0,
    }
}

#[tokio::test]
async fn an_injected_503_is_retried_by_the_reliable_middleware_like_a_real_one() {
    let (addr, seen) = server(ok).await;
    let switch = ChaosSwitch::new(
        "api",
        ChaosConfig {
            fault: Some(FaultConfig {
                rate: 1.0,
                enabled: true,
                seed: 0,
                answer: Injected::Status {
                    status: 503,
                    retry_after: Some(reliable_core::Duration::from_millis(20)),
                    should_retry: None,
                },
            }),
            ..ChaosConfig::OFF
        },
    )
    .unwrap();
    let rel = Reliable::builder("api")
        .no_breaker()
        .attempts(3)
        .base_delay(Duration::from_millis(1))
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let client = ClientBuilder::new(http_client())
        .with(ReliableMiddleware::new(rel))
        .with(ChaosMiddleware::new(switch.clone()))
        .build();
    let res = client.get(format!("http://{addr}/")).send().await.unwrap();
    assert_eq!(
        res.status(),
        503,
        "the last injected answer, as a server's would be"
    );
    assert_eq!(res.headers()["retry-after-ms"], "20");
    assert_eq!(switch.attempts(), 3, "each attempt met the chaos layer");
    assert_eq!(seen.load(Ordering::SeqCst), 0);

    switch.set_enabled(Strategy::Fault, false);
    let res = client.get(format!("http://{addr}/")).send().await.unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(seen.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn an_injected_reset_is_a_transport_error_retried_until_the_server_answers() {
    let (addr, seen) = server(ok).await;
    // Seed 0 at rate 0.5: the attempts the core's draw hits.
    let config = ChaosConfig {
        fault: Some(FaultConfig {
            rate: 0.5,
            enabled: true,
            seed: 0,
            answer: Injected::Reset,
        }),
        ..ChaosConfig::OFF
    };
    let core = reliable_core::chaos::Chaos::new(config).unwrap();
    let hit = |n| core.decide(n, core.enabled()).answer.is_some();
    let first_miss = (0..64).find(|&n| !hit(n)).unwrap();
    let rel = Reliable::builder("api")
        .no_breaker()
        .attempts(first_miss as u32 + 1)
        .base_delay(Duration::from_millis(1))
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let client = ClientBuilder::new(http_client())
        .with(ReliableMiddleware::new(rel))
        .with(ChaosMiddleware::new(
            ChaosSwitch::new("api", config).unwrap(),
        ))
        .build();
    let res = client.get(format!("http://{addr}/")).send().await.unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(seen.load(Ordering::SeqCst), 1);
}

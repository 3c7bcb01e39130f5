//! The process-wide chaos kill switch (its own test binary: it flips a global).
#![cfg(feature = "tower")]

use reliable::chaos::tower::{ChaosLayer, HttpAnswers, TimelineLayer};
use reliable::chaos::{ChaosSwitch, ClientFault, FaultWindow, kill_all, killed};
use reliable_core::chaos::{ChaosConfig, FaultConfig, Injected};
use tower::{Layer, Service, ServiceExt, service_fn};

fn backend() -> impl Service<
    http::Request<()>,
    Response = http::Response<String>,
    Error = std::io::Error,
    Future: Send,
> + Clone {
    service_fn(|_: http::Request<()>| async {
        Ok::<_, std::io::Error>(http::Response::new(String::from("real")))
    })
}

#[tokio::test]
async fn the_kill_switch_stops_every_layer_and_lets_them_go_again() {
    let switch = ChaosSwitch::new(
        "api",
        ChaosConfig {
            fault: Some(FaultConfig {
                rate: 1.0,
                enabled: true,
                seed: 0,
                answer: Injected::Status {
                    status: 500,
                    retry_after: None,
                    should_retry: None,
                },
            }),
            ..ChaosConfig::OFF
        },
    )
    .unwrap();
    let mut chaos = ChaosLayer::new(switch.clone(), HttpAnswers).layer(backend());
    let outage = vec![FaultWindow {
        from: reliable_core::Duration::ZERO,
        until: reliable_core::Duration::from_secs(3600),
        fault: ClientFault::Outage { hang: false },
    }];
    let mut timeline = TimelineLayer::from_now(outage, 0, HttpAnswers)
        .unwrap()
        .layer(backend());
    assert!(!killed());
    let r = chaos
        .ready()
        .await
        .unwrap()
        .call(http::Request::new(()))
        .await
        .unwrap();
    assert_eq!(r.status(), 500);
    let r = timeline
        .ready()
        .await
        .unwrap()
        .call(http::Request::new(()))
        .await
        .unwrap();
    assert_eq!(r.status(), 503);

    kill_all(true);
    assert!(killed());
    for _ in 0..10 {
        let r = chaos
            .ready()
            .await
            .unwrap()
            .call(http::Request::new(()))
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        let r = timeline
            .ready()
            .await
            .unwrap()
            .call(http::Request::new(()))
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
    }
    assert!(switch.decide().is_none());

    kill_all(false);
    let r = chaos
        .ready()
        .await
        .unwrap()
        .call(http::Request::new(()))
        .await
        .unwrap();
    assert_eq!(r.status(), 500);
    let r = timeline
        .ready()
        .await
        .unwrap()
        .call(http::Request::new(()))
        .await
        .unwrap();
    assert_eq!(r.status(), 503);
}

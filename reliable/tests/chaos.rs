//! Chaos layers: the four strategies through the tower layer, their switches and events, the same
//! attempts hit for the same seed, a scenario's fault timeline replayed in paused time, and the
//! scenario loader's refusals.
#![cfg(feature = "tower")]

use std::sync::atomic::{AtomicU32, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use reliable::Classify;
use reliable::chaos::tower::{ChaosLayer, HttpAnswers, TimelineLayer};
use reliable::chaos::{ChaosEvent, ChaosSwitch, ClientFault, FaultWindow};
use reliable::observer::Observer;
use reliable::tower::{BoxError, HttpPolicy, error_class};
use reliable_core::chaos::{
    BehaviorConfig, ChaosConfig, Delay, FaultConfig, Injected, LatencyConfig, OutcomeConfig,
    Strategy,
};
use reliable_core::outcome::ErrorClass;
use tower::{Layer, Service, ServiceExt, service_fn};

type Res = http::Response<String>;

fn backend() -> (
    impl Service<http::Request<()>, Response = Res, Error = std::io::Error, Future: Send> + Clone,
    Arc<AtomicU32>,
) {
    let seen = Arc::new(AtomicU32::new(0));
    let s = seen.clone();
    let svc = service_fn(move |_: http::Request<()>| {
        s.fetch_add(1, SeqCst);
        async { Ok::<_, std::io::Error>(http::Response::new(String::from("real"))) }
    });
    (svc, seen)
}

fn fault(rate: f64, enabled: bool, answer: Injected) -> ChaosConfig {
    ChaosConfig {
        fault: Some(FaultConfig {
            rate,
            enabled,
            seed: 11,
            answer,
        }),
        ..ChaosConfig::OFF
    }
}

const BUSY: Injected = Injected::Status {
    status: 503,
    retry_after: Some(reliable_core::Duration::from_millis(2500)),
    should_retry: None,
};

async fn send<S>(svc: &mut S) -> Result<Res, BoxError>
where
    S: Service<http::Request<()>, Response = Res, Error = BoxError>,
{
    svc.ready().await?.call(http::Request::new(())).await
}

#[derive(Debug, Default)]
struct Log(Mutex<Vec<(String, &'static str, u64)>>);

#[derive(Debug, Default, Clone)]
struct Events(Arc<Log>);

impl Observer for Events {
    fn on_chaos(&self, name: &str, event: &ChaosEvent) {
        self.0
            .0
            .lock()
            .unwrap()
            .push((name.to_string(), event.strategy.event(), event.attempt));
    }
}

#[tokio::test]
async fn an_injected_503_is_a_real_response_read_by_the_answer_table() {
    let (inner, seen) = backend();
    let switch = ChaosSwitch::new("api", fault(1.0, true, BUSY)).unwrap();
    let mut svc = ChaosLayer::new(switch, HttpAnswers).layer(inner);
    let res = send(&mut svc).await.unwrap();
    assert_eq!(res.status(), 503);
    assert_eq!(res.headers()["retry-after"], "3");
    assert_eq!(res.headers()["retry-after-ms"], "2500");
    assert_eq!(
        HttpPolicy::new().ok(&res),
        Some(ErrorClass::Throttled {
            retry_after: Some(reliable_core::Duration::from_millis(2500))
        })
    );
    assert_eq!(seen.load(SeqCst), 0, "a fault answers without calling");
}

#[tokio::test]
async fn an_injected_reset_is_a_transient_transport_error() {
    let (inner, _) = backend();
    let switch = ChaosSwitch::new("api", fault(1.0, true, Injected::Reset)).unwrap();
    let mut svc = ChaosLayer::new(switch, HttpAnswers).layer(inner);
    let err = send(&mut svc).await.unwrap_err();
    let io = err.downcast_ref::<std::io::Error>().unwrap();
    assert_eq!(io.kind(), std::io::ErrorKind::ConnectionReset);
    assert_eq!(error_class(&err), ErrorClass::Transient);
}

#[tokio::test(start_paused = true)]
async fn a_hang_is_ended_only_by_a_timeout_and_latency_waits() {
    let (inner, seen) = backend();
    let switch = ChaosSwitch::new("api", fault(1.0, true, Injected::Hang)).unwrap();
    let mut svc = ChaosLayer::new(switch, HttpAnswers).layer(inner.clone());
    let r = tokio::time::timeout(Duration::from_secs(3600), send(&mut svc)).await;
    assert!(r.is_err(), "a hang never answers");

    let slow = ChaosConfig {
        latency: Some(LatencyConfig {
            rate: 1.0,
            enabled: true,
            seed: 0,
            delay: Delay::Fixed {
                delay: reliable_core::Duration::from_millis(700),
            },
        }),
        ..ChaosConfig::OFF
    };
    let mut svc = ChaosLayer::new(ChaosSwitch::new("api", slow).unwrap(), HttpAnswers).layer(inner);
    let t0 = tokio::time::Instant::now();
    let res = send(&mut svc).await.unwrap();
    assert_eq!(res.body(), "real");
    assert_eq!(t0.elapsed(), Duration::from_millis(700));
    assert_eq!(seen.load(SeqCst), 1);
}

#[tokio::test]
async fn the_switch_flips_at_run_time_and_off_passes_everything() {
    let (inner, seen) = backend();
    let switch = ChaosSwitch::new("api", fault(1.0, false, BUSY)).unwrap();
    let mut svc = ChaosLayer::new(switch.clone(), HttpAnswers).layer(inner);
    for _ in 0..5 {
        assert_eq!(send(&mut svc).await.unwrap().status(), 200);
    }
    assert_eq!(switch.attempts(), 0, "off: nothing is counted or drawn");
    switch.set_enabled(Strategy::Fault, true);
    assert_eq!(send(&mut svc).await.unwrap().status(), 503);
    switch.set_enabled(Strategy::Fault, false);
    assert_eq!(send(&mut svc).await.unwrap().status(), 200);
    // A strategy the config lacks cannot be switched on.
    switch.set_enabled(Strategy::Latency, true);
    assert!(switch.decide().is_none());
    assert_eq!(seen.load(SeqCst), 6);
}

#[tokio::test]
async fn the_same_seed_hits_the_same_attempts_in_every_layer() {
    let pattern = |_: ()| async {
        let (inner, _) = backend();
        let switch = ChaosSwitch::new("api", fault(0.3, true, Injected::Reset)).unwrap();
        let mut svc = ChaosLayer::new(switch, HttpAnswers).layer(inner);
        let mut hits = Vec::new();
        for n in 0..200u64 {
            if send(&mut svc).await.is_err() {
                hits.push(n);
            }
        }
        hits
    };
    let a = pattern(()).await;
    let b = pattern(()).await;
    assert_eq!(a, b);
    // The core's decision, attempt by attempt: what every other face reproduces.
    let core = reliable_core::chaos::Chaos::new(fault(0.3, true, Injected::Reset)).unwrap();
    let want: Vec<u64> = (0..200)
        .filter(|&n| core.decide(n, core.enabled()).answer.is_some())
        .collect();
    assert_eq!(a, want);
    assert!((40..80).contains(&a.len()), "{}", a.len());
}

#[tokio::test]
async fn outcome_and_behavior_are_injected_and_every_injection_is_an_event() {
    let (inner, seen) = backend();
    let events = Events::default();
    let calls = Arc::new(AtomicU32::new(0));
    let c = calls.clone();
    let config = ChaosConfig {
        outcome: Some(OutcomeConfig {
            rate: 1.0,
            enabled: true,
            seed: 0,
            answer: Injected::Status {
                status: 204,
                retry_after: None,
                should_retry: None,
            },
        }),
        behavior: Some(BehaviorConfig {
            rate: 1.0,
            enabled: true,
            seed: 0,
        }),
        ..ChaosConfig::OFF
    };
    let switch = ChaosSwitch::builder("api", config)
        .observer(events.clone())
        .behavior(move || {
            c.fetch_add(1, SeqCst);
        })
        .build()
        .unwrap();
    let mut svc = ChaosLayer::new(switch, HttpAnswers).layer(inner);
    for _ in 0..3 {
        assert_eq!(send(&mut svc).await.unwrap().status(), 204);
    }
    assert_eq!(calls.load(SeqCst), 3);
    assert_eq!(seen.load(SeqCst), 0);
    let got = events.0.0.lock().unwrap().clone();
    assert_eq!(got.len(), 6);
    assert_eq!(got[0], ("api".into(), "Chaos.OnBehavior", 0));
    assert_eq!(got[1], ("api".into(), "Chaos.OnOutcome", 0));
    assert_eq!(got[5], ("api".into(), "Chaos.OnOutcome", 2));
}

#[test]
fn bad_configs_are_refused_with_the_field() {
    let err = ChaosSwitch::new("api", fault(2.0, true, BUSY)).unwrap_err();
    assert_eq!(err.to_string(), "fault.rate: 2 is not a fraction in [0, 1]");
}

fn w(from_ms: u64, until_ms: u64, fault: ClientFault) -> FaultWindow {
    FaultWindow {
        from: reliable_core::Duration::from_millis(from_ms),
        until: reliable_core::Duration::from_millis(until_ms),
        fault,
    }
}

/// A backend that answers after 100 ms.
fn slow_backend() -> (
    impl Service<http::Request<()>, Response = Res, Error = std::io::Error, Future: Send> + Clone,
    Arc<AtomicU32>,
) {
    let seen = Arc::new(AtomicU32::new(0));
    let s = seen.clone();
    let svc = service_fn(move |_: http::Request<()>| {
        let s = s.clone();
        async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            s.fetch_add(1, SeqCst);
            Ok::<_, std::io::Error>(http::Response::new(String::from("real")))
        }
    });
    (svc, seen)
}

#[tokio::test(start_paused = true)]
async fn a_timeline_plays_each_fault_by_wall_clock() {
    let faults = vec![
        w(1_000, 2_000, ClientFault::Outage { hang: false }),
        w(
            3_000,
            4_000,
            ClientFault::Throttle {
                share: 1.0,
                retry_after: reliable_core::Duration::from_secs(7),
            },
        ),
        w(5_000, 6_000, ClientFault::ErrorRate { rate: 1.0 }),
        w(7_000, 8_000, ClientFault::LatencyInflation { factor: 3.0 }),
        w(9_000, 10_000, ClientFault::Partition),
        w(11_000, 12_000, ClientFault::Outage { hang: true }),
    ];
    let (inner, seen) = slow_backend();
    let events = Events::default();
    let report = ChaosSwitch::builder("replay", ChaosConfig::OFF)
        .observer(events.clone())
        .build()
        .unwrap();
    let layer = TimelineLayer::from_now(faults, 3, HttpAnswers)
        .unwrap()
        .report_to(report);
    let mut svc = layer.layer(inner);
    let t0 = tokio::time::Instant::now();
    let at = |ms: u64| t0 + Duration::from_millis(ms);

    // Before any fault: the real answer, 100 ms.
    assert_eq!(send(&mut svc).await.unwrap().body(), "real");
    tokio::time::sleep_until(at(1_500)).await;
    assert_eq!(send(&mut svc).await.unwrap().status(), 503);
    tokio::time::sleep_until(at(3_500)).await;
    let res = send(&mut svc).await.unwrap();
    assert_eq!(
        (res.status().as_u16(), &res.headers()["retry-after"]),
        (429, &"7".parse().unwrap())
    );
    tokio::time::sleep_until(at(5_500)).await;
    assert_eq!(send(&mut svc).await.unwrap().status(), 500);
    tokio::time::sleep_until(at(7_500)).await;
    let s = tokio::time::Instant::now();
    assert_eq!(send(&mut svc).await.unwrap().status(), 200);
    assert_eq!(
        s.elapsed(),
        Duration::from_millis(300),
        "100 ms stretched 3x"
    );
    tokio::time::sleep_until(at(9_500)).await;
    let s = tokio::time::Instant::now();
    assert_eq!(send(&mut svc).await.unwrap().status(), 200);
    assert_eq!(
        s.elapsed(),
        Duration::from_millis(600),
        "held 500 ms, then 100 ms"
    );
    tokio::time::sleep_until(at(11_500)).await;
    let hung = tokio::time::timeout(Duration::from_secs(1), send(&mut svc)).await;
    assert!(hung.is_err());
    tokio::time::sleep_until(at(12_000)).await;
    assert_eq!(send(&mut svc).await.unwrap().status(), 200);
    // Served for real: before, the error-rate's (served, then failed), the inflated, the held,
    // the last.
    assert_eq!(seen.load(SeqCst), 5);
    let names: Vec<&str> = events.0.0.lock().unwrap().iter().map(|e| e.1).collect();
    assert_eq!(
        names,
        [
            "Chaos.OnFault",
            "Chaos.OnFault",
            "Chaos.OnFault",
            "Chaos.OnLatency",
            "Chaos.OnLatency",
            "Chaos.OnFault"
        ]
    );
}

#[test]
fn a_bad_window_is_refused_with_its_index_and_field() {
    let faults = vec![
        w(0, 1_000, ClientFault::Partition),
        w(0, 1_000, ClientFault::ErrorRate { rate: 1.5 }),
    ];
    let clock = reliable::clock::ManualClock::new();
    let err = TimelineLayer::new(
        faults,
        0,
        reliable_core::Instant::ZERO,
        clock.clone(),
        reliable::sleep::ManualSleep::new(clock),
        HttpAnswers,
    )
    .unwrap_err();
    assert_eq!(err, "faults[1].rate: 1.5 is not a fraction in [0, 1]");
}

#[cfg(feature = "policy")]
mod scenario_files {
    use reliable::chaos::{ClientFault, scenario_faults};

    #[test]
    fn the_default_scenario_s_capacity_loss_is_refused_with_the_reason() {
        let text = include_str!("../../scenarios/default.ron");
        let faults = scenario_faults(text, "api").unwrap();
        assert!(faults.client.is_empty());
        assert_eq!(faults.refused.len(), 1);
        let err = faults.client_only().unwrap_err();
        assert!(
            err.starts_with(
                "faults[0]: CapacityLoss refused: a capacity loss removes the server's workers"
            ),
            "{err}"
        );
    }

    #[test]
    fn client_visible_faults_load_from_the_shipped_scenarios() {
        let text = include_str!("../../scenarios/partition-heal.ron");
        let faults = scenario_faults(text, "api").unwrap();
        assert!(
            faults
                .client
                .iter()
                .any(|f| matches!(f.fault, ClientFault::Partition)),
            "{faults:?}"
        );
        let text = r#"Scenario(name: "x", horizon: "10s", faults: [
            Throttle(downstream: "api", from: "1s", until: "2s", retry_after: "3s"),
            ErrorRate(downstream: "other", from: "1s", until: "2s", rate: 0.5),
            Outage(downstream: "api", from: "3s", until: "4s", mode: Hang),
            LoadSpike(from: "1s", until: "2s", factor: 2.0),
        ])"#;
        let faults = scenario_faults(text, "api").unwrap();
        assert_eq!(faults.client.len(), 2);
        assert_eq!(
            faults.client[0].fault,
            ClientFault::Throttle {
                share: 1.0,
                retry_after: reliable_core::Duration::from_secs(3)
            }
        );
        assert_eq!(faults.client[1].fault, ClientFault::Outage { hang: true });
        assert_eq!(faults.refused[0].kind, "LoadSpike");
        let bad = r#"Scenario(faults: [ErrorRate(downstream: "api", from: "1s", until: "2s", rate: 0.5),
            LatencyInflation(downstream: "api", from: "1s", until: "2s", factor: 0.5)])"#;
        assert_eq!(
            scenario_faults(bad, "api").unwrap_err(),
            "faults[1].factor: 0.5 must be a finite number >= 1"
        );
        let typo = r#"Scenario(faults: [ErrorRate(downstream: "api", from: "1s", until: "2s", rat: 0.5)])"#;
        assert!(scenario_faults(typo, "api").unwrap_err().contains("rat"));
    }
}

#[cfg(feature = "metrics")]
#[test]
fn each_injection_is_counted_with_polly_s_event_name() {
    use metrics_util::debugging::{DebugValue, DebuggingRecorder};
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let switch = ChaosSwitch::builder("api", fault(1.0, true, Injected::Reset))
            .metrics()
            .build()
            .unwrap();
        for _ in 0..3 {
            assert!(switch.decide().is_some());
        }
    });
    let lines: Vec<String> = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .map(|(key, _, _, value)| {
            let (_, key) = key.into_parts();
            let labels: Vec<String> = key
                .labels()
                .map(|l| format!("{}={}", l.key(), l.value()))
                .collect();
            let n = match value {
                DebugValue::Counter(n) => n,
                _ => 0,
            };
            format!("{}{{{}}} {n}", key.name(), labels.join(","))
        })
        .collect();
    assert_eq!(
        lines,
        ["reliable_chaos_injections_total{name=api,strategy=fault,event=Chaos.OnFault} 3"]
    );
}

/// A scripted sequence through the stock retry layer over an injecting chaos layer: for each of
/// 40 calls, how many attempts it took and the status it ended with, as the core's decisions
/// for the seed script them (attempt `n` through the layer is hit or not, whatever call it belongs
/// to). `seed` is the script's; the layer always runs seed 5.
async fn scripted_sequence_matches(seed: u64) -> bool {
    use reliable::tower::RetryLayer;
    use reliable_core::retry::RetryConfig;
    let config = |seed| ChaosConfig {
        fault: Some(FaultConfig {
            rate: 0.5,
            enabled: true,
            seed,
            answer: Injected::Status {
                status: 503,
                retry_after: None,
                should_retry: None,
            },
        }),
        ..ChaosConfig::OFF
    };
    // The script, from the core alone.
    let core = reliable_core::chaos::Chaos::new(config(seed)).unwrap();
    let mut n = 0u64;
    let mut script = Vec::new();
    for _ in 0..40 {
        let mut attempts = 0;
        let status = loop {
            let hit = core.decide(n, core.enabled()).answer.is_some();
            n += 1;
            attempts += 1;
            if !hit {
                break 200;
            }
            if attempts == 4 {
                break 503;
            }
        };
        script.push((attempts, status));
    }
    // The real stack.
    let (inner, _) = backend();
    let switch = ChaosSwitch::new("api", config(5)).unwrap();
    let retry = RetryLayer::new(
        RetryConfig {
            max_attempts: Some(4),
            ..RetryConfig::reliablekit()
        },
        HttpPolicy::new(),
    )
    .unwrap();
    let mut svc = tower::ServiceBuilder::new()
        .layer(retry)
        .layer(ChaosLayer::new(switch.clone(), HttpAnswers))
        .service(inner);
    let mut observed = Vec::new();
    for _ in 0..40 {
        let before = switch.attempts();
        let status = svc
            .ready()
            .await
            .unwrap()
            .call(http::Request::new(()))
            .await
            .unwrap()
            .status()
            .as_u16();
        observed.push(((switch.attempts() - before) as u32, status));
    }
    observed == script
}

#[tokio::test(start_paused = true)]
async fn a_scripted_sequence_with_injected_faults_holds_and_its_negative_control_fails() {
    assert!(scripted_sequence_matches(5).await);
    // Negative control: the script of another seed must not pass.
    assert!(!scripted_sequence_matches(6).await);
}

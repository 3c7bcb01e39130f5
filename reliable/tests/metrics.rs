//! The `metrics` feature, through metrics-util's debugging recorder: every series, its labels
//! and its values after a known history.

use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use reliable::Reliable;
use reliable::clock::ManualClock;
use reliable_core::breaker::BreakerConfig;
use std::io::ErrorKind;
use std::time::Duration;

fn series() -> Vec<String> {
    recorded(|| {
        let clock = ManualClock::new();
        let rel = Reliable::builder("llm")
            .breaker(BreakerConfig {
                consecutive_failures: Some(2),
                ..BreakerConfig::new()
            })
            .attempts(2)
            .no_backoff()
            .no_timeout()
            .manual_time(clock.clone())
            .metrics()
            .build()
            .unwrap();
        // Two successes that take 250 ms each on the manual clock.
        for _ in 0..2 {
            let r = rel.call_blocking(|| {
                clock.advance(Duration::from_millis(250));
                Ok::<_, std::io::Error>(())
            });
            assert!(r.is_ok());
        }
        // A call whose two attempts fail: the breaker opens on the second.
        let reset = || Err::<(), _>(std::io::Error::from(ErrorKind::ConnectionReset));
        assert!(rel.call_blocking(reset).is_err());
        // Refused while open.
        assert!(rel.call_blocking(reset).unwrap_err().is_open());
        // After the open time, a probe that succeeds closes it.
        clock.advance(Duration::from_secs(30));
        assert!(rel.call_blocking(|| Ok::<_, std::io::Error>(())).is_ok());
    })
}

/// Every series `history` writes, as sorted lines.
fn recorded(history: impl FnOnce()) -> Vec<String> {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, history);
    let mut lines: Vec<String> = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .map(|(key, _, _, value)| {
            let (kind, key) = key.into_parts();
            let labels: Vec<String> = key
                .labels()
                .map(|l| format!("{}={}", l.key(), l.value()))
                .collect();
            let value = match value {
                DebugValue::Counter(n) => n.to_string(),
                DebugValue::Gauge(g) => g.to_string(),
                DebugValue::Histogram(v) => {
                    format!("{:?}", v.iter().map(|x| x.0).collect::<Vec<_>>())
                }
            };
            format!("{kind:?} {}{{{}}} {value}", key.name(), labels.join(","))
        })
        .collect();
    lines.sort();
    lines
}

#[test]
fn every_series_with_its_labels_and_values() {
    let lines = series();
    for l in &lines {
        println!("{l}");
    }
    assert_eq!(
        lines,
        [
            "Counter reliable_breaker_transitions_total{name=llm,from=closed,to=open} 1",
            "Counter reliable_breaker_transitions_total{name=llm,from=half-open,to=closed} 1",
            "Counter reliable_breaker_transitions_total{name=llm,from=open,to=half-open} 1",
            "Counter reliable_calls_total{name=llm,outcome=gave-up} 1",
            "Counter reliable_calls_total{name=llm,outcome=open} 1",
            "Counter reliable_calls_total{name=llm,outcome=success} 3",
            "Counter reliable_rejections_total{name=llm,reason=open} 1",
            "Gauge reliable_breaker_shadow{name=llm} 0",
            "Gauge reliable_breaker_state{name=llm} 0",
            "Histogram reliable_call_attempts{name=llm} [1.0, 1.0, 2.0, 0.0, 1.0]",
            "Histogram reliable_call_duration_seconds{name=llm} [0.25, 0.25, 0.0, 0.0, 0.0]",
        ]
    );
}

#[test]
fn hedges_cancelled_copies_and_ledger_draws_by_kind() {
    let lines = recorded(|| {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        runtime.block_on(async {
            let rel = Reliable::builder("reads")
                .no_breaker()
                .idempotent()
                .hedge_after(Duration::from_millis(10))
                // Half an extra attempt per first try: the first call's hedge is refused, the
                // second's is granted.
                .ledger(reliable_core::budget::RatioConfig::percent(0.5))
                .metrics()
                .build()
                .unwrap();
            for _ in 0..2 {
                let copy = std::sync::atomic::AtomicU32::new(0);
                let r = rel
                    .call(|| {
                        let slow = copy.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0;
                        async move {
                            let ms = if slow { 100 } else { 1 };
                            tokio::time::sleep(Duration::from_millis(ms)).await;
                            Ok::<_, std::io::Error>(())
                        }
                    })
                    .await;
                assert!(r.is_ok());
            }
        });
    });
    let extra: Vec<&String> = lines
        .iter()
        .filter(|l| l.contains("hedge") || l.contains("ledger") || l.contains("cancelled"))
        .collect();
    assert_eq!(
        extra,
        [
            "Counter reliable_attempts_cancelled_total{name=reads} 1",
            "Counter reliable_hedges_total{name=reads,result=refused} 1",
            "Counter reliable_hedges_total{name=reads,result=sent} 1",
            "Counter reliable_hedges_total{name=reads,result=won} 1",
            "Counter reliable_ledger_total{name=reads,kind=hedge,result=denied} 1",
            "Counter reliable_ledger_total{name=reads,kind=hedge,result=drawn} 1",
        ]
    );
}

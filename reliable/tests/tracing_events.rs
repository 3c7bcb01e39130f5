//! With the `tracing` feature, a call runs in a `reliable.call` span and `Builder::tracing` emits
//! an event per attempt, retry, refusal, transition, give-up and call end, inside that span.
#![cfg(feature = "tracing")]

use reliable::Reliable;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

/// Records "span NAME" when a span is made and "MESSAGE in SPAN" for each event.
#[derive(Clone, Default)]
struct Recorder {
    lines: Arc<Mutex<Vec<String>>>,
    spans: Arc<Mutex<Vec<&'static str>>>,
    current: Arc<Mutex<Vec<u64>>>,
}

struct Message(String);

impl Visit for Message {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.0 = format!("{value:?}");
        }
    }
}

impl Subscriber for Recorder {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, span: &Attributes<'_>) -> Id {
        let mut spans = self.spans.lock().unwrap();
        spans.push(span.metadata().name());
        self.lines
            .lock()
            .unwrap()
            .push(format!("span {}", span.metadata().name()));
        Id::from_u64(spans.len() as u64)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut message = Message(String::new());
        event.record(&mut message);
        let inside = match self.current.lock().unwrap().last() {
            Some(id) => self.spans.lock().unwrap()[*id as usize - 1],
            None => "no span",
        };
        self.lines
            .lock()
            .unwrap()
            .push(format!("{} in {inside}", message.0));
    }
    fn enter(&self, span: &Id) {
        self.current.lock().unwrap().push(span.into_u64());
    }
    fn exit(&self, _: &Id) {
        self.current.lock().unwrap().pop();
    }
}

#[test]
fn a_call_is_a_span_with_an_event_per_step() {
    let recorder = Recorder::default();
    let rel = Reliable::builder("traced")
        .attempts(2)
        .base_delay(Duration::from_millis(1))
        .consecutive_failures(2)
        .tracing()
        .build()
        .unwrap();
    tracing::subscriber::with_default(recorder.clone(), || {
        for _ in 0..2 {
            let _ = rel.call_blocking(|| Err::<(), _>(std::io::Error::other("down")));
        }
    });
    let lines = recorder.lines.lock().unwrap().clone();
    let expected = [
        "span reliable.call",
        "attempt in reliable.call",
        "retry in reliable.call",
        "attempt in reliable.call",
        "transition in reliable.call",
        "gave up in reliable.call",
        "call end in reliable.call",
        "span reliable.call",
        "refused in reliable.call",
        "call end in reliable.call",
    ];
    assert_eq!(lines, expected);
}

#[tokio::test(start_paused = true)]
async fn an_async_call_runs_in_its_span() {
    let recorder = Recorder::default();
    let rel = Reliable::builder("traced-async").tracing().build().unwrap();
    let _guard = tracing::subscriber::set_default(recorder.clone());
    rel.call(|| async { Ok::<_, std::io::Error>(1) })
        .await
        .unwrap();
    let lines = recorder.lines.lock().unwrap().clone();
    assert_eq!(
        lines,
        [
            "span reliable.call",
            "attempt in reliable.call",
            "call end in reliable.call"
        ]
    );
}

#[test]
fn a_chaos_injection_is_an_event_named_as_polly_names_it() {
    use reliable::chaos::ChaosSwitch;
    use reliable_core::chaos::{BehaviorConfig, ChaosConfig, FaultConfig, Injected};
    let recorder = Recorder::default();
    let lines = recorder.lines.clone();
    tracing::subscriber::with_default(recorder, || {
        let switch = ChaosSwitch::builder(
            "api",
            ChaosConfig {
                fault: Some(FaultConfig {
                    rate: 1.0,
                    enabled: true,
                    seed: 0,
                    answer: Injected::Reset,
                }),
                behavior: Some(BehaviorConfig {
                    rate: 1.0,
                    enabled: true,
                    seed: 0,
                }),
                ..ChaosConfig::OFF
            },
        )
        .tracing()
        .build()
        .unwrap();
        assert!(switch.decide().is_some());
    });
    assert_eq!(
        *lines.lock().unwrap(),
        ["Chaos.OnBehavior in no span", "Chaos.OnFault in no span"]
    );
}

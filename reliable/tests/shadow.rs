//! Shadow mode through the builder: the breaker lets every call through and reports what it
//! would have done, and what it reports is what the live breaker does on the same calls.

use reliable::Reliable;
use reliable::clock::ManualClock;
use reliable::observer::{NotSent, Observer};
use reliable_core::breaker::{BreakerConfig, RejectReason, Transition};
use std::cell::Cell;
use std::io::ErrorKind;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Transitions and (would-be) rejections, as lines of text.
#[derive(Debug, Default, Clone)]
struct Log(Arc<Mutex<Vec<String>>>);

impl Log {
    fn lines(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

impl Observer for Log {
    fn on_transition(&self, _: &str, t: Transition) {
        self.0
            .lock()
            .unwrap()
            .push(format!("{} -> {} at {:?}", t.from, t.to, t.at));
    }
    fn on_reject(&self, _: &str, _: NotSent) {
        self.0.lock().unwrap().push("rejected".into());
    }
    fn on_would_reject(&self, _: &str, _: RejectReason) {
        self.0.lock().unwrap().push("rejected".into());
    }
}

/// What one run saw: its log, the calls that reached the downstream, the calls refused, and the
/// instance's snapshot at the end.
struct Run {
    log: Vec<String>,
    sent: u32,
    refused: u32,
    snapshot: reliable::Snapshot,
}

/// 60 calls a second apart; the downstream fails from the 5th second to the 30th. Its answer
/// depends only on the time, so a live run and a shadow run meet the same downstream.
fn run(shadow: bool) -> Run {
    let clock = ManualClock::new();
    let log = Log::default();
    let mut builder = Reliable::builder("api")
        .breaker(BreakerConfig::layered_exercise())
        .attempts(1)
        .no_timeout()
        .manual_time(clock.clone())
        .observer(log.clone());
    if shadow {
        builder = builder.shadow_breaker();
    }
    let rel = builder.build().unwrap();
    let sent = Cell::new(0);
    let mut refused = 0;
    for second in 0..60 {
        clock.advance(Duration::from_secs(1));
        let failing = (5..30).contains(&second);
        let answer = rel.call_blocking(|| {
            sent.set(sent.get() + 1);
            if failing {
                Err(std::io::Error::from(ErrorKind::ConnectionReset))
            } else {
                Ok(())
            }
        });
        if answer.is_err_and(|e| e.is_open()) {
            refused += 1;
        }
    }
    Run {
        log: log.lines(),
        sent: sent.get(),
        refused,
        snapshot: rel.snapshot(),
    }
}

#[test]
fn shadow_mode_lets_every_call_through_and_reports_what_the_live_breaker_does() {
    let live = run(false);
    let shadow = run(true);
    // Live: the breaker opened and refused calls.
    assert!(live.refused >= 10, "{} refused", live.refused);
    assert_eq!(live.sent + live.refused, 60);
    assert!(!live.snapshot.shadow);
    assert_eq!(live.snapshot.would_reject, 0);
    // Shadow: every call went through, and nothing was refused.
    assert_eq!((shadow.sent, shadow.refused), (60, 0));
    assert!(shadow.snapshot.shadow);
    // Its would-be decisions are the live breaker's, one for one and in order.
    assert_eq!(shadow.log, live.log);
    assert_eq!(shadow.snapshot.would_reject, u64::from(live.refused));
    assert_eq!(shadow.snapshot.state, live.snapshot.state);
}

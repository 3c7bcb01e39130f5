//! The hedging and limit layers in paused virtual time: losers dropped and their draws settled,
//! local refusals ending a retry, and setters that keep the shared state.
#![cfg(feature = "tower")]

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use reliable::tower::{
    BoxError, ConcurrencyLimitLayer, HedgeLayer, OverLimit, OverRate, Policy, RateLimitLayer,
    RetryLayer, SharedLedger,
};
use reliable_core::backoff::BackoffConfig;
use reliable_core::budget::RatioConfig;
use reliable_core::hedge::{HedgeConfig, HedgeDelay};
use reliable_core::ledger::Extra;
use reliable_core::limit::RateConfig;
use reliable_core::outcome::ErrorClass;
use reliable_core::retry::RetryConfig;
use tower::{Layer, ServiceExt, service_fn};

/// Requests are numbers, copied freely; a response of 500 or more is a transient failure.
#[derive(Clone, Copy, Debug)]
struct Copies;

impl reliable::Classify<reliable::tower::BoxError, u32> for Copies {
    fn error(&self, e: &reliable::tower::BoxError) -> reliable_core::outcome::ErrorClass {
        reliable::tower::error_class(e)
    }

    fn ok(&self, res: &u32) -> Option<ErrorClass> {
        (*res >= 500).then_some(ErrorClass::Transient)
    }
}

impl Policy<u32, u32> for Copies {
    fn clone_request(&self, req: &u32) -> Option<u32> {
        Some(*req)
    }
}

struct DropWatch(Arc<AtomicU32>, bool);

impl Drop for DropWatch {
    fn drop(&mut self) {
        if !self.1 {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
}

fn retry(attempts: u32) -> RetryConfig {
    RetryConfig {
        max_attempts: Some(attempts),
        attempt_timeout: None,
        ..RetryConfig::new(BackoffConfig::immediate())
    }
}

#[tokio::test(start_paused = true)]
async fn a_hedge_wins_the_loser_is_dropped_and_its_draw_settled() {
    let ledger = SharedLedger::new(RatioConfig::percent(1.0)).unwrap();
    let (sent, dropped) = (Arc::new(AtomicU32::new(0)), Arc::new(AtomicU32::new(0)));
    let (s, d) = (sent.clone(), dropped.clone());
    let svc = service_fn(move |_: u32| {
        let n = s.fetch_add(1, Ordering::SeqCst);
        let watch = DropWatch(d.clone(), false);
        async move {
            // The whole guard moves in (not just its flag): it drops with the future.
            let mut watch = watch;
            let ms = if n == 0 { 1_000 } else { 5 };
            tokio::time::sleep(Duration::from_millis(ms)).await;
            watch.1 = true;
            Ok::<u32, BoxError>(200 + n)
        }
    });
    let hedge = HedgeConfig {
        delay: HedgeDelay::Fixed(reliable_core::Duration::from_millis(10)),
        max_hedges: 1,
    };
    let stack = RetryLayer::new(retry(1), Copies)
        .unwrap()
        .ledger(ledger.clone())
        .layer(
            HedgeLayer::new(hedge, Copies)
                .unwrap()
                .ledger(ledger.clone())
                .layer(svc),
        );
    let t0 = tokio::time::Instant::now();
    let answer = stack.oneshot(7).await.unwrap();
    assert_eq!(answer, 201, "the hedge's answer");
    assert_eq!(t0.elapsed(), Duration::from_millis(15));
    assert_eq!(sent.load(Ordering::SeqCst), 2);
    assert_eq!(
        dropped.load(Ordering::SeqCst),
        1,
        "the first try was dropped"
    );
    assert_eq!(ledger.drawn(Extra::Hedge), 1);
    assert_eq!(ledger.outstanding(Extra::Hedge), 0, "its draw was settled");
}

#[tokio::test(start_paused = true)]
async fn a_rate_limit_refusal_ends_the_retry_at_once() {
    let tries = Arc::new(AtomicU32::new(0));
    let t = tries.clone();
    let svc = service_fn(move |_: u32| {
        t.fetch_add(1, Ordering::SeqCst);
        async { Ok::<u32, BoxError>(500) }
    });
    let rate = RateConfig {
        rate: 1,
        period: reliable_core::Duration::from_secs(1),
        burst: 1,
    };
    let stack = RetryLayer::new(retry(3), Copies)
        .unwrap()
        .layer(RateLimitLayer::new(rate).unwrap().layer(svc));
    let err = stack.oneshot(1).await.unwrap_err();
    let over = err.downcast_ref::<OverRate>().expect("the refusal itself");
    assert_eq!(over.retry_after, std::time::Duration::from_secs(1));
    assert_eq!(tries.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn setters_keep_the_shared_limit_and_a_dropped_call_frees_its_slot() {
    let svc = service_fn(|ms: u32| async move {
        tokio::time::sleep(Duration::from_millis(u64::from(ms))).await;
        Ok::<u32, BoxError>(200)
    });
    let layer = ConcurrencyLimitLayer::bulkhead(1, Copies).unwrap();
    let first = layer.layer(svc);
    // Setters after the first service: the second shares the same bulkhead.
    let later = layer.clone().named("other").layer(svc);
    let held = tokio::spawn(first.clone().oneshot(1_000));
    tokio::task::yield_now().await;
    assert_eq!(layer.in_flight(), 1);
    let refused = later.clone().oneshot(1).await.unwrap_err();
    assert_eq!(
        refused.downcast_ref::<OverLimit>(),
        Some(&OverLimit { limit: 1 })
    );
    // A call dropped in flight hands its slot back.
    held.abort();
    let _ = held.await;
    assert_eq!(layer.in_flight(), 0);
    assert_eq!(later.oneshot(1).await.unwrap(), 200);
}

/// What a breaker's observers hear, in order, without the instance's name.
#[derive(Clone, Debug, Default)]
struct Heard(Arc<std::sync::Mutex<Vec<String>>>);

impl reliable::observer::Observer for Heard {
    fn on_reject(&self, _: &str, refusal: reliable::observer::NotSent) {
        self.0.lock().unwrap().push(format!("reject {refusal:?}"));
    }
    fn on_transition(&self, _: &str, t: reliable_core::breaker::Transition) {
        let (from, to) = (t.from.name(), t.to.name());
        self.0.lock().unwrap().push(format!("{from} -> {to}"));
    }
    fn on_ledger(&self, _: &str, kind: Extra, granted: bool) {
        self.0
            .lock()
            .unwrap()
            .push(format!("ledger {kind:?} {granted}"));
    }
}

/// One failure opens it for 1 s; one probe in flight, one success closes it.
fn probing_breaker() -> reliable_core::breaker::BreakerConfig {
    let mut c = reliable_core::breaker::BreakerConfig::new();
    c.consecutive_failures = Some(1);
    c.open.duration = reliable_core::Duration::from_secs(1);
    c.open.jitter = 0.0;
    c.half_open.max_in_flight = Some(1);
    c.half_open.rule = reliable_core::breaker::ProbeRule::Consecutive { successes: 1 };
    c
}

/// A 40% ledger with no floor: two first tries buy 0.8 of an extra attempt, three buy one.
fn forty_percent() -> RatioConfig {
    RatioConfig {
        min_per_sec: 0,
        ..RatioConfig::percent(0.4)
    }
}

/// The conformance sequence `ledger-refuses-probe` on the tower layers: the probe the ledger
/// denies is refused locally with `ProbeDenied` (class `Refused`, the downstream not called,
/// the breaker still half-open), and a later probe the ledger grants closes the breaker; the
/// observers hear what the builder's observers hear, in the same order.
#[tokio::test(start_paused = true)]
async fn a_half_open_probe_draws_from_the_ledger_and_a_denied_one_is_refused_locally() {
    use reliable::tower::{BreakerLayer, ProbeDenied};
    let ledger = SharedLedger::new(forty_percent()).unwrap();
    let heard = Heard::default();
    let sent = Arc::new(AtomicU32::new(0));
    let s = sent.clone();
    let svc = service_fn(move |status: u32| {
        s.fetch_add(1, Ordering::SeqCst);
        async move { Ok::<u32, BoxError>(status) }
    });
    let stack = RetryLayer::new(retry(1), Copies)
        .unwrap()
        .ledger(ledger.clone())
        .layer(
            BreakerLayer::new(probing_breaker(), Copies)
                .unwrap()
                .ledger(ledger.clone())
                .observer(heard.clone())
                .layer(svc),
        );
    let t0 = tokio::time::Instant::now();
    assert_eq!(stack.clone().oneshot(500).await.unwrap(), 500);
    tokio::time::sleep_until(t0 + Duration::from_secs(2)).await;
    let denied = stack.clone().oneshot(200).await.unwrap_err();
    assert_eq!(
        denied.downcast_ref::<ProbeDenied>(),
        Some(&ProbeDenied {
            denied: reliable_core::budget::Denied::Ratio
        })
    );
    assert_eq!(
        reliable::tower::error_class(&denied),
        ErrorClass::Refused { retry_after: None }
    );
    assert_eq!(
        sent.load(Ordering::SeqCst),
        1,
        "the denied probe was not sent"
    );
    assert_eq!(ledger.denied(Extra::Probe), 1);
    tokio::time::sleep_until(t0 + Duration::from_secs(3)).await;
    assert_eq!(stack.clone().oneshot(200).await.unwrap(), 200);
    assert_eq!(ledger.drawn(Extra::Probe), 1);
    assert_eq!(
        ledger.outstanding(Extra::Probe),
        0,
        "the probe's draw settled"
    );
    let tower_heard = heard.0.lock().unwrap().clone();

    // The builder, on the same config and the same calls.
    let builder_heard = Heard::default();
    let rel = reliable::Reliable::builder("b")
        .retry(retry(1))
        .breaker(probing_breaker())
        .ledger(forty_percent())
        .clock(reliable::clock::TokioClock::new())
        .observer(builder_heard.clone())
        .build()
        .unwrap();
    let t0 = tokio::time::Instant::now();
    for (at, status) in [(0, 500), (2, 200), (3, 200)] {
        tokio::time::sleep_until(t0 + Duration::from_secs(at)).await;
        let _ = rel
            .call(|| async move {
                match status {
                    500 => Err(std::io::Error::other("500")),
                    _ => Ok(()),
                }
            })
            .await;
    }
    let builder_heard = builder_heard.0.lock().unwrap().clone();
    assert_eq!(tower_heard, builder_heard);
    assert_eq!(
        tower_heard,
        [
            "closed -> open",
            "open -> half-open",
            "ledger Probe false",
            "reject Rejected(Ledger(Ratio))",
            "ledger Probe true",
            "half-open -> closed",
        ]
    );
}

/// A probe dropped in flight hands back its draw and its probe slot at once.
#[tokio::test(start_paused = true)]
async fn a_dropped_probe_settles_its_draw() {
    use reliable::tower::BreakerLayer;
    // A floor of 1 per second over 10 s: probes are granted without first tries.
    let ledger = SharedLedger::new(RatioConfig {
        min_per_sec: 1,
        ..forty_percent()
    })
    .unwrap();
    let svc = service_fn(|ms: u32| async move {
        tokio::time::sleep(Duration::from_millis(u64::from(ms))).await;
        Ok::<u32, BoxError>(if ms == 0 { 500 } else { 200 })
    });
    let layer = BreakerLayer::new(probing_breaker(), Copies)
        .unwrap()
        .ledger(ledger.clone());
    let svc = layer.layer(svc);
    assert_eq!(svc.clone().oneshot(0).await.unwrap(), 500);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let probe = tokio::spawn(svc.clone().oneshot(10_000));
    tokio::task::yield_now().await;
    assert_eq!(
        ledger.outstanding(Extra::Probe),
        1,
        "the probe holds its draw"
    );
    probe.abort();
    let _ = probe.await;
    assert_eq!(ledger.outstanding(Extra::Probe), 0, "settled when dropped");
    assert_eq!(svc.state(), reliable_core::breaker::State::HalfOpen);
    // Its slot is free: the next probe goes (and closes the breaker).
    assert_eq!(svc.clone().oneshot(1).await.unwrap(), 200);
    assert_eq!(svc.state(), reliable_core::breaker::State::Closed);
    assert_eq!(ledger.drawn(Extra::Probe), 2);
}

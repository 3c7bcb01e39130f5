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

impl reliable::tower::ClassifyResponse<u32> for Copies {
    fn response(&self, res: &u32) -> Option<ErrorClass> {
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

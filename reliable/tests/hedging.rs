//! Hedging, the ledger and the limits over real HTTP on 127.0.0.1 (hyper client and server), and
//! in virtual time where only the bookkeeping is checked.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Empty;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use reliable::{Error, Reliable};
use reliable_core::budget::RatioConfig;
use reliable_core::outcome::ErrorClass;
use support::Reply;

type HttpClient = Client<hyper_util::client::legacy::connect::HttpConnector, Empty<Bytes>>;

fn client() -> HttpClient {
    Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>()
}

/// Counts a future dropped before it finished (the client side of a cancelled attempt).
struct DropWatch(Arc<AtomicU32>, bool);

impl Drop for DropWatch {
    fn drop(&mut self) {
        if !self.1 {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// One GET; a status of 500 and above is an error for the call (classed by the caller).
async fn get(client: &HttpClient, uri: &hyper::Uri, dropped: &Arc<AtomicU32>) -> Result<u16, u16> {
    let mut watch = DropWatch(dropped.clone(), false);
    let res = client.get(uri.clone()).await;
    watch.1 = true;
    match res {
        Ok(r) if r.status().as_u16() < 500 => Ok(r.status().as_u16()),
        Ok(r) => Err(r.status().as_u16()),
        Err(_) => Err(0),
    }
}

fn class(status: &u16) -> ErrorClass {
    match status {
        503 => ErrorClass::Throttled { retry_after: None },
        _ => ErrorClass::Transient,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hedge_beats_a_slow_primary_and_the_primary_is_cancelled() {
    // The first request takes 3 s; every other one answers at once.
    let (addr, seen, unanswered) = support::server_seeing_drops(|n| Reply {
        status: 200,
        headers: &[],
        delay_ms: if n == 0 { 3_000 } else { 0 },
    })
    .await;
    let uri: hyper::Uri = format!("http://{addr}/").parse().unwrap();
    let rel = Reliable::builder("hedged")
        .no_breaker()
        .idempotent()
        .hedge_after(Duration::from_millis(50))
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let (client, dropped) = (client(), Arc::new(AtomicU32::new(0)));
    let t0 = Instant::now();
    let status = rel
        .call_with(class, || get(&client, &uri, &dropped))
        .await
        .unwrap();
    let took = t0.elapsed();
    assert_eq!(status, 200);
    assert!(
        took < Duration::from_secs(2),
        "the hedge did not win: {took:?}"
    );
    assert_eq!(seen.load(Ordering::SeqCst), 2);
    // The client side: the primary's future was dropped, not left running.
    assert_eq!(dropped.load(Ordering::SeqCst), 1);
    let snap = rel.snapshot();
    assert_eq!((snap.hedges, snap.hedges_won, snap.succeeded), (1, 1, 1));
    // The server side: the primary's connection closed, so its handler was dropped unanswered,
    // well before its 3 s were up.
    let deadline = Instant::now() + Duration::from_secs(2);
    while unanswered.load(Ordering::SeqCst) == 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(unanswered.load(Ordering::SeqCst), 1);
    assert!(t0.elapsed() < Duration::from_millis(2_900));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ledger_bounds_extra_attempts_under_a_failing_server() {
    // Every request fails with a 503 after 60 ms: each call wants a hedge (at 5 ms, with a wide
    // margin on a loaded machine) and retries.
    let (addr, seen, _) = support::server_seeing_drops(|_| Reply {
        status: 503,
        headers: &[],
        delay_ms: 60,
    })
    .await;
    let uri: hyper::Uri = format!("http://{addr}/").parse().unwrap();
    let calls = 20;
    let rel = Reliable::builder("storm")
        .no_breaker()
        .idempotent()
        .hedge_after(Duration::from_millis(5))
        .attempts(4)
        .base_delay(Duration::from_millis(1))
        .max_server_delay(Duration::ZERO)
        .timeout(Duration::from_secs(5))
        // 10% of first tries, no floor: at most 2 extra attempts for 20 calls.
        .ledger(RatioConfig {
            ratio: 0.1,
            min_per_sec: 0,
            ttl: reliable_core::Duration::from_secs(60),
            slots: 10,
        })
        .build()
        .unwrap();
    let (client, dropped) = (client(), Arc::new(AtomicU32::new(0)));
    for _ in 0..calls {
        let r = rel.call_with(class, || get(&client, &uri, &dropped)).await;
        assert!(matches!(
            r,
            Err(Error::GaveUp { .. } | Error::Rejected { .. })
        ));
    }
    let sent = seen.load(Ordering::SeqCst);
    let snap = rel.snapshot();
    let [retries, hedges, probes] = snap.ledger_drawn;
    assert_eq!(probes, 0);
    assert_eq!(u64::from(sent), calls + retries + hedges);
    // The bound: extra attempts ≤ 10% of first tries, whatever the mix.
    assert!(
        retries + hedges <= calls / 10,
        "{retries} retries + {hedges} hedges"
    );
    assert!(retries + hedges >= 1);
    // Both kinds asked and were refused: one budget for both.
    assert!(
        snap.ledger_denied[0] > 0 && snap.ledger_denied[1] > 0,
        "{snap:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_race_dropped_by_its_caller_hands_its_limit_slots_back() {
    // A bulkhead of 2: a hedged attempt holds both slots. If the dropped race kept them, the next
    // call would be refused by the limit.
    let rel = Reliable::builder("bulkhead")
        .no_breaker()
        .idempotent()
        .hedge_after(Duration::from_millis(10))
        .bulkhead(2)
        .attempts(1)
        .no_timeout()
        .build()
        .unwrap();
    let hang = rel.call_with(
        |_: &u16| ErrorClass::Transient,
        std::future::pending::<Result<u16, u16>>,
    );
    assert!(
        tokio::time::timeout(Duration::from_millis(30), hang)
            .await
            .is_err()
    );
    assert_eq!(rel.snapshot().hedges, 1);
    let slow_then_fast = AtomicU32::new(0);
    let n = rel
        .call_with(
            |_: &u16| ErrorClass::Transient,
            || {
                let k = slow_then_fast.fetch_add(1, Ordering::SeqCst);
                async move {
                    tokio::time::sleep(Duration::from_millis(if k == 0 { 100 } else { 1 })).await;
                    Ok::<u16, u16>(k as u16)
                }
            },
        )
        .await
        .unwrap();
    // Both slots were free: the hedge went and won.
    assert_eq!(n, 1);
    let snap = rel.snapshot();
    assert_eq!((snap.hedges, snap.hedges_won, snap.cancelled), (2, 1, 1));
    assert_eq!(snap.limit, Some(2));
}

#[tokio::test(start_paused = true)]
async fn a_limit_refusal_ends_the_call_with_a_typed_rejection() {
    let rel = Reliable::builder("rate")
        .no_breaker()
        .no_backoff()
        .rate_limit(reliable_core::limit::RateConfig {
            rate: 1,
            period: reliable_core::Duration::from_secs(1),
            burst: 1,
        })
        .build()
        .unwrap();
    let tries = AtomicU32::new(0);
    let err = rel
        .call_with(
            |_: &u16| ErrorClass::Transient,
            || {
                tries.fetch_add(1, Ordering::SeqCst);
                async { Err::<u16, u16>(500) }
            },
        )
        .await
        .unwrap_err();
    assert_eq!(tries.load(Ordering::SeqCst), 1);
    match err {
        Error::Rejected {
            why: reliable::ShedReason::RateLimited { retry_after },
            last: Some(500),
        } => assert_eq!(retry_after, Duration::from_secs(1)),
        other => panic!("{other:?}"),
    }
}

/// Each copy of a hedged attempt is timed from its own send: neither copy answers, so the first
/// times out at 200 ms, the hedge (sent at 30 ms) at 230 ms, and the attempt ends then; a
/// blocking call, never hedged, sends one copy, bounded by the copy timeout too.
#[tokio::test(start_paused = true)]
async fn each_copy_times_out_on_its_own_timer() {
    let rel = Reliable::builder("copies")
        .no_breaker()
        .no_timeout()
        .attempts(1)
        .hedge_after(Duration::from_millis(30))
        .idempotent()
        .copy_timeout(Duration::from_millis(200))
        .seed(1)
        .build()
        .unwrap();
    let t0 = tokio::time::Instant::now();
    let sent = AtomicU32::new(0);
    let result: Result<(), Error<ErrorClass>> = rel
        .call(|| {
            sent.fetch_add(1, Ordering::SeqCst);
            std::future::pending()
        })
        .await;
    assert!(
        matches!(result, Err(Error::Timeout { attempts: 2 })),
        "{result:?}"
    );
    assert_eq!(sent.load(Ordering::SeqCst), 2);
    assert_eq!(t0.elapsed(), Duration::from_millis(230));

    let clock = reliable::clock::ManualClock::new();
    let blocking = Reliable::builder("copies")
        .no_breaker()
        .timeout(Duration::from_secs(1))
        .attempts(1)
        .hedge_after(Duration::from_millis(30))
        .idempotent()
        .copy_timeout(Duration::from_millis(200))
        .manual_time(clock)
        .build()
        .unwrap();
    let left = blocking.call_blocking_cancellable(|token| Ok::<_, ErrorClass>(token.remaining()));
    assert_eq!(left.unwrap(), Some(Duration::from_millis(200)));
}

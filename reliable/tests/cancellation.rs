//! Cancellation is real: a timed-out or dropped async attempt closes its socket (a loopback
//! server sees EOF), a dropped or panicking call hands its breaker permit back at once (a
//! cancelled half-open probe frees its slot without waiting for its lease), and blocking work sees
//! its deadline through the cancel token.

use reliable::{Error, Reliable, ShedReason};
use reliable_core::Duration as CoreDuration;
use reliable_core::breaker::{BreakerConfig, HalfOpenConfig, OpenConfig, ProbeRule, State};
use std::io::ErrorKind;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

/// A loopback server that accepts connections, never answers, and reports, for each connection,
/// how long after accepting it the client closed it (read returned EOF or an error).
async fn silent_server(expected: usize) -> (std::net::SocketAddr, mpsc::Receiver<Duration>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = mpsc::channel(expected);
    tokio::spawn(async move {
        for _ in 0..expected {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            let tx = tx.clone();
            tokio::spawn(async move {
                let accepted = Instant::now();
                let mut buf = [0u8; 64];
                // Read until the client closes; bounded so the test cannot hang.
                let _ = tokio::time::timeout(Duration::from_secs(10), async {
                    while let Ok(n) = sock.read(&mut buf).await {
                        if n == 0 {
                            break;
                        }
                    }
                })
                .await;
                let _ = tx.send(accepted.elapsed()).await;
            });
        }
    });
    (addr, rx)
}

/// Connects, sends a request and waits for an answer that never comes.
async fn hanging_request(addr: std::net::SocketAddr) -> Result<String, std::io::Error> {
    let mut sock = TcpStream::connect(addr).await?;
    sock.write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .await?;
    let mut answer = String::new();
    sock.read_to_string(&mut answer).await?;
    Ok(answer)
}

#[tokio::test]
async fn a_timed_out_attempt_closes_its_socket() {
    let (addr, mut closed) = silent_server(2).await;
    let rel = Reliable::builder("silent")
        .no_breaker()
        .attempts(2)
        .no_backoff()
        .timeout(Duration::from_millis(200))
        .build()
        .unwrap();
    let t0 = Instant::now();
    let err = rel.call(|| hanging_request(addr)).await.unwrap_err();
    assert!(matches!(err, Error::Timeout { attempts: 2 }), "{err:?}");
    // Both attempts' connections were closed by the client when their timers fired, not left
    // open: the server saw EOF about 200 ms after accepting each one.
    for attempt in 1..=2 {
        let open_for = closed
            .recv()
            .await
            .expect("the server saw the connection end");
        assert!(
            open_for >= Duration::from_millis(150) && open_for < Duration::from_secs(5),
            "attempt {attempt}: connection open for {open_for:?}"
        );
    }
    assert!(t0.elapsed() < Duration::from_secs(5));
    assert_eq!(rel.snapshot().failed, 1);
}

#[tokio::test]
async fn a_call_dropped_by_select_closes_its_socket_and_counts_as_cancelled() {
    let (addr, mut closed) = silent_server(1).await;
    let rel = Reliable::builder("silent").no_timeout().build().unwrap();
    tokio::select! {
        r = rel.call(|| hanging_request(addr)) => panic!("the server never answers: {r:?}"),
        () = tokio::time::sleep(Duration::from_millis(150)) => {}
    }
    let open_for = closed.recv().await.expect("EOF");
    assert!(open_for < Duration::from_secs(5), "{open_for:?}");
    let s = rel.snapshot();
    assert_eq!((s.cancelled, s.failed, s.succeeded), (1, 0, 0));
    // The breaker counted nothing for it: a cancelled call says nothing about the downstream.
    assert_eq!(s.window.calls, 0);
}

/// Opens after one failure for 10 s; half-open admits one probe, leased for a whole minute.
fn one_probe_breaker() -> BreakerConfig {
    BreakerConfig {
        consecutive_failures: Some(1),
        open: OpenConfig {
            duration: CoreDuration::from_secs(10),
            ..OpenConfig::default()
        },
        half_open: HalfOpenConfig {
            max_in_flight: Some(1),
            rule: ProbeRule::Consecutive { successes: 1 },
            probe_timeout: CoreDuration::from_secs(60),
            decide_at_minimum: false,
            max_wait: None,
            max_wait_closes: false,
        },
        ..BreakerConfig::new()
    }
}

/// An instance with [`one_probe_breaker`], tripped, its open time over: the next call is the probe.
async fn tripped() -> Reliable {
    let rel = Reliable::builder("probe")
        .breaker(one_probe_breaker())
        .attempts(1)
        .no_timeout()
        .build()
        .unwrap();
    let err = rel
        .call(|| async { Err::<(), _>(std::io::Error::from(ErrorKind::ConnectionReset)) })
        .await
        .unwrap_err();
    assert!(matches!(err, Error::GaveUp { .. }), "{err:?}");
    assert_eq!(rel.state(), Some(State::Open));
    tokio::time::advance(Duration::from_secs(10)).await;
    assert_eq!(rel.state(), Some(State::HalfOpen));
    rel
}

async fn succeed(rel: &Reliable) -> Result<u8, Error<std::io::Error>> {
    rel.call(|| async { Ok::<_, std::io::Error>(1) }).await
}

#[tokio::test(start_paused = true)]
async fn a_cancelled_half_open_probe_frees_its_slot_at_once() {
    let rel = tripped().await;

    // The probe hangs; while it is in flight the only slot is taken.
    let probe = rel.call(std::future::pending::<Result<u8, std::io::Error>>);
    let mut probe = Box::pin(probe);
    assert!(
        futures_poll_once(probe.as_mut()).await.is_none(),
        "the probe hangs"
    );
    let refused = succeed(&rel).await.unwrap_err();
    assert!(
        matches!(
            refused,
            Error::Rejected {
                why: ShedReason::HalfOpenFull,
                ..
            }
        ),
        "{refused:?}"
    );

    // The caller gives up on the probe: dropping it hands the slot back now, not after the
    // probe's 60 s lease. No time passes before the next call, which becomes the probe and
    // closes the breaker.
    drop(probe);
    assert_eq!(succeed(&rel).await.unwrap(), 1);
    assert_eq!(rel.state(), Some(State::Closed));
    let s = rel.snapshot();
    assert_eq!((s.cancelled, s.refused, s.succeeded), (1, 1, 1));
}

#[tokio::test(start_paused = true)]
async fn an_aborted_probe_task_frees_its_slot_at_once() {
    let rel = tripped().await;
    let r = rel.clone();
    let task = tokio::spawn(async move {
        r.call(std::future::pending::<Result<u8, std::io::Error>>)
            .await
    });
    tokio::task::yield_now().await; // let it take the slot
    assert!(succeed(&rel).await.is_err(), "the slot is taken");
    task.abort();
    assert!(task.await.unwrap_err().is_cancelled());
    assert_eq!(succeed(&rel).await.unwrap(), 1);
    assert_eq!(rel.state(), Some(State::Closed));
}

#[tokio::test(start_paused = true)]
async fn a_panicking_probe_propagates_its_panic_and_frees_its_slot() {
    let rel = tripped().await;
    let r = rel.clone();
    let task = tokio::spawn(async move {
        r.call(|| async {
            if true {
                panic!("boom in the user's closure");
            }
            Ok::<u8, std::io::Error>(0)
        })
        .await
    });
    let payload = task.await.unwrap_err().into_panic();
    assert_eq!(
        payload.downcast_ref::<&str>(),
        Some(&"boom in the user's closure"),
        "the panic comes out unchanged"
    );
    assert_eq!(succeed(&rel).await.unwrap(), 1, "the slot was released");
    assert_eq!(rel.state(), Some(State::Closed));
}

#[test]
fn a_panic_in_blocking_work_propagates_and_frees_the_slot() {
    let clock = reliable::clock::ManualClock::new();
    let rel = Reliable::builder("probe")
        .breaker(one_probe_breaker())
        .attempts(1)
        .no_timeout()
        .manual_time(clock.clone())
        .build()
        .unwrap();
    let _ = rel.call_blocking(|| Err::<(), _>(std::io::Error::from(ErrorKind::ConnectionReset)));
    clock.advance(Duration::from_secs(10));
    assert_eq!(rel.state(), Some(State::HalfOpen));
    let caught = std::panic::catch_unwind(|| {
        rel.call_blocking(|| -> Result<(), std::io::Error> { std::panic::panic_any(42u32) })
    });
    assert_eq!(caught.unwrap_err().downcast_ref::<u32>(), Some(&42));
    assert_eq!(rel.call_blocking(|| Ok::<_, std::io::Error>(7)).unwrap(), 7);
    assert_eq!(rel.state(), Some(State::Closed));
}

#[test]
fn blocking_work_sees_its_deadline_and_closes_its_own_socket() {
    // A blocking client that uses the token's remaining time as its socket's read timeout: the
    // socket times out and is closed on time, and the server sees EOF.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        let (mut sock, _) = listener.accept().unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let accepted = Instant::now();
        let mut buf = [0u8; 64];
        loop {
            match std::io::Read::read(&mut sock, &mut buf) {
                Ok(0) | Err(_) => return accepted.elapsed(),
                Ok(_) => {}
            }
        }
    });
    let rel = Reliable::builder("blocking")
        .no_breaker()
        .attempts(1)
        .timeout(Duration::from_millis(200))
        .clock(reliable::clock::SystemClock::new())
        .build()
        .unwrap();
    let err = rel
        .call_blocking_cancellable(|token| {
            let mut sock = std::net::TcpStream::connect(addr)?;
            sock.set_read_timeout(token.remaining())?;
            std::io::Write::write_all(&mut sock, b"ping")?;
            let mut buf = [0u8; 8];
            std::io::Read::read(&mut sock, &mut buf)
        })
        .unwrap_err();
    assert!(matches!(err, Error::Timeout { attempts: 1 }), "{err:?}");
    let open_for = server.join().unwrap();
    assert!(
        open_for >= Duration::from_millis(150) && open_for < Duration::from_secs(5),
        "{open_for:?}"
    );
}

#[test]
fn cooperative_blocking_work_stops_at_its_deadline() {
    let rel = Reliable::builder("blocking")
        .no_breaker()
        .attempts(1)
        .timeout(Duration::from_millis(100))
        .clock(reliable::clock::SystemClock::new())
        .build()
        .unwrap();
    let t0 = Instant::now();
    let mut steps = 0u32;
    let err = rel
        .call_blocking_cancellable(|token| {
            while !token.is_cancelled() {
                steps += 1;
                std::thread::sleep(Duration::from_millis(5));
            }
            Ok::<_, std::io::Error>(steps)
        })
        .unwrap_err();
    let took = t0.elapsed();
    assert!(matches!(err, Error::Timeout { attempts: 1 }), "{err:?}");
    assert!(steps > 0 && took >= Duration::from_millis(100) && took < Duration::from_secs(5));
}

/// Polls a future once; `Some` if it finished.
async fn futures_poll_once<F: std::future::Future + Unpin>(mut f: F) -> Option<F::Output> {
    std::future::poll_fn(|cx| {
        std::task::Poll::Ready(match std::pin::Pin::new(&mut f).poll(cx) {
            std::task::Poll::Ready(v) => Some(v),
            std::task::Poll::Pending => None,
        })
    })
    .await
}

#[test]
fn detached_blocking_work_is_abandoned_at_its_deadline_and_told_so() {
    // The seed's semantics: the caller stops waiting at the attempt's timeout and retries; the
    // abandoned thread runs on until it sees its token cancelled.
    let rel = Reliable::builder("legacy")
        .no_breaker()
        .attempts(2)
        .no_backoff()
        .timeout(Duration::from_millis(100))
        .clock(reliable::clock::SystemClock::new())
        .build()
        .unwrap();
    let (seen_tx, seen_rx) = std::sync::mpsc::channel();
    let started = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
    let counter = started.clone();
    let t0 = Instant::now();
    let answer = rel.call_blocking_detached(move |token| {
        let attempt = counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        if attempt == 1 {
            // Hangs, checking its token: it learns it was abandoned, and its answer is dropped.
            let t = Instant::now();
            while !token.is_cancelled() {
                std::thread::sleep(Duration::from_millis(2));
            }
            let _ = seen_tx.send(t.elapsed());
            return Ok("late answer");
        }
        Ok::<_, std::io::Error>("second attempt")
    });
    assert_eq!(answer.unwrap(), "second attempt");
    assert!(t0.elapsed() < Duration::from_secs(5));
    let abandoned_after = seen_rx.recv_timeout(Duration::from_secs(5)).unwrap();
    assert!(
        abandoned_after >= Duration::from_millis(90),
        "{abandoned_after:?}"
    );
}

#[test]
fn a_panic_in_detached_work_comes_out_unchanged() {
    let rel = Reliable::builder("legacy")
        .attempts(1)
        .no_timeout()
        .build()
        .unwrap();
    let caught = std::panic::catch_unwind(|| {
        rel.call_blocking_detached(|_| -> Result<(), std::io::Error> {
            std::panic::panic_any("boom on the attempt's thread")
        })
    });
    assert_eq!(
        caught.unwrap_err().downcast_ref::<&str>(),
        Some(&"boom on the attempt's thread")
    );
    assert_eq!(rel.snapshot().cancelled, 1);
    assert_eq!(rel.call_blocking(|| Ok::<_, std::io::Error>(1)).unwrap(), 1);
}

#[test]
fn detached_work_is_hedged_on_a_thread_of_its_own_and_the_loser_told_to_stop() {
    // The first copy hangs until its token says stop; the hedge, sent 50 ms later on its own
    // thread, answers at once and wins. The loser learns it lost through its token.
    let rel = Reliable::builder("legacy")
        .no_breaker()
        .attempts(1)
        .idempotent()
        .hedge_after(Duration::from_millis(50))
        .timeout(Duration::from_secs(10))
        .clock(reliable::clock::SystemClock::new())
        .build()
        .unwrap();
    let (told_tx, told_rx) = std::sync::mpsc::channel();
    let copies = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
    let counter = copies.clone();
    let t0 = Instant::now();
    let answer = rel.call_blocking_detached(move |token| {
        let copy = counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        if copy == 1 {
            // Bounded, so that a broken hedge fails the test instead of hanging it.
            let t = Instant::now();
            while !token.is_cancelled() && t.elapsed() < Duration::from_secs(8) {
                std::thread::sleep(Duration::from_millis(2));
            }
            let _ = told_tx.send(token.is_cancelled());
            return Ok("the first copy, late");
        }
        Ok::<_, std::io::Error>("the hedge")
    });
    let took = t0.elapsed();
    assert_eq!(answer.unwrap(), "the hedge");
    // The hedge is due at 50 ms; the first copy would only have answered at 8 s.
    assert!(took < Duration::from_secs(4), "{took:?}");
    assert_eq!(copies.load(std::sync::atomic::Ordering::SeqCst), 2);
    assert_eq!(told_rx.recv_timeout(Duration::from_secs(9)), Ok(true));
    let s = rel.snapshot();
    assert_eq!((s.hedges, s.hedges_won), (1, 1), "{s:?}");
}

#[test]
fn detached_work_without_a_hedge_policy_is_never_hedged() {
    let rel = Reliable::builder("legacy")
        .no_breaker()
        .attempts(1)
        .timeout(Duration::from_secs(5))
        .clock(reliable::clock::SystemClock::new())
        .build()
        .unwrap();
    let copies = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
    let counter = copies.clone();
    let answer = rel.call_blocking_detached(move |_| {
        counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(100));
        Ok::<_, std::io::Error>(7)
    });
    assert_eq!(answer.unwrap(), 7);
    assert_eq!(copies.load(std::sync::atomic::Ordering::SeqCst), 1);
}

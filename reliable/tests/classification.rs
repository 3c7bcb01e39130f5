//! One classification for every face: a classifier that reads `Ok` values (an error status a
//! client hands back as `Ok`) decides the same way through `Reliable::call`, the blocking calls,
//! the detached blocking call and the tower layer; a call that gives up on such a value returns
//! it as it came.

use reliable::clock::ManualClock;
use reliable::{ByType, Classify, Error, Reliable};
use reliable_core::breaker::State;
use reliable_core::outcome::ErrorClass;
use std::cell::Cell;
use std::io::ErrorKind;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// Reads a status as an HTTP client would hand it back, by the core's table
/// (`reliable::http::classify_status`: 503 throttled, other 5xx transient, other 4xx fatal,
/// below 400 a success); errors by `ByType`'s rule.
#[derive(Clone, Copy, Debug)]
struct Statuses;

impl Statuses {
    fn status(status: u16) -> Option<ErrorClass> {
        reliable::http::classify_status(status, &reliable::http::HeaderSignals::default())
    }
}

impl Classify<std::io::Error, u16> for Statuses {
    fn error(&self, e: &std::io::Error) -> ErrorClass {
        ByType.error_of(e)
    }

    fn ok(&self, status: &u16) -> Option<ErrorClass> {
        Statuses::status(*status)
    }
}

fn rel(attempts: u32) -> Reliable {
    Reliable::builder("statuses")
        .manual_time(ManualClock::new())
        .no_breaker()
        .attempts(attempts)
        .build()
        .unwrap()
}

/// Answers the scripted statuses in turn, the last one from then on.
fn script(statuses: &'static [u16]) -> impl Fn(u32) -> u16 {
    move |n| statuses[(n as usize).min(statuses.len() - 1)]
}

#[test]
fn an_error_status_handed_back_as_ok_is_retried_by_the_blocking_call() {
    let rel = rel(4);
    let answer = script(&[503, 500, 200]);
    let n = Cell::new(0);
    let got = rel.call_blocking_with(Statuses, || {
        let status = answer(n.get());
        n.set(n.get() + 1);
        Ok::<_, std::io::Error>(status)
    });
    assert_eq!(got.unwrap(), 200);
    assert_eq!(n.get(), 3);
    let s = rel.snapshot();
    assert_eq!((s.succeeded, s.failed, s.retries), (1, 0, 2));
}

#[test]
fn a_call_that_gives_up_on_an_error_status_returns_it_as_it_came() {
    let rel = rel(3);
    let n = Cell::new(0);
    let got = rel.call_blocking_with(Statuses, || {
        n.set(n.get() + 1);
        Ok::<u16, std::io::Error>(500)
    });
    // The last answer, as the service gave it; the call is counted as failed.
    assert_eq!(got.unwrap(), 500);
    assert_eq!(n.get(), 3);
    let s = rel.snapshot();
    assert_eq!((s.succeeded, s.failed), (0, 1));

    // A fatal status is not retried, and comes back at once.
    let n = Cell::new(0);
    let got = rel.call_blocking_with(Statuses, || {
        n.set(n.get() + 1);
        Ok::<u16, std::io::Error>(404)
    });
    assert_eq!((got.unwrap(), n.get()), (404, 1));

    // Errors are still errors, by the same classifier.
    let err = rel
        .call_blocking_with(Statuses, || {
            Err::<u16, _>(std::io::Error::from(ErrorKind::PermissionDenied))
        })
        .unwrap_err();
    assert!(matches!(err, Error::GaveUp { attempts: 1, .. }), "{err:?}");
}

#[test]
fn error_statuses_open_the_breaker_as_errors_do() {
    let rel = Reliable::builder("opens")
        .manual_time(ManualClock::new())
        .consecutive_failures(2)
        .attempts(1)
        .build()
        .unwrap();
    for _ in 0..2 {
        let got = rel.call_blocking_with(Statuses, || Ok::<u16, std::io::Error>(500));
        assert_eq!(got.unwrap(), 500);
    }
    assert_eq!(rel.snapshot().state, Some(State::Open));
    let refused = rel.call_blocking_with(Statuses, || Ok::<u16, std::io::Error>(200));
    assert!(matches!(refused, Err(Error::Open { .. })), "{refused:?}");
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn the_async_call_reads_ok_values_with_the_same_classifier() {
    let rel = Reliable::builder("async")
        .no_breaker()
        .attempts(4)
        .build()
        .unwrap();
    let answer = script(&[503, 502, 200]);
    let n = AtomicU32::new(0);
    let got = rel
        .call_with(Statuses, || {
            let status = answer(n.fetch_add(1, Ordering::Relaxed));
            async move { Ok::<_, std::io::Error>(status) }
        })
        .await;
    assert_eq!((got.unwrap(), n.load(Ordering::Relaxed)), (200, 3));

    // Plain `call` reads with `ByType`: every `Ok` a success.
    let n = AtomicU32::new(0);
    let got = rel
        .call(|| {
            n.fetch_add(1, Ordering::Relaxed);
            async { Ok::<u16, std::io::Error>(503) }
        })
        .await;
    assert_eq!((got.unwrap(), n.load(Ordering::Relaxed)), (503, 1));
}

#[test]
fn a_closure_classifies_errors_and_takes_every_ok() {
    let rel = rel(3);
    let n = Cell::new(0);
    let err = rel
        .call_blocking_with(
            |_: &&str| ErrorClass::Fatal,
            || {
                n.set(n.get() + 1);
                Err::<u16, _>("bad prompt")
            },
        )
        .unwrap_err();
    assert!(matches!(err, Error::GaveUp { attempts: 1, .. }), "{err:?}");
    assert_eq!(n.get(), 1);
}

/// A type of the caller's own joins `ByType`, so that plain `call` takes it.
#[derive(Debug)]
enum ApiError {
    BadPrompt,
    Overloaded,
}

impl<T: ?Sized> Classify<ApiError, T> for ByType {
    fn error(&self, e: &ApiError) -> ErrorClass {
        match e {
            ApiError::BadPrompt => ErrorClass::Fatal,
            ApiError::Overloaded => ErrorClass::Throttled { retry_after: None },
        }
    }
}

#[test]
fn a_type_that_joins_by_type_is_classified_by_plain_call() {
    let rel = rel(3);
    let n = Cell::new(0);
    let err = rel
        .call_blocking(|| {
            n.set(n.get() + 1);
            Err::<(), _>(ApiError::Overloaded)
        })
        .unwrap_err();
    assert!(matches!(err, Error::GaveUp { attempts: 3, .. }), "{err:?}");
    let err = rel
        .call_blocking(|| Err::<(), _>(ApiError::BadPrompt))
        .unwrap_err();
    assert!(matches!(err, Error::GaveUp { attempts: 1, .. }), "{err:?}");
}

#[test]
fn the_detached_call_reads_with_by_type() {
    let rel = Reliable::builder("detached")
        .no_breaker()
        .attempts(3)
        .base_delay(Duration::from_millis(1))
        .jitter(0.0)
        .build()
        .unwrap();
    let seen = std::sync::Arc::new(Mutex::new(0u32));
    let counted = seen.clone();
    let err = rel
        .call_blocking_detached(move |_| {
            *counted.lock().unwrap() += 1;
            Err::<(), _>(ApiError::BadPrompt)
        })
        .unwrap_err();
    assert!(matches!(err, Error::GaveUp { attempts: 1, .. }), "{err:?}");
    assert_eq!(*seen.lock().unwrap(), 1);
}

#[cfg(feature = "tower")]
mod tower_face {
    use super::*;
    use reliable::tower::{BoxError, Policy, ReliableLayer, error_class};
    use tower::{Layer, Service, ServiceExt, service_fn};

    /// The same reading of statuses, for a tower service's `BoxError`.
    impl Classify<BoxError, u16> for Statuses {
        fn error(&self, e: &BoxError) -> ErrorClass {
            error_class(e)
        }

        fn ok(&self, status: &u16) -> Option<ErrorClass> {
            Statuses::status(*status)
        }
    }

    impl Policy<u32, u16> for Statuses {
        fn clone_request(&self, req: &u32) -> Option<u32> {
            Some(*req)
        }
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn the_tower_layer_and_the_call_decide_alike() {
        let builder = || {
            Reliable::builder("alike")
                .no_breaker()
                .attempts(3)
                .base_delay(Duration::from_millis(1))
                .jitter(0.0)
        };
        for statuses in [&[503u16, 200][..], &[500, 500, 500, 200], &[404, 200]] {
            let seen = std::sync::Arc::new(AtomicU32::new(0));
            let counted = seen.clone();
            let mut svc = ReliableLayer::from_builder(builder(), Statuses)
                .unwrap()
                .layer(service_fn(move |_: u32| {
                    let n = counted.fetch_add(1, Ordering::Relaxed) as usize;
                    let status = statuses[n.min(statuses.len() - 1)];
                    async move { Ok::<u16, BoxError>(status) }
                }));
            let through_tower = svc.ready().await.unwrap().call(1).await.unwrap();
            let tower_sends = seen.load(Ordering::Relaxed);

            let rel = builder().build().unwrap();
            let n = AtomicU32::new(0);
            let through_call = rel
                .call_with(Statuses, || {
                    let i = n.fetch_add(1, Ordering::Relaxed) as usize;
                    let status = statuses[i.min(statuses.len() - 1)];
                    async move { Ok::<u16, std::io::Error>(status) }
                })
                .await
                .unwrap();
            assert_eq!(
                (through_tower, tower_sends),
                (through_call, n.load(Ordering::Relaxed)),
                "{statuses:?}"
            );
        }
    }
}

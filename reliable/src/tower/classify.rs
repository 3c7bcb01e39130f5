//! How the layers read an answer: the crate's one [`Classify`] (is this response a failure, of which class?) and
//! [`Policy`] (can this request be sent again?), with [`AnyOk`] for plain services and
//! [`HttpPolicy`] for HTTP, which reads status codes and the crate's [HTTP signals](crate::http)
//! (`Retry-After`, `retry-after-ms`, `x-should-retry`) with [`classify_status`](crate::http::classify_status).

use reliable_core::Instant;
use reliable_core::outcome::ErrorClass;

use crate::classify::Classify;
pub use crate::classify::HttpPolicy;

use super::error::{BoxError, GaveUp, Open, OverLimit, OverRate, ProbeDenied, Throttled, TimedOut};
use reliable_core::answer::{Answer, Refuser};

/// The tower layers' classification of an error: the layers' own errors ([`TimedOut`]: timeout;
/// [`Open`], [`Throttled`], [`ProbeDenied`], [`OverLimit`] and [`OverRate`]: refused locally, with
/// the breaker's or the rate limiter's `retry_after`; a retry layer's [`GaveUp`]: its last
/// attempt's class), and every other error as [`ByType`](crate::ByType) reads a boxed error (an
/// `io::Error`, an [`HttpError`](crate::http::HttpError) or, with the feature, a `reqwest::Error`
/// inside by its own rule; anything else transient), so an error means the same behind a tower
/// layer as through `Reliable::call`. [`AnyOk`] and [`HttpPolicy`] classify errors so.
pub fn error_class(e: &BoxError) -> ErrorClass {
    if let Some(gave_up) = e.downcast_ref::<GaveUp>() {
        // A retry layer below gave up: the call ended as its last attempt did (a throttle or a
        // breaker around the retry hears that answer, as in the simulator).
        return error_class(&gave_up.last);
    }
    if e.is::<TimedOut>() {
        ErrorClass::Timeout
    } else if let Some(open) = e.downcast_ref::<Open>() {
        ErrorClass::Refused {
            retry_after: open.retry_after.map(Into::into),
        }
    } else if e.is::<Throttled>() {
        ErrorClass::Refused { retry_after: None }
    } else if let Some(denied) = probe_denied(e) {
        denied
    } else if let Some(limited) = local_limit(e) {
        limited
    } else {
        crate::classify::boxed_class(e.as_ref())
    }
}

/// A probe the ledger denied, read through the core's answer table as the builder reads it.
fn probe_denied(e: &BoxError) -> Option<ErrorClass> {
    let probe = e.downcast_ref::<ProbeDenied>()?;
    Answer::Refused {
        by: crate::ShedReason::Ledger(probe.denied).refuser(),
        retry_after: None,
    }
    .class()
}

/// A limiter's refusal, read through the core's answer table.
fn local_limit(e: &BoxError) -> Option<ErrorClass> {
    let retry_after = if e.is::<OverLimit>() {
        None
    } else {
        Some(e.downcast_ref::<OverRate>()?.retry_after.into())
    };
    Answer::Refused {
        by: Refuser::Limiter,
        retry_after,
    }
    .class()
}

/// What a retry or fallback layer needs besides classification: a copy of the request to send
/// again, and where to put an attempt's deadline so that a timeout further down (inside a
/// breaker) can see it.
pub trait Policy<Req, Res>: Classify<BoxError, Res> + Clone + Send + Sync + 'static {
    /// A copy of `req` for another attempt, or `None` if it must not be sent twice (the first
    /// answer is then final).
    fn clone_request(&self, req: &Req) -> Option<Req>;

    /// Tells the attempt `req` when it must end. The default does nothing; [`HttpPolicy`] puts a
    /// [`Deadline`] into the request's extensions.
    fn set_deadline(&self, req: &mut Req, at: Instant) {
        let _ = (req, at);
    }
}

/// Every `Ok` response is a success (services whose failures are errors).
#[derive(Clone, Copy, Debug, Default)]
pub struct AnyOk;

impl<Res: ?Sized> Classify<BoxError, Res> for AnyOk {
    #[inline]
    fn error(&self, e: &BoxError) -> ErrorClass {
        error_class(e)
    }
}

/// When an attempt must end, in the [`Clock`](crate::clock::Clock)'s time base: set by the retry layer in
/// an HTTP request's extensions; an HTTP client service below the breaker reads it and fails the
/// call with [`TimedOut`] then, so the breaker counts the timeout as a failure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Deadline(pub Instant);

/// An `http::Response` by its status and headers ([`HttpPolicy`]'s rule); an error as
/// [`error_class`] reads it.
impl<B: 'static> Classify<BoxError, http::Response<B>> for HttpPolicy {
    #[inline]
    fn error(&self, e: &BoxError) -> ErrorClass {
        error_class(e)
    }

    fn ok(&self, res: &http::Response<B>) -> Option<ErrorClass> {
        HttpPolicy::status(res.status().as_u16(), res.headers())
    }
}

impl<B, R> Policy<http::Request<B>, http::Response<R>> for HttpPolicy
where
    B: Clone + 'static,
    R: 'static,
{
    fn clone_request(&self, req: &http::Request<B>) -> Option<http::Request<B>> {
        if !self.all_methods && !req.method().is_idempotent() {
            return None;
        }
        let mut copy = http::Request::new(req.body().clone());
        *copy.method_mut() = req.method().clone();
        *copy.uri_mut() = req.uri().clone();
        *copy.version_mut() = req.version();
        *copy.headers_mut() = req.headers().clone();
        *copy.extensions_mut() = req.extensions().clone();
        Some(copy)
    }

    fn set_deadline(&self, req: &mut http::Request<B>, at: Instant) {
        let at = match req.extensions().get::<Deadline>() {
            Some(Deadline(outer)) => at.min(*outer),
            None => at,
        };
        req.extensions_mut().insert(Deadline(at));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reliable_core::Duration;

    fn res(status: u16, headers: &[(&str, &str)]) -> http::Response<()> {
        let mut b = http::Response::builder().status(status);
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        b.body(()).unwrap()
    }

    #[test]
    fn http_statuses_map_to_classes() {
        let p = HttpPolicy::new();
        assert_eq!(p.ok(&res(200, &[])), None);
        assert_eq!(p.ok(&res(500, &[])), Some(ErrorClass::Transient));
        assert_eq!(
            p.ok(&res(503, &[])),
            Some(ErrorClass::Throttled { retry_after: None })
        );
        assert_eq!(p.ok(&res(404, &[])), Some(ErrorClass::Fatal));
        assert_eq!(
            p.ok(&res(429, &[("retry-after", "2")])),
            Some(ErrorClass::Throttled {
                retry_after: Some(Duration::from_secs(2))
            })
        );
        assert_eq!(
            p.ok(&res(
                503,
                &[("retry-after-ms", "250"), ("retry-after", "1")]
            )),
            Some(ErrorClass::Throttled {
                retry_after: Some(Duration::from_millis(250))
            })
        );
        assert_eq!(
            p.ok(&res(500, &[("x-should-retry", "false")])),
            Some(ErrorClass::DontRetry)
        );
        assert_eq!(
            p.ok(&res(400, &[("x-should-retry", "true")])),
            Some(ErrorClass::Transient)
        );
        // An overload status with "don't retry" is final, and (by class) accepted.
        let final_refusal = res(429, &[("x-should-retry", "false")]);
        assert_eq!(p.ok(&final_refusal), Some(ErrorClass::DontRetry));
    }

    #[test]
    fn only_idempotent_requests_are_cloned_by_default() {
        let get = http::Request::get("/x").header("a", "b").body(()).unwrap();
        let post = http::Request::post("/x").body(()).unwrap();
        let p = HttpPolicy::new();
        let copy = <HttpPolicy as Policy<_, http::Response<()>>>::clone_request(&p, &get).unwrap();
        assert_eq!(copy.uri(), "/x");
        assert_eq!(copy.headers()["a"], "b");
        let all = HttpPolicy::new().all_methods();
        assert!(<HttpPolicy as Policy<_, http::Response<()>>>::clone_request(&p, &post).is_none());
        assert!(
            <HttpPolicy as Policy<_, http::Response<()>>>::clone_request(&all, &post).is_some()
        );
    }

    #[test]
    fn errors_are_classified_by_type() {
        let e: BoxError = Box::new(TimedOut);
        assert_eq!(error_class(&e), ErrorClass::Timeout);
        let e: BoxError = Box::new(Open {
            retry_after: Some(std::time::Duration::from_secs(1)),
        });
        assert_eq!(
            error_class(&e),
            ErrorClass::Refused {
                retry_after: Some(Duration::from_secs(1))
            }
        );
        let e: BoxError = "boom".into();
        assert_eq!(error_class(&e), ErrorClass::Transient);
    }

    #[test]
    fn other_errors_mean_what_they_mean_to_reliable_call() {
        use std::io::{Error, ErrorKind};
        for kind in [
            ErrorKind::TimedOut,
            ErrorKind::NotFound,
            ErrorKind::ConnectionRefused,
            ErrorKind::InvalidInput,
        ] {
            let e: BoxError = Box::new(Error::from(kind));
            assert_eq!(
                error_class(&e),
                crate::ByType.error_of(&Error::from(kind)),
                "{kind:?}"
            );
        }
        let e: BoxError = Box::new(Error::from(ErrorKind::TimedOut));
        assert_eq!(error_class(&e), ErrorClass::Timeout);
        let e: BoxError = Box::new(Error::from(ErrorKind::NotFound));
        assert_eq!(error_class(&e), ErrorClass::Fatal);
        let none: &[(&str, &str)] = &[];
        let e: BoxError = Box::new(crate::http::HttpError::new(
            400,
            none,
            std::time::SystemTime::UNIX_EPOCH,
        ));
        assert_eq!(error_class(&e), ErrorClass::Fatal);
    }

    #[test]
    fn a_retry_that_gave_up_is_classed_by_its_last_attempt() {
        // A throttle around a retry must not count a call whose attempts all timed out as
        // accepted, nor a breaker around it count a refusal below as a failure.
        let gave_up = |last: BoxError| -> BoxError {
            Box::new(GaveUp {
                reason: reliable_core::retry::GiveUpReason::MaxAttempts,
                attempts: 2,
                last,
            })
        };
        assert_eq!(
            error_class(&gave_up(Box::new(TimedOut))),
            ErrorClass::Timeout
        );
        let refused = gave_up(Box::new(Throttled { probability_ppm: 1 }));
        assert_eq!(
            error_class(&refused),
            ErrorClass::Refused { retry_after: None }
        );
        assert_eq!(error_class(&gave_up("boom".into())), ErrorClass::Transient);
    }
}

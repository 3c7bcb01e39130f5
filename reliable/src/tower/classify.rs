//! How the layers read an answer: [`Classify`] (is this response a failure, of which class?) and
//! [`Policy`] (can this request be sent again?), with [`AnyOk`] for plain services and
//! [`HttpPolicy`] for HTTP, which reads status codes and the crate's [HTTP signals](crate::http)
//! (`Retry-After`, `retry-after-ms`, `x-should-retry`) with [`classify_status`].

use std::time::SystemTime;

use reliable_core::outcome::ErrorClass;
use reliable_core::{Duration, Instant};

use crate::http::{Signals, classify_status, is_overload};

use super::error::{BoxError, Open, Throttled, TimedOut};

/// Maps an answer to the core's error classes. A response can be a failure (an HTTP 503 is an
/// `Ok` at the service level); an error is always one.
pub trait Classify<Res>: Clone + Send + Sync + 'static {
    /// `None` if `res` is a success, else its class.
    fn response(&self, res: &Res) -> Option<ErrorClass>;

    /// The class of an error. The default knows the layers' own errors ([`TimedOut`]: timeout;
    /// [`Open`] and [`Throttled`]: throttled, with the breaker's `retry_after`) and calls every
    /// other error transient.
    fn error(&self, e: &BoxError) -> ErrorClass {
        error_class(e)
    }

    /// Whether the downstream took the request (for the adaptive throttle), given the response
    /// (`None` for an error) and its class (`None`: a success). The default is the crate's one
    /// rule, [`accepted`](crate::classify::accepted): everything but an overload refusal.
    fn accepted(&self, res: Option<&Res>, class: Option<ErrorClass>) -> bool {
        let _ = res;
        class.is_none_or(crate::classify::accepted)
    }
}

/// The default classification of an error (see [`Classify::error`]).
pub fn error_class(e: &BoxError) -> ErrorClass {
    if e.is::<TimedOut>() {
        ErrorClass::Timeout
    } else if let Some(open) = e.downcast_ref::<Open>() {
        ErrorClass::Throttled {
            retry_after: open.retry_after,
        }
    } else if e.is::<Throttled>() {
        ErrorClass::Throttled { retry_after: None }
    } else {
        ErrorClass::Transient
    }
}

/// What a retry or fallback layer needs besides classification: a copy of the request to send
/// again, and where to put an attempt's deadline so that a timeout further down (inside a
/// breaker) can see it.
pub trait Policy<Req, Res>: Classify<Res> {
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

impl<Res> Classify<Res> for AnyOk {
    fn response(&self, _: &Res) -> Option<ErrorClass> {
        None
    }
}

/// When an attempt must end, in the [`Clock`](crate::clock::Clock)'s time base: set by the retry layer in
/// an HTTP request's extensions; an HTTP client service below the breaker reads it and fails the
/// call with [`TimedOut`] then, so the breaker counts the timeout as a failure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Deadline(pub Instant);

/// HTTP classification and request cloning for `http::Request<B>` with a cloneable body.
///
/// Statuses below 400 succeed; errors are classed by [`classify_status`] (overload answers
/// throttled with the server's delay, 408/409/5xx transient, other 4xx fatal, `x-should-retry`
/// honoured). Only idempotent methods are retried unless [`HttpPolicy::all_methods`] is set.
#[derive(Clone, Copy, Debug, Default)]
pub struct HttpPolicy {
    all_methods: bool,
}

impl HttpPolicy {
    /// The default policy: idempotent methods only.
    pub fn new() -> Self {
        HttpPolicy { all_methods: false }
    }

    /// Retries every method (for POSTs made idempotent by an idempotency key).
    pub fn all_methods(mut self) -> Self {
        self.all_methods = true;
        self
    }

    /// The server's requested delay in `headers` (`retry-after-ms`, else `Retry-After` in
    /// seconds or as an HTTP-date), if any.
    pub fn retry_after(headers: &http::HeaderMap) -> Option<Duration> {
        Signals::from_headers(headers, SystemTime::now())
            .retry_after
            .map(Duration::from)
    }
}

impl<B> Classify<http::Response<B>> for HttpPolicy
where
    B: 'static,
{
    fn response(&self, res: &http::Response<B>) -> Option<ErrorClass> {
        let status = res.status().as_u16();
        if status < 400 {
            return None;
        }
        classify_status(
            status,
            &Signals::from_headers(res.headers(), SystemTime::now()),
        )
    }

    /// The crate's rule ([`accepted`](crate::classify::accepted)), and an overload status (429,
    /// 503, 529) is a refusal whatever its class (also with `x-should-retry: false`, which makes
    /// it `DontRetry`).
    fn accepted(&self, res: Option<&http::Response<B>>, class: Option<ErrorClass>) -> bool {
        res.is_none_or(|r| !is_overload(r.status().as_u16()))
            && class.is_none_or(crate::classify::accepted)
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
        Some(copy)
    }

    fn set_deadline(&self, req: &mut http::Request<B>, at: Instant) {
        req.extensions_mut().insert(Deadline(at));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(p.response(&res(200, &[])), None);
        assert_eq!(p.response(&res(500, &[])), Some(ErrorClass::Transient));
        assert_eq!(
            p.response(&res(503, &[])),
            Some(ErrorClass::Throttled { retry_after: None })
        );
        assert_eq!(p.response(&res(404, &[])), Some(ErrorClass::Fatal));
        assert_eq!(
            p.response(&res(429, &[("retry-after", "2")])),
            Some(ErrorClass::Throttled {
                retry_after: Some(Duration::from_secs(2))
            })
        );
        assert_eq!(
            p.response(&res(
                503,
                &[("retry-after-ms", "250"), ("retry-after", "1")]
            )),
            Some(ErrorClass::Throttled {
                retry_after: Some(Duration::from_millis(250))
            })
        );
        assert_eq!(
            p.response(&res(500, &[("x-should-retry", "false")])),
            Some(ErrorClass::DontRetry)
        );
        assert_eq!(
            p.response(&res(400, &[("x-should-retry", "true")])),
            Some(ErrorClass::Transient)
        );
        assert!(!Classify::<http::Response<()>>::accepted(
            &p,
            None,
            Some(ErrorClass::Throttled { retry_after: None })
        ));
        let unavailable = res(503, &[]);
        assert!(!p.accepted(Some(&unavailable), p.response(&unavailable)));
        let failed = res(500, &[]);
        assert!(p.accepted(Some(&failed), p.response(&failed)));
        // An overload status is a refusal even when it also says not to retry.
        let final_refusal = res(429, &[("x-should-retry", "false")]);
        assert_eq!(p.response(&final_refusal), Some(ErrorClass::DontRetry));
        assert!(!p.accepted(Some(&final_refusal), p.response(&final_refusal)));
        // A timeout is not a refusal: the breaker counts it, the throttle does not.
        assert!(Classify::<http::Response<()>>::accepted(
            &p,
            None,
            Some(ErrorClass::Timeout)
        ));
        // The default rule is the crate's.
        for class in [
            ErrorClass::Transient,
            ErrorClass::Timeout,
            ErrorClass::Fatal,
            ErrorClass::DontRetry,
            ErrorClass::Throttled { retry_after: None },
        ] {
            assert_eq!(
                Classify::<()>::accepted(&AnyOk, None, Some(class)),
                crate::classify::accepted(class),
                "{class:?}"
            );
        }
        assert!(Classify::<()>::accepted(&AnyOk, Some(&()), None));
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
            retry_after: Some(Duration::from_secs(1)),
        });
        assert_eq!(
            error_class(&e),
            ErrorClass::Throttled {
                retry_after: Some(Duration::from_secs(1))
            }
        );
        let e: BoxError = "boom".into();
        assert_eq!(error_class(&e), ErrorClass::Transient);
    }
}

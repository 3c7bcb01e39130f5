//! [`Classify`]: what an attempt's outcome means for retrying, as the core's [`ErrorClass`]: the
//! one classification every face reads ([`Reliable::call`](crate::Reliable::call) and the
//! blocking calls, the fallback chain, the reqwest middleware, the tower layers).
//!
//! A classifier reads an error (always a failure, of some class) and, if it wants, an `Ok`
//! value (a success unless it says otherwise: an HTTP 503 that a client hands back as `Ok`).
//! The retry policy, the budget, the throttle and the breaker all read the same class.
//!
//! | classifier | reads |
//! |---|---|
//! | [`ByType`] | an error by its type's rule (below); every `Ok` a success. What [`call`](crate::Reliable::call) uses |
//! | a closure or function `Fn(&E) -> ErrorClass` | an error by the closure; every `Ok` a success ([`call_with`](crate::Reliable::call_with)) |
//! | `HttpPolicy` (feature `http`) | with `reqwest`, a `reqwest::Response` by its status and headers and a `reqwest::Error` by `ByType`'s rule; with `tower`, an `http::Response` |
//! | `reliable::tower::AnyOk` (feature `tower`) | a tower layer's error, the layers' own refusals included; every `Ok` a success |
//!
//! [`ByType`]'s rules:
//!
//! | error type | class |
//! |---|---|
//! | [`ErrorClass`] | itself |
//! | [`std::io::Error`] | `TimedOut`, `WouldBlock`: Timeout; `InvalidInput`, `InvalidData`, `NotFound`, `PermissionDenied`, `Unsupported`: Fatal; the rest (connection refused, reset, broken pipe, …): Transient |
//! | [`HttpError`] | by status and headers (see [`http`](crate::http)) |
//! | `Box<dyn Error + Send + Sync>`, `anyhow::Error` (feature `anyhow`) | an `io::Error`, `HttpError` or `reqwest::Error` inside by its rule; anything else Transient |
//! | `reqwest::Error` (feature `reqwest`) | a timeout: Timeout; a request that cannot be built, a bad redirect, an undecodable body: Fatal; the rest (connect, reset): Transient |
//! | `reliable::llm::ProviderError` (feature `llm`) | by the provider's signal |
//! | `String`, `str` (an error message) | Transient |
//! | a reference to any of these | as the error itself |
//!
//! Any other error type gets a class in one line, by a closure or a function:
//! `rel.call_with(ApiError::class, || work())`. A type used everywhere can join [`ByType`]
//! instead (`impl<T: ?Sized> Classify<ApiError, T> for ByType`), so that plain `call` takes it.
//!
//! Transient is the default for unknown errors: retrying an unknown failure a bounded number of
//! times, under a budget and a breaker, is the safe side; a validation error that should not be
//! retried deserves its own `Fatal`.
//!
//! ```
//! use reliable::{ByType, Classify};
//! use reliable_core::outcome::ErrorClass;
//!
//! #[derive(Debug)]
//! enum ApiError { BadPrompt, Overloaded }
//!
//! impl<T: ?Sized> Classify<ApiError, T> for ByType {
//!     fn error(&self, e: &ApiError) -> ErrorClass {
//!         match e {
//!             ApiError::BadPrompt => ErrorClass::Fatal,
//!             ApiError::Overloaded => ErrorClass::Throttled { retry_after: None },
//!         }
//!     }
//! }
//! assert!(!ByType.error_of(&ApiError::BadPrompt).is_retryable());
//! let io = std::io::Error::from(std::io::ErrorKind::TimedOut);
//! assert_eq!(ByType.error_of(&io), ErrorClass::Timeout);
//! ```

use crate::http::HttpError;
use reliable_core::answer::Answer;
use reliable_core::outcome::ErrorClass;
use std::io::ErrorKind;

/// Whether the downstream **accepted** an attempt that failed with `class`, as the adaptive
/// throttle counts accepts: the core's rule ([`reliable_core::answer`]; Google SRE book,
/// "Handling Overload"). An overload refusal ([`ErrorClass::Throttled`]: a 429, 503 or 529, any
/// answer with `Retry-After`), a timeout (nothing shows the backend took it) and a local refusal
/// are not accepts; every other failure (a 500, a reset connection, a bad request) is: the
/// downstream did not push back, and reacting to failures is the breaker's job. A success is
/// always an accept. [`Reliable`](crate::Reliable)'s calls and the tower layer `ThrottleLayer`
/// (feature `tower`) both count by this rule.
///
/// ```
/// use reliable::classify::accepted;
/// use reliable_core::outcome::ErrorClass;
///
/// assert!(!accepted(ErrorClass::Throttled { retry_after: None }));
/// assert!(accepted(ErrorClass::Transient)); // a 500: answered, not refused
/// assert!(!accepted(ErrorClass::Timeout));
/// ```
pub const fn accepted(class: ErrorClass) -> bool {
    class.consequences().accepted
}

/// What an attempt's outcome means: an error's class, and whether an `Ok` value is a failure
/// after all. See the [module](self) for the classifiers there are.
#[diagnostic::on_unimplemented(
    message = "`{Self}` does not classify the error type `{E}`",
    label = "no rule for `{E}`",
    note = "classify it in one line: `call_with(|e: &{E}| ErrorClass::Transient, …)` (or a function `fn(&{E}) -> ErrorClass`), or give `ByType` a rule: `impl<T: ?Sized> Classify<{E}, T> for ByType`"
)]
pub trait Classify<E: ?Sized, T: ?Sized> {
    /// The class of the failure `error`.
    fn error(&self, error: &E) -> ErrorClass;

    /// `None` if the `Ok` value `value` is a success (the default: every `Ok` is), else its
    /// class. A call that gives up on such a failure returns the value as it came: the last
    /// answer, as the service gave it.
    #[inline]
    fn ok(&self, value: &T) -> Option<ErrorClass> {
        let _ = value;
        None
    }

    /// The class of an attempt's outcome, an `Ok` by [`ok`](Self::ok) and an error by
    /// [`error`](Self::error): `None` a success.
    ///
    /// ```
    /// use reliable::{ByType, Classify};
    /// use reliable_core::outcome::ErrorClass;
    ///
    /// let reset = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
    /// assert_eq!(ByType.outcome(Err::<&u32, _>(&reset)), Some(ErrorClass::Transient));
    /// assert_eq!(ByType.outcome(Ok::<_, &std::io::Error>(&7u32)), None);
    /// ```
    #[inline]
    fn outcome(&self, outcome: Result<&T, &E>) -> Option<ErrorClass> {
        match outcome {
            Ok(value) => self.ok(value),
            Err(error) => Some(self.error(error)),
        }
    }
}

/// A function or closure from an error to its class; every `Ok` is a success.
impl<E: ?Sized, T: ?Sized, F: Fn(&E) -> ErrorClass> Classify<E, T> for F {
    #[inline]
    fn error(&self, error: &E) -> ErrorClass {
        self(error)
    }
}

/// The classifier by the error's type: [`Reliable::call`](crate::Reliable::call)'s, and every
/// call's without a classifier of its own. Every `Ok` is a success. The rules are in the
/// [module](self)'s table; a type of yours joins them with
/// `impl<T: ?Sized> Classify<YourError, T> for ByType`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ByType;

impl ByType {
    /// The class of `error` by its type's rule.
    ///
    /// ```
    /// use reliable::ByType;
    /// use reliable_core::outcome::ErrorClass;
    ///
    /// let e = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
    /// assert_eq!(ByType.error_of(&e), ErrorClass::Transient);
    /// ```
    #[inline]
    pub fn error_of<E: ?Sized>(&self, error: &E) -> ErrorClass
    where
        Self: Classify<E, ()>,
    {
        <Self as Classify<E, ()>>::error(self, error)
    }
}

/// Each error type's rule for [`ByType`], written once.
macro_rules! by_type {
    ($($(#[$meta:meta])* $error:ty => |$e:ident| $class:expr;)*) => {$(
        $(#[$meta])*
        impl<T: ?Sized> Classify<$error, T> for ByType {
            #[inline]
            fn error(&self, $e: &$error) -> ErrorClass {
                $class
            }
        }
    )*};
}

by_type! {
    ErrorClass => |e| *e;
    std::io::Error => |e| answer_class(io_answer(e.kind()));
    Box<dyn std::error::Error + Send + Sync> => |e| boxed_class(e.as_ref());
    HttpError => |e| http_error_class(e);
    // An error message: an unknown failure, retried (a bounded number of times, under the breaker).
    String => |_e| ErrorClass::Transient;
    str => |_e| ErrorClass::Transient;
    std::convert::Infallible => |e| match *e {};
    #[cfg(feature = "anyhow")]
    anyhow::Error => |e| boxed_class(e.as_ref());
    #[cfg(feature = "reqwest")]
    reqwest::Error => |e| reqwest_class(e);
}

/// A reference to an error reads as the error.
impl<'a, E: ?Sized, T: ?Sized> Classify<&'a E, T> for ByType
where
    ByType: Classify<E, T>,
{
    #[inline]
    fn error(&self, error: &&'a E) -> ErrorClass {
        <Self as Classify<E, T>>::error(self, *error)
    }
}

/// What an I/O error says happened, in the core's words: the timer fired, the connection failed,
/// or no answer at all because the request itself is wrong (`None`).
fn io_answer(kind: ErrorKind) -> Option<Answer> {
    match kind {
        ErrorKind::TimedOut | ErrorKind::WouldBlock => Some(Answer::Timeout),
        ErrorKind::InvalidInput
        | ErrorKind::InvalidData
        | ErrorKind::NotFound
        | ErrorKind::PermissionDenied
        | ErrorKind::Unsupported => None,
        _ => Some(Answer::Connection),
    }
}

/// The class of an attempt that failed with `answer`, by the core's table; a request that could
/// not be made at all (`None`) is [`Fatal`](ErrorClass::Fatal): sending it again changes nothing.
fn answer_class(answer: Option<Answer>) -> ErrorClass {
    match answer {
        Some(answer) => answer.class().unwrap_or(ErrorClass::Fatal),
        None => ErrorClass::Fatal,
    }
}

/// A type-erased error by the rule of the known type inside it, else Transient: the one rule for
/// a boxed error, which the tower layers' default classification reads too.
pub(crate) fn boxed_class(e: &(dyn std::error::Error + 'static)) -> ErrorClass {
    if let Some(io) = e.downcast_ref::<std::io::Error>() {
        return ByType.error_of(io);
    }
    if let Some(http) = e.downcast_ref::<HttpError>() {
        return http_error_class(http);
    }
    #[cfg(feature = "reqwest")]
    if let Some(reqwest) = e.downcast_ref::<reqwest::Error>() {
        return reqwest_class(reqwest);
    }
    ErrorClass::Transient
}

/// `reqwest::Error`'s rule: an error with a status (from `error_for_status`) by the status; a
/// timeout as a timeout; a failed connection as one; all through the core's table. A request
/// that could not be built, a bad redirect or an unreadable answer is no answer to retry: Fatal.
#[cfg(feature = "reqwest")]
fn reqwest_class(e: &reqwest::Error) -> ErrorClass {
    let answer = if let Some(status) = e.status() {
        Some(crate::http::answer(
            status.as_u16(),
            &crate::http::HeaderSignals::default(),
        ))
    } else if e.is_timeout() {
        Some(Answer::Timeout)
    } else if e.is_builder() || e.is_redirect() || e.is_decode() {
        None
    } else {
        Some(Answer::Connection)
    };
    answer_class(answer)
}

/// [`HttpError`]'s rule: [`classify_status`](crate::http::classify_status); a status below 400
/// wrapped as an error anyway is [`Fatal`](ErrorClass::Fatal) (the caller decided it was wrong;
/// retrying will not change it).
fn http_error_class(e: &HttpError) -> ErrorClass {
    crate::http::classify_status(e.status, &e.signals).unwrap_or(ErrorClass::Fatal)
}

/// The classifier of HTTP answers: statuses below 400 succeed; others are classed by the core's
/// table through [`classify_status`](crate::http::classify_status) (overload answers throttled
/// with the server's delay, 408/409/5xx transient, other 4xx fatal, `x-should-retry` honoured).
/// With the feature `reqwest` it reads a `reqwest::Response` (and a `reqwest::Error` by
/// [`ByType`]'s rule), so that a plain `send()` is retried on a 503 without `error_for_status`;
/// with `tower`, an `http::Response`, and it copies requests for the tower layers (only
/// idempotent methods unless [`HttpPolicy::all_methods`] is set).
///
/// A call that gives up on an error response returns that response, as the server sent it.
#[cfg(feature = "http")]
#[derive(Clone, Copy, Debug, Default)]
pub struct HttpPolicy {
    pub(crate) all_methods: bool,
}

#[cfg(feature = "http")]
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
    pub fn retry_after(headers: &http::HeaderMap) -> Option<std::time::Duration> {
        crate::http::HeaderSignals::from_headers(headers, std::time::SystemTime::now()).retry_after
    }

    /// The class of an answer with `status` and `headers`: `None` below 400.
    pub(crate) fn status(status: u16, headers: &http::HeaderMap) -> Option<ErrorClass> {
        if status < 400 {
            return None;
        }
        crate::http::classify_status(
            status,
            &crate::http::HeaderSignals::from_headers(headers, std::time::SystemTime::now()),
        )
    }
}

#[cfg(feature = "reqwest")]
impl Classify<reqwest::Error, reqwest::Response> for HttpPolicy {
    #[inline]
    fn error(&self, error: &reqwest::Error) -> ErrorClass {
        reqwest_class(error)
    }

    fn ok(&self, response: &reqwest::Response) -> Option<ErrorClass> {
        HttpPolicy::status(response.status().as_u16(), response.headers())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_kinds() {
        let c = |k: ErrorKind| ByType.error_of(&std::io::Error::from(k));
        assert_eq!(c(ErrorKind::TimedOut), ErrorClass::Timeout);
        assert_eq!(c(ErrorKind::ConnectionReset), ErrorClass::Transient);
        assert_eq!(c(ErrorKind::ConnectionRefused), ErrorClass::Transient);
        assert_eq!(c(ErrorKind::InvalidInput), ErrorClass::Fatal);
    }

    #[test]
    fn boxed_errors_look_inside() {
        let b: Box<dyn std::error::Error + Send + Sync> =
            Box::new(std::io::Error::from(ErrorKind::PermissionDenied));
        assert_eq!(ByType.error_of(&b), ErrorClass::Fatal);
        let b: Box<dyn std::error::Error + Send + Sync> = Box::new(HttpError {
            status: 429,
            signals: Default::default(),
        });
        assert_eq!(
            ByType.error_of(&b),
            ErrorClass::Throttled { retry_after: None }
        );
        let b: Box<dyn std::error::Error + Send + Sync> = "boom".into();
        assert_eq!(ByType.error_of(&b), ErrorClass::Transient);
    }
}

//! [`Classify`]: what a caller's error means for retrying, as the core's [`ErrorClass`].
//!
//! A call's error type implements `Classify` (or the call passes a closure, see
//! [`Reliable::call_with`](crate::Reliable::call_with)); the retry policy, the budget and the
//! breaker all read the same class. Implementations here:
//!
//! | type | class |
//! |---|---|
//! | [`ErrorClass`] | itself |
//! | [`std::io::Error`] | `TimedOut`, `WouldBlock`: Timeout; `InvalidInput`, `InvalidData`, `NotFound`, `PermissionDenied`, `Unsupported`: Fatal; the rest (connection refused, reset, broken pipe, …): Transient |
//! | [`HttpError`] | by status and headers (see [`http`](crate::http)) |
//! | `Box<dyn Error + Send + Sync>`, `anyhow::Error` (feature `anyhow`) | an `io::Error`, `HttpError` or `reqwest::Error` inside by its rule; anything else Transient |
//! | `reqwest::Error` (feature `reqwest`) | a timeout: Timeout; a request that cannot be built, a bad redirect, an undecodable body: Fatal; the rest (connect, reset): Transient |
//! | `String`, `&str` (an error message) | Transient |
//!
//! Any other error type gets a class in one line, by a closure:
//! `rel.call_with(|_: &MyError| ErrorClass::Transient, || work())` (or implement `Classify`).
//!
//! Transient is the default for unknown errors: retrying an unknown failure a bounded number of
//! times, under a budget and a breaker, is the safe side; a validation error that should not be
//! retried deserves its own `Fatal`.
//!
//! ```
//! use reliable::Classify;
//! use reliable_core::outcome::ErrorClass;
//!
//! #[derive(Debug)]
//! enum ApiError { BadPrompt, Overloaded }
//!
//! impl Classify for ApiError {
//!     fn classify(&self) -> ErrorClass {
//!         match self {
//!             ApiError::BadPrompt => ErrorClass::Fatal,
//!             ApiError::Overloaded => ErrorClass::Throttled { retry_after: None },
//!         }
//!     }
//! }
//! assert!(!ApiError::BadPrompt.classify().is_retryable());
//! let io = std::io::Error::from(std::io::ErrorKind::TimedOut);
//! assert_eq!(io.classify(), ErrorClass::Timeout);
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

/// Maps an error to the class every retry decision reads.
pub trait Classify {
    /// The class of this error.
    fn classify(&self) -> ErrorClass;
}

impl Classify for ErrorClass {
    fn classify(&self) -> ErrorClass {
        *self
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

impl Classify for std::io::Error {
    fn classify(&self) -> ErrorClass {
        answer_class(io_answer(self.kind()))
    }
}

impl Classify for Box<dyn std::error::Error + Send + Sync> {
    fn classify(&self) -> ErrorClass {
        boxed_class(self.as_ref())
    }
}

/// A type-erased error by the rule of the known type inside it, else Transient: the one rule for
/// a boxed error, which the tower layers' default classification reads too.
pub(crate) fn boxed_class(e: &(dyn std::error::Error + 'static)) -> ErrorClass {
    if let Some(io) = e.downcast_ref::<std::io::Error>() {
        return io.classify();
    }
    if let Some(http) = e.downcast_ref::<HttpError>() {
        return http.classify();
    }
    #[cfg(feature = "reqwest")]
    if let Some(reqwest) = e.downcast_ref::<reqwest::Error>() {
        return reqwest.classify();
    }
    ErrorClass::Transient
}

#[cfg(feature = "anyhow")]
impl Classify for anyhow::Error {
    fn classify(&self) -> ErrorClass {
        boxed_class(self.as_ref())
    }
}

#[cfg(feature = "reqwest")]
impl Classify for reqwest::Error {
    /// An error with a status (from `error_for_status`) by the status; a timeout as a timeout; a
    /// failed connection as one; all through the core's table. A request that could not be
    /// built, a bad redirect or an unreadable answer is no answer to retry: Fatal.
    fn classify(&self) -> ErrorClass {
        let answer = if let Some(status) = self.status() {
            Some(crate::http::answer(
                status.as_u16(),
                &crate::http::HeaderSignals::default(),
            ))
        } else if self.is_timeout() {
            Some(Answer::Timeout)
        } else if self.is_builder() || self.is_redirect() || self.is_decode() {
            None
        } else {
            Some(Answer::Connection)
        };
        answer_class(answer)
    }
}

impl Classify for HttpError {
    /// [`classify_status`](crate::http::classify_status); a status below 400 wrapped as an error anyway is
    /// [`Fatal`](ErrorClass::Fatal) (the caller decided it was wrong; retrying will not change it).
    fn classify(&self) -> ErrorClass {
        crate::http::classify_status(self.status, &self.signals).unwrap_or(ErrorClass::Fatal)
    }
}

/// An error message: an unknown failure, retried (a bounded number of times, under the breaker).
impl Classify for String {
    fn classify(&self) -> ErrorClass {
        ErrorClass::Transient
    }
}

/// An error message: an unknown failure, retried (a bounded number of times, under the breaker).
impl Classify for str {
    fn classify(&self) -> ErrorClass {
        ErrorClass::Transient
    }
}

impl Classify for std::convert::Infallible {
    fn classify(&self) -> ErrorClass {
        match *self {}
    }
}

impl<E: Classify + ?Sized> Classify for &E {
    fn classify(&self) -> ErrorClass {
        (**self).classify()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_kinds() {
        let c = |k: ErrorKind| std::io::Error::from(k).classify();
        assert_eq!(c(ErrorKind::TimedOut), ErrorClass::Timeout);
        assert_eq!(c(ErrorKind::ConnectionReset), ErrorClass::Transient);
        assert_eq!(c(ErrorKind::ConnectionRefused), ErrorClass::Transient);
        assert_eq!(c(ErrorKind::InvalidInput), ErrorClass::Fatal);
    }

    #[test]
    fn boxed_errors_look_inside() {
        let b: Box<dyn std::error::Error + Send + Sync> =
            Box::new(std::io::Error::from(ErrorKind::PermissionDenied));
        assert_eq!(b.classify(), ErrorClass::Fatal);
        let b: Box<dyn std::error::Error + Send + Sync> = Box::new(HttpError {
            status: 429,
            signals: Default::default(),
        });
        assert_eq!(b.classify(), ErrorClass::Throttled { retry_after: None });
        let b: Box<dyn std::error::Error + Send + Sync> = "boom".into();
        assert_eq!(b.classify(), ErrorClass::Transient);
    }
}

//! HTTP signals: what a response's status and headers say about retrying it.
//!
//! Servers say more than "failed": `Retry-After` (seconds or an HTTP-date) and `retry-after-ms`
//! ask for a minimum wait, `x-should-retry: true|false` (sent by OpenAI, Anthropic and other APIs
//! whose SDKs Stainless generates) overrides the status rules either way. This module reads them
//! into [`HeaderSignals`]; what a status plus signals *means* is the core's one table,
//! [`reliable_core::answer`], which [`classify_status`] executes (429, 503, 529 throttled with the
//! server's delay; 408, 409, other 5xx transient; other 4xx fatal; `x-should-retry` overrides).
//!
//! `retry-after-ms` wins over `Retry-After` (it is more precise). Delays are not capped here: the
//! retry policy honours them up to its `max_server_delay` (30 s by default).
//!
//! Provider-specific signals (spend limits, rate-limit headers) build on these functions in their
//! own modules; anything that reads headers implements [`Headers`].
//!
//! ```
//! use reliable::http::{classify_status, HeaderSignals};
//! use reliable_core::outcome::ErrorClass;
//! use std::time::{Duration, SystemTime};
//!
//! let headers = [("Retry-After", "2"), ("content-type", "application/json")];
//! let signals = HeaderSignals::from_headers(&headers[..], SystemTime::now());
//! assert_eq!(signals.retry_after, Some(Duration::from_secs(2)));
//! let class = classify_status(429, &signals);
//! assert_eq!(class, Some(ErrorClass::Throttled { retry_after: Some(Duration::from_secs(2).into()) }));
//! assert_eq!(classify_status(200, &signals), None);
//! assert_eq!(classify_status(404, &HeaderSignals::default()), Some(ErrorClass::Fatal));
//! ```

use reliable_core::outcome::ErrorClass;
use std::time::{Duration, SystemTime};

/// Case-insensitive header lookup, implemented for slices of name/value pairs, `HashMap`s and
/// (feature `http`) `http::HeaderMap`.
pub trait Headers {
    /// The first value of header `name` (any case), if present and valid text.
    fn header(&self, name: &str) -> Option<&str>;
}

impl<K: AsRef<str>, V: AsRef<str>> Headers for [(K, V)] {
    fn header(&self, name: &str) -> Option<&str> {
        self.iter()
            .find(|(k, _)| k.as_ref().eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_ref())
    }
}

impl<K: AsRef<str>, V: AsRef<str>, S> Headers for std::collections::HashMap<K, V, S> {
    fn header(&self, name: &str) -> Option<&str> {
        self.iter()
            .find(|(k, _)| k.as_ref().eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_ref())
    }
}

#[cfg(feature = "http")]
impl Headers for http::HeaderMap {
    fn header(&self, name: &str) -> Option<&str> {
        self.get(name).and_then(|v| v.to_str().ok())
    }
}

impl<H: Headers + ?Sized> Headers for &H {
    fn header(&self, name: &str) -> Option<&str> {
        (**self).header(name)
    }
}

/// What a response's headers say about retrying it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HeaderSignals {
    /// The server's requested wait: `retry-after-ms`, else `Retry-After`.
    pub retry_after: Option<Duration>,
    /// `x-should-retry`, when present and `true` or `false`.
    pub should_retry: Option<bool>,
}

impl HeaderSignals {
    /// Reads the signals from `headers`; `now` is the wall-clock time an HTTP-date is measured from
    /// (pass `SystemTime::now()`, or a fixed time in tests).
    pub fn from_headers(headers: &(impl Headers + ?Sized), now: SystemTime) -> Self {
        let ms = headers
            .header("retry-after-ms")
            .and_then(parse_retry_after_ms);
        let retry_after = ms.or_else(|| {
            headers
                .header("retry-after")
                .and_then(|v| parse_retry_after(v, now))
        });
        HeaderSignals {
            retry_after,
            should_retry: headers
                .header("x-should-retry")
                .and_then(parse_should_retry),
        }
    }
}

/// Parses a `Retry-After` value: delay-seconds (`"120"`; a decimal such as `"1.5"` is accepted
/// too) or an HTTP-date (`"Wed, 21 Oct 2015 07:28:00 GMT"`, and the two obsolete formats), measured
/// from `now`; a date in the past is a zero wait. Anything else (negative, not a number, not a
/// date) is `None`: no signal, rather than a guess.
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if value.starts_with(|c: char| c.is_ascii_digit()) {
        return seconds(value);
    }
    let date = httpdate::parse_http_date(value).ok()?;
    Some(date.duration_since(now).unwrap_or(Duration::ZERO))
}

fn seconds(value: &str) -> Option<Duration> {
    let secs: f64 = value.parse().ok()?;
    // try_from_secs_f64 refuses negatives, NaN and overflow.
    Duration::try_from_secs_f64(secs).ok()
}

/// Parses a `retry-after-ms` value: milliseconds, possibly fractional (OpenAI sends `"20.5"`).
pub fn parse_retry_after_ms(value: &str) -> Option<Duration> {
    let ms: f64 = value.trim().parse().ok()?;
    Duration::try_from_secs_f64(ms / 1_000.0).ok()
}

/// Parses `x-should-retry`: `true` or `false` (any case); anything else is no signal.
pub fn parse_should_retry(value: &str) -> Option<bool> {
    let v = value.trim();
    if v.eq_ignore_ascii_case("true") {
        Some(true)
    } else if v.eq_ignore_ascii_case("false") {
        Some(false)
    } else {
        None
    }
}

/// The core's answer for a response with `status` and `signals`.
pub fn answer(status: u16, signals: &HeaderSignals) -> reliable_core::answer::Answer {
    reliable_core::answer::Answer::status(
        status,
        reliable_core::answer::Signals {
            retry_after: signals.retry_after.map(reliable_core::Duration::from),
            should_retry: signals.should_retry,
            overloaded: false,
        },
    )
}

/// The error class of a response with `status` and `signals`, by the core's table
/// ([`reliable_core::answer`]); `None` when the status is not an error (below 400).
pub fn classify_status(status: u16, signals: &HeaderSignals) -> Option<ErrorClass> {
    answer(status, signals).class()
}

/// An HTTP response that was an error: its status and signals, ready to return from a call.
///
/// ```
/// use reliable::http::HttpError;
/// use reliable::ByType;
/// use reliable_core::outcome::ErrorClass;
/// use std::time::SystemTime;
///
/// let err = HttpError::new(503, &[("x-should-retry", "false")][..], SystemTime::now());
/// assert_eq!(ByType.error_of(&err), ErrorClass::DontRetry);
/// assert_eq!(err.to_string(), "HTTP 503");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HttpError {
    /// The status code.
    pub status: u16,
    /// What the headers said.
    pub signals: HeaderSignals,
}

impl HttpError {
    /// The error of a response with `status` and `headers`; `now` as for [`HeaderSignals::from_headers`].
    pub fn new(status: u16, headers: &(impl Headers + ?Sized), now: SystemTime) -> Self {
        HttpError {
            status,
            signals: HeaderSignals::from_headers(headers, now),
        }
    }
}

impl std::fmt::Display for HttpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HTTP {}", self.status)
    }
}

impl std::error::Error for HttpError {}

#[cfg(test)]
mod tests {
    use super::*;
    use reliable_core::Duration as D;

    fn at(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
    }

    #[test]
    fn retry_after_seconds_and_dates() {
        let now = at(1_445_412_480); // Wed, 21 Oct 2015 07:28:00 GMT
        assert_eq!(
            parse_retry_after("120", now),
            Some(Duration::from_secs(120))
        );
        assert_eq!(
            parse_retry_after(" 1.5 ", now),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:28:30 GMT", now),
            Some(Duration::from_secs(30))
        );
        // RFC 850 and asctime, which recipients must accept.
        assert_eq!(
            parse_retry_after("Wednesday, 21-Oct-15 07:28:10 GMT", now),
            Some(Duration::from_secs(10))
        );
        assert_eq!(
            parse_retry_after("Wed Oct 21 07:28:05 2015", now),
            Some(Duration::from_secs(5))
        );
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:00:00 GMT", now),
            Some(Duration::ZERO),
            "a date in the past: retry now"
        );
        for bad in [
            "",
            "-1",
            "soon",
            "1e400",
            "NaN",
            "Wed, 99 Oct 2015 07:28:00 GMT",
        ] {
            assert_eq!(parse_retry_after(bad, now), None, "{bad:?}");
        }
    }

    #[test]
    fn retry_after_ms_and_should_retry() {
        assert_eq!(
            parse_retry_after_ms("20.5"),
            Some(Duration::from_micros(20_500))
        );
        assert_eq!(parse_retry_after_ms("-3"), None);
        assert_eq!(parse_retry_after_ms("x"), None);
        assert_eq!(parse_should_retry("TRUE"), Some(true));
        assert_eq!(parse_should_retry(" false"), Some(false));
        assert_eq!(parse_should_retry("maybe"), None);
    }

    #[test]
    fn ms_header_wins_and_lookup_ignores_case() {
        let h = [("RETRY-AFTER", "10"), ("Retry-After-Ms", "250")];
        let s = HeaderSignals::from_headers(&h[..], at(0));
        assert_eq!(s.retry_after, Some(Duration::from_millis(250)));
        let mut map = std::collections::HashMap::new();
        map.insert("X-Should-Retry".to_string(), "true".to_string());
        assert_eq!(
            HeaderSignals::from_headers(&map, at(0)).should_retry,
            Some(true)
        );
        // A malformed ms header falls back to Retry-After.
        let h = [("retry-after-ms", "soon"), ("retry-after", "3")];
        assert_eq!(
            HeaderSignals::from_headers(&h[..], at(0)).retry_after,
            Some(Duration::from_secs(3))
        );
    }

    #[cfg(feature = "http")]
    #[test]
    fn an_http_header_map_is_read_too() {
        let mut map = http::HeaderMap::new();
        map.insert("retry-after", http::HeaderValue::from_static("4"));
        map.insert("x-should-retry", http::HeaderValue::from_static("true"));
        let s = HeaderSignals::from_headers(&map, at(0));
        assert_eq!(s.retry_after, Some(Duration::from_secs(4)));
        assert_eq!(s.should_retry, Some(true));
    }

    #[test]
    fn the_status_table() {
        let none = HeaderSignals::default();
        let wait = HeaderSignals {
            retry_after: Some(Duration::from_secs(7)),
            should_retry: None,
        };
        let t = |ra: Option<u64>| ErrorClass::Throttled {
            retry_after: ra.map(D::from_secs),
        };
        let cases = [
            (200, none, None),
            (304, none, None),
            (400, none, Some(ErrorClass::Fatal)),
            (404, wait, Some(ErrorClass::Fatal)),
            (408, none, Some(ErrorClass::Transient)),
            (409, none, Some(ErrorClass::Transient)),
            (429, none, Some(t(None))),
            (429, wait, Some(t(Some(7)))),
            (500, none, Some(ErrorClass::Transient)),
            (500, wait, Some(t(Some(7)))),
            (503, none, Some(t(None))),
            (529, none, Some(t(None))),
        ];
        for (status, signals, want) in cases {
            assert_eq!(classify_status(status, &signals), want, "{status}");
        }
        let no = HeaderSignals {
            retry_after: None,
            should_retry: Some(false),
        };
        let yes = HeaderSignals {
            retry_after: None,
            should_retry: Some(true),
        };
        assert_eq!(classify_status(500, &no), Some(ErrorClass::DontRetry));
        assert_eq!(classify_status(429, &no), Some(ErrorClass::DontRetry));
        assert_eq!(classify_status(400, &no), Some(ErrorClass::Fatal));
        assert_eq!(classify_status(400, &yes), Some(ErrorClass::Transient));
        assert_eq!(classify_status(429, &yes), Some(t(None)));
        assert_eq!(classify_status(200, &no), None);
    }
}

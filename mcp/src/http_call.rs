//! `reliable_http_call`: one HTTP request made the way this project says requests should be made,
//! through a named breaker, with bounded retries and jittered backoff, and through the SSRF guard.
//!
//! The loop: check the URL (refused requests never touch the breaker), then for each attempt ask
//! the breaker, send, classify, tell the breaker, and wait before the next attempt (the backoff's
//! delay, or the server's `Retry-After` if longer) while the call's deadline allows it.
//!
//! - Success for the breaker: any answer but 408, 429 and 5xx (a 404 says the downstream is
//!   healthy). Those three and transport failures (connect, timeout, reset) count as failures and
//!   are retried. A refusal by the guard, an oversized body and bad arguments are nobody's health:
//!   they free the permit without counting and end the call.
//! - POST and PATCH are retried only when the connection failed (the request never left), unless
//!   the caller says the request is idempotent.
//! - While the breaker is open the request is not sent: the caller's `fallback` is returned, with
//!   the time until the breaker will let a probe through.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration as StdDuration, Instant as WallInstant};

use reliable_core::Duration;
use reliable_core::breaker::{Outcome, Permit};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use url::Url;

use crate::backoff::BackoffSpec;
use crate::breakers::{Breakers, NamedBreaker, unknown};
use crate::duration::{ms, parse_duration};
use crate::redact::{REDACTED, Secrets, is_sensitive, url_without_credentials};
use crate::ssrf::client::{describe, refusal};
use crate::ssrf::{BodyError, Guard, Limits, read_capped};

/// Most attempts per call.
pub const MAX_ATTEMPTS: u32 = 5;
/// Largest request body, in bytes.
pub const MAX_REQUEST_BODY: usize = 1 << 20;
/// Body bytes read by default.
pub const DEFAULT_BODY_BYTES: usize = 64 * 1024;

/// Response headers echoed back (besides rate-limit families); others are left out.
const ECHOED: &[&str] = &[
    "content-type",
    "content-length",
    "content-encoding",
    "location",
    "retry-after",
    "retry-after-ms",
    "x-should-retry",
    "etag",
    "last-modified",
    "cache-control",
    "date",
    "x-request-id",
    "request-id",
    "set-cookie",
];

/// Arguments of `reliable_http_call`.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HttpCallArgs {
    /// The URL: http or https, to a public address (or one the operator allow-listed).
    pub url: String,
    /// GET, HEAD, POST, PUT, PATCH, DELETE or OPTIONS. Default GET.
    #[serde(default)]
    pub method: Option<String>,
    /// Request headers. Authorization and Cookie are sent but never echoed back.
    #[serde(default)]
    pub headers: Option<BTreeMap<String, String>>,
    /// Request body, as text (at most 1 MiB).
    #[serde(default)]
    pub body: Option<String>,
    /// A breaker made with create_breaker: the call goes through it, and is not sent while it is open.
    #[serde(default)]
    pub breaker: Option<String>,
    /// Per-attempt timeout, e.g. "10s" (headers and body; at most the server's limit). Default "10s".
    #[serde(default)]
    pub timeout: Option<String>,
    /// Attempts in all, 1 to 5. Default 3.
    #[serde(default)]
    pub attempts: Option<u32>,
    /// Backoff between attempts. Default: 200ms doubling up to 10s, full jitter.
    #[serde(default)]
    pub backoff: Option<BackoffSpec>,
    /// POST/PATCH are idempotent here (e.g. they carry an Idempotency-Key), so they may be retried
    /// after the request was sent. Default false.
    #[serde(default)]
    pub idempotent: Option<bool>,
    /// Returned instead of calling while the breaker is open (the seed library's on_open fallback).
    #[serde(default)]
    pub fallback: Option<String>,
    /// Largest response body to read, in bytes (at most the server's cap). Default 65536.
    #[serde(default)]
    pub max_body_bytes: Option<usize>,
}

/// One attempt.
#[derive(Clone, Debug, Serialize, JsonSchema, PartialEq)]
pub struct AttemptRecord {
    /// From 1.
    pub attempt: u32,
    /// The status, if an answer came.
    pub status: Option<u16>,
    /// What went wrong, if anything.
    pub error: Option<String>,
    /// How long it took, in milliseconds.
    pub elapsed_ms: f64,
    /// How long the call waited after it before the next attempt, in milliseconds.
    pub waited_ms: Option<f64>,
}

/// The breaker as the call left it.
#[derive(Clone, Debug, Serialize, JsonSchema, PartialEq)]
pub struct BreakerBrief {
    /// Its name.
    pub name: String,
    /// Its state after the call.
    pub state: String,
    /// If the call was refused because it is open: milliseconds until it lets a probe through.
    pub retry_after_ms: Option<f64>,
}

/// What `reliable_http_call` returns.
#[derive(Clone, Debug, Serialize, JsonSchema, PartialEq)]
pub struct HttpCallResult {
    /// A 2xx answer came (or the fallback was served).
    pub ok: bool,
    /// What answered: `http` (one attempt), `retry(http)`, `breaker(...)` around either, or
    /// `fallback` when the breaker was open.
    pub served_by: String,
    /// The last answer's status.
    pub status: Option<u16>,
    /// Selected response headers (content type, length, location, Retry-After, rate limits);
    /// Set-Cookie is redacted.
    pub headers: BTreeMap<String, String>,
    /// The body as text (lossy UTF-8), secrets sent scrubbed; the fallback when it was served.
    pub body: Option<String>,
    /// Body bytes read.
    pub body_bytes: usize,
    /// The URL that answered, after redirects, without credentials.
    pub url: String,
    /// Every attempt.
    pub attempts: Vec<AttemptRecord>,
    /// Time taken in all, in milliseconds.
    pub elapsed_ms: f64,
    /// Why the call failed, if it did.
    pub error: Option<String>,
    /// The breaker, if one was used.
    pub breaker: Option<BreakerBrief>,
}

/// The pieces a call needs from the server.
#[derive(Debug, Clone)]
pub struct HttpCaller {
    /// The guarded client.
    pub client: reqwest::Client,
    /// The guard (literal hosts are checked before sending).
    pub guard: Arc<Guard>,
    /// The operator's limits.
    pub limits: Limits,
    /// The named breakers.
    pub breakers: Arc<Breakers>,
}

impl HttpCaller {
    /// A caller reaching what `guard` allows, within `limits`, through `breakers`.
    pub fn new(guard: Guard, limits: Limits, breakers: Arc<Breakers>) -> Result<Self, String> {
        let guard = Arc::new(guard);
        Ok(HttpCaller {
            client: crate::ssrf::build_client(guard.clone(), &limits)?,
            guard,
            limits,
            breakers,
        })
    }
}

/// A checked request, ready to send any number of times.
struct Prepared {
    method: reqwest::Method,
    url: Url,
    headers: HeaderMap,
    body: Option<String>,
    attempts: u32,
    attempt_timeout: StdDuration,
    backoff: reliable_core::backoff::BackoffPolicy,
    retry_sent: bool,
    max_body: usize,
    secrets: Secrets,
}

fn prepare(args: &HttpCallArgs, caller: &HttpCaller) -> Result<Prepared, String> {
    let mut secrets = Secrets::default();
    let url: Url = args.url.trim().parse().map_err(|e| format!("url: {e}"))?;
    if let Some(p) = url.password() {
        secrets.add(p);
    }
    caller.guard.check_url(&url).map_err(|r| r.to_string())?;
    let method = args.method.as_deref().unwrap_or("GET").to_ascii_uppercase();
    let method = match method.as_str() {
        "GET" | "HEAD" | "POST" | "PUT" | "PATCH" | "DELETE" | "OPTIONS" => {
            reqwest::Method::from_bytes(method.as_bytes()).map_err(|e| format!("method: {e}"))?
        }
        other => {
            return Err(format!(
                "method: {other:?} is not one of GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS"
            ));
        }
    };
    let mut headers = HeaderMap::new();
    for (name, value) in args.headers.iter().flatten() {
        let lower = name.to_ascii_lowercase();
        if matches!(
            lower.as_str(),
            "host"
                | "content-length"
                | "transfer-encoding"
                | "connection"
                | "upgrade"
                | "te"
                | "trailer"
                | "keep-alive"
                | "proxy-connection"
        ) {
            return Err(format!(
                "headers: {name} is set by the client and may not be given"
            ));
        }
        let n = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| format!("headers: {name:?} is not a valid header name"))?;
        let mut v = HeaderValue::from_str(value)
            .map_err(|_| format!("headers: the value of {name} is not a valid header value"))?;
        if is_sensitive(name) {
            v.set_sensitive(true);
            secrets.add_header(name, value);
        }
        headers.append(n, v);
    }
    if let Some(b) = &args.body
        && b.len() > MAX_REQUEST_BODY
    {
        return Err(format!(
            "body: {} bytes is over the limit of {MAX_REQUEST_BODY}",
            b.len()
        ));
    }
    let attempts = args.attempts.unwrap_or(3);
    if !(1..=MAX_ATTEMPTS).contains(&attempts) {
        return Err(format!(
            "attempts: {attempts} is outside 1..={MAX_ATTEMPTS}"
        ));
    }
    let timeout = parse_duration("timeout", args.timeout.as_deref(), Duration::from_secs(10))?;
    let max = caller.limits.max_attempt_timeout;
    let attempt_timeout = StdDuration::from_nanos(timeout.as_nanos());
    if attempt_timeout.is_zero() || attempt_timeout > max {
        return Err(format!(
            "timeout: {timeout} is outside (0, {}]",
            Duration::from_nanos(max.as_nanos() as u64)
        ));
    }
    let backoff = args.backoff.clone().unwrap_or_default().policy()?;
    let max_body = args.max_body_bytes.unwrap_or(DEFAULT_BODY_BYTES);
    if max_body == 0 || max_body > caller.limits.max_body_bytes {
        return Err(format!(
            "max_body_bytes: {max_body} is outside 1..={}",
            caller.limits.max_body_bytes
        ));
    }
    let idempotent = !matches!(method, reqwest::Method::POST | reqwest::Method::PATCH)
        || args.idempotent.unwrap_or(false);
    Ok(Prepared {
        method,
        url,
        headers,
        body: args.body.clone(),
        attempts,
        attempt_timeout,
        backoff,
        retry_sent: idempotent,
        max_body,
        secrets,
    })
}

/// How one attempt ended.
enum Ended {
    /// An answer, read whole.
    Answer {
        status: u16,
        headers: BTreeMap<String, String>,
        body: Vec<u8>,
        url: Url,
        retry_after: Option<StdDuration>,
    },
    /// No answer: the request may not have been sent (connect) or may have been (other).
    Transport { error: String, connect: bool },
    /// Refused or unusable: ends the call, counts for nothing.
    Stop { error: String, status: Option<u16> },
}

async fn attempt(caller: &HttpCaller, p: &Prepared, timeout: StdDuration) -> Ended {
    let mut req = caller
        .client
        .request(p.method.clone(), p.url.clone())
        .headers(p.headers.clone())
        .timeout(timeout);
    if let Some(b) = &p.body {
        req = req.body(b.clone());
    }
    let started = WallInstant::now();
    let mut resp = match req.send().await {
        Ok(r) => r,
        Err(e) => {
            return match refusal(&e) {
                Some(r) => Ended::Stop {
                    error: r.to_string(),
                    status: None,
                },
                None => Ended::Transport {
                    error: p.secrets.scrub(&describe(&e)),
                    connect: e.is_connect(),
                },
            };
        }
    };
    let status = resp.status().as_u16();
    let url = resp.url().clone();
    let headers = echoed_headers(resp.headers(), &p.secrets);
    let retry_after = retry_after(resp.headers());
    // The body shares the attempt's timeout: reqwest's `timeout` covers the whole response.
    let left = timeout.saturating_sub(started.elapsed());
    match tokio::time::timeout(left, read_capped(&mut resp, p.max_body)).await {
        Err(_) => Ended::Transport {
            error: format!("timed out reading the body after {timeout:?}"),
            connect: false,
        },
        Ok(Err(BodyError::Transfer(e))) => Ended::Transport {
            error: p.secrets.scrub(&describe(&e)),
            connect: false,
        },
        Ok(Err(e)) => Ended::Stop {
            error: e.to_string(),
            status: Some(status),
        },
        Ok(Ok(body)) => Ended::Answer {
            status,
            headers,
            body,
            url,
            retry_after,
        },
    }
}

fn echoed_headers(h: &HeaderMap, secrets: &Secrets) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for (name, value) in h {
        let n = name.as_str();
        let rate_limit = n.starts_with("x-ratelimit")
            || n.starts_with("ratelimit")
            || n.starts_with("anthropic-ratelimit");
        if !(ECHOED.contains(&n) || rate_limit) {
            continue;
        }
        let v = if is_sensitive(n) {
            REDACTED.to_string()
        } else {
            secrets.scrub(&String::from_utf8_lossy(value.as_bytes()))
        };
        out.entry(n.to_string())
            .and_modify(|e: &mut String| {
                e.push_str(", ");
                e.push_str(&v)
            })
            .or_insert(v);
    }
    out
}

/// `retry-after-ms`, else `Retry-After` in seconds (an HTTP date is ignored).
fn retry_after(h: &HeaderMap) -> Option<StdDuration> {
    let get = |n: &str| h.get(n).and_then(|v| v.to_str().ok()).map(str::trim);
    if let Some(ms) = get("retry-after-ms")
        .and_then(|v| v.parse::<f64>().ok())
        .filter(|v| v.is_finite() && *v >= 0.0)
    {
        return Some(StdDuration::from_secs_f64(ms / 1000.0));
    }
    get("retry-after")
        .and_then(|v| v.parse::<u64>().ok())
        .map(StdDuration::from_secs)
}

/// Whether a status says the downstream is unwell (and the request may be retried).
fn failing(status: u16) -> bool {
    status == 408 || status == 429 || status >= 500
}

/// Makes the call. `Err` is for requests that were refused before anything was sent (bad
/// arguments, the SSRF guard); everything after that is a result, failed or not.
pub async fn call(caller: &HttpCaller, args: &HttpCallArgs) -> Result<HttpCallResult, String> {
    let p = prepare(args, caller)?;
    let breaker: Option<Arc<NamedBreaker>> = match &args.breaker {
        None => None,
        Some(name) => Some(
            caller
                .breakers
                .get(name)
                .ok_or_else(|| format!("breaker: {}", unknown(name, &caller.breakers.names())))?,
        ),
    };
    let started = WallInstant::now();
    let deadline = started + caller.limits.max_call_time;
    let mut out = HttpCallResult {
        ok: false,
        served_by: String::new(),
        status: None,
        headers: BTreeMap::new(),
        body: None,
        body_bytes: 0,
        url: url_without_credentials(&p.url),
        attempts: Vec::new(),
        elapsed_ms: 0.0,
        error: None,
        breaker: None,
    };
    let mut backoff = p.backoff.backoff();
    // Jitter needs only to differ between calls and processes, not to be secret.
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
        ^ u64::from(std::process::id()).rotate_left(32);
    let mut rejected_retry_after = None;
    for n in 1..=p.attempts {
        let permit: Option<Permit> = match &breaker {
            None => None,
            Some(b) => match b.acquire() {
                Ok(permit) => Some(permit),
                Err(rejection) => {
                    rejected_retry_after = rejection.retry_after().map(ms);
                    let why = match rejection.retry_after() {
                        Some(d) => format!(
                            "breaker {:?} is open: no call sent; it lets a probe through in {d}",
                            args.breaker.as_deref().unwrap_or_default()
                        ),
                        None => format!(
                            "breaker {:?} refused the call ({:?})",
                            args.breaker.as_deref().unwrap_or_default(),
                            rejection.reason
                        ),
                    };
                    if n == 1 && args.fallback.is_some() {
                        out.ok = true;
                        out.served_by = "fallback".into();
                        out.body = args.fallback.clone();
                    }
                    out.error = Some(why);
                    break;
                }
            },
        };
        let now = WallInstant::now();
        let left = deadline.saturating_duration_since(now);
        let t0 = now;
        let ended = attempt(caller, &p, p.attempt_timeout.min(left)).await;
        let elapsed = t0.elapsed();
        let mut rec = AttemptRecord {
            attempt: n,
            status: None,
            error: None,
            elapsed_ms: elapsed.as_secs_f64() * 1e3,
            waited_ms: None,
        };
        let (outcome, retryable, server_delay) = match ended {
            Ended::Answer {
                status,
                headers,
                body,
                url,
                retry_after,
            } => {
                rec.status = Some(status);
                out.status = Some(status);
                out.headers = headers;
                out.body_bytes = body.len();
                out.body = Some(p.secrets.scrub(&String::from_utf8_lossy(&body)));
                out.url = url_without_credentials(&url);
                out.ok = (200..300).contains(&status);
                out.error = None;
                if failing(status) {
                    let e = format!("HTTP {status}");
                    rec.error = Some(e.clone());
                    out.error = Some(e);
                    (Outcome::Failure, p.retry_sent, retry_after)
                } else {
                    (Outcome::Success, false, None)
                }
            }
            Ended::Transport { error, connect } => {
                rec.error = Some(error.clone());
                out.error = Some(error);
                (Outcome::Failure, connect || p.retry_sent, None)
            }
            Ended::Stop { error, status } => {
                rec.status = status;
                rec.error = Some(error.clone());
                out.status = status;
                out.ok = false;
                out.error = Some(error);
                (Outcome::Ignored, false, None)
            }
        };
        if let (Some(b), Some(permit)) = (&breaker, permit) {
            b.record(permit, outcome);
        }
        out.attempts.push(rec);
        if !retryable || n == p.attempts {
            break;
        }
        let delay = StdDuration::from_nanos(
            backoff
                .next_delay_with(reliable_core::sample::splitmix64(seed ^ u64::from(n)))
                .as_nanos(),
        );
        let delay = delay.max(server_delay.unwrap_or_default());
        if WallInstant::now() + delay >= deadline {
            out.error = Some(format!(
                "{}; no retry: waiting {delay:?} would pass the call's deadline",
                out.error.take().unwrap_or_default()
            ));
            break;
        }
        if let Some(last) = out.attempts.last_mut() {
            last.waited_ms = Some(delay.as_secs_f64() * 1e3);
        }
        tokio::time::sleep(delay).await;
    }
    let retried = out.attempts.len() > 1 || p.attempts > 1;
    if out.served_by.is_empty() {
        let inner = if retried { "retry(http)" } else { "http" };
        out.served_by = if breaker.is_some() {
            format!("breaker({inner})")
        } else {
            inner.to_string()
        };
    }
    out.breaker = breaker.map(|b| BreakerBrief {
        name: args.breaker.clone().unwrap_or_default(),
        state: b.state_name().to_string(),
        retry_after_ms: rejected_retry_after,
    });
    out.elapsed_ms = started.elapsed().as_secs_f64() * 1e3;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_that_count_as_failures() {
        for s in [408, 429, 500, 502, 503, 504, 529] {
            assert!(failing(s), "{s}");
        }
        for s in [200, 201, 204, 301, 304, 400, 401, 403, 404, 409, 422] {
            assert!(!failing(s), "{s}");
        }
    }

    #[test]
    fn retry_after_in_milliseconds_or_seconds() {
        let mut h = HeaderMap::new();
        h.insert("retry-after", HeaderValue::from_static("2"));
        assert_eq!(retry_after(&h), Some(StdDuration::from_secs(2)));
        h.insert("retry-after-ms", HeaderValue::from_static("150"));
        assert_eq!(retry_after(&h), Some(StdDuration::from_millis(150)));
        let mut d = HeaderMap::new();
        d.insert(
            "retry-after",
            HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT"),
        );
        assert_eq!(retry_after(&d), None);
    }

    #[test]
    fn echoed_headers_are_selected_and_redacted() {
        let mut h = HeaderMap::new();
        h.insert("content-type", HeaderValue::from_static("text/plain"));
        h.insert("set-cookie", HeaderValue::from_static("session=secret"));
        h.insert(
            "x-ratelimit-remaining-requests",
            HeaderValue::from_static("9"),
        );
        h.insert("x-internal", HeaderValue::from_static("left out"));
        let out = echoed_headers(&h, &Secrets::default());
        assert_eq!(out.get("set-cookie").map(String::as_str), Some(REDACTED));
        assert_eq!(
            out.get("content-type").map(String::as_str),
            Some("text/plain")
        );
        assert!(out.contains_key("x-ratelimit-remaining-requests"));
        assert!(!out.contains_key("x-internal"));
    }
}

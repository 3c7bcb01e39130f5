//! `reliable_http_call`: one HTTP request made the way this project says requests should be made:
//! through a [`Reliable`] (a named downstream's breaker and retry policy; or one built for the
//! call from a policy in the simulator's format, or kept across calls for a policy whose state is
//! `Shared`, see [`crate::policy_arg`]; or, without either,
//! one built for the call from its own attempts, timeout and backoff), and through the SSRF
//! guard.
//!
//! - The URL is checked first: a refused request never reaches a breaker.
//! - Each attempt's answer is classified by the `reliable` crate's HTTP rules (408, 409, 5xx:
//!   transient; 429, 503, 529: throttled, honouring `Retry-After`/`retry-after-ms`; other 4xx:
//!   fatal, neither retried nor counted against the downstream; `x-should-retry` overrides).
//!   Transport failures (connect, reset, read timeout) are transient. A refusal by the guard
//!   (a redirect to a private address) or an oversized body is fatal: nobody's health.
//! - POST and PATCH are retried only when the connection failed (the request never left),
//!   unless the caller says the request is idempotent.
//! - While the breaker is open nothing is sent: the caller's `fallback` is returned, with the
//!   time until the breaker lets a probe through.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Instant as WallInstant, SystemTime};

use reliable::Reliable;
use reliable::http::{HeaderSignals, classify_status};
use reliable_core::outcome::ErrorClass;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use url::Url;

use crate::backoff::BackoffSpec;
use crate::breakers::{Breakers, unknown};
use crate::echo::quoted;
use crate::instrument::Instrument;
use crate::policy_arg::{Client, Kept};
use crate::redact::{REDACTED, Secrets, is_sensitive, url_without_credentials};
use crate::ssrf::client::{describe, refusal};
use crate::ssrf::{BodyError, Guard, Limits, read_capped};

/// Largest request body, in bytes.
pub const MAX_REQUEST_BODY: usize = 1 << 20;
/// Longest URL, in bytes.
pub const MAX_URL: usize = 8 * 1024;
/// Longest fallback, in bytes (it is echoed as the body).
pub const MAX_FALLBACK: usize = 64 * 1024;
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
    /// The URL: http or https, to a public address (or one the operator allow-listed), at most
    /// 8 KiB, without user:password@ (pass credentials as headers).
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
    /// A breaker made with create_breaker: the call goes through it with its retry policy
    /// (attempts, timeout, backoff set there), and is not sent while it is open.
    #[serde(default)]
    pub breaker: Option<String>,
    /// Without a breaker: per-attempt timeout, e.g. "10s" (headers and body; at most the server's
    /// limit). Default "10s".
    #[serde(default)]
    pub timeout: Option<String>,
    /// Without a breaker: attempts in all, from 1 to the server's ceiling (this field's maximum,
    /// set by the operator). Default 3, or the ceiling if it is lower.
    #[serde(default)]
    pub attempts: Option<u32>,
    /// Without a breaker: backoff between attempts. Default: 200ms doubling up to 10s, full jitter.
    #[serde(default)]
    pub backoff: Option<BackoffSpec>,
    /// POST/PATCH are idempotent here (e.g. they carry an Idempotency-Key), so they may be retried
    /// after the request was sent. Default false.
    #[serde(default)]
    pub idempotent: Option<bool>,
    /// Returned instead of calling while the breaker refuses calls (open, or its probe slots
    /// taken): the seed library's on_open fallback. At most 64 KiB.
    #[serde(default)]
    pub fallback: Option<String>,
    /// Largest response body to read, in bytes (at most the server's cap). Default 65536.
    #[serde(default)]
    pub max_body_bytes: Option<usize>,
    /// A policy as the simulator's scenario files write it: a stack of layers, outermost first,
    /// in JSON (serde's shape of the policy format), e.g. `{"Retry": {"policy": {"max_attempts":
    /// 3, "backoff": {"shape": {"Exponential": {"base": "100ms", "factor": 2.0}}, "cap": "1s",
    /// "jitter": "Full"}}, "inner": {"Breaker": {"config": {"failure_rate": 0.5,
    /// "minimum_calls": 10}, "inner": {"Call": {"downstream": "api", "timeout": "2s"}}}}}}`.
    /// Layers: Retry, Breaker, Throttle, Ledger, Limit, RateLimit, Hedge (idempotent requests
    /// only), Call. Loaded and validated as `reliable::policy` loads a policy file; a refusal names
    /// the field (`policy.inner: failure_rate: ...`). Held to the server's ceilings, which its
    /// operator sets and the end of this description states (a value over one is refused,
    /// naming it): at most its attempts per call, each at most its attempt timeout, a deadline
    /// of at most its whole-call time (the default for an absent one), at most its hedges per
    /// attempt, at most 16 KiB and 40 levels deep. Its state (breaker, budget, limits...) is as the
    /// layers' `scope` says: `PerClient` (default), this call's own; `Shared`, kept by the server
    /// for this policy across calls (of every client), at most 64 such policies: when full, one
    /// unused for 10 minutes or one of the client keeping the most makes room, else the call is
    /// refused saying when to come back; `Fleet` (a Breaker's, or a Retry's ratio budget, with
    /// `store: "redis"` and `mode: Cached(refresh)`), kept in the server's --store, shared with
    /// every server on it, and kept like `Shared`. Not together with breaker, attempts, timeout
    /// or backoff (refused: the policy says them).
    #[serde(default)]
    pub policy: Option<serde_json::Value>,
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
    /// Added to the instance each call without a breaker builds (time, observers).
    pub instrument: Instrument,
    /// The instances of `policy` arguments whose state is `Shared`, kept across calls.
    pub kept: Arc<Kept>,
}

impl HttpCaller {
    /// A caller reaching what `guard` allows, within `limits`, through `breakers`; or why
    /// `limits` are not ones a server runs with ([`Limits::check`]).
    pub fn new(guard: Guard, limits: Limits, breakers: Arc<Breakers>) -> Result<Self, String> {
        limits.check()?;
        let guard = Arc::new(guard);
        Ok(HttpCaller {
            client: crate::ssrf::build_client(guard.clone(), &limits)?,
            guard,
            limits,
            breakers,
            instrument: Instrument::default(),
            kept: Arc::default(),
        })
    }

    /// The same caller, adding `instrument` to the instance each call without a breaker builds
    /// (give the named breakers theirs with [`Breakers::instrumented`]).
    pub fn instrumented(mut self, instrument: Instrument) -> Self {
        self.instrument = instrument;
        self
    }
}

/// A checked request, ready to send any number of times.
struct Prepared {
    method: reqwest::Method,
    url: Url,
    headers: HeaderMap,
    body: Option<String>,
    idempotent: bool,
    max_body: usize,
    secrets: Secrets,
}

fn prepare(args: &HttpCallArgs, caller: &HttpCaller) -> Result<Prepared, String> {
    let mut secrets = Secrets::default();
    for (field, len, max) in [
        ("url", args.url.len(), MAX_URL),
        (
            "fallback",
            args.fallback.as_ref().map_or(0, String::len),
            MAX_FALLBACK,
        ),
    ] {
        if len > max {
            return Err(format!("{field}: {len} bytes is over the limit of {max}"));
        }
    }
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
                "method: {} is not one of GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS",
                quoted(other)
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
            .map_err(|_| format!("headers: {} is not a valid header name", quoted(name)))?;
        let mut v = HeaderValue::from_str(value).map_err(|_| {
            format!(
                "headers: the value of {} is not a valid header value",
                quoted(name)
            )
        })?;
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
        idempotent,
        max_body,
        secrets,
    })
}

/// An answer, read whole.
#[derive(Debug)]
struct Answer {
    status: u16,
    headers: BTreeMap<String, String>,
    body: Vec<u8>,
    url: Url,
}

/// Why an attempt failed, and its class for the retry policy and the breaker.
#[derive(Debug)]
struct Failed {
    class: ErrorClass,
    /// The answer, when the failure is a status.
    answer: Option<Answer>,
    error: String,
}

/// One attempt, timed on the server's clock.
#[derive(Debug)]
struct Timed {
    started: WallInstant,
    ended: Option<(WallInstant, Option<u16>, Option<String>)>,
}

async fn attempt(caller: &HttpCaller, p: &Prepared) -> Result<Answer, Failed> {
    let mut req = caller
        .client
        .request(p.method.clone(), p.url.clone())
        .headers(p.headers.clone());
    if let Some(b) = &p.body {
        req = req.body(b.clone());
    }
    // A retry class, softened for a request that may have reached the server and must not be
    // sent twice.
    let retry = |class: ErrorClass| {
        if p.idempotent {
            class
        } else {
            ErrorClass::DontRetry
        }
    };
    let mut resp = match req.send().await {
        Ok(r) => r,
        Err(e) => {
            return Err(match refusal(&e) {
                Some(r) => Failed {
                    class: ErrorClass::Fatal,
                    answer: None,
                    error: r.to_string(),
                },
                None => Failed {
                    class: if e.is_connect() {
                        ErrorClass::Transient
                    } else {
                        retry(ErrorClass::Transient)
                    },
                    answer: None,
                    error: p.secrets.scrub(&describe(&e)),
                },
            });
        }
    };
    let status = resp.status().as_u16();
    let url = resp.url().clone();
    let headers = echoed_headers(resp.headers(), &p.secrets);
    let class = classify_status(
        status,
        &HeaderSignals::from_headers(resp.headers(), SystemTime::now()),
    );
    let body = match read_capped(&mut resp, p.max_body).await {
        Ok(body) => body,
        Err(BodyError::Transfer(e)) => {
            return Err(Failed {
                class: retry(ErrorClass::Transient),
                answer: None,
                error: p.secrets.scrub(&describe(&e)),
            });
        }
        Err(e) => {
            return Err(Failed {
                class: ErrorClass::Fatal,
                answer: None,
                error: e.to_string(),
            });
        }
    };
    let answer = Answer {
        status,
        headers,
        body,
        url,
    };
    match class {
        None => Ok(answer),
        Some(class) => Err(Failed {
            class: if class.counts_as_failure() {
                retry(class)
            } else {
                class
            },
            answer: Some(answer),
            error: format!("HTTP {status}"),
        }),
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

/// The instance a call goes through: the named breaker's, or one built for this call.
fn instance(
    args: &HttpCallArgs,
    p: &Prepared,
    caller: &HttpCaller,
    client: Client,
) -> Result<(Reliable, bool), String> {
    if let Some(policy) = &args.policy {
        for (given, field) in [
            (args.breaker.is_some(), "breaker"),
            (args.attempts.is_some(), "attempts"),
            (args.timeout.is_some(), "timeout"),
            (args.backoff.is_some(), "backoff"),
        ] {
            if given {
                return Err(format!(
                    "{field}: a call with a policy runs what the policy says; leave {field} out (or the policy)"
                ));
            }
        }
        let rel = crate::policy_arg::kept_instance(
            policy,
            p.idempotent,
            &caller.limits,
            &caller.instrument,
            &p.secrets,
            &caller.kept,
            client,
            caller.breakers.store(),
        )?;
        return Ok((rel, false));
    }
    let Some(name) = &args.breaker else {
        let retry = crate::retry::config(
            args.attempts,
            args.timeout.as_deref(),
            args.backoff.as_ref(),
            p.idempotent,
            &caller.limits,
        )?;
        let rel = caller
            .instrument
            .apply(Reliable::builder("http").no_breaker().retry(retry))
            .build()
            .map_err(|e| e.to_string())?;
        return Ok((rel, false));
    };
    for (given, field) in [
        (args.attempts.is_some(), "attempts"),
        (args.timeout.is_some(), "timeout"),
        (args.backoff.is_some(), "backoff"),
    ] {
        if given {
            return Err(format!(
                "{field}: a call through breaker {} uses the retry policy set by create_breaker; leave {field} out",
                quoted(name)
            ));
        }
    }
    let named = caller
        .breakers
        .get(name)
        .ok_or_else(|| format!("breaker: {}", unknown(name, &caller.breakers.names())))?;
    Ok((named.reliable, true))
}

/// Makes the call. `Err` is for requests refused before anything was sent (bad arguments, the
/// SSRF guard); everything after that is a result, failed or not.
pub async fn call(caller: &HttpCaller, args: &HttpCallArgs) -> Result<HttpCallResult, String> {
    call_from(caller, args, 0).await
}

/// [`call`], made by `client` (a `Shared` policy's instance is kept for the client whose call
/// made it, see [`crate::policy_arg`]).
pub async fn call_from(
    caller: &HttpCaller,
    args: &HttpCallArgs,
    client: Client,
) -> Result<HttpCallResult, String> {
    let p = prepare(args, caller)?;
    let (rel, named) = instance(args, &p, caller, client)?;
    // A breaker kept in a store: decide on the store's state now (bounded by the store's wait).
    let shared = args
        .breaker
        .as_ref()
        .filter(|_| named)
        .and_then(|n| caller.breakers.get(n));
    if let Some(b) = &shared {
        b.sync().await;
    }
    // A policy's breaker kept in the store (`Fleet`): the same, before and after the call.
    if !named {
        rel.fleet_sync().await;
    }
    let started = WallInstant::now();
    let timed: Mutex<Vec<Timed>> = Mutex::new(Vec::new());
    let result = rel
        .call_with(
            |f: &Failed| f.class,
            || {
                let slot = {
                    let mut t = timed.lock().unwrap_or_else(|e| e.into_inner());
                    t.push(Timed {
                        started: WallInstant::now(),
                        ended: None,
                    });
                    t.len() - 1
                };
                let (p, timed) = (&p, &timed);
                async move {
                    let r = attempt(caller, p).await;
                    let (status, error) = match &r {
                        Ok(a) => (Some(a.status), None),
                        Err(f) => (f.answer.as_ref().map(|a| a.status), Some(f.error.clone())),
                    };
                    if let Some(t) = timed
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .get_mut(slot)
                    {
                        t.ended = Some((WallInstant::now(), status, error));
                    }
                    r
                }
            },
        )
        .await;
    let finished = WallInstant::now();
    let mut out = HttpCallResult {
        ok: false,
        served_by: rel.label().to_string(),
        status: None,
        headers: BTreeMap::new(),
        body: None,
        body_bytes: 0,
        url: url_without_credentials(&p.url),
        attempts: records(
            &timed.into_inner().unwrap_or_else(|e| e.into_inner()),
            finished,
        ),
        elapsed_ms: (finished - started).as_secs_f64() * 1e3,
        error: None,
        breaker: None,
    };
    // The breaker refused (open, probes taken, slow start): the case the fallback is for.
    let refused = matches!(&result, Err(e) if e.is_open());
    let answer = match result {
        Ok(answer) => Some(answer),
        Err(reliable::Error::GaveUp {
            last,
            reason,
            attempts,
        }) => {
            out.error = Some(format!(
                "{}{}",
                last.error,
                if attempts > 1 || reason.name() != "max-attempts" {
                    format!(" (gave up after {attempts} attempt(s): {})", reason.name())
                } else {
                    String::new()
                }
            ));
            last.answer
        }
        Err(reliable::Error::Timeout { attempts }) => {
            out.error = Some(format!(
                "timed out: attempt {attempts} took longer than its timeout"
            ));
            None
        }
        Err(reliable::Error::Open { retry_after }) => {
            out.error = Some(match retry_after {
                Some(d) => format!(
                    "the breaker is open: no request sent; it lets a probe through in {d:?}"
                ),
                None => "the breaker is forced open: no request sent".to_string(),
            });
            None
        }
        Err(reliable::Error::Rejected { why, last }) => {
            out.error = Some(format!(
                "refused by the breaker ({why}): no (further) request sent"
            ));
            last.and_then(|l| l.answer)
        }
    };
    if refused
        && out.attempts.is_empty()
        && let Some(fallback) = &args.fallback
    {
        out.ok = true;
        out.served_by = "fallback".into();
        out.body = Some(fallback.clone());
        return Ok(with_breaker(out, args, caller));
    }
    if let Some(a) = answer {
        out.ok = (200..300).contains(&a.status);
        out.status = Some(a.status);
        out.headers = a.headers;
        out.body_bytes = a.body.len();
        out.body = Some(p.secrets.scrub(&String::from_utf8_lossy(&a.body)));
        out.url = url_without_credentials(&a.url);
        if out.error.is_none() {
            out.error = crate::ssrf::redirect::unfollowed(
                &caller.guard,
                &a.url,
                a.status,
                out.headers.get("location").map(String::as_str),
            );
        }
    } else if let Some(last) = out.attempts.last() {
        out.status = last.status;
    }
    // ... and send this call's results to it, so that other servers see them.
    if let Some(b) = &shared {
        b.sync().await;
    }
    if !named {
        rel.fleet_sync().await;
    }
    Ok(if named {
        with_breaker(out, args, caller)
    } else {
        out
    })
}

/// `out` with the named breaker's state after the call.
fn with_breaker(
    mut out: HttpCallResult,
    args: &HttpCallArgs,
    caller: &HttpCaller,
) -> HttpCallResult {
    if let Some(b) = args.breaker.as_ref().and_then(|n| caller.breakers.get(n)) {
        out.breaker = Some(BreakerBrief {
            name: b.reliable.name().to_string(),
            state: b.state_name().to_string(),
            retry_after_ms: b.retry_after().map(|d| d.as_secs_f64() * 1e3),
        });
    }
    out
}

/// The attempts as records: one whose future was dropped by its timeout has no end, so it ran
/// until the next attempt started (or the call ended).
fn records(timed: &[Timed], finished: WallInstant) -> Vec<AttemptRecord> {
    timed
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let next = timed.get(i + 1).map(|n| n.started);
            let (end, status, error) = match &t.ended {
                Some((end, status, error)) => (*end, *status, error.clone()),
                None => (
                    next.unwrap_or(finished),
                    None,
                    Some("timed out".to_string()),
                ),
            };
            AttemptRecord {
                attempt: i as u32 + 1,
                status,
                error,
                elapsed_ms: (end - t.started).as_secs_f64() * 1e3,
                waited_ms: next.map(|n| n.saturating_duration_since(end).as_secs_f64() * 1e3),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

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

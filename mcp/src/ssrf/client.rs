//! [`build_client`]: the reqwest client `reliable_http_call` uses, with every SSRF defence wired in.
//!
//! No proxy from the environment (`HTTP_PROXY` would otherwise route requests, and the checks,
//! somewhere else), the [guarded resolver](super::resolver), the [redirect policy](super::redirect),
//! connect and read timeouts here and a total timeout per request, no `Referer`, and TLS through
//! rustls with the ring provider and the platform's certificate verifier.

use std::sync::Arc;
use std::time::Duration;

use super::guard::{Guard, Refusal};
use super::redirect::{self, MAX_REDIRECTS};
use super::resolver::GuardedResolver;

/// The operator's limits on outgoing requests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// TCP (and DNS) connect timeout.
    pub connect_timeout: Duration,
    /// Longest wait for any read (headers or the next body chunk).
    pub read_timeout: Duration,
    /// Longest total time one attempt may take, headers and body included; a caller may ask for
    /// less, never more.
    pub max_attempt_timeout: Duration,
    /// Longest time a whole call may take, retries and backoff included.
    pub max_call_time: Duration,
    /// Largest response body read, in bytes; a caller may ask for less, never more.
    pub max_body_bytes: usize,
    /// Redirects followed at most.
    pub max_redirects: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            connect_timeout: Duration::from_secs(5),
            read_timeout: Duration::from_secs(10),
            max_attempt_timeout: Duration::from_secs(30),
            max_call_time: Duration::from_secs(120),
            max_body_bytes: 1 << 20,
            max_redirects: MAX_REDIRECTS,
        }
    }
}

/// A client that can only reach what `guard` allows.
pub fn build_client(guard: Arc<Guard>, limits: &Limits) -> Result<reqwest::Client, String> {
    // reqwest is built without a default crypto provider (aws-lc-rs costs minutes of C to build);
    // install ring's. An error means one is installed already, which is as good.
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .no_proxy()
        .dns_resolver(GuardedResolver::new(guard.clone(), limits.connect_timeout))
        .redirect(redirect::policy(
            guard,
            limits.max_redirects.min(MAX_REDIRECTS),
        ))
        .connect_timeout(limits.connect_timeout)
        .read_timeout(limits.read_timeout)
        .referer(false)
        .user_agent(concat!("reliable-mcp/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| format!("cannot build the HTTP client: {e}"))
}

/// The guard's refusal inside a reqwest error, if that is what stopped it.
pub fn refusal(e: &reqwest::Error) -> Option<Refusal> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = source {
        if let Some(r) = s.downcast_ref::<Refusal>() {
            return Some(r.clone());
        }
        source = s.source();
    }
    None
}

/// A one-line description of a reqwest error, without its URL (which may carry credentials) and
/// with the innermost cause, which is the useful part ("connection refused", "timed out").
pub fn describe(e: &reqwest::Error) -> String {
    if let Some(r) = refusal(e) {
        return r.to_string();
    }
    let kind = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "connect failed"
    } else if e.is_redirect() {
        "redirect failed"
    } else if e.is_body() || e.is_decode() {
        "body failed"
    } else if e.is_request() {
        "request failed"
    } else {
        "failed"
    };
    let mut innermost = None;
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        innermost = Some(s.to_string());
        source = s.source();
    }
    match innermost {
        Some(why) => format!("{kind}: {why}"),
        None => kind.to_string(),
    }
}

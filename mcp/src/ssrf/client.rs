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
    /// Most attempts one call may make (`--max-attempts`, 1 to [`HARD_MAX_ATTEMPTS`]): the
    /// `attempts` of `reliable_http_call` and `create_breaker`, and every `max_attempts` of a
    /// `policy` argument, are held to it.
    pub max_attempts: u32,
    /// Most hedges per attempt a `policy` argument may ask for (`--max-hedges`, 0 to
    /// [`HARD_MAX_HEDGES`]; 0: no `Hedge` layer is taken).
    pub max_hedges: u32,
    /// Most `reliable_http_call`s in flight at once, across all sessions (`--max-http-calls`, 1
    /// to [`HARD_MAX_HTTP_CALLS`]); one session holds at most a quarter of them, and the last
    /// quarter is kept for sessions with none in flight ([`crate::inflight`]).
    pub max_http_calls: usize,
}

/// Attempts per call by default (`--max-attempts`).
pub const DEFAULT_MAX_ATTEMPTS: u32 = 5;
/// The most `--max-attempts` may be. A call sends at most `max_attempts × (1 + max_hedges)`
/// requests ([`Limits::max_requests_per_call`]), so this bounds what one tool call can cost a
/// downstream whatever else is configured: 80 requests at 20 attempts of 4 copies. 20 is far above
/// what a retry policy needs (this project's presets make 3 to 5 attempts; the conformance
/// sequences at most 6): past a handful of attempts, retries add load on a failing downstream,
/// the storm this project is against, not successes; a caller that needs more is polling.
pub const HARD_MAX_ATTEMPTS: u32 = 20;
/// Hedges per attempt by default (`--max-hedges`).
pub const DEFAULT_MAX_HEDGES: u32 = 1;
/// The most `--max-hedges` may be: the core's call engine holds at most 4 copies of an attempt
/// (`reliable_core::engine::Call`'s const parameter `C`, 4 by default, which `reliable` uses: a
/// first copy and three hedges) and does not send a hedge that would not fit, so a ceiling above
/// 3 would promise hedges that are never sent.
pub const HARD_MAX_HEDGES: u32 = 3;
/// `reliable_http_call`s in flight at once by default (`--max-http-calls`). Each holds at most
/// `1 + max_hedges` requests at a time, each with a socket and a response body of up to
/// `--max-body`: at the defaults 32 calls are at most 64 sockets and 64 MiB of bodies, a quarter
/// of the transport's 256 connections. It is also the transport's default session cap, and an
/// agent's parallel tool calls are a handful: a session's share, a quarter, is 8.
pub const DEFAULT_MAX_HTTP_CALLS: usize = 32;
/// The most `--max-http-calls` may be: 256 calls of up to 4 copies (`--max-hedges 3`) are 1,024
/// requests in flight, the usual limit of open files of a process (`ulimit -n`); past it a
/// burst would fail on file descriptors, mid-call, instead of being refused with a message.
pub const HARD_MAX_HTTP_CALLS: usize = 256;

impl Limits {
    /// Checks the limits an operator sets as numbers, naming the flag: attempts in
    /// 1..=[`HARD_MAX_ATTEMPTS`], hedges in 0..=[`HARD_MAX_HEDGES`], calls in flight in
    /// 1..=[`HARD_MAX_HTTP_CALLS`]. (Durations are checked where the flags are read: a `Duration`
    /// is never negative.)
    pub fn check(&self) -> Result<(), String> {
        if !(1..=HARD_MAX_ATTEMPTS).contains(&self.max_attempts) {
            return Err(format!(
                "--max-attempts: {} is outside 1..={HARD_MAX_ATTEMPTS} (attempts per reliable_http_call, \
                 the first included; each may send 1 + --max-hedges copies)",
                self.max_attempts
            ));
        }
        if self.max_hedges > HARD_MAX_HEDGES {
            return Err(format!(
                "--max-hedges: {} is outside 0..={HARD_MAX_HEDGES} (hedges per attempt: the call \
                 engine holds at most {} copies of an attempt, a first copy and {HARD_MAX_HEDGES} hedges)",
                self.max_hedges,
                HARD_MAX_HEDGES + 1
            ));
        }
        if !(1..=HARD_MAX_HTTP_CALLS).contains(&self.max_http_calls) {
            return Err(format!(
                "--max-http-calls: {} is outside 1..={HARD_MAX_HTTP_CALLS} (reliable_http_calls in \
                 flight at once across all sessions, a quarter of them per session; {HARD_MAX_HTTP_CALLS} \
                 calls of up to {} copies each are as many sockets as a process usually may open)",
                self.max_http_calls,
                HARD_MAX_HEDGES + 1
            ));
        }
        Ok(())
    }

    /// The most requests one call may send: `max_attempts × (1 + max_hedges)` (each copy may
    /// then follow up to `max_redirects` redirects).
    pub fn max_requests_per_call(&self) -> u32 {
        self.max_attempts
            .saturating_mul(self.max_hedges.saturating_add(1))
    }
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
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            max_hedges: DEFAULT_MAX_HEDGES,
            max_http_calls: DEFAULT_MAX_HTTP_CALLS,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn check(max_attempts: u32, max_hedges: u32) -> Result<(), String> {
        Limits {
            max_attempts,
            max_hedges,
            ..Limits::default()
        }
        .check()
    }

    /// The defaults are today's ceilings; every value in range is taken, the edges included.
    #[test]
    fn ceilings_in_range_are_taken() {
        let d = Limits::default();
        assert_eq!((d.max_attempts, d.max_hedges), (5, 1));
        assert_eq!(d.check(), Ok(()));
        assert_eq!(d.max_requests_per_call(), 10);
        for attempts in 1..=HARD_MAX_ATTEMPTS {
            for hedges in 0..=HARD_MAX_HEDGES {
                assert_eq!(check(attempts, hedges), Ok(()), "{attempts} {hedges}");
            }
        }
        let most = Limits {
            max_attempts: HARD_MAX_ATTEMPTS,
            max_hedges: HARD_MAX_HEDGES,
            ..Limits::default()
        };
        assert_eq!(most.max_requests_per_call(), 80);
    }

    /// Out of range is refused naming the flag, the range and why, never a panic.
    #[test]
    fn ceilings_out_of_range_are_refused_naming_the_flag() {
        for (attempts, hedges, starts) in [
            (0, 1, "--max-attempts: 0 is outside 1..=20 ("),
            (21, 1, "--max-attempts: 21 is outside 1..=20 ("),
            (
                u32::MAX,
                1,
                "--max-attempts: 4294967295 is outside 1..=20 (",
            ),
            (5, 4, "--max-hedges: 4 is outside 0..=3 ("),
            (5, u32::MAX, "--max-hedges: 4294967295 is outside 0..=3 ("),
        ] {
            let e = check(attempts, hedges).unwrap_err();
            assert!(e.starts_with(starts), "{attempts} {hedges}: {e}");
        }
        assert!(
            check(5, 4)
                .unwrap_err()
                .contains("at most 4 copies of an attempt, a first copy and 3 hedges")
        );
    }

    /// Calls in flight: 1 to 256 taken, the default 32; outside refused naming the flag.
    #[test]
    fn calls_in_flight_are_checked_naming_the_flag() {
        let with = |max_http_calls| {
            Limits {
                max_http_calls,
                ..Limits::default()
            }
            .check()
        };
        assert_eq!(Limits::default().max_http_calls, 32);
        for ok in [1, 2, 32, 256] {
            assert_eq!(with(ok), Ok(()), "{ok}");
        }
        for (n, starts) in [
            (0, "--max-http-calls: 0 is outside 1..=256 ("),
            (257, "--max-http-calls: 257 is outside 1..=256 ("),
            (
                usize::MAX,
                "--max-http-calls: 18446744073709551615 is outside 1..=256 (",
            ),
        ] {
            let e = with(n).unwrap_err();
            assert!(e.starts_with(starts), "{n}: {e}");
        }
    }
}

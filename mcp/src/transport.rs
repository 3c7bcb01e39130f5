//! The streamable HTTP transport, bounded: any local process (or a web page, through the
//! browser) can reach a server on loopback, so nothing it can open may grow without limit.
//!
//! - `Origin` is validated on every request (the MCP specification's rule against DNS
//!   rebinding from a browser): a request carrying an origin outside [`HttpLimits::origins`]
//!   gets 403; requests without one (non-browser clients) pass. `Host` is checked the same way.
//! - Live sessions are capped ([`HttpLimits::max_sessions`]) and expire after
//!   [`HttpLimits::session_idle`] without a message, but no client is ever refused a session:
//!   a new session over the cap ends another ([`Sessions`]), chosen fairly between peers
//!   (a peer over its share ends its own; sessions never used past the handshake go first, then
//!   the least recently active; a session listening on a stream counts as active). The ended
//!   session's client gets 404 on its next request and, as the MCP specification says, starts a
//!   new one. Memory stays bounded by the cap.
//! - A peer is an IP address. On loopback every local process shares 127.0.0.1 (or ::1), and the
//!   connection carries nothing cheaper or sturdier that tells processes apart: processes of one
//!   user can already signal and trace each other, so the transport does not pretend to isolate
//!   them. Between local clients the rule above still protects a session in use from a flood of
//!   bare `initialize` requests (those sessions go first); a client that wants a share of its
//!   own can connect from its own loopback address (127.0.0.2, ...). A peer spreading a flood
//!   over many loopback addresses gets one share per address.
//! - Every 503 carries `Retry-After`.
//! - A connection must send its request headers within [`HttpLimits::header_timeout`], and at
//!   most [`HttpLimits::max_connections`] are open at once (more are closed on accept): half-sent
//!   requests cannot hold file descriptors.

use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, Ipv4Addr};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;
use rmcp::transport::streamable_http_server::session::local::{LocalSessionManager, SessionConfig};
use rmcp::transport::streamable_http_server::session::{SessionId, SessionManager};
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use crate::ReliableServer;

/// The operator's limits on the HTTP transport.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpLimits {
    /// `Host` values accepted (empty: loopback names, rmcp's default).
    pub hosts: Vec<String>,
    /// `Origin` values accepted from browsers, e.g. `https://app.example` or
    /// `http://localhost:*` (any port).
    pub origins: Vec<String>,
    /// Live sessions at most.
    pub max_sessions: usize,
    /// A session with no message for this long ends.
    pub session_idle: Duration,
    /// Longest time to receive a request's headers.
    pub header_timeout: Duration,
    /// Open connections at most.
    pub max_connections: usize,
}

/// Browser origins on this machine, any port: what a loopback server accepts by default.
pub const LOOPBACK_ORIGINS: [&str; 6] = [
    "http://localhost:*",
    "http://127.0.0.1:*",
    "http://[::1]:*",
    "https://localhost:*",
    "https://127.0.0.1:*",
    "https://[::1]:*",
];

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            hosts: Vec::new(),
            origins: LOOPBACK_ORIGINS.iter().map(|o| o.to_string()).collect(),
            max_sessions: 32,
            session_idle: Duration::from_secs(300),
            header_timeout: Duration::from_secs(10),
            max_connections: 256,
        }
    }
}

/// Who opened a session: the peer's IP address, as the connection reports it (the module docs
/// say what that means on loopback).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Peer(pub IpAddr);

/// What the transport knows of a live session.
#[derive(Clone, Debug)]
struct Entry {
    peer: IpAddr,
    /// Its last request began or its last response stream ended.
    last: Instant,
    /// Messages after `initialize` (the client's `initialized` notification is the first).
    requests: u32,
    /// Response streams open now (a GET listening for notifications, a POST's answer).
    open: u32,
}

impl Entry {
    /// Eviction order within a peer, first evicted first: no stream open, then never used past
    /// the handshake, then least recently active.
    fn rank(&self) -> (bool, bool, Instant) {
        (self.open > 0, self.requests >= 1, self.last)
    }
}

/// The session to end so that `new` fits, or none if no other session is known.
///
/// Fairness between peers: the peer that opened `new` has a quota of `max / peers` sessions
/// (peers holding a session, at least 1 each). Over its quota it evicts one of its own;
/// within it, one of the peer holding the most sessions. Within the chosen peer the session
/// goes by [`Entry::rank`]. So a peer opening sessions in a loop ends up ending its own, and
/// never takes another peer below its share.
fn victim(table: &HashMap<String, Entry>, new: &str, max: usize) -> Option<String> {
    let peer = table.get(new)?.peer;
    let mut held: HashMap<IpAddr, usize> = HashMap::new();
    for e in table.values() {
        *held.entry(e.peer).or_default() += 1;
    }
    let quota = (max / held.len().max(1)).max(1);
    let mine = held.get(&peer).copied().unwrap_or(0);
    let candidates = |p: IpAddr| {
        table
            .iter()
            .filter(move |(id, e)| e.peer == p && id.as_str() != new)
            .min_by_key(|(_, e)| e.rank())
    };
    let chosen = if mine > quota {
        candidates(peer)
    } else {
        // The heaviest peer; among equals, the one whose candidate ranks first.
        let most = held.values().copied().max().unwrap_or(0);
        held.iter()
            .filter(|&(_, &n)| n == most)
            .filter_map(|(&p, _)| candidates(p))
            .min_by_key(|(_, e)| e.rank())
    };
    chosen
        .or_else(|| {
            table
                .iter()
                .filter(|(id, _)| id.as_str() != new)
                .min_by_key(|(_, e)| e.rank())
        })
        .map(|(id, _)| id.clone())
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every update is one step: a panic elsewhere cannot leave the table inconsistent.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The SDK's in-memory sessions, ending after an idle time, at most [`HttpLimits::max_sessions`]:
/// a new session over the cap ends another one, chosen by `victim`. Its client's next request
/// gets 404, and the MCP specification has it start a new session.
#[derive(Debug)]
pub struct Sessions {
    inner: Arc<LocalSessionManager>,
    max: usize,
    table: Mutex<HashMap<String, Entry>>,
    /// Held while choosing and ending sessions, so two new sessions do not end the same one.
    evicting: tokio::sync::Mutex<()>,
    evicted: AtomicU64,
}

impl Sessions {
    /// At most `max` live sessions, each ending after `idle` without a message.
    pub fn new(max: usize, idle: Duration) -> Self {
        let mut config = SessionConfig::default();
        config.keep_alive = Some(idle);
        let mut inner = LocalSessionManager::default();
        inner.session_config = config;
        Sessions {
            inner: Arc::new(inner),
            max,
            table: Mutex::new(HashMap::new()),
            evicting: tokio::sync::Mutex::new(()),
            evicted: AtomicU64::new(0),
        }
    }

    /// Sessions live now.
    pub async fn live(&self) -> usize {
        self.inner.sessions.read().await.len()
    }

    /// Sessions ended to make room so far.
    pub fn evicted(&self) -> u64 {
        self.evicted.load(Ordering::Relaxed)
    }

    /// A request of session `id` begins: it is active until the guard (kept with the response
    /// body) is dropped.
    fn begin(self: &Arc<Self>, id: &str) -> Option<Open> {
        let mut table = lock(&self.table);
        let e = table.get_mut(id)?;
        e.last = Instant::now();
        e.requests = e.requests.saturating_add(1);
        e.open += 1;
        Some(Open {
            sessions: self.clone(),
            id: id.to_string(),
        })
    }

    /// `peer` opened session `id`: over the cap, others end.
    async fn opened(&self, id: String, peer: IpAddr) {
        let _one_at_a_time = self.evicting.lock().await;
        let live: HashSet<String> = self
            .inner
            .sessions
            .read()
            .await
            .keys()
            .map(|k| k.to_string())
            .collect();
        let victims = {
            let mut table = lock(&self.table);
            // Sessions that ended on their own (idle, DELETE, the client went away).
            table.retain(|k, _| live.contains(k));
            table.insert(
                id.clone(),
                Entry {
                    peer,
                    last: Instant::now(),
                    requests: 0,
                    open: 0,
                },
            );
            let mut victims = Vec::new();
            let mut count = live.len().max(table.len());
            while count > self.max {
                let Some(v) = victim(&table, &id, self.max) else {
                    break;
                };
                table.remove(&v);
                victims.push(v);
                count -= 1;
            }
            victims
        };
        for v in victims {
            let _ = self.inner.close_session(&SessionId::from(v.as_str())).await;
            self.evicted.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn forget(&self, id: &str) {
        lock(&self.table).remove(id);
    }
}

/// A session's request in progress (its response body holds it).
struct Open {
    sessions: Arc<Sessions>,
    id: String,
}

impl Drop for Open {
    fn drop(&mut self) {
        if let Some(e) = lock(&self.sessions.table).get_mut(&self.id) {
            e.open = e.open.saturating_sub(1);
            e.last = Instant::now();
        }
    }
}

/// A response body that keeps its session marked active until it ends.
struct Held<B> {
    body: B,
    _open: Open,
}

impl<B: http_body::Body + Unpin> http_body::Body for Held<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// Seconds a client is asked to wait after a 503.
pub const RETRY_AFTER_S: u64 = 1;

/// Tracks sessions around the SDK: who opened each, when it was last active, and ends sessions
/// over the cap once a new one is open (after the SDK has checked `Origin` and `Host`, so a
/// refused request ends nobody's session). Any 503 leaves with a `Retry-After`.
async fn track(State(sessions): State<Arc<Sessions>>, req: Request, next: Next) -> Response {
    let peer = req
        .extensions()
        .get::<Peer>()
        .map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |p| p.0);
    let method = req.method().clone();
    let id = req
        .headers()
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let open = id.as_deref().and_then(|id| sessions.begin(id));
    let mut response = next.run(req).await;
    match &id {
        None if method == Method::POST => {
            let new = response
                .headers()
                .get(SESSION_HEADER)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            if let Some(new) = new {
                sessions.opened(new, peer).await;
            }
        }
        Some(id) if method == Method::DELETE => sessions.forget(id),
        _ => {}
    }
    if response.status() == StatusCode::SERVICE_UNAVAILABLE {
        response
            .headers_mut()
            .entry(header::RETRY_AFTER)
            .or_insert(HeaderValue::from(RETRY_AFTER_S));
    }
    match open {
        Some(open) => response.map(|body| axum::body::Body::new(Held { body, _open: open })),
        None => response,
    }
}

const SESSION_HEADER: &str = "mcp-session-id";

/// The `/mcp` application for `server` within `limits`; its session table, for figures.
pub fn app_with_sessions(
    server: ReliableServer,
    limits: &HttpLimits,
) -> (axum::Router, Arc<Sessions>) {
    let mut config = StreamableHttpServerConfig::default()
        .with_allowed_origins(limits.origins.clone())
        .enforce_origin_validation();
    if !limits.hosts.is_empty() {
        config = config.with_allowed_hosts(limits.hosts.clone());
    }
    let sessions = Arc::new(Sessions::new(limits.max_sessions, limits.session_idle));
    let service =
        StreamableHttpService::new(move || Ok(server.session()), sessions.inner.clone(), config);
    let router = axum::Router::new().nest_service("/mcp", service).layer(
        axum::middleware::from_fn_with_state(sessions.clone(), track),
    );
    (router, sessions)
}

/// The `/mcp` application for `server` within `limits`.
pub fn app(server: ReliableServer, limits: &HttpLimits) -> axum::Router {
    app_with_sessions(server, limits).0
}

/// Serves `app` on `listener` until Ctrl-C, each connection under the header timeout, at most
/// `limits.max_connections` at once.
pub async fn serve(
    listener: TcpListener,
    app: axum::Router,
    limits: &HttpLimits,
) -> Result<(), String> {
    let open = Arc::new(Semaphore::new(limits.max_connections));
    let header_timeout = limits.header_timeout;
    let stop = tokio::signal::ctrl_c();
    tokio::pin!(stop);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of file descriptors, typically: wait rather than spin.
                    eprintln!("reliable-mcp: accept: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            _ = &mut stop => return Ok(()),
        };
        // Over the cap the connection is closed at once: dropping it is the answer.
        let Ok(permit) = open.clone().try_acquire_owned() else {
            continue;
        };
        let service = hyper_util::service::TowerToHyperService::new(
            app.clone().layer(axum::Extension(Peer(peer.ip()))),
        );
        tokio::spawn(async move {
            let _permit = permit;
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(header_timeout)
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                .await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(table: &mut HashMap<String, Entry>, id: &str, peer: [u8; 4], ago_ms: u64, used: bool) {
        table.insert(
            id.to_string(),
            Entry {
                peer: IpAddr::from(peer),
                last: Instant::now() - Duration::from_millis(ago_ms),
                requests: u32::from(used),
                open: 0,
            },
        );
    }

    #[test]
    fn a_peer_over_its_share_ends_its_own_sessions() {
        let mut t = HashMap::new();
        at(&mut t, "legit", [127, 0, 0, 1], 9_000, true);
        for i in 0..3 {
            at(&mut t, &format!("flood{i}"), [127, 0, 0, 2], 100 - i, false);
        }
        at(&mut t, "new", [127, 0, 0, 2], 0, false);
        // max 4, two peers: a share of 2; the flooder holds 4.
        assert_eq!(victim(&t, "new", 4).as_deref(), Some("flood0"));
        // A new peer within its share ends one of the heaviest peer's sessions.
        t.remove("new");
        at(&mut t, "other", [127, 0, 0, 3], 0, false);
        assert_eq!(victim(&t, "other", 4).as_deref(), Some("flood0"));
    }

    #[test]
    fn within_a_peer_unused_then_least_recently_active_sessions_go_first() {
        let mut t = HashMap::new();
        at(&mut t, "old-used", [127, 0, 0, 1], 9_000, true);
        at(&mut t, "unused", [127, 0, 0, 1], 10, false);
        at(&mut t, "new", [127, 0, 0, 1], 0, false);
        assert_eq!(victim(&t, "new", 2).as_deref(), Some("unused"));
        t.remove("unused");
        at(&mut t, "recent-used", [127, 0, 0, 1], 10, true);
        assert_eq!(victim(&t, "new", 2).as_deref(), Some("old-used"));
        // A session listening on a stream is active now.
        t.get_mut("old-used").unwrap().open = 1;
        assert_eq!(victim(&t, "new", 2).as_deref(), Some("recent-used"));
        // Never the new session itself.
        let mut alone = HashMap::new();
        at(&mut alone, "new", [127, 0, 0, 1], 0, false);
        assert_eq!(victim(&alone, "new", 1), None);
    }
}

//! The streamable HTTP transport, bounded: any local process (or a web page, through the
//! browser) can reach a server on loopback, so nothing it can open may grow without limit.
//!
//! - `Origin` is validated on every request (the MCP specification's rule against DNS
//!   rebinding from a browser): a request carrying an origin outside [`HttpLimits::origins`]
//!   gets 403; requests without one (non-browser clients) pass. `Host` is checked the same way.
//! - Live sessions are capped ([`HttpLimits::max_sessions`]) and expire after
//!   [`HttpLimits::session_idle`] without a message: an `initialize` over the cap gets 503 with a
//!   message naming the flag, until a client ends its session (DELETE) or one expires.
//! - A connection must send its request headers within [`HttpLimits::header_timeout`], and at
//!   most [`HttpLimits::max_connections`] are open at once (more are closed on accept): half-sent
//!   requests cannot hold file descriptors.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures_core::Stream;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError, SessionConfig,
};
use rmcp::transport::streamable_http_server::session::{
    ServerSseMessage, SessionId, SessionManager,
};
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

/// Why a session was not created.
#[derive(Debug)]
pub enum SessionsError {
    /// The cap is reached.
    Full(usize, Duration),
    /// The SDK's session manager failed.
    Local(LocalSessionManagerError),
}

impl std::fmt::Display for SessionsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SessionsError::Full(max, idle) => write!(
                f,
                "{max} sessions are live, the most this server keeps (--max-sessions): end one \
                 with DELETE, or wait until one has been idle for {} s (--session-idle)",
                idle.as_secs()
            ),
            SessionsError::Local(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for SessionsError {}

impl From<LocalSessionManagerError> for SessionsError {
    fn from(e: LocalSessionManagerError) -> Self {
        SessionsError::Local(e)
    }
}

/// The SDK's in-memory session manager with a cap on live sessions and an idle expiry.
#[derive(Debug)]
pub struct BoundedSessions {
    inner: LocalSessionManager,
    max: usize,
    idle: Duration,
    /// Held while checking the count and creating, so concurrent `initialize`s cannot overshoot.
    creating: tokio::sync::Mutex<()>,
}

impl BoundedSessions {
    /// At most `max` live sessions, each ending after `idle` without a message.
    pub fn new(max: usize, idle: Duration) -> Self {
        let mut config = SessionConfig::default();
        config.keep_alive = Some(idle);
        let mut inner = LocalSessionManager::default();
        inner.session_config = config;
        BoundedSessions {
            inner,
            max,
            idle,
            creating: tokio::sync::Mutex::new(()),
        }
    }

    /// Sessions live now.
    pub async fn live(&self) -> usize {
        self.inner.sessions.read().await.len()
    }

    fn full(&self) -> SessionsError {
        SessionsError::Full(self.max, self.idle)
    }
}

impl SessionManager for BoundedSessions {
    type Error = SessionsError;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let _one_at_a_time = self.creating.lock().await;
        if self.live().await >= self.max {
            return Err(self.full());
        }
        Ok(self.inner.create_session().await?)
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        Ok(self.inner.initialize_session(id, message).await?)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        Ok(self.inner.has_session(id).await?)
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        Ok(self.inner.close_session(id).await?)
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.inner.create_stream(id, message).await?)
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        Ok(self.inner.accept_message(id, message).await?)
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.inner.create_standalone_stream(id).await?)
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.inner.resume(id, last_event_id).await?)
    }
}

/// 503 for a request that would open a session over the cap (a POST without a session id),
/// before the SDK answers it with a bare 500.
async fn refuse_over_cap(
    State(sessions): State<Arc<BoundedSessions>>,
    req: Request,
    next: Next,
) -> Response {
    let opens = req.method() == Method::POST && !req.headers().contains_key("mcp-session-id");
    if opens && sessions.live().await >= sessions.max {
        return (StatusCode::SERVICE_UNAVAILABLE, sessions.full().to_string()).into_response();
    }
    next.run(req).await
}

/// The `/mcp` application for `server` within `limits`.
pub fn app(server: ReliableServer, limits: &HttpLimits) -> axum::Router {
    let mut config = StreamableHttpServerConfig::default()
        .with_allowed_origins(limits.origins.clone())
        .enforce_origin_validation();
    if !limits.hosts.is_empty() {
        config = config.with_allowed_hosts(limits.hosts.clone());
    }
    let sessions = Arc::new(BoundedSessions::new(
        limits.max_sessions,
        limits.session_idle,
    ));
    let service = StreamableHttpService::new(move || Ok(server.clone()), sessions.clone(), config);
    axum::Router::new()
        .nest_service("/mcp", service)
        .layer(axum::middleware::from_fn_with_state(
            sessions,
            refuse_over_cap,
        ))
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
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
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
        let service = hyper_util::service::TowerToHyperService::new(app.clone());
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

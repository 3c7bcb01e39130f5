//! `reliable-mcp`: the MCP server, over stdio (the default) or streamable HTTP (`--http ADDR`).
//! stdout is the protocol on stdio: everything else goes to stderr.
#![forbid(unsafe_code)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use reliable::fleet::{RedisStore, Store, redact_url};
use reliable_mcp::ssrf::{AllowList, Guard, Limits};
use reliable_mcp::storm::StormLimits;
use reliable_mcp::transport::{self, HttpLimits, LOOPBACK_ORIGINS};
use reliable_mcp::{ReliableServer, Settings};
use rmcp::ServiceExt;

/// Circuit breakers, backoff, an SSRF-safe reliable HTTP call and storm simulations, as MCP tools.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// Serve streamable HTTP on this address (at /mcp) instead of stdio, e.g. 127.0.0.1:8931.
    #[arg(long, value_name = "ADDR")]
    http: Option<SocketAddr>,
    /// With --http: a Host header value to accept (repeat for more). Default: localhost,
    /// 127.0.0.1 and ::1, which guards a loopback server against DNS rebinding.
    #[arg(long = "allowed-host", value_name = "HOST")]
    allowed_hosts: Vec<String>,
    /// With --http: a browser Origin to accept, e.g. https://app.example or
    /// http://localhost:* (any port); repeat for more. Requests from other origins get 403
    /// (requests without an Origin pass). Default: http and https on localhost, 127.0.0.1 and
    /// [::1], any port.
    #[arg(long = "allowed-origin", value_name = "ORIGIN")]
    allowed_origins: Vec<String>,
    /// With --http: live MCP sessions at most. A new session over the cap ends another (a peer
    /// over its share loses its own; unused, then least recently active sessions go first); that
    /// client's next request gets 404 and it starts a new session.
    #[arg(long, default_value_t = HttpLimits::default().max_sessions)]
    max_sessions: usize,
    /// With --http: a session with no message for this many seconds ends.
    #[arg(long, default_value_t = HttpLimits::default().session_idle.as_secs_f64())]
    session_idle: f64,
    /// With --http: seconds a connection has to send its request headers before it is closed.
    #[arg(long, default_value_t = HttpLimits::default().header_timeout.as_secs_f64())]
    header_timeout: f64,
    /// With --http: open connections at most; more are closed as they arrive.
    #[arg(long, default_value_t = HttpLimits::default().max_connections)]
    max_connections: usize,
    /// Let reliable_http_call reach this non-public address or CIDR block (repeat for more), e.g.
    /// 10.1.2.3 or 10.1.0.0/16. By default only public addresses are reachable.
    #[arg(long = "allow-ip", value_name = "IP[/LEN]")]
    allow_ip: Vec<String>,
    /// Connect timeout of reliable_http_call, in seconds.
    #[arg(long, default_value_t = 5.0)]
    connect_timeout: f64,
    /// Read timeout (longest silence while waiting for data), in seconds.
    #[arg(long, default_value_t = 10.0)]
    read_timeout: f64,
    /// Longest per-attempt timeout a caller may ask for, in seconds.
    #[arg(long, default_value_t = 30.0)]
    max_attempt_timeout: f64,
    /// Longest time one reliable_http_call may take, retries included, in seconds.
    #[arg(long, default_value_t = 120.0)]
    max_call_time: f64,
    /// Most attempts one reliable_http_call may make, the first included (its `attempts`, a
    /// breaker's, a policy's `max_attempts`), 1 to 20. A call sends at most
    /// attempts x (1 + --max-hedges) requests, all within --max-call-time.
    #[arg(long, default_value_t = Limits::default().max_attempts)]
    max_attempts: u32,
    /// Most hedges per attempt a reliable_http_call policy may ask for, 0 (none) to 3.
    #[arg(long, default_value_t = Limits::default().max_hedges)]
    max_hedges: u32,
    /// Most reliable_http_calls in flight at once across all sessions, 1 to 256. One session holds
    /// at most a quarter of them, and the last quarter is kept for sessions with none in flight;
    /// a call over is refused at once, saying when to come back.
    #[arg(long, default_value_t = Limits::default().max_http_calls)]
    max_http_calls: usize,
    /// Largest response body reliable_http_call reads, in bytes.
    #[arg(long, default_value_t = 1 << 20)]
    max_body: usize,
    /// Most events (the simulator's estimate) one simulate_storm may process.
    #[arg(long, default_value_t = StormLimits::default().max_events)]
    max_events: f64,
    /// Most simulate_storm calls running at once; one more is refused with a message.
    #[arg(long, default_value_t = StormLimits::default().max_running)]
    max_simulations: usize,
    /// Offer the scenario files of this folder instead of the shipped ones.
    #[arg(long, value_name = "DIR")]
    scenarios: Option<PathBuf>,
    /// Keep the named breakers (create_breaker) in this Redis, e.g. redis://127.0.0.1:6379 or
    /// redis://user:password@host:6379/0 (rediss:// with the feature store-tls): every server on
    /// the same store shares them, and a restarted server finds their states again. A store that
    /// fails or is slow never fails a tool call: each server then decides on its own.
    #[arg(long, value_name = "URL")]
    store: Option<String>,
}

/// The breakers' store, from `--store`: the URL is shown only without its credentials. Its
/// connection is made and its scripts loaded before the server serves (for at most
/// [`STORE_WARM_UP`]), so that the first tool call's store operations are round trips, not a
/// connection's set-up running past their wait bound; a store not reached by then is not an
/// error (the breakers decide locally until it answers).
async fn store(a: &Args) -> Result<Option<Arc<dyn Store>>, String> {
    let Some(url) = &a.store else {
        return Ok(None);
    };
    let shown = redact_url(url);
    let tls = url.starts_with("rediss://");
    if tls && !cfg!(feature = "store-tls") {
        return Err(format!(
            "--store {shown}: rediss:// needs a server built with the feature store-tls"
        ));
    }
    if !tls && !url.starts_with("redis://") {
        return Err(format!("--store {shown}: a redis:// or rediss:// URL"));
    }
    // Errors from the store name it by `shown` and have its credentials scrubbed.
    let store = RedisStore::open(url, STORE_NAMESPACE).map_err(|e| format!("--store: {e}"))?;
    match tokio::time::timeout(STORE_WARM_UP, store.warm_up()).await {
        Ok(Ok(())) => {
            eprintln!("reliable-mcp: named breakers kept in {shown} (connected, scripts loaded)")
        }
        Ok(Err(e)) => eprintln!(
            "reliable-mcp: named breakers kept in {shown}, not reached yet ({e}): they decide locally until it answers"
        ),
        Err(_) => eprintln!(
            "reliable-mcp: named breakers kept in {shown}, which did not answer in {STORE_WARM_UP:?}: they decide locally until it does"
        ),
    }
    Ok(Some(Arc::new(store)))
}

/// The longest the server waits for its store before it serves.
const STORE_WARM_UP: Duration = Duration::from_secs(2);

/// The namespace of the server's keys in its store.
const STORE_NAMESPACE: &str = "reliable-mcp";

fn secs(name: &str, s: f64) -> Result<Duration, String> {
    Duration::try_from_secs_f64(s)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| format!("--{name}: {s} is not a positive number of seconds"))
}

fn at_least_one(name: &str, n: usize) -> Result<usize, String> {
    if n == 0 {
        Err(format!("--{name}: must be at least 1"))
    } else {
        Ok(n)
    }
}

fn http_limits(a: &Args) -> Result<HttpLimits, String> {
    Ok(HttpLimits {
        hosts: a.allowed_hosts.clone(),
        origins: if a.allowed_origins.is_empty() {
            LOOPBACK_ORIGINS.iter().map(|o| o.to_string()).collect()
        } else {
            a.allowed_origins.clone()
        },
        max_sessions: at_least_one("max-sessions", a.max_sessions)?,
        session_idle: secs("session-idle", a.session_idle)?,
        header_timeout: secs("header-timeout", a.header_timeout)?,
        max_connections: at_least_one("max-connections", a.max_connections)?,
    })
}

fn settings(a: &Args) -> Result<Settings, String> {
    let limits = Limits {
        connect_timeout: secs("connect-timeout", a.connect_timeout)?,
        read_timeout: secs("read-timeout", a.read_timeout)?,
        max_attempt_timeout: secs("max-attempt-timeout", a.max_attempt_timeout)?,
        max_call_time: secs("max-call-time", a.max_call_time)?,
        max_body_bytes: a.max_body,
        max_attempts: a.max_attempts,
        max_hedges: a.max_hedges,
        max_http_calls: a.max_http_calls,
        ..Limits::default()
    };
    limits.check()?;
    Ok(Settings {
        guard: Guard::new(AllowList::parse(&a.allow_ip)?),
        limits,
        storm: StormLimits {
            max_events: a.max_events,
            dir: a.scenarios.clone(),
            max_running: at_least_one("max-simulations", a.max_simulations)?,
        },
    })
}

async fn serve(a: Args) -> Result<(), String> {
    let server = ReliableServer::with_store(settings(&a)?, store(&a).await?)?;
    let limits = http_limits(&a)?;
    let Some(addr) = a.http else {
        eprintln!("reliable-mcp: serving MCP on stdio");
        let (input, output, writer) = reliable_mcp::stdio::transport();
        let running = server
            .serve((input, output))
            .await
            .map_err(|e| format!("stdio: {e}"))?;
        running.waiting().await.map_err(|e| format!("stdio: {e}"))?;
        // The SDK has dropped its end: the writer flushes what is left and ends (bounded, in
        // case the SDK still holds it).
        let _ = tokio::time::timeout(Duration::from_secs(2), writer).await;
        return Ok(());
    };
    if !addr.ip().is_loopback() {
        eprintln!(
            "reliable-mcp: warning: {addr} is not a loopback address; the server has no authentication, \
             so anyone who can reach it can use its tools"
        );
    }
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| format!("--http {addr}: {e}"))?;
    let local = listener.local_addr().map_err(|e| e.to_string())?;
    eprintln!("reliable-mcp: serving MCP over streamable HTTP at http://{local}/mcp");
    transport::serve(listener, transport::app(server, &limits), &limits).await
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let args = Args::parse();
    match serve(args).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("reliable-mcp: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

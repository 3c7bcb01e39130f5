//! A scripted HTTP/1.1 server on a loopback address, for end-to-end tests that must never send a
//! packet anywhere else. It counts the connections it accepts, so a test can prove a refused
//! target was never dialled.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use base64::Engine as _;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A running test server.
pub struct TestServer {
    /// Where it listens.
    pub addr: SocketAddr,
    connections: Arc<AtomicUsize>,
    requests: Arc<AtomicUsize>,
    held: Held,
    task: tokio::task::JoinHandle<()>,
}

/// The requests to `/hold`: waiting until the test releases them, or hung up on by the client.
#[derive(Clone)]
struct Held {
    /// One permit per request the test lets answer.
    release: Arc<tokio::sync::Semaphore>,
    /// Requests waiting now.
    waiting: Arc<AtomicUsize>,
    /// Requests whose client closed the connection while they waited.
    hung_up: Arc<AtomicUsize>,
}

impl Default for Held {
    fn default() -> Self {
        Held {
            release: Arc::new(tokio::sync::Semaphore::new(0)),
            waiting: Arc::default(),
            hung_up: Arc::default(),
        }
    }
}

impl TestServer {
    /// Connections accepted so far.
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }

    /// Requests read so far.
    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }

    /// Requests to `/hold` waiting for an answer now.
    pub fn holding(&self) -> usize {
        self.held.waiting.load(Ordering::SeqCst)
    }

    /// Requests to `/hold` whose client closed the connection before they were answered.
    pub fn hung_up(&self) -> usize {
        self.held.hung_up.load(Ordering::SeqCst)
    }

    /// Lets `n` requests to `/hold` (waiting now or to come) answer 200.
    pub fn release(&self, n: usize) {
        self.held.release.add_permits(n);
    }

    /// `http://ADDR{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Serves on `ip` (a loopback address), port chosen by the system.
pub async fn serve(ip: &str) -> TestServer {
    let listener = TcpListener::bind((ip, 0))
        .await
        .expect("bind a loopback port");
    let addr = listener.local_addr().expect("local addr");
    assert!(
        addr.ip().is_loopback(),
        "test servers listen on loopback only"
    );
    let connections = Arc::new(AtomicUsize::new(0));
    let requests = Arc::new(AtomicUsize::new(0));
    let held = Held::default();
    let (c, r, h) = (connections.clone(), requests.clone(), held.clone());
    let task = tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            c.fetch_add(1, Ordering::SeqCst);
            let (r, h) = (r.clone(), h.clone());
            tokio::spawn(async move {
                let _ = handle(stream, r, h).await;
            });
        }
    });
    TestServer {
        addr,
        connections,
        requests,
        held,
        task,
    }
}

/// Reads one request head (and ignores any body); returns the request line and the headers.
async fn read_head(s: &mut TcpStream) -> std::io::Result<Option<(String, String)>> {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1024];
    loop {
        let n = s.read(&mut byte).await?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&byte[..n]);
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).into_owned();
            let (line, headers) = head.split_once("\r\n").unwrap_or((&head, ""));
            return Ok(Some((line.to_string(), headers.to_string())));
        }
        if buf.len() > 64 * 1024 {
            return Ok(None);
        }
    }
}

fn query(path: &str, key: &str) -> Option<String> {
    let q = path.split_once('?')?.1;
    q.split('&').find_map(|kv| {
        kv.strip_prefix(&format!("{key}="))
            .map(|v| v.replace("%3A", ":").replace("%2F", "/"))
    })
}

/// Routes:
/// - `/ok`: 200 "hello", with a Set-Cookie;
/// - `/echo`: 200, the request's headers as the body;
/// - `/mirror`: 200, the request's headers as the body, its `Authorization` value reflected in
///   an `X-Request-Id` header and, when it is Basic, also decoded into the body (the worst
///   echoing target there is);
/// - `/status?code=N`: that status, with `Retry-After: 0`;
/// - `/redirect?to=URL`: 302 to URL; `/hops?n=N`: N more redirects to itself, then 200;
/// - `/big`: declares a 2 MiB body and sends 64 KiB of it;
/// - `/endless`: a body without a length that never ends;
/// - `/trickle`: one byte every 100 ms, forever;
/// - `/hang`: reads the request and never answers;
/// - `/hold`: waits until the test releases it ([`TestServer::release`]), then 200 "released";
///   a client that closes the connection first is counted ([`TestServer::hung_up`]).
async fn handle(mut s: TcpStream, requests: Arc<AtomicUsize>, held: Held) -> std::io::Result<()> {
    while let Some((line, headers)) = read_head(&mut s).await? {
        requests.fetch_add(1, Ordering::SeqCst);
        let path = line.split(' ').nth(1).unwrap_or("/").to_string();
        let route = path.split('?').next().unwrap_or("/");
        match route {
            "/ok" => {
                respond(
                    &mut s,
                    "200 OK",
                    &["Set-Cookie: session=server-secret"],
                    b"hello",
                )
                .await?
            }
            "/echo" => {
                respond(
                    &mut s,
                    "200 OK",
                    &["Content-Type: text/plain"],
                    headers.as_bytes(),
                )
                .await?
            }
            "/mirror" => {
                let auth = headers
                    .lines()
                    .find_map(|l| {
                        let (n, v) = l.split_once(':')?;
                        n.eq_ignore_ascii_case("authorization")
                            .then(|| v.trim().to_string())
                    })
                    .unwrap_or_default();
                let decoded = auth
                    .strip_prefix("Basic ")
                    .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
                    .map(|d| String::from_utf8_lossy(&d).into_owned())
                    .unwrap_or_default();
                let body = format!("{headers}\r\ndecoded: {decoded}");
                respond(
                    &mut s,
                    "200 OK",
                    &[&format!("X-Request-Id: {auth}")],
                    body.as_bytes(),
                )
                .await?
            }
            "/status" => {
                let code = query(&path, "code").unwrap_or_else(|| "500".into());
                respond(
                    &mut s,
                    &format!("{code} Status"),
                    &["Retry-After: 0"],
                    b"status",
                )
                .await?;
            }
            "/redirect" => {
                let to = query(&path, "to").unwrap_or_default();
                respond(&mut s, "302 Found", &[&format!("Location: {to}")], b"").await?;
            }
            "/hops" => {
                let n: u32 = query(&path, "n").and_then(|n| n.parse().ok()).unwrap_or(0);
                if n == 0 {
                    respond(&mut s, "200 OK", &[], b"arrived").await?;
                } else {
                    respond(
                        &mut s,
                        "302 Found",
                        &[&format!("Location: /hops?n={}", n - 1)],
                        b"",
                    )
                    .await?;
                }
            }
            "/big" => {
                s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2097152\r\n\r\n")
                    .await?;
                s.write_all(&vec![b'x'; 64 * 1024]).await?;
                tokio::time::sleep(Duration::from_secs(5)).await;
                return Ok(());
            }
            "/endless" => {
                s.write_all(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n")
                    .await?;
                let chunk = vec![b'y'; 16 * 1024];
                loop {
                    s.write_all(&chunk).await?;
                }
            }
            "/trickle" => {
                s.write_all(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n")
                    .await?;
                loop {
                    s.write_all(b"z").await?;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
            "/hold" => {
                held.waiting.fetch_add(1, Ordering::SeqCst);
                let mut byte = [0u8; 1];
                let released = tokio::select! {
                    permit = held.release.acquire() => {
                        permit.expect("never closed").forget();
                        true
                    }
                    // The client sends nothing more: a read ends only when it hangs up.
                    _ = s.read(&mut byte) => false,
                };
                held.waiting.fetch_sub(1, Ordering::SeqCst);
                if !released {
                    held.hung_up.fetch_add(1, Ordering::SeqCst);
                    return Ok(());
                }
                respond(&mut s, "200 OK", &[], b"released").await?;
            }
            "/hang" => {
                tokio::time::sleep(Duration::from_secs(30)).await;
                return Ok(());
            }
            _ => respond(&mut s, "404 Not Found", &[], b"no such route").await?,
        }
    }
    Ok(())
}

async fn respond(
    s: &mut TcpStream,
    status: &str,
    headers: &[&str],
    body: &[u8],
) -> std::io::Result<()> {
    let mut head = format!("HTTP/1.1 {status}\r\nContent-Length: {}\r\n", body.len());
    for h in headers {
        head.push_str(h);
        head.push_str("\r\n");
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes()).await?;
    s.write_all(body).await
}

/// The `reliable-mcp` binary built for these tests.
pub const BIN: &str = env!("CARGO_BIN_EXE_reliable-mcp");

/// Starts the binary over HTTP on an ephemeral loopback port with `extra` flags; returns it and
/// its `IP:PORT`.
pub async fn start_http(extra: &[&str]) -> (tokio::process::Child, String) {
    use tokio::io::AsyncBufReadExt;
    let mut child = tokio::process::Command::new(BIN)
        .args(["--http", "127.0.0.1:0"])
        .args(extra)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the binary starts");
    let mut lines = tokio::io::BufReader::new(child.stderr.take().expect("piped")).lines();
    let addr = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(line) = lines.next_line().await.expect("stderr") {
            if let Some(url) = line.split("streamable HTTP at http://").nth(1) {
                return url.trim_end_matches("/mcp").to_string();
            }
            eprintln!("server: {line}");
        }
        panic!("the server exited before listening")
    })
    .await
    .expect("listening within 30 s");
    // Keep draining stderr so the server never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, addr)
}

/// An `initialize` request body.
pub const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#;

/// An HTTP answer: status, head (lower-cased header lines) and as much body as came in time.
pub struct Answer {
    /// The status code.
    pub status: u16,
    /// The header lines, lower-cased.
    pub head: String,
    /// The body read before the connection closed (or a short wait ran out).
    pub body: String,
}

impl Answer {
    /// A header's value.
    pub fn header(&self, name: &str) -> Option<String> {
        self.head.lines().find_map(|l| {
            let (n, v) = l.split_once(':')?;
            (n.trim() == name).then(|| v.trim().to_string())
        })
    }
}

/// Sends one request to `/mcp` on a fresh connection (`Connection: close`) with `extra` header
/// lines; reads the answer's head and whatever body arrives within half a second.
pub async fn request(addr: &str, method: &str, extra: &[String], body: &str) -> Answer {
    request_from("127.0.0.1", addr, method, extra, body).await
}

/// [`request`] from the loopback address `src` (127.0.0.1, 127.0.0.2...): another peer.
pub async fn request_from(
    src: &str,
    addr: &str,
    method: &str,
    extra: &[String],
    body: &str,
) -> Answer {
    let mut req = format!(
        "{method} /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for h in extra {
        req.push_str(h);
        req.push_str("\r\n");
    }
    req.push_str("\r\n");
    req.push_str(body);
    let src: std::net::IpAddr = src.parse().expect("a source address");
    assert!(src.is_loopback(), "tests connect from loopback only");
    let socket = tokio::net::TcpSocket::new_v4().expect("a socket");
    socket
        .bind((src, 0).into())
        .expect("bind the source address");
    let mut s = socket
        .connect(addr.parse().expect("IP:PORT"))
        .await
        .expect("connect to loopback");
    s.write_all(req.as_bytes()).await.expect("send");
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let head_done = buf.windows(4).any(|w| w == b"\r\n\r\n");
        let wait = if head_done {
            Duration::from_millis(500)
        } else {
            deadline.saturating_duration_since(tokio::time::Instant::now())
        };
        match tokio::time::timeout(wait, s.read(&mut chunk)).await {
            Ok(Ok(n)) if n > 0 => buf.extend_from_slice(&chunk[..n]),
            _ => break,
        }
    }
    let text = String::from_utf8_lossy(&buf).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {text:?}"));
    Answer {
        status,
        head: head.to_ascii_lowercase(),
        body: body.to_string(),
    }
}

/// The headers of a request in session `id`.
pub fn in_session(id: &str) -> Vec<String> {
    vec![
        format!("Mcp-Session-Id: {id}"),
        "MCP-Protocol-Version: 2025-06-18".to_string(),
    ]
}

/// The client's notification that ends the handshake.
pub const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
/// A request that any session answers.
pub const LIST_TOOLS: &str = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;

/// Opens a session from `src` (initialize, then initialized); returns its id.
pub async fn open_session(src: &str, addr: &str) -> String {
    let a = request_from(src, addr, "POST", &[], INITIALIZE).await;
    assert_eq!(a.status, 200, "initialize from {src}: {}", a.body);
    let id = a.header("mcp-session-id").expect("a session id");
    let n = request_from(src, addr, "POST", &in_session(&id), INITIALIZED).await;
    assert_eq!(n.status, 202, "initialized from {src}: {}", n.body);
    id
}

/// The status of `tools/list` in session `id`, sent from `src`.
pub async fn list_tools(src: &str, addr: &str, id: &str) -> u16 {
    let a = request_from(src, addr, "POST", &in_session(id), LIST_TOOLS).await;
    if a.status == 200 {
        assert!(a.body.contains("create_breaker"), "{}", a.body);
    }
    a.status
}

/// The resident set of process `pid`, in KiB (Linux).
pub fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc/PID/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS")
}

//! A scripted HTTP/1.1 server on a loopback address, for end-to-end tests that must never send a
//! packet anywhere else. It counts the connections it accepts, so a test can prove a refused
//! target was never dialled.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A running test server.
pub struct TestServer {
    /// Where it listens.
    pub addr: SocketAddr,
    connections: Arc<AtomicUsize>,
    requests: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
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
    let (c, r) = (connections.clone(), requests.clone());
    let task = tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            c.fetch_add(1, Ordering::SeqCst);
            let r = r.clone();
            tokio::spawn(async move {
                let _ = handle(stream, r).await;
            });
        }
    });
    TestServer {
        addr,
        connections,
        requests,
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
/// - `/status?code=N`: that status, with `Retry-After: 0`;
/// - `/redirect?to=URL`: 302 to URL; `/hops?n=N`: N more redirects to itself, then 200;
/// - `/big`: declares a 2 MiB body and sends 64 KiB of it;
/// - `/endless`: a body without a length that never ends;
/// - `/trickle`: one byte every 100 ms, forever;
/// - `/hang`: reads the request and never answers.
async fn handle(mut s: TcpStream, requests: Arc<AtomicUsize>) -> std::io::Result<()> {
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

//! The `reliable-mcp` binary: flags are checked, and over HTTP it answers only requests whose
//! `Host` it allows (a DNS-rebinding guard for a server on loopback).

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::process::{Child, Command};

const BIN: &str = env!("CARGO_BIN_EXE_reliable-mcp");

/// Starts the server on an ephemeral loopback port; returns it and its address.
async fn start(extra: &[&str]) -> (Child, String) {
    let mut child = Command::new(BIN)
        .args(["--http", "127.0.0.1:0"])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the binary starts");
    let mut lines = BufReader::new(child.stderr.take().expect("piped")).lines();
    let addr = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(line) = lines.next_line().await.expect("stderr") {
            if let Some(url) = line.split("streamable HTTP at http://").nth(1) {
                return url.trim_end_matches("/mcp").to_string();
            }
        }
        panic!("the server exited before listening")
    })
    .await
    .expect("listening within 30 s");
    (child, addr)
}

/// Sends an `initialize` POST with this `Host` header; returns the status code.
async fn status_for_host(addr: &str, host: &str) -> u16 {
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#;
    let req = format!(
        "POST /mcp HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let mut s = TcpStream::connect(addr).await.expect("connect to loopback");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut head = vec![0u8; 64];
    let n = s.read(&mut head).await.unwrap();
    let line = String::from_utf8_lossy(&head[..n]).to_string();
    line.split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("status line: {line:?}"))
}

#[tokio::test]
async fn http_answers_only_allowed_hosts() {
    let (_server, addr) = start(&[]).await;
    assert_eq!(
        status_for_host(&addr, &addr).await,
        200,
        "127.0.0.1:PORT is allowed by default"
    );
    assert_eq!(
        status_for_host(&addr, "evil.example").await,
        403,
        "a rebinding name is refused"
    );

    let (_server, addr) = start(&["--allowed-host", "mcp.internal"]).await;
    assert_eq!(status_for_host(&addr, "mcp.internal").await, 200);
    assert_eq!(
        status_for_host(&addr, &addr).await,
        403,
        "the list replaces the default"
    );
}

#[tokio::test]
async fn bad_flags_are_refused_with_a_message() {
    for (args, needle) in [
        (
            &["--allow-ip", "localhost"][..],
            "allow-list entry \"localhost\"",
        ),
        (&["--allow-ip", "10.0.0.0/40"][..], "prefix length"),
        (&["--read-timeout=0"][..], "--read-timeout"),
    ] {
        let out = Command::new(BIN)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .await
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

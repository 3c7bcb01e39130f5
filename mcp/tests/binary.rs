//! The `reliable-mcp` binary: flags are checked, and over HTTP it answers only requests whose
//! `Host` it allows (a DNS-rebinding guard for a server on loopback).

mod support;

use std::process::Stdio;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::process::Command;

use support::{BIN, start_http as start};

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
        (&["--max-sessions=0"][..], "--max-sessions"),
        (&["--header-timeout=-1"][..], "--header-timeout"),
        (&["--max-simulations=0"][..], "--max-simulations"),
        (
            &["--max-attempts=0"][..],
            "--max-attempts: 0 is outside 1..=20",
        ),
        (
            &["--max-attempts=21"][..],
            "--max-attempts: 21 is outside 1..=20",
        ),
        (
            &["--max-hedges=4"][..],
            "--max-hedges: 4 is outside 0..=3 (hedges per attempt: the call engine holds at most 4 copies",
        ),
        (&["--max-hedges=-1"][..], "--max-hedges"),
        (
            &["--max-http-calls=0"][..],
            "--max-http-calls: 0 is outside 1..=256 (reliable_http_calls in flight at once",
        ),
        (
            &["--max-http-calls=257"][..],
            "--max-http-calls: 257 is outside 1..=256",
        ),
        (&["--max-http-calls=-1"][..], "--max-http-calls"),
        (&["--max-http-calls=many"][..], "--max-http-calls"),
    ] {
        // Bounded, and killed when the future is dropped (a timeout, a panic).
        let out = tokio::time::timeout(
            std::time::Duration::from_secs(30),
            Command::new(BIN)
                .args(args)
                .stdin(Stdio::null())
                .kill_on_drop(true)
                .output(),
        )
        .await
        .unwrap_or_else(|_| panic!("{args:?}: still running after 30 s"))
        .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

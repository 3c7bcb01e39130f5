//! `reliable-mcp --store redis://…`: named breakers kept in a real `redis-server` (started and
//! ended by the test), shared by server processes on the same store, kept across a restart,
//! never showing the store's credentials, and never failing or holding a tool call when the
//! store dies.

#[path = "../../reliable/tests/fleet_support/mod.rs"]
mod fleet_support;
mod support;

use std::process::Stdio;
use std::time::{Duration, Instant};

use fleet_support::RedisServer;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use support::BIN;

const SECRET: &str = "s3cret-store-pass";

/// A `reliable-mcp` process over stdio, killed when dropped (a panic included).
struct Server {
    child: Child,
    stdin: ChildStdin,
    stdout: tokio::io::Lines<BufReader<ChildStdout>>,
    next: u64,
    /// Every line it wrote on stdout.
    transcript: String,
}

impl Server {
    async fn start(store: &str, extra: &[&str]) -> Server {
        let mut child = Command::new(BIN)
            .args(["--store", store, "--allow-ip", "127.0.0.1"])
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start reliable-mcp");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut s = Server {
            child,
            stdin,
            stdout,
            next: 1,
            transcript: String::new(),
        };
        s.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "store-test", "version": "0"}}),
        )
        .await;
        s.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        s
    }

    async fn send(&mut self, v: Value) {
        let mut line = v.to_string();
        line.push('\n');
        self.stdin.write_all(line.as_bytes()).await.unwrap();
        self.stdin.flush().await.unwrap();
    }

    /// One request; its response's `result` (or `error`), and how long it took.
    async fn request(&mut self, method: &str, params: Value) -> (Value, Duration) {
        let id = self.next;
        self.next += 1;
        let started = Instant::now();
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        loop {
            let line = tokio::time::timeout(Duration::from_secs(30), self.stdout.next_line())
                .await
                .unwrap_or_else(|_| panic!("{method}: no answer in 30 s"))
                .unwrap()
                .unwrap_or_else(|| panic!("{method}: the server closed stdout"));
            self.transcript.push_str(&line);
            self.transcript.push('\n');
            let v: Value = serde_json::from_str(&line).unwrap();
            if v["id"] == json!(id) {
                let out = if v.get("error").is_some() {
                    v["error"].clone()
                } else {
                    v["result"].clone()
                };
                return (out, started.elapsed());
            }
        }
    }

    /// A tool call: its structured result (an in-band error comes back as its text), and how
    /// long it took.
    async fn tool(&mut self, name: &str, args: Value) -> (Value, Duration) {
        let (r, took) = self
            .request("tools/call", json!({"name": name, "arguments": args}))
            .await;
        if r["isError"] == json!(true) {
            return (json!({"tool_error": r["content"][0]["text"]}), took);
        }
        (r["structuredContent"].clone(), took)
    }

    /// Ends it; what it wrote on stderr.
    async fn stop(mut self) -> String {
        let _ = self.child.kill().await;
        let mut err = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            let _ = e.read_to_string(&mut err).await;
        }
        err
    }
}

fn breaker_args() -> Value {
    // Two failures in a row open it for a minute; one probe. One attempt per call.
    json!({"name": "api", "preset": "layered_exercise", "cooldown": "60s",
           "max_probes_in_flight": 1, "attempts": 1})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn breakers_in_redis_are_shared_kept_and_never_the_outage() {
    let mut redis = RedisServer::start_with(&["--requirepass", SECRET]);
    let url = format!("redis://:{SECRET}@127.0.0.1:{}", redis.port);
    let down = support::serve("127.0.0.1").await;
    let failing = down.url("/status?code=503");
    let mut outputs = String::new();

    // One server trips `api` (two 503s in a row).
    let mut one = Server::start(&url, &[]).await;
    let (created, _) = one.tool("create_breaker", breaker_args()).await;
    assert_eq!(created["action"], "created", "{created}");
    for _ in 0..2 {
        let (r, _) = one
            .tool(
                "reliable_http_call",
                json!({"url": failing, "breaker": "api"}),
            )
            .await;
        assert_eq!(r["status"], 503, "{r}");
    }
    let (state, _) = one.tool("get_breaker_state", json!({"name": "api"})).await;
    assert_eq!(state["state"], "open", "{state}");
    let sent = down.requests();

    // A second server on the same store sees it open and sends nothing.
    let mut two = Server::start(&url, &[]).await;
    two.tool("create_breaker", breaker_args()).await;
    let (state, _) = two.tool("get_breaker_state", json!({"name": "api"})).await;
    assert_eq!(state["state"], "open", "the second server sees it: {state}");
    assert!(
        state["retry_after_ms"].as_f64().unwrap() > 1_000.0,
        "{state}"
    );
    let (r, _) = two
        .tool(
            "reliable_http_call",
            json!({"url": failing, "breaker": "api"}),
        )
        .await;
    assert_eq!(r["breaker"]["state"], "open", "{r}");
    assert_eq!(down.requests(), sent, "an open breaker sends nothing");
    outputs.push_str(&one.transcript);
    outputs.push_str(&one.stop().await);

    // The first server restarted: its breaker is still open.
    let mut again = Server::start(&url, &[]).await;
    again.tool("create_breaker", breaker_args()).await;
    let (state, _) = again
        .tool("get_breaker_state", json!({"name": "api"}))
        .await;
    assert_eq!(state["state"], "open", "kept across a restart: {state}");

    // A bad store URL: refused at start, the credentials not shown.
    let bad = Command::new(BIN)
        .args(["--store", &format!("memcached://u:{SECRET}@127.0.0.1:1")])
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .unwrap();
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr).to_string();
    assert!(err.contains("--store memcached://***@127.0.0.1:1"), "{err}");
    outputs.push_str(&err);
    #[cfg(not(feature = "store-tls"))]
    {
        let tls = Command::new(BIN)
            .args(["--store", &format!("rediss://:{SECRET}@127.0.0.1:1")])
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output()
            .await
            .unwrap();
        let err = String::from_utf8_lossy(&tls.stderr).to_string();
        assert!(!tls.status.success() && err.contains("store-tls"), "{err}");
        outputs.push_str(&err);
    }

    // The store killed mid-run: every tool call still answers, within the store's bound.
    redis.kill();
    let mut longest = Duration::ZERO;
    for _ in 0..5 {
        for s in [&mut two, &mut again] {
            let (state, took) = s.tool("get_breaker_state", json!({"name": "api"})).await;
            assert!(state.get("tool_error").is_none(), "{state}");
            longest = longest.max(took);
            let (r, took) = s
                .tool(
                    "reliable_http_call",
                    json!({"url": down.url("/ok"), "breaker": "api"}),
                )
                .await;
            // Fail-open: refused on the last view of the store (open), or, once that view is
            // stale, decided by this server's own breaker (closed: it saw no failure) and sent.
            assert!(r.get("tool_error").is_none(), "{r}");
            assert!(r["status"] == 200 || r["breaker"]["state"] == "open", "{r}");
            longest = longest.max(took);
        }
    }
    eprintln!("store killed: 20 tool calls, the longest {longest:?}");
    // The store's wait is 50 ms per sync (two per call); the rest is the machine.
    assert!(
        longest < Duration::from_secs(2),
        "a tool call took {longest:?}"
    );
    // A tool that fails because the store is down would say so: none did (checked above), and
    // creating a breaker still works.
    let (created, _) = again
        .tool(
            "create_breaker",
            json!({"name": "other", "max_probes_in_flight": 1}),
        )
        .await;
    assert_eq!(created["action"], "created", "{created}");

    for s in [two, again] {
        outputs.push_str(&s.transcript);
        outputs.push_str(&s.stop().await);
    }
    assert!(
        outputs.contains("named breakers kept in redis://***@127.0.0.1:"),
        "{outputs}"
    );
    assert!(
        !outputs.contains(SECRET),
        "the store's password was shown: {outputs}"
    );
}

/// A `policy` argument whose breaker is scoped `Fleet`: kept in the server's store, so two
/// server processes share it. Two 503s through one server open it; the other server, which has
/// sent one successful call of its own, refuses the next without sending it. The same policy
/// scoped `Shared` (one breaker per server) is the negative control: the second server sends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_scoped_fleet_shares_its_breaker_between_servers() {
    let redis = RedisServer::start();
    let url = format!("redis://127.0.0.1:{}", redis.port);
    let target = support::serve("127.0.0.1").await;
    let policy = |scope: Value| {
        json!({"Breaker": {
            "config": {"consecutive_failures": 2, "open": {"duration": "60s"},
                       "half_open": {"max_in_flight": 1, "probe_timeout": "5s"}},
            "scope": scope,
            "inner": {"Call": {"downstream": "orders", "timeout": "2s"}}
        }})
    };
    // A wait no loaded machine runs into: what is tried here is the sharing (a store operation
    // given up at the default 5 ms would leave a result to a later replay).
    let fleet = policy(
        json!({"Fleet": {"store": "redis", "mode": {"Cached": {"refresh": "1s"}}, "wait": "1s"}}),
    );
    let shared = policy(json!("Shared"));
    for (policy, shared_by_the_fleet) in [(fleet, true), (shared, false)] {
        let mut one = Server::start(&url, &[]).await;
        let mut two = Server::start(&url, &[]).await;
        let (r, _) = two
            .tool(
                "reliable_http_call",
                json!({"url": target.url("/ok"), "policy": policy}),
            )
            .await;
        assert_eq!(r["status"], 200, "{r}");
        for _ in 0..2 {
            let (r, _) = one
                .tool(
                    "reliable_http_call",
                    json!({"url": target.url("/status?code=503"), "policy": policy}),
                )
                .await;
            assert_eq!(r["status"], 503, "{r}");
        }
        let sent = target.requests();
        let (r, _) = two
            .tool(
                "reliable_http_call",
                json!({"url": target.url("/ok"), "policy": policy}),
            )
            .await;
        if shared_by_the_fleet {
            assert!(
                r.get("status").is_none_or(Value::is_null),
                "refused, not sent: {r}"
            );
            assert_eq!(
                target.requests(),
                sent,
                "an open fleet breaker sends nothing"
            );
        } else {
            assert_eq!(r["status"], 200, "one breaker per server: {r}");
        }
        // Each server reached the store before it served (so no first call paid for the
        // connection's set-up against its wait bound).
        for s in [one, two] {
            let err = s.stop().await;
            assert!(
                err.contains(&format!(
                    "named breakers kept in {url} (connected, scripts loaded)"
                )),
                "{err}"
            );
        }
    }
}

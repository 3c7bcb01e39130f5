//! The server under a hostile client, one test (or a few) per class of abuse: credentials in a
//! URL or a header reflected by an echoing target, sessions and half-sent requests piling up on
//! the HTTP transport, foreign origins, too many simulations or HTTP calls at once (and one
//! session taking every slot), caller input echoed whole
//! into the model's context, a redirect out of http(s), and malformed JSON-RPC. Every target is on
//! loopback.

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, GetPromptRequestParams, ReadResourceRequestParams,
};
use rmcp::service::RunningService;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use reliable_mcp::breakers::Breakers;
use reliable_mcp::http_call::{HttpCallArgs, HttpCaller, call};
use reliable_mcp::ssrf::{AllowList, Guard, Limits};
use reliable_mcp::{ReliableServer, Settings};
use support::{
    BIN, INITIALIZE, INITIALIZED, in_session, list_tools, open_session, request, request_from,
    rss_kib, serve, start_http,
};

/// A mebibyte of caller input.
const HUGE: usize = 1 << 20;

fn caller() -> HttpCaller {
    HttpCaller::new(
        Guard::new(AllowList::parse(&["127.0.0.1"]).unwrap()),
        Limits::default(),
        Arc::new(Breakers::new(Limits::default())),
    )
    .unwrap()
}

fn get(url: &str) -> HttpCallArgs {
    HttpCallArgs {
        url: url.to_string(),
        method: None,
        headers: None,
        body: None,
        breaker: None,
        timeout: Some("2s".into()),
        attempts: Some(1),
        backoff: None,
        idempotent: None,
        fallback: None,
        max_body_bytes: None,
        policy: None,
    }
}

/// Everything a call returns, refused or not, as one text.
async fn everything(c: &HttpCaller, args: &HttpCallArgs) -> String {
    match call(c, args).await {
        Ok(r) => serde_json::to_string(&r).unwrap(),
        Err(e) => e,
    }
}

fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

// ---- credentials ----------------------------------------------------------------------------

#[tokio::test]
async fn credentials_in_the_url_are_refused_and_never_reflected() {
    let target = serve("127.0.0.1").await;
    let port = target.addr.port();
    for (url, secrets) in [
        (
            format!("http://alice:pw-SECRET-1234@127.0.0.1:{port}/mirror"),
            vec![
                "pw-SECRET-1234".to_string(),
                "alice:pw-SECRET-1234".into(),
                b64("alice:pw-SECRET-1234"),
            ],
        ),
        (
            format!("http://tok-0123456789abcdef@127.0.0.1:{port}/mirror"),
            vec![
                "tok-0123456789abcdef".to_string(),
                b64("tok-0123456789abcdef:"),
            ],
        ),
    ] {
        let out = everything(&caller(), &get(&url)).await;
        for s in &secrets {
            assert!(!out.contains(s.as_str()), "{s} reflected: {out}");
        }
        assert!(
            out.contains("pass credentials as a header"),
            "the refusal says what to do instead: {out}"
        );
    }
    assert_eq!(target.requests(), 0, "nothing was sent");
}

#[tokio::test]
async fn a_basic_header_is_scrubbed_in_every_form() {
    let target = serve("127.0.0.1").await;
    let basic = b64("alice:hdr-SECRET-5678");
    let args = HttpCallArgs {
        headers: Some(BTreeMap::from([(
            "Authorization".to_string(),
            format!("Basic {basic}"),
        )])),
        ..get(&target.url("/mirror"))
    };
    let r = call(&caller(), &args).await.expect("sent");
    assert_eq!(r.status, Some(200));
    let out = serde_json::to_string(&r).unwrap();
    for s in [basic.as_str(), "alice:hdr-SECRET-5678", "hdr-SECRET-5678"] {
        assert!(!out.contains(s), "{s} reflected: {out}");
    }
    assert_eq!(
        r.headers.get("x-request-id").map(String::as_str),
        Some("[redacted]"),
        "the reflected header is scrubbed"
    );
}

// ---- the HTTP transport ---------------------------------------------------------------------

#[tokio::test]
async fn foreign_origins_get_403() {
    let (_server, addr) = start_http(&[]).await;
    let port = addr.rsplit(':').next().unwrap();
    for (origin, want) in [
        (None, 200),
        (Some(format!("http://localhost:{port}")), 200),
        (Some(format!("http://127.0.0.1:{port}")), 200),
        (Some("http://evil.example".to_string()), 403),
        (Some("null".to_string()), 403),
        (Some("https://127.0.0.1.evil.example".to_string()), 403),
    ] {
        let extra: Vec<String> = origin.iter().map(|o| format!("Origin: {o}")).collect();
        let a = request(&addr, "POST", &extra, INITIALIZE).await;
        assert_eq!(a.status, want, "Origin {origin:?}");
    }
    let (_server, addr) = start_http(&["--allowed-origin", "https://app.example"]).await;
    let with = |o: &str| vec![format!("Origin: {o}")];
    assert_eq!(
        request(&addr, "POST", &with("https://app.example"), INITIALIZE)
            .await
            .status,
        200
    );
    assert_eq!(
        request(&addr, "POST", &with("http://localhost"), INITIALIZE)
            .await
            .status,
        403,
        "the list replaces the default"
    );
}

#[tokio::test]
async fn two_thousand_initializes_do_not_grow_memory() {
    let (server, addr) = start_http(&[]).await;
    let pid = server.id().expect("running");
    // One session first, so the runtime's and the allocator's start-up growth is not counted.
    let first = open_session("127.0.0.1", &addr).await;
    let before = rss_kib(pid);
    for _ in 0..2000 {
        let a = request(&addr, "POST", &[], INITIALIZE).await;
        assert_eq!(
            a.status, 200,
            "initialize answered {}: {}",
            a.status, a.body
        );
    }
    let after = rss_kib(pid);
    println!(
        "RSS before 2000 initializes without DELETE: {} KiB, after: {} KiB (+{} KiB); none refused",
        before,
        after,
        after.saturating_sub(before)
    );
    assert!(
        after.saturating_sub(before) <= 32 * 1024,
        "RSS grew from {before} KiB to {after} KiB"
    );
    // The session in use outlived the flood of unused ones.
    assert_eq!(list_tools("127.0.0.1", &addr, &first).await, 200);
}

#[tokio::test]
async fn over_the_cap_the_least_recently_active_session_ends() {
    let (_server, addr) = start_http(&["--max-sessions", "3", "--session-idle", "2"]).await;
    let local = "127.0.0.1";
    let mut ids = Vec::new();
    for _ in 0..3 {
        let id = open_session(local, &addr).await;
        assert_eq!(list_tools(local, &addr, &id).await, 200);
        ids.push(id);
    }
    // Session 0 and 2 are used again: session 1 is the least recently active.
    assert_eq!(list_tools(local, &addr, &ids[0]).await, 200);
    assert_eq!(list_tools(local, &addr, &ids[2]).await, 200);
    let fourth = open_session(local, &addr).await;
    assert_eq!(
        list_tools(local, &addr, &ids[1]).await,
        404,
        "the least recently active session ended"
    );
    for id in [&ids[0], &ids[2], &fourth] {
        assert_eq!(list_tools(local, &addr, id).await, 200);
    }
    // Its client starts a new session, as the specification says.
    let again = open_session(local, &addr).await;
    assert_eq!(list_tools(local, &addr, &again).await, 200);
    // Ending one with DELETE works as before.
    let end = request(&addr, "DELETE", &in_session(&again), "").await;
    assert!(end.status < 300, "DELETE answered {}", end.status);
    assert_eq!(list_tools(local, &addr, &again).await, 404);
    // Idle sessions still expire.
    tokio::time::sleep(Duration::from_millis(3500)).await;
    assert_eq!(list_tools(local, &addr, &fourth).await, 404, "expired");
}

/// Opens sessions from `src` until `stop` is set: bare ones (initialize and nothing else), or
/// `used` ones (the handshake completed, so they rank as sessions in use); returns how many, and
/// panics if one is refused.
async fn flood(
    src: &'static str,
    addr: String,
    used: bool,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> usize {
    let mut n = 0;
    while !stop.load(std::sync::atomic::Ordering::SeqCst) {
        let a = request_from(src, &addr, "POST", &[], INITIALIZE).await;
        assert_eq!(a.status, 200, "the flood was refused a session: {}", a.body);
        if used {
            let id = a.header("mcp-session-id").expect("a session id");
            // It may have been ended already by the flood's next sessions: 202 or 404.
            request_from(src, &addr, "POST", &in_session(&id), INITIALIZED).await;
        }
        n += 1;
    }
    n
}

/// A client keeps working while another peer opens sessions in a loop, and after it; and a new
/// client gets a session at once after the flood.
async fn client_during_and_after_a_flood(flooder: &'static str, used: bool) {
    let (_server, addr) = start_http(&["--max-sessions", "8"]).await;
    let me = "127.0.0.1";
    let mine = open_session(me, &addr).await;
    assert_eq!(list_tools(me, &addr, &mine).await, 200);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flooding = tokio::spawn(flood(flooder, addr.clone(), used, stop.clone()));
    // During the flood: the session in use answers every time, pausing between requests as an
    // agent waiting for its model would.
    tokio::time::sleep(Duration::from_millis(300)).await;
    for i in 0..10 {
        assert_eq!(
            list_tools(me, &addr, &mine).await,
            200,
            "request {i} during a flood from {flooder}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // A new client during the flood gets a session and can use it.
    let second = open_session(me, &addr).await;
    assert_eq!(list_tools(me, &addr, &second).await, 200);
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let sent = flooding.await.expect("the flood ran");
    assert!(
        sent > 8,
        "the flood opened {sent} sessions, not over the cap"
    );
    // After the flood: the old sessions and a new one work at once.
    assert_eq!(list_tools(me, &addr, &mine).await, 200);
    let third = open_session(me, &addr).await;
    assert_eq!(list_tools(me, &addr, &third).await, 200);
    println!("{flooder} opened {sent} sessions; the client from {me} was never refused");
}

/// Per-peer shares: the flood's sessions complete the handshake, so only the peer's share keeps
/// the client's session.
#[tokio::test]
async fn a_flood_from_another_peer_locks_no_client_out() {
    client_during_and_after_a_flood("127.0.0.2", true).await;
}

/// One peer: sessions never used past `initialize` go first.
#[tokio::test]
async fn a_flood_of_bare_sessions_from_the_same_address_locks_no_client_out() {
    client_during_and_after_a_flood("127.0.0.1", false).await;
}

#[tokio::test]
async fn half_sent_requests_are_dropped() {
    let (_server, addr) = start_http(&["--header-timeout", "1"]).await;
    let mut s = TcpStream::connect(&addr).await.unwrap();
    s.write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        .await
        .unwrap();
    let mut buf = [0u8; 256];
    let closed = tokio::time::timeout(Duration::from_secs(4), async {
        loop {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {} // a 408 may come first
            }
        }
    })
    .await;
    assert!(
        closed.is_ok(),
        "the half-sent request was still open after 4 s"
    );
}

/// A scenario heavy enough that simulations overlap: 3,000 jobs for a simulated minute.
const HEAVY: &str = r#"Scenario(
    name: "heavy",
    description: "Three thousand jobs against a server failing half its calls.",
    horizon: "60s",
    workload: JobSet(clients: 3000, start_spread: "5s"),
    downstreams: [(name: "api", model: Server(workers: 8, service: Constant("50ms"), error_rate: 0.5))],
    policies: [
        (name: "5 attempts", stack: Retry(
            policy: (max_attempts: 5, backoff: (shape: Exponential(base: "100ms"), cap: "2s", jitter: Full)),
            inner: Call(downstream: "api", timeout: "1s"),
        )),
    ],
    seeds: 4,
)"#;

async fn client(settings: Settings) -> RunningService<RoleClient, ()> {
    let (server_io, client_io) = tokio::io::duplex(1 << 16);
    let server = ReliableServer::new(settings).unwrap();
    tokio::spawn(async move {
        if let Ok(running) = server.serve(server_io).await {
            let _ = running.waiting().await;
        }
    });
    ().serve(client_io).await.expect("initialize")
}

fn args(v: Value) -> serde_json::Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => panic!("arguments are an object"),
    }
}

/// A tool call's text and whether it was an error.
async fn tool(c: &RunningService<RoleClient, ()>, name: &str, a: Value) -> (bool, String) {
    let r = c
        .call_tool(CallToolRequestParams::new(name.to_string()).with_arguments(args(a)))
        .await
        .unwrap_or_else(|e| panic!("{name}: protocol error {e}"));
    (r.is_error == Some(true), text_of(&r))
}

/// A tool result's text.
fn text_of(r: &CallToolResult) -> String {
    r.content
        .iter()
        .filter_map(|c| c.as_text())
        .map(|t| t.text.clone())
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test]
async fn simulations_over_the_cap_are_refused_with_a_message() {
    let c = Arc::new(client(Settings::default()).await);
    let runs: Vec<_> = (0..6)
        .map(|_| {
            let c = c.clone();
            tokio::spawn(async move { tool(&c, "simulate_storm", json!({"ron": HEAVY})).await })
        })
        .collect();
    let mut ran = 0;
    let mut busy = Vec::new();
    for r in runs {
        match r.await.unwrap() {
            (false, _) => ran += 1,
            (true, e) => busy.push(e),
        }
    }
    assert!(ran >= 1, "at least one ran: {busy:?}");
    assert!(
        !busy.is_empty(),
        "six simulations at once all ran: there is no cap"
    );
    for e in &busy {
        assert!(e.contains("--max-simulations"), "{e}");
    }
}

// ---- reliable_http_calls at once -----------------------------------------------------------

/// Settings for the calls-in-flight tests: loopback allowed, at most `max` calls at once, and a
/// minute for every time, so that a call to `/hold` ends only when the test lets it.
fn at_once(max: usize) -> Settings {
    let minute = Duration::from_secs(60);
    Settings {
        guard: Guard::new(AllowList::parse(&["127.0.0.1"]).unwrap()),
        limits: Limits {
            max_http_calls: max,
            read_timeout: minute,
            max_attempt_timeout: minute,
            max_call_time: minute,
            ..Limits::default()
        },
        ..Settings::default()
    }
}

/// The server and `n` sessions of it, as `n` agents over HTTP see it.
async fn sessions(
    settings: Settings,
    n: usize,
) -> (ReliableServer, Vec<RunningService<RoleClient, ()>>) {
    let server = ReliableServer::new(settings).unwrap();
    let mut clients = Vec::new();
    for _ in 0..n {
        let s = server.session();
        let (server_io, client_io) = tokio::io::duplex(1 << 16);
        tokio::spawn(async move {
            if let Ok(running) = s.serve(server_io).await {
                let _ = running.waiting().await;
            }
        });
        clients.push(().serve(client_io).await.expect("initialize"));
    }
    (server, clients)
}

/// A call to `url` (one attempt, up to a minute) of session `c`, running on its own: whether it
/// came back as a tool error, and its text; `None` if the client went away first. Aborting the
/// task drops the request, which sends `notifications/cancelled`.
fn start_call(
    c: &RunningService<RoleClient, ()>,
    url: &str,
) -> tokio::task::JoinHandle<Option<(bool, String)>> {
    let peer = c.peer().clone();
    let a = args(json!({"url": url, "attempts": 1, "timeout": "60s"}));
    tokio::spawn(async move {
        let r = peer
            .call_tool(CallToolRequestParams::new("reliable_http_call").with_arguments(a))
            .await
            .ok()?;
        Some((r.is_error == Some(true), text_of(&r)))
    })
}

/// A call of session `c` that must be refused at once: the refusal.
async fn refused(c: &RunningService<RoleClient, ()>, url: &str) -> String {
    let (error, text) = tokio::time::timeout(Duration::from_secs(10), start_call(c, url))
        .await
        .expect("refused at once, not queued")
        .unwrap()
        .expect("an answer");
    assert!(error, "not refused: {text}");
    text
}

/// Waits until `done` holds, looking every 5 ms, for at most 20 s.
async fn until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "not within 20 s: {what}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// How many of `calls` have come back.
fn finished<T>(calls: &[tokio::task::JoinHandle<T>]) -> usize {
    calls.iter().filter(|c| c.is_finished()).count()
}

/// The figure of a refusal's "Retry after N s".
fn retry_after(e: &str) -> u64 {
    e.split("Retry after ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no retry-after figure in {e}"))
}

/// Lets every held call answer, and checks each came back with the answer.
async fn answered(
    target: &support::TestServer,
    calls: Vec<tokio::task::JoinHandle<Option<(bool, String)>>>,
) {
    target.release(calls.len());
    for c in calls {
        let (error, text) = c.await.unwrap().expect("an answer");
        assert!(!error && text.contains("released"), "{text}");
    }
}

#[tokio::test]
async fn http_calls_over_the_cap_are_refused_at_once_saying_when_to_come_back() {
    let target = serve("127.0.0.1").await;
    let hold = target.url("/hold");
    // 8 at once, a share of 2: four sessions fill the server.
    let (server, s) = sessions(at_once(8), 5).await;
    let mut calls = Vec::new();
    for c in &s[..4] {
        calls.push(start_call(c, &hold));
        calls.push(start_call(c, &hold));
    }
    until("8 calls hold at the target", || target.holding() == 8).await;
    assert_eq!(server.http_calls_in_flight(), 8);
    // The ninth, from a session holding none: refused at once, with the bound, its flag and when
    // to come back (the soonest call's start plus --max-call-time), and nothing sent.
    let e = refused(&s[4], &hold).await;
    assert!(
        e.starts_with(
            "refused, nothing sent: all 8 reliable_http_calls this server runs at once are in \
             flight (--max-http-calls 8; this session holds 0 of them). Retry after "
        ),
        "{e}"
    );
    assert!(
        e.contains("reaches the per-call time ceiling (--max-call-time 60 s)"),
        "{e}"
    );
    let after = retry_after(&e);
    assert!((50..=60).contains(&after), "{after} s: {e}");
    assert_eq!(target.requests(), 8, "the refused call sent nothing");
    // A third call of a session holding its share: refused, naming the share.
    let e = refused(&s[0], &hold).await;
    assert!(
        e.contains("this session has 2 reliable_http_calls in flight, its share of the 8"),
        "{e}"
    );
    // One call ends: its slot comes free, and the session refused gets it.
    target.release(1);
    until("a call ended", || server.http_calls_in_flight() == 7).await;
    calls.push(start_call(&s[4], &hold));
    until("the ninth call holds at the target", || {
        target.holding() == 8
    })
    .await;
    assert_eq!(server.http_calls_in_flight(), 8);
    answered(&target, calls).await;
    assert_eq!(server.http_calls_in_flight(), 0);
}

/// The guard of the per-session share: one session firing as many calls as the server runs holds
/// only its share, and another session gets a slot at once.
#[tokio::test]
async fn one_session_taking_every_slot_it_can_locks_no_other_session_out() {
    let target = serve("127.0.0.1").await;
    let hold = target.url("/hold");
    let (server, s) = sessions(at_once(8), 2).await;
    let greedy: Vec<_> = (0..8).map(|_| start_call(&s[0], &hold)).collect();
    until(
        "each of the 8 calls holds at the target or came back",
        || target.holding() + finished(&greedy) == 8,
    )
    .await;
    let taken = target.holding();
    // The other session, holding nothing, gets a slot while the first holds all it could.
    let other = start_call(&s[1], &hold);
    until("the other session's call holds or came back", || {
        target.holding() == taken + 1 || other.is_finished()
    })
    .await;
    if other.is_finished() {
        let (_, e) = other.await.unwrap().unwrap();
        panic!("the other session was locked out while the first held {taken} of 8: {e}");
    }
    assert_eq!(
        taken, 2,
        "the first session holds {taken} of the 8 slots, over its share of 2"
    );
    let mut held = vec![other];
    for c in greedy {
        if c.is_finished() {
            let (error, e) = c.await.unwrap().unwrap();
            assert!(error, "{e}");
            assert!(
                e.contains("its share of the 8 this server runs at once"),
                "{e}"
            );
            assert!(e.contains("Retry after"), "{e}");
        } else {
            held.push(c);
        }
    }
    assert_eq!(server.http_calls_in_flight(), 3);
    answered(&target, held).await;
}

/// The reserve: sessions taking many calls leave the last quarter to sessions with none.
#[tokio::test]
async fn the_last_quarter_is_kept_for_sessions_with_no_call_in_flight() {
    let target = serve("127.0.0.1").await;
    let hold = target.url("/hold");
    // The default: 32 at once, a share of 8, 8 kept.
    let (server, s) = sessions(at_once(32), 9).await;
    let mut held = Vec::new();
    // Four sessions try for 9 each, one after the other: three get their share, the fourth 4
    // (24 slots then hold second or later calls, the most there may be).
    for (i, (c, gets)) in s[..4].iter().zip([8, 8, 8, 4]).enumerate() {
        let before = target.holding();
        let tries: Vec<_> = (0..9).map(|_| start_call(c, &hold)).collect();
        until("each call holds at the target or came back", || {
            target.holding() - before + finished(&tries) == 9
        })
        .await;
        assert_eq!(target.holding() - before, gets, "session {i}");
        for t in tries {
            if !t.is_finished() {
                held.push(t);
                continue;
            }
            let (error, e) = t.await.unwrap().unwrap();
            assert!(error, "{e}");
            let why = if gets == 8 {
                "its share of the 32"
            } else {
                "28 of the 32 reliable_http_calls this server runs at once are in flight, and the \
                 other 4 are kept for sessions with no call in flight"
            };
            assert!(e.contains(why), "session {i}: {e}");
        }
    }
    // Four sessions holding nothing get one each; then the server is full.
    for c in &s[4..8] {
        held.push(start_call(c, &hold));
    }
    until("32 calls hold at the target", || target.holding() == 32).await;
    assert_eq!(server.http_calls_in_flight(), 32);
    let e = refused(&s[8], &hold).await;
    assert!(e.contains("all 32 reliable_http_calls"), "{e}");
    answered(&target, held).await;
}

#[tokio::test]
async fn a_cancelled_call_or_an_ended_session_gives_its_slot_back_and_sends_nothing_more() {
    let target = serve("127.0.0.1").await;
    let hold = target.url("/hold");
    let (server, mut s) = sessions(at_once(8), 2).await;
    let first = start_call(&s[0], &hold);
    let second = start_call(&s[0], &hold);
    until("2 calls hold at the target", || target.holding() == 2).await;
    assert!(refused(&s[0], &hold).await.contains("its share of the 8"));
    // The client cancels one (dropping its request sends notifications/cancelled): the call
    // stops, its request is hung up on, and its slot is free for the session's next call.
    let t = std::time::Instant::now();
    first.abort();
    until("the cancelled call hung up and gave its slot back", || {
        target.hung_up() == 1 && server.http_calls_in_flight() == 1
    })
    .await;
    let cancelled = t.elapsed();
    let third = start_call(&s[0], &hold);
    until("the next call holds at the target", || {
        target.holding() == 2
    })
    .await;
    // A session that ends (its client goes away) gives its calls' slots back the same way.
    let gone = s.pop().unwrap();
    let _lost = [start_call(&gone, &hold), start_call(&gone, &hold)];
    until("4 calls hold at the target", || target.holding() == 4).await;
    let t = std::time::Instant::now();
    gone.cancel().await.unwrap();
    until(
        "the ended session's calls hung up and gave their slots back",
        || target.hung_up() == 3 && server.http_calls_in_flight() == 2,
    )
    .await;
    // The SDK first waits up to 5 s for the handlers of a closed session to answer, then
    // cancels them.
    println!(
        "slot back {cancelled:.1?} after a cancel, {:.1?} after the session ended",
        t.elapsed()
    );
    assert_eq!(target.requests(), 5, "nothing was sent again");
    answered(&target, vec![second, third]).await;
    assert_eq!(server.http_calls_in_flight(), 0);
}

// ---- outputs fit for a model's context ------------------------------------------------------

/// An error text that echoes caller input: short, and saying how long the input was.
fn assert_capped(what: &str, text: &str) {
    assert!(
        text.len() <= 2048,
        "{what}: a {} byte echo (starts {:?})",
        text.len(),
        &text[..200.min(text.len())]
    );
    // A value quoted inside a message says its length; a message cut whole says how much; an
    // input refused for its size is not echoed at all.
    assert!(
        text.contains(" bytes)")
            || text.contains("bytes cut from a")
            || text.contains("bytes is over the limit"),
        "{what}: the original length is not stated: {text}"
    );
}

#[tokio::test]
async fn echoes_of_caller_input_are_capped() {
    let c = client(Settings {
        guard: Guard::new(AllowList::parse(&["127.0.0.1"]).unwrap()),
        ..Settings::default()
    })
    .await;
    let huge = "N".repeat(HUGE);
    for (name, a) in [
        ("get_breaker_state", json!({"name": huge})),
        ("create_breaker", json!({"name": huge})),
        ("create_breaker", json!({"name": "ok", "preset": huge})),
        ("compute_backoff", json!({"seed": huge})),
        ("simulate_storm", json!({"scenario": huge})),
        (
            "reliable_http_call",
            json!({"url": "http://127.0.0.1:9/", "method": huge}),
        ),
        (
            "reliable_http_call",
            json!({"url": "http://127.0.0.1:9/", "headers": {huge.clone(): "v"}}),
        ),
        (
            "reliable_http_call",
            json!({"url": "http://127.0.0.1:9/", "breaker": huge}),
        ),
        (
            "reliable_http_call",
            json!({"url": format!("http://127.0.0.1:9/{huge}")}),
        ),
        (
            "reliable_http_call",
            json!({"url": "http://127.0.0.1:9/", "fallback": huge}),
        ),
        ("get_breaker_state", json!({"name": "x", huge.clone(): 1})),
    ] {
        let (is_error, text) = tool(&c, name, a).await;
        assert!(is_error, "{name}: not an error");
        assert_capped(name, &text);
    }
    let e = c
        .read_resource(ReadResourceRequestParams::new(format!(
            "reliable://breaker/{huge}"
        )))
        .await
        .expect_err("no such breaker");
    assert_capped("read_resource", &e.to_string());
    let e = c
        .read_resource(ReadResourceRequestParams::new(format!("other://{huge}")))
        .await
        .expect_err("no such resource");
    assert_capped("read_resource (other scheme)", &e.to_string());
    let e = c
        .get_prompt(
            GetPromptRequestParams::new("diagnose_breaker")
                .with_arguments(args(json!({"name": huge}))),
        )
        .await
        .expect_err("no such breaker");
    assert_capped("diagnose_breaker", &e.to_string());
}

#[tokio::test]
async fn the_prompt_quotes_the_breaker_name() {
    let c = client(Settings::default()).await;
    let (is_error, _) = tool(&c, "create_breaker", json!({"name": "db.primary"})).await;
    assert!(!is_error);
    let p = c
        .get_prompt(
            GetPromptRequestParams::new("diagnose_breaker")
                .with_arguments(args(json!({"name": "db.primary"}))),
        )
        .await
        .unwrap();
    let description = p.description.unwrap_or_default();
    assert!(
        description.contains("\"db.primary\""),
        "the description quotes the name: {description}"
    );
}

#[tokio::test]
async fn a_redirect_out_of_http_is_reported_as_a_refusal() {
    let target = serve("127.0.0.1").await;
    for to in [
        "file:///etc/passwd",
        "gopher://127.0.0.1:70/",
        "http://[::1",
    ] {
        let r = call(&caller(), &get(&target.url(&format!("/redirect?to={to}"))))
            .await
            .expect("the first hop is allowed");
        let e = r.error.clone().unwrap_or_default();
        assert!(!r.ok, "{to}");
        assert!(
            e.contains("redirect") && e.contains("not followed"),
            "{to}: {r:?}"
        );
    }
    let r = call(
        &caller(),
        &get(&target.url("/redirect?to=file:///etc/passwd")),
    )
    .await
    .unwrap();
    assert!(r.error.unwrap().contains("scheme \"file\""));
}

// ---- malformed JSON-RPC ---------------------------------------------------------------------

/// Over stdio: `tools/call`, `prompts/get` and `resources/read` without params, or with params
/// that are not an object, get -32602 (invalid params) carrying the request's id, from the
/// server (the SDK would answer -32601 to the first and -32600 without an id to the second).
#[tokio::test]
async fn malformed_calls_get_invalid_params_with_their_id() {
    let mut child = tokio::process::Command::new(BIN)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut exchange = async |v: Value| -> Option<Value> {
        stdin.write_all(format!("{v}\n").as_bytes()).await.unwrap();
        // A notification gets no answer.
        v.get("id")?;
        let line = tokio::time::timeout(Duration::from_secs(10), lines.next_line())
            .await
            .unwrap_or_else(|_| panic!("no answer to {v}"))
            .unwrap()
            .unwrap();
        Some(serde_json::from_str(&line).unwrap())
    };
    let init = exchange(serde_json::from_str(INITIALIZE).unwrap())
        .await
        .unwrap();
    assert!(init.get("result").is_some(), "{init}");
    exchange(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await;
    let code_and_id = |a: &Value| (a["error"]["code"].clone(), a["id"].clone());
    for case in [
        json!({"jsonrpc": "2.0", "id": 11, "method": "tools/call"}),
        json!({"jsonrpc": "2.0", "id": "p", "method": "prompts/get"}),
        json!({"jsonrpc": "2.0", "id": 14, "method": "resources/read", "params": null}),
    ] {
        let a = exchange(case.clone()).await.unwrap();
        assert_eq!(
            code_and_id(&a),
            (json!(-32602), case["id"].clone()),
            "{case} -> {a}"
        );
    }
    let long = json!({"jsonrpc": "2.0", "id": 16, "method": "N".repeat(HUGE)});
    let a = exchange(long).await.unwrap();
    assert_eq!(code_and_id(&a), (json!(-32601), json!(16)));
    assert!(a.to_string().len() < 1024, "the method name is capped");
    for case in [
        json!({"jsonrpc": "2.0", "id": 12, "method": "tools/call", "params": [1, 2]}),
        json!({"jsonrpc": "2.0", "id": 13, "method": "tools/call", "params": "x"}),
        json!({"jsonrpc": "2.0", "id": 15, "method": "resources/read", "params": 3}),
    ] {
        let a = exchange(case.clone()).await.unwrap();
        assert_eq!(
            code_and_id(&a),
            (json!(-32602), case["id"].clone()),
            "{case} -> {a}"
        );
    }
    // The session carries on.
    let a = exchange(json!({"jsonrpc": "2.0", "id": 20, "method": "tools/list"}))
        .await
        .unwrap();
    assert!(a["result"]["tools"].is_array(), "{a}");
}

//! End-to-end SSRF tests. They dial only loopback: the good server on 127.0.0.1 (allow-listed),
//! a refused server on 127.0.0.2 (which counts connections, so a test proves it was never
//! dialled), and `localhost`. Other ranges are covered by the classifier's unit tests, which
//! dial nothing.

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use reliable_mcp::breakers::{Breakers, CreateBreakerArgs, Preset};
use reliable_mcp::http_call::{HttpCallArgs, HttpCallResult, HttpCaller, call};
use reliable_mcp::ssrf::{AllowList, Guard, Limits};
use support::serve;

fn limits() -> Limits {
    Limits {
        connect_timeout: Duration::from_secs(2),
        read_timeout: Duration::from_millis(500),
        max_attempt_timeout: Duration::from_secs(5),
        max_call_time: Duration::from_secs(10),
        max_body_bytes: 256 * 1024,
        ..Limits::default()
    }
}

/// A caller that allow-lists exactly 127.0.0.1.
fn caller() -> HttpCaller {
    caller_with(&["127.0.0.1"])
}

fn caller_with(allow: &[&str]) -> HttpCaller {
    HttpCaller::new(
        Guard::new(AllowList::parse(allow).unwrap()),
        limits(),
        Arc::new(Breakers::new(limits())),
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

async fn ok(c: &HttpCaller, args: HttpCallArgs) -> HttpCallResult {
    call(c, &args)
        .await
        .unwrap_or_else(|e| panic!("{}: refused: {e}", args.url))
}

async fn refused(c: &HttpCaller, args: HttpCallArgs) -> String {
    match call(c, &args).await {
        Err(e) => e,
        Ok(r) => match r.error {
            Some(e) if e.contains("refused") => e,
            _ => panic!("{}: expected a refusal, got {r:?}", args.url),
        },
    }
}

#[tokio::test]
async fn the_allow_listed_server_answers() {
    let good = serve("127.0.0.1").await;
    let r = ok(&caller(), get(&good.url("/ok"))).await;
    assert_eq!(
        (r.status, r.ok, r.body.as_deref()),
        (Some(200), true, Some("hello"))
    );
    assert_eq!(r.served_by, "http");
    assert_eq!(good.requests(), 1);
}

#[tokio::test]
async fn other_loopback_addresses_are_refused_without_dialling() {
    let other = serve("127.0.0.2").await;
    let c = caller();
    for url in [
        other.url("/ok"),
        format!("http://[::ffff:127.0.0.2]:{}/ok", other.addr.port()),
        format!("http://2130706434:{}/ok", other.addr.port()), // 127.0.0.2 in decimal
    ] {
        let e = refused(&c, get(&url)).await;
        assert!(
            e.contains("127.0.0.2") && e.contains("loopback"),
            "{url}: {e}"
        );
    }
    assert_eq!(
        other.connections(),
        0,
        "a refused target must never be dialled"
    );
}

#[tokio::test]
async fn localhost_is_refused_without_the_allow_list() {
    let good = serve("127.0.0.1").await;
    let c = caller_with(&[]);
    let url = format!("http://localhost:{}/ok", good.addr.port());
    let e = refused(&c, get(&url)).await;
    assert!(
        e.contains("localhost resolves to") && e.contains("loopback"),
        "{e}"
    );
    // Even the literal is refused without the allow-list.
    refused(&c, get(&good.url("/ok"))).await;
    assert_eq!(good.connections(), 0);
}

#[tokio::test]
async fn redirects_to_refused_targets_are_not_followed() {
    let good = serve("127.0.0.1").await;
    let other = serve("127.0.0.2").await;
    let c = caller();
    let to_other = good.url(&format!(
        "/redirect?to=http://127.0.0.2:{}/ok",
        other.addr.port()
    ));
    let e = refused(&c, get(&to_other)).await;
    assert!(e.contains("127.0.0.2"), "{e}");
    let mapped = good.url(&format!(
        "/redirect?to=http://[::ffff:127.0.0.2]:{}/ok",
        other.addr.port()
    ));
    refused(&c, get(&mapped)).await;
    // reqwest never follows a redirect out of http(s): the 302 comes back, as a refusal.
    let file = ok(&c, get(&good.url("/redirect?to=file:///etc/passwd"))).await;
    assert_eq!(
        (file.status, file.body.as_deref(), file.ok),
        (Some(302), Some(""), false)
    );
    assert_eq!(other.connections(), 0, "never dialled through a redirect");

    // localhost: refused whole unless every address it has is allow-listed (127.0.0.1 is; ::1,
    // if /etc/hosts gives it, is not).
    let to_localhost = good.url(&format!(
        "/redirect?to=http://localhost:{}/ok",
        good.addr.port()
    ));
    let all_allowed = tokio::net::lookup_host(("localhost", 0))
        .await
        .unwrap()
        .all(|a| a.ip().to_string() == "127.0.0.1");
    if all_allowed {
        assert_eq!(ok(&c, get(&to_localhost)).await.status, Some(200));
    } else {
        let e = refused(&c, get(&to_localhost)).await;
        assert!(e.contains("localhost resolves to"), "{e}");
    }
}

#[tokio::test]
async fn at_most_three_redirects() {
    let good = serve("127.0.0.1").await;
    let c = caller();
    let r = ok(&c, get(&good.url("/hops?n=3"))).await;
    assert_eq!((r.status, r.body.as_deref()), (Some(200), Some("arrived")));
    assert!(r.url.ends_with("/hops?n=0"), "{}", r.url);
    let e = refused(&c, get(&good.url("/hops?n=4"))).await;
    assert!(e.contains("more than 3 redirects"), "{e}");
}

#[tokio::test]
async fn an_oversized_body_is_refused_by_its_content_length() {
    let good = serve("127.0.0.1").await;
    let t = Instant::now();
    let r = ok(
        &caller(),
        HttpCallArgs {
            max_body_bytes: Some(64 * 1024),
            ..get(&good.url("/big"))
        },
    )
    .await;
    let e = r.error.unwrap();
    assert!(
        e.contains("Content-Length 2097152") && e.contains("not read"),
        "{e}"
    );
    assert!(!r.ok && r.body.is_none());
    assert!(
        t.elapsed() < Duration::from_secs(4),
        "the body was not waited for"
    );
}

#[tokio::test]
async fn a_never_ending_body_is_cut_off_at_the_cap() {
    let good = serve("127.0.0.1").await;
    let r = ok(
        &caller(),
        HttpCallArgs {
            max_body_bytes: Some(100_000),
            ..get(&good.url("/endless"))
        },
    )
    .await;
    let e = r.error.unwrap();
    assert!(
        e.contains("stopped reading at the cap of 100000 bytes"),
        "{e}"
    );
    assert_eq!(r.attempts.len(), 1, "an oversized body is not retried");
}

#[tokio::test]
async fn a_server_that_never_answers_times_out() {
    let good = serve("127.0.0.1").await;
    let t = Instant::now();
    let args = HttpCallArgs {
        timeout: Some("5s".into()),
        ..get(&good.url("/hang"))
    };
    let r = ok(&caller(), args).await;
    let e = r.error.unwrap();
    // The read timeout (500 ms of silence) ended it, not the 5 s attempt timeout.
    assert!(
        e.contains("timed out") && !e.contains("longer than its timeout"),
        "{e}"
    );
    assert!(
        t.elapsed() < Duration::from_millis(4500),
        "{:?}",
        t.elapsed()
    );
}

#[tokio::test]
async fn a_trickling_body_is_stopped_by_the_attempt_timeout() {
    let good = serve("127.0.0.1").await;
    let t = Instant::now();
    let r = ok(
        &caller(),
        HttpCallArgs {
            timeout: Some("1s".into()),
            ..get(&good.url("/trickle"))
        },
    )
    .await;
    assert!(
        r.error.as_deref().unwrap_or("").contains("timed out"),
        "{r:?}"
    );
    let took = t.elapsed();
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(4),
        "{took:?}"
    );
}

#[tokio::test]
async fn credentials_are_never_echoed() {
    let good = serve("127.0.0.1").await;
    let headers = BTreeMap::from([
        (
            "Authorization".to_string(),
            "Bearer sk-test-0123456789".to_string(),
        ),
        ("Cookie".to_string(), "session=cookie-secret-42".to_string()),
        ("X-Trace".to_string(), "visible-value".to_string()),
    ]);
    let url = good.url("/echo");
    let r = ok(
        &caller(),
        HttpCallArgs {
            headers: Some(headers),
            ..get(&url)
        },
    )
    .await;
    let body = r.body.clone().unwrap();
    assert!(
        body.to_ascii_lowercase()
            .contains("authorization: [redacted]"),
        "{body}"
    );
    assert!(
        body.contains("visible-value"),
        "other headers are echoed as sent"
    );
    let all = serde_json::to_string(&r).unwrap();
    for secret in ["sk-test-0123456789", "cookie-secret-42"] {
        assert!(!all.contains(secret), "{secret} leaked: {all}");
    }
    let r = ok(&caller(), get(&good.url("/ok"))).await;
    assert_eq!(
        r.headers.get("set-cookie").map(String::as_str),
        Some("[redacted]")
    );
}

#[tokio::test]
async fn failures_are_retried_and_trip_the_breaker() {
    let good = serve("127.0.0.1").await;
    let c = caller();
    c.breakers
        .create(&CreateBreakerArgs {
            preset: Some(Preset::LayeredExercise), // opens after 2 failures in a row, for 20 s
            attempts: Some(4),
            timeout: Some("2s".into()),
            backoff: Some(reliable_mcp::backoff::BackoffSpec {
                base: Some("10ms".into()),
                ..Default::default()
            }),
            ..CreateBreakerArgs::named("api")
        })
        .unwrap();
    let args = HttpCallArgs {
        breaker: Some("api".into()),
        attempts: None,
        timeout: None,
        ..get(&good.url("/status?code=503"))
    };
    let r = ok(&c, args.clone()).await;
    assert_eq!(
        r.attempts.len(),
        2,
        "the third attempt was refused by the open breaker: {r:?}"
    );
    assert_eq!(good.requests(), 2);
    assert!(r.error.as_deref().unwrap().contains("is open"), "{r:?}");
    assert_eq!(r.breaker.as_ref().unwrap().state, "open");
    assert_eq!(r.served_by, "retry(breaker(api))");

    // Open: nothing is sent, the fallback is served with the time until a probe.
    let r = ok(
        &c,
        HttpCallArgs {
            fallback: Some("cached answer".into()),
            ..args
        },
    )
    .await;
    assert_eq!(
        (r.ok, r.served_by.as_str(), r.body.as_deref()),
        (true, "fallback", Some("cached answer"))
    );
    let wait = r.breaker.unwrap().retry_after_ms.unwrap();
    assert!(wait > 15_000.0 && wait <= 20_000.0, "{wait}");
    assert_eq!(good.requests(), 2, "no request while open");
    let s = c.breakers.snapshot("api").unwrap();
    assert_eq!((s.state.as_str(), s.transitions.len()), ("open", 1));
}

#[tokio::test]
async fn post_is_not_retried_after_it_was_sent_unless_idempotent() {
    let good = serve("127.0.0.1").await;
    let c = caller();
    let post = HttpCallArgs {
        method: Some("POST".into()),
        body: Some("{}".into()),
        attempts: Some(3),
        backoff: Some(reliable_mcp::backoff::BackoffSpec {
            base: Some("1ms".into()),
            ..Default::default()
        }),
        ..get(&good.url("/status?code=500"))
    };
    assert_eq!(ok(&c, post.clone()).await.attempts.len(), 1);
    assert_eq!(
        ok(
            &c,
            HttpCallArgs {
                idempotent: Some(true),
                ..post
            }
        )
        .await
        .attempts
        .len(),
        3
    );
}

#[tokio::test]
async fn bad_arguments_are_refused_before_sending() {
    let good = serve("127.0.0.1").await;
    let c = caller();
    let cases = [
        (
            HttpCallArgs {
                method: Some("TRACE".into()),
                ..get(&good.url("/ok"))
            },
            "method",
        ),
        (
            HttpCallArgs {
                attempts: Some(9),
                ..get(&good.url("/ok"))
            },
            "attempts",
        ),
        (
            HttpCallArgs {
                timeout: Some("1h".into()),
                ..get(&good.url("/ok"))
            },
            "timeout",
        ),
        (
            HttpCallArgs {
                max_body_bytes: Some(10 << 20),
                ..get(&good.url("/ok"))
            },
            "max_body_bytes",
        ),
        (
            HttpCallArgs {
                breaker: Some("nope".into()),
                ..get(&good.url("/ok"))
            },
            "breaker",
        ),
        (
            HttpCallArgs {
                headers: Some(BTreeMap::from([("Host".into(), "evil".into())])),
                ..get(&good.url("/ok"))
            },
            "headers",
        ),
        (get("not a url"), "url"),
        (get("ftp://127.0.0.1/"), "scheme"),
    ];
    for (args, field) in cases {
        let e = call(&c, &args).await.unwrap_err();
        assert!(e.contains(field), "{field}: {e}");
    }
    assert_eq!(good.connections(), 0);
}

//! A scripted HTTP/1 server on 127.0.0.1 for the tests that put a real client in front of the
//! library (shared by `tower_http` and `reqwest_middleware`).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Empty;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;

/// What the server answers to one request.
pub struct Reply {
    pub status: u16,
    pub headers: &'static [(&'static str, &'static str)],
    pub delay_ms: u64,
}

/// Serves on 127.0.0.1: the n-th request (from 0) gets `reply(n)`. Returns the address and the
/// count of requests that reached it. Bounded: the listener ends with the test's runtime.
pub async fn server(
    reply: impl Fn(u32) -> Reply + Send + Sync + 'static,
) -> (SocketAddr, Arc<AtomicU32>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    assert!(addr.ip().is_loopback());
    let seen = Arc::new(AtomicU32::new(0));
    let reply = Arc::new(reply);
    let count = seen.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let (reply, count) = (reply.clone(), count.clone());
            tokio::spawn(async move {
                let svc = service_fn(move |_req: http::Request<hyper::body::Incoming>| {
                    let r = reply(count.fetch_add(1, Ordering::SeqCst));
                    async move {
                        tokio::time::sleep(Duration::from_millis(r.delay_ms)).await;
                        let mut res = http::Response::builder().status(r.status);
                        for (k, v) in r.headers {
                            res = res.header(*k, *v);
                        }
                        Ok::<_, Infallible>(res.body(Empty::<Bytes>::new()).unwrap())
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    (addr, seen)
}

//! A scripted HTTP/1 server on 127.0.0.1 for the tests that put a real client in front of the
//! library (shared by `tower_http`, `reqwest_middleware` and `hedging`).

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
#[allow(dead_code)]
pub async fn server(
    reply: impl Fn(u32) -> Reply + Send + Sync + 'static,
) -> (SocketAddr, Arc<AtomicU32>) {
    let (addr, seen, _) = server_seeing_drops(reply).await;
    (addr, seen)
}

/// Counts, on drop, a request whose handler was dropped before it answered: the client went away
/// (its connection closed) while the server was still working on it.
struct Unanswered(Arc<AtomicU32>, bool);

impl Drop for Unanswered {
    fn drop(&mut self) {
        if !self.1 {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// [`server`], also counting the requests whose client went away before the answer (the third
/// value).
#[allow(dead_code)]
pub async fn server_seeing_drops(
    reply: impl Fn(u32) -> Reply + Send + Sync + 'static,
) -> (SocketAddr, Arc<AtomicU32>, Arc<AtomicU32>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    assert!(addr.ip().is_loopback());
    let seen = Arc::new(AtomicU32::new(0));
    let dropped = Arc::new(AtomicU32::new(0));
    let reply = Arc::new(reply);
    let (count, gone) = (seen.clone(), dropped.clone());
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let (reply, count, gone) = (reply.clone(), count.clone(), gone.clone());
            tokio::spawn(async move {
                let svc = service_fn(move |_req: hyper::Request<hyper::body::Incoming>| {
                    let r = reply(count.fetch_add(1, Ordering::SeqCst));
                    let unanswered = Unanswered(gone.clone(), false);
                    async move {
                        // The whole guard moves in (not just its flag): it drops with the handler.
                        let mut unanswered = unanswered;
                        tokio::time::sleep(Duration::from_millis(r.delay_ms)).await;
                        unanswered.1 = true;
                        let mut res = hyper::Response::builder().status(r.status);
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
    (addr, seen, dropped)
}

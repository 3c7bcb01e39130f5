use bytes::Bytes;
use http_body_util::Empty;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use reliable::tower::{BoxError, HttpPolicy, ReliableConfig, ReliableLayer};
use tower::{ServiceBuilder, ServiceExt};

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    // The seed's breaker and retries, and a retry budget: 429/503/5xx retried with backoff and
    // Retry-After, other 4xx not; only idempotent methods (GET, PUT, ...) are sent again.
    let config = ReliableConfig::reliablekit_with_budget();
    let svc = ServiceBuilder::new()
        .layer(ReliableLayer::new(config, HttpPolicy::new())?)
        .service(client);
    let request = http::Request::get("http://127.0.0.1:8080/").body(Empty::<Bytes>::new())?;
    let response = svc.oneshot(request).await?;
    println!("{}", response.status());
    Ok(())
}

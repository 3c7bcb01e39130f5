//! [`ChaosMiddleware`]: the four chaos strategies as a `reqwest-middleware` middleware (feature
//! `reqwest`).
//!
//! Put it after [`ReliableMiddleware`](crate::middleware::ReliableMiddleware) (nearer the
//! network), so each attempt meets it: an injected status is a real `reqwest::Response` with its
//! headers, which the reliable middleware reads as it reads a server's; a reset is an
//! `Error::Middleware` holding an `io::Error` of kind `ConnectionReset` (a transport failure,
//! transient); a hang never answers, so only a timeout ends it.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use reliable::Reliable;
//! use reliable::chaos::ChaosSwitch;
//! use reliable::chaos::reqwest::ChaosMiddleware;
//! use reliable::middleware::ReliableMiddleware;
//! use reliable_core::chaos::{ChaosConfig, FaultConfig, Injected};
//!
//! let chaos = ChaosSwitch::new("api", ChaosConfig {
//!     fault: Some(FaultConfig { rate: 0.2, enabled: true, seed: 7, answer: Injected::Reset }),
//!     ..ChaosConfig::OFF
//! })?;
//! let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
//!     .with(ReliableMiddleware::new(Reliable::builder("api").build()?))
//!     .with(ChaosMiddleware::new(chaos))
//!     .build();
//! let _ = client.get("http://127.0.0.1:8080/").send().await;
//! # Ok(())
//! # }
//! ```

use super::{ChaosSwitch, injected_headers, reset_error};
use crate::sleep::Sleep;
use http::Extensions;
use reliable_core::answer::Answer;
use reliable_core::chaos::Injected;
use reqwest::{Request, Response};
use reqwest_middleware::{Middleware, Next};
use std::sync::Arc;

/// Injects what its [`ChaosSwitch`] decides into each request through it.
#[derive(Clone, Debug)]
pub struct ChaosMiddleware {
    switch: ChaosSwitch,
    sleep: Arc<dyn Sleep>,
}

impl ChaosMiddleware {
    /// A middleware over `switch`; injected latency waits on tokio's timer.
    pub fn new(switch: ChaosSwitch) -> Self {
        ChaosMiddleware {
            switch,
            sleep: Arc::new(crate::sleep::TokioSleep),
        }
    }

    /// Injected latency waits on `sleep` instead.
    pub fn with_sleep(mut self, sleep: impl Sleep) -> Self {
        self.sleep = Arc::new(sleep);
        self
    }

    /// The switch.
    pub fn switch(&self) -> &ChaosSwitch {
        &self.switch
    }
}

/// The response or error an injected answer stands for.
fn injected(answer: Answer) -> reqwest_middleware::Result<Response> {
    match answer {
        Answer::Status { status, signals } => {
            let mut res = http::Response::new(Vec::<u8>::new());
            *res.status_mut() = http::StatusCode::from_u16(status)
                .map_err(reqwest_middleware::Error::middleware)?;
            for (name, value) in injected_headers(signals) {
                let value = http::HeaderValue::try_from(value)
                    .map_err(reqwest_middleware::Error::middleware)?;
                res.headers_mut().insert(name, value);
            }
            Ok(Response::from(res))
        }
        _ => Err(reqwest_middleware::Error::middleware(reset_error())),
    }
}

#[async_trait::async_trait]
impl Middleware for ChaosMiddleware {
    async fn handle(
        &self,
        req: Request,
        extensions: &mut Extensions,
        next: Next<'_>,
    ) -> reqwest_middleware::Result<Response> {
        let Some(d) = self.switch.decide() else {
            return next.run(req, extensions).await;
        };
        if let Some(delay) = d.latency {
            self.sleep.sleep(delay.into()).await;
        }
        match d.answer {
            Some((_, Injected::Hang)) => std::future::pending().await,
            Some((_, i)) => injected(i.answer()),
            None => next.run(req, extensions).await,
        }
    }
}

//! [`ReliableMiddleware`]: a [`Reliable`] as a `reqwest-middleware` middleware (feature `reqwest`).
//!
//! Every request through the client goes through the instance's breaker, retry policy, budget and
//! throttle. Answers are read as [`http`](crate::http) reads them: a 429, 503 or 529 is an overload
//! refusal whose `Retry-After` / `retry-after-ms` is honoured (up to the policy's
//! `max_server_delay`), `x-should-retry` overrides the status, other 5xx are transient, other 4xx
//! fatal; a reqwest timeout is a timeout, a refused or reset connection transient. Unlike
//! `reqwest-retry`, an open breaker answers at once without calling the server, and server delays
//! are honoured.
//!
//! | the call ended | the middleware returns |
//! |---|---|
//! | a success | `Ok(response)` |
//! | retries exhausted (or not allowed) on an HTTP status | `Ok(last response)`, as the server sent it |
//! | a transport error | `Err(Error::Reqwest(..))`, the last one |
//! | the breaker open, a local refusal, a timeout | `Err(Error::Middleware(..))` holding a [`Refused`] |
//!
//! A request whose body cannot be cloned (a stream) is sent once: there is nothing to send again.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use reliable::Reliable;
//! use reliable::middleware::ReliableMiddleware;
//! use std::time::Duration;
//!
//! let rel = Reliable::builder("llm").timeout(Duration::from_secs(8)).attempts(3).build()?;
//! let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
//!     .with(ReliableMiddleware::new(rel))
//!     .build();
//! let answer = client.get("http://127.0.0.1:8080/v1/models").send().await?;
//! # let _ = answer;
//! # Ok(())
//! # }
//! ```

use crate::Reliable;
use crate::classify::ByType;
use crate::error::{Error, ShedReason};
use crate::http::HttpError;
use http::Extensions;
use reliable_core::outcome::ErrorClass;
use reqwest::{Request, Response};
use reqwest_middleware::{Middleware, Next};
use std::time::{Duration, SystemTime};

/// Sends each request through a [`Reliable`]. Clones share the instance (its breaker, budget).
#[derive(Clone, Debug)]
pub struct ReliableMiddleware {
    reliable: Reliable,
}

impl ReliableMiddleware {
    /// A middleware around `reliable`.
    pub fn new(reliable: Reliable) -> Self {
        ReliableMiddleware { reliable }
    }

    /// The instance, for snapshots.
    pub fn reliable(&self) -> &Reliable {
        &self.reliable
    }
}

/// Why the middleware answered without a response from the server.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Refused {
    /// The breaker is open; `retry_after` is `None` when it was forced open.
    Open {
        /// Time until it lets a probe through.
        retry_after: Option<Duration>,
    },
    /// Refused locally (probe slots full, slow start, adaptive throttling, retry budget).
    Rejected(ShedReason),
    /// The last attempt ran out of time (its own timeout, or the call's deadline).
    Timeout {
        /// Attempts sent.
        attempts: u32,
    },
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::Open {
                retry_after: Some(after),
            } => write!(f, "circuit breaker open; retry after {after:?}"),
            Refused::Open { retry_after: None } => f.write_str("circuit breaker forced open"),
            Refused::Rejected(why) => write!(f, "refused locally: {why}"),
            Refused::Timeout { attempts } => write!(f, "timed out after {attempts} attempt(s)"),
        }
    }
}

impl std::error::Error for Refused {}

/// How one attempt failed.
#[derive(Debug)]
enum Miss {
    /// The server answered with a status the policy reads as a failure.
    Status(Response, HttpError),
    /// No answer: the client or a later middleware failed.
    Transport(reqwest_middleware::Error),
    /// A retry of a request that cannot be cloned.
    NotRepeatable,
}

impl Miss {
    /// Its class: a status by [`ByType`]'s rule for an [`HttpError`], a client's error by its
    /// rule for a `reqwest::Error`.
    fn class(&self) -> ErrorClass {
        match self {
            Miss::Status(_, http) => ByType.error_of(http),
            Miss::Transport(reqwest_middleware::Error::Reqwest(e)) => ByType.error_of(e),
            Miss::Transport(reqwest_middleware::Error::Middleware(_)) => ErrorClass::Transient,
            Miss::NotRepeatable => ErrorClass::Fatal,
        }
    }
}

#[async_trait::async_trait]
impl Middleware for ReliableMiddleware {
    async fn handle(
        &self,
        req: Request,
        extensions: &mut Extensions,
        next: Next<'_>,
    ) -> reqwest_middleware::Result<Response> {
        let mut original = Some(req);
        let shared: &Extensions = extensions;
        let result = self
            .reliable
            .call_with(Miss::class, || {
                // Each attempt sends a copy; a body that cannot be copied goes once.
                let attempt = match original.as_ref().and_then(Request::try_clone) {
                    Some(copy) => Some(copy),
                    None => original.take(),
                };
                let next = next.clone();
                let mut extensions = shared.clone();
                async move {
                    let Some(req) = attempt else {
                        return Err(Miss::NotRepeatable);
                    };
                    match next.run(req, &mut extensions).await {
                        Ok(resp) => match failure(&resp) {
                            Some(http) => Err(Miss::Status(resp, http)),
                            None => Ok(resp),
                        },
                        Err(e) => Err(Miss::Transport(e)),
                    }
                }
            })
            .await;
        answer(result)
    }
}

/// The response's failure, if the policy reads its status as one.
fn failure(resp: &Response) -> Option<HttpError> {
    let status = resp.status().as_u16();
    let http = HttpError::new(status, resp.headers(), SystemTime::now());
    crate::http::classify_status(status, &http.signals).map(|_| http)
}

/// What the caller gets: the server's last answer when there is one, else why there is none.
fn answer(result: Result<Response, Error<Miss>>) -> reqwest_middleware::Result<Response> {
    let last = match result {
        Ok(resp) => return Ok(resp),
        Err(Error::GaveUp { last, .. }) => last,
        Err(Error::Rejected {
            last: Some(last), ..
        }) => last,
        Err(Error::Rejected { why, last: None }) => return Err(refused(Refused::Rejected(why))),
        Err(Error::Open { retry_after }) => return Err(refused(Refused::Open { retry_after })),
        Err(Error::Timeout { attempts }) => return Err(refused(Refused::Timeout { attempts })),
    };
    match last {
        Miss::Status(resp, _) => Ok(resp),
        Miss::Transport(e) => Err(e),
        Miss::NotRepeatable => Err(reqwest_middleware::Error::middleware(NotRepeatable)),
    }
}

fn refused(why: Refused) -> reqwest_middleware::Error {
    reqwest_middleware::Error::middleware(why)
}

/// A retry was due but the request's body cannot be sent twice.
#[derive(Clone, Copy, Debug)]
struct NotRepeatable;

impl std::fmt::Display for NotRepeatable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a retry was due, but the request's body is a stream that cannot be sent twice")
    }
}

impl std::error::Error for NotRepeatable {}

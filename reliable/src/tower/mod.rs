//! tower layers: reliable-core's breaker, retry policy with budget, adaptive throttle and
//! fallback as small composable [`tower_layer::Layer`]s.
//!
//! - [`BreakerLayer`]: a circuit breaker. An open breaker reports *ready* and fails in `call` with
//!   [`Open`] (carrying `retry_after`): an error from `poll_ready` would kill the service, and
//!   `Pending` would stall every caller. The permit is taken in `call`; a response future dropped
//!   before it completes (a timeout above it, `select!`, an aborted task) records
//!   `Outcome::Ignored`, so a cancelled half-open probe frees its slot at once.
//! - [`RetryLayer`]: one service that makes one decision per failed attempt from the core's
//!   [`RetryPolicy`](reliable_core::retry::RetryPolicy): attempts, per-attempt timeout, overall
//!   deadline, backoff with jitter, the server's `Retry-After`, and a retry budget shared by every
//!   clone. [`Policy::clone_request`] returning `None` means "not retryable": the first answer is
//!   final.
//! - [`ThrottleLayer`]: client-side adaptive throttling (Google SRE): rejects locally, in `call`,
//!   with [`Throttled`], as the downstream accepts less of what it is sent.
//! - [`FallbackLayer`]: tries a second service when the first fails, and stamps the answer with the
//!   path that served it ([`ServedBy`]).
//! - [`HedgeLayer`]: hedged requests for requests the policy can copy (idempotent ones): the
//!   first success wins, the other copies are dropped; hedges may draw from a [`SharedLedger`].
//! - [`ConcurrencyLimitLayer`] (a bulkhead, AIMD or gradient) and [`RateLimitLayer`] (GCRA):
//!   local refusals ([`OverLimit`], [`OverRate`]) in `call`, read as `Refused` by the core's
//!   answer table.
//! - [`SharedLedger`]: one budget of extra attempts for [`RetryLayer::ledger`],
//!   [`HedgeLayer::ledger`] and [`BreakerLayer::ledger`] (half-open probes; a denied one fails
//!   with [`ProbeDenied`]).
//! - [`ReliableLayer`]: the whole stack in one layer, decided by the core's call engine as
//!   [`Reliable::call`](crate::Reliable::call) decides it: from one [`ReliableConfig`] (retry →
//!   throttle → breaker) and optionally hedges, limits and a ledger, or from any
//!   [`Builder`](crate::Builder).
//!
//! Names follow tower's: each `…Layer` wraps a service in a `…Service` (e.g. [`BreakerLayer`] →
//! [`BreakerService`]) whose response future is a `…Future` ([`BreakerFuture`]); answers are read
//! by the crate's one [`Classify`](crate::Classify), over `BoxError` and the service's response
//! ([`AnyOk`], [`HttpPolicy`], or yours: its `error` is [`error_class`] unless you know better).
//!
//! The layers share the crate's machinery: the core's policies, its injected
//! [`Clock`](crate::clock::Clock) and [`Sleep`](crate::sleep::Sleep) (tokio's by default, so tests
//! run in paused virtual time; `with_time` on each layer), its seeded randomness, and its HTTP
//! signals ([`crate::http`]). Errors are tower's `BoxError`; the layers' own errors are concrete
//! types to downcast to.
//!
//! Who decides what: [`ReliableLayer`], [`RetryLayer`] and [`HedgeLayer`] drive the core's call
//! engine ([`reliable_core::engine`]), the same one [`Reliable::call`](crate::Reliable::call)
//! drives, through the same driver: the whole stack, or an engine holding their one layer. The
//! other single layers ([`BreakerLayer`], [`ThrottleLayer`], [`ConcurrencyLimitLayer`],
//! [`RateLimitLayer`]) are adapters of one per-layer machine each (a breaker, a throttle, a
//! limiter), asked once per request. None has a retry loop or a hedge race of its own.
//!
//! ```
//! use reliable::tower::{BreakerLayer, RetryLayer, AnyOk};
//! use reliable_core::breaker::BreakerConfig;
//! use reliable_core::retry::RetryConfig;
//! use tower::{ServiceBuilder, service_fn};
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let svc = ServiceBuilder::new()
//!     .layer(RetryLayer::new(RetryConfig::reliablekit(), CloneAll)?)
//!     .layer(BreakerLayer::new(BreakerConfig::reliablekit(), AnyOk)?)
//!     .service(service_fn(|x: u32| async move { Ok::<_, std::io::Error>(x * 2) }));
//! # use tower::ServiceExt;
//! assert_eq!(svc.oneshot(21).await.unwrap(), 42);
//! # Ok(()) }
//! # #[derive(Clone)] struct CloneAll;
//! # impl reliable::Classify<reliable::tower::BoxError, u32> for CloneAll { fn error(&self, e: &reliable::tower::BoxError) -> reliable_core::outcome::ErrorClass { reliable::tower::error_class(e) } }
//! # impl reliable::tower::Policy<u32, u32> for CloneAll { fn clone_request(&self, r: &u32) -> Option<u32> { Some(*r) } }
//! ```

mod breaker;
mod classify;
mod engine;
mod error;
mod fallback;
mod hedge;
mod ledger;
mod limit;
mod reliable;
mod retry;
mod sharing;
mod throttle;
mod time;

pub use breaker::{BreakerFuture, BreakerLayer, BreakerService};
pub use classify::{AnyOk, Deadline, HttpPolicy, Policy, error_class};
pub use error::{BoxError, GaveUp, Open, OverLimit, OverRate, ProbeDenied, Throttled, TimedOut};
pub use fallback::{FallbackFuture, FallbackLayer, FallbackService, ServedBy, Stamp};
pub use hedge::{HedgeFuture, HedgeLayer, HedgeService};
pub use ledger::SharedLedger;
pub use limit::{
    ConcurrencyLimitFuture, ConcurrencyLimitLayer, ConcurrencyLimitService, RateLimitFuture,
    RateLimitLayer, RateLimitService,
};
pub use reliable::{ReliableConfig, ReliableFuture, ReliableLayer, ReliableService};
pub use retry::{RetryFuture, RetryLayer, RetryService};
pub use throttle::{ThrottleFuture, ThrottleLayer, ThrottleService};

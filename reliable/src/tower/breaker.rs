//! [`BreakerLayer`]: the core's circuit breaker around a service, following tower's contract.
//!
//! - `poll_ready` only asks the inner service: an open breaker is *ready*, and `call` fails at once
//!   with [`Open`] carrying `retry_after` (an error from `poll_ready` would kill the service, and
//!   `Pending` would stall every caller until the breaker closes).
//! - The permit is taken in `call`, never in `poll_ready` (a ready service may never be called).
//! - The outcome is recorded when the response future completes: success, failure (by the
//!   [`Classify`](crate::Classify) given), or ignored (a fatal error, or a local rejection from a layer below). A
//!   response future dropped before it completes records `Outcome::Ignored`, so a cancelled
//!   half-open probe frees its slot at once instead of after `probe_timeout`.
//! - With a [`SharedLedger`] ([`BreakerLayer::ledger`]), a half-open probe is an extra attempt: it
//!   draws from the ledger as the builder's breaker does, and a probe the ledger denies is refused
//!   locally with [`ProbeDenied`] (the breaker stays half-open, its probe slot freed at once). The
//!   draw is settled when the probe ends or its future is dropped.
//!
//! Every clone of a [`BreakerService`] shares one breaker. A layer built with [`BreakerLayer::new`] gives
//! each service it wraps a breaker of its own; [`BreakerLayer::shared`] gives them all one.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use reliable_core::ConfigError;
use reliable_core::breaker::{BreakerConfig, BreakerPolicy, Outcome, Permit, RejectReason};
use reliable_core::ledger::{Draw, Extra};
use reliable_core::outcome::ErrorClass;
use tower_layer::Layer;
use tower_service::Service;

use super::error::{BoxError, Open, ProbeDenied};
use super::ledger::SharedLedger;
use super::sharing::Sharing;
use super::time::Time;
use crate::breaker::{Owned, Transitions};
use crate::classify::Classify;
use crate::clock::Clock;
use crate::error::ShedReason;
use crate::observer::{NotSent, Observer};
use crate::rng::random_seed;
use crate::sleep::Sleep;

struct Shared {
    breaker: Owned,
    name: Arc<str>,
    observers: Arc<[Arc<dyn Observer>]>,
}

impl Shared {
    fn refused(&self, refusal: NotSent) {
        for o in self.observers.iter() {
            o.on_reject(&self.name, refusal);
        }
    }

    /// A probe the breaker admitted draws from the ledger (as the builder's breaker does): the
    /// permit and its draw, or, denied, the permit handed back unused and the refusal.
    fn draw_probe(
        &self,
        ledger: Option<&SharedLedger>,
        permit: Permit,
        now: reliable_core::Instant,
    ) -> Result<(Permit, Option<(SharedLedger, Draw)>), ProbeDenied> {
        let Some(ledger) = ledger.filter(|_| permit.is_probe()) else {
            return Ok((permit, None));
        };
        let drawn = ledger.lock().try_draw(Extra::Probe, now);
        for o in self.observers.iter() {
            o.on_ledger(&self.name, Extra::Probe, drawn.is_ok());
        }
        match drawn {
            Ok(draw) => Ok((permit, Some((ledger.clone(), draw)))),
            Err(denied) => {
                self.breaker.record(permit, Outcome::Ignored, now);
                self.refused(NotSent::Rejected(ShedReason::Ledger(denied)));
                Err(ProbeDenied { denied })
            }
        }
    }
}

/// Builds [`BreakerService`]s from a validated config.
#[derive(Clone)]
pub struct BreakerLayer<C> {
    policy: BreakerPolicy,
    classify: C,
    time: Time,
    shared: Sharing<Arc<Shared>>,
    ledger: Option<SharedLedger>,
    name: Arc<str>,
    observers: Vec<Arc<dyn Observer>>,
    seed: Option<u64>,
}

impl<C> fmt::Debug for BreakerLayer<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BreakerLayer")
            .field("policy", &self.policy)
            .field("shared", &self.shared.is_shared())
            .field("ledger", &self.ledger.is_some())
            .finish_non_exhaustive()
    }
}

impl<C> BreakerLayer<C> {
    /// A layer that gives each service it wraps its own breaker (the crate's lock-free one), on
    /// tokio's clock. Refuses an invalid config, or one whose window needs more than 256 calls or
    /// 64 buckets.
    pub fn new(config: BreakerConfig, classify: C) -> Result<Self, ConfigError> {
        let policy = BreakerPolicy::new(config)?;
        let name: Arc<str> = "breaker".into();
        let none: Arc<[Arc<dyn Observer>]> = Arc::new([]);
        Owned::new(policy, 0, Transitions::new(name.clone(), none))?;
        Ok(BreakerLayer {
            policy,
            classify,
            time: Time::tokio(),
            shared: Sharing::per_service(),
            ledger: None,
            name,
            observers: Vec::new(),
            seed: None,
        })
    }
}

impl<C> BreakerLayer<C> {
    /// The same layer reading time from `clock` (and waiting on `sleep`).
    pub fn with_time(mut self, clock: impl Clock, sleep: impl Sleep) -> Self {
        let _ = sleep;
        self.time = Time::new(clock);
        self.shared.reset();
        self
    }

    /// Names the breaker in what observers receive (default `breaker`).
    pub fn named(mut self, name: &str) -> Self {
        self.name = name.into();
        self.shared.reset();
        self
    }

    /// Tells `observer` every state change (`on_transition`) and every refused call
    /// (`on_reject`).
    pub fn observer(mut self, observer: impl Observer) -> Self {
        self.observers.push(Arc::new(observer));
        self.shared.reset();
        self
    }

    /// Half-open probes draw from `ledger`, the one budget of extra attempts that retries
    /// ([`RetryLayer::ledger`](super::RetryLayer::ledger)) and hedges
    /// ([`HedgeLayer::ledger`](super::HedgeLayer::ledger)) given the same ledger draw from, as the
    /// builder's breaker does ([`Builder::ledger`](crate::Builder::ledger)). A probe the ledger
    /// denies is not sent: the call fails with [`ProbeDenied`] (a local refusal in the core's
    /// answer table), observers hear `on_ledger` and `on_reject` with
    /// [`ShedReason::Ledger`], and the breaker stays half-open with its probe slot free. A probe
    /// granted holds its draw until it ends or its future is dropped. First tries are what the
    /// ledger is a share of: put a `RetryLayer` with the same ledger above, or only the ledger's
    /// floor is there to draw.
    ///
    /// The ledger is the wrapped service's, not the breaker's: a [`shared`](Self::shared) breaker
    /// stays shared when clones of this layer are given different ledgers (one per client), and
    /// each probe draws from the ledger of the service it goes through.
    pub fn ledger(mut self, ledger: SharedLedger) -> Self {
        self.ledger = Some(ledger);
        self
    }

    /// Runs the breaker in shadow mode ([`BreakerConfig::shadow`]): it decides and reports
    /// (`on_transition`, `on_would_reject`) but lets every request through.
    pub fn shadow(mut self) -> Self {
        let config = BreakerConfig {
            shadow: true,
            ..*self.policy.config()
        };
        // The same config, which was accepted, with shadow mode on: accepted too.
        if let Ok(policy) = BreakerPolicy::new(config) {
            self.policy = policy;
        }
        self.shared.reset();
        self
    }

    /// Seeds the open-time jitter (by default each breaker draws its own seed).
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self.shared.reset();
        self
    }

    /// One breaker for every service this layer wraps (a process-wide breaker per downstream).
    /// The other settings apply whether they are set before or after this.
    pub fn shared(mut self) -> Self {
        self.shared = Sharing::shared();
        self
    }

    fn make(&self) -> Arc<Shared> {
        let observers: Arc<[Arc<dyn Observer>]> = self.observers.clone().into();
        let outlet = Transitions::new(self.name.clone(), observers.clone());
        let seed = self.seed.unwrap_or_else(random_seed);
        let breaker = match Owned::new(self.policy, seed, outlet) {
            Ok(b) => b,
            // Checked in `new` for this very policy.
            Err(_) => unreachable!("the policy was accepted when the layer was built"),
        };
        Arc::new(Shared {
            breaker,
            name: self.name.clone(),
            observers,
        })
    }
}

impl<S, C: Clone> Layer<S> for BreakerLayer<C> {
    type Service = BreakerService<S, C>;

    fn layer(&self, inner: S) -> Self::Service {
        BreakerService {
            inner,
            shared: self.shared.get(|| self.make()),
            ledger: self.ledger.clone(),
            classify: self.classify.clone(),
            time: self.time.clone(),
        }
    }
}

/// A service behind a circuit breaker (see the [`tower` module docs](crate::tower)).
#[derive(Clone)]
pub struct BreakerService<S, C> {
    inner: S,
    shared: Arc<Shared>,
    ledger: Option<SharedLedger>,
    classify: C,
    time: Time,
}

impl<S: fmt::Debug, C> fmt::Debug for BreakerService<S, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.shared.breaker.state(self.time.now());
        f.debug_struct("BreakerService")
            .field("inner", &self.inner)
            .field("state", &state)
            .finish_non_exhaustive()
    }
}

impl<S, C> BreakerService<S, C> {
    /// The breaker's state now.
    pub fn state(&self) -> reliable_core::breaker::State {
        self.shared.breaker.state(self.time.now())
    }
}

impl<S, Req, C> Service<Req> for BreakerService<S, C>
where
    S: Service<Req>,
    S::Error: Into<BoxError>,
    C: Classify<BoxError, S::Response> + Clone + Send + Sync + 'static,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = BreakerFuture<S::Future, C>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: Req) -> Self::Future {
        let now = self.time.now();
        let decision = self.shared.breaker.acquire(now);
        let refusal = match decision {
            Ok(permit) => match self.shared.draw_probe(self.ledger.as_ref(), permit, now) {
                Ok((permit, draw)) => {
                    return BreakerFuture {
                        state: State::Called {
                            fut: self.inner.call(req),
                        },
                        guard: Guard {
                            permit: Some(permit),
                            draw,
                            shared: self.shared.clone(),
                            time: self.time.clone(),
                        },
                        classify: self.classify.clone(),
                    };
                }
                Err(denied) => Box::new(denied) as BoxError,
            },
            Err(rejection) => {
                self.shared.refused(match rejection.reason {
                    RejectReason::Open { retry_after } => NotSent::Open {
                        retry_after: Some(retry_after.into()),
                    },
                    RejectReason::ForcedOpen => NotSent::Open { retry_after: None },
                    RejectReason::HalfOpenFull => NotSent::Rejected(ShedReason::HalfOpenFull),
                    RejectReason::SlowStart => NotSent::Rejected(ShedReason::SlowStart),
                });
                Box::new(Open {
                    retry_after: rejection.retry_after().map(Into::into),
                })
            }
        };
        BreakerFuture {
            state: State::Rejected {
                refusal: Some(refusal),
            },
            guard: Guard {
                permit: None,
                draw: None,
                shared: self.shared.clone(),
                time: self.time.clone(),
            },
            classify: self.classify.clone(),
        }
    }
}

/// Holds the permit (and a probe's ledger draw) until the call ends; dropped early, it records
/// `Outcome::Ignored` and settles the draw.
struct Guard {
    permit: Option<Permit>,
    draw: Option<(SharedLedger, Draw)>,
    shared: Arc<Shared>,
    time: Time,
}

impl Guard {
    fn record(&mut self, outcome: Outcome) {
        if self.permit.is_none() && self.draw.is_none() {
            return;
        }
        let now = self.time.now();
        if let Some(permit) = self.permit.take() {
            self.shared.breaker.record(permit, outcome, now);
        }
        if let Some((ledger, draw)) = self.draw.take() {
            ledger.lock().settle(draw, now);
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.record(Outcome::Ignored);
    }
}

pin_project_lite::pin_project! {
    #[project = StateProj]
    enum State<F> {
        Called { #[pin] fut: F },
        Rejected { refusal: Option<BoxError> },
    }
}

pin_project_lite::pin_project! {
    /// The [`BreakerService`]'s response future.
    pub struct BreakerFuture<F, C> {
        #[pin]
        state: State<F>,
        guard: Guard,
        classify: C,
    }
}

impl<F, C> fmt::Debug for BreakerFuture<F, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BreakerFuture")
            .field("holds_permit", &self.guard.permit.is_some())
            .finish_non_exhaustive()
    }
}

/// What a failure of `class` tells the breaker about the downstream.
/// The core's table ([`reliable_core::answer`]): a bad request or a local refusal below says
/// nothing about the downstream's health.
fn outcome_of(class: Option<ErrorClass>) -> Outcome {
    class.map_or(Outcome::Success, |c| c.consequences().breaker)
}

impl<F, Res, E, C> Future for BreakerFuture<F, C>
where
    F: Future<Output = Result<Res, E>>,
    E: Into<BoxError>,
    C: Classify<BoxError, Res> + Clone + Send + Sync + 'static,
{
    type Output = Result<Res, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        match this.state.project() {
            StateProj::Rejected { refusal } => {
                let refusal = refusal
                    .take()
                    .unwrap_or_else(|| Box::new(Open { retry_after: None }));
                Poll::Ready(Err(refusal))
            }
            StateProj::Called { fut } => {
                let result = std::task::ready!(fut.poll(cx));
                match result {
                    Ok(res) => {
                        this.guard.record(outcome_of(this.classify.ok(&res)));
                        Poll::Ready(Ok(res))
                    }
                    Err(e) => {
                        let e: BoxError = e.into();
                        this.guard.record(outcome_of(Some(this.classify.error(&e))));
                        Poll::Ready(Err(e))
                    }
                }
            }
        }
    }
}

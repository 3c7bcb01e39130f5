//! [`RouteLayer`]: any [`Route`] as tower layers, in the route's own order.
//!
//! `ReliableLayer` has one order (retry → throttle → breaker, the breaker seeing every attempt).
//! A route may have no breaker, a breaker outside its retry, or a throttle outside its retry; a
//! `RouteLayer` stacks the crate's `RetryLayer`, `ThrottleLayer` and `BreakerLayer` in the order
//! the policy wrote, then, innermost, a `ConcurrencyLimitLayer`, a `RateLimitLayer` and a
//! `HedgeLayer` around the call, each shared or per wrapped service as its `scope` says. A ledger is a `SharedLedger`
//! (one, or one per wrapped service) given to the retry layer (whose calls deposit in it), the
//! hedge layer and the breaker inside it. With a breaker inside the retry and none of the
//! innermost layers, its service is exactly `ReliableLayer`'s.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tower_layer::Layer;
use tower_service::Service;

use super::{PolicyError, Route, Scope};
use crate::tower::{
    BoxError, BreakerLayer, BreakerService, ConcurrencyLimitLayer, ConcurrencyLimitService,
    HedgeLayer, HedgeService, Policy, RateLimitLayer, RateLimitService, RetryLayer, RetryService,
    SharedLedger, ThrottleLayer, ThrottleService,
};

/// The layers of one [`Route`], in its order. Built by [`Route::route_layer`].
#[derive(Clone, Debug)]
pub struct RouteLayer<P> {
    retry: RetryLayer<P>,
    throttle: ThrottleLayer<P>,
    order: Order<P>,
    limit: Option<Scoped<ConcurrencyLimitLayer<P>>>,
    rate_limit: Option<Scoped<RateLimitLayer>>,
    hedge: Option<Scoped<HedgeLayer<P>>>,
    ledger: Option<Scoped<SharedLedger>>,
    /// The breaker is inside the ledger: its half-open probes draw from it.
    probes_draw: bool,
}

/// A layer's state as its scope says: one for every wrapped service, or for each a fresh copy
/// of a template that never wraps one.
#[derive(Clone, Debug)]
struct Scoped<T> {
    value: T,
    scope: Scope,
}

impl<T: Clone> Scoped<T> {
    fn new(value: T, scope: Scope) -> Self {
        Scoped { value, scope }
    }

    /// The state for the next wrapped service.
    fn get(&self, fresh: impl FnOnce(&T) -> T) -> T {
        match self.scope {
            Scope::Shared => self.value.clone(),
            // `Plan::new` refuses `PerHost` (one host per downstream here) and `Fleet` (no store).
            Scope::PerClient | Scope::PerHost | Scope::Fleet(_) => fresh(&self.value),
        }
    }
}

/// Where the breaker and the throttle sit relative to the retry.
#[derive(Clone, Debug)]
enum Order<P> {
    /// retry → throttle → breaker (`ReliableLayer`'s order).
    BreakerPerAttempt(BreakerLayer<P>),
    /// retry → throttle (or no throttle).
    ThrottlePerAttempt,
    /// throttle → retry.
    ThrottlePerCall,
    /// throttle → breaker → retry.
    BreakerPerCall(BreakerLayer<P>),
    /// throttle → retry → breaker.
    ThrottlePerCallBreakerPerAttempt(BreakerLayer<P>),
}

fn scoped<L>(layer: L, scope: Scope, shared: impl FnOnce(L) -> L) -> L {
    match scope {
        Scope::Shared => shared(layer),
        // `Plan::new` refuses `PerHost` (one host per downstream here) and `Fleet` (no store).
        Scope::PerClient | Scope::PerHost | Scope::Fleet(_) => layer,
    }
}

impl<P: Clone> RouteLayer<P> {
    pub(super) fn new(route: &Route, policy: P) -> Result<Self, PolicyError> {
        let refused = |e: reliable_core::ConfigError| {
            route.refuse(&format!("{e}: expected a config the core accepts"))
        };
        let mut retry = RetryLayer::new(route.retry, policy.clone()).map_err(refused)?;
        if let Some((budget, scope)) = route.budget {
            retry = scoped(retry.budget(budget).map_err(refused)?, scope, |l| {
                l.shared()
            });
        }
        let throttle = match route.throttle {
            Some(t) => scoped(
                ThrottleLayer::new(t.config, policy.clone()).map_err(refused)?,
                t.scope,
                |l| l.shared(),
            ),
            None => ThrottleLayer::disabled(policy.clone()),
        };
        let throttle_outside = route.throttle.is_some_and(|t| t.per_call);
        if let Some(l) = route.ledger {
            // The retry layer deposits each call: nothing may decide between it and the ledger.
            let breaker_outside = route.breaker.is_some_and(|b| b.per_call);
            if l.under_throttle != throttle_outside || l.under_breaker != breaker_outside {
                return Err(route.refuse(
                    "a Ledger the retry layer cannot deposit in where the simulator does: tower deposits each call where its RetryLayer runs (outermost, or inside a Throttle and Breaker around the Retry); expected the Ledger directly around the Retry, or outermost without layers around the Retry",
                ));
            }
        }
        let limit = match route.limit {
            Some(l) => Some(Scoped::new(
                ConcurrencyLimitLayer::new(l.config, policy.clone()).map_err(refused)?,
                l.scope,
            )),
            None => None,
        };
        let rate_limit = match route.rate_limit {
            Some(r) => Some(Scoped::new(
                RateLimitLayer::new(r.config).map_err(refused)?,
                r.scope,
            )),
            None => None,
        };
        let hedge = match route.hedge {
            Some(h) => {
                let layer = HedgeLayer::new(h.config, policy.clone()).map_err(refused)?;
                let layer = match h.copy_timeout {
                    Some(t) => layer.copy_timeout(t.into()),
                    None => layer,
                };
                Some(Scoped::new(layer, h.scope))
            }
            None => None,
        };
        let ledger = match route.ledger {
            Some(l) => Some(Scoped::new(
                SharedLedger::new(l.config).map_err(refused)?,
                l.scope,
            )),
            None => None,
        };
        let probes_draw = route.ledger.is_some_and(|l| !l.under_breaker);
        let order = match route.breaker {
            Some(b) => {
                let layer = scoped(
                    BreakerLayer::new(b.config, policy).map_err(refused)?,
                    b.scope,
                    |l| l.shared(),
                );
                match (b.per_call, throttle_outside) {
                    (true, _) => Order::BreakerPerCall(layer),
                    (false, true) => Order::ThrottlePerCallBreakerPerAttempt(layer),
                    (false, false) => Order::BreakerPerAttempt(layer),
                }
            }
            None if throttle_outside => Order::ThrottlePerCall,
            None => Order::ThrottlePerAttempt,
        };
        Ok(RouteLayer {
            retry,
            throttle,
            order,
            limit,
            rate_limit,
            hedge,
            ledger,
            probes_draw,
        })
    }
}

impl<S, P: Clone> Layer<S> for RouteLayer<P> {
    type Service = RouteService<S, P>;

    fn layer(&self, inner: S) -> Self::Service {
        let ledger = self.ledger.as_ref().map(|l| l.get(SharedLedger::fresh));
        let retry = match &ledger {
            Some(l) => self.retry.clone().ledger(l.clone()),
            None => self.retry.clone(),
        };
        let probes = ledger.as_ref().filter(|_| self.probes_draw);
        let breaker = |b: &BreakerLayer<P>| match probes {
            Some(l) => b.clone().ledger(l.clone()),
            None => b.clone(),
        };
        let hedge = self.hedge.as_ref().map(|h| {
            let h = h.get(HedgeLayer::fresh);
            match &ledger {
                Some(l) => h.ledger(l.clone()),
                None => h,
            }
        });
        let limit = self
            .limit
            .as_ref()
            .map(|l| l.get(ConcurrencyLimitLayer::fresh));
        let rate_limit = self
            .rate_limit
            .as_ref()
            .map(|r| r.get(RateLimitLayer::fresh));
        let inner = RouteInnermost::new(inner, limit, rate_limit, hedge);
        let throttle = &self.throttle;
        match &self.order {
            Order::BreakerPerAttempt(b) => RouteService::BreakerPerAttempt(
                retry.layer(throttle.layer(breaker(b).layer(inner))),
            ),
            Order::ThrottlePerAttempt => {
                RouteService::ThrottlePerAttempt(retry.layer(throttle.layer(inner)))
            }
            Order::ThrottlePerCall => {
                RouteService::ThrottlePerCall(throttle.layer(retry.layer(inner)))
            }
            Order::BreakerPerCall(b) => {
                RouteService::BreakerPerCall(throttle.layer(breaker(b).layer(retry.layer(inner))))
            }
            Order::ThrottlePerCallBreakerPerAttempt(b) => {
                RouteService::ThrottlePerCallBreakerPerAttempt(
                    throttle.layer(retry.layer(breaker(b).layer(inner))),
                )
            }
        }
    }
}

/// The innermost layers of a route around the wrapped service: a concurrency limit (every
/// attempt takes a slot) around a rate limit (every attempt is counted) around hedging (copies
/// of the call), any of them or none.
#[derive(Clone, Debug)]
pub enum RouteInnermost<S, P> {
    /// The service itself.
    Plain(RouteRated<S>),
    /// Hedged.
    Hedged(RouteRated<HedgeService<S, P>>),
    /// Under a concurrency limit.
    Limited(ConcurrencyLimitService<RouteRated<S>, P>),
    /// Under a concurrency limit, hedged.
    LimitedHedged(ConcurrencyLimitService<RouteRated<HedgeService<S, P>>, P>),
}

impl<S, P: Clone> RouteInnermost<S, P> {
    fn new(
        inner: S,
        limit: Option<ConcurrencyLimitLayer<P>>,
        rate_limit: Option<RateLimitLayer>,
        hedge: Option<HedgeLayer<P>>,
    ) -> Self {
        let rated = rate_limit.as_ref();
        match (limit, hedge) {
            (None, None) => RouteInnermost::Plain(RouteRated::new(inner, rated)),
            (None, Some(h)) => RouteInnermost::Hedged(RouteRated::new(h.layer(inner), rated)),
            (Some(l), None) => RouteInnermost::Limited(l.layer(RouteRated::new(inner, rated))),
            (Some(l), Some(h)) => {
                RouteInnermost::LimitedHedged(l.layer(RouteRated::new(h.layer(inner), rated)))
            }
        }
    }
}

/// A service under a route's rate limit, if the route has one.
#[derive(Clone, Debug)]
pub enum RouteRated<S> {
    /// No rate limit.
    Plain(S),
    /// Under a rate limit.
    Limited(RateLimitService<S>),
}

impl<S> RouteRated<S> {
    fn new(inner: S, rate_limit: Option<&RateLimitLayer>) -> Self {
        match rate_limit {
            Some(r) => RouteRated::Limited(r.layer(inner)),
            None => RouteRated::Plain(inner),
        }
    }
}

impl<S, Req> Service<Req> for RouteRated<S>
where
    S: Service<Req>,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
    S::Response: Send + 'static,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = RouteFuture<S::Response>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        match self {
            RouteRated::Plain(s) => s.poll_ready(cx).map_err(Into::into),
            RouteRated::Limited(s) => s.poll_ready(cx),
        }
    }

    fn call(&mut self, req: Req) -> Self::Future {
        match self {
            RouteRated::Plain(s) => {
                let fut = s.call(req);
                Box::pin(async move { fut.await.map_err(Into::into) })
            }
            RouteRated::Limited(s) => s.call(req),
        }
    }
}

impl<S, P, Req> Service<Req> for RouteInnermost<S, P>
where
    S: Service<Req> + Clone + Send + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
    S::Response: Send + 'static,
    Req: Send + 'static,
    P: Policy<Req, S::Response>,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = RouteFuture<S::Response>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        match self {
            RouteInnermost::Plain(s) => s.poll_ready(cx),
            RouteInnermost::Hedged(s) => s.poll_ready(cx),
            RouteInnermost::Limited(s) => s.poll_ready(cx),
            RouteInnermost::LimitedHedged(s) => s.poll_ready(cx),
        }
    }

    fn call(&mut self, req: Req) -> Self::Future {
        match self {
            RouteInnermost::Plain(s) => s.call(req),
            RouteInnermost::Hedged(s) => s.call(req),
            RouteInnermost::Limited(s) => s.call(req),
            RouteInnermost::LimitedHedged(s) => s.call(req),
        }
    }
}

/// The route's call behind its breaker.
type GuardedCall<S, P> = BreakerService<RouteInnermost<S, P>, P>;

/// The route's call under its retry.
type RetriedCall<S, P> = RetryService<RouteInnermost<S, P>, P>;

/// A service wrapped by a [`RouteLayer`]: one variant per order of the layers.
#[derive(Clone, Debug)]
pub enum RouteService<S, P> {
    /// retry → throttle → breaker: `ReliableLayer`'s service.
    BreakerPerAttempt(RetryService<ThrottleService<GuardedCall<S, P>, P>, P>),
    /// retry → throttle (a pass-through without one).
    ThrottlePerAttempt(RetryService<ThrottleService<RouteInnermost<S, P>, P>, P>),
    /// throttle → retry.
    ThrottlePerCall(ThrottleService<RetriedCall<S, P>, P>),
    /// throttle (a pass-through without one) → breaker → retry.
    BreakerPerCall(ThrottleService<BreakerService<RetriedCall<S, P>, P>, P>),
    /// throttle → retry → breaker.
    ThrottlePerCallBreakerPerAttempt(ThrottleService<RetryService<GuardedCall<S, P>, P>, P>),
}

/// The response future of a [`RouteService`].
pub type RouteFuture<Res> = Pin<Box<dyn Future<Output = Result<Res, BoxError>> + Send>>;

impl<S, P, Req> Service<Req> for RouteService<S, P>
where
    RouteInnermost<S, P>: Service<Req, Response = S::Response, Error = BoxError>,
    S: Service<Req>,
    RetryService<ThrottleService<GuardedCall<S, P>, P>, P>:
        Service<Req, Response = S::Response, Error = BoxError>,
    RetryService<ThrottleService<RouteInnermost<S, P>, P>, P>:
        Service<Req, Response = S::Response, Error = BoxError>,
    ThrottleService<RetriedCall<S, P>, P>: Service<Req, Response = S::Response, Error = BoxError>,
    ThrottleService<BreakerService<RetriedCall<S, P>, P>, P>:
        Service<Req, Response = S::Response, Error = BoxError>,
    ThrottleService<RetryService<GuardedCall<S, P>, P>, P>:
        Service<Req, Response = S::Response, Error = BoxError>,
    <RetryService<ThrottleService<GuardedCall<S, P>, P>, P> as Service<Req>>::Future:
        Send + 'static,
    <RetryService<ThrottleService<RouteInnermost<S, P>, P>, P> as Service<Req>>::Future:
        Send + 'static,
    <ThrottleService<RetriedCall<S, P>, P> as Service<Req>>::Future: Send + 'static,
    <ThrottleService<BreakerService<RetriedCall<S, P>, P>, P> as Service<Req>>::Future:
        Send + 'static,
    <ThrottleService<RetryService<GuardedCall<S, P>, P>, P> as Service<Req>>::Future:
        Send + 'static,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = RouteFuture<S::Response>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        match self {
            RouteService::BreakerPerAttempt(s) => s.poll_ready(cx),
            RouteService::ThrottlePerAttempt(s) => s.poll_ready(cx),
            RouteService::ThrottlePerCall(s) => s.poll_ready(cx),
            RouteService::BreakerPerCall(s) => s.poll_ready(cx),
            RouteService::ThrottlePerCallBreakerPerAttempt(s) => s.poll_ready(cx),
        }
    }

    fn call(&mut self, req: Req) -> Self::Future {
        match self {
            RouteService::BreakerPerAttempt(s) => Box::pin(s.call(req)),
            RouteService::ThrottlePerAttempt(s) => Box::pin(s.call(req)),
            RouteService::ThrottlePerCall(s) => Box::pin(s.call(req)),
            RouteService::BreakerPerCall(s) => Box::pin(s.call(req)),
            RouteService::ThrottlePerCallBreakerPerAttempt(s) => Box::pin(s.call(req)),
        }
    }
}

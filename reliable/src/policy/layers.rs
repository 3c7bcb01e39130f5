//! [`RouteLayer`]: any [`Route`] as tower layers, in the route's own order.
//!
//! `ReliableLayer` has one order (retry → throttle → breaker, the breaker seeing every attempt).
//! A route may have no breaker, a breaker outside its retry, or a throttle outside its retry; a
//! `RouteLayer` stacks the crate's `RetryLayer`, `ThrottleLayer` and `BreakerLayer` in the order
//! the policy wrote, each shared or per wrapped service as its `scope` says. With a breaker inside
//! the retry its service is exactly `ReliableLayer`'s.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tower_layer::Layer;
use tower_service::Service;

use super::{PolicyError, Route, Scope};
use crate::tower::{
    BoxError, BreakerLayer, BreakerService, RetryLayer, RetryService, ThrottleLayer,
    ThrottleService,
};

/// The layers of one [`Route`], in its order. Built by [`Route::route_layer`].
#[derive(Clone, Debug)]
pub struct RouteLayer<P> {
    retry: RetryLayer<P>,
    throttle: ThrottleLayer<P>,
    order: Order<P>,
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
        Scope::PerClient => layer,
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
        })
    }
}

impl<S, P: Clone> Layer<S> for RouteLayer<P> {
    type Service = RouteService<S, P>;

    fn layer(&self, inner: S) -> Self::Service {
        let (retry, throttle) = (&self.retry, &self.throttle);
        match &self.order {
            Order::BreakerPerAttempt(b) => {
                RouteService::BreakerPerAttempt(retry.layer(throttle.layer(b.layer(inner))))
            }
            Order::ThrottlePerAttempt => {
                RouteService::ThrottlePerAttempt(retry.layer(throttle.layer(inner)))
            }
            Order::ThrottlePerCall => {
                RouteService::ThrottlePerCall(throttle.layer(retry.layer(inner)))
            }
            Order::BreakerPerCall(b) => {
                RouteService::BreakerPerCall(throttle.layer(b.layer(retry.layer(inner))))
            }
            Order::ThrottlePerCallBreakerPerAttempt(b) => {
                RouteService::ThrottlePerCallBreakerPerAttempt(
                    throttle.layer(retry.layer(b.layer(inner))),
                )
            }
        }
    }
}

/// A service wrapped by a [`RouteLayer`]: one variant per order of the layers.
#[derive(Clone, Debug)]
pub enum RouteService<S, P> {
    /// retry → throttle → breaker: `ReliableLayer`'s service.
    BreakerPerAttempt(RetryService<ThrottleService<BreakerService<S, P>, P>, P>),
    /// retry → throttle (a pass-through without one).
    ThrottlePerAttempt(RetryService<ThrottleService<S, P>, P>),
    /// throttle → retry.
    ThrottlePerCall(ThrottleService<RetryService<S, P>, P>),
    /// throttle (a pass-through without one) → breaker → retry.
    BreakerPerCall(ThrottleService<BreakerService<RetryService<S, P>, P>, P>),
    /// throttle → retry → breaker.
    ThrottlePerCallBreakerPerAttempt(ThrottleService<RetryService<BreakerService<S, P>, P>, P>),
}

/// The response future of a [`RouteService`].
pub type RouteFuture<Res> = Pin<Box<dyn Future<Output = Result<Res, BoxError>> + Send>>;

impl<S, P, Req> Service<Req> for RouteService<S, P>
where
    S: Service<Req>,
    RetryService<ThrottleService<BreakerService<S, P>, P>, P>:
        Service<Req, Response = S::Response, Error = BoxError>,
    RetryService<ThrottleService<S, P>, P>: Service<Req, Response = S::Response, Error = BoxError>,
    ThrottleService<RetryService<S, P>, P>: Service<Req, Response = S::Response, Error = BoxError>,
    ThrottleService<BreakerService<RetryService<S, P>, P>, P>:
        Service<Req, Response = S::Response, Error = BoxError>,
    ThrottleService<RetryService<BreakerService<S, P>, P>, P>:
        Service<Req, Response = S::Response, Error = BoxError>,
    <RetryService<ThrottleService<BreakerService<S, P>, P>, P> as Service<Req>>::Future:
        Send + 'static,
    <RetryService<ThrottleService<S, P>, P> as Service<Req>>::Future: Send + 'static,
    <ThrottleService<RetryService<S, P>, P> as Service<Req>>::Future: Send + 'static,
    <ThrottleService<BreakerService<RetryService<S, P>, P>, P> as Service<Req>>::Future:
        Send + 'static,
    <ThrottleService<RetryService<BreakerService<S, P>, P>, P> as Service<Req>>::Future:
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

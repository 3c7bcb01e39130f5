//! [`ConcurrencyLimitLayer`] (a bulkhead, or an adaptive limit: AIMD, gradient) and
//! [`RateLimitLayer`] (GCRA): the core's limiters around a service, one state for every service
//! a layer wraps (a limit belongs to a downstream, not to a connection).
//!
//! Both are always ready and refuse in `call`, with [`OverLimit`] or [`OverRate`]: an error from
//! `poll_ready` would kill the service, and `Pending` would queue callers behind a limit that
//! exists to shed them. The refusals are local refusals in the core's answer table
//! ([`error_class`](super::error_class): `Refused`), so a [`RetryLayer`](super::RetryLayer)
//! above ends the call at once unless its policy waits on refusals. A concurrency slot is
//! released when the response future completes, the limit moved by the answer's class (the
//! table's limit column, [`Completion::of`]); a dropped future releases it as ignored.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};

use reliable_core::ConfigError;
use reliable_core::limit::{
    Completion, LimitPermit, Limiter, LimiterConfig, LimiterPolicy, RateConfig, RateLimiter,
    RatePolicy,
};
use tower_layer::Layer;
use tower_service::Service;

use super::error::{BoxError, OverLimit, OverRate};
use super::time::Time;
use crate::classify::Classify;
use crate::clock::Clock;
use crate::error::ShedReason;
use crate::observer::{NotSent, Observer};
use crate::sleep::Sleep;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Who to tell: a name and observers.
#[derive(Clone)]
struct Outlet {
    name: Arc<str>,
    observers: Arc<[Arc<dyn Observer>]>,
}

impl Outlet {
    fn new(name: &str) -> Self {
        Outlet {
            name: name.into(),
            observers: Arc::new([]),
        }
    }

    fn add(&mut self, observer: impl Observer) {
        let mut all = self.observers.to_vec();
        all.push(Arc::new(observer));
        self.observers = all.into();
    }

    fn refused(&self, why: ShedReason) {
        for o in self.observers.iter() {
            o.on_reject(&self.name, NotSent::Rejected(why));
        }
    }
}

/// A concurrency limit (a bulkhead, or adaptive: AIMD, gradient; [`reliable_core::limit`]) on
/// the calls in flight. Always ready: a call over the limit fails in `call` with [`OverLimit`], a
/// local refusal (`Refused` in the core's answer table), so a retry layer above ends the call at
/// once unless its policy waits on refusals. A slot is released when the response future
/// completes, the limit moved by the answer's class ([`Completion::of`]); a dropped future
/// releases it as ignored.
///
/// Builds [`ConcurrencyLimitService`]s sharing one limiter. Setters keep the limiter: every
/// service made before or after shares it.
#[derive(Clone)]
pub struct ConcurrencyLimitLayer<C> {
    limiter: Arc<Mutex<Limiter>>,
    classify: C,
    time: Time,
    outlet: Outlet,
}

impl<C> fmt::Debug for ConcurrencyLimitLayer<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConcurrencyLimitLayer")
            .field("limiter", &*lock(&self.limiter))
            .finish_non_exhaustive()
    }
}

impl<C> ConcurrencyLimitLayer<C> {
    /// A limit as `config` says (fixed, AIMD or gradient), answers read by `classify`.
    pub fn new(config: LimiterConfig, classify: C) -> Result<Self, ConfigError> {
        Ok(ConcurrencyLimitLayer {
            limiter: Arc::new(Mutex::new(Limiter::new(LimiterPolicy::new(config)?))),
            classify,
            time: Time::tokio(),
            outlet: Outlet::new("limit"),
        })
    }

    /// The same layer with a limiter of its own, a copy of this one's (a per-client limit made
    /// from a template that never wraps a service).
    #[cfg(feature = "policy")]
    pub(crate) fn fresh(&self) -> Self
    where
        C: Clone,
    {
        ConcurrencyLimitLayer {
            limiter: Arc::new(Mutex::new(lock(&self.limiter).clone())),
            classify: self.classify.clone(),
            time: self.time.clone(),
            outlet: self.outlet.clone(),
        }
    }

    /// A static bulkhead of `calls` in flight.
    pub fn bulkhead(calls: u32, classify: C) -> Result<Self, ConfigError> {
        Self::new(LimiterConfig::bulkhead(calls), classify)
    }

    /// The same layer reading time from `clock` (`sleep` is not used: a limit never waits).
    pub fn with_time(mut self, clock: impl Clock, sleep: impl Sleep) -> Self {
        let _ = sleep;
        self.time = Time::new(clock);
        self
    }

    /// Names the limit in what observers receive (default `limit`).
    pub fn named(mut self, name: &str) -> Self {
        self.outlet.name = name.into();
        self
    }

    /// Tells `observer` every refusal (`on_reject`) and every move of the limit
    /// (`on_limit_change`).
    pub fn observer(mut self, observer: impl Observer) -> Self {
        self.outlet.add(observer);
        self
    }

    /// The limit now.
    pub fn limit(&self) -> u32 {
        lock(&self.limiter).limit()
    }

    /// Calls in flight now.
    pub fn in_flight(&self) -> u32 {
        lock(&self.limiter).in_flight()
    }
}

impl<S, C: Clone> Layer<S> for ConcurrencyLimitLayer<C> {
    type Service = ConcurrencyLimitService<S, C>;

    fn layer(&self, inner: S) -> Self::Service {
        ConcurrencyLimitService {
            inner,
            limiter: self.limiter.clone(),
            classify: self.classify.clone(),
            time: self.time.clone(),
            outlet: self.outlet.clone(),
        }
    }
}

/// A service behind a concurrency limit (see [`ConcurrencyLimitLayer`]).
#[derive(Clone)]
pub struct ConcurrencyLimitService<S, C> {
    inner: S,
    limiter: Arc<Mutex<Limiter>>,
    classify: C,
    time: Time,
    outlet: Outlet,
}

impl<S: fmt::Debug, C> fmt::Debug for ConcurrencyLimitService<S, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConcurrencyLimitService")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

/// The response future of [`ConcurrencyLimitService`].
pub type ConcurrencyLimitFuture<Res> = Pin<Box<dyn Future<Output = Result<Res, BoxError>> + Send>>;

/// A slot under the limit; released as ignored if dropped before the answer.
struct Slot {
    limiter: Arc<Mutex<Limiter>>,
    permit: Option<LimitPermit>,
    time: Time,
    outlet: Outlet,
}

impl Slot {
    fn release(&mut self, completion: Completion) {
        let Some(permit) = self.permit.take() else {
            return;
        };
        let now = self.time.now();
        let (from, to) = {
            let mut l = lock(&self.limiter);
            let from = l.limit();
            l.release(permit, completion, now);
            (from, l.limit())
        };
        if from != to {
            for o in self.outlet.observers.iter() {
                o.on_limit_change(&self.outlet.name, from, to);
            }
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.release(Completion::Ignored);
    }
}

impl<S, Req, C> Service<Req> for ConcurrencyLimitService<S, C>
where
    S: Service<Req>,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
    S::Response: Send + 'static,
    C: Classify<BoxError, S::Response> + Clone + Send + Sync + 'static,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = ConcurrencyLimitFuture<S::Response>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: Req) -> Self::Future {
        let now = self.time.now();
        let admitted = lock(&self.limiter).try_acquire(now);
        let permit = match admitted {
            Ok(p) => p,
            Err(reached) => {
                self.outlet.refused(ShedReason::Limit {
                    limit: reached.limit,
                });
                let e: BoxError = Box::new(OverLimit {
                    limit: reached.limit,
                });
                return Box::pin(std::future::ready(Err(e)));
            }
        };
        let mut slot = Slot {
            limiter: self.limiter.clone(),
            permit: Some(permit),
            time: self.time.clone(),
            outlet: self.outlet.clone(),
        };
        let fut = self.inner.call(req);
        let classify = self.classify.clone();
        Box::pin(async move {
            let result = fut.await.map_err(Into::into);
            let class = classify.outcome(result.as_ref());
            slot.release(Completion::of(class));
            result
        })
    }
}

/// A client-side rate limit (GCRA, [`RateConfig`]): a call over it fails in `call` with
/// [`OverRate`], carrying the time until one would be admitted (a local refusal, like
/// [`OverLimit`]).
///
/// Builds [`RateLimitService`]s sharing one rate limiter. Setters keep it.
#[derive(Clone)]
pub struct RateLimitLayer {
    limiter: Arc<Mutex<RateLimiter>>,
    time: Time,
    outlet: Outlet,
}

impl fmt::Debug for RateLimitLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimitLayer")
            .field("limiter", &*lock(&self.limiter))
            .finish_non_exhaustive()
    }
}

impl RateLimitLayer {
    /// A rate limit as `config` says.
    pub fn new(config: RateConfig) -> Result<Self, ConfigError> {
        Ok(RateLimitLayer {
            limiter: Arc::new(Mutex::new(RateLimiter::new(RatePolicy::new(config)?))),
            time: Time::tokio(),
            outlet: Outlet::new("rate-limit"),
        })
    }

    /// The same layer with a rate limiter of its own, a copy of this one's (a per-client limit
    /// made from a template that never wraps a service).
    #[cfg(feature = "policy")]
    pub(crate) fn fresh(&self) -> Self {
        RateLimitLayer {
            limiter: Arc::new(Mutex::new(lock(&self.limiter).clone())),
            time: self.time.clone(),
            outlet: self.outlet.clone(),
        }
    }

    /// The same layer reading time from `clock` (`sleep` is not used: a refusal never waits).
    pub fn with_time(mut self, clock: impl Clock, sleep: impl Sleep) -> Self {
        let _ = sleep;
        self.time = Time::new(clock);
        self
    }

    /// Names the limiter in what observers receive (default `rate-limit`).
    pub fn named(mut self, name: &str) -> Self {
        self.outlet.name = name.into();
        self
    }

    /// Tells `observer` every refusal (`on_reject`).
    pub fn observer(mut self, observer: impl Observer) -> Self {
        self.outlet.add(observer);
        self
    }
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimitService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RateLimitService {
            inner,
            limiter: self.limiter.clone(),
            time: self.time.clone(),
            outlet: self.outlet.clone(),
        }
    }
}

/// A service behind a client-side rate limit (see [`RateLimitLayer`]).
#[derive(Clone)]
pub struct RateLimitService<S> {
    inner: S,
    limiter: Arc<Mutex<RateLimiter>>,
    time: Time,
    outlet: Outlet,
}

impl<S: fmt::Debug> fmt::Debug for RateLimitService<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimitService")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

/// The response future of [`RateLimitService`].
pub type RateLimitFuture<Res> = Pin<Box<dyn Future<Output = Result<Res, BoxError>> + Send>>;

impl<S, Req> Service<Req> for RateLimitService<S>
where
    S: Service<Req>,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
    S::Response: Send + 'static,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = RateLimitFuture<S::Response>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: Req) -> Self::Future {
        let now = self.time.now();
        let admitted = lock(&self.limiter).try_acquire(now);
        if let Err(limited) = admitted {
            self.outlet.refused(ShedReason::RateLimited {
                retry_after: limited.retry_after.into(),
            });
            let e: BoxError = Box::new(OverRate {
                retry_after: limited.retry_after.into(),
            });
            return Box::pin(std::future::ready(Err(e)));
        }
        let fut = self.inner.call(req);
        Box::pin(async move { fut.await.map_err(Into::into) })
    }
}

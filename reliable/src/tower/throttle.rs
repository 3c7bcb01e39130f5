//! [`ThrottleLayer`]: client-side adaptive throttling (Google SRE) around a service.
//!
//! Each `call` asks the core's [`AdaptiveThrottle`] first: with probability
//! `(requests − K·accepts) / (requests + 1)` the call fails at once with [`Throttled`] and the
//! downstream never sees it. An answer is an accept by the core's rule,
//! [`classify::accepted`](crate::classify::accepted): an overload refusal, a timeout or a local
//! refusal below is not; a 500 is, and is counted by a breaker, not here. Like the breaker it is always ready (a local refusal happens in
//! `call`), and what the downstream answered is recorded when the response future completes; a
//! dropped future records nothing (the downstream's answer is unknown).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use reliable_core::ConfigError;
use reliable_core::throttle::{AdaptiveThrottle, ThrottleConfig, ThrottlePolicy};
use tower_layer::Layer;
use tower_service::Service;

use super::error::{BoxError, Throttled};
use super::sharing::Sharing;
use super::time::Time;
use crate::classify::Classify;
use crate::clock::Clock;
use crate::error::ShedReason;
use crate::observer::{NotSent, Observer};
use crate::rng::{Given, Rng, random_seed};
use crate::sleep::Sleep;

/// Slots of the throttle's window (the policy's `buckets` must fit).
type Core = AdaptiveThrottle<64>;

struct Shared {
    throttle: Mutex<Core>,
    samples: Rng,
    draws: Option<Given>,
    name: Arc<str>,
    observers: Arc<[Arc<dyn Observer>]>,
}

/// Builds [`ThrottleService`]s from a validated config.
#[derive(Clone)]
pub struct ThrottleLayer<C> {
    /// `None`: a pass-through (no throttling).
    policy: Option<ThrottlePolicy>,
    classify: C,
    time: Time,
    shared: Sharing<Option<Arc<Shared>>>,
    seed: Option<u64>,
    draws: Option<Given>,
    name: Arc<str>,
    observers: Vec<Arc<dyn Observer>>,
}

impl<C> fmt::Debug for ThrottleLayer<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ThrottleLayer")
            .field("policy", &self.policy)
            .field("shared", &self.shared.is_shared())
            .finish_non_exhaustive()
    }
}

impl<C> ThrottleLayer<C> {
    /// A layer that gives each service it wraps its own throttle. Refuses an invalid config or
    /// more than 64 buckets.
    pub fn new(config: ThrottleConfig, classify: C) -> Result<Self, ConfigError> {
        let policy = ThrottlePolicy::new(config)?;
        Core::new(policy)?;
        Ok(Self::with_policy(Some(policy), classify))
    }

    /// A layer that throttles nothing (for stacks where throttling is optional).
    pub fn disabled(classify: C) -> Self {
        Self::with_policy(None, classify)
    }

    fn with_policy(policy: Option<ThrottlePolicy>, classify: C) -> Self {
        ThrottleLayer {
            policy,
            classify,
            time: Time::tokio(),
            shared: Sharing::per_service(),
            seed: None,
            draws: None,
            name: "throttle".into(),
            observers: Vec::new(),
        }
    }
}

impl<C> ThrottleLayer<C> {
    /// The same layer reading time from `clock` (`sleep` is not used: the throttle never waits).
    pub fn with_time(mut self, clock: impl Clock, sleep: impl Sleep) -> Self {
        let _ = sleep;
        self.time = Time::new(clock);
        self.shared.reset();
        self
    }

    /// Names the throttle in what observers receive (default `throttle`).
    pub fn named(mut self, name: &str) -> Self {
        self.name = name.into();
        self.shared.reset();
        self
    }

    /// Tells `observer` every call the throttle refuses (`on_reject`).
    pub fn observer(mut self, observer: impl Observer) -> Self {
        self.observers.push(Arc::new(observer));
        self.shared.reset();
        self
    }

    /// Seeds the rejection draws.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self.shared.reset();
        self
    }

    /// The rejection draws come from `draws` (one call per decision) instead of a seeded stream:
    /// decisions replayed from a script, as the conformance suite does.
    pub fn draws(mut self, draws: impl Fn() -> u64 + Send + Sync + 'static) -> Self {
        self.draws = Some(Given(Arc::new(draws)));
        self.shared.reset();
        self
    }

    /// One throttle for every service this layer wraps. The other settings apply whether they
    /// are set before or after this.
    pub fn shared(mut self) -> Self {
        self.shared = Sharing::shared();
        self
    }

    fn make(&self) -> Option<Arc<Shared>> {
        let throttle = match Core::new(self.policy?) {
            Ok(t) => t,
            Err(_) => unreachable!("the policy was accepted when the layer was built"),
        };
        Some(Arc::new(Shared {
            throttle: Mutex::new(throttle),
            samples: Rng::new(self.seed.unwrap_or_else(random_seed)),
            draws: self.draws.clone(),
            name: self.name.clone(),
            observers: self.observers.clone().into(),
        }))
    }
}

impl<S, C: Clone> Layer<S> for ThrottleLayer<C> {
    type Service = ThrottleService<S, C>;

    fn layer(&self, inner: S) -> Self::Service {
        ThrottleService {
            inner,
            shared: self.shared.get(|| self.make()),
            classify: self.classify.clone(),
            time: self.time.clone(),
        }
    }
}

/// A service behind an adaptive throttle (see the [`tower` module docs](crate::tower)).
#[derive(Clone)]
pub struct ThrottleService<S, C> {
    inner: S,
    shared: Option<Arc<Shared>>,
    classify: C,
    time: Time,
}

impl<S: fmt::Debug, C> fmt::Debug for ThrottleService<S, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ThrottleService")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl<S, C> ThrottleService<S, C> {
    /// The probability that a call now is rejected (0 for a pass-through).
    pub fn rejection_probability(&self) -> f64 {
        let now = self.time.now();
        self.shared
            .as_ref()
            .map_or(0.0, |s| lock(&s.throttle).rejection_probability(now))
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl<S, Req, C> Service<Req> for ThrottleService<S, C>
where
    S: Service<Req>,
    S::Error: Into<BoxError>,
    C: Classify<BoxError, S::Response> + Clone + Send + Sync + 'static,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = ThrottleFuture<S::Future, C>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: Req) -> Self::Future {
        let admitted = match &self.shared {
            Some(s) => {
                let now = self.time.now();
                let sample = match &s.draws {
                    Some(d) => (d.0)(),
                    None => s.samples.next_u64(),
                };
                lock(&s.throttle).try_acquire_with(now, sample)
            }
            None => Ok(()),
        };
        let fut = match admitted {
            Ok(()) => Ok(self.inner.call(req)),
            Err(t) => {
                let refused = Throttled {
                    probability_ppm: t.probability_ppm,
                };
                if let Some(s) = &self.shared {
                    let why = ShedReason::Throttled {
                        probability: f64::from(refused.probability_ppm) / 1e6,
                    };
                    for o in s.observers.iter() {
                        o.on_reject(&s.name, NotSent::Rejected(why));
                    }
                }
                Err(refused)
            }
        };
        ThrottleFuture {
            fut: Inner::from(fut),
            shared: self.shared.clone(),
            classify: self.classify.clone(),
            time: self.time.clone(),
        }
    }
}

pin_project_lite::pin_project! {
    #[project = InnerProj]
    enum Inner<F> {
        Called { #[pin] fut: F },
        Refused { refused: Option<Throttled> },
    }
}

impl<F> From<Result<F, Throttled>> for Inner<F> {
    fn from(r: Result<F, Throttled>) -> Self {
        match r {
            Ok(fut) => Inner::Called { fut },
            Err(t) => Inner::Refused { refused: Some(t) },
        }
    }
}

pin_project_lite::pin_project! {
    /// The [`ThrottleService`]'s response future.
    pub struct ThrottleFuture<F, C> {
        #[pin]
        fut: Inner<F>,
        shared: Option<Arc<Shared>>,
        classify: C,
        time: Time,
    }
}

impl<F, C> fmt::Debug for ThrottleFuture<F, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ThrottleFuture").finish_non_exhaustive()
    }
}

impl<F, Res, E, C> Future for ThrottleFuture<F, C>
where
    F: Future<Output = Result<Res, E>>,
    E: Into<BoxError>,
    C: Classify<BoxError, Res> + Clone + Send + Sync + 'static,
{
    type Output = Result<Res, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        match this.fut.project() {
            InnerProj::Refused { refused } => Poll::Ready(Err(Box::new(
                refused.take().unwrap_or(Throttled { probability_ppm: 0 }),
            ))),
            InnerProj::Called { fut } => {
                let result = std::task::ready!(fut.poll(cx)).map_err(Into::into);
                // The core's rule, by class (a local refusal below is not an accept).
                let accepted = this
                    .classify
                    .outcome(result.as_ref())
                    .is_none_or(crate::classify::accepted);
                if let Some(s) = this.shared.as_ref() {
                    lock(&s.throttle).record(this.time.now(), accepted);
                }
                Poll::Ready(result)
            }
        }
    }
}

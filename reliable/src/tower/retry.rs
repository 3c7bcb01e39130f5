//! [`RetryLayer`]: the core's retry policy and retry budget around a service, one decision per
//! failed attempt.
//!
//! tower's own `Retry` asks a policy "retry?" and leaves the wait, the deadline and the budget to
//! separate layers that cannot see each other. Here one call of the core's
//! [`RetryPolicy::on_failure`](reliable_core::retry::RetryPolicy::on_failure) weighs them all: the
//! attempt limit, the overall deadline, the backoff with jitter, the server's `Retry-After`
//! (clamped), and the budget, which every clone of the service shares (a retry budget belongs to
//! a client process, not to a request).
//!
//! Each attempt gets the policy's per-attempt timeout (or what is left of the overall deadline,
//! if sooner), enforced here and also handed to the request through
//! [`Policy::set_deadline`], so a timeout below a breaker can fail the call first and the breaker
//! counts it. [`Policy::clone_request`] returning `None` means the request cannot be sent twice:
//! its first answer is final. A dropped response future returns any budget it holds.
//!
//! When the policy gives up on an error *response* (an HTTP 503), that response is returned; on
//! an error, a [`GaveUp`] carrying the reason and the last error. A local refusal below (an open
//! breaker's [`Open`](super::Open), a throttle's [`Throttled`](super::Throttled)) ends the call at
//! once with that refusal, unless the policy's `wait_on_refusal` asks to wait it out and the wait
//! fits the deadline (the core's rule, [`reliable_core::answer`]).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};

use reliable_core::ConfigError;
use reliable_core::Instant;
use reliable_core::budget::{AnyBudget, Budget, BudgetConfig, BudgetPolicy};
use reliable_core::outcome::ErrorClass;
use reliable_core::retry::{RetryConfig, RetryDecision, RetryPolicy, RetryState};
use tower_layer::Layer;
use tower_service::Service;

use super::classify::Policy;
use super::error::{BoxError, GaveUp, TimedOut};
use super::ledger::SharedLedger;
use super::sharing::Sharing;
use super::time::Time;
use crate::clock::Clock;
use crate::observer::Observer;
use crate::rng::{Rng, random_seed};
use crate::sleep::{Sleep, SleepFuture};

/// How long after an attempt's deadline this layer drops it, if nothing below has failed it.
const GRACE: reliable_core::Duration = reliable_core::Duration::from_millis(1);

/// Budget storage: sliding windows up to 64 slots.
type CoreBudget = AnyBudget<64>;

struct Shared {
    budget: Mutex<CoreBudget>,
    /// The ledger of extra attempts, when retries draw from it instead of `budget`.
    ledger: Option<SharedLedger>,
    samples: Rng,
}

impl Shared {
    fn budget(&self) -> MutexGuard<'_, CoreBudget> {
        self.budget
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Runs `f` with the budget retries draw from: the ledger if there is one.
    fn with_budget<R>(&self, f: impl FnOnce(&mut dyn Budget) -> R) -> R {
        match &self.ledger {
            Some(l) => f(&mut *l.lock()),
            None => f(&mut *self.budget()),
        }
    }
}

/// Builds [`RetryService`]s from a validated retry config and an optional budget.
#[derive(Clone)]
pub struct RetryLayer<P> {
    retry: RetryPolicy,
    budget: BudgetPolicy,
    policy: P,
    time: Time,
    shared: Sharing<Arc<Shared>>,
    ledger: Option<SharedLedger>,
    seed: Option<u64>,
    name: Arc<str>,
    observers: Arc<[Arc<dyn Observer>]>,
}

impl<P> fmt::Debug for RetryLayer<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryLayer")
            .field("retry", &self.retry)
            .field("budget", &self.budget)
            .finish_non_exhaustive()
    }
}

impl<P> RetryLayer<P> {
    /// Retries as `config` says, without a budget, on tokio's clock.
    pub fn new(config: RetryConfig, policy: P) -> Result<Self, ConfigError> {
        Ok(RetryLayer {
            retry: RetryPolicy::new(config)?,
            budget: BudgetPolicy::Unlimited,
            policy,
            time: Time::tokio(),
            shared: Sharing::per_service(),
            ledger: None,
            seed: None,
            name: "retry".into(),
            observers: Arc::new([]),
        })
    }
}

impl<P> RetryLayer<P> {
    /// Adds a retry budget. Each service this layer wraps gets its own (shared by its clones);
    /// see [`shared`](Self::shared). Refuses an invalid config or a window over 64 slots.
    pub fn budget(mut self, config: BudgetConfig) -> Result<Self, ConfigError> {
        let budget = BudgetPolicy::new(config)?;
        CoreBudget::new(&budget)?;
        self.budget = budget;
        self.shared.reset();
        Ok(self)
    }

    /// Retries draw from `ledger`, the one budget of extra attempts that hedges
    /// ([`HedgeLayer::ledger`](super::HedgeLayer::ledger)) and probes share, instead of a budget
    /// of their own. Every service this layer wraps, and every layer given a clone of `ledger`,
    /// draws from the same one.
    pub fn ledger(mut self, ledger: SharedLedger) -> Self {
        self.ledger = Some(ledger);
        self.shared.reset();
        self
    }

    /// The same layer reading time from `clock` and waiting on `sleep`.
    pub fn with_time(mut self, clock: impl Clock, sleep: impl Sleep) -> Self {
        self.time = Time::new(clock, sleep);
        self.shared.reset();
        self
    }

    /// Seeds the backoff jitter.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self.shared.reset();
        self
    }

    /// Names the layer in what observers receive (default `retry`).
    pub fn named(mut self, name: &str) -> Self {
        self.name = name.into();
        self
    }

    /// Tells `observer` every retry (`on_retry`, with the wait) and every request given up
    /// (`on_give_up`, with the core's reason: `max-attempts`, `budget`, `deadline`, ...).
    pub fn observer(mut self, observer: impl Observer) -> Self {
        let mut all = self.observers.to_vec();
        all.push(Arc::new(observer));
        self.observers = all.into();
        self
    }

    /// One budget for every service this layer wraps (one per client process). The other
    /// settings apply whether they are set before or after this.
    pub fn shared(mut self) -> Self {
        self.shared = Sharing::shared();
        self
    }

    fn make(&self) -> Arc<Shared> {
        let budget = match CoreBudget::new(&self.budget) {
            Ok(b) => b,
            Err(_) => unreachable!("the budget was accepted when it was set"),
        };
        Arc::new(Shared {
            budget: Mutex::new(budget),
            ledger: self.ledger.clone(),
            samples: Rng::new(self.seed.unwrap_or_else(random_seed)),
        })
    }
}

impl<S, P: Clone> Layer<S> for RetryLayer<P> {
    type Service = RetryService<S, P>;

    fn layer(&self, inner: S) -> Self::Service {
        RetryService {
            inner,
            retry: Arc::new(self.retry),
            shared: self.shared.get(|| self.make()),
            policy: self.policy.clone(),
            time: self.time.clone(),
            name: self.name.clone(),
            observers: self.observers.clone(),
        }
    }
}

/// A service whose failed calls are retried (see the [`tower` module docs](crate::tower)).
#[derive(Clone)]
pub struct RetryService<S, P> {
    inner: S,
    retry: Arc<RetryPolicy>,
    shared: Arc<Shared>,
    policy: P,
    time: Time,
    name: Arc<str>,
    observers: Arc<[Arc<dyn Observer>]>,
}

impl<S: fmt::Debug, P> fmt::Debug for RetryService<S, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryService")
            .field("inner", &self.inner)
            .field("retry", &self.retry)
            .finish_non_exhaustive()
    }
}

/// The response future of [`RetryService`].
pub type RetryFuture<Res> = Pin<Box<dyn Future<Output = Result<Res, BoxError>> + Send>>;

/// The request's retry state; dropped before the request is over, it hands back any budget grant.
struct Request {
    state: RetryState,
    retry: Arc<RetryPolicy>,
    shared: Arc<Shared>,
    time: Time,
}

impl Drop for Request {
    fn drop(&mut self) {
        if !self.state.is_finished() {
            let now = self.time.now();
            let (retry, state) = (&self.retry, &mut self.state);
            self.shared.with_budget(|b| retry.abandon(state, now, b));
        }
    }
}

/// Polls `fut` first, then the timer: an answer that is ready when the deadline passes wins, and a
/// timeout below (set from the same deadline) reports the timeout as its own failure.
async fn within<F: Future>(fut: F, timer: Option<SleepFuture>) -> Option<F::Output> {
    let mut fut = std::pin::pin!(fut);
    let mut timer = timer;
    std::future::poll_fn(move |cx| {
        if let Poll::Ready(out) = fut.as_mut().poll(cx) {
            return Poll::Ready(Some(out));
        }
        if let Some(t) = timer.as_mut()
            && t.as_mut().poll(cx).is_ready()
        {
            return Poll::Ready(None);
        }
        Poll::Pending
    })
    .await
}

impl<S, Req, P> Service<Req> for RetryService<S, P>
where
    S: Service<Req> + Clone + Send + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send,
    S::Response: Send + 'static,
    Req: Send + 'static,
    P: Policy<Req, S::Response>,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = RetryFuture<S::Response>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: Req) -> Self::Future {
        // The readied service takes the first attempt; a fresh clone waits for readiness before
        // each retry.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let (retry, shared, policy, clock) = (
            self.retry.clone(),
            self.shared.clone(),
            self.policy.clone(),
            self.time.clone(),
        );
        let (name, observers) = (self.name.clone(), self.observers.clone());
        Box::pin(async move {
            let now = clock.now();
            let state = shared.with_budget(|b| retry.start(now, b));
            let mut request = Request {
                state,
                retry: retry.clone(),
                shared: shared.clone(),
                time: clock.clone(),
            };
            let mut current = req;
            let mut first = true;
            loop {
                let copy = policy.clone_request(&current);
                if !first {
                    std::future::poll_fn(|cx| inner.poll_ready(cx))
                        .await
                        .map_err(Into::into)?;
                }
                first = false;
                let sent = clock.now();
                let deadline = retry.attempt_deadline(&request.state, sent);
                let timer = (deadline != Instant::MAX).then(|| {
                    policy.set_deadline(&mut current, deadline);
                    // A millisecond of grace: a timeout below, armed from the same deadline a
                    // moment later, fires first and reports the timeout itself (so a breaker
                    // between them counts it as a failure, not as a cancelled call).
                    clock.sleep_until(deadline.saturating_add(GRACE))
                });
                let result = match within(inner.call(current), timer).await {
                    Some(r) => r.map_err(Into::into),
                    None => Err(Box::new(TimedOut) as BoxError),
                };
                let class: Option<ErrorClass> = match &result {
                    Ok(res) => policy.response(res),
                    Err(e) => Some(policy.error(e)),
                };
                let now = clock.now();
                let Some(class) = class else {
                    shared.with_budget(|b| retry.on_success(&mut request.state, now, b));
                    return result;
                };
                let sample = shared.samples.next_u64();
                let decision = shared.with_budget(|b| {
                    retry.on_failure_with(&mut request.state, class, now, b, sample)
                });
                let reason = match (decision, copy) {
                    (RetryDecision::RetryAt(at), Some(next)) => {
                        let wait = at.saturating_duration_since(now).into();
                        for o in observers.iter() {
                            o.on_retry(&name, request.state.attempts() - 1, class, wait);
                        }
                        clock.sleep_until(at).await;
                        current = next;
                        continue;
                    }
                    // Retryable, but the request cannot be sent twice: the answer is final.
                    (RetryDecision::RetryAt(_), None) => {
                        shared.with_budget(|b| retry.abandon(&mut request.state, now, b));
                        None
                    }
                    (RetryDecision::GiveUp(reason), _) => Some(reason),
                };
                if let Some(reason) = reason {
                    for o in observers.iter() {
                        o.on_give_up(&name, request.state.attempts(), reason.name());
                    }
                }
                return match (result, reason) {
                    // A local refusal ends the call with the refusal itself (`Open`, ...).
                    (Err(last), Some(_)) if matches!(class, ErrorClass::Refused { .. }) => {
                        Err(last)
                    }
                    (Err(last), Some(reason)) => Err(Box::new(GaveUp {
                        reason,
                        attempts: request.state.attempts(),
                        last,
                    }) as BoxError),
                    (other, _) => other,
                };
            }
        })
    }
}

//! [`HedgeLayer`]: hedged requests around a service (Dean & Barroso, "The Tail at Scale").
//!
//! When a request is still unanswered after the policy's delay (fixed, or a quantile of recent
//! latencies: [`reliable_core::hedge`]), a copy is sent to a clone of the service, up to
//! `max_hedges`; the first **success** (by the [`Policy`]'s classification) wins and every copy
//! still in flight is dropped (cancelled: an HTTP client closes its connection). A copy that
//! fails waits for the others; when every copy has failed, the last answer is returned. With
//! [`HedgeLayer::copy_timeout`], each copy is timed from its own send and one still unanswered
//! then fails as a timeout. Only a request [`Policy::clone_request`] can copy is hedged (`None`:
//! not idempotent). With a
//! [`SharedLedger`], each hedge draws from the one budget of extra attempts that a
//! [`RetryLayer`](super::RetryLayer) given the same ledger draws its retries from; a refused hedge
//! is reported (`on_hedge_refused`) and the request goes on without it. Every draw is settled
//! when its copy ends, wins, loses or is dropped.
//!
//! Compared with tower's `hedge`: that one takes the first answer, success or failure, and times
//! hedges from a histogram rotated on a fixed period; this one waits for a success and reads its
//! delay from the core's fixed-memory quantile, and can bound hedges by the ledger.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};

use reliable_core::ConfigError;
use reliable_core::Instant;
use reliable_core::hedge::{HedgeConfig, HedgePolicy, Hedger, Idempotency, NoHedge};
use reliable_core::ledger::{Draw, Extra};
use reliable_core::outcome::{AttemptOutcome, ErrorClass};
use tower_layer::Layer;
use tower_service::Service;

use super::classify::Policy;
use super::error::{BoxError, TimedOut};
use super::ledger::SharedLedger;
use super::time::Time;
use crate::clock::Clock;
use crate::error::ShedReason;
use crate::observer::{NotSent, Observer};
use crate::sleep::{Sleep, SleepFuture};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// What every service of one layer shares.
#[derive(Clone)]
struct Config<P> {
    hedger: Arc<Mutex<Hedger>>,
    ledger: Option<SharedLedger>,
    /// Each copy's own timeout, from its own send.
    copy_timeout: Option<reliable_core::Duration>,
    policy: P,
    time: Time,
    name: Arc<str>,
    observers: Arc<[Arc<dyn Observer>]>,
}

/// Hedged requests (Dean & Barroso, "The Tail at Scale"): when a request is still unanswered
/// after the delay (fixed, or a quantile of recent latencies: [`reliable_core::hedge`]), a copy
/// goes to a clone of the service, up to `max_hedges`; the first **success** (by the policy's
/// classification) wins and every copy still in flight is dropped (an HTTP client closes its
/// connection). A copy that fails waits for the others; when every copy has failed, the last
/// answer is returned. Only a request the policy's `clone_request` can copy is hedged (`None`:
/// not idempotent). Every ledger draw is settled when its copy ends, wins, loses or is dropped.
///
/// Builds [`HedgeService`]s sharing one hedger (and its latency quantile). Setters keep it.
#[derive(Clone)]
pub struct HedgeLayer<P> {
    config: Config<P>,
}

impl<P> fmt::Debug for HedgeLayer<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HedgeLayer")
            .field("policy", lock(&self.config.hedger).policy())
            .field("ledger", &self.config.ledger.is_some())
            .finish_non_exhaustive()
    }
}

impl<P> HedgeLayer<P> {
    /// Hedges as `config` says; `policy` classifies answers and copies requests.
    pub fn new(config: HedgeConfig, policy: P) -> Result<Self, ConfigError> {
        Ok(HedgeLayer {
            config: Config {
                hedger: Arc::new(Mutex::new(Hedger::new(HedgePolicy::new(config)?))),
                ledger: None,
                copy_timeout: None,
                policy,
                time: Time::tokio(),
                name: "hedge".into(),
                observers: Arc::new([]),
            },
        })
    }

    /// The same layer with a hedger of its own, as this one's was when it was built: no
    /// latency recorded if this one's template never wrapped a service (a per-client hedger).
    #[cfg(feature = "policy")]
    pub(crate) fn fresh(&self) -> Self
    where
        P: Clone,
    {
        let hedger = lock(&self.config.hedger).clone();
        HedgeLayer {
            config: Config {
                hedger: Arc::new(Mutex::new(hedger)),
                ..self.config.clone()
            },
        }
    }

    /// Each hedge draws from `ledger`, the one budget of extra attempts a
    /// [`RetryLayer`](super::RetryLayer) given the same ledger draws its retries from (and feeds
    /// with first tries: without one above, only the ledger's floor is there to draw). A refused
    /// hedge is reported (`on_hedge_refused`) and the request goes on without it.
    pub fn ledger(mut self, ledger: SharedLedger) -> Self {
        self.config.ledger = Some(ledger);
        self
    }

    /// Each copy may take `timeout` from its own send (a policy file's `Call` timeout under a
    /// `Hedge`): its request carries that deadline ([`Policy::set_deadline`], never later than
    /// one a retry layer above set), and a copy still unanswered then is dropped and fails as
    /// [`TimedOut`](super::TimedOut), like any failed copy: the others race on. A retry layer's
    /// attempt timeout above still bounds the hedged request as a whole.
    pub fn copy_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.config.copy_timeout = Some(timeout.into());
        self
    }

    /// The same layer reading time from `clock` and timing hedges on `sleep`.
    pub fn with_time(mut self, clock: impl Clock, sleep: impl Sleep) -> Self {
        self.config.time = Time::new(clock, sleep);
        self
    }

    /// Names the layer in what observers receive (default `hedge`).
    pub fn named(mut self, name: &str) -> Self {
        self.config.name = name.into();
        self
    }

    /// Tells `observer` every hedge sent (`on_hedge`, numbered within its request from 2),
    /// refused (`on_hedge_refused`) and won (`on_hedge_won`), every copy cancelled
    /// (`on_attempt_cancelled`) and every ledger answer (`on_ledger`).
    pub fn observer(mut self, observer: impl Observer) -> Self {
        let mut all = self.config.observers.to_vec();
        all.push(Arc::new(observer));
        self.config.observers = all.into();
        self
    }
}

impl<S, P: Clone> Layer<S> for HedgeLayer<P> {
    type Service = HedgeService<S, P>;

    fn layer(&self, inner: S) -> Self::Service {
        HedgeService {
            inner,
            config: self.config.clone(),
        }
    }
}

/// A service whose slow requests are hedged (see [`HedgeLayer`]).
#[derive(Clone)]
pub struct HedgeService<S, P> {
    inner: S,
    config: Config<P>,
}

impl<S: fmt::Debug, P> fmt::Debug for HedgeService<S, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HedgeService")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

/// The response future of [`HedgeService`].
pub type HedgeFuture<Res> = Pin<Box<dyn Future<Output = Result<Res, BoxError>> + Send>>;

/// One copy of the request in flight: its number (1: the original), when it was sent and when
/// it times out, its future, and its ledger draw, settled when the copy is dropped whatever its
/// end.
struct Racer<F> {
    n: u32,
    sent: Instant,
    due: Option<Instant>,
    fut: Pin<Box<F>>,
    draw: Option<(SharedLedger, Draw, Time)>,
}

impl<F> Drop for Racer<F> {
    fn drop(&mut self) {
        if let Some((ledger, draw, time)) = self.draw.take() {
            ledger.lock().settle(draw, time.now());
        }
    }
}

impl<P> Config<P> {
    /// When a copy sent at `sent` times out, if it does; `req` is told so.
    fn time_copy<Req, Res>(&self, req: &mut Req, sent: Instant) -> Option<Instant>
    where
        P: Policy<Req, Res>,
    {
        let due = sent.saturating_add(self.copy_timeout?);
        self.policy.set_deadline(req, due);
        Some(due)
    }

    fn tell(&self, f: impl Fn(&dyn Observer, &str)) {
        for o in self.observers.iter() {
            f(&**o, &self.name);
        }
    }

    /// A hedge of `call` at `now`, if the rules and the ledger allow: its draw (`Ok(None)`
    /// without a ledger). `Err(true)`: refused, no other hedge of this request follows.
    fn try_hedge(
        &self,
        call: &mut reliable_core::hedge::HedgedCall,
        now: Instant,
    ) -> Result<Option<(SharedLedger, Draw, Time)>, bool> {
        let hedger = lock(&self.hedger);
        let Some(ledger) = &self.ledger else {
            return hedger.try_hedge(call, now).map(|()| None).map_err(|_| true);
        };
        let drawn = hedger.try_hedge_from(call, now, &mut ledger.lock());
        drop(hedger);
        if !matches!(drawn, Err(NoHedge::NotYet { .. })) {
            self.tell(|o, name| o.on_ledger(name, Extra::Hedge, drawn.is_ok()));
        }
        match drawn {
            Ok(draw) => Ok(Some((ledger.clone(), draw, self.time.clone()))),
            Err(NoHedge::Ledger(d)) => {
                let refusal = NotSent::Rejected(ShedReason::Ledger(d));
                self.tell(|o, name| o.on_hedge_refused(name, refusal));
                Err(true)
            }
            Err(_) => Err(true),
        }
    }
}

impl<S, Req, P> Service<Req> for HedgeService<S, P>
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
    type Future = HedgeFuture<S::Response>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: Req) -> Self::Future {
        let config = self.config.clone();
        let spare = config.policy.clone_request(&req);
        let idempotency = match spare {
            Some(_) => Idempotency::Idempotent,
            None => Idempotency::NotIdempotent,
        };
        // The readied service takes the original; a clone waits for readiness before each hedge.
        let clone = self.inner.clone();
        let mut first = std::mem::replace(&mut self.inner, clone.clone());
        let mut svc = clone;
        let start = config.time.now();
        let mut req = req;
        let due = config.time_copy::<Req, S::Response>(&mut req, start);
        let original = first.call(req);
        Box::pin(async move {
            let mut call = lock(&config.hedger).start(start, idempotency);
            let mut spare = spare;
            let mut flying = vec![Racer {
                n: 1,
                sent: start,
                due,
                fut: Box::pin(original),
                draw: None,
            }];
            let mut sent = 1;
            let mut hedging = spare.is_some();
            let mut timer: Option<(Instant, SleepFuture)> = None;
            std::future::poll_fn(|cx| {
                loop {
                    let mut i = 0;
                    while let Some(copy) = flying.get_mut(i) {
                        let Poll::Ready(result) = copy.fut.as_mut().poll(cx) else {
                            i += 1;
                            continue;
                        };
                        let result: Result<S::Response, BoxError> = result.map_err(Into::into);
                        let now = config.time.now();
                        let (n, latency) = (copy.n, now.saturating_duration_since(copy.sent));
                        let end = match &result {
                            Ok(res) => config
                                .policy
                                .response(res)
                                .map_or(AttemptOutcome::Success, AttemptOutcome::Failed),
                            Err(e) => AttemptOutcome::Failed(super::error_class(e)),
                        };
                        lock(&config.hedger).copy_ended(latency, end);
                        let failed = end != AttemptOutcome::Success;
                        flying.remove(i);
                        if failed && !flying.is_empty() {
                            continue;
                        }
                        if !failed && sent > 1 {
                            for loser in &flying {
                                let elapsed = now.saturating_duration_since(loser.sent);
                                lock(&config.hedger).copy_ended(elapsed, AttemptOutcome::Cancelled);
                                config.tell(|o, name| o.on_attempt_cancelled(name, loser.n));
                            }
                            config.tell(|o, name| o.on_hedge_won(name, n, n > 1));
                        }
                        return Poll::Ready(result);
                    }
                    let copy_due = flying.iter().filter_map(|c| c.due).min();
                    let hedge_at = hedging
                        .then(|| lock(&config.hedger).next_hedge_at(&call))
                        .flatten();
                    let Some(wake) = copy_due.into_iter().chain(hedge_at).min() else {
                        return Poll::Pending;
                    };
                    let now = config.time.now();
                    if copy_due.is_some_and(|due| now >= due) {
                        // Copies past their own timer: dropped (cancelled), failed as timeouts.
                        let (late, live): (Vec<_>, Vec<_>) = std::mem::take(&mut flying)
                            .into_iter()
                            .partition(|c| c.due.is_some_and(|due| now >= due));
                        flying = live;
                        let timeout = AttemptOutcome::Failed(ErrorClass::Timeout);
                        for copy in late {
                            let latency = now.saturating_duration_since(copy.sent);
                            lock(&config.hedger).copy_ended(latency, timeout);
                        }
                        if flying.is_empty() {
                            return Poll::Ready(Err(Box::new(TimedOut) as BoxError));
                        }
                        continue;
                    }
                    if hedge_at.is_none_or(|at| now < at) {
                        if timer.as_ref().is_none_or(|(due, _)| *due != wake) {
                            timer = Some((wake, config.time.sleep_until(wake)));
                        }
                        match timer.as_mut().map(|(_, t)| t.as_mut().poll(cx)) {
                            Some(Poll::Ready(())) => continue,
                            _ => return Poll::Pending,
                        }
                    }
                    match svc.poll_ready(cx) {
                        Poll::Pending => return Poll::Pending,
                        // A clone that cannot take a hedge: go on without.
                        Poll::Ready(Err(_)) => {
                            hedging = false;
                            continue;
                        }
                        Poll::Ready(Ok(())) => {}
                    }
                    let draw = match config.try_hedge(&mut call, now) {
                        Ok(draw) => draw,
                        Err(_) => {
                            hedging = false;
                            continue;
                        }
                    };
                    let Some(mut req) = spare.take() else {
                        hedging = false;
                        continue;
                    };
                    spare = config.policy.clone_request(&req);
                    let due = config.time_copy::<Req, S::Response>(&mut req, now);
                    sent += 1;
                    let n = sent;
                    config.tell(|o, name| o.on_hedge(name, n));
                    let fut = svc.call(req);
                    svc = svc.clone();
                    flying.push(Racer {
                        n,
                        sent: now,
                        due,
                        fut: Box::pin(fut),
                        draw,
                    });
                }
            })
            .await
        })
    }
}

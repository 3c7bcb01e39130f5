//! The tower face of the core's call engine: a service whose calls the engine
//! ([`reliable_core::engine`]) decides, through the same driver as
//! [`Reliable::call`](crate::Reliable::call) (`Driven::race`). The face owns only its I/O: it
//! readies and calls clones of the inner service for the copies the engine sends, puts each
//! copy's deadline on its request ([`Policy::set_deadline`]), reads answers with the
//! [`Policy`], and turns the engine's end into a response or a [`BoxError`].
//!
//! [`ReliableLayer`](super::ReliableLayer) drives the whole stack this way; the single layers
//! that would otherwise need a loop or a race of their own ([`RetryLayer`](super::RetryLayer),
//! [`HedgeLayer`](super::HedgeLayer)) drive an engine that holds their one layer.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use reliable_core::Duration;
use reliable_core::breaker::RejectReason;
use reliable_core::engine::{End, Ended, Refusal};
use reliable_core::hedge::Idempotency;
use reliable_core::outcome::ErrorClass;
use reliable_core::retry::{RetryConfig, RetryPolicy};
use tower_service::Service;

use super::classify::Policy;
use super::error::{BoxError, GaveUp, Open, OverLimit, OverRate, ProbeDenied, Throttled, TimedOut};
use crate::Reliable;
use crate::classify::Classify;
use crate::drive::{Driven, Layers};
use crate::error::Error;
use crate::observer::{CallEnd, NotSent, Observer};

/// How long after a copy's deadline a retry layer (or the whole stack) takes it as timed out, if
/// nothing below has answered: a timeout below (an HTTP client reading the request's [`Deadline`](super::Deadline))
/// fires first and reports the timeout itself, so a breaker between them counts it as a failure,
/// not as a cancelled call.
const GRACE: Duration = Duration::from_millis(1);

/// The response future of an engine-driven service.
pub(crate) type EngineFuture<Res> = Pin<Box<dyn Future<Output = Result<Res, BoxError>> + Send>>;

/// What the call returns when the engine gives up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ending {
    /// The whole stack (or a retry layer): an error after the last attempt is wrapped in a
    /// [`GaveUp`] with the reason; a local refusal below is returned as it is.
    Wrapped,
    /// A single layer that makes one attempt (a hedge layer): the last answer, as it came.
    Bare,
}

/// A copy's failure: an error response (with its class) or an error (with its class, which
/// the face may set itself: a request that cannot be sent twice is fatal).
enum Failed<Res> {
    Value(Res, ErrorClass),
    Error(BoxError, ErrorClass),
}

impl<Res> Failed<Res> {
    fn class(&self) -> ErrorClass {
        match self {
            Failed::Value(_, class) | Failed::Error(_, class) => *class,
        }
    }
}

/// A copy's answer read by `policy`: a success, or a failure with its class.
fn judge<Res, C: Classify<BoxError, Res>>(
    policy: &C,
    answer: Result<Res, BoxError>,
) -> Result<Res, Failed<Res>> {
    match answer {
        Ok(res) => match policy.ok(&res) {
            None => Ok(res),
            Some(class) => Err(Failed::Value(res, class)),
        },
        Err(e) => {
            let class = policy.error(&e);
            Err(Failed::Error(e, class))
        }
    }
}

/// A service whose calls the engine decides: copies go to clones of `inner`.
#[derive(Clone)]
pub(crate) struct Engine<S, P> {
    inner: S,
    reliable: Reliable,
    policy: P,
    /// The plan's retry policy for a request that cannot be sent twice: one attempt.
    once: Arc<RetryPolicy>,
    ending: Ending,
}

impl<S: fmt::Debug, P> fmt::Debug for Engine<S, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Engine")
            .field("inner", &self.inner)
            .field("reliable", &self.reliable.label())
            .finish_non_exhaustive()
    }
}

impl<S, P> Engine<S, P> {
    pub(crate) fn new(inner: S, reliable: Reliable, policy: P, ending: Ending) -> Self {
        let config = RetryConfig {
            max_attempts: Some(1),
            ..*reliable.inner.retry.config()
        };
        let once = RetryPolicy::new(config).unwrap_or(reliable.inner.retry);
        Engine {
            inner,
            reliable,
            policy,
            once: Arc::new(once),
            ending,
        }
    }

    /// The instance the engine draws from.
    pub(crate) fn reliable(&self) -> &Reliable {
        &self.reliable
    }

    pub(crate) fn get_ref(&self) -> &S {
        &self.inner
    }
}

impl<S, Req, P> Service<Req> for Engine<S, P>
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
    type Future = EngineFuture<S::Response>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: Req) -> Self::Future {
        // The readied service takes the first copy; a fresh clone is readied for each other.
        let clone = self.inner.clone();
        let readied = std::mem::replace(&mut self.inner, clone);
        let (svc, reliable, policy) = (
            self.inner.clone(),
            self.reliable.clone(),
            self.policy.clone(),
        );
        let (once, ending) = (self.once.clone(), self.ending);
        Box::pin(drive(reliable, readied, svc, req, policy, once, ending))
    }
}

/// `impl Service` for a newtype around an [`Engine`].
macro_rules! engine_service {
    ($name:ident) => {
        impl<S, Req, P> tower_service::Service<Req> for $name<S, P>
        where
            S: tower_service::Service<Req> + Clone + Send + 'static,
            S::Error: Into<$crate::tower::BoxError>,
            S::Future: Send,
            S::Response: Send + 'static,
            Req: Send + 'static,
            P: $crate::tower::Policy<Req, S::Response>,
        {
            type Response = S::Response;
            type Error = $crate::tower::BoxError;
            type Future = $crate::tower::engine::EngineFuture<S::Response>;

            fn poll_ready(
                &mut self,
                cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<Result<(), Self::Error>> {
                self.0.poll_ready(cx)
            }

            fn call(&mut self, req: Req) -> Self::Future {
                self.0.call(req)
            }
        }
    };
}
pub(crate) use engine_service;

/// One request through the engine.
async fn drive<S, Req, P>(
    reliable: Reliable,
    readied: S,
    svc: S,
    req: Req,
    policy: P,
    once: Arc<RetryPolicy>,
    ending: Ending,
) -> Result<S::Response, BoxError>
where
    S: Service<Req> + Clone + Send + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send,
    S::Response: Send + 'static,
    Req: Send + 'static,
    P: Policy<Req, S::Response>,
{
    let inner = &*reliable.inner;
    let layers = Layers::new(inner, true);
    // A request the policy cannot copy goes once, unhedged: its first answer is final.
    let spare = policy.clone_request(&req);
    let plan = match spare {
        Some(_) => layers.plan(),
        None => layers
            .plan_with(*once)
            .idempotency(Idempotency::NotIdempotent),
    };
    let (mut run, now, last) = Driven::<4>::begin(&plan, &layers, None);
    let mut original = Some(req);
    let mut readied = Some(readied);
    let send = move |_: u32, deadline: Option<reliable_core::Instant>| {
        let req = match original.take() {
            Some(req) => Some(req),
            None => spare.as_ref().and_then(|s| policy.clone_request(s)),
        };
        let (mut svc, ready) = match readied.take() {
            Some(s) => (s, true),
            None => (svc.clone(), false),
        };
        let policy = policy.clone();
        async move {
            let Some(mut req) = req else {
                let e: BoxError = "the request cannot be sent twice".into();
                return Err(Failed::Error(e, ErrorClass::Fatal));
            };
            if let Some(at) = deadline {
                policy.set_deadline(&mut req, at);
            }
            if !ready {
                let ready = std::future::poll_fn(|cx| svc.poll_ready(cx)).await;
                if let Err(e) = ready {
                    let e: BoxError = e.into();
                    let class = policy.error(&e);
                    return Err(Failed::Error(e, class));
                }
            }
            judge(&policy, svc.call(req).await.map_err(Into::into))
        }
    };
    // A hedge layer times its copies out on their deadlines, as its own timers did.
    let grace = (ending == Ending::Wrapped).then_some(GRACE);
    let (end, result) = run
        .race_within(now, last, send, &Failed::class, grace)
        .await;
    answer(end, result, ending)
}

/// What the call returns, from the engine's end.
fn answer<Res>(
    end: End,
    result: Result<Res, Error<Failed<Res>>>,
    ending: Ending,
) -> Result<Res, BoxError> {
    let error = match result {
        Ok(res) => return Ok(res),
        Err(e) => e,
    };
    let last = match error {
        Error::GaveUp { last, .. } => Some(last),
        Error::Rejected { last, .. } => last,
        Error::Open { .. } | Error::Timeout { .. } => None,
    };
    match end.result {
        Ended::GaveUp(reason) => match last {
            // An error response is returned as the server sent it.
            Some(Failed::Value(res, _)) => Ok(res),
            // A local refusal below ends the call with the refusal itself (`Open`, ...).
            Some(Failed::Error(e, ErrorClass::Refused { .. })) => Err(e),
            Some(Failed::Error(e, _)) if ending == Ending::Bare => Err(e),
            Some(Failed::Error(e, _)) => Err(Box::new(GaveUp {
                reason,
                attempts: end.attempts,
                last: e,
            })),
            None if ending == Ending::Bare => Err(Box::new(TimedOut)),
            None => Err(Box::new(GaveUp {
                reason,
                attempts: end.attempts,
                last: Box::new(TimedOut),
            })),
        },
        Ended::Refused(refusal) => Err(refused(refusal)),
        Ended::Ok { .. } | Ended::Cancelled => Err(Box::new(TimedOut)),
    }
}

/// A local refusal as the layers' own errors name it.
fn refused(refusal: Refusal) -> BoxError {
    match refusal {
        Refusal::Breaker(reason) => Box::new(Open {
            retry_after: match reason {
                RejectReason::Open { retry_after } => Some(retry_after.into()),
                _ => None,
            },
        }),
        Refusal::Throttle(shed) => Box::new(Throttled {
            probability_ppm: shed.probability_ppm,
        }),
        Refusal::Ledger(denied) => Box::new(ProbeDenied { denied }),
        Refusal::Limit(r) => Box::new(OverLimit { limit: r.limit }),
        Refusal::Rate(r) => Box::new(OverRate {
            retry_after: r.retry_after.into(),
        }),
    }
}

/// Which of an engine's reports a single layer passes on to its observers: the ones it made
/// before it drove the engine, so that a stack of single layers reports each thing once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reports {
    /// A retry layer: its retries and give-ups.
    Retry,
    /// A hedge layer: hedges sent, refused, won and the copies cancelled, and the ledger's
    /// answers to hedges.
    Hedge,
}

/// An observer that hears only what its layer reports (see [`Reports`]).
#[derive(Debug)]
pub(crate) struct Only(pub Reports, pub Arc<dyn Observer>);

impl Observer for Only {
    fn on_retry(&self, name: &str, attempt: u32, class: ErrorClass, delay: std::time::Duration) {
        if self.0 == Reports::Retry {
            self.1.on_retry(name, attempt, class, delay);
        }
    }
    fn on_give_up(&self, name: &str, attempts: u32, reason: &'static str) {
        if self.0 == Reports::Retry {
            self.1.on_give_up(name, attempts, reason);
        }
    }
    fn on_hedge(&self, name: &str, attempt: u32) {
        if self.0 == Reports::Hedge {
            self.1.on_hedge(name, attempt);
        }
    }
    fn on_hedge_refused(&self, name: &str, refusal: NotSent) {
        if self.0 == Reports::Hedge {
            self.1.on_hedge_refused(name, refusal);
        }
    }
    fn on_hedge_won(&self, name: &str, attempt: u32, hedge: bool) {
        if self.0 == Reports::Hedge {
            self.1.on_hedge_won(name, attempt, hedge);
        }
    }
    fn on_attempt_cancelled(&self, name: &str, attempt: u32) {
        if self.0 == Reports::Hedge {
            self.1.on_attempt_cancelled(name, attempt);
        }
    }
    fn on_ledger(&self, name: &str, kind: reliable_core::ledger::Extra, granted: bool) {
        if self.0 == Reports::Hedge && kind == reliable_core::ledger::Extra::Hedge {
            self.1.on_ledger(name, kind, granted);
        }
    }
    fn on_call_end(&self, _: &str, _: &CallEnd) {}
}

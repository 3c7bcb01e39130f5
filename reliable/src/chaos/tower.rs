//! The tower faces of chaos: [`ChaosLayer`] (the four strategies, by rate) and [`TimelineLayer`]
//! (a scenario's fault timeline, by wall clock).
//!
//! Both turn an injected answer into the service's own response or error through an [`Inject`]:
//! [`HttpAnswers`] builds an `http::Response` with the status and its headers (`Retry-After`,
//! `retry-after-ms`, `x-should-retry`), and a reset connection is an `io::Error` of kind
//! `ConnectionReset`. Put them below a retry layer and above the client, where a real answer would
//! come from: a retry, breaker or throttle above reads an injected answer as it reads a real one.
//!
//! ```
//! use reliable::chaos::ChaosSwitch;
//! use reliable::chaos::tower::{ChaosLayer, HttpAnswers};
//! use reliable_core::chaos::{ChaosConfig, FaultConfig, Injected};
//! use tower::{ServiceBuilder, ServiceExt, service_fn};
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), reliable::tower::BoxError> {
//! let switch = ChaosSwitch::new("api", ChaosConfig {
//!     fault: Some(FaultConfig { rate: 1.0, enabled: true, seed: 1,
//!         answer: Injected::Status { status: 503, retry_after: None, should_retry: None } }),
//!     ..ChaosConfig::OFF
//! })?;
//! let svc = ServiceBuilder::new()
//!     .layer(ChaosLayer::new(switch, HttpAnswers))
//!     .service(service_fn(|_: http::Request<()>| async {
//!         Ok::<_, std::io::Error>(http::Response::new(String::from("real")))
//!     }));
//! let res = svc.oneshot(http::Request::new(())).await?;
//! assert_eq!(res.status(), 503);
//! # Ok(()) }
//! ```

use super::{ChaosEvent, ChaosSwitch, injected_headers, killed, reset_error};
use crate::clock::Clock;
use crate::sleep::Sleep;
use crate::tower::{BoxError, TimedOut};
use reliable_core::Instant;
use reliable_core::answer::Answer;
use reliable_core::chaos::{AtAnswer, AtSend, FaultWindow, Injected, Strategy, Timeline};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::task::{Context, Poll};
use tower_layer::Layer;
use tower_service::Service;

/// How an injected answer becomes a service's response or error, and which real responses are
/// successes (for a timeline's error rate).
pub trait Inject<Res>: Clone + Send + Sync + 'static {
    /// The response or error `answer` stands for (a status, a reset connection; a timeout is
    /// [`TimedOut`]). A hang never gets here: its future stays pending.
    fn inject(&self, answer: Answer) -> Result<Res, BoxError>;

    /// Whether `res` is a success by the core's answer table.
    fn success(&self, res: &Res) -> bool;
}

/// Answers as `http::Response<B>`s with an empty (default) body.
#[derive(Clone, Copy, Debug, Default)]
pub struct HttpAnswers;

impl<B: Default> Inject<http::Response<B>> for HttpAnswers {
    fn inject(&self, answer: Answer) -> Result<http::Response<B>, BoxError> {
        match answer {
            Answer::Status { status, signals } => {
                let mut res = http::Response::new(B::default());
                *res.status_mut() = http::StatusCode::from_u16(status)?;
                for (name, value) in injected_headers(signals) {
                    res.headers_mut()
                        .insert(name, http::HeaderValue::try_from(value)?);
                }
                Ok(res)
            }
            Answer::Connection => Err(Box::new(reset_error())),
            Answer::Timeout => Err(Box::new(TimedOut)),
            Answer::Refused { .. } => Err("chaos: a local refusal cannot be injected".into()),
        }
    }

    fn success(&self, res: &http::Response<B>) -> bool {
        res.status().as_u16() < 400
    }
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

fn default_sleep() -> Arc<dyn Sleep> {
    Arc::new(crate::sleep::TokioSleep)
}

/// Wraps a service in a [`ChaosService`] that injects what its [`ChaosSwitch`] decides.
#[derive(Clone)]
pub struct ChaosLayer<I> {
    switch: ChaosSwitch,
    inject: I,
    sleep: Arc<dyn Sleep>,
}

impl<I> fmt::Debug for ChaosLayer<I> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChaosLayer")
            .field("switch", &self.switch)
            .finish_non_exhaustive()
    }
}

impl<I> ChaosLayer<I> {
    /// A layer over `switch` (clones of the switch flip this layer's strategies), answering
    /// through `inject`. Injected latency waits on tokio's timer.
    pub fn new(switch: ChaosSwitch, inject: I) -> Self {
        ChaosLayer {
            switch,
            inject,
            sleep: default_sleep(),
        }
    }

    /// Injected latency waits on `sleep` instead.
    pub fn with_sleep(mut self, sleep: impl Sleep) -> Self {
        self.sleep = Arc::new(sleep);
        self
    }

    /// The switch.
    pub fn switch(&self) -> &ChaosSwitch {
        &self.switch
    }
}

impl<S, I: Clone> Layer<S> for ChaosLayer<I> {
    type Service = ChaosService<S, I>;

    fn layer(&self, inner: S) -> Self::Service {
        ChaosService {
            inner,
            switch: self.switch.clone(),
            inject: self.inject.clone(),
            sleep: self.sleep.clone(),
        }
    }
}

/// The service [`ChaosLayer`] makes.
#[derive(Clone)]
pub struct ChaosService<S, I> {
    inner: S,
    switch: ChaosSwitch,
    inject: I,
    sleep: Arc<dyn Sleep>,
}

impl<S, I> fmt::Debug for ChaosService<S, I> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChaosService")
            .field("switch", &self.switch)
            .finish_non_exhaustive()
    }
}

pin_project_lite::pin_project! {
    #[project = InnerProj]
    enum Inner<F, Res> {
        Pass { #[pin] fut: F },
        Chaos { fut: BoxFuture<Result<Res, BoxError>> },
    }
}

pin_project_lite::pin_project! {
    /// The response future of [`ChaosService`] and [`TimelineService`]: the inner future as it is
    /// when nothing is injected, else a boxed one that injects.
    pub struct ChaosFuture<F, Res> {
        #[pin]
        inner: Inner<F, Res>,
    }
}

impl<F, Res> ChaosFuture<F, Res> {
    #[inline]
    fn pass(fut: F) -> Self {
        ChaosFuture {
            inner: Inner::Pass { fut },
        }
    }

    fn chaos(fut: BoxFuture<Result<Res, BoxError>>) -> Self {
        ChaosFuture {
            inner: Inner::Chaos { fut },
        }
    }
}

impl<F, Res> fmt::Debug for ChaosFuture<F, Res> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self.inner {
            Inner::Pass { .. } => "ChaosFuture::Pass",
            Inner::Chaos { .. } => "ChaosFuture::Chaos",
        })
    }
}

impl<F, Res, E> Future for ChaosFuture<F, Res>
where
    F: Future<Output = Result<Res, E>>,
    E: Into<BoxError>,
{
    type Output = Result<Res, BoxError>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().inner.project() {
            InnerProj::Pass { fut } => fut.poll(cx).map_err(Into::into),
            InnerProj::Chaos { fut } => fut.as_mut().poll(cx),
        }
    }
}

impl<S, I, Req> Service<Req> for ChaosService<S, I>
where
    S: Service<Req>,
    S::Future: Send + 'static,
    S::Response: Send + 'static,
    S::Error: Into<BoxError>,
    I: Inject<S::Response>,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = ChaosFuture<S::Future, S::Response>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    #[inline]
    fn call(&mut self, req: Req) -> Self::Future {
        let Some(d) = self.switch.decide() else {
            return ChaosFuture::pass(self.inner.call(req));
        };
        // A fault or outcome answers without calling the service.
        let fut = match d.answer {
            None => Some(self.inner.call(req)),
            Some(_) => None,
        };
        let (sleep, inject) = (self.sleep.clone(), self.inject.clone());
        ChaosFuture::chaos(Box::pin(async move {
            if let Some(delay) = d.latency {
                sleep.sleep(delay.into()).await;
            }
            match (d.answer, fut) {
                (Some((_, Injected::Hang)), _) => std::future::pending().await,
                (Some((_, injected)), _) => inject.inject(injected.answer()),
                (None, Some(fut)) => fut.await.map_err(Into::into),
                (None, None) => Err("chaos: nothing to answer".into()),
            }
        }))
    }
}

// ---------------------------------------------------------------------------------------------

/// What every clone of a [`TimelineLayer`] shares.
struct Replay {
    faults: Vec<FaultWindow>,
    seed: u64,
    start: Instant,
    clock: Arc<dyn Clock>,
    sleep: Arc<dyn Sleep>,
    attempts: AtomicU64,
    report: Option<ChaosSwitch>,
}

impl Replay {
    fn now(&self) -> reliable_core::Duration {
        self.clock.now().saturating_duration_since(self.start)
    }

    fn sleep_until(&self, at: reliable_core::Duration) -> crate::sleep::SleepFuture {
        let left = at.saturating_sub(self.now());
        self.sleep.sleep(left.into())
    }

    fn report(
        &self,
        strategy: Strategy,
        attempt: u64,
        delay: Option<reliable_core::Duration>,
        answer: Option<Answer>,
    ) {
        if let Some(s) = &self.report {
            s.report(ChaosEvent {
                strategy,
                attempt,
                delay: delay.map(Into::into),
                answer,
            });
        }
    }
}

/// Plays a scenario's client-visible faults ([`FaultWindow`]s, times since `start`) on every
/// attempt through it, with the simulator's meaning (see [`reliable_core::chaos`]):
///
/// | fault | an attempt through the layer |
/// |---|---|
/// | `Outage` (fail fast) | sent in the window: a 503 at once, the service not called |
/// | `Outage` (hang) | sent in the window: no answer ever (only a timeout above ends it) |
/// | `Partition` | sent in the window: held until it heals, then sent; an answer arriving in the window: held until it heals |
/// | `ErrorRate` | a success arriving in the window: a 500 with the combined probability |
/// | `LatencyInflation` | sent in the window: its real latency stretched by the combined factor (a wait of `(factor − 1) ×` the time it took) |
/// | `Throttle` | sent in the window: a `share` of them get a 429 with the `Retry-After`, the service not called |
///
/// Three differences with the simulator, all because a client cannot act for the server: a held
/// attempt whose caller gives up (a timeout above) is dropped, while the simulator still
/// delivers it to the server when the partition heals; an outage's or a throttle's answer
/// costs the real server nothing, where the simulator counts the arrival; and a latency
/// inflation stretches each answer here, while the simulator stretches each job's service
/// time, so the server's queue grows with it (a client-side stretch sends no extra load: where
/// the queue is what the scenario is about, play the inflation on the server, as `emulate`
/// does). Each injection is
/// reported as a chaos event through the switch given to [`TimelineLayer::report_to`]: an
/// outage, throttle or error-rate answer as `Chaos.OnFault`, a hold or a stretch as
/// `Chaos.OnLatency`. [`kill_all`](super::kill_all) stops it too.
#[derive(Clone)]
pub struct TimelineLayer<I> {
    replay: Arc<Replay>,
    inject: I,
}

impl<I> fmt::Debug for TimelineLayer<I> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TimelineLayer")
            .field("faults", &self.replay.faults)
            .field("start", &self.replay.start)
            .finish_non_exhaustive()
    }
}

impl<I> TimelineLayer<I> {
    /// A replay of `faults` from `start` on `clock`, waiting on `sleep`, its draws from `seed`.
    /// A fault that does not validate is refused with its index: `faults[2].rate: ...`.
    pub fn new(
        faults: Vec<FaultWindow>,
        seed: u64,
        start: Instant,
        clock: impl Clock,
        sleep: impl Sleep,
        inject: I,
    ) -> Result<Self, String> {
        Timeline::new(&faults, seed).map_err(|(i, e)| format!("faults[{i}].{e}"))?;
        Ok(TimelineLayer {
            replay: Arc::new(Replay {
                faults,
                seed,
                start,
                clock: Arc::new(clock),
                sleep: Arc::new(sleep),
                attempts: AtomicU64::new(0),
                report: None,
            }),
            inject,
        })
    }

    /// A replay from now on tokio's clock and timer (make it inside the runtime).
    pub fn from_now(faults: Vec<FaultWindow>, seed: u64, inject: I) -> Result<Self, String> {
        let clock = crate::clock::TokioClock::new();
        let start = clock.now();
        Self::new(faults, seed, start, clock, crate::sleep::TokioSleep, inject)
    }

    /// Reports each injection to `switch`'s observers (its strategies are not used).
    pub fn report_to(mut self, switch: ChaosSwitch) -> Self {
        if let Some(r) = Arc::get_mut(&mut self.replay) {
            r.report = Some(switch);
        }
        self
    }

    /// Attempts through it so far.
    pub fn attempts(&self) -> u64 {
        self.replay.attempts.load(Relaxed)
    }
}

impl<S, I: Clone> Layer<S> for TimelineLayer<I> {
    type Service = TimelineService<S, I>;

    fn layer(&self, inner: S) -> Self::Service {
        TimelineService {
            inner,
            replay: self.replay.clone(),
            inject: self.inject.clone(),
        }
    }
}

/// The service [`TimelineLayer`] makes.
#[derive(Clone)]
pub struct TimelineService<S, I> {
    inner: S,
    replay: Arc<Replay>,
    inject: I,
}

impl<S, I> fmt::Debug for TimelineService<S, I> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TimelineService").finish_non_exhaustive()
    }
}

impl<S, I, Req> Service<Req> for TimelineService<S, I>
where
    S: Service<Req>,
    S::Future: Send + 'static,
    S::Response: Send + 'static,
    S::Error: Into<BoxError>,
    I: Inject<S::Response>,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = ChaosFuture<S::Future, S::Response>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: Req) -> Self::Future {
        if killed() {
            return ChaosFuture::pass(self.inner.call(req));
        }
        let r = self.replay.clone();
        let n = r.attempts.fetch_add(1, Relaxed);
        let tl = match Timeline::new(&r.faults, r.seed) {
            Ok(tl) => tl,
            Err(_) => {
                return ChaosFuture::pass(self.inner.call(req));
            }
        };
        // Decide the send now: an answer or a hang never calls the service.
        let first = tl.at_send(r.now(), n);
        let fut = match first {
            AtSend::Answer(a) => {
                r.report(Strategy::Fault, n, None, Some(a));
                let res = self.inject.inject(a);
                return ChaosFuture::chaos(Box::pin(async move { res }));
            }
            AtSend::Hang => {
                r.report(Strategy::Fault, n, None, Some(Answer::Timeout));
                return ChaosFuture::chaos(Box::pin(std::future::pending()));
            }
            AtSend::Send {
                latency_factor: 1.0,
            } if tl.end() <= r.now() => {
                // The timeline is over: nothing more to play.
                return ChaosFuture::pass(self.inner.call(req));
            }
            _ => self.inner.call(req),
        };
        let inject = self.inject.clone();
        ChaosFuture::chaos(Box::pin(async move {
            let tl = Timeline::new(&r.faults, r.seed).map_err(|_| "chaos: bad timeline")?;
            let mut at_send = first;
            let factor = loop {
                match at_send {
                    AtSend::Hold { until } => {
                        r.report(
                            Strategy::Latency,
                            n,
                            Some(until.saturating_sub(r.now())),
                            None,
                        );
                        r.sleep_until(until).await;
                        at_send = tl.at_send(r.now(), n);
                    }
                    AtSend::Answer(a) => {
                        r.report(Strategy::Fault, n, None, Some(a));
                        return inject.inject(a);
                    }
                    AtSend::Hang => {
                        r.report(Strategy::Fault, n, None, Some(Answer::Timeout));
                        return std::future::pending().await;
                    }
                    AtSend::Send { latency_factor } => break latency_factor,
                }
            };
            let sent = r.now();
            let res = fut.await.map_err(Into::into);
            if factor > 1.0 {
                let took = r.now().saturating_sub(sent);
                let extra = reliable_core::Duration::from_nanos(
                    (took.as_nanos() as f64 * (factor - 1.0)).min(u64::MAX as f64) as u64,
                );
                r.report(Strategy::Latency, n, Some(extra), None);
                r.sleep.sleep(extra.into()).await;
            }
            loop {
                let success = matches!(&res, Ok(res) if inject.success(res));
                match tl.at_answer(r.now(), n, success) {
                    AtAnswer::Deliver => return res,
                    AtAnswer::Hold { until } => {
                        r.report(
                            Strategy::Latency,
                            n,
                            Some(until.saturating_sub(r.now())),
                            None,
                        );
                        r.sleep_until(until).await;
                    }
                    AtAnswer::Fail(a) => {
                        r.report(Strategy::Fault, n, None, Some(a));
                        return inject.inject(a);
                    }
                }
            }
        }))
    }
}

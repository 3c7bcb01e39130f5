//! The Rust faces' runners: each builds the face's stock policy from a sequence's policy block,
//! drives it in virtual time against a scripted fake, and returns the trace.
//!
//! The fakes only *answer*; every class in a trace comes from the face's own classification
//! entry point (`Classify` for `Reliable`'s calls, `HttpPolicy` and `error_class` for the tower
//! layers), and every acceptance from the face's rule (`reliable::classify::accepted`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration as StdDuration, SystemTime};

use reliable::Reliable;
use reliable::clock::{Clock, ManualClock, TokioClock};
use reliable::http::HttpError;
use reliable::sleep::TokioSleep;
use reliable::tower::{BoxError, Deadline, HttpPolicy, ReliableLayer, TimedOut};
use reliable_core::outcome::ErrorClass;
use tower::{Layer, ServiceExt};

use crate::{Scripted, Sequence, Trace};

/// A face: its name and its runner.
#[derive(Clone, Copy, Debug)]
pub struct Face {
    /// Its name in reports.
    pub name: &'static str,
    /// Runs a sequence, answering its trace.
    pub run: fn(&Sequence) -> Result<String, String>,
    /// Why the face cannot express a sequence (it is then listed, not run), or `None`.
    pub skips: fn(&Sequence) -> Option<String>,
}

/// An async attempt is a future, dropped (interrupted) at its timer: such a face cannot run a
/// sequence whose attempts cannot be interrupted.
fn interrupted(s: &Sequence) -> Option<String> {
    s.policy.uninterruptible.then(|| {
        "uninterruptible: an async attempt is a future, dropped (interrupted) at its timer".into()
    })
}

/// Whether `face` follows the semantics the engine fixed (an answer that opens the breaker ends
/// the call at once): the faces that drive the engine do.
pub fn follows_engine(face: &str) -> bool {
    matches!(
        face,
        "engine"
            | "reliable-call"
            | "reliable-call-blocking"
            | "tower-reliable-layer"
            | "simulator"
            | "embassy"
    )
}

/// Whether a generated sequence whose expected trace is `want` is pending for `face`: the face
/// does not follow the engine's semantics yet, and the trace shows them (an attempt's answer
/// opened the breaker and the call ended at once, refused by it, where a face deciding with
/// its own loop retries into the open breaker).
pub fn pending_generated(face: &str, want: &str) -> bool {
    if follows_engine(face) {
        return false;
    }
    let lines: Vec<&str> = want.lines().collect();
    lines.windows(2).any(|w| {
        w[0].contains("\"ev\":\"breaker\"")
            && w[0].contains("\"to\":\"open\"")
            && w[1].contains("\"ev\":\"refused\",\"by\":\"breaker\"")
    })
}

/// The face that writes the expected traces: the core's call engine, driven directly.
pub const REFERENCE: Face = ALL[4];

/// Every Rust face; the engine (the reference) fifth, the embassy wrapper after it.
pub const ALL: [Face; 6] = [
    Face {
        name: "reliable-call",
        run: reliable_call,
        skips: interrupted,
    },
    Face {
        name: "reliable-call-blocking",
        run: reliable_call_blocking,
        skips: |s| {
            s.policy
                .hedge
                .map(|_| "hedge: call_blocking runs on the caller's thread alone, and a copy needs a thread (call_blocking_detached hedges, on threads)".to_string())
        },
    },
    Face {
        name: "tower-reliable-layer",
        run: tower_reliable_layer,
        // Every nesting: the layer is built from the builder carrying the sequence's nesting
        // (`Builder::nesting`), as `reliable::policy`'s `Route::layer` builds it.
        skips: interrupted,
    },
    Face {
        name: "simulator",
        run: crate::simulator::run,
        skips: crate::simulator::skips,
    },
    Face {
        name: "engine",
        run: crate::engine::run,
        skips: |_| None,
    },
    Face {
        name: "embassy",
        run: crate::embassy::run,
        skips: crate::embassy::skips,
    },
];

type Failure = Box<dyn std::error::Error + Send + Sync>;

/// The answers of call `i`, as the fakes read them.
fn answers(s: &Sequence, i: usize) -> Vec<Scripted> {
    s.calls[i]
        .answers
        .iter()
        .filter_map(|a| a.kind().ok())
        .collect()
}

fn accepted(class: Option<ErrorClass>) -> bool {
    class.is_none_or(reliable::classify::accepted)
}

/// The error a fake returns for a failed status or a dropped connection.
fn failure(a: &Scripted) -> Option<Failure> {
    match a {
        Scripted::Status(code, _) if *code < 400 => None,
        Scripted::Status(code, headers) => Some(Box::new(HttpError::new(
            *code,
            &headers[..],
            SystemTime::now(),
        ))),
        Scripted::Reset | Scripted::Hang => Some(Box::new(std::io::Error::from(
            std::io::ErrorKind::ConnectionReset,
        ))),
    }
}

fn paused_runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .map_err(|e| e.to_string())
}

/// Records a timeout for an attempt dropped by the face's timer before it answered.
struct Pending {
    trace: Trace,
    n: u32,
    done: bool,
}

impl Pending {
    /// The attempt answered: nothing to record on drop.
    fn settle(mut self) {
        self.done = true;
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        // A loser of a hedged race is cancelled, not timed out (the face wrote that).
        if !self.done && !self.trace.was_cancelled(self.n) {
            let class = Some(ErrorClass::Timeout);
            self.trace.answer(self.n, class, accepted(class));
        }
    }
}

/// The sequence's throttle draws (none without a throttle).
fn draws(s: &Sequence) -> crate::Draws {
    s.policy.throttle().map(|(_, d)| d).unwrap_or_default()
}

/// A runner error if the face took more throttle draws than the script has.
fn check_draws(s: &Sequence, draws: &crate::Draws) -> Result<(), String> {
    match draws.exhausted() {
        true => Err(format!("{}: throttle draws exhausted", s.name)),
        false => Ok(()),
    }
}

/// What every runner adds to the instance it runs: the seed, the trace as its observer, the
/// sequence's throttle draws (with a throttle).
pub fn instrumented(
    b: reliable::Builder,
    s: &Sequence,
    trace: &Trace,
    draws: &crate::Draws,
) -> reliable::Builder {
    let b = b.seed(1).observer(trace.observer());
    match s.policy.throttle() {
        Some(_) => {
            let draws = draws.clone();
            b.throttle_draws(move || draws.next())
        }
        None => b,
    }
}

fn builder(s: &Sequence, trace: &Trace, draws: &crate::Draws) -> reliable::Builder {
    let b = Reliable::builder("conformance").retry(s.policy.retry());
    let b = instrumented(b, s, trace, draws);
    let p = &s.policy;
    let b = match p.throttle() {
        Some((config, _)) => b.throttle(config),
        None => b,
    };
    let b = match p.breaker() {
        Some(c) => b.breaker(c),
        None => b.no_breaker(),
    };
    let b = match p.nested_otherwise() {
        true => b.nesting(p.gates()),
        false => b,
    };
    let b = match p.budget() {
        Some(c) => b.budget(c),
        None => b,
    };
    let b = if p.idempotent { b.idempotent() } else { b };
    let b = match p.hedge() {
        Some(c) => b.hedge(c),
        None => b,
    };
    let b = match p.copy_timeout() {
        Some(t) => b.copy_timeout(t.into()),
        None => b,
    };
    let b = match p.ledger() {
        Some(c) => b.ledger(c),
        None => b,
    };
    let b = match p.limit() {
        Some(c) => b.limit(c),
        None => b,
    };
    match p.rate_limit() {
        Some(c) => b.rate_limit(c),
        None => b,
    }
}

/// `Reliable::call` on tokio's paused clock.
fn reliable_call(s: &Sequence) -> Result<String, String> {
    reliable_call_with(s, &|trace, draws| Ok(builder(s, trace, draws)))
}

/// Makes the builder of a runner's instance, given the trace and the throttle's draws.
pub type MakeBuilder<'a> = &'a dyn Fn(&Trace, &crate::Draws) -> Result<reliable::Builder, String>;

/// [`Reliable::call`] on tokio's paused clock, the instance built from `make` (the runner adds
/// the clock and the sleep): the `reliable-call` face's runner, for any way of building it.
pub fn reliable_call_with(s: &Sequence, make: MakeBuilder<'_>) -> Result<String, String> {
    paused_runtime()?.block_on(async {
        let t0 = tokio::time::Instant::now();
        let trace = Trace::new(Arc::new(move || t0.elapsed().as_millis() as u64));
        let draws = draws(s);
        let rel = make(&trace, &draws)?
            .clock(TokioClock::new())
            .sleep(TokioSleep)
            .build()
            .map_err(|e| e.to_string())?;
        for (i, call) in s.calls.iter().enumerate() {
            tokio::time::sleep_until(t0 + StdDuration::from_millis(call.start_ms)).await;
            trace.start_call(i);
            let script = answers(s, i);
            let invalid = AtomicBool::new(false);
            let result = rel
                .call(|| {
                    let n = trace.attempt();
                    let a = script.get(n as usize - 1).cloned();
                    let mut pending = Pending {
                        trace: trace.clone(),
                        n,
                        done: false,
                    };
                    let latency = s.calls[i]
                        .answers
                        .get(n as usize - 1)
                        .map_or(0, |a| a.latency_ms);
                    let invalid = &invalid;
                    async move {
                        let Some(a) = a else {
                            pending.settle();
                            invalid.store(true, Ordering::Relaxed);
                            return Err(Failure::from("script exhausted"));
                        };
                        if a == Scripted::Hang {
                            return std::future::pending().await;
                        }
                        tokio::time::sleep(StdDuration::from_millis(latency)).await;
                        pending.done = true;
                        let error = failure(&a);
                        let class = error.as_ref().map(|e| reliable::ByType.error_of(e));
                        pending.trace.answer(n, class, accepted(class));
                        error.map_or(Ok(()), Err)
                    }
                })
                .await;
            if invalid.load(Ordering::Relaxed) {
                return Err(format!("{}: call {i}: script exhausted", s.name));
            }
            trace.end(result.is_ok());
        }
        check_draws(s, &draws)?;
        Ok(trace.text())
    })
}

/// `Reliable::call_blocking` on a manual clock: an attempt's latency advances it, and an answer
/// later than the attempt's deadline (the token the face hands over) arrives at the deadline.
fn reliable_call_blocking(s: &Sequence) -> Result<String, String> {
    reliable_call_blocking_with(s, &|trace, draws| Ok(builder(s, trace, draws)))
}

/// [`Reliable::call_blocking`] on a manual clock, the instance built from `make` (the runner
/// adds the clock): the `reliable-call-blocking` face's runner, for any way of building it.
pub fn reliable_call_blocking_with(s: &Sequence, make: MakeBuilder<'_>) -> Result<String, String> {
    let clock = ManualClock::new();
    let c = clock.clone();
    let trace = Trace::new(Arc::new(move || c.now().as_nanos() / 1_000_000));
    let draws = draws(s);
    let rel = make(&trace, &draws)?
        .manual_time(clock.clone())
        .build()
        .map_err(|e| e.to_string())?;
    for (i, call) in s.calls.iter().enumerate() {
        clock.set(StdDuration::from_millis(call.start_ms));
        trace.start_call(i);
        let script = answers(s, i);
        let invalid = AtomicBool::new(false);
        let result = rel.call_blocking_cancellable(|token| {
            let n = trace.attempt();
            let Some(a) = script.get(n as usize - 1) else {
                invalid.store(true, Ordering::Relaxed);
                return Err(failure(&Scripted::Reset).unwrap_or_else(|| "exhausted".into()));
            };
            let latency = StdDuration::from_millis(s.calls[i].answers[n as usize - 1].latency_ms);
            let left = token.remaining();
            let hang = *a == Scripted::Hang;
            match left {
                // Work that cannot be interrupted answers when it answers.
                Some(_) if s.policy.uninterruptible && !hang => clock.advance(latency),
                Some(left) if hang || latency >= left => {
                    clock.advance(left);
                    let class = Some(ErrorClass::Timeout);
                    trace.answer(n, class, accepted(class));
                    return Err(Box::new(std::io::Error::from(std::io::ErrorKind::TimedOut)));
                }
                None if hang => {
                    invalid.store(true, Ordering::Relaxed);
                    return Err("a timeout with no timer".into());
                }
                _ => clock.advance(latency),
            }
            let error = failure(a);
            let class = error.as_ref().map(|e| reliable::ByType.error_of(e));
            trace.answer(n, class, accepted(class));
            error.map_or(Ok(()), Err)
        });
        if invalid.load(Ordering::Relaxed) {
            return Err(format!("{}: call {i}: script exhausted", s.name));
        }
        trace.end(result.is_ok());
    }
    check_draws(s, &draws)?;
    Ok(trace.text())
}

/// `ReliableLayer` (from the same builder as `Reliable::call`'s) with the stock `HttpPolicy`,
/// over a scripted tower service that, like an
/// HTTP client, fails an attempt with `TimedOut` at the deadline the layer put on the request.
fn tower_reliable_layer(s: &Sequence) -> Result<String, String> {
    tower_reliable_layer_with(s, &|trace, draws| {
        // The same builder as `Reliable::call`'s: the layer is the engine's tower face.
        ReliableLayer::from_builder(builder(s, trace, draws), HttpPolicy::new())
            .map_err(|e| e.to_string())
    })
}

/// Makes a runner's `ReliableLayer`, given the trace and the throttle's draws.
pub type MakeLayer<'a> =
    &'a dyn Fn(&Trace, &crate::Draws) -> Result<ReliableLayer<HttpPolicy>, String>;

/// The tower `ReliableLayer` made by `make` (the runner sets its time to tokio's paused clock)
/// over the scripted service: the `tower-reliable-layer` face's runner, for any way of building
/// the layer.
pub fn tower_reliable_layer_with(s: &Sequence, make: MakeLayer<'_>) -> Result<String, String> {
    tower_service_with(s, &|trace, draws, fake| {
        let layer = make(trace, draws)?.with_time(TokioClock::new(), TokioSleep);
        Ok(TowerService::new(layer.layer(fake)))
    })
}

/// A tower service of the HTTP shape the tower runner drives: the scripted service, and what a
/// runner's layers make of it.
pub type TowerService =
    tower::util::BoxCloneService<http::Request<()>, http::Response<()>, BoxError>;

/// Wraps the scripted service in a runner's tower layers (on tokio's paused clock), given the
/// trace and the throttle's draws.
pub type WrapService<'a> =
    &'a dyn Fn(&Trace, &crate::Draws, TowerService) -> Result<TowerService, String>;

/// The scripted service, which like an HTTP client fails an attempt with `TimedOut` at the
/// deadline the layers put on the request, wrapped by `wrap` (any tower layers, such as
/// `reliable::policy`'s `RouteLayer`), on tokio's paused clock: the tower runner. Only what the
/// service and the caller see is written by the runner (attempts, answers, ends); the rest of a
/// trace comes from the observer `wrap` gives the layers, if any.
pub fn tower_service_with(s: &Sequence, wrap: WrapService<'_>) -> Result<String, String> {
    paused_runtime()?.block_on(async {
        let t0 = tokio::time::Instant::now();
        let trace = Trace::new(Arc::new(move || t0.elapsed().as_millis() as u64));
        let draws = draws(s);
        let script: Arc<Vec<Vec<Scripted>>> =
            Arc::new((0..s.calls.len()).map(|i| answers(s, i)).collect());
        let latency: Arc<Vec<Vec<u64>>> = Arc::new(
            s.calls
                .iter()
                .map(|c| c.answers.iter().map(|a| a.latency_ms).collect())
                .collect(),
        );
        let call_index = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (tr, ci) = (trace.clone(), call_index.clone());
        let fake = tower::service_fn(move |req: http::Request<()>| {
            let (trace, script, latency) = (tr.clone(), script.clone(), latency.clone());
            let i = ci.load(Ordering::SeqCst);
            async move {
                let n = trace.attempt();
                let k = trace.reach();
                let deadline = req
                    .extensions()
                    .get::<Deadline>()
                    .map(|Deadline(d)| t0 + StdDuration::from_nanos(d.as_nanos()));
                let Some(a) = script[i].get(k).cloned() else {
                    return Err::<http::Response<()>, BoxError>("script exhausted".into());
                };
                let ready =
                    t0.max(tokio::time::Instant::now()) + StdDuration::from_millis(latency[i][k]);
                if a == Scripted::Hang || deadline.is_some_and(|d| ready >= d) {
                    match deadline {
                        Some(d) => tokio::time::sleep_until(d).await,
                        None => std::future::pending::<()>().await,
                    }
                    let e: BoxError = Box::new(TimedOut);
                    let class = Some(reliable::tower::error_class(&e));
                    trace.answer(n, class, accepted(class));
                    return Err(e);
                }
                tokio::time::sleep_until(ready).await;
                match a {
                    Scripted::Status(code, headers) => {
                        let mut res = http::Response::builder().status(code);
                        for (k, v) in &headers {
                            res = res.header(k.as_str(), v.as_str());
                        }
                        let res = res.body(()).map_err(|e| Box::new(e) as BoxError)?;
                        let class = reliable::Classify::<reliable::tower::BoxError, _>::ok(
                            &HttpPolicy::new(),
                            &res,
                        );
                        trace.answer(n, class, accepted(class));
                        Ok(res)
                    }
                    _ => {
                        let e: BoxError =
                            Box::new(std::io::Error::from(std::io::ErrorKind::ConnectionReset));
                        let class = Some(reliable::tower::error_class(&e));
                        trace.answer(n, class, accepted(class));
                        Err(e)
                    }
                }
            }
        });
        let svc = wrap(&trace, &draws, TowerService::new(fake))?;
        for (i, call) in s.calls.iter().enumerate() {
            tokio::time::sleep_until(t0 + StdDuration::from_millis(call.start_ms)).await;
            trace.start_call(i);
            call_index.store(i, Ordering::SeqCst);
            let req = http::Request::get("http://127.0.0.1/")
                .body(())
                .map_err(|e| e.to_string())?;
            let ok = match svc.clone().oneshot(req).await {
                Ok(res) => {
                    reliable::Classify::<reliable::tower::BoxError, _>::ok(&HttpPolicy::new(), &res)
                        .is_none()
                }
                Err(_) => false,
            };
            trace.end(ok);
        }
        check_draws(s, &draws)?;
        Ok(trace.text())
    })
}

/// Writes the chaos line of each answer the chaos layer injects (its strategy's event as Polly
/// names it, its number through the layer).
#[derive(Debug)]
struct ChaosLines(Trace);

impl reliable::observer::Observer for ChaosLines {
    fn on_chaos(&self, _: &str, event: &reliable::chaos::ChaosEvent) {
        match (event.delay, event.answer) {
            (Some(delay), _) => self.0.delayed(event.attempt, delay.as_millis() as u64),
            (None, Some(_)) => {
                self.0.injected(event.strategy.event(), event.attempt);
            }
            (None, None) => {}
        }
    }
}

/// Why the tower chaos face cannot run a chaos sequence: an injected hang is ended by the layer
/// dropping the copy, after the engine decided, so its answer line would come late.
pub fn tower_chaos_skips(s: &Sequence) -> Option<String> {
    let c = s.policy.chaos?;
    let hangs = [c.fault, c.outcome]
        .iter()
        .flatten()
        .any(|b| b.transport == Some(crate::Transport::Timeout));
    hangs.then(|| "chaos: an injected hang is dropped by the layer, not answered".into())
}

/// The tower face with chaos: `ReliableLayer` (as [`tower_reliable_layer`] builds it) over
/// `reliable::chaos::tower::ChaosLayer` (the sequence's chaos block as a `ChaosSwitch`, answering
/// with `HttpAnswers`) over the scripted service. Each injected answer is classed by the layer's
/// own `HttpPolicy` (written by a tap between the two layers); the call's chaos switches are
/// flipped on the switch before its first attempt.
pub fn tower_chaos(s: &Sequence) -> Result<String, String> {
    use reliable::chaos::ChaosSwitch;
    use reliable::chaos::tower::{ChaosLayer, HttpAnswers};
    let Some(block) = s.policy.chaos else {
        return Err(format!("{}: no chaos block", s.name));
    };
    let calls: Arc<Vec<crate::CallScript>> = Arc::new(s.calls.clone());
    tower_service_with(s, &|trace, draws, fake| {
        let switch = ChaosSwitch::builder("conformance", block.config())
            .observer(ChaosLines(trace.clone()))
            .build()
            .map_err(|e| e.to_string())?;
        let chaos = TowerService::new(
            ChaosLayer::new(switch.clone(), HttpAnswers)
                .with_sleep(TokioSleep)
                .layer(fake),
        );
        let seen = Arc::new(std::sync::atomic::AtomicUsize::new(usize::MAX));
        let (tap_trace, calls) = (trace.clone(), calls.clone());
        let tap = tower::service_fn(move |req: http::Request<()>| {
            let (trace, switch, seen, calls) = (
                tap_trace.clone(),
                switch.clone(),
                seen.clone(),
                calls.clone(),
            );
            let svc = chaos.clone();
            async move {
                let i = trace.call();
                if seen.swap(i, Ordering::SeqCst) != i
                    && let Some(script) = calls.get(i)
                {
                    for (strategy, on) in script.chaos_switches() {
                        switch.set_enabled(strategy, on);
                    }
                }
                let mut svc = svc;
                let ready = svc.ready().await?;
                let before = trace.attempts();
                let fut = tower::Service::call(ready, req);
                if trace.attempts() == before {
                    return fut.await;
                }
                // The chaos layer answered: the answer line, as the layer above classes it.
                let n = trace.attempts();
                let r = fut.await;
                let class = match &r {
                    Ok(res) => reliable::Classify::<reliable::tower::BoxError, _>::ok(
                        &HttpPolicy::new(),
                        res,
                    ),
                    Err(e) => Some(reliable::tower::error_class(e)),
                };
                trace.answer(n, class, accepted(class));
                r
            }
        });
        let layer = ReliableLayer::from_builder(builder(s, trace, draws), HttpPolicy::new())
            .map_err(|e| e.to_string())?
            .with_time(TokioClock::new(), TokioSleep);
        Ok(TowerService::new(layer.layer(TowerService::new(tap))))
    })
}

//! Hedging, the ledger of extra attempts and the limiters, next to tower 0.5.3's `hedge` and
//! `limit` in the same run.
//!
//! tower's pieces are `Service` middleware: each call is `poll_ready` + `call` + one poll of the
//! response future, on an inner service whose future is ready at once, with a no-op waker, inside
//! a tokio runtime's context (tower's hedge and rate limit make tokio timers). Ours are the
//! decisions alone, `now` passed in. So tower's figures include its future machinery and clock
//! reads, which a caller of ours pays separately (see `benches/README.md`).

use std::convert::Infallible;
use std::future::{Future, Ready, ready};
use std::hint::black_box;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration as StdDuration;

use criterion::Criterion;
use reliable_core::budget::RatioConfig;
use reliable_core::hedge::{HedgeConfig, HedgePolicy, Hedger, Idempotency};
use reliable_core::ledger::{Extra, ExtraLedger};
use reliable_core::limit::{
    Completion, Limiter, LimiterConfig, LimiterPolicy, RateConfig, RateLimiter, RatePolicy,
};
use reliable_core::{Duration, Instant};
use tower::Service;
use tower::retry::budget::{Budget as _, TpsBudget};

const STEP: Duration = Duration::from_nanos(25);
/// The latency each of our calls records: 10 ms, as tower's hedge histogram is prefilled.
const LATENCY: Duration = Duration::from_millis(10);

/// An inner service that answers at once.
#[derive(Clone, Copy)]
pub struct Echo;

impl Service<u32> for Echo {
    type Response = u32;
    type Error = Infallible;
    type Future = Ready<Result<u32, Infallible>>;
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }
    fn call(&mut self, req: u32) -> Self::Future {
        ready(Ok(req))
    }
}

/// tower's hedge policy: every request may be hedged.
#[derive(Clone, Copy)]
pub struct Always;

impl tower::hedge::Policy<u32> for Always {
    fn clone_request(&self, req: &u32) -> Option<u32> {
        Some(*req)
    }
    fn can_retry(&self, _: &u32) -> bool {
        true
    }
}

/// One call through a tower service: ready, call, one poll (the inner future is ready, so the
/// response is too).
#[inline]
pub fn tower_call<S: Service<u32>>(svc: &mut S, cx: &mut Context<'_>, req: u32) {
    match svc.poll_ready(cx) {
        Poll::Ready(Ok(())) => {}
        _ => panic!("tower service not ready"),
    }
    let fut = pin!(svc.call(req));
    match fut.poll(cx) {
        Poll::Ready(r) => {
            black_box(r.is_ok());
        }
        Poll::Pending => panic!("tower response pending"),
    }
}

pub fn tokio_context() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime")
}

/// tower's hedge with 1,000 latencies of 10 ms recorded, 10 needed, at p95: armed on every call.
pub fn tower_hedge() -> tower::hedge::Hedge<Echo, Always> {
    tower::hedge::Hedge::new_with_mock_latencies(
        Echo,
        Always,
        10,
        0.95,
        StdDuration::from_secs(10),
        &[10; 1_000],
    )
}

pub fn p95_hedger() -> Hedger {
    let mut h = Hedger::new(HedgePolicy::new(HedgeConfig::p95()).expect("valid"));
    for _ in 0..1_000 {
        h.record(LATENCY);
    }
    h
}

/// Per call: start it, ask when its hedge is due (to set a timer), record its latency.
#[inline]
pub fn arm_record(h: &mut Hedger, now: Instant) {
    let call = h.start(black_box(now), black_box(Idempotency::Idempotent));
    black_box(h.next_hedge_at(&call));
    h.record(black_box(LATENCY));
}

/// The same, and the hedge fires: the rules and the ledger say yes, the draw is settled.
#[inline]
pub fn hedge_from_ledger(h: &mut Hedger, l: &mut ExtraLedger, now: Instant) {
    l.on_first_try(now);
    let mut call = h.start(black_box(now), black_box(Idempotency::Idempotent));
    let due = h.next_hedge_at(&call).unwrap_or(now);
    match h.try_hedge_from(&mut call, due, l) {
        Ok(draw) => l.settle(draw, due),
        Err(no) => {
            black_box(no);
        }
    }
    h.record(black_box(LATENCY));
}

/// A 100% ledger (with Finagle's reserve), so every call earns its hedge.
pub fn full_ledger() -> ExtraLedger {
    ExtraLedger::from_config(RatioConfig {
        ratio: 1.0,
        ..RatioConfig::finagle()
    })
    .expect("valid")
}

/// A first try, a hedge drawn, settled.
#[inline]
pub fn draw_settle(l: &mut ExtraLedger, now: Instant) {
    l.on_first_try(black_box(now));
    match l.try_draw(black_box(Extra::Hedge), black_box(now)) {
        Ok(draw) => l.settle(draw, now),
        Err(denied) => {
            black_box(denied);
        }
    }
}

/// Acquire, and release after `LATENCY` with a success.
#[inline]
pub fn acquire_release(l: &mut Limiter, now: Instant) {
    match l.try_acquire(black_box(now)) {
        Ok(p) => l.release(p, black_box(Completion::Success), now + LATENCY),
        Err(r) => {
            black_box(r);
        }
    }
}

/// A GCRA limiter at 10⁹ calls per second, bursts of 100: never refuses at one call per 25 ns.
pub fn rate_limiter() -> RateLimiter {
    RateLimiter::new(
        RatePolicy::new(RateConfig {
            rate: 1_000_000_000,
            period: Duration::from_secs(1),
            burst: 100,
        })
        .expect("valid"),
    )
}

/// tower's rate limit at 2⁴⁰ calls per second: never refuses.
pub fn tower_rate_limit() -> tower::limit::RateLimit<Echo> {
    tower::limit::RateLimit::new(
        Echo,
        tower::limit::rate::Rate::new(1 << 40, StdDuration::from_secs(1)),
    )
}

pub fn hedge_decision(c: &mut Criterion) {
    let mut g = c.benchmark_group("hedge_decision");
    let mut hedger = p95_hedger();
    let mut now = Instant::from_secs(1);
    g.bench_function("reliable_p95_arm_record", |b| {
        b.iter(|| {
            now += black_box(STEP);
            arm_record(black_box(&mut hedger), now);
        })
    });
    let mut hedger = p95_hedger();
    let mut ledger = full_ledger();
    let mut now = Instant::from_secs(1);
    g.bench_function("reliable_p95_hedge_from_ledger", |b| {
        b.iter(|| {
            now += black_box(STEP);
            hedge_from_ledger(black_box(&mut hedger), black_box(&mut ledger), now);
        })
    });
    let rt = tokio_context();
    let _guard = rt.enter();
    let mut cx = Context::from_waker(Waker::noop());
    let mut svc = Echo;
    g.bench_function("bare_service_call", |b| {
        b.iter(|| tower_call(black_box(&mut svc), &mut cx, black_box(7)))
    });
    let mut svc = tower_hedge();
    g.bench_function("tower_hedge", |b| {
        b.iter(|| tower_call(black_box(&mut svc), &mut cx, black_box(7)))
    });
    g.finish();
}

pub fn ledger_draw(c: &mut Criterion) {
    let mut g = c.benchmark_group("ledger_draw");
    let mut ledger: ExtraLedger = ExtraLedger::from_config(RatioConfig::finagle()).expect("valid");
    let mut now = Instant::from_secs(1);
    g.bench_function("reliable_first_try_draw_settle", |b| {
        b.iter(|| {
            now += black_box(STEP);
            draw_settle(black_box(&mut ledger), now);
        })
    });
    let mut ledger = full_ledger();
    let mut now = Instant::from_secs(1);
    g.bench_function("reliable_first_try_draw_settle_granted", |b| {
        b.iter(|| {
            now += black_box(STEP);
            draw_settle(black_box(&mut ledger), now);
        })
    });
    let tower = TpsBudget::new(StdDuration::from_secs(10), 10, 0.2);
    g.bench_function("tower_tps_budget", |b| {
        b.iter(|| {
            let t = black_box(&tower);
            t.deposit();
            black_box(t.withdraw())
        })
    });
    g.finish();
}

pub fn limiter(config: LimiterConfig) -> Limiter {
    Limiter::new(LimiterPolicy::new(config).expect("valid"))
}

pub fn limiter_acquire_release(c: &mut Criterion) {
    let mut g = c.benchmark_group("limiter_acquire_release");
    macro_rules! ours {
        ($name:literal, $config:expr) => {{
            let mut l = limiter($config);
            let mut now = Instant::from_secs(1);
            g.bench_function($name, |b| {
                b.iter(|| {
                    now += black_box(STEP);
                    acquire_release(black_box(&mut l), now);
                })
            });
        }};
    }
    ours!("reliable_bulkhead", LimiterConfig::bulkhead(100));
    ours!("reliable_aimd", LimiterConfig::aimd());
    ours!("reliable_gradient", LimiterConfig::gradient());
    let mut rate = rate_limiter();
    let mut now = Instant::from_secs(1);
    g.bench_function("reliable_rate", |b| {
        b.iter(|| {
            now += black_box(STEP);
            black_box(black_box(&mut rate).try_acquire(black_box(now)))
        })
    });
    let rt = tokio_context();
    let _guard = rt.enter();
    let mut cx = Context::from_waker(Waker::noop());
    let mut svc = Echo;
    g.bench_function("bare_service_call", |b| {
        b.iter(|| tower_call(black_box(&mut svc), &mut cx, black_box(7)))
    });
    let mut svc = tower::limit::ConcurrencyLimit::new(Echo, 100);
    g.bench_function("tower_concurrency_limit", |b| {
        b.iter(|| tower_call(black_box(&mut svc), &mut cx, black_box(7)))
    });
    let mut svc = tower_rate_limit();
    g.bench_function("tower_rate_limit", |b| {
        b.iter(|| tower_call(black_box(&mut svc), &mut cx, black_box(7)))
    });
    g.finish();
}

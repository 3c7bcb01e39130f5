//! Runs one hot path many times, for instruction counts under callgrind (which, unlike wall time
//! on shared machines, are repeatable):
//!
//! ```sh
//! cargo build -p reliable-benches --example profile --profile bench
//! valgrind --tool=callgrind target/release/examples/profile closed_rate100 1000000
//! valgrind --tool=callgrind target/release/examples/profile closed_rate100 2000000
//! ```
//!
//! Prints the scenario names when called without one. Instructions per call: the difference of the
//! two totals over the count, which leaves out the setup (a few thousand instructions, more for
//! recloser, which allocates).

use std::hint::black_box;

use reliable_core::backoff::{BackoffConfig, BackoffPolicy, Jitter};
use reliable_core::breaker::{
    AtomicCountWindow, BreakerConfig, BreakerPolicy, CircuitBreaker, CountWindow, NoWindow,
    OpenConfig, Outcome, SharedBreaker, State, WindowConfig,
};
use reliable_core::budget::{Budget, RatioBudget, RatioConfig, RatioPolicy};
use reliable_core::outcome::ErrorClass;
use reliable_core::throttle::{AdaptiveThrottle, ThrottleConfig, ThrottlePolicy};
use reliable_core::{Duration, Instant};

const STEP: Duration = Duration::from_nanos(25);

/// The hedging, ledger and limiter benchmarks' per-call bodies, shared with criterion's.
#[allow(dead_code)]
#[path = "../benches/hot_path/hedge_limit.rs"]
mod hedge_limit;

fn consecutive() -> BreakerPolicy {
    BreakerPolicy::new(BreakerConfig {
        consecutive_failures: Some(3),
        open: OpenConfig {
            duration: Duration::from_secs(30),
            growth: 1.0,
            max: None,
            jitter: 0.0,
            strictly_after: false,
        },
        ..BreakerConfig::new()
    })
    .expect("valid")
}

fn rate100() -> BreakerPolicy {
    BreakerPolicy::new(BreakerConfig {
        failure_rate: Some(0.5),
        minimum_calls: 100,
        window: WindowConfig::Count { calls: 100 },
        ..BreakerConfig::new()
    })
    .expect("valid")
}

const SCENARIOS: &[&str] = &[
    "closed_consecutive",
    "closed_rate100",
    "closed_consecutive_fail5",
    "closed_rate100_fail5",
    "closed_rate100_fail7",
    "recloser",
    "recloser_fail5",
    "recloser_fail7",
    "shared_closed_consecutive",
    "shared_closed_rate100",
    "backoff_none",
    "backoff_full",
    "backoff_equal",
    "backoff_decorrelated",
    "backoff_proportional",
    "ratio_pair",
    "throttle",
    "hedge_arm_record",
    "quantile_record",
    "hedge_from_ledger",
    "ledger_draw",
    "ledger_draw_granted",
    "tower_tps_budget",
    "bulkhead",
    "aimd",
    "gradient",
    "rate",
    "bare_service_call",
    "tower_hedge",
    "tower_concurrency_limit",
    "tower_rate_limit",
];

/// Runs `body(now)` `n` times, `now` advancing by `STEP`.
#[inline(always)]
fn timed(n: u64, mut body: impl FnMut(Instant)) {
    let mut now = Instant::from_secs(1);
    for _ in 0..n {
        now += black_box(STEP);
        body(now);
    }
}

#[inline(never)]
fn hedge_scenario(name: &str, n: u64) -> bool {
    use hedge_limit::*;
    use reliable_core::limit::LimiterConfig;
    match name {
        "hedge_arm_record" => {
            let mut h = p95_hedger();
            timed(n, |now| arm_record(black_box(&mut h), now));
        }
        "quantile_record" => {
            let mut q = reliable_core::hedge::LatencyQuantile::new(950_000, 1_000);
            for _ in 0..n {
                black_box(&mut q).record(black_box(Duration::from_millis(10)));
            }
        }
        "hedge_from_ledger" => {
            let (mut h, mut l) = (p95_hedger(), full_ledger());
            timed(n, |now| {
                hedge_from_ledger(black_box(&mut h), black_box(&mut l), now)
            });
        }
        "ledger_draw" => {
            let mut l = reliable_core::ledger::ExtraLedger::from_config(RatioConfig::finagle())
                .expect("valid");
            timed(n, |now| draw_settle(black_box(&mut l), now));
        }
        "ledger_draw_granted" => {
            let mut l = full_ledger();
            timed(n, |now| draw_settle(black_box(&mut l), now));
        }
        "tower_tps_budget" => {
            use tower::retry::budget::Budget as _;
            let t =
                tower::retry::budget::TpsBudget::new(std::time::Duration::from_secs(10), 10, 0.2);
            for _ in 0..n {
                let t = black_box(&t);
                t.deposit();
                black_box(t.withdraw());
            }
        }
        "bulkhead" | "aimd" | "gradient" => {
            let config = match name {
                "bulkhead" => LimiterConfig::bulkhead(100),
                "aimd" => LimiterConfig::aimd(),
                _ => LimiterConfig::gradient(),
            };
            let mut l = limiter(config);
            timed(n, |now| acquire_release(black_box(&mut l), now));
        }
        "rate" => {
            let mut r = rate_limiter();
            timed(n, |now| {
                let _ = black_box(black_box(&mut r).try_acquire(now));
            });
        }
        "bare_service_call" | "tower_hedge" | "tower_concurrency_limit" | "tower_rate_limit" => {
            let rt = tokio_context();
            let _guard = rt.enter();
            let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
            match name {
                "bare_service_call" => {
                    let mut svc = Echo;
                    for _ in 0..n {
                        tower_call(black_box(&mut svc), &mut cx, black_box(7));
                    }
                }
                "tower_hedge" => {
                    let mut svc = tower_hedge();
                    for _ in 0..n {
                        tower_call(black_box(&mut svc), &mut cx, black_box(7));
                    }
                }
                "tower_concurrency_limit" => {
                    let mut svc = tower::limit::ConcurrencyLimit::new(Echo, 100);
                    for _ in 0..n {
                        tower_call(black_box(&mut svc), &mut cx, black_box(7));
                    }
                }
                _ => {
                    let mut svc = tower_rate_limit();
                    for _ in 0..n {
                        tower_call(black_box(&mut svc), &mut cx, black_box(7));
                    }
                }
            }
        }
        _ => return false,
    }
    true
}

/// Every `EVERY`-th call fails (`EVERY == 0`: none does), as in the breaker benchmarks: the answer
/// goes through `black_box`, so neither side knows it in advance.
#[derive(Default)]
struct Pattern<const EVERY: u32>(u32);

impl<const EVERY: u32> Pattern<EVERY> {
    #[inline(always)]
    fn next_fails(&mut self) -> bool {
        if EVERY == 0 {
            return black_box(false);
        }
        self.0 += 1;
        if self.0 == EVERY {
            self.0 = 0;
        }
        black_box(self.0 == 0)
    }
}

macro_rules! closed_loop {
    ($b:expr, $n:expr, $every:expr) => {{
        let mut now = Instant::from_secs(1);
        let mut pattern = Pattern::<$every>::default();
        for _ in 0..$n {
            now += black_box(STEP);
            if let Ok(p) = $b.try_acquire(black_box(now)) {
                let outcome = if pattern.next_fails() {
                    Outcome::Failure
                } else {
                    Outcome::Success
                };
                black_box($b.record(p, outcome, black_box(now)));
            }
        }
        // Neither rule trips on these patterns: every call was admitted and recorded.
        assert_eq!($b.state(now), State::Closed);
    }};
}

// Each breaker scenario is a function of its own, so its hot path is inlined as into a caller's
// loop, not into a `main` that holds every scenario.

#[inline(never)]
fn closed_consecutive<const EVERY: u32>(n: u64) {
    let policy = consecutive();
    let mut b = CircuitBreaker::<_, NoWindow>::with_storage(&policy).expect("fits");
    closed_loop!(b, n, EVERY);
}

#[inline(never)]
fn closed_rate100<const EVERY: u32>(n: u64) {
    let policy = rate100();
    let mut b = CircuitBreaker::<_, CountWindow<100, 2>>::with_storage(&policy).expect("fits");
    closed_loop!(b, n, EVERY);
}

#[inline(never)]
fn shared_closed_consecutive<const EVERY: u32>(n: u64) {
    let policy = consecutive();
    let b = SharedBreaker::<_, NoWindow>::with_storage(&policy).expect("fits");
    closed_loop!(b, n, EVERY);
}

#[inline(never)]
fn shared_closed_rate100<const EVERY: u32>(n: u64) {
    let policy = rate100();
    let b = SharedBreaker::<_, AtomicCountWindow<100, 2>>::with_storage(&policy).expect("fits");
    closed_loop!(b, n, EVERY);
}

/// recloser's default, which `rate100` matches: opens at 50% failures over the last 100 calls.
#[inline(never)]
fn recloser_default<const EVERY: u32>(n: u64) {
    let r = recloser::Recloser::custom().build();
    let mut pattern = Pattern::<EVERY>::default();
    for _ in 0..n {
        let fails = pattern.next_fails();
        black_box(&black_box(&r).call(|| if fails { Err(()) } else { Ok(()) }));
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(scenario) = args.next() else {
        println!("scenarios: {}", SCENARIOS.join(" "));
        return;
    };
    let n: u64 = args
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    match scenario.as_str() {
        "closed_consecutive" => closed_consecutive::<0>(n),
        "closed_rate100" => closed_rate100::<0>(n),
        "closed_consecutive_fail5" => closed_consecutive::<5>(n),
        "closed_rate100_fail5" => closed_rate100::<5>(n),
        // 7 does not divide 100: the call each call evicts from the window often had the other
        // outcome (with every 5th failing, it always had the same one).
        "closed_rate100_fail7" => closed_rate100::<7>(n),
        "recloser" => recloser_default::<0>(n),
        "recloser_fail5" => recloser_default::<5>(n),
        "recloser_fail7" => recloser_default::<7>(n),
        "shared_closed_consecutive" => shared_closed_consecutive::<0>(n),
        "shared_closed_rate100" => shared_closed_rate100::<0>(n),
        "backoff_none"
        | "backoff_full"
        | "backoff_equal"
        | "backoff_decorrelated"
        | "backoff_proportional" => {
            let jitter = match scenario.as_str() {
                "backoff_none" => Jitter::None,
                "backoff_full" => Jitter::Full,
                "backoff_equal" => Jitter::Equal,
                "backoff_decorrelated" => Jitter::Decorrelated,
                _ => Jitter::Proportional { fraction: 0.1 },
            };
            let policy = BackoffPolicy::new(BackoffConfig::exponential(
                Duration::from_millis(100),
                2.0,
                Duration::from_secs(10),
                jitter,
            ))
            .expect("valid");
            let mut backoff = policy.backoff();
            let mut x = 1u64;
            for _ in 0..n {
                if backoff.retries() == black_box(8) {
                    backoff.reset();
                }
                x = reliable_core::sample::splitmix64(x);
                black_box(backoff.next_delay_with(x));
            }
        }
        "ratio_pair" => {
            let mut b =
                RatioBudget::<10>::new(RatioPolicy::new(RatioConfig::finagle()).expect("valid"))
                    .expect("fits");
            let mut now = Instant::from_secs(1);
            for _ in 0..n {
                now += black_box(STEP);
                b.on_first_try(black_box(now));
                let _ = black_box(b.try_retry(ErrorClass::Transient, black_box(now)));
            }
        }
        "throttle" => {
            let policy = ThrottlePolicy::new(ThrottleConfig::google_sre()).expect("valid");
            let mut t = AdaptiveThrottle::<12>::new(policy).expect("fits");
            let mut now = Instant::from_secs(1);
            let mut x = 1u64;
            for i in 0..n {
                now += black_box(STEP);
                x = reliable_core::sample::splitmix64(x);
                if t.try_acquire_with(black_box(now), x).is_ok() {
                    t.record(now, i % 3 == 0);
                }
            }
        }
        other if hedge_scenario(other, n) => {}
        other => {
            eprintln!(
                "unknown scenario {other}; scenarios: {}",
                SCENARIOS.join(" ")
            );
            std::process::exit(2);
        }
    }
}

//! A client calling a flaky downstream through a retry policy, a 10% retry budget and a circuit
//! breaker, all driven by a virtual clock: the core never reads a clock or sleeps, so a minute of
//! traffic with a 20-second outage runs in microseconds and gives the same output every time.
//!
//! ```sh
//! cargo run -p reliable-core --example flaky_client
//! ```

use rand_core::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use reliable_core::backoff::{BackoffConfig, Jitter};
use reliable_core::breaker::{
    BreakerConfig, BreakerPolicy, CircuitBreaker, HalfOpenConfig, OpenConfig, Outcome, ProbeRule,
    Transition, WindowConfig,
};
use reliable_core::budget::{AnyBudget, BudgetConfig, RatioConfig};
use reliable_core::outcome::ErrorClass;
use reliable_core::retry::{RetryConfig, RetryDecision, RetryPolicy};
use reliable_core::{ConfigError, Duration, Instant};

/// The downstream: 2% of calls fail, and every call fails from 20 s to 40 s.
fn downstream(now: Instant, rng: &mut impl Rng) -> Result<(), ErrorClass> {
    let outage = (Instant::from_secs(20)..Instant::from_secs(40)).contains(&now);
    if outage || rng.next_u64().is_multiple_of(50) {
        Err(ErrorClass::Transient)
    } else {
        Ok(())
    }
}

fn log(t: Transition) {
    println!(
        "{:>7.3}s  breaker {} -> {}",
        t.at.since_origin().as_secs_f64(),
        t.from,
        t.to
    );
}

fn main() -> Result<(), ConfigError> {
    // Policies are validated once; a bad field is a ConfigError naming it.
    let retry = RetryPolicy::new(RetryConfig {
        max_attempts: Some(4),
        ..RetryConfig::new(BackoffConfig::exponential(
            Duration::from_millis(50),
            2.0,
            Duration::from_secs(2),
            Jitter::Full,
        ))
    })?;
    let mut budget: AnyBudget = AnyBudget::from_config(BudgetConfig::Ratio(RatioConfig {
        ratio: 0.1,
        min_per_sec: 1,
        ..RatioConfig::percent(0.1)
    }))?;
    // Trip at >= 50% failures over the last 20 calls; stay open 1 s, doubling per failed probe up
    // to 8 s, with ±20% jitter; one probe at a time; two successes in a row close it.
    let breaker_policy = BreakerPolicy::new(BreakerConfig {
        failure_rate: Some(0.5),
        minimum_calls: 10,
        window: WindowConfig::Count { calls: 20 },
        open: OpenConfig {
            duration: Duration::from_secs(1),
            growth: 2.0,
            max: Some(Duration::from_secs(8)),
            jitter: 0.2,
            strictly_after: false,
        },
        half_open: HalfOpenConfig {
            max_in_flight: Some(1),
            rule: ProbeRule::Consecutive { successes: 2 },
            probe_timeout: Duration::from_secs(5),
            decide_at_minimum: false,
            max_wait: None,
            max_wait_closes: false,
        },
        ..BreakerConfig::new()
    })?;
    // Transitions go to one place, the observer: here a function that prints them.
    let mut breaker = CircuitBreaker::new(&breaker_policy)?
        .with_seed(7)
        .observe(log);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);

    let (mut requests, mut ok, mut attempts, mut shed) = (0u32, 0u32, 0u32, 0u32);
    let mut now = Instant::ZERO;
    // One serial client: a request, its retries, 100 ms of think time, the next request.
    while now < Instant::from_secs(60) {
        requests += 1;
        let mut request = retry.start(now, &mut budget);
        loop {
            let permit = match breaker.try_acquire(now) {
                Ok(permit) => permit,
                Err(_rejected) => {
                    // Fail fast: nothing reaches the downstream while the breaker is open.
                    shed += 1;
                    retry.abandon(&mut request, now, &mut budget);
                    break;
                }
            };
            attempts += 1;
            let result = downstream(now, &mut rng);
            // One classification serves the breaker and the retry policy.
            let outcome = result.map_or_else(Outcome::from, |()| Outcome::Success);
            breaker.record(permit, outcome, now);
            match result {
                Ok(()) => {
                    ok += 1;
                    retry.on_success(&mut request, now, &mut budget);
                    break;
                }
                Err(class) => {
                    match retry.on_failure(&mut request, class, now, &mut budget, &mut rng) {
                        RetryDecision::RetryAt(at) => now = at,
                        RetryDecision::GiveUp(_) => break,
                    }
                }
            }
        }
        now += Duration::from_millis(100);
    }
    println!(
        "{requests} requests: {ok} succeeded, {shed} shed by the open breaker; \
         {attempts} attempts reached the downstream ({:.2} per request)",
        f64::from(attempts) / f64::from(requests)
    );
    Ok(())
}

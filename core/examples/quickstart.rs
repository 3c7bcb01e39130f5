use reliable_core::breaker::{BreakerConfig, BreakerPolicy, CircuitBreaker, Outcome, RejectReason};
use reliable_core::outcome::ErrorClass;
use reliable_core::{ConfigError, Instant};

/// Your call (a stand-in: a downstream that is down), its failure classified once.
fn http_post(_path: &str) -> Result<String, ErrorClass> {
    Err(ErrorClass::Transient)
}

fn main() -> Result<(), ConfigError> {
    // Validated once: an invalid config is an error naming the field, never a panic later.
    let mut breaker = CircuitBreaker::new(BreakerPolicy::new(BreakerConfig::reliablekit())?)?;
    for tick in 0..25 {
        // The core never reads a clock: pass your platform's (a hardware timer, Instant::now).
        let now = Instant::from_millis(tick * 100);
        let permit = match breaker.try_acquire(now) {
            Ok(permit) => permit,
            Err(rejection) => {
                if let RejectReason::Open { retry_after } = rejection.reason {
                    println!("refused: open for another {retry_after}"); // nothing was sent
                }
                continue;
            }
        };
        let outcome = http_post("/v1/complete").map_or_else(Outcome::from, |_| Outcome::Success);
        breaker.record(permit, outcome, now);
    }
    Ok(())
}

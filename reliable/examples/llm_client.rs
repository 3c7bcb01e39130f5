//! The seed library's README example in Rust: a flaky model call behind a breaker, a per-attempt
//! timeout, retries with ±10% jitter, and a cached answer while the breaker is open.
//!
//! `cargo run -p reliable --example llm_client`. The runtime starts with tokio's clock paused, so
//! the minute of backoff and open time the run goes through passes in virtual time, at once.

use reliable::{OrOpen, Reliable};
use std::time::Duration;

#[tokio::main(flavor = "current_thread", start_paused = true)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let llm = Reliable::builder("llm") // failure rate >= 50% over 20 calls opens it for 30 s
        .timeout(Duration::from_secs(8)) // per attempt: a slow answer is dropped, its socket closed
        .attempts(5) // the first try included
        .backoff(Duration::from_millis(200), 2.0, Duration::from_secs(5))
        .jitter(0.1) // ±10%, so clients that failed together do not retry together
        .build()?;

    for n in 1..=30 {
        let answer = llm
            .call(|| model::complete(format!("question {n}")))
            .await
            .or_open(|_retry_after| "cached answer".to_string());
        println!("{n:>2} {:>5.1}s {answer:?}", model::now());
        tokio::time::sleep(Duration::from_secs(2)).await; // the next request comes 2 s later
    }
    Ok(())
}

// ---- not user code: a stand-in for a real model API, down from 5 s to 70 s ----
mod model {
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::Duration;

    static CALLS: AtomicU32 = AtomicU32::new(0);
    static START: std::sync::OnceLock<tokio::time::Instant> = std::sync::OnceLock::new();

    /// Seconds since the first call, on tokio's (paused) clock.
    pub fn now() -> f64 {
        START
            .get_or_init(tokio::time::Instant::now)
            .elapsed()
            .as_secs_f64()
    }

    pub async fn complete(prompt: String) -> Result<String, std::io::Error> {
        let call = CALLS.fetch_add(1, Ordering::Relaxed) + 1;
        match now() {
            // While it is down, every third call hangs (the 8 s attempt timeout cancels it).
            5.0..70.0 if call.is_multiple_of(3) => {
                tokio::time::sleep(Duration::from_secs(60)).await;
                Ok(format!("late answer to {prompt}"))
            }
            5.0..70.0 => Err(std::io::Error::other("503 Service Unavailable")),
            _ => Ok(format!("model answer to {prompt}")),
        }
    }
}

//! The seed library's README example in Rust: a flaky model call behind a breaker, a per-attempt
//! timeout, retries with ±10% jitter, and a cached answer while the breaker is open.
//!
//! `cargo run -p reliablekit --example llm_client`. The runtime starts with tokio's clock paused, so
//! the minute of backoff and open time the run goes through passes in virtual time, at once.

use reliable::{OrOpen, Reliable};
use std::time::Duration;

#[tokio::main(flavor = "current_thread", start_paused = true)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // ---- user code: the seed's example with its own numbers ----
    let llm = Reliable::builder("llm")
        .failure_rate(0.5) // >= 50% failures over the window opens it
        .window(20) // the last 20 calls
        .cooldown(Duration::from_secs(30)) // open for 30 s (±10%)
        .probe(3) // then 3 successful probes in a row close it
        .timeout(Duration::from_secs(8)) // per attempt: a slow answer is dropped, its socket closed
        .attempts(5) // the first try included
        .base_delay(Duration::from_millis(200)) // then 0.4 s, 0.8 s, ... (factor 2)
        .jitter(0.1) // ±10%, so clients that failed together do not retry together
        .build()?;
    // ---- end of user code ----

    for n in 1..=30 {
        let prompt = format!("question {n}");
        // ---- user code: a call, and a cached answer while the breaker is open ----
        let call = llm.call(|| model::complete(&prompt));
        let answer = call.await.or_open(|_retry_after| cached_answer());
        // ---- end of user code (12 lines in all as rustfmt formats them, comments aside) ----
        println!("{n:>2} {:>5.1}s {answer:?}", model::now());
        tokio::time::sleep(Duration::from_secs(2)).await; // the next request comes 2 s later
    }
    Ok(())
}

fn cached_answer() -> String {
    "cached answer".to_string()
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

    pub async fn complete(prompt: &str) -> Result<String, std::io::Error> {
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

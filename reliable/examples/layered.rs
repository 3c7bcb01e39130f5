//! The layered-stack exercise: a fallback over `breaker(retry(primary))` and `retry(backup)`,
//! twelve requests five seconds apart while the primary fails its 3rd to 8th calls.
//!
//! `cargo run -p reliablekit --example layered` prints the exercise's table; tokio's clock is paused,
//! so the minute of simulated time passes at once. `tests/layered.rs` checks the table row by row.

use reliable::{Fallback, Reliable};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

#[tokio::main(flavor = "current_thread", start_paused = true)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    print!("{}", table().await?);
    Ok(())
}

/// Runs the twelve requests and returns the table, one line per request.
pub async fn table() -> Result<String, Box<dyn std::error::Error>> {
    let primary = Reliable::layered_exercise("primary").build()?;
    let backup = Reliable::layered_exercise("backup").no_breaker().build()?;
    table_of(&primary, &backup).await
}

/// The same twelve requests through any `primary` and `backup` (`tests/policy_files.rs` runs
/// the ones loaded from `scenarios/layered-stack.ron`).
pub async fn table_of(
    primary: &Reliable,
    backup: &Reliable,
) -> Result<String, Box<dyn std::error::Error>> {
    let primary_calls = Arc::new(AtomicUsize::new(0));
    let calls = primary_calls.clone();
    let stack = Fallback::new()
        .then(primary, move |_msg: &'static str| {
            // The primary fails its 3rd to 8th calls and works otherwise.
            let n = calls.fetch_add(1, Ordering::SeqCst) + 1;
            async move {
                if (3..=8).contains(&n) {
                    Err(std::io::Error::other("down"))
                } else {
                    Ok("primary ok")
                }
            }
        })
        .then(backup, |_msg| async {
            Ok::<_, std::io::Error>("backup ok")
        });

    let mut out = format!(
        "{:>8} {:>5} {:<10} {:<26} primary calls\n",
        "request", "time", "breaker", "answered by"
    );
    let start = tokio::time::Instant::now();
    for n in 1..=12u64 {
        tokio::time::sleep_until(start + Duration::from_secs(5 * n)).await;
        let before = primary.state().map_or("none", |s| s.name());
        let reply = stack.call("hi").await?;
        let calls = primary_calls.load(Ordering::SeqCst);
        out += &format!(
            "{n:>8} {:>4}s {before:<10} {:<26} {calls}\n",
            5 * n,
            reply.served_by
        );
    }
    Ok(out)
}

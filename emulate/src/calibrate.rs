//! What the emulator itself costs: a downstream that answers at once (service time 0, a worker
//! per request), driven at increasing rates through a full stack (retry with budget over a
//! breaker). The client-observed latency is then pure overhead (tower layers, HTTP/2 client,
//! loopback, server handling, timers), and the send lag says whether the driver kept to its
//! schedule: the highest faithful rate is the highest whose 99th-percentile lag stays under 1 ms
//! and whose requests all succeed.

use serde::Serialize;

use crate::run::run_policy;
use crate::simface::Compiled;

/// One calibration step.
#[derive(Clone, Debug, Serialize)]
pub struct Step {
    /// Offered requests per second.
    pub rate: f64,
    /// Requests per second that succeeded.
    pub goodput: f64,
    /// Success rate.
    pub success: f64,
    /// Client-observed round trip through the whole stack, ms: median.
    pub rtt_p50_ms: f64,
    /// 99th percentile.
    pub rtt_p99_ms: f64,
    /// Send lag behind schedule, ms: 99th percentile.
    pub lag_p99_ms: f64,
    /// Whether this rate was driven faithfully.
    pub faithful: bool,
}

fn scenario(rate: f64, seconds: u64) -> String {
    format!(
        r#"Scenario(
    name: "calibrate",
    horizon: "{seconds}s",
    workload: OpenLoop(rate: {rate:.1}, clients: 50),
    downstreams: [(name: "api", model: Server(workers: 20000, service: Constant("0s")))],
    policies: [(name: "retry+budget+breaker", stack: Retry(
        policy: (max_attempts: 4, attempt_timeout: "1s", backoff: (shape: Exponential(base: "100ms", factor: 2.0), cap: "2s", jitter: Full)),
        budget: Ratio(ratio: 0.1, min_per_sec: 0, ttl: "10s"),
        inner: Breaker(config: (failure_rate: 0.5, minimum_calls: 10, window: Count(calls: 20), open: (duration: "5s")), inner: Call(downstream: "api")),
    ))],
)"#
    )
}

/// Runs one step at `rate` for `seconds`.
pub fn step(rate: f64, seconds: u64) -> Result<Step, String> {
    let text = scenario(rate, seconds);
    let s = sim::scenario::load(&text, "calibrate.ron").map_err(|e| e.to_string())?;
    let c = Compiled::new(s)?;
    let (out, fid) = run_policy(&c, 0, 1, 1.0)?;
    let s = &out.summary;
    let success = s.success_rate;
    Ok(Step {
        rate,
        goodput: s.goodput_per_s,
        success,
        rtt_p50_ms: s.latency_ms.p50,
        rtt_p99_ms: s.latency_ms.p99,
        lag_p99_ms: fid.lag_p99_ms,
        faithful: fid.lag_p99_ms <= 1.0 && success >= 0.999,
    })
}

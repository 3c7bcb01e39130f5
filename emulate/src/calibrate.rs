//! What the emulator itself costs: a downstream that answers at once (service time 0, a worker
//! per request), driven at increasing rates through a full stack (retry with budget over a
//! breaker). The client-observed latency is then pure overhead (tower layers, HTTP/2 client,
//! loopback, server handling, timers), and the send lag says whether the driver kept to its
//! schedule: the highest faithful rate is the highest whose 99th-percentile send lag stays within
//! [`MAX_LAG_MS`] and whose requests succeed (at least 99.5%: the last few are still in flight at
//! the horizon). (tokio's timers tick in milliseconds, so even an
//! idle machine sends about 1 ms late; what matters is that the lag stays small next to the
//! scenario's service times and timeouts, which the size check keeps at 10 ms or more.)

use serde::Serialize;

use crate::run::run_policy;

/// The largest 99th-percentile send lag of a faithful run, ms: 1% of the shortest timeout the
/// shipped scaled scenarios use (1 s of wall time).
pub const MAX_LAG_MS: f64 = 10.0;

/// One calibration step.
#[derive(Clone, Debug, Serialize)]
pub struct Step {
    /// Offered requests per second.
    pub rate: f64,
    /// Requests per second that succeeded.
    pub goodput: f64,
    /// Success rate.
    pub success: f64,
    /// Latency from the scheduled arrival to the answer through the whole stack (send lag
    /// included), ms: median.
    pub rtt_p50_ms: f64,
    /// 99th percentile.
    pub rtt_p99_ms: f64,
    /// Send lag behind schedule, ms: 99th percentile.
    pub lag_p99_ms: f64,
    /// CPU time of this process (clients, HTTP on both sides, server) per request, µs, where
    /// `/proc/self/stat` can be read.
    pub cpu_us_per_request: Option<f64>,
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
    let c = sim::load(&text, "calibrate.ron").map_err(|e| e.to_string())?;
    let cpu0 = cpu_seconds();
    let (out, fid) = run_policy(&c, 0, 1, 1.0)?;
    let cpu = cpu_seconds().zip(cpu0).map(|(b, a)| b - a);
    let s = &out.summary;
    let success = s.success_rate;
    Ok(Step {
        rate,
        goodput: s.goodput_per_s,
        success,
        rtt_p50_ms: s.latency_ms.p50,
        rtt_p99_ms: s.latency_ms.p99,
        lag_p99_ms: fid.lag_p99_ms,
        cpu_us_per_request: cpu.map(|c| c * 1e6 / s.attempts.max(1) as f64),
        faithful: fid.lag_p99_ms <= MAX_LAG_MS && success >= 0.995,
    })
}

/// User + system CPU seconds of this process so far (Linux: `/proc/self/stat`, in clock ticks of
/// 1/100 s, the kernel's USER_HZ on every mainstream architecture).
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name (which may hold spaces) start at field 3.
    let rest = stat.rsplit_once(')')?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}

//! `sim bench`: the engine's throughput and memory on fixed scenarios.
//!
//! The embedded default scenario (its six policies, one after the other) and two more:
//! [`THROUGHPUT`], a busy server behind the full client stack (retry with
//! jittered backoff and a ratio budget, a breaker per client, per-attempt timeouts; every attempt
//! costs a network hop each way, a service completion and a lazily cancelled timer), run on one
//! thread and timed; and [`million`], an open loop spread over 10⁶ clients,
//! each with its own breaker and retry budget, to measure memory. Figures are wall-clock and machine-dependent, so
//! they are printed, never written into reports.

use std::time::Instant as WallClock;

use crate::run::World;
use crate::run::world::bytes_per_request;

/// The throughput scenario.
pub const THROUGHPUT: &str = r#"
Scenario(
    name: "bench-throughput",
    description: "Engine throughput: a busy server behind 100 ms timeouts, with a 10 s slowdown.",
    horizon: "30s",
    workload: OpenLoop(rate: 50000.0, clients: 1000),
    downstreams: [(
        name: "api",
        model: Server(workers: 64, queue: (capacity: 5000), service: Exponential(mean: "1ms")),
        network: (request: Exponential(mean: "1ms"), response: Exponential(mean: "1ms")),
    )],
    faults: [LatencyInflation(downstream: "api", from: "10s", until: "20s", factor: 1.5)],
    policies: [
        (name: "retry, budget, breaker", stack: Retry(
            policy: (max_attempts: 3, attempt_timeout: "100ms",
                     backoff: (shape: Exponential(base: "10ms", factor: 2.0), cap: "200ms", jitter: Full)),
            budget: Ratio(ratio: 0.2, min_per_sec: 0, ttl: "10s"),
            inner: Breaker(
                config: (failure_rate: 0.5, minimum_calls: 20, window: Count(calls: 20), open: (duration: "1s")),
                inner: Call(downstream: "api", timeout: "100ms")))),
    ],
)
"#;

/// An open loop of 100k req/s against a downstream that hangs during `outage`, behind the full
/// client stack (retry with jittered backoff, a ratio budget and a breaker per client).
fn hanging(
    name: &str,
    description: &str,
    horizon: &str,
    clients: u32,
    outage: (&str, &str),
    attempt_timeout: &str,
) -> String {
    let (from, until) = outage;
    format!(
        r#"
Scenario(
    name: "{name}",
    description: "{description}",
    horizon: "{horizon}",
    workload: OpenLoop(rate: 100000.0, clients: {clients}),
    downstreams: [(
        name: "api",
        model: Server(workers: 2000, service: Exponential(mean: "15ms")),
        network: (request: Constant("5ms"), response: Constant("5ms")),
    )],
    faults: [Outage(downstream: "api", from: "{from}", until: "{until}", mode: Hang)],
    policies: [
        (name: "retry, budget, breaker", stack: Retry(
            policy: (max_attempts: 3, attempt_timeout: "{attempt_timeout}",
                     backoff: (shape: Exponential(base: "100ms", factor: 2.0), cap: "2s", jitter: Full)),
            budget: Ratio(ratio: 0.1, min_per_sec: 0, ttl: "10s"),
            inner: Breaker(
                config: (consecutive_failures: 5, open: (duration: "5s", jitter: 0.2)),
                inner: Call(downstream: "api")))),
    ],
)
"#
    )
}

/// The memory scenario: 10⁶ clients, a breaker and a budget each, through a 20 s hanging outage.
pub fn million() -> String {
    hanging(
        "bench-million",
        "Memory: an open loop over 10^6 clients, a breaker and a budget each, through a 20 s outage.",
        "60s",
        1_000_000,
        ("20s", "40s"),
        "1s",
    )
}

/// The in-flight memory scenario for a horizon of `seconds`: the downstream hangs from t = 0 and
/// attempts time out after 60 s, so every request sent stays in flight (about 10⁵ per second of
/// horizon). Two horizons in two processes give the memory per in-flight request: the difference
/// of their peak RSS divided by the difference of their peak requests in flight.
pub fn in_flight(seconds: u32) -> String {
    let horizon = format!("{seconds}s");
    hanging(
        &format!("bench-in-flight-{seconds}s"),
        "Memory per in-flight request: a downstream that hangs from t = 0, 60 s attempt timeouts.",
        &horizon,
        1000,
        ("0s", &horizon),
        "60s",
    )
}

/// What one bench run measured.
#[derive(Clone, Debug)]
pub struct BenchReport {
    /// Scenario name.
    pub name: String,
    /// Events processed.
    pub events: u64,
    /// Wall-clock seconds.
    pub seconds: f64,
    /// Most events pending at once.
    pub peak_events: usize,
    /// Most logical requests in flight at once.
    pub peak_requests: usize,
    /// Estimated bytes per in-flight request (world structures).
    pub bytes_per_request: usize,
    /// Peak resident set size of the process so far, bytes (Linux only).
    pub peak_rss: Option<u64>,
}

impl BenchReport {
    /// Events per second.
    pub fn events_per_sec(&self) -> f64 {
        self.events as f64 / self.seconds.max(1e-9)
    }
}

/// Runs every policy of `text` once, one after the other on the calling thread, and times them
/// together.
pub fn bench(text: &str) -> Result<BenchReport, String> {
    let c = crate::load::load(text, "bench").map_err(|e| e.to_string())?;
    let mut report = BenchReport {
        name: c.scenario.name.clone(),
        events: 0,
        seconds: 0.0,
        peak_events: 0,
        peak_requests: 0,
        bytes_per_request: 0,
        peak_rss: None,
    };
    for p in 0..c.stacks.len() {
        let world = World::new(&c, p, c.scenario.seed, false);
        let t0 = WallClock::now();
        let out = world.run().map_err(|e| e.to_string())?;
        report.seconds += t0.elapsed().as_secs_f64();
        report.events += out.summary.events;
        report.peak_events = report.peak_events.max(out.peak_events);
        report.peak_requests = report.peak_requests.max(out.peak_requests);
        report.bytes_per_request = report
            .bytes_per_request
            .max(bytes_per_request(&c.stacks[p]));
    }
    report.peak_rss = peak_rss();
    Ok(report)
}

/// The process's peak resident set size (VmHWM), if the OS tells.
pub fn peak_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bench_scenarios_are_valid() {
        crate::load::load(THROUGHPUT, "throughput").unwrap();
        crate::load::load(&million(), "million").unwrap();
        crate::load::load(&in_flight(21), "in-flight").unwrap();
    }

    #[test]
    fn every_request_stays_in_flight() {
        let r = bench(&in_flight(1)).unwrap();
        // 100k req/s for 1 s, none answered: all of them (Poisson, so about 10⁵) are in flight.
        assert!(
            (95_000..105_000).contains(&r.peak_requests),
            "{}",
            r.peak_requests
        );
    }
}

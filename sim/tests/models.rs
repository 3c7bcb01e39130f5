//! The engine and models against theory and against exact scripts.

mod common;

use common::{compile, run, summaries};
use sim::run::trace;

/// An M/M/1 queue (Poisson 80/s, exponential service of mean 10 ms, one worker, unbounded FIFO):
/// the mean time in system is 1 / (μ − λ) = 50 ms and the utilisation 0.8.
#[test]
fn mm1_mean_sojourn_matches_theory() {
    let s = summaries(
        r#"Scenario(
            name: "mm1", horizon: "2000s", seed: 3,
            workload: OpenLoop(rate: 80.0),
            downstreams: [(name: "q", model: Server(workers: 1, service: Exponential(mean: "10ms")))],
            policies: [(name: "plain", stack: Call(downstream: "q"))],
        )"#,
    );
    let s = &s[0];
    let mean = s.latency_ms.mean;
    assert!(
        (mean - 50.0).abs() / 50.0 < 0.05,
        "mean sojourn {mean} ms, theory 50 ms"
    );
    let util = s.downstreams[0].work_s / 2000.0;
    assert!((util - 0.8).abs() < 0.01, "utilisation {util}");
    assert!((s.success_rate - 1.0).abs() < 1e-3);
    // The median of an exponential sojourn with mean 50 ms is 50·ln 2 ≈ 34.7 ms.
    assert!(
        (s.latency_ms.p50 - 34.66).abs() < 2.5,
        "p50 {}",
        s.latency_ms.p50
    );
}

/// M/M/c with c = 4 and ρ = 0.75 (λ = 300/s, mean service 10 ms): Erlang C gives
/// P(wait) = 0.5094 and a mean time in system of 10 ms + P(wait) / (cμ − λ) = 15.09 ms.
#[test]
fn mmc_mean_sojourn_matches_erlang_c() {
    let s = summaries(
        r#"Scenario(
            name: "mmc", horizon: "1000s", seed: 5,
            workload: OpenLoop(rate: 300.0),
            downstreams: [(name: "q", model: Server(workers: 4, service: Exponential(mean: "10ms")))],
            policies: [(name: "plain", stack: Call(downstream: "q"))],
        )"#,
    );
    let mean = s[0].latency_ms.mean;
    assert!(
        (mean - 15.09).abs() / 15.09 < 0.04,
        "mean sojourn {mean} ms, theory 15.09 ms"
    );
}

/// A scripted downstream behind a breaker, with a fallback: every value is exact.
#[test]
fn scripted_breaker_and_fallback_trace_is_exact() {
    let c = compile(
        r#"Scenario(
            name: "scripted", horizon: "61s",
            workload: OpenLoop(rate: 0.2, arrivals: Constant, start: "5s"),
            downstreams: [
                (name: "primary", model: Scripted(script: [Ok, Ok, Error, Error, Error, Error], then: Ok)),
                (name: "backup", model: Scripted(script: [])),
            ],
            policies: [(name: "p", stack: Fallback([
                Breaker(config: (consecutive_failures: 2, open: (duration: "20s"), half_open: (probe_timeout: "1h")),
                        inner: Call(downstream: "primary")),
                Call(downstream: "backup"),
            ]))],
        )"#,
    );
    let rows = trace(&c, 0, 1).unwrap();
    let got: Vec<String> = rows
        .iter()
        .map(|r| {
            format!(
                "{} {} {} {} {}",
                r.request,
                r.start_ns / 1_000_000_000,
                r.breakers_before[0],
                r.served_by,
                r.calls_so_far[0]
            )
        })
        .collect();
    // Calls 3 and 4 fail: the breaker opens at 20 s for 20 s; the trial at 40 s is call 5 and
    // fails; the trial at 60 s is call 7 (6 is the last failure... the script has 6 entries).
    let want = [
        "1 5 closed breaker(primary) 1",
        "2 10 closed breaker(primary) 2",
        "3 15 closed backup 3",
        "4 20 closed backup 4",
        "5 25 open backup 4",
        "6 30 open backup 4",
        "7 35 open backup 4",
        "8 40 half-open backup 5",
        "9 45 open backup 5",
        "10 50 open backup 5",
        "11 55 open backup 5",
        "12 60 half-open backup 6",
    ];
    assert_eq!(got, want);
    assert!(rows.iter().all(|r| r.outcome == "ok"));
}

/// The workload's stream does not depend on the policy: the same first tries, bucket by bucket.
#[test]
fn policies_see_identical_arrivals() {
    let (_, results) = run(r#"Scenario(
            name: "same", horizon: "30s", seed: 9,
            workload: OpenLoop(rate: 500.0, clients: 50, steps: [(at: "10s", rate: 800.0)]),
            downstreams: [(name: "api", model: Server(workers: 4, service: Exponential(mean: "10ms")))],
            faults: [Outage(downstream: "api", from: "12s", until: "18s"), LoadSpike(from: "20s", until: "22s", factor: 2.0)],
            policies: [
                (name: "plain", stack: Call(downstream: "api", timeout: "200ms")),
                (name: "breaker", stack: Breaker(config: (consecutive_failures: 3, open: (duration: "2s")), inner: Call(downstream: "api", timeout: "200ms"))),
            ],
        )"#);
    let firsts = |i: usize| {
        results[i]
            .output
            .buckets
            .iter()
            .map(|b| b.first_tries)
            .collect::<Vec<_>>()
    };
    assert_eq!(firsts(0), firsts(1));
    assert_ne!(
        results[0].output.summary.server_arrivals,
        results[1].output.summary.server_arrivals
    );
    // The load spike doubles first tries in its window.
    let f = firsts(0);
    let spike = (f[20] + f[21]) as f64 / 2.0;
    let after = (f[23] + f[24] + f[25]) as f64 / 3.0;
    assert!((spike / after - 2.0).abs() < 0.2, "{spike} vs {after}");
}

/// Timeouts, wasted work and late replies: a server slower than the clients' timeout.
#[test]
fn work_for_timed_out_attempts_is_wasted() {
    let s = summaries(
        r#"Scenario(
            name: "slow", horizon: "20s",
            workload: OpenLoop(rate: 10.0, arrivals: Constant),
            downstreams: [(name: "api", model: Server(workers: 100, service: Constant("300ms")))],
            policies: [
                (name: "short", stack: Call(downstream: "api", timeout: "100ms")),
                (name: "long", stack: Call(downstream: "api", timeout: "1s")),
            ],
        )"#,
    );
    let (short, long) = (&s[0], &s[1]);
    assert_eq!(short.successes, 0);
    // The request sent at 19.9 s would time out exactly at the horizon: still in flight.
    assert_eq!(short.unfinished, 1);
    assert_eq!(short.timeouts, short.first_tries - 1);
    assert!((short.wasted_work_share - 1.0).abs() < 1e-9);
    assert_eq!(short.late_replies, short.downstreams[0].completions);
    assert_eq!(long.wasted_work_share, 0.0);
    assert_eq!(long.successes + long.unfinished, long.first_tries);
    assert_eq!(
        long.unfinished, 3,
        "the last 300 ms of requests are still in service"
    );
    assert!((long.latency_ms.p50 - 300.0).abs() < 1.0);
}

/// A contended register: simultaneous writers conflict, one commit per read version.
#[test]
fn register_conflicts_when_writes_interleave() {
    let s = summaries(
        r#"Scenario(
            name: "occ", horizon: "10s",
            workload: JobSet(clients: 10),
            downstreams: [(name: "reg", model: Register, network: (request: Constant("10ms"), response: Constant("10ms")))],
            policies: [(name: "once", stack: Call(downstream: "reg"))],
        )"#,
    );
    let s = &s[0];
    // All ten read version 0 at 10 ms and write at 30 ms: the first write commits, nine conflict.
    assert_eq!(s.first_tries, 10);
    assert_eq!(s.successes, 1);
    assert_eq!(s.downstreams[0].commits, Some(1));
    assert_eq!(s.downstreams[0].conflicts, Some(9));
    assert!((s.latency_ms.p50 - 40.0).abs() < 0.5);
    assert_eq!(s.makespan_s, None, "not every job succeeded");
}

/// Closed-loop clients: throughput is clients ÷ (response time + think time).
#[test]
fn closed_loop_throughput_follows_littles_law() {
    let s = summaries(
        r#"Scenario(
            name: "closed", horizon: "100s",
            workload: ClosedLoop(clients: 20, think: Constant("90ms")),
            downstreams: [(name: "api", model: Server(workers: 1000, service: Constant("10ms")))],
            policies: [(name: "plain", stack: Call(downstream: "api"))],
        )"#,
    );
    // 20 clients, 100 ms per cycle: 200 requests per second.
    assert!(
        (s[0].goodput_per_s - 200.0).abs() < 1.0,
        "{}",
        s[0].goodput_per_s
    );
}

/// Faults: a fail-fast outage refuses, a hanging one swallows, throttling sends its hint,
/// capacity loss and latency inflation slow service, an error rate fails served jobs.
#[test]
fn faults_do_what_they_say() {
    let text = |fault: &str| {
        format!(
            r#"Scenario(
                name: "f", horizon: "10s",
                workload: OpenLoop(rate: 100.0, arrivals: Constant),
                downstreams: [(name: "api", model: Server(workers: 2, service: Constant("10ms")))],
                faults: [{fault}],
                policies: [(name: "plain", stack: Call(downstream: "api", timeout: "1s"))],
            )"#
        )
    };
    let s = &summaries(&text(
        r#"Outage(downstream: "api", from: "2s", until: "4s")"#,
    ))[0];
    assert_eq!(s.server_rejections, 200);
    // The request sent at 9.99 s finishes exactly at the horizon: still in flight.
    assert_eq!(s.unfinished, 1);
    assert_eq!(s.successes, s.first_tries - 200 - 1);
    let s = &summaries(&text(
        r#"Outage(downstream: "api", from: "2s", until: "4s", mode: Hang)"#,
    ))[0];
    assert_eq!(s.downstreams[0].hung, 200);
    assert_eq!(s.timeouts, 200);
    // Sent, never arrived: the hung calls are not load on the server.
    assert_eq!(s.downstreams[0].arrivals, s.first_tries - 200);
    assert_eq!(s.server_arrivals, s.first_tries - 200);
    assert_eq!(s.amplification.during_fault, Some(0.0));
    assert_eq!(s.amplification.sent_during_fault, Some(1.0));
    // A partition that buffers: nothing arrives during it; the 200 held calls arrive when it
    // heals, by then past their 1 s timeout, and the server serves them anyway.
    let s = &summaries(&text(
        r#"Partition(downstream: "api", from: "2s", until: "4s")"#,
    ))[0];
    // 200 calls, and the answer to the call sent at 1.99 s, due back at 2 s.
    assert_eq!(s.downstreams[0].held, 201);
    assert_eq!(s.server_arrivals, s.first_tries);
    assert_eq!(s.amplification.during_fault, Some(0.0));
    assert!(s.timeouts >= 200, "{}", s.timeouts);
    assert_eq!(s.downstreams[0].completions, s.first_tries - 1);
    assert!(s.wasted_work_share > 0.0);
    let s = &summaries(&text(
        r#"Throttle(downstream: "api", from: "2s", until: "4s", retry_after: "3s")"#,
    ))[0];
    assert_eq!(s.server_rejections, 200);
    let s = &summaries(&text(
        r#"ErrorRate(downstream: "api", from: "0s", until: "10s", rate: 0.25)"#,
    ))[0];
    assert!((s.success_rate - 0.75).abs() < 0.05, "{}", s.success_rate);
    assert!((s.server_success_rate - 0.75).abs() < 0.05);
    let s = &summaries(&text(
        r#"LatencyInflation(downstream: "api", from: "0s", until: "10s", factor: 1.5)"#,
    ))[0];
    assert!((s.latency_ms.p50 - 15.0).abs() < 0.5);
    // One worker left of two, 10 ms service and 100 arrivals/s: still keeps up (ρ = 1 exactly at
    // constant gaps), so latency stays 10 ms.
    let s = &summaries(&text(
        r#"CapacityLoss(downstream: "api", from: "0s", until: "10s", share: 0.5)"#,
    ))[0];
    assert!(
        (s.latency_ms.p99 - 10.0).abs() < 0.5,
        "{}",
        s.latency_ms.p99
    );
    // Losing every worker: nothing is served during the window, the queue drains after it.
    let s = &summaries(&text(
        r#"CapacityLoss(downstream: "api", from: "2s", until: "3s", share: 1.0)"#,
    ))[0];
    assert!(s.latency_ms.p999 > 900.0, "{}", s.latency_ms.p999);
    // The first jobs queued at 2 s wait past their 1 s timeout; the server still serves them.
    assert!((1..10).contains(&s.timeouts), "{}", s.timeouts);
    assert!(s.wasted_work_share > 0.0);
}

/// A bounded LIFO queue under overload: rejections once full, and the newest are served first.
#[test]
fn bounded_lifo_queue_rejects_and_serves_newest_first() {
    let s = summaries(
        r#"Scenario(
            name: "lifo", horizon: "10s",
            workload: OpenLoop(rate: 200.0, arrivals: Constant),
            downstreams: [(name: "api", model: Server(workers: 1, queue: (capacity: 10, discipline: Lifo), service: Constant("10ms")))],
            policies: [(name: "plain", stack: Call(downstream: "api"))],
        )"#,
    );
    let s = &s[0];
    // Capacity 100/s against 200/s offered: about half are rejected.
    assert!((s.server_rejections as f64 / s.first_tries as f64 - 0.5).abs() < 0.02);
    // Under LIFO most served jobs wait little, a few wait long.
    assert!(
        s.success_latency_ms.p50 < 25.0,
        "{}",
        s.success_latency_ms.p50
    );
}

/// The layered-stack exercise (validation case 1, seed 001): fallback over
/// breaker(retry(primary)) and retry(backup), exact to the call.
#[test]
fn layered_stack_trace_is_exact() {
    let c = compile(
        r#"Scenario(
            name: "layered", horizon: "61s",
            workload: OpenLoop(rate: 0.2, arrivals: Constant, start: "5s"),
            downstreams: [
                (name: "primary", model: Scripted(script: [Ok, Ok, Error, Error, Error, Error, Error, Error], then: Ok)),
                (name: "backup", model: Scripted(script: [])),
            ],
            policies: [(name: "layered", stack: Fallback([
                Breaker(
                    config: (consecutive_failures: 2, open: (duration: "20s"), half_open: (max_in_flight: 1, probe_timeout: "1h")),
                    inner: Retry(policy: (max_attempts: 2, backoff: (shape: Constant(delay: "0s"))), inner: Call(downstream: "primary")),
                ),
                Retry(policy: (max_attempts: 2, backoff: (shape: Constant(delay: "0s"))), inner: Call(downstream: "backup")),
            ]))],
        )"#,
    );
    let rows = trace(&c, 0, 1).unwrap();
    let got: Vec<String> = rows
        .iter()
        .map(|r| {
            format!(
                "{} {}s {} {} {}",
                r.request,
                r.start_ns / 1_000_000_000,
                r.breakers_before[0],
                r.served_by,
                r.calls_so_far[0]
            )
        })
        .collect();
    let want = [
        "1 5s closed breaker(retry(primary)) 1",
        "2 10s closed breaker(retry(primary)) 2",
        "3 15s closed retry(backup) 4",
        "4 20s closed retry(backup) 6",
        "5 25s open retry(backup) 6",
        "6 30s open retry(backup) 6",
        "7 35s open retry(backup) 6",
        "8 40s half-open retry(backup) 8",
        "9 45s open retry(backup) 8",
        "10 50s open retry(backup) 8",
        "11 55s open retry(backup) 8",
        "12 60s half-open breaker(retry(primary)) 9",
    ];
    assert_eq!(got, want);
}

/// A retry budget bounds amplification during a total outage; immediate retries multiply it.
#[test]
fn budget_bounds_amplification_in_an_outage() {
    let s = summaries(
        r#"Scenario(
            name: "amp", horizon: "40s", seed: 2,
            workload: OpenLoop(rate: 1000.0, clients: 10),
            downstreams: [(name: "api", model: Server(workers: 100, service: Constant("5ms")))],
            faults: [Outage(downstream: "api", from: "10s", until: "30s")],
            policies: [
                (name: "retry 3x", stack: Retry(policy: (max_attempts: 4, backoff: (shape: Constant(delay: "0s"))),
                    inner: Call(downstream: "api", timeout: "1s"))),
                (name: "budget", stack: Retry(policy: (max_attempts: 4, backoff: (shape: Constant(delay: "0s"))),
                    budget: Ratio(ratio: 0.1, min_per_sec: 0, ttl: "10s"),
                    inner: Call(downstream: "api", timeout: "1s"))),
            ],
        )"#,
    );
    let during = |i: usize| s[i].amplification.during_fault.unwrap();
    assert!((during(0) - 4.0).abs() < 0.01, "{}", during(0));
    assert!(during(1) <= 1.11 && during(1) > 1.0, "{}", during(1));
    assert!(s[1].give_ups.get("budget") > 10_000);
    assert_eq!(s[0].give_ups.get("max-attempts"), s[0].failures);
    assert_eq!(s[0].verdict, sim::metrics::Verdict::Recovered);
}

/// Adaptive throttling sheds load locally while the downstream refuses most calls.
#[test]
fn adaptive_throttle_sheds_load_under_refusals() {
    let s = summaries(
        r#"Scenario(
            name: "throttle", horizon: "60s", seed: 4,
            workload: OpenLoop(rate: 500.0, clients: 5),
            downstreams: [(name: "api", model: Server(workers: 50, service: Constant("10ms")))],
            faults: [Throttle(downstream: "api", from: "10s", until: "50s", share: 0.9, retry_after: "1s")],
            policies: [
                (name: "plain", stack: Call(downstream: "api", timeout: "1s")),
                (name: "throttled", stack: Throttle(config: (k: 2.0, window: "10s", buckets: 10), inner: Call(downstream: "api", timeout: "1s"))),
            ],
        )"#,
    );
    let (plain, thr) = (&s[0], &s[1]);
    assert!((plain.amplification.during_fault.unwrap() - 1.0).abs() < 1e-9);
    // With 10% accepted, K = 2 lets through about 2 × 10% = 20% of requests once the window fills.
    let during = thr.amplification.during_fault.unwrap();
    assert!(during < 0.35 && during > 0.15, "{during}");
    assert!(thr.local_rejections > 10_000);
}

/// The first example in sim/README.md (1,000 requests/s for 60 s, two policies) is a valid
/// scenario and runs.
#[test]
fn readme_example_is_valid() {
    let readme = include_str!("../README.md");
    let start = readme.find("```ron\n").expect("a ron block") + 7;
    let end = start + readme[start..].find("```").unwrap();
    let s = summaries(&readme[start..end]);
    assert_eq!(s.len(), 2);
    assert!(s.iter().all(|p| (57_000..63_000).contains(&p.first_tries)));
}

/// Retrying without delay and without limit against a downstream that fails at once would spin
/// forever at one instant: the check refuses it, pointing at the retry layer.
#[test]
fn a_zero_delay_retry_loop_is_refused_as_a_livelock() {
    let err = common::error(
        r#"Scenario(
            name: "spin", horizon: "10s",
            workload: OpenLoop(rate: 1.0, arrivals: Constant, start: "1s"),
            downstreams: [(name: "down", model: Scripted(script: [], then: Error))],
            policies: [(name: "forever", stack: Retry(policy: (max_attempts: None, backoff: (shape: Constant(delay: "0s"))), inner: Call(downstream: "down")))],
        )"#,
    );
    assert!(
        err.starts_with("bad.ron:5:42: policies[0].stack: unlimited attempts")
            && err.contains("livelock"),
        "{err}"
    );
}

/// Extreme but valid values run to the end without panicking or overflowing virtual time.
#[test]
fn extreme_values_run_without_panicking() {
    let s = summaries(
        r#"Scenario(
            name: "extreme", horizon: "8760h", bucket: "1h",
            workload: OpenLoop(rate: 0.0001, clients: 3, arrivals: Constant),
            downstreams: [
                (name: "slow", model: Server(workers: 1, queue: (capacity: 0), service: Exponential(mean: "7200h"), per_in_flight: "1000000h"),
                 network: (request: LogNormal(scale: "1h", sigma: 3.0), response: Uniform(low: "0s", high: "100000h"))),
                (name: "script", model: Scripted(script: [Hang, Throttled("100000h"), Fatal], then: Error, latency: "500000h")),
            ],
            faults: [LatencyInflation(downstream: "slow", from: "0s", until: "8760h", factor: 1000000.0)],
            policies: [
                (name: "a", stack: Retry(policy: (max_attempts: None, attempt_timeout: "100000h", deadline: "500000h",
                    backoff: (shape: Exponential(base: "1h", factor: 65536.0), cap: "500000h", jitter: Decorrelated)),
                    inner: Fallback([Call(downstream: "slow"), Call(downstream: "script", timeout: "1ns")]))),
                (name: "b", stack: Throttle(config: (k: 1.0, window: "1ns", buckets: 1), inner: Call(downstream: "script"))),
            ],
        )"#,
    );
    assert_eq!(s.len(), 2);
    assert!(s.iter().all(|p| p.first_tries > 0));
}

/// A fault that ends at the horizon leaves no time to judge recovery: the verdict is
/// "inconclusive", not "stuck". A fault from t = 0 is judged against the demand (there is no
/// healthy level before it), and a run whose goodput meets the demand after it recovered.
#[test]
fn verdicts_for_faults_at_the_edges_of_the_run() {
    use sim::metrics::Verdict;
    let scenario = |from: &str, until: &str| {
        format!(
            r#"Scenario(
            name: "edges", horizon: "20s",
            workload: OpenLoop(rate: 200.0),
            downstreams: [(name: "api", model: Server(workers: 8, service: Exponential(mean: "10ms")))],
            faults: [ErrorRate(downstream: "api", from: "{from}", until: "{until}", rate: 0.5)],
            policies: [(name: "plain", stack: Call(downstream: "api", timeout: "1s"))],
        )"#
        )
    };
    let at_horizon = summaries(&scenario("10s", "20s"));
    assert_eq!(at_horizon[0].verdict, Verdict::Inconclusive);
    assert_eq!(at_horizon[0].recovery_s, None);
    // Less than one 5 s recovery window left after the fault: inconclusive too.
    let late = summaries(&scenario("10s", "17s"));
    assert_eq!(late[0].verdict, Verdict::Inconclusive);
    let from_zero = summaries(&scenario("0s", "1s"));
    assert_eq!(from_zero[0].verdict, Verdict::Recovered);
    assert_eq!(from_zero[0].baseline_goodput_per_s, None);
    assert!(from_zero[0].success_rate > 0.95);
}

/// Hedging, the ledger and a limit on a mostly-fast server with rare slow calls: every count adds
/// up, a hedge is only sent for a call marked idempotent, a spent ledger refuses hedges and a
/// bulkhead never admits more than its size.
#[test]
fn hedges_ledger_and_limits_add_up() {
    let s = summaries(
        r#"Scenario(
            name: "hedges", horizon: "20s", seed: 7,
            workload: OpenLoop(rate: 500.0, clients: 10),
            downstreams: [(name: "q", model: Server(workers: 50, cancel_abandoned: true,
                service: Bimodal(slow_share: 0.05, fast: Constant("2ms"), slow: Constant("200ms"))))],
            policies: [
                (name: "plain", stack: Call(downstream: "q")),
                (name: "hedged", stack: Hedge(config: (delay: Fixed("10ms"), max_hedges: 2),
                    idempotent: true, inner: Call(downstream: "q"))),
                (name: "not idempotent", stack: Hedge(config: (delay: Fixed("10ms"), max_hedges: 2),
                    inner: Call(downstream: "q"))),
                (name: "no budget", stack: Ledger(config: (ratio: 0.0, min_per_sec: 0),
                    inner: Hedge(config: (delay: Fixed("10ms"), max_hedges: 2), idempotent: true,
                        inner: Call(downstream: "q")))),
                (name: "ledger", stack: Ledger(config: (ratio: 0.02, min_per_sec: 0),
                    inner: Hedge(config: (delay: Fixed("10ms"), max_hedges: 2), idempotent: true,
                        inner: Call(downstream: "q")))),
                (name: "bulkhead", stack: Limit(config: (rule: Fixed, initial: 3, min: 3, max: 3),
                    scope: Shared, inner: Call(downstream: "q"))),
            ],
        )"#,
    );
    let [plain, hedged, not_idem, no_budget, ledger, bulkhead] = &s[..] else {
        panic!("six policies")
    };
    assert!(plain.extra.is_none());
    let e = hedged.extra.as_ref().unwrap();
    // 5% of calls are slow: about that many get a first hedge, and 5% of those a second.
    assert!(
        (e.hedge_share - 0.0525).abs() < 0.01,
        "hedge share {}",
        e.hedge_share
    );
    assert_eq!(hedged.attempts, hedged.first_tries + e.hedges_sent);
    assert_eq!(e.extra_sent.hedge, e.hedges_sent);
    assert_eq!(e.extra_sent.retry, 0);
    // A hedge of a slow call wins nearly always; every loser still out is cancelled.
    assert!(e.hedges_won as f64 > 0.9 * e.hedges_sent as f64 / 1.05);
    assert!(e.hedges_won <= e.hedges_sent);
    assert!(e.copies_cancelled >= e.hedges_won);
    assert!(
        hedged.latency_ms.p99 < 20.0 && plain.latency_ms.p99 >= 200.0,
        "p99 {} vs {}",
        hedged.latency_ms.p99,
        plain.latency_ms.p99
    );
    let e = not_idem.extra.as_ref().unwrap();
    assert_eq!(
        (e.hedges_sent, not_idem.attempts),
        (0, not_idem.first_tries)
    );
    let e = no_budget.extra.as_ref().unwrap();
    assert_eq!(e.hedges_sent, 0);
    assert!(e.hedges_refused > 0);
    assert_eq!(e.ledger.unwrap().denied.hedge, e.hedges_refused);
    // A 2% ledger: hedges at most 2% of first tries over any 10 s window.
    let e = ledger.extra.as_ref().unwrap();
    assert!(e.hedges_sent > 0 && e.hedges_refused > 0);
    assert!(
        e.hedges_sent as f64 <= 0.02 * ledger.first_tries as f64 + 1.0,
        "{} hedges for {} first tries",
        e.hedges_sent,
        ledger.first_tries
    );
    assert_eq!(e.ledger.unwrap().drawn.hedge, e.hedges_sent);
    let e = bulkhead.extra.as_ref().unwrap();
    assert_eq!(e.limit_mean, Some(3.0));
    assert!(e.admitted_mean.unwrap() <= 3.0 && e.admitted_mean.unwrap() > 0.5);
    assert!(e.limit_refusals > 0);
    assert_eq!(bulkhead.local_rejections, e.limit_refusals);
}

/// Retries without a budget of their own inside a ledger draw from it, as retries.
#[test]
fn retries_draw_from_the_enclosing_ledger() {
    let s = summaries(
        r#"Scenario(
            name: "ledger-retries", horizon: "20s", seed: 3,
            workload: OpenLoop(rate: 200.0, clients: 10),
            downstreams: [(name: "q", model: Server(workers: 10, service: Constant("5ms"), error_rate: 0.5))],
            policies: [(name: "ledger", stack: Ledger(config: (ratio: 0.1, min_per_sec: 0),
                inner: Retry(policy: (max_attempts: 4, backoff: (shape: Constant(delay: "0s"))),
                    inner: Call(downstream: "q"))))],
        )"#,
    );
    let s = &s[0];
    let e = s.extra.as_ref().unwrap();
    let l = e.ledger.unwrap();
    assert_eq!(l.drawn.retry, s.retries);
    assert!(l.denied.retry > 0);
    assert!(
        (s.retries as f64) <= 0.1 * s.first_tries as f64 + 1.0,
        "{} retries for {} first tries",
        s.retries,
        s.first_tries
    );
}

/// Probes of a half-open breaker inside a ledger draw from it: with nothing in the ledger, every
/// probe is refused locally and none reaches the server; without the ledger they go.
#[test]
fn probes_draw_from_the_enclosing_ledger() {
    let breaker = r#"Breaker(config: (failure_rate: 0.5, minimum_calls: 10, window: Count(calls: 20),
        open: (duration: "2s", growth: 1.0, max: "2s", jitter: 0.0),
        half_open: (max_in_flight: 1, rule: Consecutive(successes: 2), probe_timeout: "1s")),
        inner: Call(downstream: "q", timeout: "1s"))"#;
    let s = summaries(&format!(
        r#"Scenario(
            name: "ledger-probes", horizon: "20s", seed: 5,
            workload: OpenLoop(rate: 100.0, clients: 1),
            downstreams: [(name: "q", model: Server(workers: 10, service: Constant("5ms")))],
            faults: [ErrorRate(downstream: "q", from: "1s", until: "5s", rate: 1.0)],
            policies: [
                (name: "ledger", stack: Ledger(config: (ratio: 0.0, min_per_sec: 0), inner: {breaker})),
                (name: "plain", stack: Limit(config: (rule: Fixed, initial: 1000, min: 1000, max: 1000),
                    inner: {breaker})),
            ],
        )"#
    ));
    let e = s[0].extra.as_ref().unwrap();
    let l = e.ledger.unwrap();
    assert_eq!(e.extra_sent.probe, 0);
    assert!(l.denied.probe > 0, "{l:?}");
    assert_eq!(l.drawn.probe, 0);
    let plain = s[1].extra.as_ref().unwrap();
    assert!(plain.extra_sent.probe > 0, "{plain:?}");
    assert!(s[1].success_rate > s[0].success_rate);
}

/// A rate limit admits at most `burst + rate × time` calls (GCRA), shared by every client or one
/// per client as its scope says; each refusal is a local rejection and a limit refusal, and the
/// stack keeps no concurrency gauge for it.
#[test]
fn a_rate_limit_admits_its_rate_and_refuses_the_rest() {
    let s = summaries(
        r#"Scenario(
            name: "rate", horizon: "20s", seed: 5,
            workload: OpenLoop(rate: 500.0, clients: 10),
            downstreams: [(name: "q", model: Server(workers: 50, service: Constant("2ms")))],
            policies: [
                (name: "shared", stack: RateLimit(config: (rate: 100, period: "1s", burst: 10),
                    scope: Shared, inner: Call(downstream: "q"))),
                (name: "per client", stack: RateLimit(config: (rate: 10, period: "1s", burst: 10),
                    inner: Call(downstream: "q"))),
            ],
        )"#,
    );
    for (p, most) in [(&s[0], 10 + 100 * 20), (&s[1], 10 * (10 + 10 * 20))] {
        let e = p.extra.as_ref().unwrap();
        assert!(
            p.attempts <= most && p.attempts as f64 >= 0.95 * most as f64,
            "{}: {} attempts, at most {most}",
            p.name,
            p.attempts
        );
        assert_eq!(p.attempts + e.limit_refusals, p.first_tries, "{}", p.name);
        assert_eq!(p.local_rejections, e.limit_refusals, "{}", p.name);
        assert_eq!((e.limit_mean, e.admitted_mean), (None, None), "{}", p.name);
    }
}

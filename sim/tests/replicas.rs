//! Replicas behind a balancer.
//!
//! - (c) One bad replica of five (`scenarios/replicas-one-bad.ron`): per-host breakers (`scope:
//!   PerHost`) and outlier ejection each keep edge success ≥ 99% where no protection gives ~90%
//!   while the replica is bad; a per-service breaker either never trips (and the bad replica keeps
//!   failing calls) or trips and cuts all five.
//! - When every replica's breaker is open, the call is refused locally, as by one open breaker.
//! - (d) Retry to another host vs the same host (`scenarios/replicas-retry-host.ron`), one replica
//!   50x slower: retries to a replica not tried yet fail no request; retries pinned to the same
//!   replica fail the requests that drew the slow one three times in a row.
//! - Balancers spread calls as they say, and a run is the same on any number of threads.

use sim::compile::Compiled;
use sim::metrics::PolicySummary;

const ONE_BAD: &str = include_str!("../../scenarios/replicas-one-bad.ron");
const RETRY_HOST: &str = include_str!("../../scenarios/replicas-retry-host.ron");

fn scenario(text: &str, file: &str, name: &str) -> Compiled {
    sim::load_all(text, file)
        .unwrap_or_else(|e| panic!("{e}"))
        .into_iter()
        .find(|c| c.scenario.name == name)
        .unwrap()
}

/// Every policy's summary per seed: `[policy][seed]`.
fn runs(c: &Compiled, seeds: &[u64], jobs: usize) -> Vec<Vec<PolicySummary>> {
    let r = sim::run(
        c,
        seeds,
        sim::run::BatchOptions {
            jobs,
            progress: false,
        },
    )
    .unwrap();
    let mut out = vec![Vec::new(); c.scenario.policies.len()];
    for x in r.results {
        out[x.policy].push(x.output.summary);
    }
    out
}

fn mean(v: impl Iterator<Item = f64>) -> f64 {
    let v: Vec<f64> = v.collect();
    v.iter().sum::<f64>() / v.len() as f64
}

fn success(runs: &[PolicySummary]) -> f64 {
    mean(runs.iter().map(|s| s.success_rate))
}

/// Case (c) over `seeds` seeds.
fn one_bad_replica(seeds: u64) {
    let seeds: Vec<u64> = (1..=seeds).collect();
    let plain = runs(
        &scenario(ONE_BAD, "replicas-one-bad.ron", "one-bad-replica"),
        &seeds,
        2,
    );
    let ejection = runs(
        &scenario(ONE_BAD, "replicas-one-bad.ron", "one-bad-replica-ejection"),
        &seeds,
        2,
    );
    let (none, breaker, tight, ejected) = (&plain[0], &plain[1], &plain[2], &ejection[0]);
    let hosts = &plain[3];
    // The bad replica's share of the calls, with per-host breakers (a fifth without them).
    let bad_share = mean(hosts.iter().map(|s| {
        let all: u64 = s.downstreams.iter().map(|d| d.arrivals).sum();
        let bad = s.downstreams.iter().find(|d| d.name == "api[2]").unwrap();
        bad.arrivals as f64 / all as f64
    }));
    let ejections = mean(ejected.iter().map(|s| {
        s.downstreams
            .iter()
            .find(|d| d.name == "api[2]")
            .and_then(|d| d.ejections)
            .unwrap_or(0) as f64
    }));
    let good_ejections: u64 = ejected
        .iter()
        .flat_map(|s| s.downstreams.iter())
        .filter(|d| d.name != "api[2]")
        .map(|d| d.ejections.unwrap_or(0))
        .sum();
    println!(
        "one bad replica of five, {} seeds: edge success no protection {:.2}%, per-service breaker (50%) {:.2}% with {:.1} transitions per run, tight per-service breaker (5%) {:.2}% with {:.1} transitions per run, outlier ejection {:.2}% ({ejections:.1} ejections of the bad replica per run, {good_ejections} of good ones)",
        seeds.len(),
        100.0 * success(none),
        100.0 * success(breaker),
        mean(breaker.iter().map(|s| s.breaker_transitions as f64)),
        100.0 * success(tight),
        mean(tight.iter().map(|s| s.breaker_transitions as f64)),
        100.0 * success(ejected),
    );
    println!(
        "  per-host breakers (one per client per replica, 30% over 20 calls): edge success {:.2}%, {:.1} transitions per run, the bad replica got {:.2}% of the calls",
        100.0 * success(hosts),
        mean(hosts.iter().map(|s| s.breaker_transitions as f64)),
        100.0 * bad_share,
    );
    assert!(
        success(ejected) >= 0.99,
        "outlier ejection: {}",
        success(ejected)
    );
    // Per-host breakers cut the bad replica alone: the others keep their calls.
    assert!(
        success(hosts) >= 0.99,
        "per-host breakers: {}",
        success(hosts)
    );
    assert!(hosts.iter().all(|s| s.breaker_transitions > 0));
    assert!(bad_share < 0.1, "the bad replica's share: {bad_share}");
    assert!(success(none) < 0.95, "no protection: {}", success(none));
    // The per-service breaker never trips: it changes nothing.
    assert!(breaker.iter().all(|s| s.breaker_transitions == 0));
    assert!((success(breaker) - success(none)).abs() < 1e-9);
    // The tight one trips, and each time it cuts all five: worse than no breaker at all.
    assert!(tight.iter().all(|s| s.breaker_transitions > 0));
    assert!(success(tight) < success(none));
    assert!(ejections >= 1.0);
}

#[test]
fn one_bad_replica_host_breakers_and_outlier_ejection_keep_success_and_a_service_breaker_cannot() {
    one_bad_replica(2);
}

#[test]
#[ignore = "five seeds of three 300 s runs: run in release (.ci/run sim_graphs)"]
fn one_bad_replica_over_five_seeds() {
    one_bad_replica(5);
}

/// Case (d) over `seeds` seeds: (same, other, any) edge success.
fn retry_host(seeds: u64) -> (f64, f64, f64) {
    let seeds: Vec<u64> = (1..=seeds).collect();
    let one = |name: &str| {
        let r = runs(
            &scenario(RETRY_HOST, "replicas-retry-host.ron", name),
            &seeds,
            2,
        );
        success(&r[0])
    };
    let (same, other, any) = (
        one("retry-same-host"),
        one("retry-other-host"),
        one("retry-any-host"),
    );
    println!(
        "one slow replica of five, 3 attempts, {} seeds: edge success same host {:.2}%, other host {:.2}%, any host {:.2}%",
        seeds.len(),
        100.0 * same,
        100.0 * other,
        100.0 * any
    );
    (same, other, any)
}

#[test]
fn retries_to_another_replica_get_past_a_slow_one_and_retries_to_the_same_do_not() {
    let (same, other, any) = retry_host(2);
    assert!(other >= 0.999, "other host: {other}");
    assert!(same < 0.95, "same host: {same}");
    assert!(any > same && any <= other + 1e-9, "any host: {any}");
}

#[test]
#[ignore = "five seeds of three 120 s runs: run in release (.ci/run sim_graphs)"]
fn retry_host_over_five_seeds() {
    retry_host(5);
}

const SPREAD: &str = r#"Scenario(
    name: "spread",
    horizon: "10s",
    seeds: 1,
    workload: OpenLoop(rate: 500.0, arrivals: Constant),
    downstreams: [
        (name: "api", model: Server(workers: 4, service: Constant("1ms")), replicas: 4, balancer: BALANCER),
    ],
    policies: [(name: "p", stack: Call(downstream: "api", timeout: "1s"))],
)"#;

fn arrivals(balancer: &str, jobs: usize) -> Vec<u64> {
    let text = SPREAD.replace("BALANCER", balancer);
    let c = scenario(&text, "spread.ron", "spread");
    let r = runs(&c, &[1, 2, 3], jobs);
    r[0].iter()
        .flat_map(|s| s.downstreams.iter().map(|d| d.arrivals))
        .collect()
}

#[test]
fn balancers_spread_calls_and_runs_do_not_depend_on_threads() {
    // Round robin: exactly even.
    let rr = arrivals("RoundRobin", 1);
    for seed in rr.chunks(4) {
        assert!(
            seed.iter().max().unwrap() - seed.iter().min().unwrap() <= 1,
            "{seed:?}"
        );
    }
    for b in ["Random", "LeastOutstanding", "PowerOfTwo"] {
        let one = arrivals(b, 1);
        assert_eq!(one, arrivals(b, 3), "{b} with 1 and 3 threads");
        for seed in one.chunks(4) {
            let total: u64 = seed.iter().sum();
            assert!(total > 4_900, "{b}: {seed:?}");
            for &a in seed {
                assert!(a * 4 > total / 2 && a * 4 < total * 2, "{b}: {seed:?}");
            }
        }
    }
}

const ALL_DOWN: &str = r#"Scenario(
    name: "all-down",
    horizon: "30s",
    seeds: 1,
    workload: OpenLoop(rate: 100.0, clients: 2),
    downstreams: [
        (name: "api", model: Server(workers: 8, service: Constant("5ms")), replicas: 3, balancer: BALANCER),
    ],
    faults: [Outage(downstream: "api", from: "5s", until: "25s")],
    policies: [(name: "host-breakers", stack: Breaker(
        config: (consecutive_failures: 3, open: (duration: "30s")),
        scope: PerHost,
        inner: Call(downstream: "api", timeout: "100ms")))],
)"#;

#[test]
fn with_every_replica_s_breaker_open_calls_are_refused_locally() {
    for balancer in ["RoundRobin", "Random", "LeastOutstanding", "PowerOfTwo"] {
        let text = ALL_DOWN.replace("BALANCER", balancer);
        let c = scenario(&text, "all-down.ron", "all-down");
        let r = runs(&c, &[1], 1);
        let s = &r[0][0];
        // Each of 2 clients opens its breaker of each of 3 replicas after 3 failures there (18
        // failed calls, and those sent while the first timed out: 100 ms at 100 calls/s), then
        // every call is refused locally (open 30 s, past the horizon): of the 2,000 calls of the
        // outage, a few dozen reach the replicas.
        let arrivals: u64 = s.downstreams.iter().map(|d| d.arrivals).sum();
        let before = 5 * 100;
        assert!(
            arrivals >= before && arrivals <= before + 50,
            "{balancer}: {arrivals} arrivals"
        );
        assert_eq!(s.breaker_transitions, 6, "{balancer}");
        assert!(s.success_rate < 0.25, "{balancer}: {}", s.success_rate);
    }
}

#[test]
fn a_per_host_scope_anywhere_but_on_a_breaker_around_a_call_is_refused_at_its_field() {
    let retry = "Retry(policy: (max_attempts: 2, backoff: (shape: Constant(delay: \"10ms\"))), ";
    for (stack, line, field) in [
        (
            format!(
                "Breaker(config: (consecutive_failures: 3),\n        scope: PerHost,\n        inner: {retry}inner: Call(downstream: \"api\")))"
            ),
            11,
            "policies[0].stack.scope",
        ),
        (
            format!("{retry}\n        budget_scope: PerHost, inner: Call(downstream: \"api\"))"),
            11,
            "policies[0].stack.budget_scope",
        ),
    ] {
        let text = ALL_DOWN
            .replace("BALANCER", "RoundRobin")
            .replace(
                "stack: Breaker(\n        config: (consecutive_failures: 3, open: (duration: \"30s\")),\n        scope: PerHost,\n        inner: Call(downstream: \"api\", timeout: \"100ms\")))",
                &format!("stack: {stack})"),
            );
        assert!(text.contains(field.rsplit('.').next().unwrap()), "{text}");
        let e = sim::load_all(&text, "per-host.ron")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with(&format!("per-host.ron:{line}:")), "{e}");
        assert!(e.contains(field), "{e}");
        assert!(e.contains(reliable_core::policy::PER_HOST_BREAKER), "{e}");
    }
}

const THREE_TIER: &str = include_str!("../../scenarios/replicas-three-tier.ron");

#[test]
fn the_graph_picture_draws_each_replicated_service_once_with_every_replica_s_figures() {
    // Shortened to 5 s: the picture, not the storm.
    let text = THREE_TIER
        .replace("horizon: \"120s\"", "horizon: \"5s\"")
        .replace(
            "from: \"40s\", until: \"60s\"",
            "from: \"2s\", until: \"3s\"",
        );
    let c = scenario(&text, "replicas-three-tier.ron", "replicas-three-tier");
    let runs = sim::run(
        &c,
        &[1],
        sim::run::BatchOptions {
            jobs: 1,
            progress: false,
        },
    )
    .unwrap();
    let svg = sim::report::graph_svg(&runs).unwrap();
    // One box per tier, named with its replicas and balancer, with the tier's figures summed.
    for (tier, balancer) in [
        ("front", "RoundRobin"),
        ("mid", "PowerOfTwo"),
        ("db", "LeastOutstanding"),
    ] {
        assert!(
            svg.contains(&format!("{tier} × 5 replicas, {balancer}")),
            "{tier}"
        );
        // A panel per replica, with its own figures.
        for k in 0..5 {
            assert!(svg.contains(&format!(">{tier}[{k}]</text>")), "{tier}[{k}]");
        }
    }
    assert_eq!(svg.matches("edge-retries: all ").count(), 3);
    assert_eq!(svg.matches("edge-retries: ").count(), 1 + 3 + 15);
    // Three calls: edge → front → mid → db, each to the tier's box.
    assert_eq!(svg.matches("<line ").count(), 3);
    // The tier's figure is the sum of its replicas': front's arrivals per edge request.
    let front: f64 = runs.results[0].output.summary.hops.as_ref().unwrap()[..]
        .iter()
        .filter(|h| h.name.starts_with("front["))
        .map(|h| h.amplification)
        .sum();
    assert!(
        svg.contains(&format!("edge-retries: all {front:.2}×")),
        "{front}"
    );
}

/// A sweep over a scenario with replicas names the downstreams as written (`downstreams[api]`
/// for all of its replicas); each value is expanded and checked whole, so the number of replicas
/// itself can be swept, and a value that leaves a fault naming a replica that no longer exists
/// is refused before anything runs.
#[test]
fn sweeps_over_a_scenario_with_replicas_vary_it_as_written() {
    use sim::scenario::SweepValue::Number;
    let c = scenario(ONE_BAD, "replicas-one-bad.ron", "one-bad-replica-ejection");
    assert_eq!(c.written().downstreams.len(), 1);
    for n in [3u32, 8] {
        let v = c
            .with_value("downstreams[api].replicas", &Number(f64::from(n)))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(v.scenario.downstreams.len(), n as usize);
        let r = runs(&v, &[1], 1);
        let s = &r[0][0];
        // Outlier detection still takes the bad replica out: it is still a group.
        let bad = s.downstreams.iter().find(|d| d.name == "api[2]").unwrap();
        assert!(bad.ejections.unwrap_or(0) >= 1, "{n} replicas: {bad:?}");
        assert!(s.success_rate >= 0.99, "{n} replicas: {}", s.success_rate);
    }
    let e = c
        .with_value("downstreams[api].replicas", &Number(2.0))
        .unwrap_err()
        .to_string();
    assert!(e.contains("api[2]"), "{e}");
    // Written in the file, a bad value is refused at the sweep's position.
    let text = ONE_BAD.replace(
        "policies: [\n            (name: \"outlier-ejection\"",
        "sweep: (parameter: \"downstreams[api].replicas\", values: [5.0, 0.0]),\n        policies: [\n            (name: \"outlier-ejection\"",
    );
    assert!(text.contains("sweep:"));
    let e = sim::load_all(&text, "one-bad.ron").unwrap_err().to_string();
    assert!(
        e.contains("sweep.values[1]") && e.contains("0 replicas"),
        "{e}"
    );
    assert!(e.starts_with("one-bad.ron:"), "{e}");
}

/// With replicas but no services, the picture shows the replicated downstream as one box with a
/// panel per replica, from the totals: its error share, the bad replica shaded.
#[test]
fn the_picture_of_replicas_without_services_shows_the_bad_one() {
    let text = ONE_BAD
        .replace("horizon: \"300s\"", "horizon: \"60s\"")
        .replace("until: \"240s\"", "until: \"50s\"");
    let c = scenario(&text, "replicas-one-bad.ron", "one-bad-replica");
    let r = sim::run(
        &c,
        &[1],
        sim::run::BatchOptions {
            jobs: 1,
            progress: false,
        },
    )
    .unwrap();
    let svg = sim::report::graph_svg(&r).unwrap();
    assert!(
        svg.contains("api × 5 replicas, RoundRobin (depth 1)"),
        "{svg}"
    );
    assert!(svg.contains("error share, per policy"));
    for k in 0..5 {
        assert!(svg.contains(&format!(">api[{k}]</text>")), "api[{k}]");
    }
    // The bad replica's panel is the only one shaded as bad.
    assert_eq!(svg.matches(r##"fill="#f4c7c3" stroke="#888""##).count(), 1);
    assert_eq!(svg.matches("<line ").count(), 1);
    assert!(sim::report::summary_md(&r).contains("](graph.svg)"));
}

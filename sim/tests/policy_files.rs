//! The same policy, two faces: every shipped policy that a `Reliable` runs (one route, no
//! throttle, no LLM layer; its hedging, ledger and limit layers included) is loaded by
//! `reliable::policy` from its scenario file unchanged, and it and the simulator's client stack
//! meet the same scripted downstream. Per request, both must end the same way (ok or not) after
//! the same number of downstream calls (hedges included). A hedged policy runs in
//! `Reliable::call` on tokio's paused clock, against answers slow enough to be hedged; the others
//! in `call_blocking` on a manual clock.

use std::path::PathBuf;

use reliable::policy::Plan;
use reliable_core::Duration;
use reliable_core::outcome::ErrorClass;
use sim::scenario::{
    Arrivals, Downstream, DownstreamModel, Layer, Network, Scenario, ScriptAnswer, Workload,
};

const REQUESTS: u64 = 24;
const GAP_S: u64 = 600;
/// Every answer's latency: under every shipped timeout.
const LATENCY_MS: u64 = 10;
/// A hedged policy's answers: later than the shipped fixed hedge delays (10 and 30 ms), so its
/// hedges are sent (the p95 delay settles just above it, and then none are).
const HEDGED_LATENCY_MS: u64 = 40;

/// Fails calls 3 to 40 (enough to open every shipped breaker and drain every budget; requests
/// come 10 min apart, so even an unlimited retry is over before the next one starts), then
/// answers ok; a transient 500 each time, 10 ms after the call.
fn script() -> Vec<ScriptAnswer> {
    (1..=40)
        .map(|n| {
            if n >= 3 {
                ScriptAnswer::Error
            } else {
                ScriptAnswer::Ok
            }
        })
        .collect()
}

/// Whether a `Reliable` runs `layer` (a single route of retry, breaker, budget, hedge, ledger,
/// limit and calls; its loader refuses the shapes it runs differently).
fn eligible(layer: &Layer) -> bool {
    match layer {
        Layer::Call { timeout_dist, .. } => timeout_dist.is_none(),
        // One host per downstream in `reliable`: it refuses breakers per host.
        Layer::Breaker {
            scope: reliable_core::policy::Scope::PerHost,
            ..
        } => false,
        // A fleet's breaker: `reliable::policy` builds it only given stores (Route::fleet_builder),
        // deciding on a view refreshed in the background, as the simulator's cached mode does
        // with its store's round trips: alike in verdicts, not call by call (scenarios/README.md).
        Layer::Breaker { scope, .. } if scope.fleet().is_some() => false,
        Layer::Retry { inner, .. }
        | Layer::Breaker { inner, .. }
        | Layer::Hedge { inner, .. }
        | Layer::Ledger { inner, .. }
        | Layer::Limit { inner, .. }
        | Layer::RateLimit { inner, .. } => eligible(inner),
        Layer::Throttle { .. } | Layer::Llm { .. } | Layer::Fallback(_) => false,
    }
}

/// (downstream calls so far, ok) after each request, in the simulator.
fn simulated(mut s: Scenario, policy: usize, downstream: &str, latency: u64) -> Vec<(u64, bool)> {
    s.workload = Workload::OpenLoop {
        rate: 1.0 / GAP_S as f64,
        arrivals: Arrivals::Constant,
        clients: 1,
        start: Duration::from_secs(1),
        steps: vec![],
    };
    s.horizon = Duration::from_secs(GAP_S * REQUESTS);
    s.bucket = Duration::from_secs(60);
    s.downstreams = vec![Downstream {
        name: downstream.to_string(),
        model: DownstreamModel::Scripted {
            script: script(),
            then: ScriptAnswer::Ok,
            latency: Duration::from_millis(latency),
            latencies: Vec::new(),
        },
        network: Network::default(),
        handler: None,
        replicas: None,
        balancer: None,
        outlier_detection: None,
        retry_host: None,
    }];
    s.faults = vec![];
    s.client_faults = vec![];
    s.policies = vec![s.policies[policy].clone()];
    s.sweep = None;
    s.map = None;
    s.seeds = 1;
    // Written with the extensions the scenario parser reads with.
    let ext = ron::extensions::Extensions::IMPLICIT_SOME
        | ron::extensions::Extensions::UNWRAP_VARIANT_NEWTYPES;
    let text = ron::Options::default()
        .with_default_extension(ext)
        .to_string(&s)
        .unwrap();
    let c = sim::load(&text, "scripted.ron").unwrap_or_else(|e| panic!("{e}"));
    let rows = sim::run::trace(&c, 0, c.scenario.seed).unwrap();
    rows.iter()
        .map(|r| (r.calls_so_far[0], r.outcome == "ok"))
        .collect()
}

/// The same, through the `Reliable` the plan builds, in manual time.
fn real(plan: &Plan) -> Vec<(u64, bool)> {
    let clock = reliable::clock::ManualClock::new();
    let rel = plan
        .builder()
        .unwrap()
        .manual_time(clock.clone())
        .seed(1)
        .build()
        .unwrap();
    let script = script();
    let mut calls = 0u64;
    (0..REQUESTS)
        .map(|k| {
            clock.set(std::time::Duration::from_secs(1 + k * GAP_S));
            let out = rel.call_blocking(|| {
                calls += 1;
                clock.advance(std::time::Duration::from_millis(LATENCY_MS));
                match script.get(calls as usize - 1) {
                    Some(ScriptAnswer::Error) => Err(ErrorClass::Transient),
                    _ => Ok(()),
                }
            });
            (calls, out.is_ok())
        })
        .collect()
}

/// The same, hedged: `Reliable::call` on tokio's paused clock, every copy a downstream call.
fn real_hedged(plan: &Plan) -> Vec<(u64, bool)> {
    use std::time::Duration as Std;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    runtime.block_on(async {
        let rel = plan
            .builder()
            .unwrap()
            .clock(reliable::clock::TokioClock::new())
            .sleep(reliable::sleep::TokioSleep)
            .seed(1)
            .build()
            .unwrap();
        let t0 = tokio::time::Instant::now();
        let script = script();
        let calls = std::cell::Cell::new(0u64);
        let mut out = Vec::new();
        for k in 0..REQUESTS {
            tokio::time::sleep_until(t0 + Std::from_secs(1 + k * GAP_S)).await;
            let result = rel
                .call(|| {
                    calls.set(calls.get() + 1);
                    let fails = matches!(
                        script.get(calls.get() as usize - 1),
                        Some(ScriptAnswer::Error)
                    );
                    async move {
                        tokio::time::sleep(Std::from_millis(HEDGED_LATENCY_MS)).await;
                        if fails {
                            Err(ErrorClass::Transient)
                        } else {
                            Ok(())
                        }
                    }
                })
                .await;
            out.push((calls.get(), result.is_ok()));
        }
        out
    })
}

#[test]
fn shipped_policies_loaded_into_reliable_decide_like_the_simulator() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
    let (mut compared, mut hedged, mut sent_hedges) = (0, 0, 0);
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|x| x != "ron") {
            continue;
        }
        let file = path.display().to_string();
        let text = std::fs::read_to_string(&path).unwrap();
        for c in sim::load_all(&text, &file).unwrap() {
            for (i, p) in c.scenario.policies.iter().enumerate() {
                if !eligible(&p.stack) {
                    continue;
                }
                let plan = Plan::from_scenario_in(&text, &file, &c.scenario.name, &p.name)
                    .unwrap_or_else(|e| panic!("{e}"));
                let route = &plan.routes[0];
                let latency = match route.hedge {
                    Some(_) => HEDGED_LATENCY_MS,
                    None => LATENCY_MS,
                };
                let want = simulated(c.scenario.clone(), i, &route.downstream, latency);
                assert_eq!(want.len() as u64, REQUESTS, "{file} {}", p.name);
                let got = match route.hedge {
                    Some(_) => {
                        hedged += 1;
                        let got = real_hedged(&plan);
                        // No retries here: a call beyond one per request is a hedge.
                        if got.last().is_some_and(|(calls, _)| *calls > REQUESTS) {
                            sent_hedges += 1;
                        }
                        got
                    }
                    None => real(&plan),
                };
                assert_eq!(got, want, "{file}: {} / {}", c.scenario.name, p.name);
                compared += 1;
            }
        }
    }
    println!(
        "{compared} shipped policies ({hedged} hedged, {sent_hedges} sending hedges) decide alike in the simulator and in a Reliable"
    );
    assert!(compared >= 30, "{compared}");
    // tail-at-scale's and hedging-storm's hedged policies. Those with a fixed delay and no ledger
    // send hedges; a 10% ledger whose deposits last 10 s never holds a whole hedge with requests
    // 10 min apart, and the p95 delay settles above the answers' latency.
    assert!(hedged >= 6 && sent_hedges >= 2, "{hedged} {sent_hedges}");
}

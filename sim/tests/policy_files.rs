//! The same policy, two faces: every shipped policy that a `Reliable` runs (one route, no
//! throttle, no LLM layer) is loaded by `reliable::policy` from its scenario file unchanged, and
//! it and the simulator's client stack meet the same scripted downstream. Per request, both must
//! end the same way (ok or not) after the same number of downstream calls.

use std::path::PathBuf;

use reliable::policy::Plan;
use reliable_core::Duration;
use reliable_core::outcome::ErrorClass;
use sim::scenario::{
    Arrivals, Downstream, DownstreamModel, Layer, Network, Scenario, ScriptAnswer, Workload,
};

const REQUESTS: u64 = 24;
const GAP_S: u64 = 600;

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

/// Whether a `Reliable` runs `layer` (a single route of retry, breaker, budget and calls).
fn eligible(layer: &Layer) -> bool {
    match layer {
        Layer::Call { timeout_dist, .. } => timeout_dist.is_none(),
        Layer::Retry { inner, .. } | Layer::Breaker { inner, .. } => eligible(inner),
        Layer::Throttle { .. }
        | Layer::Llm { .. }
        | Layer::Fallback(_)
        | Layer::Hedge { .. }
        | Layer::Ledger { .. }
        | Layer::Limit { .. } => false,
    }
}

/// (downstream calls so far, ok) after each request, in the simulator.
fn simulated(mut s: Scenario, policy: usize, downstream: &str) -> Vec<(u64, bool)> {
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
            latency: Duration::from_millis(10),
            latencies: Vec::new(),
        },
        network: Network::default(),
    }];
    s.faults = vec![];
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
                clock.advance(std::time::Duration::from_millis(10));
                match script.get(calls as usize - 1) {
                    Some(ScriptAnswer::Error) => Err(ErrorClass::Transient),
                    _ => Ok(()),
                }
            });
            (calls, out.is_ok())
        })
        .collect()
}

#[test]
fn shipped_policies_loaded_into_reliable_decide_like_the_simulator() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
    let mut compared = 0;
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
                let want = simulated(c.scenario.clone(), i, &route.downstream);
                assert_eq!(want.len() as u64, REQUESTS, "{file} {}", p.name);
                let got = real(&plan);
                assert_eq!(got, want, "{file}: {} / {}", c.scenario.name, p.name);
                compared += 1;
            }
        }
    }
    println!("{compared} shipped policies decide alike in the simulator and in a Reliable");
    assert!(compared >= 30, "{compared}");
}

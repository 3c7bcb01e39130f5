//! Call graphs: services whose handlers call other downstreams through their own policies.
//!
//! - The product law (`scenarios/call-graph-product.ron`): with every leaf call failing, the leaf
//!   gets exactly the product of the attempts at each hop per edge request; with a leaf failure
//!   probability p, the mean over seeds matches the closed form within 2%.
//! - Bad graphs (a cycle, an unknown name, a handler on a model that cannot make calls, an empty
//!   or too wide fan-out) are refused at `file:line:col`.
//!
//! The default tests run few seeds; `--ignored` (in release) runs the seeds the README's figures
//! come from.

mod common;

use sim::compile::Compiled;
use sim::metrics::hops::HopSummary;
use sim::metrics::{PolicySummary, Verdict};

const PRODUCT: &str = include_str!("../../scenarios/call-graph-product.ron");

fn scenario(text: &str, file: &str, name: &str) -> Compiled {
    sim::load_all(text, file)
        .unwrap_or_else(|e| panic!("{e}"))
        .into_iter()
        .find(|c| c.scenario.name == name)
        .unwrap()
}

/// Every policy's summary per seed: `[policy][seed]`.
fn runs(c: &Compiled, seeds: &[u64]) -> Vec<Vec<PolicySummary>> {
    let r = sim::run(
        c,
        seeds,
        sim::run::BatchOptions {
            jobs: 2,
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

fn hop<'a>(s: &'a PolicySummary, name: &str) -> &'a HopSummary {
    s.hops
        .as_ref()
        .expect("a call graph")
        .iter()
        .find(|h| h.name == name)
        .unwrap()
}

/// Calls reaching the leaf per edge request below `hops` hops of `k` attempts each, the leaf
/// failing with probability `p`: each hop's calls fail with the probability that all `k`
/// attempts of the hop below failed.
fn closed_form(p: f64, k: i32, hops: usize) -> f64 {
    let attempts = |q: f64| (0..k).map(|i| q.powi(i)).sum::<f64>();
    let (mut q, mut product) = (p, 1.0);
    for _ in 0..hops {
        product *= attempts(q);
        q = q.powi(k);
    }
    product
}

#[test]
fn every_leaf_call_failing_costs_the_product_of_the_attempts_exactly() {
    let c = scenario(
        PRODUCT,
        "call-graph-product.ron",
        "call-graph-product-all-fail",
    );
    let all = runs(&c, &[1]);
    for (policy, per_hop) in [(0, [3, 9, 27]), (1, [1, 3, 9])] {
        let s = &all[policy][0];
        assert!(s.first_tries > 1000, "{}", s.first_tries);
        for (name, times) in ["front", "middle", "leaf"].iter().zip(per_hop) {
            let h = hop(s, name);
            assert_eq!(
                h.arrivals,
                times * s.first_tries,
                "{} {name}: {} arrivals for {} edge requests",
                s.name,
                h.arrivals,
                s.first_tries
            );
        }
        // The run's own amplification is what the edge sends: depth 1 only.
        assert_eq!(s.server_arrivals, hop(s, "front").arrivals);
        println!(
            "{}: leaf calls per edge request {:.3} (front {:.3}, middle {:.3}) over {} requests",
            s.name,
            hop(s, "leaf").amplification,
            hop(s, "front").amplification,
            hop(s, "middle").amplification,
            s.first_tries
        );
    }
}

fn product_law_mean(seeds: u64) {
    let c = scenario(PRODUCT, "call-graph-product.ron", "call-graph-product-half");
    let seeds: Vec<u64> = (1..=seeds).collect();
    let all = runs(&c, &seeds);
    for (policy, hops) in [(0, 3), (1, 2)] {
        let leaf: Vec<f64> = all[policy]
            .iter()
            .map(|s| hop(s, "leaf").amplification)
            .collect();
        let mean = leaf.iter().sum::<f64>() / leaf.len() as f64;
        let want = closed_form(0.5, 3, hops);
        let gap = (mean / want - 1.0).abs();
        println!(
            "{}: leaf calls per edge request {mean:.4} over {} seeds, closed form {want:.4} ({:+.2}%)",
            all[policy][0].name,
            leaf.len(),
            (mean / want - 1.0) * 100.0
        );
        assert!(gap < 0.02, "{}: {mean} vs {want}", all[policy][0].name);
    }
}

#[test]
fn with_a_leaf_failing_half_its_calls_the_mean_matches_the_closed_form() {
    product_law_mean(2);
}

#[test]
#[ignore = "many seeds: run in release (.ci/run sim_graphs)"]
fn product_law_over_twenty_seeds() {
    product_law_mean(20);
}

fn graph(downstreams: &str) -> String {
    format!(
        "Scenario(\n  name: \"g\",\n  horizon: \"10s\",\n  workload: OpenLoop(rate: 10.0),\n  downstreams: [\n{downstreams}  ],\n  policies: [(name: \"p\", stack: Call(downstream: \"a\", timeout: \"1s\"))],\n)\n"
    )
}

#[test]
fn bad_graphs_are_refused_at_their_position() {
    let call = |to: &str| format!("(stack: Call(downstream: \"{to}\", timeout: \"1s\"))");
    let svc = |name: &str, to: &str| {
        format!(
            "    (name: \"{name}\", model: Server(workers: 1, service: Constant(\"1ms\")), handler: (calls: [{}])),\n",
            call(to)
        )
    };
    let leaf = "    (name: \"c\", model: Server(workers: 1, service: Constant(\"1ms\"))),\n";
    // A cycle, pointed at the call that closes it.
    let e = common::error(&graph(&(svc("a", "b") + &svc("b", "a"))));
    assert!(
        e.starts_with("bad.ron:7:89: downstreams[1].handler.calls[0].stack: a cycle: a → b → a"),
        "{e}"
    );
    let e = common::error(&graph(&svc("a", "a")));
    assert!(
        e.starts_with("bad.ron:6:89: downstreams[0].handler.calls[0].stack: \"a\" calls itself"),
        "{e}"
    );
    // An unknown name.
    let e = common::error(&graph(&svc("a", "nowhere")));
    assert!(
        e.starts_with("bad.ron:6:")
            && e.contains(
                "downstreams[0].handler.calls[0].stack.downstream: no downstream named \"nowhere\""
            ),
        "{e}"
    );
    // A handler on a model that cannot make calls.
    let e = common::error(&graph(
        &("    (name: \"a\", model: Register, handler: (calls: [(stack: Call(downstream: \"c\"))])),\n"
            .to_string()
            + leaf),
    ));
    assert!(
        e.starts_with("bad.ron:6:")
            && e.contains("downstreams[0].handler: a handler on a model other than Server"),
        "{e}"
    );
    // No calls, and too many.
    let e = common::error(&graph(
        "    (name: \"a\", model: Server(workers: 1, service: Constant(\"1ms\")), handler: (calls: [])),\n",
    ));
    assert!(
        e.contains("handler.calls: 0 calls: expected 1 to 64"),
        "{e}"
    );
    let many = vec![call("c"); 65].join(", ");
    let e = common::error(&graph(
        &(format!(
            "    (name: \"a\", model: Server(workers: 1, service: Constant(\"1ms\")), handler: (calls: [{many}])),\n"
        ) + leaf),
    ));
    assert!(
        e.contains("65 calls: expected 1 to 64 (the fan-out limit)"),
        "{e}"
    );
    // A valid graph with an optional call and a parallel fan-out is accepted.
    let ok = graph(&format!(
        "    (name: \"a\", model: Server(workers: 1, service: Constant(\"1ms\")), handler: (calls: [{}, (stack: Call(downstream: \"c\", timeout: \"1s\"), required: false)], parallel: true)),\n{leaf}",
        call("c")
    ));
    common::compile(&ok);
}

const STORM: &str = include_str!("../../scenarios/call-graph-storm.ron");

/// Verdicts of `name` over `seeds`: (stuck, recovered, recovery times in s, mean db arrivals per
/// edge request, mean edge success).
fn storm(name: &str, seeds: u64) -> (usize, usize, Vec<f64>, f64, f64) {
    let c = scenario(STORM, "call-graph-storm.ron", name);
    let seeds: Vec<u64> = (1..=seeds).collect();
    let all = runs(&c, &seeds);
    let runs = &all[0];
    let stuck = runs.iter().filter(|s| s.verdict == Verdict::Stuck).count();
    let recovered = runs
        .iter()
        .filter(|s| s.verdict == Verdict::Recovered)
        .count();
    let mut times: Vec<f64> = runs.iter().filter_map(|s| s.recovery_s).collect();
    times.sort_by(f64::total_cmp);
    let n = runs.len() as f64;
    let db = runs.iter().map(|s| hop(s, "db").amplification).sum::<f64>() / n;
    let success = runs.iter().map(|s| s.success_rate).sum::<f64>() / n;
    println!(
        "{name}: stuck {stuck}/{}, recovered {recovered}/{} (recovery s: median {}, max {}), db calls per edge request {db:.2}, edge success {:.1}%",
        runs.len(),
        runs.len(),
        times
            .get(times.len() / 2)
            .map_or("-".into(), |t| format!("{t}")),
        times.last().map_or("-".into(), |t| format!("{t}")),
        success * 100.0
    );
    (stuck, recovered, times, db, success)
}

fn three_tier_storm(seeds: u64) {
    let n = seeds as usize;
    let (stuck, _, _, db, _) = storm("storm-per-hop-retries", seeds);
    assert_eq!(stuck, n, "per-hop retries stay down");
    assert!(db > 10.0, "{db}");
    for name in [
        "storm-edge-retries-only",
        "storm-per-hop-budgets",
        "storm-deadline-propagation",
    ] {
        let (_, recovered, _, _, _) = storm(name, seeds);
        assert_eq!(recovered, n, "{name} recovers");
    }
    // The do-not-retry answer arrives after the edge's own timeout here: the edge retries anyway.
    storm("storm-one-retrying-layer", seeds);
}

#[test]
#[ignore = "five 120 s storms: run in release (.ci/run sim_graphs)"]
fn a_three_tier_storm_over_twenty_seeds() {
    three_tier_storm(20);
}

/// `graph.depth` × `graph.attempts`, the parameters `sim map` and `sim sweep` vary a call graph
/// by: with every leaf call failing, each point gets exactly k^d leaf calls per edge request (k
/// attempts at each of d hops), and k^(d-1) when the edge does not retry.
#[test]
fn depth_and_attempts_per_hop_vary_the_graph_and_the_product_law_holds_at_every_point() {
    use sim::scenario::SweepValue::Number;
    let c = scenario(
        PRODUCT,
        "call-graph-product.ron",
        "call-graph-product-all-fail",
    );
    for d in 1..=3u32 {
        for k in 1..=4u32 {
            let v = c
                .with_value("graph.depth", &Number(f64::from(d)))
                .and_then(|v| v.with_value("graph.attempts", &Number(f64::from(k))))
                .unwrap_or_else(|e| panic!("{e}"));
            // The services between the edge and the leaf: d - 1 of them, then the leaf.
            let names: Vec<&str> = v
                .scenario
                .downstreams
                .iter()
                .map(|x| x.name.as_str())
                .collect();
            assert_eq!(names.len(), d as usize, "{names:?}");
            assert_eq!(names.last(), Some(&"leaf"));
            let all = runs(&v, &[1]);
            for (policy, want) in [(0, k.pow(d)), (1, k.pow(d - 1))] {
                let s = &all[policy][0];
                // At depth 1 there is no service, so no hop figures: the leaf's own.
                let leaf = s.downstreams.iter().find(|x| x.name == "leaf").unwrap();
                assert_eq!(
                    leaf.arrivals,
                    u64::from(want) * s.first_tries,
                    "depth {d}, {k} attempts, {}",
                    s.name
                );
            }
        }
    }
    // Out of range, or not a chain: refused, saying why.
    let e = c
        .with_value("graph.depth", &Number(4.0))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("has 3 tiers: expected a depth from 1 to 3"),
        "{e}"
    );
    let e = c
        .with_value("graph.attempts", &Number(1.5))
        .unwrap_err()
        .to_string();
    assert!(e.contains("expected a whole number of at least 1"), "{e}");
    let e = c
        .with_value("graph.width", &Number(2.0))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("expected `graph.depth` or `graph.attempts`"),
        "{e}"
    );
}

/// `sim map` over depth × attempts per hop (`values`: the `--x-values` and `--y-values`), on a
/// graph whose leaf has replicas, run on 1 and 2 threads: the CSV (with the cells in order).
fn depth_map(values: [&str; 2]) -> String {
    let dir = std::env::temp_dir().join(format!(
        "sim-depth-map-{}-{}",
        std::process::id(),
        values[0]
    ));
    let file = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../scenarios/call-graph-depth-map.ron"
    );
    let map = |jobs: &str| {
        let out = dir.join(jobs);
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_sim"))
            .args(["map", file, "--seeds", "1", "--jobs", jobs, "-q"])
            .args(["--x", "graph.depth", "--x-values", values[0]])
            .args(["--y", "graph.attempts", "--y-values", values[1], "--out"])
            .arg(&out)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let folder = out.join("call-graph-depth-map");
        ["map.csv", "map.md", "map-stuck.svg"].map(|f| std::fs::read(folder.join(f)).unwrap())
    };
    let (one, two) = (map("1"), map("2"));
    let _ = std::fs::remove_dir_all(&dir);
    assert!(one == two, "the map differs between 1 and 2 threads");
    String::from_utf8(one[0].clone()).unwrap()
}

/// A small map in every build: the same on any thread count.
#[test]
fn a_map_over_depth_and_attempts_of_a_graph_with_replicas_is_the_same_on_any_thread_count() {
    let csv = depth_map(["1,2", "1,2"]);
    assert_eq!(csv.lines().count(), 1 + 4, "{csv}");
}

/// The file's whole map: the same on any thread count, a cliff where k^d passes what the leaf
/// can absorb, and every point estimated before anything runs.
#[test]
#[ignore = "16 cells on 1 and 2 threads: run in release (.ci/run sim_graphs)"]
fn the_depth_map_has_its_cliff_and_every_point_is_bounded_before_it_runs() {
    let csv = depth_map(["1,2,3,4", "1,2,3,4"]);
    let file = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../scenarios/call-graph-depth-map.ron"
    );
    let dir = std::env::temp_dir().join(format!("sim-depth-map-{}-refused", std::process::id()));
    // Columns: x_parameter, x, y_parameter, y, policy, seeds, stuck, ...
    let stuck = |d: u32, k: u32| {
        csv.lines()
            .find(|l| l.starts_with(&format!("graph.depth,{d},graph.attempts,{k},")))
            .map(|l| l.split(',').nth(6).unwrap() == "1")
            .unwrap()
    };
    // One attempt per hop never sticks; 4 hops of 4 attempts (256 leaf calls) always does.
    assert!((1..=4).all(|d| !stuck(d, 1)));
    assert!(stuck(4, 4) && !stuck(1, 2));
    // Every point is estimated before anything runs: 8 attempts at each of 4 hops (4,096 leaf
    // calls per request) is refused by the event limit, naming the point.
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_sim"))
        .args(["map", file, "--seeds", "1", "-q", "--max-events", "2e7"])
        .args(["--x", "graph.attempts", "--x-values", "1,8"])
        .args(["--y", "graph.depth", "--y-values", "1,4", "--out"])
        .arg(&dir)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("(graph.attempts = 8) (graph.depth = 4)") && err.contains("--max-events"),
        "{err}"
    );
    let written = dir.join("call-graph-depth-map").exists();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(!written, "a refused map wrote files");
}

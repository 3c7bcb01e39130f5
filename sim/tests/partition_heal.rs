//! `scenarios/partition-heal.ron`: what its comments and `scenarios/README.md` claim, checked on
//! every seed run. The default test runs one seed; `--ignored` (in release, `.ci/run
//! sim_scenarios`) runs the 20 the README's figures come from.

use sim::metrics::{PolicySummary, Verdict};
use sim::run::BatchOptions;

/// Every policy's summary for every seed of the shipped scenario `name`, by policy name.
fn run(name: &str, seeds: &[u64]) -> Vec<(String, PolicySummary)> {
    let c = sim::shipped(name).unwrap().unwrap();
    let runs = sim::run(
        &c,
        seeds,
        BatchOptions {
            jobs: 1,
            progress: false,
        },
    )
    .unwrap();
    runs.results
        .into_iter()
        .map(|r| (c.scenario.policies[r.policy].name.clone(), r.output.summary))
        .collect()
}

/// The summaries of `policy`, one per seed.
fn of<'a>(all: &'a [(String, PolicySummary)], policy: &str) -> Vec<&'a PolicySummary> {
    let v: Vec<_> = all
        .iter()
        .filter(|(n, _)| n == policy)
        .map(|(_, s)| s)
        .collect();
    assert!(!v.is_empty(), "no policy {policy}");
    v
}

const RETRYING: [&str; 2] = ["naive retries", "backoff + jitter"];
const GUARDED: [&str; 3] = ["no retries", "retry budget", "breaker"];

fn check(seeds: &[u64]) {
    let heal = run("partition-heal", seeds);
    let drop = run("partition-drop", seeds);
    let refused = run("partition-refused", seeds);
    for (name, all) in [("heal", &heal), ("drop", &drop)] {
        for p in RETRYING {
            for s in of(all, p) {
                assert_eq!(s.verdict, Verdict::Stuck, "{name} {p}");
            }
        }
        for p in GUARDED {
            for s in of(all, p) {
                assert_eq!(s.verdict, Verdict::Recovered, "{name} {p}");
            }
        }
    }
    for (p, _) in &refused {
        for s in of(&refused, p) {
            assert_eq!(s.verdict, Verdict::Recovered, "refused {p}");
        }
    }
    // The herd: the held traffic arrives in one bucket; retries into the buffer multiply it,
    // jitter does not spread it (the buffer releases everything at one instant), and the
    // breaker, open during the partition, sends the least into it.
    for (i, quiet) in of(&heal, "no retries").into_iter().enumerate() {
        let peak = |p: &str| of(&heal, p)[i].amplification.peak;
        assert!(
            quiet.amplification.peak > 8.0,
            "{}",
            quiet.amplification.peak
        );
        for p in RETRYING {
            assert!(peak(p) > 3.0 * quiet.amplification.peak, "{p}: {}", peak(p));
        }
        assert!(peak("breaker") < 0.6 * quiet.amplification.peak);
        // The same cut without the herd: no retries and the budget are back within about a
        // second; after the herd it takes them several.
        for p in ["no retries", "retry budget"] {
            let after_drop = of(&drop, p)[i].recovery_s.unwrap();
            let after_heal = of(&heal, p)[i].recovery_s.unwrap();
            assert!(after_drop <= 1.5, "{p}: {after_drop}");
            assert!(after_heal > 3.0, "{p}: {after_heal}");
        }
    }
}

#[test]
fn the_herd_at_heal_and_who_survives_it() {
    check(&[1]);
}

#[test]
#[ignore = "20 seeds: run in release (.ci/run sim_scenarios)"]
fn the_herd_at_heal_and_who_survives_it_over_20_seeds() {
    check(&(1..=20).collect::<Vec<_>>());
}

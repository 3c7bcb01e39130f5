//! Golden snapshot: a small scenario's `summary.json` and `timeseries.csv`, byte for byte.
//!
//! A change that moves any number shows up here. If the change is intended, regenerate with
//! `UPDATE_GOLDEN=1 cargo test -p sim --test golden` and review the diff like code.

mod common;

use std::path::PathBuf;

use sim::run::BatchOptions;

fn check(name: &str, got: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, got).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (run with UPDATE_GOLDEN=1 to create it)",
            path.display()
        )
    });
    if want != got {
        let line = want
            .lines()
            .zip(got.lines())
            .position(|(a, b)| a != b)
            .map_or(want.lines().count().min(got.lines().count()), |i| i);
        panic!(
            "{name} differs from the snapshot at line {}:\n  want: {}\n  got:  {}\n(UPDATE_GOLDEN=1 regenerates it if the change is intended)",
            line + 1,
            want.lines().nth(line).unwrap_or("<end>"),
            got.lines().nth(line).unwrap_or("<end>")
        );
    }
}

#[test]
fn small_storm_matches_the_snapshot() {
    let c = common::compile(include_str!("data/storm.ron"));
    let seeds = [c.scenario.seed];
    let runs = sim::run(
        &c,
        &seeds,
        BatchOptions {
            jobs: 2,
            progress: false,
        },
    )
    .unwrap();
    check("storm.summary.json", &sim::report::summary_json(&runs));
    check("storm.timeseries.csv", &sim::report::timeseries_csv(&runs));
}

//! The simulator as a library, the way other crates use it: load a scenario from text, estimate
//! it, run it with seeds, and get the table, the conclusion, a plot as PNG bytes, the JSON summary
//! and a report folder, without touching the command line.

use sim::compile::Limits;
use sim::run::BatchOptions;
use sim::scenario::SweepValue;

const STORM: &str = include_str!("data/storm.ron");

#[test]
fn load_estimate_run_and_render() {
    let c = sim::load(STORM, "storm.ron").unwrap();
    // The scenario stays readable: its downstreams, faults, workload and policy configs.
    assert_eq!(c.scenario.name, "test-storm");
    assert!(!c.scenario.faults.is_empty());
    let e = c.estimate(2, 1, 1, &Limits::default()).unwrap();
    assert!(e.events > 0.0 && e.memory > 0.0, "{e:?}");
    // A tight limit refuses the same batch, naming the limit.
    let tight = Limits {
        max_events: 1000.0,
        ..Limits::default()
    };
    let err = c.estimate(2, 1, 1, &tight).unwrap_err().to_string();
    assert!(
        err.starts_with("storm.ron:") && err.contains("--max-events"),
        "{err}"
    );

    let runs = sim::run(
        &c,
        &[1, 2],
        BatchOptions {
            jobs: 1,
            progress: false,
        },
    )
    .unwrap();
    assert_eq!(runs.results.len(), 2 * c.scenario.policies.len());
    let table = sim::report::table(&runs, false);
    for p in &c.scenario.policies {
        assert!(table.contains(&p.name), "{table}");
    }
    assert!(sim::report::conclusion(&runs).contains("Bottom line"));
    let png = sim::report::figure_png(&runs, "amplification").unwrap();
    assert_eq!(&png[1..4], b"PNG");
    assert!(sim::report::figure_png(&runs, "nope").is_err());
    let json: serde_json::Value = serde_json::from_str(&sim::report::summary_json(&runs)).unwrap();
    assert_eq!(json["seeds"], serde_json::json!([1, 2]));
    let out = std::env::temp_dir().join(format!("sim-library-{}", std::process::id()));
    let dir = sim::write(&out, &runs).unwrap();
    assert_eq!(dir, out.join("test-storm"));
    for f in sim::report::file_names() {
        assert!(dir.join(&f).is_file(), "{f}");
    }
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn a_parameter_can_be_set_and_bad_values_are_refused() {
    let c = sim::load(STORM, "storm.ron").unwrap();
    let v = c
        .with_value("workload.rate", &SweepValue::Number(100.0))
        .unwrap();
    assert_ne!(v.scenario.workload, c.scenario.workload);
    let err = c
        .with_value("workload.rate", &SweepValue::Number(-1.0))
        .unwrap_err()
        .to_string();
    assert!(err.contains("workload.rate"), "{err}");
    assert!(
        c.with_value("no.such.field", &SweepValue::Number(1.0))
            .is_err()
    );
}

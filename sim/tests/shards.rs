//! Sharded sweeps and maps: `--shard i/n` (or `--shard auto` from the environment) and
//! `sim merge`, which must write the unsharded report byte for byte and refuse shards that do not
//! add up to exactly one batch.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn sim(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_sim"));
    c.args(args);
    for var in [
        "SIM_SHARD_INDEX",
        "SIM_SHARD_COUNT",
        "SLURM_ARRAY_TASK_ID",
        "SLURM_ARRAY_TASK_COUNT",
        "SLURM_ARRAY_TASK_MIN",
        "SLURM_ARRAY_TASK_STEP",
        "JOB_COMPLETION_INDEX",
    ] {
        c.env_remove(var);
    }
    c.envs(env.iter().copied());
    c.output().unwrap()
}

fn ok(out: &Output) {
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn err(out: &Output) -> String {
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn temp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("sim-shards-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Every file of `a` and `b`, byte for byte.
fn same_files(a: &Path, b: &Path) {
    let names = |d: &Path| {
        let mut v: Vec<String> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    assert_eq!(names(a), names(b));
    for n in names(a) {
        assert!(
            std::fs::read(a.join(&n)).unwrap() == std::fs::read(b.join(&n)).unwrap(),
            "{n} differs"
        );
    }
}

const SCENARIO: &str = r#"Scenario(
    name: "tiny-map",
    description: "A small map for the shard tests.",
    horizon: "20s",
    seeds: 5,
    workload: OpenLoop(rate: 60.0, clients: 10),
    downstreams: [(name: "api", model: Server(workers: 10, service: Exponential(mean: "100ms")))],
    faults: [CapacityLoss(downstream: "api", from: "5s", until: "7s", share: 1.0)],
    policies: [
        (name: "no retries", stack: Call(downstream: "api", timeout: "1s")),
        (name: "retries", stack: Retry(
            policy: (max_attempts: 3, attempt_timeout: "1s", backoff: (shape: Constant(delay: "0s"))),
            inner: Call(downstream: "api"),
        )),
    ],
    recovery: (sustain: "2s"),
    sweep: (parameter: "workload.rate", values: [40.0, 80.0]),
    map: (
        x: (parameter: "workload.rate", label: "load (req/s)", values: [40.0, 80.0]),
        y: (parameter: "faults[0].duration", label: "stall", values: ["1s", "3s"]),
    ),
)"#;

fn setup(name: &str) -> (PathBuf, String) {
    let d = temp(name);
    let f = d.join("tiny.ron");
    std::fs::write(&f, SCENARIO).unwrap();
    (d, f.display().to_string())
}

#[test]
fn three_shards_merged_are_the_unsharded_map_and_sweep() {
    let (d, file) = setup("merge");
    for cmd in ["map", "sweep"] {
        let whole = d.join(format!("{cmd}-whole"));
        let parts = d.join(format!("{cmd}-parts"));
        let merged = d.join(format!("{cmd}-merged"));
        ok(&sim(
            &[cmd, &file, "--out", whole.to_str().unwrap(), "--quiet"],
            &[],
        ));
        // Shards from the flag, from a CI-style pair of variables, and from a Slurm array
        // numbered from 1.
        ok(&sim(
            &[
                cmd,
                &file,
                "--shard",
                "0/3",
                "--out",
                parts.to_str().unwrap(),
                "--quiet",
            ],
            &[],
        ));
        ok(&sim(
            &[
                cmd,
                &file,
                "--shard",
                "auto",
                "--out",
                parts.to_str().unwrap(),
                "--quiet",
                "--jobs",
                "1",
            ],
            &[("SIM_SHARD_INDEX", "1"), ("SIM_SHARD_COUNT", "3")],
        ));
        ok(&sim(
            &[
                cmd,
                &file,
                "--shard",
                "auto",
                "--out",
                parts.to_str().unwrap(),
                "--quiet",
            ],
            &[
                ("SLURM_ARRAY_TASK_ID", "3"),
                ("SLURM_ARRAY_TASK_MIN", "1"),
                ("SLURM_ARRAY_TASK_COUNT", "3"),
            ],
        ));
        let shards = parts.join("tiny-map.shards");
        ok(&sim(
            &[
                "merge",
                shards.to_str().unwrap(),
                "--out",
                merged.to_str().unwrap(),
            ],
            &[],
        ));
        same_files(&whole.join("tiny-map"), &merged.join("tiny-map"));
    }
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn merge_refuses_missing_doubled_and_foreign_shards() {
    let (d, file) = setup("refuse");
    let parts = d.join("parts");
    let p = parts.to_str().unwrap();
    for i in 0..2 {
        ok(&sim(
            &[
                "map",
                &file,
                "--shard",
                &format!("{i}/2"),
                "--out",
                p,
                "--quiet",
            ],
            &[],
        ));
    }
    let shards = parts.join("tiny-map.shards");
    let s0 = shards.join("0-of-2");
    let s1 = shards.join("1-of-2");
    let out = d.join("out");
    let o = out.to_str().unwrap();
    // One shard missing.
    let e = err(&sim(&["merge", s0.to_str().unwrap(), "--out", o], &[]));
    assert!(e.contains("missing shard 1/2"), "{e}");
    // The same shard twice.
    let e = err(&sim(
        &[
            "merge",
            s0.to_str().unwrap(),
            s0.to_str().unwrap(),
            s1.to_str().unwrap(),
            "--out",
            o,
        ],
        &[],
    ));
    assert!(e.contains("given twice"), "{e}");
    // A run file lost, or one copied in from the other shard.
    let victim = std::fs::read_dir(&s1)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.file_name().unwrap().to_str().unwrap().starts_with("run-"))
        .unwrap();
    let saved = std::fs::read(&victim).unwrap();
    std::fs::remove_file(&victim).unwrap();
    let e = err(&sim(&["merge", shards.to_str().unwrap(), "--out", o], &[]));
    assert!(e.contains("run files"), "{e}");
    std::fs::write(s0.join(victim.file_name().unwrap()), &saved).unwrap();
    let e = err(&sim(&["merge", shards.to_str().unwrap(), "--out", o], &[]));
    assert!(
        e.contains("run files") || e.contains("not one of shard"),
        "{e}"
    );
    std::fs::remove_file(s0.join(victim.file_name().unwrap())).unwrap();
    std::fs::write(&victim, &saved).unwrap();
    ok(&sim(&["merge", shards.to_str().unwrap(), "--out", o], &[]));
    // A shard of another batch (other seeds).
    let other = d.join("other");
    ok(&sim(
        &[
            "map",
            &file,
            "--shard",
            "1/2",
            "--seeds",
            "4",
            "--out",
            other.to_str().unwrap(),
            "--quiet",
        ],
        &[],
    ));
    let e = err(&sim(
        &[
            "merge",
            s0.to_str().unwrap(),
            other.join("tiny-map.shards/1-of-2").to_str().unwrap(),
            "--out",
            o,
        ],
        &[],
    ));
    assert!(e.contains("different batches"), "{e}");
    // Bad shard flags and environments are refused before anything runs.
    let e = err(&sim(&["map", &file, "--shard", "2/2", "--out", o], &[]));
    assert!(e.contains("0 to 1"), "{e}");
    let e = err(&sim(&["map", &file, "--shard", "auto", "--out", o], &[]));
    assert!(e.contains("no shard in the environment"), "{e}");
    let e = err(&sim(
        &["map", &file, "--shard", "auto", "--out", o],
        &[("JOB_COMPLETION_INDEX", "0")],
    ));
    assert!(e.contains("SIM_SHARD_COUNT"), "{e}");
    std::fs::remove_dir_all(&d).unwrap();
}

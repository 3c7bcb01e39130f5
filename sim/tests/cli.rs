//! The `sim` binary: its commands, exit codes, and the files it writes.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn sim(args: &[&str], cwd: Option<&Path>) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_sim"));
    c.args(args);
    if let Some(d) = cwd {
        c.current_dir(d);
    }
    c.output().unwrap()
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn temp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("sim-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn check_accepts_the_shipped_scenarios_and_rejects_a_bad_one() {
    let root = root();
    let mut files: Vec<String> = std::fs::read_dir(root.join("scenarios"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "ron"))
        .map(|p| p.display().to_string())
        .collect();
    files.sort();
    assert!(!files.is_empty());
    let args: Vec<&str> = std::iter::once("check")
        .chain(files.iter().map(String::as_str))
        .collect();
    let out = sim(&args, None);
    assert!(out.status.success(), "{}", text(&out.stderr));
    // One line per scenario; a file may hold several.
    let stdout = text(&out.stdout);
    let mut ok_files: Vec<&str> = stdout
        .lines()
        .filter(|l| l.contains(": ok ("))
        .filter_map(|l| l.split(": ok (").next())
        .collect();
    ok_files.dedup();
    assert_eq!(ok_files.len(), files.len(), "{stdout}");

    let dir = temp("check");
    let bad = dir.join("bad.ron");
    std::fs::write(&bad, "Scenario(\n  name: \"x\",\n  horizon: \"1s\",\n  workload: OpenLoop(rate: -1.0),\n  downstreams: [(name: \"a\", model: Register)],\n  policies: [(name: \"p\", stack: Call(downstream: \"a\"))],\n)\n").unwrap();
    let out = sim(&["check", bad.to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.contains("bad.ron:4:22: workload.rate: -1 is not a valid rate"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn list_prints_one_line_per_scenario() {
    let out = sim(
        &["list", "--dir", root().join("scenarios").to_str().unwrap()],
        None,
    );
    assert!(out.status.success());
    let stdout = text(&out.stdout);
    let line = stdout
        .lines()
        .find(|l| l.starts_with("default.ron"))
        .unwrap();
    assert!(
        line.contains("default") && line.contains("bad deploy"),
        "{line}"
    );
}

#[test]
fn trace_needs_a_policy_when_there_are_several() {
    let storm = root().join("sim/tests/data/storm.ron");
    let out = sim(&["trace", storm.to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("pass --policy with one of \"plain\""),
        "{}",
        text(&out.stderr)
    );
    let out = sim(
        &[
            "trace",
            storm.to_str().unwrap(),
            "--policy",
            "plain",
            "--limit",
            "3",
        ],
        None,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(lines[0].starts_with("request  time"), "{stdout}");
    assert_eq!(
        lines.len(),
        5,
        "header, 3 rows, the 'more rows' line:\n{stdout}"
    );
    assert!(lines[1].starts_with("1 "));
    let out = sim(
        &["trace", storm.to_str().unwrap(), "--policy", "nope"],
        None,
    );
    assert!(text(&out.stderr).contains("no policy named \"nope\""));
}

/// `sim` with no arguments runs the embedded default and writes reports/default/ with the
/// contract's fields.
#[test]
fn no_arguments_runs_the_default_and_writes_the_contract() {
    let dir = temp("default");
    let out = sim(&["--help"], None);
    assert!(text(&out.stdout).contains("run"));
    let out = sim(&[], Some(&dir));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("naive retries") && stdout.contains("wrote reports/default"),
        "{stdout}"
    );
    let report = dir.join("reports/default");
    for f in ["summary.json", "summary.md", "timeseries.csv"] {
        assert!(report.join(f).is_file(), "{f} missing");
    }
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(report.join("summary.json")).unwrap())
            .unwrap();
    assert_eq!(v["scenario"], "default");
    assert!(v["seed"].is_u64());
    assert_eq!(v["horizon_s"].as_f64(), Some(120.0));
    let policies = v["policies"].as_array().unwrap();
    assert_eq!(policies.len(), 6);
    for p in policies {
        assert!(p["name"].is_string());
        for k in ["first_tries", "attempts", "server_arrivals", "successes"] {
            assert!(p[k].is_u64(), "{k}");
        }
        for k in ["success_rate", "goodput_per_s", "wasted_work_share"] {
            assert!(p[k].is_f64(), "{k}");
        }
        for k in ["overall", "peak", "during_fault", "after_fault"] {
            assert!(p["amplification"][k].is_f64(), "amplification.{k}");
        }
        for k in ["p50", "p99", "p999"] {
            assert!(p["latency_ms"][k].is_f64(), "latency_ms.{k}");
        }
        assert!(p["recovery_s"].is_f64() || p["recovery_s"].is_null());
        assert!(["recovered", "stuck", "no-fault"].contains(&p["verdict"].as_str().unwrap()));
    }
    // The story the default scenario tells: naive retries stay down, a budget recovers.
    let verdict = |name: &str| {
        policies.iter().find(|p| p["name"] == name).unwrap()["verdict"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(verdict("naive retries"), "stuck");
    assert_eq!(verdict("retry budget"), "recovered");
    assert_eq!(verdict("budget + breaker + jitter"), "recovered");
    let md = std::fs::read_to_string(report.join("summary.md")).unwrap();
    assert!(md.starts_with("# default\n"));
    assert!(
        md.contains("## Policies") && md.contains("| naive retries |") && md.contains("| stuck |"),
        "{md}"
    );
    assert!(
        md.contains("Ratio(ratio: 0.1"),
        "the policies are shown as RON:\n{md}"
    );
    let csv = std::fs::read_to_string(report.join("timeseries.csv")).unwrap();
    assert!(csv.starts_with("policy,seed,bucket,"));
    assert_eq!(csv.lines().count(), 1 + 6 * 120);
    let _ = std::fs::remove_dir_all(&dir);
}

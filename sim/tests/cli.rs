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

const TWO: &str = r#"// Two set-ups in one file.
[
    Scenario(
        name: "small-a", horizon: "5s",
        workload: OpenLoop(rate: 50.0),
        downstreams: [(name: "api", model: Server(workers: 2, service: Constant("5ms"), error_rate: 0.2))],
        policies: [
            (name: "plain", stack: Call(downstream: "api", timeout: "1s")),
            (name: "retry", stack: Retry(policy: (max_attempts: 4, backoff: (shape: Constant(delay: "0s"))), inner: Call(downstream: "api", timeout: "1s"))),
        ],
        sweep: (parameter: "downstreams[api].model.error_rate", label: "p", values: [0.0, 0.5]),
    ),
    Scenario(
        name: "small-b", horizon: "5s",
        workload: JobSet(clients: 5),
        downstreams: [(name: "reg", model: Register, network: (request: Constant("1ms"), response: Constant("1ms")))],
        policies: [(name: "retry", stack: Retry(policy: (max_attempts: None, backoff: (shape: Exponential(base: "1ms"), cap: "10ms", jitter: Full)), inner: Call(downstream: "reg")))],
    ),
]
"#;

/// A file with two scenarios: `run` writes both, `trace` and `sweep` need `--scenario`.
#[test]
fn a_file_with_several_scenarios() {
    let dir = temp("two");
    let f = dir.join("two.ron");
    std::fs::write(&f, TWO).unwrap();
    let f = f.to_str().unwrap();
    let out_dir = dir.join("out");
    let out = sim(&["run", f, "--out", out_dir.to_str().unwrap(), "-q"], None);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(out_dir.join("small-a/summary.json").is_file());
    assert!(out_dir.join("small-b/summary.json").is_file());
    let out = sim(&["trace", f], None);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr)
            .contains("holds 2 scenarios: pass --scenario with one of \"small-a\", \"small-b\""),
        "{}",
        text(&out.stderr)
    );
    let out = sim(&["trace", f, "--scenario", "small-b"], None);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout).lines().count(),
        6,
        "{}",
        text(&out.stdout)
    );
    let out = sim(&["trace", f, "--scenario", "small-c"], None);
    assert!(text(&out.stderr).contains("no scenario named \"small-c\""));
    let _ = std::fs::remove_dir_all(&dir);
}

/// `sim sweep`: the scenario's sweep, or `--param` and `--values`; a table, sweep.csv and
/// sweep.md; clear errors for a scenario without a sweep and for a bad parameter.
#[test]
fn sweep_writes_a_table_and_a_csv() {
    let dir = temp("sweep");
    let f = dir.join("two.ron");
    std::fs::write(&f, TWO).unwrap();
    let f = f.to_str().unwrap();
    let out_dir = dir.join("out");
    let o = out_dir.to_str().unwrap();
    let out = sim(&["sweep", f, "--scenario", "small-a", "--out", o], None);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("load (server arrivals ÷ first tries) and success rate by p"),
        "{stdout}"
    );
    let csv = std::fs::read_to_string(out_dir.join("small-a/sweep.csv")).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines[0], sim::report::grid::sweep::CSV_HEADER);
    assert_eq!(lines.len(), 1 + 2 * 2, "{csv}");
    assert!(
        lines[1].starts_with("downstreams[api].model.error_rate,0,plain,1,"),
        "{csv}"
    );
    let md = std::fs::read_to_string(out_dir.join("small-a/sweep.md")).unwrap();
    assert!(md.contains("| p | plain | retry |"), "{md}");
    // The plots: load and success vs p, one line per policy, SVG and PNG.
    for stem in ["sweep-load", "sweep-success"] {
        let svg = std::fs::read_to_string(out_dir.join(format!("small-a/{stem}.svg"))).unwrap();
        assert!(svg.contains("plain") && svg.contains("retry"), "{stem}");
        assert!(md.contains(&format!("({stem}.svg)")), "{md}");
        let png = std::fs::read(out_dir.join(format!("small-a/{stem}.png"))).unwrap();
        assert_eq!(&png[1..4], b"PNG");
    }
    let svg = std::fs::read_to_string(out_dir.join("small-a/sweep-load.svg")).unwrap();
    assert!(
        svg.contains("small-a: load on the downstream vs p"),
        "{svg}"
    );
    // At p = 0.5, 3 retries: load 1 + p + p² + p³ = 1.875 (250 requests: loosely).
    let retry_half: Vec<&str> = lines[4].split(',').collect();
    let load: f64 = retry_half[8].parse().unwrap();
    assert!((load - 1.875).abs() < 0.2, "{csv}");

    // --param and --values override the file's sweep.
    let out = sim(
        &[
            "sweep",
            f,
            "--scenario",
            "small-a",
            "--out",
            o,
            "-q",
            "--param",
            "workload.rate",
            "--values",
            "10,20,40",
        ],
        None,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let csv = std::fs::read_to_string(out_dir.join("small-a/sweep.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + 3 * 2);
    assert!(
        csv.lines()
            .nth(1)
            .unwrap()
            .starts_with("workload.rate,10,plain,"),
        "{csv}"
    );

    // A job set shows calls and makespan.
    let out = sim(
        &[
            "sweep",
            f,
            "--scenario",
            "small-b",
            "--out",
            o,
            "--param",
            "workload.clients",
            "--values",
            "2,5",
        ],
        None,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("calls  makespan"),
        "{}",
        text(&out.stdout)
    );
    for stem in ["sweep-calls", "sweep-makespan"] {
        assert!(
            out_dir.join(format!("small-b/{stem}.svg")).is_file(),
            "{stem}"
        );
    }

    // No sweep in the file, no --param.
    let out = sim(&["sweep", f, "--scenario", "small-b", "--out", o], None);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("has no sweep"),
        "{}",
        text(&out.stderr)
    );
    // A bad parameter is refused before anything runs.
    let out = sim(
        &[
            "sweep",
            f,
            "--scenario",
            "small-a",
            "--out",
            o,
            "--param",
            "workload.rte",
            "--values",
            "1",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.contains("sweep.parameter") && err.contains("no field `rte`"),
        "{err}"
    );
    let out = sim(
        &[
            "sweep",
            f,
            "--scenario",
            "small-a",
            "--out",
            o,
            "--param",
            "workload.rate",
            "--values",
            "10,-1",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("sweep.values[1]: with workload.rate = -1"),
        "{}",
        text(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

fn sim_env(args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_sim"));
    c.args(args).env_remove("NO_COLOR");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

#[test]
fn sim_run_prints_the_table_and_conclusion_in_colour_only_when_asked() {
    let dir = temp("colour");
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/storm.ron");
    let (file, out) = (file.to_str().unwrap(), dir.to_str().unwrap());
    // Piped: plain, whatever NO_COLOR says.
    let plain = sim_env(&["run", file, "--out", out], &[]);
    assert!(
        plain.status.success(),
        "{}",
        String::from_utf8_lossy(&plain.stderr)
    );
    let stdout = String::from_utf8_lossy(&plain.stdout);
    assert!(!stdout.contains('\u{1b}'), "{stdout}");
    assert!(stdout.contains("│ plain "), "{stdout}");
    assert!(stdout.contains("Bottom line:"), "{stdout}");
    assert!(
        stdout.contains("wrote ") && stdout.contains("summary.md"),
        "{stdout}"
    );
    // The conclusion sits right under the table, wrapped.
    let after_table = stdout
        .split('┘')
        .nth(1)
        .unwrap()
        .split("\nwrote ")
        .next()
        .unwrap();
    assert!(
        after_table.trim_start().starts_with("The fault"),
        "{after_table}"
    );
    assert!(
        after_table.lines().all(|l| l.chars().count() <= 100),
        "{after_table}"
    );
    // Forced colour.
    let colour = sim_env(&["run", file, "--out", out, "--color", "always"], &[]);
    let stdout = String::from_utf8_lossy(&colour.stdout);
    assert!(stdout.contains("\u{1b}["), "{stdout}");
    assert!(stdout.contains("green: best of its column, red: worst"));
    // NO_COLOR (non-empty) wins over auto; never is never.
    for (args, env) in [
        (vec!["--color", "auto"], vec![("NO_COLOR", "1")]),
        (vec!["--color", "never"], vec![]),
    ] {
        let mut a = vec!["run", file, "--out", out];
        a.extend(args);
        let o = sim_env(&a, &env);
        assert!(!String::from_utf8_lossy(&o.stdout).contains('\u{1b}'));
    }
    for f in sim::report::file_names() {
        assert!(dir.join("test-storm").join(&f).is_file(), "{f}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bench_in_flight_refuses_horizons_outside_one_to_sixty_seconds() {
    for bad in ["0", "61", "abc"] {
        let out = sim(&["bench", "--in-flight", bad], None);
        assert_eq!(out.status.code(), Some(2), "--in-flight {bad}");
        let err = text(&out.stderr);
        assert!(
            err.contains("invalid value") && err.contains("--in-flight"),
            "--in-flight {bad}: {err}"
        );
    }
}

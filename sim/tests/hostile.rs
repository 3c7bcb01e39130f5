//! The hostile corpus (`tests/hostile/`, listed with what to expect in `tests/hostile/EXPECT`):
//! files a careless or hostile user might write. `sim check` must refuse each "refused" file
//! with `file:line:col:` (or `file:` for what has no position, such as a byte-order mark at 1:1
//! reported the same way) and the expected words, and accept each "runs" file with an estimate;
//! never panic, never hang. `.ci/run sim_hostile` also runs the accepted ones in release under a
//! time and memory limit.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/hostile")
}

/// Runs `sim` with `args`, killing it after `limit`.
fn sim(args: &[&str], limit: Duration) -> Output {
    let child = Command::new(env!("CARGO_BIN_EXE_sim"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Ends the child on every path out of here (a timeout, a failed wait).
    struct Guard(Option<Child>);
    impl Drop for Guard {
        fn drop(&mut self) {
            if let Some(child) = &mut self.0 {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
    let mut guard = Guard(Some(child));
    let start = Instant::now();
    loop {
        let child = guard.0.as_mut().expect("present until it is waited for");
        if child.try_wait().unwrap().is_some() {
            return guard.0.take().unwrap().wait_with_output().unwrap();
        }
        if start.elapsed() > limit {
            panic!("sim {args:?} ran for more than {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn every_hostile_file_is_refused_with_a_position_or_accepted_with_an_estimate() {
    let expect = std::fs::read_to_string(dir().join("EXPECT")).unwrap();
    let mut n = 0;
    for line in expect
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let mut parts = line.split('\t');
        let (file, what, words) = (
            parts.next().unwrap(),
            parts.next().unwrap(),
            parts.next().unwrap_or(""),
        );
        let path = dir().join(file);
        let shown = path.display().to_string();
        let out = sim(&["check", &shown], Duration::from_secs(60));
        let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
        assert!(!stderr.contains("panicked"), "{file}: {stderr}");
        assert!(
            !stderr.contains('\u{1b}') && !stdout.contains('\u{1b}'),
            "{file}: raw escape"
        );
        match what {
            "refused" => {
                assert_eq!(out.status.code(), Some(1), "{file}: {stdout}{stderr}");
                let first = stderr.lines().next().unwrap_or("");
                let rest = first.strip_prefix(&format!("{shown}:")).unwrap_or_else(|| {
                    panic!("{file}: the message does not start with the file: {first}")
                });
                let mut pos = rest.splitn(3, ':');
                let (l, c) = (pos.next().unwrap_or(""), pos.next().unwrap_or(""));
                assert!(
                    l.parse::<usize>().is_ok() && c.parse::<usize>().is_ok(),
                    "{file}: no line:col in {first}"
                );
                assert!(
                    first.contains(words),
                    "{file}: expected {words:?} in {first}"
                );
            }
            "runs" => {
                assert!(out.status.success(), "{file}: {stderr}");
                assert!(
                    stdout.contains(": ok (") && stdout.contains("estimate"),
                    "{file}: {stdout}"
                );
            }
            other => panic!("{file}: unknown expectation {other}"),
        }
        n += 1;
    }
    assert!(n >= 30, "only {n} files");
}

/// A file with 10^5 policies is checked in linear time (well under a second in release; the
/// bound here is loose for debug builds on shared machines, so it catches quadratic behaviour,
/// which takes minutes, not small slowdowns).
#[test]
fn a_hundred_thousand_policies_check_in_linear_time() {
    let mut ron = String::from(
        "Scenario(name: \"many\", horizon: \"10s\", workload: OpenLoop(rate: 1.0),\n downstreams: [(name: \"api\", model: Server(workers: 1, service: Constant(\"1ms\")))],\n policies: [\n",
    );
    for i in 0..100_000 {
        // Every tenth a retry over a breaker, the others a plain call (the file stays under the
        // 16 MiB cap).
        let stack = if i % 10 == 0 {
            "Retry(policy: (max_attempts: 2, backoff: (shape: Constant(delay: \"10ms\"))), inner: Breaker(config: (consecutive_failures: 3), inner: Call(downstream: \"api\", timeout: \"1s\")))"
        } else {
            "Call(downstream: \"api\", timeout: \"1s\")"
        };
        ron.push_str(&format!("  (name: \"p{i}\", stack: {stack}),\n"));
    }
    ron.push_str(" ],\n)\n");
    let path = std::env::temp_dir().join(format!("sim-many-{}.ron", std::process::id()));
    std::fs::write(&path, &ron).unwrap();
    let t0 = Instant::now();
    let out = sim(
        &["check", &path.display().to_string()],
        Duration::from_secs(120),
    );
    let took = t0.elapsed();
    let _ = std::fs::remove_file(&path);
    assert!(out.status.success(), "{}", text_of(&out));
    assert!(took < Duration::from_secs(100), "took {took:?}");
    // The same file with a duplicate name at the end is refused at its line.
    let dup = ron.replace("(name: \"p99999\"", "(name: \"p0\"");
    let path = std::env::temp_dir().join(format!("sim-many-dup-{}.ron", std::process::id()));
    std::fs::write(&path, &dup).unwrap();
    let out = sim(
        &["check", &path.display().to_string()],
        Duration::from_secs(120),
    );
    let _ = std::fs::remove_file(&path);
    let err = text(&out.stderr);
    assert!(
        err.contains(":100003:") && err.contains("already the name of policies[0]"),
        "{err}"
    );
}

fn text_of(o: &Output) -> String {
    format!("{}{}", text(&o.stdout), text(&o.stderr))
}

/// Inputs that are not scenario files at all, and a file over the size cap.
#[test]
fn not_files_and_huge_files_are_refused_without_reading_them() {
    for p in ["/dev/zero", "/dev/null", "/"] {
        if !Path::new(p).exists() {
            continue;
        }
        let out = sim(&["check", p], Duration::from_secs(20));
        assert_eq!(out.status.code(), Some(1), "{p}");
        assert!(
            text(&out.stderr).contains("expected a scenario file"),
            "{p}: {}",
            text_of(&out)
        );
    }
    let big = std::env::temp_dir().join(format!("sim-big-{}.ron", std::process::id()));
    let f = std::fs::File::create(&big).unwrap();
    f.set_len(17 << 20).unwrap();
    let out = sim(
        &["check", &big.display().to_string()],
        Duration::from_secs(20),
    );
    let _ = std::fs::remove_file(&big);
    assert!(
        text(&out.stderr).contains("MiB a scenario file may have"),
        "{}",
        text_of(&out)
    );
}

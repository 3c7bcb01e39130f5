//! A fleet emulated for real (a few seconds each): client instances sharing one breaker through
//! a real `redis-server` the emulator starts and ends, a client's own network down, the store
//! hung by SIGSTOP; and the store's process ended on every path.

use emulate::fleet::StoreProcess;
use emulate::run::run_policy;
use emulate::simface::{Compiled, simulate};

/// The runs here are real time on loopback: 8 instances, their HTTP server and a `redis-server`
/// each. Run side by side on two cores they starve each other (a store operation past its 5 ms
/// bound is given up, a call's latency is the scheduler's), so they take turns.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn turn() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

fn compile(text: &str) -> Compiled {
    sim::load(text, "test.ron").unwrap()
}

/// 8 instances at 5 calls a second each (40/s); the API fails every call at t = 1-2.5 s. A
/// breaker wants 30 calls before it judges: 6 s of one instance's calls, 0.75 s of the fleet's.
/// Policy 0 keeps one per instance, policy 1 one for the fleet in the store.
const FLEET: &str = r#"Scenario(
    name: "fleet",
    horizon: "4s",
    workload: OpenLoop(rate: 40.0, clients: 8),
    downstreams: [(name: "api", model: Server(workers: 8, queue: (capacity: 50), service: Constant("5ms")))],
    faults: [FAULTS],
    stores: [(name: "redis", round_trip: Constant("500us") STORE_FAULTS)],
    CLIENT_FAULTS
    policies: [
        (name: "per instance", stack: Breaker(
            config: (failure_rate: 0.5, minimum_calls: 30, window: Count(calls: 30), open: (duration: "5s", jitter: 0.0)),
            inner: Call(downstream: "api", timeout: "1s"))),
        (name: "fleet", stack: Breaker(
            config: (failure_rate: 0.5, minimum_calls: 30, window: Count(calls: 30), open: (duration: "5s", jitter: 0.0)),
            scope: Fleet(store: "redis", mode: Cached(refresh: "1s"), wait: "5ms", on_store_failure: Local),
            inner: Call(downstream: "api", timeout: "1s"))),
    ],
)"#;

const OUTAGE: &str = r#"Outage(downstream: "api", from: "1s", until: "2500ms", mode: FailFast)"#;

fn fleet_text(faults: &str, store_faults: &str, client_faults: &str) -> String {
    FLEET
        .replace("STORE_FAULTS", store_faults)
        .replace("CLIENT_FAULTS", client_faults)
        .replace("FAULTS", faults)
}

fn fleet(faults: &str, store_faults: &str, client_faults: &str) -> Compiled {
    compile(&fleet_text(faults, store_faults, client_faults))
}

#[test]
fn one_breaker_in_redis_opens_for_every_instance_where_theirs_never_judge() {
    let _turn = turn();
    let c = fleet(OUTAGE, "", "");
    let (own, own_fid) = run_policy(&c, 0, 1, 1.0).unwrap();
    let (shared, fid) = run_policy(&c, 1, 1, 1.0).unwrap();
    let sim = simulate(&c, 1).unwrap();
    // Per instance: 5 failures a second each, never 20 calls in the outage: every call is sent.
    assert_eq!(own.summary.local_rejections, 0, "{:?}", own.summary);
    assert_eq!(own_fid.store.map(|s| s.ops), Some(0));
    // For the fleet: the instances' 40 calls a second open it within the outage, and every
    // instance then refuses (each on its own view of the one breaker in Redis).
    let store = fid.store.expect("a run with stores has their figures");
    assert_eq!(store.opens, 1, "{store:?}");
    let opened = store.first_open_s.unwrap();
    assert!((1.2..3.0).contains(&opened), "opened at {opened} s");
    // Nothing failed at once or with an error (a decision given up at its 5 ms bound on a
    // loaded machine is the bound working, not a failure of the run).
    assert!(
        store.ops > 20 && store.failed_at_once + store.errors == 0,
        "{store:?}"
    );
    assert!(
        shared.summary.local_rejections > 30,
        "{} refused",
        shared.summary.local_rejections
    );
    // As the simulator has it.
    let s = sim[1].output.summary.fleet.as_ref().unwrap();
    assert_eq!(s.fleet_opens, 1);
    let sim_opened = s.first_fleet_open_s.unwrap();
    assert!(
        (opened - sim_opened).abs() < 0.3,
        "{opened} vs {sim_opened}"
    );
}

#[test]
fn a_client_s_own_network_down_fails_its_calls_and_its_store_at_once() {
    let _turn = turn();
    // Client 3 alone, the API fine: its calls fail unsent, its store operations at once.
    let c = fleet(
        "",
        "",
        r#"client_faults: [NetworkDown(client: 3, from: "200ms", until: "1500ms")],"#,
    );
    let (out, fid) = run_policy(&c, 1, 1, 1.0).unwrap();
    let sim = simulate(&c, 1).unwrap();
    let (e, s) = (&out.summary, &sim[1].output.summary);
    assert_eq!(e.first_tries, s.first_tries);
    // Its calls fail, none sent: the simulation's failures (an arrival at the window's edge
    // may fall either side of it).
    eprintln!(
        "failures: emulated {}, simulated {}; attempts {} of {}",
        e.failures, s.failures, e.attempts, e.first_tries
    );
    assert!(e.failures >= 2, "{e:?}");
    assert!(
        e.failures.abs_diff(s.failures) <= 1,
        "{} vs {}",
        e.failures,
        s.failures
    );
    assert_eq!(e.attempts + e.failures, e.first_tries, "{e:?}");
    let store = fid.store.unwrap();
    assert!(store.failed_at_once >= 1, "{store:?}");
    // What it decided alone was replayed into the store when its network was back.
    assert!(store.reconciled >= 1, "{store:?}");
}

#[test]
fn a_hung_store_is_waited_for_at_most_the_bound_and_the_instances_decide_alone() {
    let _turn = turn();
    // The store hangs (SIGSTOP on the real process) from before the outage to the horizon:
    // the instances give their operations up at 5 ms and decide alone, on breakers that never
    // see 30 calls, so the fleet's breaker never opens and every call is sent.
    let c = fleet(
        OUTAGE,
        r#", faults: [Outage(from: "500ms", until: "4s", mode: Hang)]"#,
        "",
    );
    let (out, fid) = run_policy(&c, 1, 1, 1.0).unwrap();
    let store = fid.store.unwrap();
    assert!(store.given_up >= 8, "{store:?}");
    assert!(
        store.store_down >= 8,
        "every instance found it down: {store:?}"
    );
    assert_eq!(store.opens, 0, "{store:?}");
    assert_eq!(out.summary.local_rejections, 0);
    // Each decision waited at most its 5 ms bound (and the store's round trip): the calls'
    // latency stays the API's, far below a hung store's 3.5 s (waited for, most calls of the
    // run would take it: their p99 would be about 3,500 ms). The bound is loose on purpose: on
    // a loaded machine a call's latency is also the scheduler's (p99 161 ms seen).
    assert!(
        out.summary.latency_ms.p99 < 1000.0,
        "{:?}",
        out.summary.latency_ms
    );
}

fn alive(pid: u32) -> bool {
    std::process::Command::new("kill")
        .args(["-0", &pid.to_string()])
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
        && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .is_ok_and(|s| s.split(") ").nth(1).is_some_and(|r| r.starts_with('Z')))
}

#[test]
fn the_store_s_process_ends_on_every_path() {
    let _turn = turn();
    // Dropped.
    let p = StoreProcess::start().unwrap();
    let pid = p.pid().unwrap();
    assert!(alive(pid));
    drop(p);
    assert!(!alive(pid), "{pid} outlived its guard");
    // Stopped (a hang in progress), then dropped.
    let p = StoreProcess::start().unwrap();
    let pid = p.pid().unwrap();
    std::process::Command::new("kill")
        .args(["-STOP", &pid.to_string()])
        .status()
        .unwrap();
    drop(p);
    assert!(!alive(pid), "a stopped {pid} outlived its guard");
    // A panic while it runs.
    let (tx, rx) = std::sync::mpsc::channel();
    let r = std::panic::catch_unwind(move || {
        let p = StoreProcess::start().unwrap();
        tx.send(p.pid().unwrap()).unwrap();
        panic!("a run fails");
    });
    assert!(r.is_err());
    let pid = rx.recv().unwrap();
    assert!(!alive(pid), "{pid} outlived a panic");
}

/// Without `redis-server` on the machine, a scenario with stores is refused with how to install
/// it (the emulator, run with an empty `PATH`), before anything is sent; never a panic.
#[test]
fn a_missing_redis_server_is_a_clear_error() {
    let dir = std::env::temp_dir().join(format!("emulate-no-redis-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("fleet.ron");
    // (Service times of 20 ms: the command's size check wants 10 ms at least.)
    let text = fleet_text(OUTAGE, "", "").replace(r#"Constant("5ms")"#, r#"Constant("20ms")"#);
    std::fs::write(&file, text).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_emulate"))
        .args(["run", file.to_str().unwrap(), "--policy", "fleet", "--out"])
        .arg(&dir)
        .env("PATH", "")
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("redis-server cannot be started")
            && err.contains("apt-get install redis-server"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}

//! A fleet, for real: the scenario's `stores` as real `redis-server` processes on 127.0.0.1, and
//! each client instance a process of the fleet with its own `Fleet` state over them.
//!
//! - **One Redis per store per run**, started by the emulator on a free loopback port (its
//!   listener checked to be that child, by the pid its `INFO` names) and killed when the run
//!   ends, on every path: [`StoreProcess`]. A missing `redis-server` is an error, never a skip.
//! - **Each client instance** gets its own `Stores` ([`FleetRun::stores_for`]), so the loader
//!   (`reliable::policy`'s `Route::fleet_layer`) builds it its own fleet breaker and budget, with
//!   its own view and its own fallback breaker, over its own handle on the store
//!   ([`ClientStore`]), as a process of the fleet would have. The breaker's state itself is one,
//!   in Redis, shared by all.
//! - **The store's round trip** is the scenario's: each operation waits a draw of `round_trip`
//!   (plus a `Slow` fault's `extra`) before it goes to the real Redis on loopback (about 0.1 ms
//!   more).
//! - **Its faults**: an `Outage` in `Hang` mode stops the process (SIGSTOP) for the window and
//!   resumes it (SIGCONT), so every operation waits its bound out as on a hung Redis; in
//!   `FailFast` mode each operation fails at once, as on a refused connection.
//! - **A client's own network down** (`client_faults`): its calls fail at once, unsent
//!   ([`FleetRun::network_down`], read by the client's transport), and so do its store
//!   operations: it decides alone, and sends the store what it saw when its network is back.
//!
//! A fleet breaker keeps time on the wall clock (its view's age, its wait bound, its fallback
//! breaker) and Redis on its own, so a scenario with stores runs at time scale 1 only
//! ([`check_scale`]).

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reliable::fleet::{
    BreakerOp, BreakerReply, BreakerSpec, BudgetOp, BudgetReply, BudgetSpec, BulkheadOp,
    BulkheadReply, BulkheadSpec, EventSink, FleetEvent, RateReply, RateSpec, RedisStore, Store,
    StoreError, StoreErrorKind, StoreFuture,
};
use reliable::policy::Stores;
use reliable_core::breaker::State;

use crate::simface::{ClientFault, Compiled, OutageMode, Sampler, StoreFault, Stream, StreamId};
use crate::timebase::Timebase;

/// Refuses a time scale other than 1 for a scenario with stores (see the [module docs](self)).
pub fn check_scale(c: &Compiled, scale: f64) -> Result<(), String> {
    if !c.scenario.stores.is_empty() && scale != 1.0 {
        return Err(format!(
            "--time-scale {scale}: a fleet's store keeps wall time (Redis's clock, each process's view and wait bound), so a scenario with stores runs at time scale 1 only"
        ));
    }
    Ok(())
}

/// A `redis-server` of the run's, on 127.0.0.1 with no persistence: stopped and resumed by the
/// store's `Hang` outages, killed when dropped (a panic included).
#[derive(Debug)]
pub struct StoreProcess {
    child: Option<std::process::Child>,
    port: u16,
    /// Set before the process is killed: a late SIGSTOP or SIGCONT is not sent to its pid.
    ended: Arc<AtomicBool>,
}

/// How many fresh ports [`StoreProcess::start`] tries: another process may take one between
/// its choosing and the server's binding.
const PORT_ATTEMPTS: usize = 5;

impl StoreProcess {
    /// A new server on a free loopback port.
    pub fn start() -> Result<StoreProcess, String> {
        let mut refused = Vec::new();
        for _ in 0..PORT_ATTEMPTS {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .map_err(|e| format!("cannot find a free loopback port: {e}"))?
                .port();
            match StoreProcess::start_on(port) {
                Ok(p) => return Ok(p),
                Err(e) => refused.push(e),
            }
        }
        Err(format!(
            "redis-server did not start on {PORT_ATTEMPTS} ports: {}",
            refused.join("; ")
        ))
    }

    fn start_on(port: u16) -> Result<StoreProcess, String> {
        let p = port.to_string();
        let child = std::process::Command::new("redis-server")
            .args(["--port", &p, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .args(["--daemonize", "no", "--loglevel", "warning"])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .map_err(|e| {
                format!(
                    "the scenario's stores run on a real Redis, and redis-server cannot be started: {e} (install it: apt-get install redis-server)"
                )
            })?;
        let pid = child.id();
        let mut process = StoreProcess {
            child: Some(child),
            port,
            ended: Arc::new(AtomicBool::new(false)),
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = process
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                process.child = None;
                return Err(format!("port {port}: redis-server exited ({status})"));
            }
            match listener_pid(port) {
                Some(owner) if owner == pid => return Ok(process),
                Some(owner) => return Err(format!("port {port} is served by pid {owner}")),
                None if Instant::now() >= deadline => {
                    return Err(format!("port {port}: redis-server did not listen in 10 s"));
                }
                None => std::thread::sleep(Duration::from_millis(10)),
            }
        }
    }

    /// The process's pid, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(std::process::Child::id)
    }

    /// `redis://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// A handle that stops and resumes the process (`Hang` outages).
    fn pauser(&self) -> Option<Pauser> {
        Some(Pauser {
            pid: self.child.as_ref()?.id(),
            ended: self.ended.clone(),
        })
    }
}

impl Drop for StoreProcess {
    fn drop(&mut self) {
        self.ended.store(true, Ordering::SeqCst);
        if let Some(mut c) = self.child.take() {
            // A stopped process still dies of SIGKILL; resume it first so nothing lingers.
            signal(c.id(), "CONT");
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The pid of the Redis answering on `port` (`INFO server`'s `process_id`), if one answers.
fn listener_pid(port: u16) -> Option<u32> {
    use std::io::{Read, Write};
    let mut conn = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    conn.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    conn.write_all(b"INFO server\r\n").ok()?;
    let mut reply = Vec::new();
    let mut buf = [0u8; 4096];
    while reply.len() < 1 << 16 {
        let n = conn.read(&mut buf).ok()?;
        if n == 0 {
            return None;
        }
        reply.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&reply);
        if let Some(rest) = text.split("process_id:").nth(1)
            && let Some((line, _)) = rest.split_once("\r\n")
        {
            return line.trim().parse().ok();
        }
    }
    None
}

/// Sends `SIG<sig>` to `pid` (through `kill(1)`: the crate forbids `unsafe`).
fn signal(pid: u32, sig: &str) {
    let _ = std::process::Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status();
}

/// Stops and resumes a [`StoreProcess`] while it runs.
#[derive(Clone, Debug)]
struct Pauser {
    pid: u32,
    ended: Arc<AtomicBool>,
}

impl Pauser {
    fn send(&self, sig: &str) {
        if !self.ended.load(Ordering::SeqCst) {
            signal(self.pid, sig);
        }
    }
}

/// One of the scenario's stores, as a run has it.
#[derive(Debug)]
struct RunStore {
    name: String,
    redis: Arc<RedisStore>,
    round_trip: Arc<Sampler>,
    /// `FailFast` outages: each operation fails at once (virtual ns, `[from, until)`).
    refused: Vec<(u64, u64)>,
    /// `Slow` faults: `extra` ns added to each round trip.
    slow: Vec<(u64, u64, u64)>,
    /// Index among the scenario's stores (its round trips' stream).
    index: u16,
}

/// What a run's instances did with their stores, as they saw it (for the comparison with the
/// simulator's figures of the same names).
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct StoreFigures {
    /// Operations the instances sent to the stores.
    pub ops: u64,
    /// Of which failed: at once (the client's network down, a `FailFast` outage), with an
    /// error, or given up at the instance's wait bound (a hung store): their sum.
    pub failed: u64,
    /// Failed at once.
    pub failed_at_once: u64,
    /// Failed with the store's error.
    pub errors: u64,
    /// Given up at the wait bound.
    pub given_up: u64,
    /// Times an instance found its store down (and decided alone until it answered again).
    pub store_down: u64,
    /// Results the instances decided alone and replayed into the store when it answered again.
    pub reconciled: u64,
    /// Times a fleet breaker opened: distinct generations an instance saw open.
    pub opens: u64,
    /// When an instance first saw a fleet breaker open, seconds from the start.
    pub first_open_s: Option<f64>,
}

/// The figures' counters, kept as the operations end.
#[derive(Debug, Default)]
struct Counters {
    ops: AtomicU64,
    failed_at_once: AtomicU64,
    errors: AtomicU64,
    given_up: AtomicU64,
    store_down: AtomicU64,
    reconciled: AtomicU64,
    opened: Mutex<Opened>,
}

/// Fleet breakers seen open: (store, generation), and when the first was seen (virtual ns).
#[derive(Debug, Default)]
struct Opened {
    generations: BTreeSet<(u16, u64)>,
    first_ns: Option<u64>,
}

/// A run's fleet, and the processes of its stores (killed when dropped).
pub type Started = (Arc<FleetRun>, Vec<StoreProcess>);

/// A run's stores and client instances' own faults (see the [module docs](self)).
#[derive(Debug)]
pub struct FleetRun {
    tb: Timebase,
    seed: u64,
    stores: Vec<RunStore>,
    /// `(client, from, until)`, virtual ns: the client's own network is down.
    down: Vec<(u32, u64, u64)>,
    counters: Arc<Counters>,
}

impl FleetRun {
    /// Starts one Redis per store of `c` (`None` when it has none) and plays their `Hang`
    /// outages on the time base; the processes are the returned guards', killed when dropped.
    /// Call it inside the run's runtime.
    pub fn start(c: &Compiled, seed: u64, tb: Timebase) -> Result<Option<Started>, String> {
        let s = &c.scenario;
        if s.stores.is_empty() && s.client_faults.is_empty() {
            return Ok(None);
        }
        let mut processes = Vec::new();
        let mut stores = Vec::new();
        for (i, st) in s.stores.iter().enumerate() {
            let process = StoreProcess::start()?;
            let redis = RedisStore::open(&process.url(), &format!("emulate-{}", st.name))
                .map_err(|e| format!("store \"{}\": {e}", st.name))?;
            let mut refused = Vec::new();
            let mut slow = Vec::new();
            for f in &st.faults {
                match f {
                    StoreFault::Outage { from, until, mode } => match mode {
                        OutageMode::FailFast => refused.push((from.as_nanos(), until.as_nanos())),
                        OutageMode::Hang => {
                            if let Some(p) = process.pauser() {
                                let (from, until) = (from.as_nanos(), until.as_nanos());
                                tokio::spawn(async move {
                                    tb.sleep_until_ns(from).await;
                                    p.send("STOP");
                                    tb.sleep_until_ns(until).await;
                                    p.send("CONT");
                                });
                            }
                        }
                    },
                    StoreFault::Slow { from, until, extra } => {
                        slow.push((from.as_nanos(), until.as_nanos(), extra.as_nanos()))
                    }
                }
            }
            stores.push(RunStore {
                name: st.name.clone(),
                redis: Arc::new(redis),
                round_trip: Arc::new(Sampler::new(&st.round_trip)),
                refused,
                slow,
                index: i as u16,
            });
            processes.push(process);
        }
        let down = s
            .client_faults
            .iter()
            .map(|f| match f {
                ClientFault::NetworkDown {
                    client,
                    from,
                    until,
                } => (*client, from.as_nanos(), until.as_nanos()),
            })
            .collect();
        let run = FleetRun {
            tb,
            seed,
            stores,
            down,
            counters: Arc::default(),
        };
        Ok(Some((Arc::new(run), processes)))
    }

    /// Whether `client`'s own network is down at virtual instant `now_ns`.
    pub fn network_down(&self, client: u32, now_ns: u64) -> bool {
        self.down
            .iter()
            .any(|&(c, from, until)| c == client && (from..until).contains(&now_ns))
    }

    /// What the instances did with the stores so far.
    pub fn figures(&self) -> StoreFigures {
        let c = &self.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let opened = c.opened.lock().unwrap_or_else(|e| e.into_inner());
        let (at_once, errors, given_up) =
            (get(&c.failed_at_once), get(&c.errors), get(&c.given_up));
        StoreFigures {
            ops: get(&c.ops),
            failed: at_once + errors + given_up,
            failed_at_once: at_once,
            errors,
            given_up,
            store_down: get(&c.store_down),
            reconciled: get(&c.reconciled),
            opens: opened.generations.len() as u64,
            first_open_s: opened.first_ns.map(|ns| ns as f64 / 1e9),
        }
    }

    /// The stores as client instance `client` reaches them, under the names the policies give;
    /// their down and up events counted.
    pub fn stores_for(self: &Arc<Self>, client: u32) -> Stores {
        let counters = self.counters.clone();
        let events: EventSink = Arc::new(move |e: &FleetEvent| match e {
            FleetEvent::StoreDown { .. } => {
                counters.store_down.fetch_add(1, Ordering::Relaxed);
            }
            FleetEvent::StoreUp { reconciled, .. } => {
                counters
                    .reconciled
                    .fetch_add(*reconciled as u64, Ordering::Relaxed);
            }
        });
        let stores = Stores::new().events(events);
        self.stores.iter().fold(stores, |stores, s| {
            let handle = ClientStore {
                run: self.clone(),
                store: s.index,
                client,
                draws: AtomicU64::new(0),
            };
            stores.add(&s.name, Arc::new(handle))
        })
    }
}

/// One client instance's handle on one of the run's stores: the scenario's round trip and
/// faults, then the real Redis (see the [module docs](self)).
#[derive(Debug)]
struct ClientStore {
    run: Arc<FleetRun>,
    store: u16,
    client: u32,
    /// Round trips drawn so far (each draw's key).
    draws: AtomicU64,
}

impl ClientStore {
    fn store(&self) -> &RunStore {
        &self.run.stores[usize::from(self.store)]
    }

    /// Runs `op` on the real store after [`reach`](Self::reach), counting it (an operation
    /// dropped before its answer was given up at the instance's wait bound: failed).
    async fn counted<T>(
        &self,
        op: impl std::future::Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        let c = &self.run.counters;
        c.ops.fetch_add(1, Ordering::Relaxed);
        let mut pending = Pending {
            given_up: &c.given_up,
            done: false,
        };
        let result = match self.reach().await {
            Ok(()) => op.await.inspect_err(|_| {
                c.errors.fetch_add(1, Ordering::Relaxed);
            }),
            Err(e) => {
                c.failed_at_once.fetch_add(1, Ordering::Relaxed);
                Err(e)
            }
        };
        pending.done = true;
        result
    }

    /// Notes a breaker generation seen open.
    fn seen(&self, reply: &BreakerReply) {
        if reply.state == State::Open {
            let now = self.run.tb.now_ns();
            let mut opened = self
                .run
                .counters
                .opened
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            if opened.generations.insert((self.store, reply.generation))
                && opened.first_ns.is_none()
            {
                opened.first_ns = Some(now);
            }
        }
    }

    /// Fails at once while the store refuses or the client's network is down; else waits the
    /// round trip.
    async fn reach(&self) -> Result<(), StoreError> {
        let now = self.run.tb.now_ns();
        let s = self.store();
        let unavailable = |why: &str| StoreError {
            kind: StoreErrorKind::Unavailable,
            message: format!("store \"{}\": {why}", s.name),
        };
        if self.run.network_down(self.client, now) {
            return Err(unavailable("the client's own network is down"));
        }
        if s.refused.iter().any(|&(a, b)| (a..b).contains(&now)) {
            return Err(unavailable("refused (a FailFast outage)"));
        }
        let n = self.draws.fetch_add(1, Ordering::Relaxed);
        let key = (u64::from(self.client) << 32) ^ n;
        let mut draw = Stream::keyed(self.run.seed, StreamId::Store(self.store), key);
        let extra: u64 = s
            .slow
            .iter()
            .filter(|&&(a, b, _)| (a..b).contains(&now))
            .map(|&(_, _, e)| e)
            .sum();
        let wait = s.round_trip.sample(&mut draw).saturating_add(extra);
        tokio::time::sleep(self.run.tb.to_wall(wait)).await;
        Ok(())
    }
}

impl Store for ClientStore {
    fn breaker<'a>(
        &'a self,
        name: &'a str,
        spec: &'a BreakerSpec,
        now_us: u64,
        op: BreakerOp,
    ) -> StoreFuture<'a, BreakerReply> {
        Box::pin(async move {
            let reply = self
                .counted(self.store().redis.breaker(name, spec, now_us, op))
                .await?;
            self.seen(&reply);
            Ok(reply)
        })
    }

    fn budget<'a>(
        &'a self,
        name: &'a str,
        spec: &'a BudgetSpec,
        now_us: u64,
        op: BudgetOp,
    ) -> StoreFuture<'a, BudgetReply> {
        Box::pin(self.counted(self.store().redis.budget(name, spec, now_us, op)))
    }

    fn rate<'a>(
        &'a self,
        name: &'a str,
        spec: &'a RateSpec,
        now_us: u64,
    ) -> StoreFuture<'a, RateReply> {
        Box::pin(self.counted(self.store().redis.rate(name, spec, now_us)))
    }

    fn bulkhead<'a>(
        &'a self,
        name: &'a str,
        spec: &'a BulkheadSpec,
        now_us: u64,
        op: BulkheadOp,
    ) -> StoreFuture<'a, BulkheadReply> {
        Box::pin(self.counted(self.store().redis.bulkhead(name, spec, now_us, op)))
    }

    fn describe(&self) -> String {
        format!(
            "{} as client {} reaches it",
            self.store().redis.describe(),
            self.client
        )
    }
}

/// Counts an operation dropped before it ended (given up at the instance's wait bound).
struct Pending<'a> {
    given_up: &'a AtomicU64,
    done: bool,
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.given_up.fetch_add(1, Ordering::Relaxed);
        }
    }
}

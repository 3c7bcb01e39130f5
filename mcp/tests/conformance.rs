//! The MCP server's face of the cross-face conformance suite (`conformance/README.md`): each
//! sequence's policy, written in the policy format as the engine face writes it
//! (`conformance::engine::stack`), becomes `reliable_http_call`'s `policy` argument, every layer
//! `scope: Shared` (a sequence's calls are one client's, and the server keeps a `Shared` policy's
//! state from one call to the next); each call goes to a scripted HTTP server on 127.0.0.1 that
//! answers as the sequence says, and the decisions the server's own instance takes are written as
//! the trace. The hand-written sequences and the generated nestings both run.
//!
//! Virtual time, exactly: the runtime's clock is paused and never auto-advances (a blocking task
//! holds it for the whole run, tokio's documented way), the server's instances read that clock
//! and sleep on it (through [`Instrument`]), and the driver moves it itself, only when nothing
//! is in flight on the loopback (a request sent and not yet read by the scripted server, or an
//! answer written and not yet handed to the engine), to the next timer either side set.
//! So a latency past the attempt's timeout, a backoff, a hedge's delay or a `Retry-After` are
//! decided in virtual milliseconds, and the trace is compared byte for byte like every other
//! face's.
//!
//! What the tool cannot take is found by the server itself: the policy is loaded by the server's
//! own loader (`policy_arg::instance`, with its ceilings), and a policy it refuses is listed with
//! the server's refusal, never run half-way; so is an attempt that cannot be interrupted (an HTTP
//! attempt is a future, dropped at its timer). The ceilings are the operator's settings, and the
//! face runs the server as an operator who raised them as far as they go would
//! (`--max-attempts 20 --max-hedges 3`): the sequences that ask for more than the defaults (6
//! attempts, 2 hedges) run, and the defaults still refuse them, naming the flag
//! (`the_default_ceilings_refuse_what_the_raised_ones_run`).

use std::collections::{BTreeSet, HashSet};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration as StdDuration;

use conformance::{Draws, Scripted, Sequence, Trace};
use reliable::clock::TokioClock;
use reliable::observer::{CallEnd, CallOutcome, NotSent, Observer};
use reliable::sleep::{Sleep, SleepFuture};
use reliable_core::breaker::Transition;
use reliable_core::outcome::ErrorClass;
use reliable_mcp::breakers::Breakers;
use reliable_mcp::http_call::{self, HttpCallArgs, HttpCaller};
use reliable_mcp::instrument::Instrument;
use reliable_mcp::redact::Secrets;
use reliable_mcp::ssrf::{AllowList, Guard, HARD_MAX_ATTEMPTS, HARD_MAX_HEDGES, Limits};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::time::Instant;

/// A day: the operator's limits a sequence does not set (no sequence comes near).
const DAY: StdDuration = StdDuration::from_secs(86_400);

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// What the driver, the scripted server and the server's instances share.
#[derive(Debug)]
struct World {
    t0: Instant,
    /// Timers set (virtual instants, ms), by either side; the driver moves the clock to the
    /// earliest one still ahead.
    timers: Mutex<BTreeSet<u64>>,
    /// Transfers in flight on the loopback: the clock stays still while any is.
    in_flight: AtomicU32,
    /// The call in progress, and the latest attempt sent in it (from 1; a hedge is an attempt):
    /// a request that arrives is that attempt's, since the clock stands still until it arrives
    /// and no two copies are sent at one instant.
    call: AtomicU64,
    attempt: AtomicU32,
    /// Attempts (call, n) that are over: answered, timed out or cancelled.
    over: Mutex<HashSet<(u64, u32)>>,
    /// Attempts whose answer was written and not yet handed to the engine.
    answering: Mutex<HashSet<(u64, u32)>>,
    /// How the call in progress ended (`Some(true)`: success).
    ended: Mutex<Option<bool>>,
}

impl World {
    fn now_ms(&self) -> u64 {
        self.t0.elapsed().as_millis() as u64
    }

    /// A timer `after` from now, noted at the millisecond tokio's timer fires it: the next whole
    /// one (a quantile hedge delay is rarely whole).
    fn timer(&self, after: StdDuration) {
        let at = (self.t0.elapsed() + after).as_nanos().div_ceil(1_000_000) as u64;
        lock(&self.timers).insert(at);
    }

    /// Attempt `n` of the call in progress is over; an answer written for it and not yet
    /// handed over never will be.
    fn over(&self, n: u32) {
        let key = (self.call.load(Ordering::SeqCst), n);
        lock(&self.over).insert(key);
        if lock(&self.answering).remove(&key) {
            self.in_flight.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// tokio's timer, each sleep noted as a timer for the driver.
#[derive(Debug, Clone)]
struct NotedSleep(Arc<World>);

impl Sleep for NotedSleep {
    fn sleep(&self, duration: StdDuration) -> SleepFuture {
        self.0.timer(duration);
        Box::pin(tokio::time::sleep(duration))
    }
}

/// The server's instances' reports, written into the trace (and the flow the driver watches).
#[derive(Debug, Clone)]
struct Reports {
    world: Arc<World>,
    trace: Trace,
}

impl Observer for Reports {
    fn on_attempt(&self, _: &str, attempt: u32) {
        self.trace.attempt();
        self.world.attempt.store(attempt, Ordering::SeqCst);
        // The request is on its way to the scripted server.
        self.world.in_flight.fetch_add(1, Ordering::SeqCst);
    }

    fn on_attempt_end(&self, _: &str, attempt: u32, class: Option<ErrorClass>) {
        self.world.over(attempt);
        let accepted = class.is_none_or(reliable::classify::accepted);
        self.trace.answer(attempt, class, accepted);
    }

    fn on_attempt_cancelled(&self, name: &str, attempt: u32) {
        self.world.over(attempt);
        self.trace.observer().on_attempt_cancelled(name, attempt);
    }

    fn on_hedge(&self, name: &str, attempt: u32) {
        self.trace.observer().on_hedge(name, attempt);
    }

    fn on_hedge_refused(&self, name: &str, refusal: NotSent) {
        self.trace.observer().on_hedge_refused(name, refusal);
    }

    fn on_limit_change(&self, name: &str, from: u32, to: u32) {
        self.trace.observer().on_limit_change(name, from, to);
    }

    fn on_retry(&self, name: &str, attempt: u32, class: ErrorClass, delay: StdDuration) {
        self.trace.observer().on_retry(name, attempt, class, delay);
    }

    fn on_reject(&self, name: &str, refusal: NotSent) {
        self.trace.observer().on_reject(name, refusal);
    }

    fn on_transition(&self, name: &str, t: Transition) {
        self.trace.observer().on_transition(name, t);
    }

    fn on_give_up(&self, name: &str, attempts: u32, reason: &'static str) {
        self.trace.observer().on_give_up(name, attempts, reason);
    }

    fn on_call_end(&self, _: &str, end: &CallEnd) {
        *lock(&self.world.ended) = Some(end.outcome == CallOutcome::Success);
    }
}

/// A status line's reason phrase (any will do; hyper reads the code).
fn response(status: u16, headers: &[(String, String)]) -> Vec<u8> {
    let mut r = format!("HTTP/1.1 {status} Scripted\r\ncontent-length: 0\r\nconnection: close\r\n");
    for (k, v) in headers {
        r.push_str(&format!("{k}: {v}\r\n"));
    }
    r.push_str("\r\n");
    r.into_bytes()
}

/// The scripted server: attempt `n` of call `i` gets answer `n` of call `i`, after its latency
/// on the virtual clock; an answer for an attempt that is already over (timed out, or a copy
/// cancelled) is never written.
async fn serve(listener: TcpListener, world: Arc<World>, s: Arc<Sequence>) {
    loop {
        let Ok((mut conn, _)) = listener.accept().await else {
            return;
        };
        let (world, s) = (world.clone(), s.clone());
        tokio::spawn(async move {
            let mut buf = Vec::new();
            let mut chunk = [0u8; 1024];
            while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                match conn.read(&mut chunk).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
            }
            let call = world.call.load(Ordering::SeqCst);
            let n = world.attempt.load(Ordering::SeqCst);
            // The request arrived: nothing in flight until the answer is written.
            world.in_flight.fetch_sub(1, Ordering::SeqCst);
            let Some(answer) = s.calls[call as usize].answers.get(n as usize - 1) else {
                return; // script exhausted: the runner reports it
            };
            let kind = answer.kind();
            if kind == Ok(Scripted::Hang) {
                std::future::pending::<()>().await;
            }
            let latency = StdDuration::from_millis(answer.latency_ms);
            world.timer(latency);
            tokio::time::sleep(latency).await;
            {
                // Checked and marked at once: the attempt cannot end in between.
                let over = lock(&world.over);
                if over.contains(&(call, n)) {
                    return; // the attempt timed out or was cancelled meanwhile
                }
                world.in_flight.fetch_add(1, Ordering::SeqCst);
                lock(&world.answering).insert((call, n));
            }
            match kind {
                Ok(Scripted::Status(status, headers)) => {
                    let _ = conn.write_all(&response(status, &headers)).await;
                    let _ = conn.shutdown().await;
                }
                // A reset: the connection closes with no answer.
                _ => drop(conn),
            }
        });
    }
}

/// The sequence's policy in the policy format, as the engine face reads it, every layer's
/// state `Shared`: the sequence's calls are one client's, so its breaker, budget, throttle,
/// ledger, limits and hedge estimate carry from one call to the next, which the server does for
/// a `Shared` policy (a `PerClient` one is each call's own).
fn policy(s: &Sequence) -> Result<Value, String> {
    let stack = conformance::engine::stack(s)?;
    let mut v = serde_json::to_value(&stack).map_err(|e| format!("policy: {e}"))?;
    let mut todo = vec![&mut v];
    while let Some(v) = todo.pop() {
        match v {
            Value::Object(m) => {
                for (k, v) in m.iter_mut() {
                    if k == "scope" || k == "budget_scope" {
                        *v = "Shared".into();
                    } else {
                        todo.push(v);
                    }
                }
            }
            Value::Array(a) => todo.extend(a.iter_mut()),
            _ => {}
        }
    }
    Ok(v)
}

/// The operator's limits: a day for every time (no sequence comes near), the attempts and
/// hedges per call as high as an operator may set them (`--max-attempts 20 --max-hedges 3`),
/// everything else out of the way. The sequence's own deadline and timeouts are in its policy.
fn limits() -> Limits {
    Limits {
        max_attempts: HARD_MAX_ATTEMPTS,
        max_hedges: HARD_MAX_HEDGES,
        ..default_ceilings()
    }
}

/// As [`limits`], with the server's default ceilings (5 attempts, 1 hedge).
fn default_ceilings() -> Limits {
    Limits {
        connect_timeout: DAY,
        read_timeout: DAY,
        max_attempt_timeout: DAY,
        max_call_time: DAY,
        ..Limits::default()
    }
}

/// Why the tool cannot take the sequence, if it cannot: the server's own loader refuses its
/// policy (saying why), or its attempts cannot be interrupted.
fn inexpressible(s: &Sequence, policy: &Value) -> Option<String> {
    refusal(s, policy, &limits())
}

/// [`inexpressible`], with `limits`.
fn refusal(s: &Sequence, policy: &Value, limits: &Limits) -> Option<String> {
    if s.policy.uninterruptible {
        return Some(
            "uninterruptible: an HTTP attempt is a future, dropped at its timer; a late answer is never taken".into(),
        );
    }
    // A GET: idempotent.
    reliable_mcp::policy_arg::instance(
        policy,
        true,
        limits,
        &Instrument::default(),
        &Secrets::default(),
    )
    .err()
    .map(|e| format!("the server refuses its policy: {e}"))
}

/// Runs one sequence through `reliable_http_call`; its trace, or why it cannot run.
fn run(s: &Sequence) -> Result<Result<String, String>, String> {
    let policy = policy(s)?;
    if let Some(why) = inexpressible(s, &policy) {
        return Ok(Err(why));
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| e.to_string())?;
        let url = format!(
            "http://{}/",
            listener.local_addr().map_err(|e| e.to_string())?
        );
        let args: HttpCallArgs = serde_json::from_value(serde_json::json!({
            "url": url,
            "policy": policy,
        }))
        .map_err(|e| format!("reliable_http_call arguments: {e}"))?;
        // The clock stays where the driver puts it: no auto-advance while this task runs.
        let (hold, held) = std::sync::mpsc::channel::<()>();
        let holder = tokio::task::spawn_blocking(move || held.recv());
        let world = Arc::new(World {
            t0: Instant::now(),
            timers: Mutex::default(),
            in_flight: AtomicU32::new(0),
            call: AtomicU64::new(0),
            attempt: AtomicU32::new(0),
            over: Mutex::default(),
            answering: Mutex::default(),
            ended: Mutex::new(None),
        });
        let w = world.clone();
        let trace = Trace::new(Arc::new(move || w.now_ms()));
        let reports = Reports {
            world: world.clone(),
            trace: trace.clone(),
        };
        let draws: Draws = s.policy.throttle().map(|(_, d)| d).unwrap_or_default();
        let (sleep, r, d) = (NotedSleep(world.clone()), reports.clone(), draws.clone());
        let instrument = Instrument::new(move |b| {
            let d = d.clone();
            b.clock(TokioClock::new())
                .sleep(sleep.clone())
                .observer(r.clone())
                .throttle_draws(move || d.next())
        });
        let limits = limits();
        let breakers = Arc::new(Breakers::new(limits.clone()));
        let guard = Guard::new(AllowList::parse(&["127.0.0.1"]).map_err(|e| e.to_string())?);
        let caller = Arc::new(HttpCaller::new(guard, limits, breakers)?.instrumented(instrument));
        let server = tokio::spawn(serve(listener, world.clone(), Arc::new(s.clone())));
        let result = drive(s, &world, &trace, &caller, &args).await;
        server.abort();
        drop(hold);
        let _ = holder.await;
        result?;
        if draws.exhausted() {
            return Err("throttle draws exhausted".into());
        }
        Ok(Ok(trace.text()))
    })
}

/// Makes the calls one after another, moving the clock between them and within them.
async fn drive(
    s: &Sequence,
    world: &Arc<World>,
    trace: &Trace,
    caller: &Arc<HttpCaller>,
    args: &HttpCallArgs,
) -> Result<(), String> {
    for (i, c) in s.calls.iter().enumerate() {
        let now = world.now_ms();
        if c.start_ms > now {
            tokio::time::advance(StdDuration::from_millis(c.start_ms - now)).await;
        }
        world.call.store(i as u64, Ordering::SeqCst);
        *lock(&world.ended) = None;
        trace.start_call(i);
        let (caller, args) = (caller.clone(), args.clone());
        let call = tokio::spawn(async move { http_call::call(&caller, &args).await });
        loop {
            settle(world).await?;
            if call.is_finished() {
                break;
            }
            if trace.attempts() as usize > c.answers.len() {
                return Err(format!("call {i}: script exhausted"));
            }
            let now = world.now_ms();
            let next = {
                let mut timers = lock(&world.timers);
                timers.retain(|&t| t > now);
                timers.first().copied()
            };
            let Some(next) = next else {
                return Err(format!("call {i}: stuck at {now} ms with no timer set"));
            };
            tokio::time::advance(StdDuration::from_millis(next - now)).await;
        }
        call.await
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("call {i}: refused: {e}"))?;
        let ok = lock(&world.ended).take();
        trace.end(ok.ok_or_else(|| format!("call {i}: no end reported"))?);
    }
    Ok(())
}

/// Lets every task run until nothing is in flight on the loopback and nothing is ready (bounded
/// in real time: a stuck transfer fails the face).
async fn settle(world: &World) -> Result<(), String> {
    let give_up = std::time::Instant::now() + StdDuration::from_secs(10);
    loop {
        for _ in 0..64 {
            tokio::task::yield_now().await;
        }
        if world.in_flight.load(Ordering::SeqCst) == 0 {
            return Ok(());
        }
        if std::time::Instant::now() > give_up {
            return Err("a loopback transfer did not complete in 10 s".into());
        }
    }
}

/// The sequences `conformance/pending.json` lists for this face: semantics the core's call engine
/// fixed that `reliable_http_call` does not follow yet (none: the tool's instances drive the
/// engine).
fn pending() -> Vec<String> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../conformance/pending.json");
    let text = std::fs::read_to_string(path).unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    json["faces"]["mcp"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect()
}

/// Runs every sequence of `what`: each runs and matches `expected` byte for byte, or is listed
/// with the reason the tool cannot take it, or is listed in `pending.json` and still differs
/// (one that matches must be unlisted). Returns how many ran and matched.
fn check(
    what: &str,
    sequences: &[Sequence],
    expected: impl Fn(&str) -> Result<String, String>,
) -> usize {
    let pending = pending();
    let (mut ran, mut skipped, mut failures, mut waiting) = (0, Vec::new(), Vec::new(), Vec::new());
    for s in sequences {
        let want = expected(&s.name).unwrap();
        let listed = pending.contains(&s.name);
        match run(s) {
            Ok(Ok(got)) if got == want && listed => failures.push(format!(
                "{}: listed as pending the engine in conformance/pending.json, but the face now follows it: unlist it",
                s.name
            )),
            Ok(Ok(got)) if got == want => ran += 1,
            Ok(Ok(_)) if listed => waiting.push(s.name.clone()),
            Ok(Ok(got)) => failures.push(format!(
                "{}: {}",
                s.name,
                conformance::first_difference(&want, &got).unwrap_or_default()
            )),
            Ok(Err(why)) => skipped.push(format!("{} ({why})", s.name)),
            Err(e) => failures.push(format!("{}: {e}", s.name)),
        }
    }
    println!(
        "reliable_http_call, {what}: {ran} of {} ran and matched; {} not taken by the tool, not run:",
        sequences.len(),
        skipped.len()
    );
    for s in &skipped {
        println!("  {s}");
    }
    if !waiting.is_empty() {
        println!(
            "reliable_http_call, {what}: {} pending the engine's semantics: {}",
            waiting.len(),
            waiting.join(", ")
        );
    }
    assert!(
        failures.is_empty(),
        "face reliable_http_call diverges on {} of {} {what}:\n{}",
        failures.len(),
        sequences.len(),
        failures.join("\n")
    );
    ran
}

#[test]
fn reliable_http_call_decides_like_every_face() {
    let sequences = conformance::sequences().unwrap();
    let ran = check("sequences", &sequences, conformance::expected);
    // As many as ran when this was written (all but `late-success-kept`, uninterruptible): a
    // sequence the tool stops taking fails here.
    assert!(ran >= 64, "only {ran} sequences ran");
}

/// The sequences that ask for more than the default ceilings (6 attempts; 2 hedges) run with
/// the ceilings raised (above), and a server with the defaults still refuses each, naming the
/// ceiling and the flag that raises it.
#[test]
fn the_default_ceilings_refuse_what_the_raised_ones_run() {
    let sequences = conformance::sequences().unwrap();
    let named = |name: &str| {
        let s = sequences.iter().find(|s| s.name == name).unwrap();
        (s, policy(s).unwrap())
    };
    for (name, refused) in [
        (
            "refusal-wait-past-deadline",
            "policy.policy.max_attempts: 6 is over the server's ceiling of 5 attempts (set by --max-attempts)",
        ),
        (
            "refusal-waited-out",
            "policy.policy.max_attempts: 6 is over the server's ceiling of 5 attempts (set by --max-attempts)",
        ),
        (
            "hedge-delay-counts-failed-copies",
            "policy.inner.config.max_hedges: 2 is over the server's ceiling of 1 hedge per attempt (set by --max-hedges)",
        ),
    ] {
        let (s, policy) = named(name);
        assert_eq!(
            refusal(s, &policy, &default_ceilings()),
            Some(format!("the server refuses its policy: {refused}")),
            "{name}"
        );
        assert_eq!(inexpressible(s, &policy), None, "{name}");
    }
}

#[test]
fn reliable_http_call_runs_the_generated_nestings() {
    let sequences = conformance::generate::sequences().unwrap();
    let dir = conformance::root().join("generated");
    let ran = check("generated nestings", &sequences, |name| {
        let p = dir.join(format!("{name}.jsonl"));
        std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))
    });
    // Every one: `reliable::policy` builds each nesting as the engine runs it.
    assert!(ran >= 57, "only {ran} generated nestings ran");
}

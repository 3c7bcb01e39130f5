//! End-to-end: small scenarios emulated for real on 127.0.0.1 (a few seconds each), checked
//! against the simulation of the same scenario and seed.

use emulate::run::run_policy;
use emulate::simface::{Compiled, PolicySummary, RunOutput, simulate};
use emulate::size;

fn compile(text: &str) -> Compiled {
    sim::load(text, "test.ron").unwrap()
}

const OUTAGE: &str = r#"Scenario(
    name: "outage",
    horizon: "3s",
    workload: OpenLoop(rate: 60.0, clients: 4),
    downstreams: [(name: "api", model: Server(workers: 8, queue: (capacity: 50), service: Exponential(mean: "20ms")))],
    faults: [Outage(downstream: "api", from: "1s", until: "2s", mode: FailFast)],
    policies: [(name: "retry", stack: Retry(
        policy: (max_attempts: 3, attempt_timeout: "500ms", backoff: (shape: Constant(delay: "10ms"))),
        inner: Call(downstream: "api"),
    ))],
)"#;

#[test]
fn an_emulated_run_sends_the_simulated_arrivals_and_retries_the_outage() {
    let c = compile(OUTAGE);
    let (out, fidelity) = run_policy(&c, 0, 1, 1.0).unwrap();
    let sim = simulate(&c, 1).unwrap();
    let (e, s) = (&out.summary, &sim[0].output.summary);
    // The same arrival process and seed: exactly the same first tries.
    assert_eq!(e.first_tries, s.first_tries);
    assert_eq!(fidelity.arrivals, s.first_tries);
    // Every call in the outage fails fast and is retried twice: 3 attempts per request there.
    let during = e.amplification.during_fault.unwrap();
    assert!((2.7..=3.05).contains(&during), "amplification {during}");
    assert!(e.server_rejections > 0);
    // Outside the outage every request succeeds at once.
    assert!(
        e.success_rate > 0.6 && e.success_rate < 0.75,
        "{}",
        e.success_rate
    );
    assert_eq!(e.verdict, s.verdict);
    // Attempts sent during the fault are counted apart, as in `sim` (no partition here: every
    // attempt sent arrives, so sent and arrived agree).
    let sent = e.amplification.sent_during_fault.unwrap();
    assert!(
        (sent - during).abs() < 0.05,
        "sent {sent}, arrived {during}"
    );
    // Every attempt that ended is recorded with its latency, which recovery judges: as many
    // as simulated, and about as slow (real time adds a few ms per attempt, more under load).
    let (ended, latency_ms) = attempt_latency(&out);
    let (sim_ended, sim_latency_ms) = attempt_latency(&sim[0].output);
    assert!(
        ended.abs_diff(sim_ended) <= sim_ended / 20,
        "{ended} vs {sim_ended} ended"
    );
    assert!(
        latency_ms > 0.8 * sim_latency_ms && latency_ms < 2.0 * sim_latency_ms + 10.0,
        "mean attempt latency {latency_ms} ms, simulated {sim_latency_ms} ms"
    );
}

/// Attempts that ended and their mean latency in ms, over every bucket.
fn attempt_latency(out: &RunOutput) -> (u64, f64) {
    let ended: u64 = out.buckets.iter().map(|b| b.attempts_ended).sum();
    let us: u64 = out.buckets.iter().map(|b| b.attempt_latency_us).sum();
    (ended, us as f64 / ended.max(1) as f64 / 1e3)
}

const HANG: &str = r#"Scenario(
    name: "hang",
    horizon: "2s",
    workload: OpenLoop(rate: 40.0, arrivals: Constant),
    downstreams: [(name: "api", model: Server(workers: 4, service: Constant("10ms")))],
    faults: [Outage(downstream: "api", from: "500ms", until: "1s", mode: Hang)],
    policies: [(name: "timeout", stack: Call(downstream: "api", timeout: "200ms"))],
)"#;

/// A throttle and a partition, both played on the client's side by reliable's chaos timeline.
const CLIENT_FAULTS: &str = r#"Scenario(
    name: "client-faults",
    horizon: "4s",
    workload: OpenLoop(rate: 50.0, clients: 4, arrivals: Constant),
    downstreams: [(name: "api", model: Server(workers: 8, queue: (capacity: 100), service: Constant("10ms")))],
    faults: [
        Throttle(downstream: "api", from: "1s", until: "2s", share: 0.5, retry_after: "300ms"),
        Partition(downstream: "api", from: "2500ms", until: "3s"),
    ],
    policies: [(name: "once", stack: Call(downstream: "api", timeout: "1s"))],
)"#;

#[test]
fn throttles_and_partitions_are_played_by_the_chaos_timeline_as_simulated() {
    let c = compile(CLIENT_FAULTS);
    let (out, _) = run_policy(&c, 0, 1, 1.0).unwrap();
    let sim = simulate(&c, 1).unwrap();
    let (e, s) = (&out.summary, &sim[0].output.summary);
    assert_eq!(e.first_tries, s.first_tries);
    // Half of the 50 calls sent in the throttle's second get a 429, counted as refused arrivals
    // (the timeline and the simulator draw from different streams: a binomial's spread apart).
    assert!(s.server_rejections >= 15, "{}", s.server_rejections);
    assert!(
        e.server_rejections.abs_diff(s.server_rejections) <= 10,
        "{} refused, simulated {}",
        e.server_rejections,
        s.server_rejections
    );
    // The 25 calls sent in the partition's half second are held until it heals, then served.
    let (eh, sh) = (e.downstreams[0].held, s.downstreams[0].held);
    assert!(sh >= 20, "{sh} held simulated");
    assert!(eh.abs_diff(sh) <= 3, "{eh} held, simulated {sh}");
    assert!(
        e.latency_ms.p99 > 300.0 && s.latency_ms.p99 > 300.0,
        "p99 {} ms, simulated {} ms",
        e.latency_ms.p99,
        s.latency_ms.p99
    );
    assert!(
        (e.success_rate - s.success_rate).abs() < 0.06,
        "success {} vs {}",
        e.success_rate,
        s.success_rate
    );
}

#[test]
fn calls_swallowed_by_a_hanging_outage_end_at_the_client_timeout() {
    let c = compile(HANG);
    // Run 8 times slower than the scenario: the server judges the outage by when a call
    // arrives, so a send that lags its schedule by L wall ms lands L / 8 scenario ms late. Calls
    // are 25 ms apart: the tolerance of one call either way holds while the lag across an edge
    // of the outage stays under 50 scenario ms, 400 wall ms here. On a loaded 2-core machine
    // (load average 15 to 20) the largest send lag measured was 142 wall ms, and at 1.0 the
    // test saw 23 hung calls.
    let (out, fid) = run_policy(&c, 0, 1, 8.0).unwrap();
    let e = &out.summary;
    assert_eq!(e.first_tries, 80);
    // The 20 arrivals scheduled in [0.5 s, 1 s) hang (one more or less if a send lands across
    // an edge on a loaded machine), and every hung call ends at its timeout.
    let hung = e.downstreams[0].hung;
    eprintln!(
        "send lag (wall ms): p50 {:.1}, p99 {:.1}, max {:.1}",
        fid.lag_p50_ms, fid.lag_p99_ms, fid.lag_max_ms
    );
    assert!(
        (19..=21).contains(&hung),
        "{hung} hung; send lag max {:.1} wall ms",
        fid.lag_max_ms
    );
    assert_eq!(e.timeouts, hung);
    // A call that times out ends as an attempt of the full timeout.
    let (ended, latency_ms) = attempt_latency(&out);
    assert!(ended + 1 >= 80, "{ended} attempts ended");
    let slowest = 200.0 * hung as f64 / ended as f64;
    assert!(
        latency_ms >= slowest,
        "mean attempt latency {latency_ms} ms"
    );
    // The rest succeed (the last may still be in flight at the horizon).
    assert!(e.successes + hung >= 79, "{} successes", e.successes);
}

#[test]
fn the_size_check_refuses_what_two_cores_cannot_drive_with_the_numbers() {
    let c = compile(&OUTAGE.replace("rate: 60.0", "rate: 5000.0"));
    let s = size::measure(&c, 1.0, 1).unwrap();
    assert_eq!(s.peak_attempts_per_s, 15_000.0);
    let e = size::check(&s, size::MAX_ATTEMPTS_PER_S, 600.0).unwrap_err();
    assert!(e.contains("15000 attempts per wall second"), "{e}");
    assert!(e.contains("--time-scale to at least 7.50"), "{e}");
    // Stretched eightfold it fits.
    let s = size::measure(&c, 8.0, 1).unwrap();
    assert!(size::check(&s, size::MAX_ATTEMPTS_PER_S, 600.0).is_ok());
    // Too fine for millisecond timers once compressed.
    let s = size::measure(&compile(OUTAGE), 0.1, 1).unwrap();
    let e = size::check(&s, size::MAX_ATTEMPTS_PER_S, 600.0).unwrap_err();
    assert!(e.contains("mean service time of 2.00 ms"), "{e}");
}

const HEDGE: &str = r#"Scenario(
    name: "hedge",
    horizon: "3s",
    workload: OpenLoop(rate: 100.0, clients: 4),
    downstreams: [(name: "api", model: Server(workers: 20, service: Bimodal(
        slow_share: 0.05, fast: Constant("10ms"), slow: Constant("300ms"),
    )))],
    policies: [
        (name: "hedge", stack: Hedge(
            config: (delay: Fixed("50ms"), max_hedges: 1),
            idempotent: true,
            inner: Call(downstream: "api", timeout: "1s"),
        )),
        (name: "hedge, ledger", stack: Ledger(
            config: (ratio: 0.02, min_per_sec: 0, ttl: "10s"),
            scope: Shared,
            inner: Hedge(
                config: (delay: Fixed("50ms"), max_hedges: 1),
                idempotent: true,
                inner: Call(downstream: "api", timeout: "1s"),
            ),
        )),
        (name: "not idempotent", stack: Hedge(
            config: (delay: Fixed("50ms"), max_hedges: 1),
            inner: Call(downstream: "api", timeout: "1s"),
        )),
    ],
)"#;

/// Policy `p` of `c` emulated and simulated under seed 1: (emulated, simulated) summaries.
fn both(c: &Compiled, p: usize) -> (PolicySummary, PolicySummary) {
    let (out, _) = run_policy(c, p, 1, 1.0).unwrap();
    let sim = simulate(c, 1).unwrap();
    (out.summary, sim[p].output.summary.clone())
}

#[test]
fn hedges_are_sent_won_and_charged_to_the_ledger_as_simulated() {
    let c = compile(HEDGE);
    // One call in 20 takes 300 ms; a copy after 50 ms is fast 19 times in 20.
    let (e, s) = both(&c, 0);
    let (ex, sx) = (e.extra.as_ref().unwrap(), s.extra.as_ref().unwrap());
    assert!(sx.hedges_sent >= 8, "simulated {} hedges", sx.hedges_sent);
    let near = |a: u64, b: u64| a.abs_diff(b) <= 4 + b / 2;
    assert!(
        near(ex.hedges_sent, sx.hedges_sent),
        "{} hedges sent, simulated {}",
        ex.hedges_sent,
        sx.hedges_sent
    );
    assert!(
        near(ex.hedges_won, sx.hedges_won) && ex.hedges_won > 0,
        "{} hedges won, simulated {}",
        ex.hedges_won,
        sx.hedges_won
    );
    // Each hedge is an extra attempt of its own kind, not a retry.
    assert_eq!(ex.extra_sent.hedge, ex.hedges_sent);
    assert_eq!(ex.extra_sent.retry, 0);
    // The won hedges cut the 300 ms tail in both.
    assert!(
        e.latency_ms.p99 < 200.0 && s.latency_ms.p99 < 200.0,
        "{} / {}",
        e.latency_ms.p99,
        s.latency_ms.p99
    );
    // Charged to a 2% ledger (no floor), hedges stop once its balance is spent: 300 requests
    // deposit 6 hedges in all, and the rest are refused, in both.
    let (e, s) = both(&c, 1);
    let (ex, sx) = (e.extra.as_ref().unwrap(), s.extra.as_ref().unwrap());
    let (el, sl) = (ex.ledger.unwrap(), sx.ledger.unwrap());
    assert!(
        (1..=6).contains(&el.drawn.hedge) && (1..=6).contains(&sl.drawn.hedge),
        "{el:?} / {sl:?}"
    );
    assert_eq!(el.drawn.hedge, ex.hedges_sent);
    assert!(el.denied.hedge >= 4, "{el:?}");
    assert_eq!(ex.hedges_refused, el.denied.hedge);
    // A call the scenario does not call idempotent is never copied in `sim`; the policy loader
    // refuses such a hedge (it would never hedge), and so the emulator, with the loader's reason.
    let sim = simulate(&c, 1).unwrap();
    assert_eq!(sim[2].output.summary.extra.as_ref().unwrap().hedges_sent, 0);
    let e = run_policy(&c, 2, 1, 1.0).map(|_| ()).unwrap_err();
    assert!(
        e.contains("stack.idempotent") && e.contains("never hedges"),
        "{e}"
    );
}

const LIMIT: &str = r#"Scenario(
    name: "limit",
    horizon: "3s",
    workload: OpenLoop(rate: 300.0, clients: 4, arrivals: Constant),
    downstreams: [(name: "api", model: Server(workers: 8, service: Constant("50ms")))],
    policies: [
        (name: "bulkhead", stack: Limit(
            config: (rule: Fixed, initial: 4, min: 4, max: 4),
            scope: Shared,
            inner: Call(downstream: "api", timeout: "1s"),
        )),
        (name: "one per client", stack: Limit(
            config: (rule: Fixed, initial: 1, min: 1, max: 1),
            inner: Call(downstream: "api", timeout: "1s"),
        )),
    ],
)"#;

#[test]
fn a_limit_refuses_locally_and_admits_as_simulated() {
    let c = compile(LIMIT);
    for p in 0..2 {
        // 300 calls/s of 50 ms need 15 in flight; 4 are admitted, by one shared bulkhead or by
        // one slot per client (4 clients): about 80 calls/s, and 220/s refused. (Most calls are
        // refused, so the count barely moves with the few ms real time adds to each call.)
        let (e, s) = both(&c, p);
        let (ex, sx) = (e.extra.as_ref().unwrap(), s.extra.as_ref().unwrap());
        assert!(sx.limit_refusals > 500, "simulated {}", sx.limit_refusals);
        let rel = (ex.limit_refusals as f64 - sx.limit_refusals as f64) / sx.limit_refusals as f64;
        assert!(
            rel.abs() <= 0.15,
            "policy {p}: {} refusals, simulated {}",
            ex.limit_refusals,
            sx.limit_refusals
        );
        // A limiter's refusal is a local rejection, as in `sim`.
        assert_eq!(e.local_rejections, ex.limit_refusals);
        // The limits summed over every limiter, and the calls in flight through them.
        assert_eq!(ex.limit_mean, Some(4.0), "policy {p}");
        assert_eq!(sx.limit_mean, Some(4.0), "policy {p}");
        let (ea, sa) = (ex.admitted_mean.unwrap(), sx.admitted_mean.unwrap());
        assert!(
            sa > 3.0 && (ea - sa).abs() <= 0.15 * sa,
            "policy {p}: admitted {ea}, simulated {sa}"
        );
    }
}

const RATE: &str = r#"Scenario(
    name: "rate",
    horizon: "3s",
    workload: OpenLoop(rate: 300.0, clients: 4, arrivals: Constant),
    downstreams: [(name: "api", model: Server(workers: 8, service: Constant("5ms")))],
    policies: [
        (name: "shared", stack: RateLimit(
            config: (rate: 80, period: "1s", burst: 4),
            scope: Shared,
            inner: Call(downstream: "api", timeout: "1s"),
        )),
        (name: "one per client", stack: RateLimit(
            config: (rate: 20, period: "1s", burst: 1),
            inner: Call(downstream: "api", timeout: "1s"),
        )),
    ],
)"#;

#[test]
fn a_rate_limit_refuses_locally_as_simulated() {
    let c = compile(RATE);
    for p in 0..2 {
        // 300 calls/s against 80/s, shared or 20/s for each of 4 clients: about 220/s refused.
        let (e, s) = both(&c, p);
        let (ex, sx) = (e.extra.as_ref().unwrap(), s.extra.as_ref().unwrap());
        println!(
            "policy {p}: {} refusals emulated, {} simulated",
            ex.limit_refusals, sx.limit_refusals
        );
        assert!(sx.limit_refusals > 500, "simulated {}", sx.limit_refusals);
        let rel = (ex.limit_refusals as f64 - sx.limit_refusals as f64) / sx.limit_refusals as f64;
        assert!(
            rel.abs() <= 0.15,
            "policy {p}: {} refusals, simulated {}",
            ex.limit_refusals,
            sx.limit_refusals
        );
        // A rate limiter's refusal is a local rejection, as in `sim`; it keeps no gauge.
        assert_eq!(e.local_rejections, ex.limit_refusals);
        assert_eq!(s.local_rejections, sx.limit_refusals);
        assert_eq!((ex.limit_mean, sx.limit_mean), (None, None));
    }
}

/// What building policy `p` of `text`'s scenario says (no traffic is sent).
fn build_error(text: &str) -> String {
    use emulate::client::{Env, build, http_client};
    use emulate::meter::Meter;
    let c = compile(text);
    let env = Env {
        client: http_client(),
        bases: std::sync::Arc::new(vec!["http://127.0.0.1:9".into(); 8]),
        edge: true,
        balancers: Default::default(),
        chaos: Default::default(),
        meter: std::sync::Arc::new(Meter::new(
            emulate::timebase::Timebase::new(1.0),
            1_000_000_000,
            emulate::simface::recorder(&c),
        )),
        seed: 1,
        fleet: None,
    };
    match build(&c, 0, &env) {
        Ok(_) => String::new(),
        Err(e) => e,
    }
}

#[test]
fn every_nesting_the_policy_loader_runs_is_built_and_what_it_refuses_is_refused_with_its_reason() {
    let scenario = |stack: &str| {
        format!(
            r#"Scenario(name: "s", horizon: "1s", workload: OpenLoop(rate: 10.0),
            downstreams: [(name: "api", model: Server(workers: 1, service: Constant("10ms")))],
            policies: [(name: "p", stack: Ledger(config: (ratio: 0.1, min_per_sec: 1, ttl: "10s"), inner: {stack}))])"#
        )
    };
    let retry = |inner: &str| {
        format!(
            r#"Retry(policy: (max_attempts: 2, backoff: (shape: Constant(delay: "0s"))), inner: {inner})"#
        )
    };
    let call = r#"Call(downstream: "api", timeout: "100ms")"#;
    let breaker =
        format!(r#"Breaker(config: (failure_rate: 0.5, minimum_calls: 10), inner: {call})"#);
    // A half-open breaker's probes draw from the ledger, in `sim` and in reliable's engine.
    assert_eq!(build_error(&scenario(&retry(&breaker))), "");
    // A limit around the retry inside a ledger: reliable's engine runs it as `sim` does (the
    // emulator's own layers could not deposit once per call there).
    let limited = format!(
        r#"Limit(config: (rule: Fixed, initial: 4, min: 4, max: 4), inner: {})"#,
        retry(call)
    );
    assert_eq!(build_error(&scenario(&limited)), "");
    assert_eq!(build_error(&scenario(&retry(call))), "");
    let hedge = format!(
        r#"Hedge(config: (delay: Fixed("10ms"), max_hedges: 1), idempotent: true, inner: {call})"#
    );
    assert_eq!(build_error(&scenario(&hedge)), "");
    // Two retries on one route: refused by the loader, with the layer's path.
    let e = build_error(&scenario(&retry(&retry(call))));
    assert!(
        e.contains("stack.inner.inner") && e.contains("one Retry per route"),
        "{e}"
    );
}

/// `--policy NAME` compiles the scenario again with only the picked policies: a policy with a
/// retry budget (or any config serialised as a newtype variant) must survive the round trip.
#[test]
fn one_policy_with_a_budget_can_be_picked() {
    let text = include_str!("../../scenarios/default-scaled.ron");
    let c = compile(text);
    for name in ["retry budget", "budget + breaker + jitter"] {
        let mut s = c.scenario.clone();
        s.policies.retain(|p| p.name == name);
        let one = emulate::simface::compile(&s).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(one.scenario.policies.len(), 1);
        assert_eq!(one.scenario.policies[0].stack, s.policies[0].stack);
    }
}

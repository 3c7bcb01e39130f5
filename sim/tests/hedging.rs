//! The hedging and concurrency-limit scenarios (`scenarios/tail-at-scale.ron`,
//! `scenarios/hedging-storm.ron`, `scenarios/adaptive-limits.ron`): what their comments and
//! `scenarios/README.md` claim, checked on every seed run. The default tests run one seed (the
//! tail-at-scale case on a tenth of its reads, enough for its per-read claims); `--ignored` (in
//! release, `.ci/run sim_hedging`) runs the seeds the README's figures come from, in full.

use sim::compile::Compiled;
use sim::metrics::{PolicySummary, Verdict};
use sim::run::{BatchOptions, RunOutput};

/// Every run of the shipped scenario `name` (its horizon replaced by `horizon` if given), as
/// (policy name, output), in policy-then-seed order.
fn run(name: &str, horizon: Option<&str>, seeds: &[u64]) -> (Compiled, Vec<(String, RunOutput)>) {
    let c = match horizon {
        None => sim::shipped(name).unwrap().unwrap(),
        Some(h) => {
            let file = sim::scenario::SHIPPED
                .iter()
                .find(|(f, _)| f.trim_end_matches(".ron") == name)
                .map(|(_, text)| *text)
                .unwrap();
            let text = file.replacen("horizon: \"100s\"", &format!("horizon: \"{h}\""), 1);
            sim::load(&text, name).unwrap()
        }
    };
    let runs = sim::run(
        &c,
        seeds,
        BatchOptions {
            jobs: 2,
            progress: false,
        },
    )
    .unwrap();
    let out = runs
        .results
        .into_iter()
        .map(|r| (c.scenario.policies[r.policy].name.clone(), r.output))
        .collect();
    (c, out)
}

/// The outputs of `policy`, one per seed.
fn of<'a>(all: &'a [(String, RunOutput)], policy: &str) -> Vec<&'a RunOutput> {
    let v: Vec<_> = all
        .iter()
        .filter(|(n, _)| n == policy)
        .map(|(_, o)| o)
        .collect();
    assert!(!v.is_empty(), "no policy {policy}");
    v
}

fn extra(s: &PolicySummary) -> &sim::metrics::extra::ExtraSummary {
    s.extra.as_ref().expect("a hedging or limit layer")
}

/// The latency (ms) at `nines` of a run's far tail: a fan-out of 10^(nines − 3) reads at p99.9.
fn at_nines(o: &RunOutput, nines: f64) -> f64 {
    o.far_tail
        .iter()
        .find(|(n, _)| (n - nines).abs() < 1e-9)
        .map(|(_, ms)| *ms)
        .unwrap()
}

// ---- The tail at scale ----

/// Per read, on every seed: the 10 ms hedge sends 2-3% more reads and the p95 hedge 4-6% (the
/// published "approximately 5%"); both cut the p99.9 of one read several times; losers are
/// cancelled, never answered twice.
fn tail_per_read(all: &[(String, RunOutput)]) {
    let plain = of(all, "no hedging");
    for (i, p) in plain.iter().enumerate() {
        let fixed = &of(all, "hedge after 10 ms")[i].summary;
        let p95 = &of(all, "hedge at p95")[i].summary;
        let (ef, e95) = (extra(fixed), extra(p95));
        println!(
            "run {i}: share {:.4} / {:.4}; p99.9 of a read {:.1} / {:.1} / {:.1} ms; won {} / {}",
            ef.hedge_share,
            e95.hedge_share,
            p.summary.latency_ms.p999,
            fixed.latency_ms.p999,
            p95.latency_ms.p999,
            ef.hedges_won,
            e95.hedges_won
        );
        assert!(p.summary.extra.is_none());
        assert!((0.02..0.03).contains(&ef.hedge_share), "{}", ef.hedge_share);
        assert!(
            (0.04..0.06).contains(&e95.hedge_share),
            "{}",
            e95.hedge_share
        );
        for (s, e) in [(fixed, ef), (p95, e95)] {
            assert_eq!(s.attempts, s.first_tries + e.hedges_sent);
            assert!(e.hedges_won > 0 && e.hedges_won < e.hedges_sent);
            assert!(s.latency_ms.p999 * 3.0 < p.summary.latency_ms.p999);
            assert_eq!(s.failures, 0);
        }
    }
}

#[test]
fn tail_at_scale_hedges_cut_the_tail_of_a_read() {
    let (_, all) = run("tail-at-scale", Some("10s"), &[1]);
    tail_per_read(&all);
}

/// The published figures, on every seed: without hedging the 1,000-key fan-out's p99.9 is near
/// 1.8 s (within [1.2 s, 2.7 s]); hedged after 10 ms it is near 74 ms ([50, 110] ms, more than
/// 10 times lower) for 2-3% more reads; the p95 hedge cuts it as much, for 4-6% more reads
/// (which of the two ends lower varies with the seed).
#[test]
#[ignore = "5 seeds of 10 million reads per policy: run in release (.ci/run sim_hedging)"]
fn tail_at_scale_reproduces_the_published_fan_out_over_5_seeds() {
    let (_, all) = run("tail-at-scale", None, &[1, 2, 3, 4, 5]);
    tail_per_read(&all);
    for (i, p) in of(&all, "no hedging").iter().enumerate() {
        let fixed = of(&all, "hedge after 10 ms")[i];
        let p95 = of(&all, "hedge at p95")[i];
        let fan = |o: &RunOutput| at_nines(o, 6.0);
        println!(
            "run {i}: fan-out of 1,000 at p99.9: {:.0} / {:.1} / {:.1} ms",
            fan(p),
            fan(fixed),
            fan(p95)
        );
        assert!((1200.0..2700.0).contains(&fan(p)), "{}", fan(p));
        assert!((50.0..110.0).contains(&fan(fixed)), "{}", fan(fixed));
        assert!(fan(fixed) * 10.0 < fan(p) && fan(p95) * 10.0 < fan(p));
    }
}

// ---- Hedging in a storm ----

const CHARGED: [&str; 2] = ["hedge after 30 ms, ledger", "hedge at p95, ledger"];

/// On every seed: without hedges the server recovers; ungoverned hedges after a fixed 30 ms
/// double the load and stay stuck; ungoverned hedges at the p95 double the load in the fault's
/// first second, until the timeouts and slow copies they count raise the delay, then send almost
/// none and recover; charged to the 10% ledger, both stay within the ledger's bound and recover.
fn storm(seeds: &[u64]) {
    let (_, all) = run("hedging-storm", None, seeds);
    for (i, plain) in of(&all, "no hedging").iter().enumerate() {
        let plain = &plain.summary;
        assert_eq!(plain.verdict, Verdict::Recovered, "seed {i}");
        let line = |s: &PolicySummary| {
            format!(
                "{}: {:?} in {:?} s, amp during {:.2} after {:.2} peak {:.2}, hedge share {:.3}, refused {}, success {:.1}%",
                s.name,
                s.verdict,
                s.recovery_s,
                s.amplification.during_fault.unwrap(),
                s.amplification.after_fault.unwrap(),
                s.amplification.peak,
                s.extra.as_ref().map_or(0.0, |e| e.hedge_share),
                s.extra.as_ref().map_or(0, |e| e.hedges_refused),
                s.success_rate * 100.0
            )
        };
        println!("seed {}: {}", seeds[i], line(plain));
        let p = "hedge after 30 ms";
        let s = &of(&all, p)[i].summary;
        println!("seed {}: {}", seeds[i], line(s));
        assert_eq!(s.verdict, Verdict::Stuck, "{p}");
        assert!(s.amplification.after_fault.unwrap() > 1.6, "{p}");
        assert!(extra(s).hedge_share > 0.3, "{p}");
        assert!(s.wasted_work_share > 0.5, "{p}");
        let p = "hedge at p95";
        let s = &of(&all, p)[i].summary;
        println!("seed {}: {}", seeds[i], line(s));
        assert_eq!(s.verdict, Verdict::Recovered, "{p}");
        assert!(s.amplification.peak > 1.5, "{p}");
        assert!(s.amplification.during_fault.unwrap() < 1.1, "{p}");
        assert!(s.amplification.after_fault.unwrap() < 1.1, "{p}");
        assert!(extra(s).hedge_share < 0.15, "{p}");
        for p in CHARGED {
            let s = &of(&all, p)[i].summary;
            let e = extra(s);
            println!("seed {}: {}", seeds[i], line(s));
            assert_eq!(s.verdict, Verdict::Recovered, "{p}");
            // The ledger's bound: 10% of first tries (no floor), over the run.
            let bound = 0.1 * s.first_tries as f64;
            assert!((e.hedges_sent as f64) <= bound, "{p}: {}", e.hedges_sent);
            assert_eq!(e.ledger.unwrap().drawn.hedge, e.hedges_sent);
            assert!(e.hedges_refused > 0, "{p}");
            assert!(s.amplification.during_fault.unwrap() < 1.25, "{p}");
            assert!(s.amplification.after_fault.unwrap() < 1.15, "{p}");
        }
    }
}

#[test]
fn hedging_storm_ungoverned_vs_ledger() {
    storm(&[1]);
}

#[test]
#[ignore = "20 seeds: run in release (.ci/run sim_hedging)"]
fn hedging_storm_ungoverned_vs_ledger_over_20_seeds() {
    storm(&(1..=20).collect::<Vec<_>>());
}

// ---- Adaptive limits ----

/// The whole buckets of `[from, until)` s.
fn buckets(c: &Compiled, from: f64, until: f64) -> std::ops::Range<usize> {
    let w = c.scenario.bucket.as_secs_f64();
    (from / w).ceil() as usize..(until / w) as usize
}

/// Mean admitted concurrency over the whole buckets of `[from, until)` s, and Little's law there.
fn phase(c: &Compiled, o: &RunOutput, from: f64, until: f64) -> (f64, f64) {
    let r = buckets(c, from, until);
    let n = r.len() as f64;
    let admitted = o.limits[r].iter().map(|l| l.admitted).sum::<f64>() / n;
    let t = ((from + until) / 2.0 * 1e9) as u64;
    (admitted, c.concurrency_at(t).unwrap())
}

/// Successes per second over the whole buckets of `[from, until)` s.
fn goodput(c: &Compiled, o: &RunOutput, from: f64, until: f64) -> f64 {
    let r = buckets(c, from, until);
    let secs = r.len() as f64 * c.scenario.bucket.as_secs_f64();
    o.buckets[r].iter().map(|b| b.successes).sum::<u64>() as f64 / secs
}

/// The two faults: the capacity loss and the latency spike, in seconds.
const FAULTS: [(f64, f64); 2] = [(15.0, 25.0), (35.0, 45.0)];

const LIMITS: [&str; 3] = ["static 40", "AIMD", "gradient"];

/// On every seed: without a limit the server is buried during the faults (p99 at the timeout, a
/// third of its work wasted, goodput a fraction of capacity); each limit keeps goodput at
/// capacity through both faults. Admitted concurrency: all at Little's law in health; in the
/// faults the gradient and the static bulkhead 2-4 x over it, AIMD at its maximum.
fn limits(seeds: &[u64]) {
    let (c, all) = run("adaptive-limits", None, seeds);
    for (i, none_out) in of(&all, "no limit").iter().enumerate() {
        let none = &none_out.summary;
        let none_fault = FAULTS.map(|(a, b)| goodput(&c, none_out, a, b));
        println!(
            "seed {}: no limit: {:?}, goodput {:.0}/s ({:.0} and {:.0} in the faults), p99 {:.0} ms, wasted {:.0}%",
            seeds[i],
            none.verdict,
            none.goodput_per_s,
            none_fault[0],
            none_fault[1],
            none.latency_ms.p99,
            none.wasted_work_share * 100.0
        );
        assert!(none.latency_ms.p99 >= 990.0);
        assert!(none.wasted_work_share > 0.3);
        let mut ratios = Vec::new();
        for p in LIMITS {
            let o = of(&all, p)[i];
            let s = &o.summary;
            let phases = [(5.0, 15.0), (15.0, 25.0), (35.0, 45.0)].map(|(a, b)| phase(&c, o, a, b));
            let r = phases.map(|(admitted, little)| admitted / little);
            let fault = FAULTS.map(|(a, b)| goodput(&c, o, a, b));
            println!(
                "seed {}: {p}: {:?}, goodput {:.0}/s ({:.0} and {:.0} in the faults), p99 {:.0} ms, mean limit {:.1}; admitted / Little's law: health {:.1}/{:.1} = {:.2}, capacity loss {:.1}/{:.1} = {:.2}, latency spike {:.1}/{:.1} = {:.2}",
                seeds[i],
                s.verdict,
                s.goodput_per_s,
                fault[0],
                fault[1],
                s.latency_ms.p99,
                extra(s).limit_mean.unwrap(),
                phases[0].0,
                phases[0].1,
                r[0],
                phases[1].0,
                phases[1].1,
                r[1],
                phases[2].0,
                phases[2].1,
                r[2]
            );
            assert_eq!(s.verdict, Verdict::Recovered, "{p}");
            assert!(s.goodput_per_s > none.goodput_per_s, "{p}");
            for k in 0..2 {
                assert!(fault[k] > 1.5 * none_fault[k], "{p} in fault {k}");
            }
            assert!(s.wasted_work_share < 0.01, "{p}");
            ratios.push((p, r, s.latency_ms.p99));
        }
        let [
            (_, fixed, fixed_p99),
            (_, aimd, aimd_p99),
            (_, gradient, gradient_p99),
        ] = ratios[..]
        else {
            unreachable!()
        };
        // Health: nobody is limited (the offered load needs ~18 of the 22 Little allows).
        for r in [fixed[0], aimd[0], gradient[0]] {
            assert!((0.75..1.0).contains(&r), "{r}");
        }
        // The faults: no rule tracks Little's law. AIMD, moved only by drops, sees none (its
        // calls queue for less than the 1 s timeout and the queue never fills) and sits at its
        // maximum: more than 8 x Little's law in the capacity loss and 5 x in the spike. The
        // gradient (its long-term RTT follows the queueing latency up) stays near the static
        // bulkhead's 40: 1.5-6 x, under half of AIMD's.
        assert!(aimd[1] > 8.0 && aimd[2] > 5.0, "AIMD: {aimd:?}");
        for k in [1, 2] {
            let g = gradient[k];
            assert!(
                (1.5..6.0).contains(&g) && g < 0.5 * aimd[k],
                "gradient {k}: {g}"
            );
            assert!((1.5..4.0).contains(&fixed[k]), "static {k}: {}", fixed[k]);
        }
        assert!(gradient_p99 < aimd_p99 && fixed_p99 < aimd_p99);
    }
}

#[test]
fn adaptive_limits_against_littles_law() {
    limits(&[1]);
}

#[test]
#[ignore = "20 seeds: run in release (.ci/run sim_hedging)"]
fn adaptive_limits_against_littles_law_over_20_seeds() {
    limits(&(1..=20).collect::<Vec<_>>());
}

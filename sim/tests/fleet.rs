//! `scenarios/fleet-breaker.ron`: what its comments and `scenarios/README.md` claim, checked on
//! each of its seeds (1, 2, 3), window by window of its timeline: per-instance breakers open
//! only well into the storm, the fleet's breaker within a second or two; the store hanging in the
//! middle of the storm hands the load back (fail open) or refuses every call (fail closed); one
//! instance's own
//! network coming back opens the fleet's breaker for every instance (shared fate). The test also
//! prints the verdict table `scenarios/README.md` shows (`-- --nocapture`).

use sim::metrics::{Bucket, PolicySummary};
use sim::run::BatchOptions;

/// Offered first tries per second.
const OFFERED: f64 = 400.0;

struct Run {
    policy: String,
    summary: PolicySummary,
    buckets: Vec<Bucket>,
}

fn runs() -> Vec<Run> {
    let c = sim::shipped("fleet-breaker").unwrap().unwrap();
    let seeds: Vec<u64> = (0..u64::from(c.scenario.seeds))
        .map(|k| c.scenario.seed + k)
        .collect();
    let out = sim::run(
        &c,
        &seeds,
        BatchOptions {
            jobs: 0,
            progress: false,
        },
    )
    .unwrap();
    out.results
        .into_iter()
        .map(|r| Run {
            policy: c.scenario.policies[r.policy].name.clone(),
            summary: r.output.summary,
            buckets: r.output.buckets,
        })
        .collect()
}

/// The mean per second of `field` over the 1 s buckets in `[from, until)` s.
fn rate(r: &Run, from: usize, until: usize, field: fn(&Bucket) -> u64) -> f64 {
    let w = &r.buckets[from..until];
    w.iter().map(field).sum::<u64>() as f64 / w.len() as f64
}

fn server(r: &Run, from: usize, until: usize) -> f64 {
    rate(r, from, until, |b| b.server_arrivals)
}

fn refused(r: &Run, from: usize, until: usize) -> f64 {
    rate(r, from, until, |b| b.local_rejections)
}

fn of<'a>(all: &'a [Run], policy: &str) -> Vec<&'a Run> {
    let v: Vec<&Run> = all.iter().filter(|r| r.policy == policy).collect();
    assert_eq!(v.len(), 3, "{policy}");
    v
}

/// The storm: 80% of the API's capacity lost, 60-110 s (its first 10 s: before an instance's
/// own 64-call window can be half failures at 2 calls a second); the store hangs 85-100 s (the
/// first second after each edge left out: decisions in flight straddle it; its first 5 s: before
/// the instances' own breakers trip); client 7's network is down 160-250 s, and the fleet hears of
/// it in the 10 s after.
const STORM: (usize, usize) = (60, 85);
const EARLY_STORM: (usize, usize) = (60, 70);
const STORE_DOWN: (usize, usize) = (86, 100);
const EARLY_STORE_DOWN: (usize, usize) = (86, 91);
const SHARED_FATE: (usize, usize) = (250, 260);

#[test]
fn fleet_breaker_scenario_verdicts() {
    let all = runs();
    let mut table = String::from(
        "| policy | API load, storm's first 10 s (60-70 s) | refused locally then | API load in the storm (60-85 s) | refused then | API load, store's first 5 s hung (86-91 s) | refused then | API load while the store hangs (86-100 s) | refused then | refused after client 7's network returns (250-260 s) | fleet breaker first opened |\n|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n",
    );
    for name in [
        "per-instance breaker",
        "fleet, exact, fail open",
        "fleet, exact, fail closed",
        "fleet, cached 1s",
        "fleet, cached 50ms",
    ] {
        let runs = of(&all, name);
        let mean = |f: &dyn Fn(&Run) -> f64| runs.iter().map(|r| f(r)).sum::<f64>() / 3.0;
        let first_open = runs
            .iter()
            .map(|r| r.summary.fleet.as_ref().and_then(|f| f.first_fleet_open_s))
            .collect::<Option<Vec<f64>>>()
            .map_or("never".to_string(), |v| {
                format!("{:.1} s", v.iter().sum::<f64>() / 3.0)
            });
        table.push_str(&format!(
            "| {name} | {:.0}/s | {:.0}/s | {:.0}/s | {:.0}/s | {:.0}/s | {:.0}/s | {:.0}/s | {:.0}/s | {:.0}/s | {first_open} |\n",
            mean(&|r| server(r, EARLY_STORM.0, EARLY_STORM.1)),
            mean(&|r| refused(r, EARLY_STORM.0, EARLY_STORM.1)),
            mean(&|r| server(r, STORM.0, STORM.1)),
            mean(&|r| refused(r, STORM.0, STORM.1)),
            mean(&|r| server(r, EARLY_STORE_DOWN.0, EARLY_STORE_DOWN.1)),
            mean(&|r| refused(r, EARLY_STORE_DOWN.0, EARLY_STORE_DOWN.1)),
            mean(&|r| server(r, STORE_DOWN.0, STORE_DOWN.1)),
            mean(&|r| refused(r, STORE_DOWN.0, STORE_DOWN.1)),
            mean(&|r| refused(r, SHARED_FATE.0, SHARED_FATE.1)),
        ));
    }
    println!("{table}");

    for r in of(&all, "per-instance breaker") {
        // 20 calls in 10 s per instance, against a window of its last 64 that must be half
        // failures: not one refused in the storm's first 10 s, while the API takes the load and
        // its retries (about 3x).
        assert_eq!(
            refused(r, EARLY_STORM.0, EARLY_STORM.1),
            0.0,
            "per-instance, early storm"
        );
        assert!(
            server(r, EARLY_STORM.0, EARLY_STORM.1) > 2.5 * OFFERED,
            "per-instance drowns the API"
        );
        // Then the instances trip, one by one, each on its own calls.
        assert!(
            refused(r, 75, STORM.1) > 0.5 * OFFERED,
            "per-instance trips late"
        );
        // One instance's network is its own affair: at most its own calls (2/s) are refused.
        assert!(refused(r, SHARED_FATE.0, SHARED_FATE.1) < 0.02 * OFFERED);
    }
    for name in ["fleet, exact, fail open", "fleet, exact, fail closed"] {
        for r in of(&all, name) {
            let f = r.summary.fleet.as_ref().unwrap();
            // One breaker for the fleet sees 400 calls a second: its 64-call window fills with the
            // storm's failures within 2 s, and the API gets less than the offered load.
            let opened = f.first_fleet_open_s.unwrap();
            assert!((60.0..62.0).contains(&opened), "{name}: opened at {opened}");
            assert!(server(r, STORM.0, STORM.1) < 0.75 * OFFERED, "{name}");
            assert!(refused(r, STORM.0, STORM.1) > 0.5 * OFFERED, "{name}");
            // Every decision waited a round trip, never more than `wait` (5 ms).
            assert!(f.longest_wait_ms <= 5.0 && f.mean_wait_ms < 2.0, "{name}");
            assert!(f.by_store > 100_000, "{name}");
        }
    }
    for r in of(&all, "fleet, exact, fail open") {
        // The store hangs: each instance decides alone, on its own breaker, which saw few of the
        // storm's failures (the fleet's refused most calls): the API takes the whole load again
        // until they trip.
        assert!(
            server(r, EARLY_STORE_DOWN.0, EARLY_STORE_DOWN.1) > 2.5 * OFFERED,
            "fail open"
        );
        assert!(
            refused(r, EARLY_STORE_DOWN.0, EARLY_STORE_DOWN.1) < 0.01 * OFFERED,
            "fail open"
        );
        assert!(
            server(r, STORE_DOWN.0, STORE_DOWN.1) > 2.0 * OFFERED,
            "fail open"
        );
        // Client 7 replays the failures its own breaker let through while its network was down
        // (at least half of a 64-call window) into the fleet's breaker: it opens for all 200
        // instances while the API is healthy.
        assert!(
            refused(r, SHARED_FATE.0, SHARED_FATE.1) > 0.25 * OFFERED,
            "shared fate"
        );
        let replayed = r.summary.fleet.as_ref().unwrap().reconciled;
        assert!(replayed >= 32, "replayed {replayed}");
    }
    for r in of(&all, "fleet, exact, fail closed") {
        // The store hangs: nothing reaches the API, every call is refused.
        assert_eq!(server(r, STORE_DOWN.0, STORE_DOWN.1), 0.0, "fail closed");
        assert!(
            refused(r, STORE_DOWN.0, STORE_DOWN.1) > 0.95 * OFFERED,
            "fail closed"
        );
        // Client 7 refused its own calls while its network was down: nothing to replay.
        assert!(refused(r, SHARED_FATE.0, SHARED_FATE.1) < 0.01 * OFFERED);
    }
    for r in of(&all, "fleet, cached 1s") {
        // No round trip on a call's path (but probes), and the breaker opens a refresh later.
        let f = r.summary.fleet.as_ref().unwrap();
        assert!(f.by_cache > 10 * f.by_store, "cached 1s");
        let opened = f.first_fleet_open_s.unwrap();
        assert!(
            (60.0..65.0).contains(&opened),
            "cached 1s: opened at {opened}"
        );
        // In the storm before the store hangs, the instances refuse on their views: the API gets
        // a third of what per-instance breakers let through.
        assert!(
            server(r, EARLY_STORM.0, EARLY_STORM.1) < 1.5 * OFFERED,
            "cached 1s sheds load"
        );
        assert!(
            refused(r, EARLY_STORM.0, EARLY_STORM.1) > 0.4 * OFFERED,
            "cached 1s sheds load"
        );
        assert!(
            refused(r, SHARED_FATE.0, SHARED_FATE.1) > 0.25 * OFFERED,
            "shared fate"
        );
    }
    for r in of(&all, "fleet, cached 50ms") {
        // An instance calling every 0.5 s never has a view younger than 2 x 50 ms + 5 ms, but a
        // view that aged because no call came is still the fleet's last word (as a `Reliable`
        // decides): decisions are on the view, and the fleet's breaker sheds the storm.
        let f = r.summary.fleet.as_ref().unwrap();
        assert!(f.by_cache > 10 * f.by_local, "cached 50ms: {f:?}");
        assert!(
            server(r, EARLY_STORM.0, EARLY_STORM.1) < OFFERED,
            "cached 50ms"
        );
        assert!(
            refused(r, EARLY_STORM.0, EARLY_STORM.1) > 0.5 * OFFERED,
            "cached 50ms"
        );
        assert!(
            refused(r, SHARED_FATE.0, SHARED_FATE.1) > 0.25 * OFFERED,
            "shared fate"
        );
    }
}

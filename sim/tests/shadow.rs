//! A breaker in shadow mode in a scenario (`scenarios/shadow-rollout.ron`): its policy sends as
//! without a breaker, and its would-be decisions are what the same breaker live does on the same
//! run, up to the point where the live one starts changing the traffic (its first rejection).

mod common;

use common::{ONE_THREAD, compile};
use sim::metrics::PolicySummary;
use sim::run::{TraceRow, trace};

const SCENARIO: &str = include_str!("../../scenarios/shadow-rollout.ron");
const NONE: usize = 0;
const SHADOW: usize = 1;
const LIVE: usize = 2;

fn summaries(c: &sim::compile::Compiled, seed: u64) -> Vec<PolicySummary> {
    let runs = sim::run(c, &[seed], ONE_THREAD).unwrap();
    runs.results.into_iter().map(|r| r.output.summary).collect()
}

/// The first request that saw the breaker open, and the one before it.
fn first_open(rows: &[TraceRow]) -> (&TraceRow, &TraceRow) {
    let i = rows
        .iter()
        .position(|r| r.breakers_before[0] == "open")
        .expect("the breaker opens");
    (&rows[i - 1], &rows[i])
}

#[test]
fn the_policies_are_the_ones_the_scenario_describes() {
    let c = compile(SCENARIO);
    let names: Vec<&str> = c
        .scenario
        .policies
        .iter()
        .map(|p| p.name.as_str())
        .collect();
    assert_eq!(names, ["no breaker", "breaker (shadow)", "breaker (live)"]);
    // The two breakers differ in `shadow` alone.
    let config = |p: usize| match &c.scenario.policies[p].stack {
        sim::scenario::Layer::Breaker { config, .. } => *config,
        other => panic!("not a breaker: {other:?}"),
    };
    let (shadow, live) = (config(SHADOW), config(LIVE));
    assert!(shadow.shadow && !live.shadow);
    assert_eq!(
        reliable_core::breaker::BreakerConfig {
            shadow: false,
            ..shadow
        },
        live
    );
}

/// A breaker in shadow mode admits every call: every figure of its policy is the no-breaker
/// policy's, and its would-be decisions are reported apart (`shadow`), not as local rejections
/// or breaker transitions.
#[test]
fn a_shadow_breaker_sends_as_no_breaker() {
    let c = compile(SCENARIO);
    for seed in 1..=5 {
        let s = summaries(&c, seed);
        let mut shadow = s[SHADOW].clone();
        let would = shadow.shadow.take().expect("a shadow summary");
        assert!(would.would_reject > 0 && would.opens > 0, "{would:?}");
        assert!(would.transitions >= would.opens, "{would:?}");
        assert_eq!(shadow.local_rejections, 0);
        assert_eq!(shadow.breaker_transitions, 0);
        shadow.name = s[NONE].name.clone();
        assert_eq!(shadow, s[NONE], "seed {seed}");
        assert!(s[NONE].shadow.is_none() && s[LIVE].shadow.is_none());
        // The live breaker changes the traffic.
        assert!(s[LIVE].local_rejections > 0 && s[LIVE].breaker_transitions > 0);
        assert!(s[LIVE].server_arrivals < s[NONE].server_arrivals);
    }
}

/// Up to the live breaker's first rejection the two runs see the same calls and answers, so the
/// shadow breaker's would-be decisions are the live one's: the same state before every request,
/// the first rejection of the same request at the same instant, and the first opening between
/// the same two requests.
#[test]
fn a_shadow_breaker_decides_as_the_live_one_until_the_live_one_rejects() {
    let c = compile(SCENARIO);
    for seed in 1..=5 {
        let would = summaries(&c, seed)[SHADOW].shadow.clone().unwrap();
        let (live, shadow) = (
            trace(&c, LIVE, seed).unwrap(),
            trace(&c, SHADOW, seed).unwrap(),
        );
        let rejected = live
            .iter()
            .find(|r| r.served_by == "breaker")
            .expect("the live breaker rejects a call");
        // Its first rejection is the shadow breaker's first would-be rejection.
        assert_eq!(
            Some(rejected.start_ns as f64 / 1e9),
            would.first_reject_s,
            "seed {seed}"
        );
        let before = |rows: &[TraceRow]| -> Vec<TraceRow> {
            rows.iter()
                .take_while(|r| r.request <= rejected.request)
                .cloned()
                .collect()
        };
        let (live_before, shadow_before) = (before(&live), before(&shadow));
        assert_eq!(live_before.len(), rejected.request as usize);
        for (l, s) in live_before.iter().zip(&shadow_before) {
            assert_eq!(
                (l.request, l.start_ns, &l.breakers_before),
                (s.request, s.start_ns, &s.breakers_before),
                "seed {seed}"
            );
            // A request over before the live breaker's first rejection went the same way.
            if l.start_ns + l.latency_ns < rejected.start_ns {
                assert_eq!(l, s, "seed {seed}");
            }
        }
        // Both open between the same two requests, and the shadow one's would-be opening is
        // there too.
        let (l, s) = (first_open(&live), first_open(&shadow));
        assert_eq!((l.0.request, l.1.request), (s.0.request, s.1.request));
        let opened = (would.first_open_s.unwrap() * 1e9).round() as u64;
        assert!(
            l.0.start_ns <= opened && opened <= l.1.start_ns,
            "seed {seed}: would-be opening at {opened} ns, live between {} and {} ns",
            l.0.start_ns,
            l.1.start_ns
        );
    }
}

//! Chaos: the sequences of `chaos/` (scripts with injected faults) on the faces with a chaos
//! layer, their negative controls, and the cross-language fixture of chaos decisions
//! (`chaos-decisions.json`) that the Python and TypeScript packages are held to.
//!
//! `BLESS=1 cargo test -p conformance --test chaos` rewrites the expected traces (from the
//! engine face, the reference) and the fixture (from `reliable::chaos::ChaosSwitch`, the Rust
//! layers' switch).

use conformance::{Sequence, chaos_expected, chaos_sequences, first_difference, root};
use reliable::chaos::ChaosSwitch;
use reliable_core::Duration;
use reliable_core::chaos::{
    BehaviorConfig, ChaosConfig, Delay, FaultConfig, Injected, LatencyConfig, OutcomeConfig,
    Strategy,
};

fn bless() -> bool {
    std::env::var_os("BLESS").is_some()
}

#[test]
fn chaos_sequences_run_alike_on_the_engine_and_the_tower_layers() {
    let sequences = chaos_sequences().unwrap();
    assert!(sequences.len() >= 4, "{} chaos sequences", sequences.len());
    let mut failures = Vec::new();
    for s in &sequences {
        let got = conformance::engine::run(s).unwrap();
        let path = root().join("chaos").join(format!("{}.jsonl", s.name));
        if bless() {
            std::fs::write(&path, &got).unwrap();
        }
        let want = chaos_expected(&s.name).unwrap();
        assert!(
            want.contains("\"ev\":\"chaos\""),
            "{}: nothing injected",
            s.name
        );
        if got != want {
            failures.push(format!(
                "engine {}: {}",
                s.name,
                first_difference(&want, &got).unwrap_or_default()
            ));
        }
        if let Some(why) = conformance::faces::tower_chaos_skips(s) {
            println!("tower: {} not run ({why})", s.name);
            continue;
        }
        match conformance::faces::tower_chaos(s) {
            Ok(got) if got == want => {}
            Ok(got) => failures.push(format!(
                "tower {}: {}",
                s.name,
                first_difference(&want, &got).unwrap_or_default()
            )),
            Err(e) => failures.push(format!("tower {}: {e}", s.name)),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Every chaos sequence's trace depends on its chaos: run without it, or with another seed
/// (where a rate leaves the choice to the seed), it must not pass on either face.
#[test]
fn negative_controls_without_chaos_or_with_another_seed_fail() {
    let mut seeded = 0;
    for s in chaos_sequences().unwrap() {
        let want = chaos_expected(&s.name).unwrap();
        let mut plain: Sequence = s.clone();
        plain.policy.chaos = None;
        for c in &mut plain.calls {
            c.chaos = None;
        }
        // Without chaos the script may run out: an error is a difference too.
        let got = conformance::engine::run(&plain);
        assert_ne!(
            got.as_ref().ok(),
            Some(&want),
            "{}: passes without chaos",
            s.name
        );
        let mut other = s.clone();
        let block = other.policy.chaos.as_mut().unwrap();
        let mut partial = false;
        for b in [block.fault.as_mut(), block.outcome.as_mut()]
            .into_iter()
            .flatten()
        {
            partial |= b.rate > 0.0 && b.rate < 1.0;
            b.seed += 1;
        }
        if partial {
            seeded += 1;
            let got = conformance::engine::run(&other);
            assert_ne!(
                got.as_ref().ok(),
                Some(&want),
                "{}: passes with another seed",
                s.name
            );
            if conformance::faces::tower_chaos_skips(&other).is_none() {
                let got = conformance::faces::tower_chaos(&other);
                assert_ne!(
                    got.as_ref().ok(),
                    Some(&want),
                    "{}: tower passes with another seed",
                    s.name
                );
            }
        }
    }
    assert!(seeded >= 1, "no sequence leaves its hits to the seed");
}

/// The configs of the cross-language fixture: every strategy at a rate between 0 and 1, with
/// the seed given (one above 2^32, so that a port must carry all 64 bits).
fn fixture_config(seed: u64) -> ChaosConfig {
    ChaosConfig {
        fault: Some(FaultConfig {
            rate: 0.3,
            enabled: true,
            seed,
            answer: Injected::Status {
                status: 503,
                retry_after: Some(Duration::from_millis(1500)),
                should_retry: None,
            },
        }),
        latency: Some(LatencyConfig {
            rate: 0.5,
            enabled: true,
            seed: seed.wrapping_add(1),
            delay: Delay::Uniform {
                min: Duration::from_millis(10),
                max: Duration::from_millis(20),
            },
        }),
        outcome: Some(OutcomeConfig {
            rate: 0.25,
            enabled: true,
            seed: seed.wrapping_add(2),
            answer: Injected::Status {
                status: 200,
                retry_after: None,
                should_retry: None,
            },
        }),
        behavior: Some(BehaviorConfig {
            rate: 0.4,
            enabled: true,
            seed: seed.wrapping_add(3),
        }),
    }
}

const SEEDS: [u64; 3] = [7, 42, (1 << 40) + 3];
const ATTEMPTS: u64 = 64;

/// The fixture: for each seed, the config (in the neutral shape each language's test maps to
/// its own API) and what the Rust switch decides for attempts 0 to 63.
fn fixture() -> String {
    let mut out = String::from(
        "{\"format\":1,\"about\":\"Chaos decisions of reliable::chaos::ChaosSwitch for attempts 0..64, written by `BLESS=1 cargo test -p conformance --test chaos`; the Python and TypeScript packages must decide the same (python/tests/test_chaos.py, js/test/chaos.test.mjs).\",\"cases\":[\n",
    );
    for (i, &seed) in SEEDS.iter().enumerate() {
        let switch = ChaosSwitch::new("fixture", fixture_config(seed)).unwrap();
        let mut decisions = Vec::new();
        for _ in 0..ATTEMPTS {
            let d = switch.decide().unwrap_or_default();
            let delay = d
                .latency
                .map_or("null".to_string(), |l| l.as_nanos().to_string());
            let answer = match d.answer {
                Some((Strategy::Fault, _)) => "\"fault\"",
                Some(_) => "\"outcome\"",
                None => "null",
            };
            decisions.push(format!("[{},{delay},{answer}]", d.behavior));
        }
        out += &format!(
            "{{\"seed\":{seed},\"config\":{{\"fault\":{{\"rate\":0.3,\"seed\":{seed},\"status\":503,\"retry_after_ms\":1500}},\"latency\":{{\"rate\":0.5,\"seed\":{},\"min_ms\":10,\"max_ms\":20}},\"outcome\":{{\"rate\":0.25,\"seed\":{},\"status\":200}},\"behavior\":{{\"rate\":0.4,\"seed\":{}}}}},\n \"decisions\":[{}]}}{}\n",
            seed + 1,
            seed + 2,
            seed + 3,
            decisions.join(","),
            if i + 1 < SEEDS.len() { "," } else { "" }
        );
    }
    out + "]}\n"
}

#[test]
fn the_fixture_of_decisions_is_the_rust_switchs() {
    let path = root().join("chaos-decisions.json");
    let got = fixture();
    if bless() {
        std::fs::write(&path, &got).unwrap();
    }
    let want = std::fs::read_to_string(&path).unwrap();
    assert_eq!(
        want, got,
        "chaos-decisions.json is not what the switch decides: BLESS=1"
    );
    // It is JSON, and another seed decides otherwise (so a port that ignored the seed fails).
    let v: serde_json::Value = serde_json::from_str(&want).unwrap();
    let cases = v["cases"].as_array().unwrap();
    assert_eq!(cases.len(), SEEDS.len());
    let first = &cases[0]["decisions"];
    assert!(cases[1..].iter().all(|c| &c["decisions"] != first));
    let hits = |k: usize| {
        first
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| !d[k].is_null() && d[k] != false)
            .count()
    };
    // Every strategy hits some attempts and misses others.
    for k in 0..3 {
        assert!(
            (1..ATTEMPTS as usize).contains(&hits(k)),
            "column {k}: {}",
            hits(k)
        );
    }
}

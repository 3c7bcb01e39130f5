//! The policy-file loader runs every nesting: each sequence's policy (the hand-written ones and
//! every generated nesting), written as a policy file in JSON (the block as the engine face
//! writes it in the policy format, `conformance::engine::stack`), is loaded by
//! `reliable::policy` and its instance writes the blessed trace byte for byte: the `Reliable` of
//! `Route::builder` driven by `Reliable::call`, that of `Route::blocking_builder` by
//! `Reliable::call_blocking`, and the tower `ReliableLayer` of `Route::layer`, each by the
//! runner of the face of the same name (`conformance::faces`), where that face runs the sequence.
//! Nothing is set on the instance but what every runner sets: the clock, the seed, the trace as
//! its observer, the throttle's draws.

use conformance::faces::{self, Face};
use conformance::{Sequence, Trace};
use reliable::policy::{Plan, Route};
use reliable::tower::HttpPolicy;

/// The sequence's policy as a policy file, loaded by `reliable::policy`: its one route.
fn route(s: &Sequence) -> Result<Route, String> {
    let entry = reliable_core::policy::Policy {
        name: s.name.clone(),
        stack: conformance::engine::stack(s)?,
    };
    let text = serde_json::to_string_pretty(&entry).map_err(|e| e.to_string())?;
    let plan = Plan::from_json(&text, &format!("{}.json", s.name)).map_err(|e| e.to_string())?;
    plan.route().cloned().map_err(|e| e.to_string())
}

/// The loaded instance of `s`, run by `face`'s runner: its trace.
fn run(face: &str, s: &Sequence) -> Result<String, String> {
    let route = route(s)?;
    let add = |b: reliable::Builder, trace: &Trace, draws: &conformance::Draws| {
        faces::instrumented(b, s, trace, draws)
    };
    match face {
        "reliable-call" => faces::reliable_call_with(s, &|trace, draws| {
            Ok(add(
                route.builder().map_err(|e| e.to_string())?,
                trace,
                draws,
            ))
        }),
        "reliable-call-blocking" => faces::reliable_call_blocking_with(s, &|trace, draws| {
            Ok(add(
                route.blocking_builder().map_err(|e| e.to_string())?,
                trace,
                draws,
            ))
        }),
        _ => faces::tower_reliable_layer_with(s, &|trace, draws| {
            let layer = route
                .layer(HttpPolicy::new())
                .map_err(|e| e.to_string())?
                .seed(1)
                .observer(trace.observer());
            Ok(match s.policy.throttle() {
                Some(_) => {
                    let draws = draws.clone();
                    layer.throttle_draws(move || draws.next())
                }
                None => layer,
            })
        }),
    }
}

/// Runs every sequence of `what` through the loader for `face`, skipping what the face itself
/// cannot express; each trace must be `expected`'s. Returns how many ran.
fn check(
    face: Face,
    what: &str,
    sequences: &[Sequence],
    expected: impl Fn(&str) -> Result<String, String>,
) -> usize {
    let (mut ran, mut skipped, mut failures) = (0, 0, Vec::new());
    for s in sequences {
        if (face.skips)(s).is_some() {
            skipped += 1;
            continue;
        }
        let want = expected(&s.name).unwrap();
        match run(face.name, s) {
            Ok(got) if got == want => ran += 1,
            Ok(got) => failures.push(format!(
                "{}: {}",
                s.name,
                conformance::first_difference(&want, &got).unwrap_or_default()
            )),
            Err(e) => failures.push(format!("{}: {e}", s.name)),
        }
    }
    println!(
        "loaded by reliable::policy, face {}: {ran} of {} {what} match; {skipped} the face does not run",
        face.name,
        sequences.len()
    );
    assert!(
        failures.is_empty(),
        "the loaded policy of {} of {} {what} diverges in face {}:\n{}",
        failures.len(),
        sequences.len(),
        face.name,
        failures.join("\n")
    );
    ran
}

fn generated(face: Face) -> usize {
    let sequences = conformance::generate::sequences().unwrap();
    let dir = conformance::root().join("generated");
    check(face, "generated nestings", &sequences, |name| {
        let p = dir.join(format!("{name}.jsonl"));
        std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))
    })
}

fn hand_written(face: Face) -> usize {
    let sequences = conformance::sequences().unwrap();
    check(face, "sequences", &sequences, conformance::expected)
}

fn face(name: &str) -> Face {
    *faces::ALL.iter().find(|f| f.name == name).unwrap()
}

#[test]
fn reliable_call_runs_every_generated_nesting_loaded_from_its_policy() {
    // Every one: none is uninterruptible.
    assert_eq!(generated(face("reliable-call")), 57);
}

#[test]
fn reliable_call_runs_every_hand_written_sequence_loaded_from_its_policy() {
    // As many as when this was written (all but the one whose late answer an async attempt
    // cannot take): a sequence the loader stops taking fails here.
    assert!(hand_written(face("reliable-call")) >= 64);
}

#[test]
fn call_blocking_runs_the_nestings_loaded_from_their_policy() {
    assert_eq!(generated(face("reliable-call-blocking")), 57);
    // All but the hedged ones (a blocking call never hedges: `blocking_builder` refuses them).
    assert!(hand_written(face("reliable-call-blocking")) >= 54);
}

#[test]
fn reliable_layer_runs_the_nestings_loaded_from_their_policy() {
    // The loader's ReliableLayer follows the route's nesting, as the face's own does: only what
    // an async attempt cannot do (a late answer) is left out.
    let tower = face("tower-reliable-layer");
    assert_eq!(generated(tower), 57);
    assert!(hand_written(tower) >= 64);
}

//! Every face, every sequence: the trace must equal the expected one, byte for byte.

use conformance::faces::{ALL, Face, REFERENCE};

/// The breaker's semantics the engine fixed: an attempt whose answer opens the breaker ends the
/// call at once (refused by the breaker, that answer the last), unless the policy waits on
/// refusals and the open time fits the deadline.
const OPENS_ENDS_CALL: &[&str] = &[
    "breaker-opens-mid-call",
    "breaker-opens-on-answer-ends-call",
    "breaker-opens-waited-within-deadline",
    "breaker-probe-fails",
    "overload-opens-breaker",
    "refusal-wait-past-deadline",
    "refusal-waited-out",
    "timeouts-open-breaker",
];

/// Sequences whose traces follow semantics the engine fixed that `face`, still deciding with its
/// own loop until it drives the engine, does not follow yet: each must still differ (when a face
/// is converted, its entry goes). The engine face has none.
fn pending(face: &str, sequence: &str) -> bool {
    !conformance::faces::follows_engine(face) && OPENS_ENDS_CALL.contains(&sequence)
}

fn check(face: Face) {
    let sequences = conformance::sequences().unwrap();
    assert!(sequences.len() >= 30, "only {} sequences", sequences.len());
    let mut failures = Vec::new();
    let mut skipped = Vec::new();
    let mut waiting = Vec::new();
    for s in &sequences {
        if let Some(why) = (face.skips)(s) {
            skipped.push(format!("{} ({why})", s.name));
            continue;
        }
        let want = conformance::expected(&s.name).unwrap();
        let pending = pending(face.name, &s.name);
        match (face.run)(s) {
            Ok(got) if got == want && pending => failures.push(format!(
                "{}: listed as pending the engine, but the face now follows it: unlist it",
                s.name
            )),
            Ok(got) if got == want => {}
            Ok(_) if pending => waiting.push(s.name.clone()),
            Ok(got) => failures.push(format!(
                "{}: {}",
                s.name,
                conformance::first_difference(&want, &got).unwrap_or_default()
            )),
            Err(e) => failures.push(format!("{}: {e}", s.name)),
        }
    }
    eprintln!(
        "face {}: {} of {} sequences run, {} not expressible",
        face.name,
        sequences.len() - skipped.len(),
        sequences.len(),
        skipped.len()
    );
    if !skipped.is_empty() {
        eprintln!(
            "face {}: not expressible, not run: {}",
            face.name,
            skipped.join(", ")
        );
    }
    if !waiting.is_empty() {
        eprintln!(
            "face {}: {} decided by the face's own loop, not yet the engine's: {}",
            face.name,
            waiting.len(),
            waiting.join(", ")
        );
    }
    assert!(
        failures.is_empty(),
        "face {} diverges on {} of {} sequences:\n{}",
        face.name,
        failures.len(),
        sequences.len(),
        failures.join("\n")
    );
}

#[test]
fn reliable_call() {
    check(ALL[0]);
}

#[test]
fn reliable_call_blocking() {
    check(ALL[1]);
}

#[test]
fn tower_reliable_layer() {
    check(ALL[2]);
}

#[test]
fn simulator() {
    check(ALL[3]);
}

#[test]
fn engine() {
    assert_eq!(ALL[4].name, REFERENCE.name);
    check(ALL[4]);
}

/// `reliable_embassy::Reliable::call` on embassy-time's mock driver (its clock is global: this is
/// the only test in this binary that reads it).
#[test]
fn embassy() {
    check(ALL[5]);
}

//! Every face, every sequence: the trace must equal the expected one, byte for byte.

use conformance::faces::{ALL, Face};

fn check(face: Face) {
    let sequences = conformance::sequences().unwrap();
    assert!(sequences.len() >= 30, "only {} sequences", sequences.len());
    let mut failures = Vec::new();
    let mut skipped = Vec::new();
    for s in &sequences {
        if let Some(why) = (face.skips)(s) {
            skipped.push(format!("{} ({why})", s.name));
            continue;
        }
        let want = conformance::expected(&s.name).unwrap();
        match (face.run)(s) {
            Ok(got) if got == want => {}
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
    check(ALL[4]);
}

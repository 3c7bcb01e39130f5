//! The generated sequences (every nesting of the policy format's layers, pairwise): the files
//! are the generator's, and every face that runs them writes the reference face's trace.

use conformance::faces::{ALL, REFERENCE};

fn dir() -> std::path::PathBuf {
    conformance::root().join("generated")
}

#[test]
fn the_files_are_the_generators() {
    let nestings = conformance::generate::nestings();
    let mut names = Vec::new();
    for o in &nestings {
        let name = conformance::generate::name(o);
        let path = dir().join(format!("{name}.json"));
        let got = std::fs::read_to_string(&path).unwrap_or_default();
        assert_eq!(
            got,
            conformance::generate::text(o),
            "{}: out of step with the generator: run `cargo run -p conformance -- generate`",
            path.display()
        );
        names.push(format!("{name}.json"));
    }
    let mut on_disk: Vec<String> = std::fs::read_dir(dir())
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".json"))
        .collect();
    on_disk.sort();
    names.sort();
    assert_eq!(
        on_disk, names,
        "generated/ holds a sequence the generator does not make"
    );
}

/// Runs `face` on every generated sequence; each trace must be the blessed one, except where
/// the face is known not to follow the engine yet (see `conformance::faces::pending_generated`).
/// A sequence the face lists as one it cannot express is run all the same: if the face writes
/// its trace, the listing is out of date and fails until it goes.
fn check(face: conformance::faces::Face) -> usize {
    let sequences = conformance::generate::sequences().unwrap();
    let mut failures = Vec::new();
    let (mut ran, mut skipped, mut waiting) = (0, Vec::new(), Vec::new());
    for s in &sequences {
        let path = dir().join(format!("{}.jsonl", s.name));
        let want = std::fs::read_to_string(&path).unwrap_or_default();
        if let Some(why) = (face.skips)(s) {
            if (face.run)(s).is_ok_and(|got| got == want) {
                failures.push(format!(
                    "{}: listed as not expressible ({why}), but the face writes its trace: unlist it",
                    s.name
                ));
            }
            skipped.push(format!("{} ({why})", s.name));
            continue;
        }
        ran += 1;
        let pending = conformance::faces::pending_generated(face.name, &want);
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
        "face {}: {ran} of {} generated sequences run; not expressible: {}; pending the engine's \
         semantics: {}",
        face.name,
        sequences.len(),
        skipped.len(),
        waiting.len()
    );
    for s in skipped.iter().chain(&waiting) {
        eprintln!("  {s}");
    }
    assert!(
        failures.is_empty(),
        "face {} diverges on {} generated sequences:\n{}",
        face.name,
        failures.len(),
        failures.join("\n")
    );
    ran
}

#[test]
fn engine() {
    assert_eq!(ALL[4].name, REFERENCE.name);
    assert_eq!(check(ALL[4]), 57);
}

#[test]
fn simulator() {
    assert_eq!(check(ALL[3]), 57);
}

#[test]
fn reliable_call() {
    check(ALL[0]);
}

#[test]
fn reliable_call_blocking() {
    check(ALL[1]);
}

/// Every nesting: the `ReliableLayer` is built from the builder carrying the sequence's nesting,
/// as `reliable::policy`'s `Route::layer` builds it.
#[test]
fn tower_reliable_layer() {
    assert_eq!(check(ALL[2]), 57);
}

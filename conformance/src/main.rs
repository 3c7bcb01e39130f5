//! `cargo run -p conformance -- bless`: writes every sequence's expected trace from the reference
//! face (the core's call engine, driven directly), the generated ones' too.
//! `cargo run -p conformance -- generate`: writes the generated sequences (`generated/`). `cargo run -p conformance -- run FACE`: prints each trace of FACE.
//! `cargo run -p conformance -- scenario NAME`: prints the simulator scenario sequence NAME
//! becomes (what the simulator face runs). `cargo run -p conformance -- table`: prints the
//! README's table of sequences and the Rust faces that run them.

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (bless, face) = match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["bless"] => (true, conformance::faces::REFERENCE),
        ["generate"] => return generate(),
        ["table"] => {
            return match conformance::sequences() {
                Ok(s) => {
                    print!("{}", conformance::table(&s));
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("{e}");
                    ExitCode::FAILURE
                }
            };
        }
        ["scenario", name] => {
            let path = conformance::root()
                .join("sequences")
                .join(format!("{name}.json"));
            return match conformance::load(&path).and_then(|s| conformance::simulator::scenario(&s))
            {
                Ok((text, _)) => {
                    print!("{text}");
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("{e}");
                    ExitCode::FAILURE
                }
            };
        }
        ["run", name] => match conformance::faces::ALL.iter().find(|f| f.name == name) {
            Some(f) => (false, *f),
            None => {
                eprintln!("no face named {name:?}");
                return ExitCode::FAILURE;
            }
        },
        _ => {
            eprintln!(
                "usage: conformance bless | conformance generate | conformance run FACE | conformance scenario NAME | \
                 conformance table"
            );
            return ExitCode::FAILURE;
        }
    };
    let sequences = match conformance::sequences() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let generated = match conformance::generate::sequences() {
        Ok(g) => g,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let generated_from = sequences.len();
    for (k, s) in sequences.iter().chain(&generated).enumerate() {
        let dir = if k < generated_from {
            "traces"
        } else {
            "generated"
        };
        if let Some(why) = (face.skips)(s) {
            eprintln!("{}: not run by {} ({why})", s.name, face.name);
            continue;
        }
        match (face.run)(s) {
            Ok(trace) if bless => {
                let p = conformance::root()
                    .join(dir)
                    .join(format!("{}.jsonl", s.name));
                if let Err(e) = std::fs::write(&p, trace) {
                    eprintln!("{}: {e}", p.display());
                    return ExitCode::FAILURE;
                }
            }
            Ok(trace) => print!("# {}\n{trace}", s.name),
            Err(e) => {
                eprintln!("{e}");
                return ExitCode::FAILURE;
            }
        }
    }
    ExitCode::SUCCESS
}

/// Writes every generated sequence to `generated/` (their traces: `bless`).
fn generate() -> ExitCode {
    let dir = conformance::root().join("generated");
    if let Err(e) = std::fs::create_dir_all(&dir) {
        eprintln!("{}: {e}", dir.display());
        return ExitCode::FAILURE;
    }
    let nestings = conformance::generate::nestings();
    for o in &nestings {
        let p = dir.join(format!("{}.json", conformance::generate::name(o)));
        if let Err(e) = std::fs::write(&p, conformance::generate::text(o)) {
            eprintln!("{}: {e}", p.display());
            return ExitCode::FAILURE;
        }
    }
    eprintln!("{} sequences in {}", nestings.len(), dir.display());
    ExitCode::SUCCESS
}

//! `sim check FILE...`: parse and validate, report every file, fail if any is bad.

use std::path::PathBuf;

use sim::run::Compiled;
use sim::scenario;

pub fn check(files: &[PathBuf]) -> Result<(), String> {
    let mut bad = 0;
    for f in files {
        let checked = scenario::load_file_all(f).and_then(|all| {
            for s in &all {
                Compiled::new(s.clone()).map_err(|e| scenario::ScenarioError::Invalid {
                    path: f.display().to_string(),
                    position: None,
                    field: "policies".into(),
                    message: e,
                })?;
            }
            Ok(all)
        });
        match checked {
            Ok(all) => {
                for s in all {
                    println!(
                        "{}: ok ({}, {} policies, horizon {})",
                        f.display(),
                        s.name,
                        s.policies.len(),
                        s.horizon
                    );
                }
            }
            Err(e) => {
                eprintln!("{e}");
                bad += 1;
            }
        }
    }
    if bad > 0 {
        Err(format!("{bad} of {} file(s) invalid", files.len()))
    } else {
        Ok(())
    }
}

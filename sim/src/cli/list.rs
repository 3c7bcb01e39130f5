//! `sim list`: the shipped scenarios, one line each (file, name, first line of the description).

use crate::cli::out::outln;
use std::path::PathBuf;

use super::input::read_scenarios;
use crate::compile::Limits;
use crate::scenario::escape;

fn scenarios_dir(dir: Option<PathBuf>) -> Option<PathBuf> {
    if let Some(d) = dir {
        return Some(d);
    }
    let here = PathBuf::from("scenarios");
    if here.is_dir() {
        return Some(here);
    }
    let beside = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
    beside.is_dir().then_some(beside)
}

pub fn list(dir: Option<PathBuf>) -> Result<(), String> {
    let first_line = |s: &str| s.trim().lines().next().unwrap_or("").trim().to_string();
    let Some(dir) = scenarios_dir(dir) else {
        let c =
            crate::load::load(crate::DEFAULT_SCENARIO, "default.ron").map_err(|e| e.to_string())?;
        let s = &c.scenario;
        outln!(
            "(embedded)  {:<24} {}",
            escape(&s.name),
            escape(&first_line(&s.description))
        );
        return Ok(());
    };
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "ron"))
        .collect();
    files.sort();
    let rows: Vec<(String, String, String)> = files
        .iter()
        .flat_map(|f| {
            let file = f
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            match read_scenarios(f, &Limits::default()) {
                Ok(all) => all
                    .into_iter()
                    .map(|c| {
                        let s = c.scenario;
                        (file.clone(), s.name, first_line(&s.description))
                    })
                    .collect(),
                Err(e) => vec![(file, "(invalid)".into(), e)],
            }
        })
        .collect();
    let w = rows.iter().map(|r| r.0.len()).max().unwrap_or(0);
    for (file, name, desc) in rows {
        let (file, name, desc) = (escape(&file), escape(&name), escape(&desc));
        outln!("{file:<w$}  {name:<24} {desc}");
    }
    Ok(())
}

//! `sim list`: the shipped scenarios, one line each (file, name, first line of the description).

use std::path::PathBuf;

use sim::scenario;

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
        let s = scenario::load(sim::DEFAULT_SCENARIO, "default.ron").map_err(|e| e.to_string())?;
        println!("(embedded)  {:<24} {}", s.name, first_line(&s.description));
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
            match scenario::load_file_all(f) {
                Ok(all) => all
                    .into_iter()
                    .map(|s| (file.clone(), s.name, first_line(&s.description)))
                    .collect(),
                Err(e) => vec![(file, "(invalid)".into(), e.to_string())],
            }
        })
        .collect();
    let w = rows.iter().map(|r| r.0.len()).max().unwrap_or(0);
    for (file, name, desc) in rows {
        println!("{file:<w$}  {name:<24} {desc}");
    }
    Ok(())
}

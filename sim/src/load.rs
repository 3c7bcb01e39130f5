//! Loading: what `sim run` does to a file before running it, and what a library user calls. A
//! load is the compile stage ([`compile_all`](crate::compile::compile_all)) followed by the run's admission
//! ([`Compiled::estimate`] with the scenario's own seeds, on as many threads as this machine
//! runs), so a scenario that loads both makes sense and fits the [`Limits`].

use crate::compile::{Compiled, Limits, compile_each};
use crate::scenario::{SHIPPED, ScenarioError, escape};

/// Parses, checks, compiles and admits `text` (read from `path`, which is only used in messages):
/// one scenario. A file holding a list of several is refused with their names; use [`load_all`]
/// for those.
pub fn load(text: &str, path: &str) -> Result<Compiled, ScenarioError> {
    load_with(text, path, &Limits::default())
}

/// [`load`] under explicit [`Limits`].
pub fn load_with(text: &str, path: &str, limits: &Limits) -> Result<Compiled, ScenarioError> {
    let mut all = load_all_with(text, path, limits)?;
    if all.len() > 1 {
        let names: Vec<String> = all
            .iter()
            .map(|c| format!("\"{}\"", escape(&c.scenario.name)))
            .collect();
        return Err(ScenarioError::Invalid {
            path: path.to_string(),
            position: None,
            field: "(file)".into(),
            message: format!(
                "holds {} scenarios ({}): expected one here",
                all.len(),
                names.join(", ")
            ),
        });
    }
    Ok(all.remove(0))
}

/// Parses, checks, compiles and admits a file's text: every scenario it holds (see
/// [`compile_all`](crate::compile::compile_all)).
pub fn load_all(text: &str, path: &str) -> Result<Vec<Compiled>, ScenarioError> {
    load_all_with(text, path, &Limits::default())
}

/// [`load_all`] under explicit [`Limits`].
pub fn load_all_with(
    text: &str,
    path: &str,
    limits: &Limits,
) -> Result<Vec<Compiled>, ScenarioError> {
    let mut all = Vec::new();
    for c in compile_each(text, path, limits)? {
        let c = c?;
        c.estimate(c.scenario.seeds, 1, crate::run::threads(), limits)?;
        all.push(c);
    }
    Ok(all)
}

/// Reads and loads the file at `path`: one scenario (see [`load`]).
pub fn load_file(path: &std::path::Path) -> Result<Compiled, ScenarioError> {
    let (text, shown) = read(path)?;
    load(&text, &shown)
}

/// Reads and loads the file at `path`: every scenario it holds (see [`load_all`]), under
/// `limits`.
pub fn load_file_all(
    path: &std::path::Path,
    limits: &Limits,
) -> Result<Vec<Compiled>, ScenarioError> {
    let (text, shown) = read(path)?;
    load_all_with(&text, &shown, limits)
}

fn read(path: &std::path::Path) -> Result<(String, String), ScenarioError> {
    let shown = escape(&path.display().to_string()).into_owned();
    let text = std::fs::read_to_string(path).map_err(|e| ScenarioError::Io {
        path: shown.clone(),
        message: e.to_string(),
    })?;
    Ok((text, shown))
}

/// The shipped scenario named `name` (a scenario's `name`, not its file's), compiled; `None` if
/// no shipped file holds one of that name.
pub fn shipped(name: &str) -> Option<Result<Compiled, ScenarioError>> {
    for (file, text) in SHIPPED {
        match load_all(text, file) {
            Ok(all) => {
                if let Some(c) = all.into_iter().find(|c| c.scenario.name == name) {
                    return Some(Ok(c));
                }
            }
            Err(e) => {
                if text.contains(&format!("name: \"{name}\"")) {
                    return Some(Err(e));
                }
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shipped_scenario_loads_by_name() {
        let mut names = 0;
        for (file, text) in SHIPPED {
            for c in load_all(text, file).unwrap() {
                assert!(shipped(&c.scenario.name).unwrap().is_ok());
                names += 1;
            }
        }
        assert!(names >= 7);
        assert!(shipped("no such scenario").is_none());
        // Every file of scenarios/ is listed.
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
        let on_disk = std::fs::read_dir(dir)
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .path()
                    .extension()
                    .is_some_and(|x| x == "ron")
            })
            .count();
        assert_eq!(on_disk, SHIPPED.len());
    }
}

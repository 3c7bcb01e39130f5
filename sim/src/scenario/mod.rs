//! Scenarios: what to simulate, read from RON files.
//!
//! A scenario names its downstreams, its workload, a timeline of faults and the client policies to
//! compare. Every policy layer is configured with the core's own config types (embedded through the
//! core's `serde` feature), so a scenario tests exactly the code a service would run. Every struct
//! refuses unknown fields, durations are human strings (`"30s"`, `"150ms"`), and [`parse`] plus
//! [`validate`] turn any text into a [`Scenario`] or a [`ScenarioError`] that points at
//! `file:line:col` and says what was expected. Neither panics on any input.
//!
//! ```
//! let text = r#"
//! Scenario(
//!     name: "tiny",
//!     horizon: "10s",
//!     workload: OpenLoop(rate: 100.0),
//!     downstreams: [(name: "api", model: Server(workers: 4, service: Exponential(mean: "20ms")))],
//!     policies: [(name: "plain", stack: Call(downstream: "api", timeout: "1s"))],
//! )"#;
//! let scenario = sim::scenario::load(text, "tiny.ron").unwrap();
//! assert_eq!(scenario.policies[0].name, "plain");
//! ```

mod error;
mod llm;
mod locate;
mod parse;
pub mod sweep;
mod types;
mod validate;

pub use error::ScenarioError;
pub use llm::{LlmProvider, SpendLimit, TokenDist};
pub use locate::{Path, Seg, locate};
pub use parse::{parse, parse_all};
pub use types::*;
pub use validate::{Limits, validate, validate_at, validate_with};

/// Parses and validates `text` (read from `path`, which is only used in messages): one scenario.
/// A file holding a list of several is refused with their names; use [`load_all`] for those.
pub fn load(text: &str, path: &str) -> Result<Scenario, ScenarioError> {
    let mut all = load_all(text, path)?;
    if all.len() > 1 {
        let names: Vec<String> = all.iter().map(|s| format!("\"{}\"", s.name)).collect();
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

/// Parses and validates a file's text: one `Scenario(..)`, or a list `[Scenario(..), ...]` of
/// set-ups that belong together (each is run and reported on its own, under its own name, so
/// names must differ).
pub fn load_all(text: &str, path: &str) -> Result<Vec<Scenario>, ScenarioError> {
    let all = parse_all(text, path)?;
    let listed = all.len() > 1 || parse::starts_with_list(text);
    for (i, s) in all.iter().enumerate() {
        let root = if listed {
            Path::root().index(i)
        } else {
            Path::root()
        };
        if all[..i].iter().any(|o| o.name == s.name) {
            let field = root.field("name");
            return Err(ScenarioError::Invalid {
                path: path.to_string(),
                position: locate(text, &field),
                field: field.to_string(),
                message: format!(
                    "\"{}\" is used by an earlier scenario of this file: expected a different name (each writes its own report folder)",
                    s.name
                ),
            });
        }
        validate_at(s, text, path, Limits::default(), root)?;
    }
    Ok(all)
}

/// Reads, parses and validates the file at `path`: one scenario (see [`load`]).
pub fn load_file(path: &std::path::Path) -> Result<Scenario, ScenarioError> {
    let (text, shown) = read(path)?;
    load(&text, &shown)
}

/// Reads, parses and validates the file at `path`: every scenario it holds (see [`load_all`]).
pub fn load_file_all(path: &std::path::Path) -> Result<Vec<Scenario>, ScenarioError> {
    let (text, shown) = read(path)?;
    load_all(&text, &shown)
}

fn read(path: &std::path::Path) -> Result<(String, String), ScenarioError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| ScenarioError::Io {
        path: shown.clone(),
        message: e.to_string(),
    })?;
    Ok((text, shown))
}

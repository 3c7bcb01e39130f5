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
mod locate;
mod parse;
mod types;
mod validate;

pub use error::ScenarioError;
pub use locate::{Path, Seg, locate};
pub use parse::parse;
pub use types::*;
pub use validate::{Limits, validate, validate_with};

/// Parses and validates `text` (read from `path`, which is only used in messages).
pub fn load(text: &str, path: &str) -> Result<Scenario, ScenarioError> {
    let scenario = parse(text, path)?;
    validate(&scenario, text, path)?;
    Ok(scenario)
}

/// Reads, parses and validates the file at `path`.
pub fn load_file(path: &std::path::Path) -> Result<Scenario, ScenarioError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| ScenarioError::Io {
        path: shown.clone(),
        message: e.to_string(),
    })?;
    load(&text, &shown)
}

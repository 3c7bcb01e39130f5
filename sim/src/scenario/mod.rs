//! Scenarios: what to simulate, read from RON files.
//!
//! A scenario names its downstreams, its workload, a timeline of faults and the client policies to
//! compare. Every policy layer is configured with the core's own config types (embedded through the
//! core's `serde` feature), so a scenario tests exactly the code a service would run. Every struct
//! refuses unknown fields, durations are human strings (`"30s"`, `"150ms"`), and [`load`] turns any
//! text into a [`Compiled`] scenario (parsed, checked, every core policy built once, ready to run)
//! or a [`ScenarioError`] that points at `file:line:col` and says what was expected. It never
//! panics on any input.
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
//! let compiled = sim::scenario::load(text, "tiny.ron").unwrap();
//! assert_eq!(compiled.scenario.policies[0].name, "plain");
//! ```

mod compiled;
mod error;
mod estimate;
mod locate;
pub(crate) mod parse;
mod shipped;
pub(crate) mod sweep;
mod types;
pub(crate) mod validate;

pub use compiled::Compiled;
pub(crate) use compiled::Origin;
pub use error::ScenarioError;
pub use estimate::Estimate;
pub(crate) use locate::{Path, locate};
pub use shipped::{SHIPPED, shipped};
pub use types::*;
pub use validate::Limits;

/// Parses, checks and compiles `text` (read from `path`, which is only used in messages): one
/// scenario. A file holding a list of several is refused with their names; use [`load_all`] for
/// those.
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

/// Parses, checks and compiles a file's text: one `Scenario(..)`, or a list `[Scenario(..), ...]`
/// of set-ups that belong together (each is run and reported on its own, under its own name, so
/// names must differ).
pub fn load_all(text: &str, path: &str) -> Result<Vec<Compiled>, ScenarioError> {
    load_all_with(text, path, &Limits::default())
}

/// [`load_all`] under explicit [`Limits`].
pub fn load_all_with(
    text: &str,
    path: &str,
    limits: &Limits,
) -> Result<Vec<Compiled>, ScenarioError> {
    let all = parse::parse_all(text, path)?;
    let listed = all.len() > 1 || parse::starts_with_list(text);
    let mut names = std::collections::HashSet::with_capacity(all.len());
    let mut folders = std::collections::HashMap::with_capacity(all.len());
    let mut out = Vec::with_capacity(all.len());
    let shared: std::sync::Arc<str> = std::sync::Arc::from(text);
    for (i, s) in all.into_iter().enumerate() {
        let root = if listed {
            Path::root().index(i)
        } else {
            Path::root()
        };
        let name_error = |message: String| {
            let field = root.field("name");
            ScenarioError::Invalid {
                path: path.to_string(),
                position: locate(text, &field),
                field: field.to_string(),
                message,
            }
        };
        if !names.insert(s.name.clone()) {
            return Err(name_error(format!(
                "\"{}\" is used by an earlier scenario of this file: expected a different name (each writes its own report folder)",
                escape(&s.name)
            )));
        }
        let folder = crate::report::folder_name(&s.name);
        if let Some(other) = folders.insert(folder.clone(), s.name.clone()) {
            return Err(name_error(format!(
                "\"{}\" writes its report to the same folder ({folder}/) as \"{}\": expected names that differ in letters or digits",
                escape(&s.name),
                escape(&other)
            )));
        }
        let stacks = validate::check(&s, text, path, limits, root.clone())?;
        let origin = Origin {
            file: path.to_string(),
            text: shared.clone(),
            root,
        };
        let c = Compiled::build(s, stacks, origin);
        // The scenario's own seeds, on as many threads as this machine runs.
        c.estimate(c.scenario.seeds, 1, rayon::current_num_threads(), limits)?;
        out.push(c);
    }
    Ok(out)
}

/// Checks and compiles a scenario built in code (a sweep's variant, a scenario given a sweep on
/// the command line); errors name `shown` and carry no position.
pub(crate) fn compile(
    s: Scenario,
    shown: &str,
    limits: &Limits,
) -> Result<Compiled, ScenarioError> {
    let stacks = validate::check(&s, "", shown, limits, Path::root())?;
    let origin = Origin {
        file: shown.to_string(),
        ..Origin::default()
    };
    Ok(Compiled::build(s, stacks, origin))
}

/// Reads, parses, checks and compiles the file at `path`: one scenario (see [`load`]).
pub fn load_file(path: &std::path::Path) -> Result<Compiled, ScenarioError> {
    let (text, shown) = read(path)?;
    load(&text, &shown)
}

/// Reads, parses, checks and compiles the file at `path`: every scenario it holds (see
/// [`load_all`]), under `limits`.
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

/// A control character, or an invisible one that changes how text is shown (zero-width spaces,
/// bidirectional overrides, a byte-order mark).
pub(crate) fn hidden(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{feff}')
}

/// [`escape`] line by line: line breaks kept, everything else escaped.
pub fn escape_lines(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.contains(|c: char| c != '\n' && (c.is_control() || c > '\u{2000}')) {
        return std::borrow::Cow::Borrowed(s);
    }
    std::borrow::Cow::Owned(s.split('\n').map(escape).collect::<Vec<_>>().join("\n"))
}

/// `s` with control characters (and other invisible format characters) written as escapes
/// (`\u{1b}`), so a name read from a file cannot move the cursor or recolour a terminal.
pub fn escape(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.chars().any(hidden) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if hidden(c) {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

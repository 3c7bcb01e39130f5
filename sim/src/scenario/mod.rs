//! Scenarios: what to simulate, read from RON files.
//!
//! A scenario names its downstreams, its workload, a timeline of faults and the client policies to
//! compare. Every policy layer is configured with the core's own config types (embedded through the
//! core's `serde` feature), so a scenario tests exactly the code a service would run. Every struct
//! refuses unknown fields, and durations are human strings (`"30s"`, `"150ms"`). This module is
//! only what a scenario *is*: its types, parsing, the positions of its fields and the errors that
//! point at them (`file:line:col`, saying what was expected), the axes of sweeps and maps, and
//! its report folder's name. It imports nothing of the later stages: [`crate::compile`] checks
//! and compiles a parsed scenario, [`mod@crate::run`] admits and runs it. Nothing here panics on any
//! input.
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
//! let compiled = sim::load(text, "tiny.ron").unwrap();
//! assert_eq!(compiled.scenario.policies[0].name, "plain");
//! ```

mod checker;
mod error;
mod llm;
mod locate;
pub(crate) mod parse;
mod shipped;
pub(crate) mod sweep;
mod types;

pub(crate) use checker::{Check, Checker, printable};
pub use error::ScenarioError;
pub use llm::{LlmProvider, SpendLimit, TokenDist};
pub(crate) use locate::{Path, locate};
pub use shipped::SHIPPED;
pub use types::*;

/// A file-system-safe folder name for a scenario name: ASCII letters, digits, `-` and `_`,
/// lower-cased; anything else becomes `-`. Each scenario's report is written there, so the
/// names of a file's scenarios must give different folders.
pub fn folder_name(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|ch| {
            if ch.is_ascii_alphanumeric() || ch == '-' || ch == '_' {
                ch.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    let s = s.trim_matches('-').to_string();
    if s.is_empty() { "scenario".into() } else { s }
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

//! Text to [`Scenario`]: RON with serde, errors mapped to `file:line:col: message`.
//!
//! ron's own messages already say what was expected (the valid field names of the struct, the
//! valid variants of the enum, the type wanted); this module only adds the file name and makes the
//! message a single editor-clickable line. `Option` fields may be written bare (`timeout: "1s"`
//! rather than `timeout: Some("1s")`): the `implicit_some` extension is on. Nesting deeper than 128
//! levels is refused by ron, so no input can overflow the stack.

use ron::extensions::Extensions;

use super::error::ScenarioError;
use super::types::Scenario;

/// Parses `text` (from `path`, used only in messages). Checks syntax and types, not meaning: call
/// [`validate`](super::validate) (or use [`load`](super::load)) before running it.
pub fn parse(text: &str, path: &str) -> Result<Scenario, ScenarioError> {
    let options = ron::Options::default()
        .with_default_extension(Extensions::IMPLICIT_SOME)
        .with_recursion_limit(128);
    options.from_str::<Scenario>(text).map_err(|e| {
        let message = polish(&e.code.to_string());
        ScenarioError::Syntax {
            path: path.to_string(),
            line: e.span.start.line.max(1),
            col: e.span.start.col.max(1),
            message,
        }
    })
}

/// Makes ron's messages read as one sentence and adds a hint where ron's own is terse.
fn polish(message: &str) -> String {
    let mut m = message.trim().replace('\n', " ");
    if m.contains("invalid duration") || m.contains("a duration string") {
        return m;
    }
    if m.starts_with("Expected option") {
        m.push_str(" (write the value itself, `Some(value)`, or `None`)");
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syntax_errors_carry_line_and_column() {
        let e = parse("Scenario(\n  name: \"x\",\n  horizon: 10s,\n)", "f.ron").unwrap_err();
        let text = e.to_string();
        assert!(text.starts_with("f.ron:3:"), "{text}");
    }
}

//! Text to [`Scenario`]: RON with serde, errors mapped to `file:line:col: message`.
//!
//! ron's own messages already say what was expected (the valid field names of the struct, the
//! valid variants of the enum, the type wanted); this module only adds the file name and makes the
//! message a single editor-clickable line. `Option` fields may be written bare (`timeout: "1s"`
//! rather than `timeout: Some("1s")`): the `implicit_some` extension is on, and so is
//! `unwrap_variant_newtypes`, so a newtype variant holding a struct needs one pair of parentheses:
//! `budget: Ratio(ratio: 0.1, min_per_sec: 0)` rather than `Ratio((ratio: 0.1, min_per_sec: 0))`. Nesting deeper than 128
//! levels is refused by ron, so no input can overflow the stack.

use ron::extensions::Extensions;

use super::error::ScenarioError;
use super::types::Scenario;

/// Parses `text` (from `path`, used only in messages). Checks syntax and types, not meaning: call
/// [`validate`](super::validate) (or use [`load`](super::load)) before running it.
pub fn parse(text: &str, path: &str) -> Result<Scenario, ScenarioError> {
    let options = ron::Options::default()
        .with_default_extension(Extensions::IMPLICIT_SOME | Extensions::UNWRAP_VARIANT_NEWTYPES)
        .with_recursion_limit(128);
    options.from_str::<Scenario>(text).map_err(|e| {
        let line = e.span.start.line.max(1);
        let col = e.span.start.col.max(1);
        let mut message = polish(&e.code.to_string());
        if message.starts_with("Expected") {
            let (field, found) = context(text, line, col);
            if let Some(found) = found {
                message = format!("{message}, found `{found}`");
            }
            if let Some(field) = field {
                message = format!("{field}: {message}");
            }
        }
        ScenarioError::Syntax {
            path: path.to_string(),
            line,
            col,
            message,
        }
    })
}

/// The field name written just before `line:col` on the same line (`workers:` in
/// `workers: "ten"`), and the token found at `line:col`.
fn context(text: &str, line: usize, col: usize) -> (Option<String>, Option<String>) {
    let Some(l) = text.lines().nth(line - 1) else {
        return (None, None);
    };
    let chars: Vec<char> = l.chars().collect();
    let at = (col - 1).min(chars.len());
    let rest: String = chars[at..].iter().collect();
    let rest = rest.trim_start();
    let token: String = if let Some(inner) = rest.strip_prefix('"') {
        let end = inner.find('"').map_or(rest.len(), |i| i + 2);
        rest[..end].to_string()
    } else {
        rest.chars()
            .take_while(|c| !matches!(c, ',' | ')' | ']' | '}' | '(' | '[') && !c.is_whitespace())
            .collect()
    };
    let before: String = chars[..at].iter().collect();
    let before = before.trim_end();
    let field = before.strip_suffix(':').and_then(|b| {
        let name: String = b
            .chars()
            .rev()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        (!name.is_empty()).then_some(name)
    });
    let token = (!token.is_empty()).then_some(token.chars().take(40).collect());
    (field, token)
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

    #[test]
    fn wrong_types_name_the_field_and_what_was_found() {
        assert_eq!(
            context("a: (\n  workers: \"ten\", x: 1)", 2, 12),
            (Some("workers".into()), Some("\"ten\"".into()))
        );
        assert_eq!(context("x", 5, 1), (None, None));
        assert_eq!(
            context("rate: abc)", 1, 7),
            (Some("rate".into()), Some("abc".into()))
        );
    }
}

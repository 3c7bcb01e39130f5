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
    from_ron::<Scenario>(text, path)
}

/// Parses a file that holds one `Scenario(..)` or a list `[Scenario(..), ...]` of them (several
/// set-ups of one study, each run and reported on its own). Checks syntax and types, and that a
/// list is not empty; [`validate`](super::validate) each one (or use
/// [`load_all`](super::load_all)) before running them.
pub fn parse_all(text: &str, path: &str) -> Result<Vec<Scenario>, ScenarioError> {
    if !starts_with_list(text) {
        return parse(text, path).map(|s| vec![s]);
    }
    let list = from_ron::<Vec<Scenario>>(text, path)?;
    if list.is_empty() {
        let (line, col) = position(text, first_token(text));
        return Err(ScenarioError::Syntax {
            path: path.to_string(),
            line,
            col,
            message: "an empty list of scenarios: expected `Scenario(..)` or `[Scenario(..), ...]` with at least one".into(),
        });
    }
    Ok(list)
}

/// Whether the first token after white space, comments and `#![..]` attributes is `[`.
pub(crate) fn starts_with_list(text: &str) -> bool {
    text.as_bytes().get(first_token(text)) == Some(&b'[')
}

/// The byte offset of the first token after white space, comments and `#![..]` attributes (the
/// end of the text if there is none). Always a character boundary: only ASCII is skipped byte by
/// byte up to an ASCII stop.
fn first_token(text: &str) -> usize {
    let b = text.as_bytes();
    let mut i = 0;
    loop {
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        if b[i..].starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i..].starts_with(b"/*") {
            let mut depth = 0usize;
            while i < b.len() {
                if b[i..].starts_with(b"/*") {
                    depth += 1;
                    i += 2;
                } else if b[i..].starts_with(b"*/") {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if b[i..].starts_with(b"#!") {
            while i < b.len() && b[i] != b']' {
                i += 1;
            }
            i = (i + 1).min(b.len());
        } else {
            return i;
        }
    }
}

/// The 1-based line and column of byte offset `i`.
fn position(text: &str, i: usize) -> (usize, usize) {
    let before = text.get(..i).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

fn from_ron<T: serde::de::DeserializeOwned>(text: &str, path: &str) -> Result<T, ScenarioError> {
    let options = ron::Options::default()
        .with_default_extension(Extensions::IMPLICIT_SOME | Extensions::UNWRAP_VARIANT_NEWTYPES)
        .with_recursion_limit(128);
    options.from_str::<T>(text).map_err(|e| {
        let line = e.span.start.line.max(1);
        let col = e.span.start.col.max(1);
        let mut message = polish(&e.code.to_string());
        let number_field = field_before_number(text, line, col);
        if message.contains("recursion limit") {
            // ron's hint (raise its recursion limit, use serde_stacker) is for programmers.
            message = "nested more than 128 levels deep: expected a flatter scenario".into();
        } else if message.starts_with("Integer is out of bounds")
            && let Some((field, number)) = &number_field
        {
            let (lo, hi) = integer_range(field);
            message = format!(
                "{field}: {number} is out of range: expected a whole number from {lo} to {hi}"
            );
        } else if message.starts_with("Expected comma")
            && let Some((field, number)) = &number_field
            && context(text, line, col)
                .1
                .is_some_and(|t| t.starts_with(['.', 'e', 'E']))
        {
            let (lo, hi) = integer_range(field);
            let found = context(text, line, col).1.unwrap_or_default();
            message = format!(
                "{field}: expected a whole number from {lo} to {hi}, found `{number}{found}`"
            );
        } else if message.starts_with("Expected") {
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
    let field = field_ending(&chars[..at]);
    let token = (!token.is_empty()).then_some(token.chars().take(40).collect());
    (field, token)
}

/// The range of the integer field `name` (every integer field of a scenario is a `u32`, except the
/// `seed`, a `u64`).
fn integer_range(name: &str) -> (u64, u64) {
    match name {
        "seed" => (0, u64::MAX),
        _ => (0, u64::from(u32::MAX)),
    }
}

/// When `line:col` is in or right after a number written as the value of a field (`workers: 4`
/// followed by `.0`, or `workers: 99999999999`): the field's name and the number as written.
fn field_before_number(text: &str, line: usize, col: usize) -> Option<(String, String)> {
    let l = text.lines().nth(line.checked_sub(1)?)?;
    let chars: Vec<char> = l.chars().collect();
    // The number may start at the error position (ron points at its start) or end there.
    let at = (col - 1).min(chars.len());
    let mut end = at;
    while end < chars.len()
        && (chars[end].is_ascii_digit() || chars[end] == '-' || chars[end] == '+')
    {
        end += 1;
    }
    let mut start = end;
    while start > 0
        && (chars[start - 1].is_ascii_digit() || chars[start - 1] == '-' || chars[start - 1] == '+')
    {
        start -= 1;
    }
    if start == end {
        return None;
    }
    let number: String = chars[start..end].iter().take(40).collect();
    Some((field_ending(&chars[..start])?, number))
}

/// The field name of `name:` at the end of `before` (white space around the colon allowed).
fn field_ending(before: &[char]) -> Option<String> {
    let before: String = before.iter().collect();
    let before = before.trim_end().strip_suffix(':')?.trim_end();
    let name: String = before
        .chars()
        .rev()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    (!name.is_empty()).then_some(name)
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
    fn a_file_may_hold_a_list_of_scenarios() {
        let one = "Scenario(name: \"a\", horizon: \"1s\", workload: JobSet(clients: 1), downstreams: [], policies: [])";
        assert_eq!(parse_all(one, "f.ron").unwrap().len(), 1);
        let two = format!(
            "// comment [\n/* [ */ #![enable(implicit_some)]\n[{one}, {}]",
            one.replace("\"a\"", "\"b\"")
        );
        let list = parse_all(&two, "f.ron").unwrap();
        assert_eq!(
            list.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
            ["a", "b"]
        );
        let e = parse_all("// nothing\n  [ ]", "f.ron")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("f.ron:2:3: an empty list of scenarios"),
            "{e}"
        );
        let e = parse_all("[Scenario(name: 1)]", "f.ron")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("f.ron:1:"), "{e}");
        for garbage in ["", "/*", "#!", "[", "//", "  /* /* */"] {
            let _ = parse_all(garbage, "f.ron");
        }
    }

    #[test]
    fn numbers_name_their_field_and_range_and_nesting_has_no_ron_hint() {
        let base = |w: &str| {
            format!(
                "Scenario(name: \"x\", horizon: \"10s\", workload: OpenLoop(rate: 10.0),\n downstreams: [(name: \"api\", model: Server(workers: {w}, service: Constant(\"1ms\")))], policies: [])"
            )
        };
        let e = parse(&base("4.0"), "f.ron").unwrap_err().to_string();
        assert!(
            e.contains("workers: expected a whole number from 0 to 4294967295, found `4.0`"),
            "{e}"
        );
        let e = parse(&base("99999999999"), "f.ron")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(
                "workers: 99999999999 is out of range: expected a whole number from 0 to 4294967295"
            ),
            "{e}"
        );
        let e = parse(&base("-3"), "f.ron").unwrap_err().to_string();
        assert!(
            e.starts_with("f.ron:2:") && e.contains("workers: -3 is out of range"),
            "{e}"
        );
        let deep = format!(
            "Scenario(name: \"x\", horizon: \"1s\", workload: OpenLoop(rate: 1.0), downstreams: [(name: \"a\", model: Server(workers: 1, service: {}Constant(\"1ms\"){}))], policies: [])",
            "Bimodal(slow_share: 0.5, fast: Constant(\"1ms\"), slow: ".repeat(200),
            ")".repeat(200)
        );
        let e = parse(&deep, "f.ron").unwrap_err().to_string();
        assert!(
            e.contains("nested more than 128 levels deep") && !e.contains("serde_stacker"),
            "{e}"
        );
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

//! Finding a field in RON text by its path, so semantic errors can say `file:line:col` too.
//!
//! serde forgets where values came from, so validation works on the parsed [`Scenario`] and then
//! asks [`locate`] where, say, `policies[2].stack.inner.downstream` is written. The scanner knows
//! just enough RON (strings, raw strings, chars, nested comments, brackets) to walk structs, lists
//! and tuples without recursion; a single-element tuple (`Some(..)`, a newtype variant such as
//! `Fallback([..])`) is looked through. If the path cannot be followed it returns `None` and the
//! error is reported without a position rather than a wrong one.
//!
//! [`Scenario`]: super::Scenario

use std::fmt;

/// One step of a path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Seg {
    /// A struct field.
    Field(&'static str),
    /// An element of a list (or of a tuple).
    Index(usize),
}

/// A path from the top of the scenario to a value.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Path(pub Vec<Seg>);

impl Path {
    /// The empty path (the scenario itself).
    pub fn root() -> Self {
        Path(Vec::new())
    }
    /// This path plus a field.
    pub fn field(&self, name: &'static str) -> Self {
        let mut p = self.clone();
        p.0.push(Seg::Field(name));
        p
    }
    /// This path plus an index.
    pub fn index(&self, i: usize) -> Self {
        let mut p = self.clone();
        p.0.push(Seg::Index(i));
        p
    }
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("(scenario)");
        }
        for (i, seg) in self.0.iter().enumerate() {
            match seg {
                Seg::Field(name) if i == 0 => write!(f, "{name}")?,
                Seg::Field(name) => write!(f, ".{name}")?,
                Seg::Index(n) => write!(f, "[{n}]")?,
            }
        }
        Ok(())
    }
}

struct Cursor<'a> {
    b: &'a [u8],
    i: usize,
}

impl Cursor<'_> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }
    fn at(&self, k: usize) -> Option<u8> {
        self.b.get(self.i + k).copied()
    }

    /// Skips white space and comments (`//` to end of line, nested `/* */`).
    fn skip_trivia(&mut self) {
        loop {
            match (self.peek(), self.at(1)) {
                (Some(c), _) if c.is_ascii_whitespace() => self.i += 1,
                (Some(b'/'), Some(b'/')) => {
                    while let Some(c) = self.peek() {
                        if c == b'\n' {
                            break;
                        }
                        self.i += 1;
                    }
                }
                (Some(b'/'), Some(b'*')) => {
                    self.i += 2;
                    let mut depth = 1usize;
                    while depth > 0 {
                        match (self.peek(), self.at(1)) {
                            (None, _) => return,
                            (Some(b'/'), Some(b'*')) => {
                                depth += 1;
                                self.i += 2;
                            }
                            (Some(b'*'), Some(b'/')) => {
                                depth -= 1;
                                self.i += 2;
                            }
                            _ => self.i += 1,
                        }
                    }
                }
                _ => return,
            }
        }
    }

    fn is_ident_byte(c: u8) -> bool {
        c.is_ascii_alphanumeric() || c == b'_' || c == b'#'
    }

    /// Reads an identifier (including raw `r#name`), returning it.
    fn ident(&mut self) -> Option<&str> {
        let start = self.i;
        while let Some(c) = self.peek() {
            if Self::is_ident_byte(c) {
                self.i += 1;
            } else {
                break;
            }
        }
        let s = std::str::from_utf8(self.b.get(start..self.i)?).ok()?;
        (!s.is_empty()).then_some(s.trim_start_matches("r#"))
    }

    /// Skips a string, raw string or char literal starting at the cursor.
    fn skip_literal(&mut self) {
        match self.peek() {
            Some(b'"') => {
                self.i += 1;
                while let Some(c) = self.peek() {
                    self.i += 1;
                    match c {
                        b'\\' => self.i += 1,
                        b'"' => return,
                        _ => {}
                    }
                }
            }
            Some(b'\'') => {
                self.i += 1;
                while let Some(c) = self.peek() {
                    self.i += 1;
                    match c {
                        b'\\' => self.i += 1,
                        b'\'' => return,
                        _ => {}
                    }
                }
            }
            Some(b'r') => {
                // r"..." or r#"..."#
                self.i += 1;
                let mut hashes = 0;
                while self.peek() == Some(b'#') {
                    hashes += 1;
                    self.i += 1;
                }
                if self.peek() != Some(b'"') {
                    return;
                }
                self.i += 1;
                while let Some(c) = self.peek() {
                    self.i += 1;
                    if c == b'"' && (0..hashes).all(|k| self.at(k) == Some(b'#')) {
                        self.i += hashes;
                        return;
                    }
                }
            }
            _ => self.i += 1,
        }
    }

    fn starts_raw_string(&self) -> bool {
        self.peek() == Some(b'r') && matches!(self.at(1), Some(b'"') | Some(b'#'))
    }

    /// Skips one value, stopping before the `,` or closing bracket that ends it.
    fn skip_value(&mut self) {
        let mut depth = 0usize;
        loop {
            self.skip_trivia();
            let Some(c) = self.peek() else { return };
            match c {
                b'(' | b'[' | b'{' => {
                    depth += 1;
                    self.i += 1;
                }
                b')' | b']' | b'}' => {
                    if depth == 0 {
                        return;
                    }
                    depth -= 1;
                    self.i += 1;
                }
                b',' if depth == 0 => return,
                b'"' | b'\'' => self.skip_literal(),
                _ if self.starts_raw_string() => self.skip_literal(),
                _ => self.i += 1,
            }
        }
    }

    /// At a value: skips an optional leading name (`Server`, `Some`) and returns the opening
    /// bracket, leaving the cursor just inside it.
    fn open(&mut self) -> Option<u8> {
        self.skip_trivia();
        if self
            .peek()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == b'_')
            && !self.starts_raw_string()
        {
            self.ident()?;
            self.skip_trivia();
        }
        let c = self.peek()?;
        if matches!(c, b'(' | b'[' | b'{') {
            self.i += 1;
            Some(c)
        } else {
            None
        }
    }

    /// Inside a container: the start offsets of its top-level items.
    fn items(&mut self) -> Vec<usize> {
        let mut starts = Vec::new();
        loop {
            self.skip_trivia();
            match self.peek() {
                None | Some(b')') | Some(b']') | Some(b'}') => return starts,
                _ => {}
            }
            starts.push(self.i);
            self.skip_value();
            if self.peek() == Some(b',') {
                self.i += 1;
            }
        }
    }

    /// If the item at the cursor is `name: value`, returns the name.
    fn field_name(&mut self) -> Option<String> {
        let save = self.i;
        let name = self.ident().map(str::to_string);
        self.skip_trivia();
        let ok = name.is_some() && self.peek() == Some(b':');
        self.i = save;
        if ok { name } else { None }
    }
}

/// The 1-based `(line, column)` where the value at `path` is written in `text`: for a field, where
/// its name starts; for a list element, where the element starts.
pub fn locate(text: &str, path: &Path) -> Option<(usize, usize)> {
    let mut c = Cursor {
        b: text.as_bytes(),
        i: 0,
    };
    let mut target = None;
    for seg in &path.0 {
        // Look through single-element tuples (Some(..), newtype variants) until the container
        // fits the step.
        let mut hops = 0;
        loop {
            hops += 1;
            if hops > 64 {
                return None;
            }
            let kind = c.open()?;
            let items = c.items();
            let fields: Vec<(String, usize)> = items
                .iter()
                .filter_map(|&s| {
                    c.i = s;
                    c.field_name().map(|n| (n, s))
                })
                .collect();
            match seg {
                Seg::Field(name) => {
                    if let Some((_, s)) = fields.iter().find(|(n, _)| n == name) {
                        c.i = *s;
                        target = Some(*s);
                        c.ident()?;
                        c.skip_trivia();
                        c.i += 1; // the ':'
                        break;
                    }
                    if kind == b'(' && fields.is_empty() && items.len() == 1 {
                        c.i = items[0];
                        continue;
                    }
                    return None;
                }
                Seg::Index(n) => {
                    if kind == b'(' && fields.is_empty() && items.len() == 1 && *n > 0 {
                        c.i = items[0];
                        continue;
                    }
                    if kind == b'(' && items.len() == 1 && fields.is_empty() {
                        // Index 0 of a newtype: either the element itself or, if it is a list,
                        // that list's first element. Prefer the list.
                        let save = items[0];
                        c.i = save;
                        c.skip_trivia();
                        if c.peek() == Some(b'[') {
                            continue;
                        }
                        c.i = save;
                        target = Some(save);
                        break;
                    }
                    let s = *items.get(*n)?;
                    c.i = s;
                    target = Some(s);
                    break;
                }
            }
        }
    }
    let offset = target?;
    let before = text.get(..offset)?;
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    Some((line, col))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = r##"// a comment with "quotes" and (brackets
Scenario(
    name: "x, y",   /* a /* nested */ comment ) */
    workload: OpenLoop(rate: 10.0),
    policies: [
        (name: "a", stack: Call(downstream: "p")),
        (name: r#"b)"#, stack: Fallback([
            Breaker(config: (consecutive_failures: 2), inner: Call(downstream: "p")),
            Call(downstream: "q", timeout: Some("1s")),
        ])),
    ],
)"##;

    #[test]
    fn finds_fields_elements_and_newtype_contents() {
        let root = Path::root();
        assert_eq!(locate(TEXT, &root.field("name")), Some((3, 5)));
        assert_eq!(
            locate(TEXT, &root.field("workload").field("rate")),
            Some((4, 24))
        );
        let p1 = root.field("policies").index(1);
        assert_eq!(locate(TEXT, &p1), Some((7, 9)));
        let fb = p1.field("stack");
        assert_eq!(
            locate(TEXT, &fb.index(1).field("downstream")),
            Some((9, 18))
        );
        assert_eq!(
            locate(
                TEXT,
                &fb.index(0).field("config").field("consecutive_failures")
            ),
            Some((8, 30))
        );
        assert_eq!(
            locate(TEXT, &fb.index(0).field("inner").field("downstream")),
            Some((8, 68))
        );
        assert_eq!(locate(TEXT, &root.field("missing")), None);
        assert_eq!(locate(TEXT, &root.field("policies").index(9)), None);
    }

    #[test]
    fn never_panics_on_garbage() {
        for text in [
            "",
            "(",
            "\"",
            "r#\"",
            "/*",
            "Scenario(name: ",
            "[[[[",
            "(a: (b: (c",
        ] {
            let _ = locate(text, &Path::root().field("a").index(3).field("b"));
        }
    }
}

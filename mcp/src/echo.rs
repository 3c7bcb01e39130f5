//! Caller input echoed back, capped: whatever a tool says goes into the model's context, so a
//! megabyte name in an error would cost a megabyte of context (and can carry injected text).
//!
//! [`quoted`] is for a value inside a message (a name, a header, a URI): quoted, its middle cut
//! past [`ECHO_MAX`] bytes, and its length stated. [`clip`] is the last line of defence for a
//! whole message (serde's errors quote values and field names; the simulator's quote RON): its
//! middle is cut past [`MESSAGE_MAX`] bytes, keeping the head and the tail, where the reason and
//! what was expected are.
//!
//! ```
//! use reliable_mcp::echo::{clip, quoted};
//!
//! assert_eq!(quoted("api"), "\"api\"");
//! let long = quoted(&"x".repeat(10_000));
//! assert!(long.len() < 200 && long.ends_with("(10000 bytes)"));
//! assert!(clip(&"y".repeat(1 << 20)).contains("1048576 bytes"));
//! ```

/// The most bytes of one echoed value.
pub const ECHO_MAX: usize = 96;
/// The most bytes of a message.
pub const MESSAGE_MAX: usize = 1024;

/// The longest prefix of `s` of at most `n` bytes that ends on a character boundary.
fn head(s: &str, n: usize) -> &str {
    let mut i = n.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    &s[..i]
}

/// The longest suffix of `s` of at most `n` bytes that starts on a character boundary.
fn tail(s: &str, n: usize) -> &str {
    let mut i = s.len().saturating_sub(n);
    while !s.is_char_boundary(i) {
        i += 1;
    }
    &s[i..]
}

/// `s` quoted as Rust debug-formats a string; past [`ECHO_MAX`] bytes, its start, an ellipsis
/// and its length: `"NNNN..."… (1048576 bytes)`.
pub fn quoted(s: &str) -> String {
    if s.len() <= ECHO_MAX {
        format!("{s:?}")
    } else {
        format!("{:?}… ({} bytes)", head(s, ECHO_MAX / 2), s.len())
    }
}

/// `message`, its middle cut past [`MESSAGE_MAX`] bytes, saying how much was cut.
pub fn clip(message: &str) -> String {
    if message.len() <= MESSAGE_MAX {
        return message.to_string();
    }
    let (h, t) = (
        head(message, MESSAGE_MAX / 2),
        tail(message, MESSAGE_MAX / 4),
    );
    format!(
        "{h} …[{} bytes cut from a {} bytes message]… {t}",
        message.len() - h.len() - t.len(),
        message.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_values_are_quoted_whole() {
        assert_eq!(quoted("a\"b"), "\"a\\\"b\"");
        assert_eq!(clip("fine"), "fine");
    }

    #[test]
    fn long_values_are_cut_on_character_boundaries() {
        let s = "é".repeat(1000);
        let q = quoted(&s);
        assert!(q.len() < ECHO_MAX + 40, "{q}");
        assert!(q.ends_with("(2000 bytes)"), "{q}");
        let m = clip(&format!("name: {s}{s}, expected a name"));
        assert!(m.len() < MESSAGE_MAX + 80, "{}", m.len());
        assert!(
            m.starts_with("name: é") && m.ends_with("expected a name"),
            "{m}"
        );
    }
}

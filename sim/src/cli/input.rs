//! Reading scenario files the way a careful tool does: regular files only (a FIFO would block,
//! `/dev/zero` never ends), at most [`MAX_FILE_BYTES`], and text that is UTF-8, with a position and
//! a plain message for anything else (a byte-order mark, UTF-16, invalid bytes).

use std::io::Read;
use std::path::Path;

use crate::compile::{Compiled, Limits};
use crate::load::load_all_with;
use crate::scenario::escape;

/// Largest scenario file read: far above any real scenario, far below what would hurt.
pub const MAX_FILE_BYTES: u64 = 16 << 20;

/// Reads, parses, checks and compiles every scenario of the file at `path`.
pub fn read_scenarios(path: &Path, limits: &Limits) -> Result<Vec<Compiled>, String> {
    let shown = escape(&path.display().to_string()).into_owned();
    let text = read_text(path, &shown)?;
    load_all_with(&text, &shown, limits).map_err(|e| e.to_string())
}

/// The file's text, or why it cannot be a scenario.
pub fn read_text(path: &Path, shown: &str) -> Result<String, String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("{shown}: cannot read: {e}"))?;
    if !meta.is_file() {
        let what = if meta.is_dir() {
            "a folder"
        } else {
            "not a regular file (a pipe, a device or a socket)"
        };
        return Err(format!("{shown}: {what}: expected a scenario file (.ron)"));
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(format!(
            "{shown}: {} bytes, more than the {} MiB a scenario file may have",
            meta.len(),
            MAX_FILE_BYTES >> 20
        ));
    }
    let file = std::fs::File::open(path).map_err(|e| format!("{shown}: cannot read: {e}"))?;
    let mut bytes = Vec::new();
    // The file may have grown since: read one byte more than the cap to notice.
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("{shown}: cannot read: {e}"))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(format!(
            "{shown}: more than the {} MiB a scenario file may have",
            MAX_FILE_BYTES >> 20
        ));
    }
    decode(bytes).map_err(|e| format!("{shown}:{e}"))
}

/// UTF-8 text, or `line:col: message` for anything else.
fn decode(bytes: Vec<u8>) -> Result<String, String> {
    if bytes.starts_with(&[0xEF, 0xBB, 0xBF]) {
        return Err("1:1: the file starts with a UTF-8 byte-order mark (BOM, bytes EF BB BF): save it as UTF-8 without a BOM".into());
    }
    if bytes.starts_with(&[0xFF, 0xFE]) || bytes.starts_with(&[0xFE, 0xFF]) {
        return Err("1:1: the file is UTF-16 (it starts with a byte-order mark, FF FE or FE FF): save it as UTF-8".into());
    }
    if let Some(i) = bytes.iter().position(|&b| b == 0) {
        let before = String::from_utf8_lossy(&bytes[..i]);
        let line = before.matches('\n').count() + 1;
        let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        return Err(format!(
            "{line}:{col}: a NUL byte: the file is binary, or UTF-16 without a byte-order mark: expected UTF-8 text"
        ));
    }
    String::from_utf8(bytes).map_err(|e| {
        let good = e.utf8_error().valid_up_to();
        let bytes = e.as_bytes();
        let before = String::from_utf8_lossy(&bytes[..good]);
        let line = before.matches('\n').count() + 1;
        let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        let bad: Vec<String> = bytes[good..]
            .iter()
            .take(4)
            .map(|b| format!("{b:02X}"))
            .collect();
        format!(
            "{line}:{col}: invalid UTF-8 (bytes {}): save the file as UTF-8",
            bad.join(" ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodings_are_named_with_a_position() {
        let e = decode(b"\xEF\xBB\xBFScenario()".to_vec()).unwrap_err();
        assert!(e.starts_with("1:1:") && e.contains("BOM"), "{e}");
        let e = decode(b"\xFF\xFES\x00".to_vec()).unwrap_err();
        assert!(e.contains("UTF-16"), "{e}");
        let e = decode(b"Scenario(\n  name: \"\xE9t\xE9\"".to_vec()).unwrap_err();
        assert!(e.starts_with("2:10: invalid UTF-8 (bytes E9"), "{e}");
        let e = decode(b"S\x00c\x00".to_vec()).unwrap_err();
        assert!(e.starts_with("1:2: a NUL byte"), "{e}");
        assert_eq!(decode(b"ok".to_vec()).unwrap(), "ok");
    }
}

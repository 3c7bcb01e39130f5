//! Printing to stdout without panicking: a closed pipe (`sim list | head -1`) silences the rest of
//! the output and the command carries on and ends normally (its reports are still written); any
//! other write error (a full disk) ends the command with a message and status 1.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set once stdout's reader has gone.
static CLOSED: AtomicBool = AtomicBool::new(false);

/// Writes `text` and a newline to stdout.
pub fn line(text: impl std::fmt::Display) -> Result<(), String> {
    if CLOSED.load(Ordering::Relaxed) {
        return Ok(());
    }
    let mut out = std::io::stdout().lock();
    match writeln!(out, "{text}").and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
            CLOSED.store(true, Ordering::Relaxed);
            Ok(())
        }
        Err(e) => Err(format!("cannot write to stdout: {e}")),
    }
}

/// Prints a line to stdout (see [`line`]); `?`-propagates a write error.
macro_rules! outln {
    () => { $crate::cli::out::line("")? };
    ($($arg:tt)*) => { $crate::cli::out::line(format_args!($($arg)*))? };
}
pub(crate) use outln;

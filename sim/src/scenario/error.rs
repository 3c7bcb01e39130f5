//! [`ScenarioError`]: what was wrong with a scenario, and where.

use std::fmt;

/// Why a scenario was refused. Displays as `file:line:col: what was wrong and what was expected`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ScenarioError {
    /// The file could not be read.
    Io {
        /// The file.
        path: String,
        /// The operating system's message.
        message: String,
    },
    /// The text is not a valid scenario: a syntax error, an unknown or missing field, a wrong type
    /// (ron's own message, which names the fields or variants it expected).
    Syntax {
        /// The file.
        path: String,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        col: usize,
        /// What was wrong and what was expected.
        message: String,
    },
    /// The text parsed, but a value makes no sense (a negative rate, zero workers, a fault after the
    /// horizon, an unknown downstream...).
    Invalid {
        /// The file.
        path: String,
        /// Where the offending field is, when it could be found in the text.
        position: Option<(usize, usize)>,
        /// The field, as a path from the top of the scenario (`policies[2].stack.inner.downstream`).
        field: String,
        /// What was wrong and what was expected.
        message: String,
    },
}

impl ScenarioError {
    /// The 1-based line and column, when known.
    pub fn position(&self) -> Option<(usize, usize)> {
        match self {
            ScenarioError::Io { .. } => None,
            ScenarioError::Syntax { line, col, .. } => Some((*line, *col)),
            ScenarioError::Invalid { position, .. } => *position,
        }
    }
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ScenarioError::Io { path, message } => write!(f, "{path}: cannot read: {message}"),
            ScenarioError::Syntax {
                path,
                line,
                col,
                message,
            } => write!(f, "{path}:{line}:{col}: {message}"),
            ScenarioError::Invalid {
                path,
                position,
                field,
                message,
            } => {
                match position {
                    Some((line, col)) => write!(f, "{path}:{line}:{col}: ")?,
                    None => write!(f, "{path}: ")?,
                }
                write!(f, "{field}: {message}")
            }
        }
    }
}

impl std::error::Error for ScenarioError {}

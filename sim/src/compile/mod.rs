//! The compile stage: a parsed [`Scenario`] checked and turned into a
//! [`Compiled`] one, ready to run.
//!
//! [`compile_all`] parses a file's text, checks what parsing cannot (ranges, cross-references,
//! sizes within [`Limits`], the livelock guard, every value of a sweep or map), and builds each
//! policy's stack with its core policies once. Every error points at `file:line:col`; nothing here
//! panics on any input. What a batch will cost (events, memory) is not this stage's question: the
//! run's admission ([`crate::run::admission`]) answers it before anything runs.

mod check;
mod compiled;
pub mod graph;
mod limits;
mod livelock;
pub mod replicas;

pub use compiled::Compiled;
pub(crate) use compiled::Origin;
pub use limits::Limits;

use crate::scenario::{Path, Scenario, ScenarioError, escape, folder_name, locate, parse};

/// Parses, checks and compiles a file's text: one `Scenario(..)`, or a list `[Scenario(..), ...]`
/// of set-ups that belong together (each is run and reported on its own, under its own name, so
/// names and report folders must differ). `path` is only used in messages.
pub fn compile_all(
    text: &str,
    path: &str,
    limits: &Limits,
) -> Result<Vec<Compiled>, ScenarioError> {
    compile_each(text, path, limits)?.collect()
}

/// [`compile_all`] one scenario at a time: the file is parsed at once, then each scenario is
/// checked and compiled when the iterator reaches it (so a caller can admit each before the
/// next is compiled, and stop at the first error).
pub fn compile_each<'a>(
    text: &'a str,
    path: &'a str,
    limits: &'a Limits,
) -> Result<impl Iterator<Item = Result<Compiled, ScenarioError>> + 'a, ScenarioError> {
    let all = parse::parse_all(text, path)?;
    let listed = all.len() > 1 || parse::starts_with_list(text);
    let mut names = std::collections::HashSet::with_capacity(all.len());
    let mut folders = std::collections::HashMap::with_capacity(all.len());
    let shared: std::sync::Arc<str> = std::sync::Arc::from(text);
    Ok(all.into_iter().enumerate().map(move |(i, s)| {
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
        let folder = folder_name(&s.name);
        if let Some(other) = folders.insert(folder.clone(), s.name.clone()) {
            return Err(name_error(format!(
                "\"{}\" writes its report to the same folder ({folder}/) as \"{}\": expected names that differ in letters or digits",
                escape(&s.name),
                escape(&other)
            )));
        }
        let written = replicas::has_replicas(&s).then(|| s.clone());
        let (s, groups) = replicas::expand(s, text, path, &root)?;
        let stacks = check::check(
            &s,
            written.as_ref(),
            text,
            path,
            limits,
            root.clone(),
            &groups,
        )?;
        let origin = Origin {
            file: path.to_string(),
            text: shared.clone(),
            root,
        };
        Ok(Compiled::build(s, stacks, origin, groups, written))
    }))
}

/// Checks and compiles a scenario built in code (a sweep's variant, a scenario given a sweep on
/// the command line); errors name `shown` and carry no position.
pub(crate) fn compile(
    s: Scenario,
    shown: &str,
    limits: &Limits,
) -> Result<Compiled, ScenarioError> {
    let written = replicas::has_replicas(&s).then(|| s.clone());
    let (s, groups) = replicas::expand(s, "", shown, &Path::root())?;
    let stacks = check::check(
        &s,
        written.as_ref(),
        "",
        shown,
        limits,
        Path::root(),
        &groups,
    )?;
    let origin = Origin {
        file: shown.to_string(),
        ..Origin::default()
    };
    Ok(Compiled::build(s, stacks, origin, groups, written))
}

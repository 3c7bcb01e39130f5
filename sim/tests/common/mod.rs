//! Helpers shared by the integration tests.
#![allow(dead_code)]

use sim::compile::Compiled;
use sim::metrics::PolicySummary;
use sim::run::{BatchOptions, RunResult};

/// Parses, validates and compiles `text`, panicking with the error message if it is refused.
pub fn compile(text: &str) -> Compiled {
    sim::load(text, "test.ron").unwrap_or_else(|e| panic!("{e}"))
}

/// One thread, no progress bar.
pub const ONE_THREAD: BatchOptions = BatchOptions {
    jobs: 1,
    progress: false,
};

/// Runs every policy of `text` under its own seed on one thread.
pub fn run(text: &str) -> (Compiled, Vec<RunResult>) {
    let c = compile(text);
    let seeds = [c.scenario.seed];
    let r = sim::run(&c, &seeds, ONE_THREAD).unwrap().results;
    (c, r)
}

/// The summaries of every policy of `text`.
pub fn summaries(text: &str) -> Vec<PolicySummary> {
    run(text).1.into_iter().map(|r| r.output.summary).collect()
}

/// The validation error `text` gets, as displayed.
pub fn error(text: &str) -> String {
    match sim::load(text, "bad.ron") {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(e) => e.to_string(),
    }
}

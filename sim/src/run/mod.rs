//! Running a scenario: every (policy, seed) pair as an independent world (`World`), in parallel with
//! rayon, results in a fixed order.
//!
//! Runs share nothing mutable: each builds its own world from the read-only [`Compiled`] scenario
//! and its seed, so the output is the same whatever the number of threads. Results come back in
//! (seed, policy) order from an indexed parallel iterator, never in completion order.

pub mod admission;
mod error;
pub mod grid;
pub(crate) mod world;

use crate::compile::Compiled;
use crate::metrics::PolicySummary;
pub use admission::Estimate;
pub use error::RunError;
pub(crate) use world::World;
pub use world::{Decision, RunOutput, TraceRow};

/// Every run of a scenario under a list of seeds: what [`run`] returns and the
/// [`report`](crate::report) renders.
#[derive(Debug)]
pub struct Runs<'c> {
    /// The scenario.
    pub compiled: &'c Compiled,
    /// The seeds, in order.
    pub seeds: Vec<u64>,
    /// Every (seed, policy) run, ordered by seed, then policy.
    pub results: Vec<RunResult>,
}

impl Runs<'_> {
    /// Per policy, in file order: its summary (the mean over seeds when there are several, see
    /// [`Mean`](crate::metrics::Mean)) and its per-seed summaries.
    pub fn per_policy(&self) -> Vec<(PolicySummary, Vec<PolicySummary>)> {
        (0..self.compiled.stacks.len())
            .map(|p| {
                let runs: Vec<PolicySummary> = self
                    .results
                    .iter()
                    .filter(|r| r.policy == p)
                    .map(|r| r.output.summary.clone())
                    .collect();
                (PolicySummary::mean_of(&runs), runs)
            })
            .collect()
    }
}

/// Runs every policy of `c` under each of `seeds`, in parallel; results ordered by seed, then
/// policy, whatever the number of threads.
pub fn run<'c>(c: &'c Compiled, seeds: &[u64], opts: BatchOptions) -> Result<Runs<'c>, RunError> {
    Ok(Runs {
        compiled: c,
        seeds: seeds.to_vec(),
        results: run_all(c, seeds, opts)?,
    })
}

/// One finished run.
#[derive(Clone, Debug)]
pub struct RunResult {
    /// Index of the policy in the scenario.
    pub policy: usize,
    /// Its master seed.
    pub seed: u64,
    /// What it produced.
    pub output: RunOutput,
}

/// How to run a batch. The default: one thread per core, no progress bar.
#[derive(Clone, Copy, Debug, Default)]
pub struct BatchOptions {
    /// Worker threads (0: rayon's default, one per core).
    pub jobs: usize,
    /// Show a progress bar on stderr if the batch takes more than a second and stderr is a
    /// terminal.
    pub progress: bool,
}

/// Runs every policy of `c` under each of `seeds`. Results are ordered by seed, then policy.
pub(crate) fn run_all(
    c: &Compiled,
    seeds: &[u64],
    opts: BatchOptions,
) -> Result<Vec<RunResult>, RunError> {
    let pairs: Vec<(u64, usize)> = seeds
        .iter()
        .flat_map(|&s| (0..c.stacks.len()).map(move |p| (s, p)))
        .collect();
    let total_ms = (c.horizon_ns / 1_000_000).max(1) * pairs.len() as u64;
    parallel(
        &pairs,
        total_ms,
        &c.scenario.name,
        opts,
        |&(seed, policy), tick| {
            Ok(RunResult {
                policy,
                seed,
                output: run_one(c, policy, seed, tick)?,
            })
        },
    )
}

/// The decisions policy `policy` of `c` takes for logical requests run one after another under
/// `seed` (see [`Decision`]): request `k` starts at `calls[k].0` (ns) or when request `k − 1`
/// finished, whichever is later, and a scripted first downstream answers it from answer
/// `calls[k].1` of its script on; throttles take the samples `draws` (if not empty) in order.
/// The conformance suite's simulator face.
pub fn run_calls(
    c: &Compiled,
    policy: usize,
    seed: u64,
    calls: &[(u64, u64)],
    draws: &[u64],
) -> Result<Vec<(u64, Decision)>, RunError> {
    if policy >= c.stacks.len() {
        return Err(RunError::NoPolicy {
            index: policy,
            policies: c.stacks.len(),
        });
    }
    World::new(c, policy, seed, false).run_calls(calls, draws)
}

/// One run, with progress reported to `tick`; errors name the policy and seed.
pub(crate) fn run_one(
    c: &Compiled,
    policy: usize,
    seed: u64,
    tick: &(dyn Fn(u64) + Sync),
) -> Result<RunOutput, RunError> {
    World::new(c, policy, seed, false)
        .with_progress(tick)
        .run()
        .map_err(|e| RunError::Run {
            policy: c.scenario.policies[policy].name.clone(),
            seed,
            error: Box::new(e),
        })
}

/// Runs `f` on every job in parallel, on `opts.jobs` threads (0: one per core), and returns the
/// results in the jobs' order whatever the thread count. `f` reports the virtual time it
/// advances to its second argument; a progress bar over `total_ms` of virtual time appears on
/// stderr if the batch takes more than a second, stderr is a terminal and `opts.progress` is set.
#[cfg(feature = "parallel")]
pub(crate) fn parallel<J: Sync, T: Send>(
    jobs: &[J],
    total_ms: u64,
    name: &str,
    opts: BatchOptions,
    f: impl Fn(&J, &(dyn Fn(u64) + Sync)) -> Result<T, RunError> + Sync,
) -> Result<Vec<T>, RunError> {
    use std::io::IsTerminal;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Instant as WallClock;

    use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
    use rayon::prelude::*;

    let bar = ProgressBar::with_draw_target(Some(total_ms.max(1)), ProgressDrawTarget::hidden());
    if let Ok(style) = ProgressStyle::with_template(
        "{spinner} {msg} [{bar:40}] {percent:>3}% virtual time, eta {eta}",
    ) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_message(name.to_string());
    let show = opts.progress && std::io::stderr().is_terminal();
    let shown = AtomicBool::new(false);
    let started = WallClock::now();
    let tick = |delta_ns: u64| {
        bar.inc(delta_ns / 1_000_000);
        if show
            && !shown.load(Ordering::Relaxed)
            && started.elapsed().as_millis() >= 1_000
            && !shown.swap(true, Ordering::Relaxed)
        {
            bar.set_draw_target(ProgressDrawTarget::stderr());
        }
    };
    let work = || -> Result<Vec<T>, RunError> { jobs.par_iter().map(|j| f(j, &tick)).collect() };
    let result = if opts.jobs == 0 {
        work()
    } else {
        rayon::ThreadPoolBuilder::new()
            .num_threads(opts.jobs)
            .build()
            .map_err(|e| RunError::Threads {
                jobs: opts.jobs,
                message: e.to_string(),
            })?
            .install(work)
    };
    bar.finish_and_clear();
    result
}

/// Without the `parallel` feature (the WebAssembly build): the jobs one after another, in order,
/// with no progress bar and no wall clock.
#[cfg(not(feature = "parallel"))]
pub(crate) fn parallel<J: Sync, T: Send>(
    jobs: &[J],
    _total_ms: u64,
    _name: &str,
    _opts: BatchOptions,
    f: impl Fn(&J, &(dyn Fn(u64) + Sync)) -> Result<T, RunError> + Sync,
) -> Result<Vec<T>, RunError> {
    jobs.iter().map(|j| f(j, &|_| {})).collect()
}

/// The threads a batch runs on by default (rayon's, one per core; 1 without `parallel`): what
/// admission counts per-thread memory for.
pub(crate) fn threads() -> usize {
    #[cfg(feature = "parallel")]
    return rayon::current_num_threads();
    #[cfg(not(feature = "parallel"))]
    1
}

/// `par_iter()` over a slice: rayon's with the `parallel` feature, a plain in-order iterator
/// without it (same results, same order).
pub(crate) mod par {
    #[cfg(feature = "parallel")]
    pub(crate) use rayon::prelude::*;

    /// A slice's `par_iter`, sequential.
    #[cfg(not(feature = "parallel"))]
    pub(crate) trait ParIter<T> {
        /// The slice's items in order.
        fn par_iter(&self) -> std::slice::Iter<'_, T>;
    }

    #[cfg(not(feature = "parallel"))]
    impl<T> ParIter<T> for [T] {
        fn par_iter(&self) -> std::slice::Iter<'_, T> {
            self.iter()
        }
    }
}

/// One run of policy `policy` of `c` under `seed`, reporting the virtual time it advances (ns) to
/// `tick`: what [`run`] does for each (seed, policy) pair, for a caller that runs the pairs itself
/// (the WebAssembly playground, one pair per call so the page can show progress between them).
/// [`Runs`] built from these results, in (seed, policy) order, renders as [`run`]'s would.
pub fn run_pair(
    c: &Compiled,
    policy: usize,
    seed: u64,
    tick: &(dyn Fn(u64) + Sync),
) -> Result<RunResult, RunError> {
    if policy >= c.stacks.len() {
        return Err(RunError::NoPolicy {
            index: policy,
            policies: c.stacks.len(),
        });
    }
    Ok(RunResult {
        policy,
        seed,
        output: run_one(c, policy, seed, tick)?,
    })
}

/// Runs one policy with tracing on and returns its trace rows in request order.
pub fn trace(c: &Compiled, policy: usize, seed: u64) -> Result<Vec<TraceRow>, RunError> {
    if policy >= c.stacks.len() {
        return Err(RunError::NoPolicy {
            index: policy,
            policies: c.stacks.len(),
        });
    }
    let out = World::new(c, policy, seed, true).run()?;
    let mut rows = out.trace.unwrap_or_default();
    rows.sort_by_key(|r| r.request);
    Ok(rows)
}

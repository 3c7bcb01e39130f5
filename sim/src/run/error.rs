//! [`RunError`]: why a run or a batch of runs stopped, typed up to [`run`](super::run).

use reliable_core::Duration;

use crate::scenario::ScenarioError;

/// Why a run, or a batch of runs, stopped early.
#[derive(Clone, Debug, PartialEq)]
pub enum RunError {
    /// Too many events at one instant: something retries without delay against a layer that
    /// answers at once.
    Livelock {
        /// The instant, ns.
        at_ns: u64,
        /// The limit that was passed.
        events: u64,
    },
    /// One run of a batch stopped: which policy and seed, and why.
    Run {
        /// The policy's name.
        policy: String,
        /// The run's master seed.
        seed: u64,
        /// Why it stopped.
        error: Box<RunError>,
    },
    /// A point of a sweep or map is not a valid scenario.
    Variant(ScenarioError),
    /// The worker threads could not be started.
    Threads {
        /// How many were asked for.
        jobs: usize,
        /// The system's reason.
        message: String,
    },
    /// A request of [`run_calls`](super::run_calls) had not finished when the events ran out or
    /// the horizon came.
    Unfinished {
        /// The request, from 1.
        request: u64,
        /// When it was given up, ns.
        at_ns: u64,
    },
    /// [`run_calls`](super::run_calls) was given fewer throttle draws than its throttles took.
    DrawsExhausted {
        /// Draws given.
        given: usize,
        /// Draws taken.
        taken: usize,
    },
    /// A trace asked for a policy the scenario does not have.
    NoPolicy {
        /// The index asked for.
        index: usize,
        /// How many policies the scenario has.
        policies: usize,
    },
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunError::Livelock { at_ns, events } => write!(
                f,
                "livelock at t = {}: more than {events} events at one instant (a layer retrying without delay against one that answers at once?)",
                Duration::from_nanos(*at_ns)
            ),
            RunError::Run {
                policy,
                seed,
                error,
            } => write!(f, "policy \"{policy}\", seed {seed}: {error}"),
            RunError::Variant(e) => write!(f, "{e}"),
            RunError::Threads { jobs, message } => {
                write!(f, "cannot start {jobs} threads: {message}")
            }
            RunError::Unfinished { request, at_ns } => write!(
                f,
                "request {request} had not finished at t = {} (no more events, or the horizon)",
                Duration::from_nanos(*at_ns)
            ),
            RunError::DrawsExhausted { given, taken } => write!(
                f,
                "the throttles took {taken} draws, more than the {given} given"
            ),
            RunError::NoPolicy { index, policies } => {
                write!(f, "no policy #{index}: the scenario has {policies}")
            }
        }
    }
}

impl std::error::Error for RunError {}

impl From<ScenarioError> for RunError {
    fn from(e: ScenarioError) -> Self {
        RunError::Variant(e)
    }
}

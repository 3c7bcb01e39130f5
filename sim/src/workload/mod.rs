//! Workloads: who starts logical requests, and when.
//!
//! - [`open_loop`]: one aggregate arrival source (Poisson or constant gaps, rate steps, load
//!   spikes) for any number of clients: one pending event, not one timer per client.
//! - [`closed_loop`]: serial clients that wait for each final answer and think before the next.
//! - [`job_set`]: clients that each need one request done, starting together.
//!
//! Every draw comes from the workload's own stream (or, for closed loops, from keyed draws per
//! client and request number), so all policies of a scenario see the same demand.

pub mod closed_loop;
pub mod job_set;
pub mod open_loop;

pub use closed_loop::ClosedLoop;
pub use job_set::JobSet;
pub use open_loop::OpenLoop;

/// A workload's state in one run.
#[derive(Clone, Debug)]
pub enum Source {
    /// Open loop.
    Open(OpenLoop),
    /// Closed loop.
    Closed(ClosedLoop),
    /// Job set.
    Jobs(JobSet),
}

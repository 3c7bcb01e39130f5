//! A job set: `clients` clients that each need one logical request done, all starting together
//! (or spread over a window). Brooker's contended-register experiment is one: what counts is the
//! total work and the time the last client learns of its success (the makespan).

use super::closed_loop::start_offset;

/// The jobs of one run.
#[derive(Clone, Debug)]
pub struct JobSet {
    seed: u64,
    clients: u32,
    spread_ns: u64,
    /// Jobs whose request succeeded.
    pub done: u64,
    /// Jobs whose request failed for good.
    pub failed: u64,
    /// When the last successful job finished, in nanoseconds.
    pub last_success: u64,
}

impl JobSet {
    /// `clients` jobs starting over `[0, spread)`.
    pub fn new(seed: u64, clients: u32, spread_ns: u64) -> Self {
        JobSet {
            seed,
            clients,
            spread_ns,
            done: 0,
            failed: 0,
            last_success: 0,
        }
    }

    /// Number of jobs.
    pub fn clients(&self) -> u32 {
        self.clients
    }

    /// When job `c` starts.
    pub fn start_of(&self, c: u32) -> u64 {
        start_offset(self.seed, c, self.spread_ns)
    }
}

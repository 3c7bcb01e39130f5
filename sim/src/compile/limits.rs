//! [`Limits`]: the sizes a scenario may have (checked when it is compiled) and the work and memory
//! a batch may need (checked by [`admission`](crate::run::admission) before it runs).

use reliable_core::Duration;

/// Upper bounds that keep a run within memory and time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Limits {
    /// Most metrics buckets per run.
    pub max_buckets: u64,
    /// Most clients.
    pub max_clients: u64,
    /// Most logical requests a workload may be expected to start (rate × horizon).
    pub max_requests: f64,
    /// Most bytes of per-client policy state (breakers, budgets) for one run.
    pub max_state_bytes: u64,
    /// Most seeds.
    pub max_seeds: u32,
    /// Most layers in one stack.
    pub max_layers: usize,
    /// Most scripted answers.
    pub max_script: usize,
    /// Longest horizon.
    pub max_horizon: Duration,
    /// Most memory a batch may need by its [`Estimate`](crate::run::Estimate), bytes.
    pub max_memory: u64,
    /// Most events a batch may process by its [`Estimate`](crate::run::Estimate).
    pub max_events: f64,
}

impl Limits {
    /// Whether `n` seeds are allowed (at least 1, at most `max_seeds`); the same rule for the file's
    /// `seeds` and for `--seeds`.
    pub fn check_seeds(&self, n: u64) -> Result<(), String> {
        if n == 0 {
            return Err("0 seeds: expected at least 1".into());
        }
        if n > u64::from(self.max_seeds) {
            return Err(format!(
                "{n} seeds is more than this simulator accepts ({}): expected 1 to {}",
                self.max_seeds, self.max_seeds
            ));
        }
        Ok(())
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_buckets: 1_000_000,
            max_clients: 100_000_000,
            max_requests: 2e9,
            max_state_bytes: 4 << 30,
            max_seeds: 100_000,
            max_layers: 256,
            max_script: 1_000_000,
            max_horizon: Duration::from_secs(366 * 24 * 3600),
            max_memory: 2 << 30,
            max_events: 2e9,
        }
    }
}

//! The options every command that runs a batch of simulations shares (`run`, `sweep`): seeds,
//! output folder, threads, quiet, and the limits on memory and work, which `check` shares too.
//! Flags go through the same limits as the file's own fields.

use std::path::PathBuf;

use clap::Args;

use crate::compile::{Compiled, Limits};
use crate::run::BatchOptions;

/// Most worker threads `--jobs` accepts: more than this is spawning threads, not simulating.
pub const MAX_JOBS: usize = 256;

/// Overrides of the limits on what one command may cost.
#[derive(Debug, Args, Default)]
pub struct LimitArgs {
    /// Most memory a command may need by the estimate, e.g. `4GiB`, `512MiB` (default: 2 GiB).
    #[arg(long, value_parser = parse_bytes)]
    pub max_memory: Option<u64>,
    /// Most simulation events a command may process by the estimate (default: 2e9, about ten
    /// minutes on one core).
    #[arg(long, value_parser = parse_count)]
    pub max_events: Option<f64>,
}

impl LimitArgs {
    /// The default limits with these overrides.
    pub fn limits(&self) -> Limits {
        let mut l = Limits::default();
        if let Some(m) = self.max_memory {
            l.max_memory = m;
        }
        if let Some(e) = self.max_events {
            l.max_events = e;
        }
        l
    }
}

/// `4GiB`, `512MiB`, `100MB`, `123456`: a size in bytes.
fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let x: f64 = num
        .parse()
        .map_err(|_| format!("{s:?}: expected a size such as 4GiB or 512MiB"))?;
    let mult: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" => 1e3,
        "kib" => 1024.0,
        "m" | "mb" => 1e6,
        "mib" => 1048576.0,
        "g" | "gb" => 1e9,
        "gib" => 1073741824.0,
        "t" | "tb" => 1e12,
        "tib" => 1099511627776.0,
        _ => {
            return Err(format!(
                "{s:?}: unknown unit (expected B, KiB, MiB, GiB, TiB, or KB, MB, GB, TB)"
            ));
        }
    };
    let v = x * mult;
    if !(v.is_finite() && (1.0..=1e18).contains(&v)) {
        return Err(format!("{s:?}: expected a size from 1 byte to 1e18 bytes"));
    }
    Ok(v as u64)
}

/// `2e9`, `500000000`: a positive count.
fn parse_count(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?}: expected a number such as 2e9"))?;
    if !(v.is_finite() && (1.0..=1e18).contains(&v)) {
        return Err(format!("{s:?}: expected a number from 1 to 1e18"));
    }
    Ok(v)
}

/// Seeds, output folder, threads and verbosity of a batch of runs.
#[derive(Debug, Args)]
pub struct BatchArgs {
    /// Master seed of the first run (default: the scenario's).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Runs per policy (and per swept value), seeds seed, seed+1, ... (default: the scenario's).
    #[arg(long)]
    pub seeds: Option<u32>,
    /// Folder for reports; each scenario writes into OUT/<scenario name>/.
    #[arg(long, default_value = "reports")]
    pub out: PathBuf,
    /// Worker threads (default: one per core; at most 256). Output does not depend on it.
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=MAX_JOBS as i64))]
    pub jobs: Option<u16>,
    /// No progress bar and no table.
    #[arg(long, short)]
    pub quiet: bool,
    #[command(flatten)]
    pub limits: LimitArgs,
}

impl Default for BatchArgs {
    fn default() -> Self {
        BatchArgs {
            seed: None,
            seeds: None,
            out: PathBuf::from("reports"),
            jobs: None,
            quiet: false,
            limits: LimitArgs::default(),
        }
    }
}

impl BatchArgs {
    /// The seeds to run for `c`: `--seed` (or the scenario's `seed`) and the next ones, `--seeds`
    /// (or the scenario's `seeds`) in all, checked against the same limits as the file's `seeds`
    /// and against the estimate of the whole batch's memory and work (`runs_per_seed` runs of
    /// each seed: 1, or a sweep's number of values).
    pub fn seeds(&self, c: &Compiled, runs_per_seed: usize) -> Result<Vec<u64>, String> {
        let s = &c.scenario;
        let limits = self.limits.limits();
        let k = match self.seeds {
            Some(k) => {
                limits
                    .check_seeds(u64::from(k))
                    .map_err(|e| format!("--seeds {k}: {e}"))?;
                k
            }
            None => s.seeds,
        };
        let seed = self.seed.unwrap_or(s.seed);
        c.estimate(k, runs_per_seed, self.threads(), &limits)
            .map_err(|e| {
                if self.seeds.is_some() {
                    format!("{e} (with --seeds {k})")
                } else {
                    e.to_string()
                }
            })?;
        Ok((0..u64::from(k)).map(|i| seed.wrapping_add(i)).collect())
    }

    /// Worker threads the batch will use.
    pub fn threads(&self) -> usize {
        match self.jobs {
            Some(j) => usize::from(j),
            None => rayon::current_num_threads(),
        }
    }

    /// The message for a report of scenario `name` that could not be written.
    pub fn write_error(&self, name: &str, e: std::io::Error) -> String {
        let dir = self.out.join(crate::scenario::folder_name(name));
        format!(
            "{}: {e}",
            crate::scenario::escape(&dir.display().to_string())
        )
    }

    /// Threads and progress bar for the runner.
    pub fn options(&self) -> BatchOptions {
        BatchOptions {
            jobs: self.jobs.map_or(0, usize::from),
            progress: !self.quiet,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_counts() {
        assert_eq!(parse_bytes("4GiB"), Ok(4 << 30));
        assert_eq!(parse_bytes("512 MiB"), Ok(512 << 20));
        assert_eq!(parse_bytes("100MB"), Ok(100_000_000));
        assert_eq!(parse_bytes("123"), Ok(123));
        assert!(parse_bytes("4 parsecs").is_err());
        assert!(parse_bytes("0").is_err());
        assert!(parse_bytes("-1").is_err());
        assert_eq!(parse_count("2e9"), Ok(2e9));
        assert!(parse_count("NaN").is_err());
        assert!(parse_count("0").is_err());
    }
}

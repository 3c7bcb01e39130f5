//! [`Shard`]: which part of a batch one process runs when a sweep or a map is split over many
//! machines (`--shard i/n`), and where the index comes from on batch engines.
//!
//! A batch is split **by seed**: seed number `j` (counting from 0 in the batch's seed list) goes
//! to shard `j mod n`. Every run of a seed (all its policies, every value or grid cell) stays in
//! one shard, so the shards are balanced to within one seed and each shard's runs are exactly the
//! runs the unsharded batch would make for those seeds. Nothing else differs between shards, so
//! the merged result is the unsharded one.
//!
//! The index comes from `--shard i/n`, or with `--shard auto` from the environment of the batch
//! engine running the process:
//! - `SIM_SHARD_INDEX` and `SIM_SHARD_COUNT` (a CI matrix, a shell loop, anything else);
//! - Slurm job arrays: `SLURM_ARRAY_TASK_ID` and `SLURM_ARRAY_TASK_COUNT` (minus
//!   `SLURM_ARRAY_TASK_MIN` and divided by `SLURM_ARRAY_TASK_STEP` when set, so `--array=1-4` and
//!   `--array=0-6:2` work too);
//! - Kubernetes Indexed Jobs: `JOB_COMPLETION_INDEX`, with the count in `SIM_SHARD_COUNT` (the
//!   Job's `completions`; Kubernetes does not pass it).
//!
//! ```
//! use sim::run::grid::shard::Shard;
//! let s: Shard = "1/4".parse().unwrap();
//! assert_eq!(s.seeds(&[10, 11, 12, 13, 14, 15]), vec![11, 15]);
//! assert!("4/4".parse::<Shard>().is_err());
//! ```

use std::fmt;
use std::str::FromStr;

/// Most shards a batch may be split into.
pub const MAX_SHARDS: u32 = 100_000;

/// Shard `index` of `count` (0-based).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Shard {
    /// This shard, `0 ≤ index < count`.
    pub index: u32,
    /// How many shards the batch is split into.
    pub count: u32,
}

impl Shard {
    /// A checked shard.
    pub fn new(index: u32, count: u32) -> Result<Self, String> {
        if count == 0 || count > MAX_SHARDS {
            return Err(format!("{count} shards: expected 1 to {MAX_SHARDS}"));
        }
        if index >= count {
            return Err(format!(
                "shard {index} of {count}: the index counts from 0, so expected 0 to {}",
                count - 1
            ));
        }
        Ok(Shard { index, count })
    }

    /// Whether seed number `j` of the batch (0-based) belongs to this shard.
    pub fn owns(&self, j: usize) -> bool {
        j % self.count as usize == self.index as usize
    }

    /// This shard's seeds, in batch order.
    pub fn seeds(&self, all: &[u64]) -> Vec<u64> {
        all.iter()
            .enumerate()
            .filter(|(j, _)| self.owns(*j))
            .map(|(_, &s)| s)
            .collect()
    }

    /// The shard named by the environment (see the module docs), from `var` (`std::env::var`
    /// in the program, a map in tests). An error names the variables it read.
    pub fn from_env(var: impl Fn(&str) -> Option<String>) -> Result<Self, String> {
        let num = |name: &str| -> Result<Option<u64>, String> {
            match var(name) {
                None => Ok(None),
                Some(v) => v
                    .trim()
                    .parse::<u64>()
                    .map(Some)
                    .map_err(|_| format!("{name}={v:?} is not a whole number")),
            }
        };
        let small = |name: &str, v: u64| -> Result<u32, String> {
            u32::try_from(v).map_err(|_| format!("{name}={v} is too large"))
        };
        let generic = (num("SIM_SHARD_INDEX")?, num("SIM_SHARD_COUNT")?);
        let slurm = (num("SLURM_ARRAY_TASK_ID")?, num("SLURM_ARRAY_TASK_COUNT")?);
        let k8s = num("JOB_COMPLETION_INDEX")?;
        let mut found: Vec<(&str, Shard)> = Vec::new();
        if let (Some(i), Some(n)) = generic {
            let s = Shard::new(small("SIM_SHARD_INDEX", i)?, small("SIM_SHARD_COUNT", n)?)
                .map_err(|e| format!("SIM_SHARD_INDEX/SIM_SHARD_COUNT: {e}"))?;
            found.push(("SIM_SHARD_INDEX", s));
        } else if generic.0.is_some() && k8s.is_none() {
            return Err("SIM_SHARD_INDEX is set but SIM_SHARD_COUNT is not".into());
        }
        if let (Some(id), Some(n)) = slurm {
            let min = num("SLURM_ARRAY_TASK_MIN")?.unwrap_or(0);
            let step = num("SLURM_ARRAY_TASK_STEP")?.unwrap_or(1).max(1);
            if id < min || (id - min) % step != 0 {
                return Err(format!(
                    "SLURM_ARRAY_TASK_ID={id} is not on the array's grid (min {min}, step {step})"
                ));
            }
            let i = (id - min) / step;
            let s = Shard::new(
                small("SLURM_ARRAY_TASK_ID", i)?,
                small("SLURM_ARRAY_TASK_COUNT", n)?,
            )
            .map_err(|e| format!("SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT: {e}"))?;
            found.push(("SLURM_ARRAY_TASK_ID", s));
        }
        if let Some(i) = k8s {
            let n = generic.1.ok_or(
                "JOB_COMPLETION_INDEX is set but SIM_SHARD_COUNT is not: set it to the Job's `completions`",
            )?;
            let s = Shard::new(
                small("JOB_COMPLETION_INDEX", i)?,
                small("SIM_SHARD_COUNT", n)?,
            )
            .map_err(|e| format!("JOB_COMPLETION_INDEX/SIM_SHARD_COUNT: {e}"))?;
            found.push(("JOB_COMPLETION_INDEX", s));
        }
        match found.as_slice() {
            [] => Err("--shard auto: no shard in the environment: expected SIM_SHARD_INDEX and SIM_SHARD_COUNT, SLURM_ARRAY_TASK_ID and SLURM_ARRAY_TASK_COUNT (a Slurm job array), or JOB_COMPLETION_INDEX and SIM_SHARD_COUNT (a Kubernetes Indexed Job)".into()),
            [(_, s)] => Ok(*s),
            [(a, s), rest @ ..] => match rest.iter().find(|(_, t)| t != s) {
                None => Ok(*s),
                Some((b, t)) => Err(format!(
                    "--shard auto: {a} says shard {s} but {b} says shard {t}: unset one of them"
                )),
            },
        }
    }
}

impl fmt::Display for Shard {
    /// `i/n`, as `--shard` takes it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl FromStr for Shard {
    type Err = String;

    /// `i/n` with `0 ≤ i < n`.
    fn from_str(s: &str) -> Result<Self, String> {
        let (i, n) = s
            .split_once('/')
            .ok_or_else(|| format!("{s:?}: expected INDEX/COUNT such as 0/4 (or auto)"))?;
        let parse = |x: &str, what: &str| {
            x.trim()
                .parse::<u32>()
                .map_err(|_| format!("{s:?}: the {what} {x:?} is not a whole number"))
        };
        Shard::new(parse(i, "index")?, parse(n, "count")?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(pairs: &[(&str, &str)]) -> Result<Shard, String> {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Shard::from_env(|k| m.get(k).cloned())
    }

    #[test]
    fn shards_split_seeds_round_robin_and_cover_each_once() {
        let all: Vec<u64> = (100..110).collect();
        for n in 1..=12 {
            let mut seen: Vec<u64> = (0..n)
                .flat_map(|i| Shard::new(i, n).unwrap().seeds(&all))
                .collect();
            seen.sort_unstable();
            assert_eq!(seen, all, "n = {n}");
        }
        assert_eq!(Shard::new(2, 4).unwrap().seeds(&all), vec![102, 106]);
        // More shards than seeds: some are empty.
        assert!(Shard::new(11, 12).unwrap().seeds(&all).is_empty());
    }

    #[test]
    fn the_flag_is_checked() {
        assert_eq!("3/4".parse::<Shard>(), Ok(Shard { index: 3, count: 4 }));
        assert_eq!(Shard::new(3, 4).unwrap().to_string(), "3/4");
        for bad in ["4/4", "1/0", "-1/4", "a/4", "1", "1/4/2", "", "0/100001"] {
            assert!(bad.parse::<Shard>().is_err(), "{bad}");
        }
        let e = "4/4".parse::<Shard>().unwrap_err();
        assert!(e.contains("0 to 3"), "{e}");
    }

    #[test]
    fn the_environment_of_each_engine_names_a_shard() {
        let s = |i, n| Ok(Shard { index: i, count: n });
        assert_eq!(
            env(&[("SIM_SHARD_INDEX", "2"), ("SIM_SHARD_COUNT", "4")]),
            s(2, 4)
        );
        assert_eq!(
            env(&[
                ("SLURM_ARRAY_TASK_ID", "3"),
                ("SLURM_ARRAY_TASK_COUNT", "4")
            ]),
            s(3, 4)
        );
        // --array=1-4 and --array=0-6:2.
        let slurm = |id: &str, min: &str, step: &str| {
            env(&[
                ("SLURM_ARRAY_TASK_ID", id),
                ("SLURM_ARRAY_TASK_COUNT", "4"),
                ("SLURM_ARRAY_TASK_MIN", min),
                ("SLURM_ARRAY_TASK_STEP", step),
            ])
        };
        assert_eq!(slurm("4", "1", "1"), s(3, 4));
        assert_eq!(slurm("4", "0", "2"), s(2, 4));
        assert!(slurm("3", "0", "2").is_err());
        assert_eq!(
            env(&[("JOB_COMPLETION_INDEX", "1"), ("SIM_SHARD_COUNT", "3")]),
            s(1, 3)
        );
        // Missing halves, disagreements, bad numbers, nothing at all.
        let e = env(&[("JOB_COMPLETION_INDEX", "1")]).unwrap_err();
        assert!(e.contains("SIM_SHARD_COUNT"), "{e}");
        assert!(env(&[("SIM_SHARD_INDEX", "1")]).is_err());
        let e = env(&[
            ("SIM_SHARD_INDEX", "1"),
            ("SIM_SHARD_COUNT", "4"),
            ("SLURM_ARRAY_TASK_ID", "2"),
            ("SLURM_ARRAY_TASK_COUNT", "4"),
        ])
        .unwrap_err();
        assert!(e.contains("SLURM_ARRAY_TASK_ID says shard 2/4"), "{e}");
        assert!(env(&[("SIM_SHARD_INDEX", "x"), ("SIM_SHARD_COUNT", "4")]).is_err());
        assert!(env(&[("SIM_SHARD_INDEX", "4"), ("SIM_SHARD_COUNT", "4")]).is_err());
        assert!(env(&[]).unwrap_err().contains("SLURM_ARRAY_TASK_ID"));
    }
}

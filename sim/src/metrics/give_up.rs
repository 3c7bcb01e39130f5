//! [`GiveUps`]: how often retry layers gave up, indexed by the core's reason.

use reliable_core::retry::GiveUpReason;
use serde::{Deserialize, Serialize};

/// Reasons, in the order they are written (by name).
const NAMES: [&str; 8] = [
    "budget",
    "deadline",
    "dont-retry",
    "fatal",
    "finished",
    "max-attempts",
    "refused",
    "timeout-not-retried",
];

/// The index of `reason` in [`NAMES`]. Exhaustive: a reason the core adds must be named here.
fn index(reason: GiveUpReason) -> usize {
    match reason {
        GiveUpReason::Budget(_) => 0,
        GiveUpReason::Deadline => 1,
        GiveUpReason::DontRetry => 2,
        GiveUpReason::Fatal => 3,
        GiveUpReason::Finished => 4,
        GiveUpReason::MaxAttempts => 5,
        GiveUpReason::Refused => 6,
        GiveUpReason::TimeoutNotRetried => 7,
    }
}

/// Give-up counts by reason; serialised as a map from the reason's name (`budget`, `deadline`,
/// `dont-retry`, `fatal`, `finished`, `max-attempts`, `refused`, `timeout-not-retried`) to its count, by name,
/// leaving out reasons that never happened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GiveUps([u64; 8]);

impl GiveUps {
    /// Counts one give-up.
    #[inline]
    pub(crate) fn add(&mut self, reason: GiveUpReason) {
        self.0[index(reason)] += 1;
    }

    /// How many give-ups had the reason named `name` (0 for an unknown name).
    pub fn get(&self, name: &str) -> u64 {
        NAMES
            .iter()
            .position(|n| *n == name)
            .map_or(0, |i| self.0[i])
    }

    /// `(name, count)` of every reason that happened, by name.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        NAMES.into_iter().zip(self.0).filter(|(_, n)| *n > 0)
    }

    /// The mean of several runs' counts, each rounded to the nearest integer.
    pub(crate) fn mean(runs: &[GiveUps]) -> GiveUps {
        let mut out = [0u64; 8];
        for (i, o) in out.iter_mut().enumerate() {
            let sum: u64 = runs.iter().map(|g| g.0[i]).sum();
            *o = crate::stats::mean_count(sum, runs.len());
        }
        GiveUps(out)
    }
}

impl<'de> Deserialize<'de> for GiveUps {
    /// The map [`Serialize`] writes; an unknown reason is an error.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let m = std::collections::BTreeMap::<String, u64>::deserialize(d)?;
        let mut n = [0; 8];
        for (name, k) in m {
            let i = NAMES.iter().position(|x| *x == name).ok_or_else(|| {
                serde::de::Error::custom(format!("unknown give-up reason `{name}`"))
            })?;
            n[i] = k;
        }
        Ok(GiveUps(n))
    }
}

impl Serialize for GiveUps {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.iter())
    }
}

//! [`Verdict`]: how a run ended up after its faults, ordered by severity, and [`Verdicts`], how
//! many runs of a policy got each.

use serde::{Deserialize, Serialize};

/// How the run ended up after its faults (see the [module docs](super) for the rules). Ordered by
/// severity: `NoFault < Recovered < Inconclusive < Stuck`, so the worse of two is their `max`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// The scenario has no faults.
    NoFault,
    /// Goodput came back and stayed back.
    Recovered,
    /// Too little time after the last fault to judge (less than one recovery window before the
    /// horizon).
    Inconclusive,
    /// Goodput did not come back (for good) before the horizon.
    Stuck,
}

impl Verdict {
    /// Every verdict, least severe first.
    pub const ALL: [Verdict; 4] = [
        Verdict::NoFault,
        Verdict::Recovered,
        Verdict::Inconclusive,
        Verdict::Stuck,
    ];

    /// As written in reports: `no-fault`, `recovered`, `inconclusive`, `stuck`.
    pub fn name(self) -> &'static str {
        match self {
            Verdict::NoFault => "no-fault",
            Verdict::Recovered => "recovered",
            Verdict::Inconclusive => "inconclusive",
            Verdict::Stuck => "stuck",
        }
    }
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// How many runs got each verdict; serialised as a map from verdict name to count, in severity
/// order, leaving out verdicts no run got.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Verdicts([u64; 4]);

impl Verdicts {
    /// Counts `verdicts`.
    pub fn count(verdicts: impl IntoIterator<Item = Verdict>) -> Self {
        let mut n = [0; 4];
        for v in verdicts {
            n[v as usize] += 1;
        }
        Verdicts(n)
    }

    /// Runs that got `v`.
    pub fn get(&self, v: Verdict) -> u64 {
        self.0[v as usize]
    }

    /// All runs counted.
    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }

    /// No run counted.
    pub fn is_empty(&self) -> bool {
        self.total() == 0
    }

    /// The verdicts some run got, with their counts, least severe first.
    pub fn iter(&self) -> impl Iterator<Item = (Verdict, u64)> + '_ {
        Verdict::ALL
            .into_iter()
            .map(|v| (v, self.get(v)))
            .filter(|(_, n)| *n > 0)
    }

    /// Whether the runs disagree.
    pub fn mixed(&self) -> bool {
        self.iter().count() > 1
    }

    /// The most common verdict; a tie goes to the more severe one (one stuck run in two is not
    /// "recovered"). `None` if no run was counted.
    pub fn most_common(&self) -> Option<Verdict> {
        // `max_by_key` keeps the last of equal maxima: iterate least severe first so that the last
        // is the most severe.
        self.iter().max_by_key(|&(_, n)| n).map(|(v, _)| v)
    }
}

impl<'de> Deserialize<'de> for Verdicts {
    /// The map [`Serialize`] writes (raw shard results are read back with it).
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let m = std::collections::BTreeMap::<Verdict, u64>::deserialize(d)?;
        let mut n = [0; 4];
        for (v, k) in m {
            n[v as usize] = k;
        }
        Ok(Verdicts(n))
    }
}

impl Serialize for Verdicts {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.iter().map(|(v, n)| (v.name(), n)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tie_goes_to_the_worse_verdict() {
        use Verdict::*;
        // One run recovered, one stuck: stuck, whatever the order.
        assert_eq!(
            Verdicts::count([Recovered, Stuck]).most_common(),
            Some(Stuck)
        );
        assert_eq!(
            Verdicts::count([Stuck, Recovered]).most_common(),
            Some(Stuck)
        );
        assert_eq!(
            Verdicts::count([Recovered, Inconclusive]).most_common(),
            Some(Inconclusive)
        );
        // A majority wins over severity.
        assert_eq!(
            Verdicts::count([Recovered, Recovered, Stuck]).most_common(),
            Some(Recovered)
        );
        assert_eq!(Verdicts::default().most_common(), None);
        assert!(NoFault < Recovered && Recovered < Inconclusive && Inconclusive < Stuck);
        let j = serde_json::to_string(&Verdicts::count([Stuck, Recovered, Stuck])).unwrap();
        assert_eq!(j, r#"{"recovered":1,"stuck":2}"#);
    }
}

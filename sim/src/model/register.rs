//! A register with optimistic concurrency control (Brooker's "contended register").
//!
//! An attempt reads the current version, then writes conditionally on it; the write commits (and
//! bumps the version) only if no other write committed since that read, otherwise it fails with a
//! conflict. Reads and writes take no time at the register itself: all the time is in the network
//! hops, which the world draws from the downstream's network distributions.

/// The register's state.
#[derive(Clone, Debug, Default)]
pub struct Register {
    version: u32,
    /// Writes that committed.
    pub commits: u64,
    /// Writes that lost a race.
    pub conflicts: u64,
}

impl Register {
    /// A register at version 0.
    pub fn new() -> Self {
        Self::default()
    }

    /// A read: the current version.
    pub fn read(&self) -> u32 {
        self.version
    }

    /// A write conditional on `seen`: commits and returns `true` if nothing committed since.
    pub fn write(&mut self, seen: u32) -> bool {
        if seen == self.version {
            self.version = self.version.wrapping_add(1);
            self.commits += 1;
            true
        } else {
            self.conflicts += 1;
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_after_another_commit_conflicts() {
        let mut r = Register::new();
        let a = r.read();
        let b = r.read();
        assert!(r.write(a));
        assert!(!r.write(b), "b read before a committed");
        let b2 = r.read();
        assert!(r.write(b2));
        assert_eq!((r.commits, r.conflicts), (2, 1));
    }
}

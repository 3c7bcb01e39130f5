//! [`Registry`]: a fixed-capacity map from names to values, typically one breaker per downstream.
//!
//! The seed library keeps a dict of named breakers; an embedded client needs the same without an
//! allocator. Capacity (`N` entries) and the longest name (`K` bytes) are const generics, storage is
//! inline (heapless), lookups are a linear scan (fast for the tens of downstreams a client talks to),
//! and a full registry or an over-long name hands the value back instead of panicking.
//!
//! ```
//! use reliable_core::breaker::{BreakerConfig, BreakerPolicy, CircuitBreaker, NoWindow};
//! use reliable_core::registry::{InsertError, Registry};
//!
//! let policy = BreakerPolicy::new(BreakerConfig::layered_exercise()).unwrap();
//! // The breakers share one policy by reference: each stores only its state.
//! type Breaker<'p> = CircuitBreaker<&'p BreakerPolicy, NoWindow>;
//! let mut breakers: Registry<Breaker<'_>, 2, 16> = Registry::new();
//! breakers.insert("openai", Breaker::with_storage(&policy).unwrap()).unwrap();
//! breakers.insert("anthropic", Breaker::with_storage(&policy).unwrap()).unwrap();
//! assert!(breakers.get("openai").is_some());
//! // Full: the value comes back.
//! let third = Breaker::with_storage(&policy).unwrap();
//! assert!(matches!(breakers.insert("local", third), Err(InsertError::Full(_))));
//! ```

use heapless::{String, Vec};

/// Why [`Registry::insert`] refused a value; the value is handed back.
#[derive(Debug, PartialEq, Eq)]
pub enum InsertError<V> {
    /// All `N` entries are taken.
    Full(V),
    /// The name is longer than `K` bytes.
    NameTooLong(V),
}

impl<V> InsertError<V> {
    /// The value that was not inserted.
    pub fn into_value(self) -> V {
        match self {
            InsertError::Full(v) | InsertError::NameTooLong(v) => v,
        }
    }
}

/// Up to `N` values, each under a name of at most `K` bytes.
#[derive(Clone, Debug)]
pub struct Registry<V, const N: usize, const K: usize = 32> {
    entries: Vec<(String<K>, V), N>,
}

impl<V, const N: usize, const K: usize> Default for Registry<V, N, K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<V, const N: usize, const K: usize> Registry<V, N, K> {
    /// An empty registry.
    pub const fn new() -> Self {
        Registry {
            entries: Vec::new(),
        }
    }

    /// Inserts `value` under `name`, returning the value it replaced, if any.
    pub fn insert(&mut self, name: &str, value: V) -> Result<Option<V>, InsertError<V>> {
        if let Some(slot) = self.get_mut(name) {
            return Ok(Some(core::mem::replace(slot, value)));
        }
        let mut key = String::new();
        if key.push_str(name).is_err() {
            return Err(InsertError::NameTooLong(value));
        }
        self.entries
            .push((key, value))
            .map_err(|(_, v)| InsertError::Full(v))?;
        Ok(None)
    }

    /// The value under `name`.
    pub fn get(&self, name: &str) -> Option<&V> {
        self.entries
            .iter()
            .find(|(k, _)| k.as_str() == name)
            .map(|(_, v)| v)
    }

    /// The value under `name`, mutably.
    pub fn get_mut(&mut self, name: &str) -> Option<&mut V> {
        self.entries
            .iter_mut()
            .find(|(k, _)| k.as_str() == name)
            .map(|(_, v)| v)
    }

    /// Removes and returns the value under `name`.
    pub fn remove(&mut self, name: &str) -> Option<V> {
        let i = self.entries.iter().position(|(k, _)| k.as_str() == name)?;
        Some(self.entries.swap_remove(i).1)
    }

    /// Names and values, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &V)> {
        self.entries.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// Names and values, mutably.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (&str, &mut V)> {
        self.entries.iter_mut().map(|(k, v)| (k.as_str(), v))
    }

    /// How many entries are in use.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no entry is in use.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// `N`.
    pub const fn capacity(&self) -> usize {
        N
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_replace_remove_and_limits() {
        let mut r: Registry<u32, 2, 4> = Registry::new();
        assert_eq!(r.insert("a", 1), Ok(None));
        assert_eq!(r.insert("a", 2), Ok(Some(1)));
        assert_eq!(r.insert("toolong", 3), Err(InsertError::NameTooLong(3)));
        assert_eq!(r.insert("b", 4), Ok(None));
        assert_eq!(r.insert("c", 5), Err(InsertError::Full(5)));
        assert_eq!(r.insert("b", 6), Ok(Some(4)), "replacing works when full");
        assert_eq!(r.len(), 2);
        assert_eq!(r.remove("a"), Some(2));
        assert_eq!(r.remove("a"), None);
        assert_eq!(r.get("b"), Some(&6));
        *r.get_mut("b").unwrap() += 1;
        assert_eq!(r.iter().collect::<std::vec::Vec<_>>(), [("b", &7)]);
        assert_eq!(InsertError::Full(9).into_value(), 9);
    }
}

//! [`Registry`]: named instances, one per downstream, for services that call many (an agent's
//! tools, an MCP server's `create_breaker`).
//!
//! Create an instance once by name, get it anywhere (a clone shares its breaker and counts), list
//! the names, and take a [`Snapshot`] of each for a health page. The registry is a cheap handle:
//! clones share one map. It can be bounded, so names that come from outside (an agent, a request)
//! cannot grow it without limit.
//!
//! ```
//! use reliable::{Reliable, Registry, RegistryError};
//!
//! let registry = Registry::new();
//! let llm = registry.create(Reliable::builder("openai"))?;
//! assert!(matches!(registry.create(Reliable::builder("openai")), Err(RegistryError::Exists(_))));
//! assert_eq!(registry.get("openai").map(|r| r.label().to_string()), Some(llm.label().to_string()));
//! assert_eq!(registry.names(), ["openai"]);
//! assert_eq!(registry.snapshot()[0].state, Some(reliable_core::breaker::State::Closed));
//! # Ok::<(), RegistryError>(())
//! ```

use crate::builder::Builder;
use crate::error::BuildError;
use crate::{Reliable, Snapshot};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Named [`Reliable`] instances. Clones share the same map.
#[derive(Clone, Debug)]
pub struct Registry {
    map: Arc<RwLock<BTreeMap<String, Reliable>>>,
    limit: usize,
}

/// Why [`Registry::create`] refused.
#[derive(Clone, Debug, PartialEq)]
pub enum RegistryError {
    /// An instance of that name exists already.
    Exists(String),
    /// The registry holds as many instances as it may.
    Full {
        /// Its limit.
        limit: usize,
    },
    /// The instance's config was refused.
    Config(BuildError),
}

impl fmt::Display for RegistryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RegistryError::Exists(name) => write!(f, "an instance named {name:?} exists already"),
            RegistryError::Full { limit } => write!(f, "the registry is full ({limit} instances)"),
            RegistryError::Config(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for RegistryError {}

impl From<BuildError> for RegistryError {
    fn from(e: BuildError) -> Self {
        RegistryError::Config(e)
    }
}

impl Default for Registry {
    fn default() -> Self {
        Registry::new()
    }
}

impl Registry {
    /// An empty registry without a limit.
    pub fn new() -> Self {
        Registry::with_limit(usize::MAX)
    }

    /// An empty registry that holds at most `limit` instances.
    pub fn with_limit(limit: usize) -> Self {
        Registry {
            map: Arc::default(),
            limit,
        }
    }

    // A poisoned lock means a panic while the map was borrowed; every write is a single insert or
    // remove, so the map is consistent.
    fn read(&self) -> RwLockReadGuard<'_, BTreeMap<String, Reliable>> {
        self.map.read().unwrap_or_else(|p| p.into_inner())
    }
    fn write(&self) -> RwLockWriteGuard<'_, BTreeMap<String, Reliable>> {
        self.map.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Builds an instance and registers it under the builder's name. Refuses a name in use.
    pub fn create(&self, builder: Builder) -> Result<Reliable, RegistryError> {
        let mut map = self.write();
        if map.contains_key(builder.name()) {
            return Err(RegistryError::Exists(builder.name().to_string()));
        }
        if map.len() >= self.limit {
            return Err(RegistryError::Full { limit: self.limit });
        }
        let rel = builder.build()?;
        map.insert(rel.name().to_string(), rel.clone());
        Ok(rel)
    }

    /// The instance named `name`, built from `make(name)` and registered if there is none yet.
    pub fn get_or_create(
        &self,
        name: &str,
        make: impl FnOnce(&str) -> Builder,
    ) -> Result<Reliable, RegistryError> {
        if let Some(rel) = self.get(name) {
            return Ok(rel);
        }
        match self.create(make(name)) {
            // Another thread created it in between.
            Err(RegistryError::Exists(_)) => self
                .get(name)
                .ok_or_else(|| RegistryError::Exists(name.to_string())),
            other => other,
        }
    }

    /// The instance named `name`.
    pub fn get(&self, name: &str) -> Option<Reliable> {
        self.read().get(name).cloned()
    }

    /// Removes the instance named `name` (clones already handed out keep working).
    pub fn remove(&self, name: &str) -> Option<Reliable> {
        self.write().remove(name)
    }

    /// The names, sorted.
    pub fn names(&self) -> Vec<String> {
        self.read().keys().cloned().collect()
    }

    /// How many instances there are.
    pub fn len(&self) -> usize {
        self.read().len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.read().is_empty()
    }

    /// Every instance's state and totals, sorted by name.
    pub fn snapshot(&self) -> Vec<Snapshot> {
        // Clone out first: snapshots read clocks, and the lock should not be held meanwhile.
        let all: Vec<Reliable> = self.read().values().cloned().collect();
        all.iter().map(Reliable::snapshot).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_is_shareable_across_threads_and_tasks() {
        fn shareable<T: Clone + Send + Sync + 'static>() {}
        shareable::<Registry>();
    }

    #[test]
    fn create_get_list_remove_and_limits() {
        let r = Registry::with_limit(2);
        r.create(Reliable::builder("b")).unwrap();
        r.create(Reliable::builder("a")).unwrap();
        assert_eq!(r.names(), ["a", "b"]);
        assert_eq!(
            r.create(Reliable::builder("c")).unwrap_err(),
            RegistryError::Full { limit: 2 }
        );
        let err = r.create(Reliable::builder("a")).unwrap_err();
        assert_eq!(err.to_string(), "an instance named \"a\" exists already");
        assert!(r.remove("a").is_some());
        let e = r.create(Reliable::builder("c").attempts(0)).unwrap_err();
        assert!(matches!(e, RegistryError::Config(c) if c.field() == "retry.max_attempts"));
        let c = r
            .get_or_create("c", |n| Reliable::builder(n).attempts(2))
            .unwrap();
        let again = r.get_or_create("c", |_| unreachable!()).unwrap();
        assert!(Arc::ptr_eq(&c.inner, &again.inner), "one instance per name");
        assert_eq!(r.len(), 2);
        let snaps = r.snapshot();
        assert_eq!(
            snaps.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
            ["b", "c"]
        );
    }
}

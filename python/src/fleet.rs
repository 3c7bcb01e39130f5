//! A fleet's store in Python: `Store.redis(url)` or `Store.memory()`, handed to a policy loader
//! as `stores={"redis": store}` so that a policy's `scope: Fleet(store: "redis", ..)` keeps its
//! breaker or retry budget there, shared with every process using the same store, as the
//! simulator runs the same file and `reliable::policy::Route::fleet_builder` serves it in Rust.
//!
//! The fleet's breaker and budget are the std crate's (`reliable::fleet`): they decide on a view
//! of the store refreshed in the background, on one tokio thread this module starts the first
//! time a fleet policy is loaded, and fall back to each process's own state while the store
//! fails. A store URL's credentials are never shown: not in `repr`, not in an error.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use reliable::fleet::{FleetGates, MemoryStore, RedisStore, Store as StoreApi, redact_url};
use reliable::policy::{Plan, Stores};

/// Where a fleet's state lives: a Redis server, or this process's memory (for tests).
#[pyclass(module = "reliable", name = "Store", frozen)]
pub(crate) struct Store {
    inner: Arc<dyn StoreApi>,
    /// The URL without its credentials, or `memory`.
    shown: String,
    namespace: String,
}

#[pymethods]
impl Store {
    /// A Redis store at `url` (`redis://[user:password@]host:port[/db]`), its keys under
    /// `namespace`. It connects on first use; while it cannot be reached, each process decides
    /// on its own state.
    #[staticmethod]
    #[pyo3(signature = (url, namespace = "reliable"))]
    fn redis(url: &str, namespace: &str) -> PyResult<Store> {
        let store = RedisStore::open(url, namespace)
            .map_err(|e| PyValueError::new_err(format!("Store.redis: {e}")))?;
        Ok(Store {
            inner: Arc::new(store),
            shown: redact_url(url),
            namespace: namespace.to_owned(),
        })
    }

    /// A store in this process's memory: policies loaded with the same one share its state, as
    /// processes sharing a Redis would.
    #[staticmethod]
    #[pyo3(signature = (namespace = "reliable"))]
    fn memory(namespace: &str) -> Store {
        Store {
            inner: Arc::new(MemoryStore::new(namespace)),
            shown: "memory".to_owned(),
            namespace: namespace.to_owned(),
        }
    }

    fn __repr__(&self) -> String {
        format!("Store({}, namespace={:?})", self.shown, self.namespace)
    }
}

/// The tokio runtime the fleet's refreshes run on: one thread, started on first use.
fn runtime() -> PyResult<&'static tokio::runtime::Runtime> {
    static RUNTIME: OnceLock<Result<tokio::runtime::Runtime, String>> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name("reliable-fleet")
                .enable_all()
                .build()
                .map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| PyRuntimeError::new_err(format!("the fleet's runtime: {e}")))
}

/// The fleet breaker and budget a policy's `Fleet` scopes name, from `stores`, refused as
/// `reliable::policy::Route::fleet_gates` refuses (`mode: Exact`, a store not given, `Fleet` on a
/// `Limit` or `RateLimit`), with the file and the field.
pub(crate) fn gates<D: Clone>(
    name: &str,
    stack: &reliable_core::policy::Layer<D>,
    file: &str,
    stores: &HashMap<String, Py<Store>>,
) -> PyResult<FleetGates> {
    let refused = |e: reliable::policy::PolicyError| PyValueError::new_err(e.to_string());
    let entry = reliable_core::policy::Policy {
        name: name.to_owned(),
        stack: stack.clone(),
    };
    let plan = Plan::new(&entry, file).map_err(refused)?;
    let route = plan.route().map_err(refused)?;
    let mut names: Vec<&String> = stores.keys().collect();
    names.sort();
    let mut given = Stores::new();
    for n in names {
        given = given.add(n, stores[n].get().inner.clone());
    }
    let _inside = runtime()?.enter();
    route.fleet_gates(&given).map_err(refused)
}

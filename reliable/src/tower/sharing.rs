//! [`Sharing`]: whether a layer gives every service it wraps one breaker (throttle, budget) or each
//! its own, kept apart from the settings so that no setter undoes `shared()`.

use std::sync::{Arc, OnceLock};

/// Per wrapped service, or one for all. The shared value is built when the layer first wraps a
/// service, from the layer's settings then; a setter called afterwards starts a new one
/// ([`reset`](Self::reset)), so a value never mixes settings and the order of the calls does
/// not matter.
#[derive(Clone, Debug)]
pub(super) struct Sharing<T>(Option<Arc<OnceLock<T>>>);

impl<T: Clone> Sharing<T> {
    /// Each wrapped service gets its own.
    pub(super) fn per_service() -> Self {
        Sharing(None)
    }

    /// Every wrapped service (and every clone of the layer) gets the same one.
    pub(super) fn shared() -> Self {
        Sharing(Some(Arc::default()))
    }

    pub(super) fn is_shared(&self) -> bool {
        self.0.is_some()
    }

    /// A setting changed: what was built from the old settings is not handed out again, and
    /// sharing stays as it was.
    pub(super) fn reset(&mut self) {
        if self.is_shared() {
            *self = Self::shared();
        }
    }

    /// The value for the next wrapped service.
    pub(super) fn get(&self, make: impl FnOnce() -> T) -> T {
        match &self.0 {
            Some(cell) => cell.get_or_init(make).clone(),
            None => make(),
        }
    }
}

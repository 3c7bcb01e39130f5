//! The atomics of the lock-free types, in one place: `core`'s, or, when the crate's tests are
//! built with `--cfg loom`, the model checker's, so that `loom` can run a test under every
//! interleaving of its threads (the model-checking tests are in `breaker/model_check.rs`).
//! Normal builds use `core`'s atomics only, and the crate stays `no_std` without dependencies.

#[cfg(not(loom))]
pub(crate) use core::sync::atomic::AtomicU64;
#[cfg(loom)]
pub(crate) use loom::sync::atomic::AtomicU64;

/// `N` atomics holding 0.
#[cfg(not(loom))]
#[inline]
pub(crate) const fn zeroed<const N: usize>() -> [AtomicU64; N] {
    [const { AtomicU64::new(0) }; N]
}

/// `N` atomics holding 0 (loom's are built at run time, inside a model).
#[cfg(loom)]
pub(crate) fn zeroed<const N: usize>() -> [AtomicU64; N] {
    core::array::from_fn(|_| AtomicU64::new(0))
}

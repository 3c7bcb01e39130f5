//! # reliable: reliable-core's decisions applied to real calls in std and async Rust
//!
//! - [`tower`] (feature `tower`): tower layers (breaker, retry, adaptive throttle, fallback, and
//!   one layer that stacks them from one config).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

#[cfg(feature = "tower")]
pub mod tower;

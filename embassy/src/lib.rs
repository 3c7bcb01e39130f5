//! # reliable-embassy: reliable-core around an async call, for embedded code
//!
//! What the `reliable` crate gives tokio users, without `std` and without allocating: a
//! [`Reliable`] wraps an async call in a circuit breaker, retries it with backoff (the waits are
//! timers), gives each attempt a timeout that **drops** the attempt's future, pays retries from a
//! retry budget, and on refusal says when to come back ([`Error::retry_after`]). Every decision
//! is reliable-core's: the same policy decides the same way in the simulator, on a server and
//! here.
//!
//! Time comes from a [`Clock`]: [`EmbassyClock`] (feature `embassy`, on by default) reads
//! embassy-time and sleeps on its timers; without embassy, implement [`Clock`] for your own timer
//! (an RTIC monotonic, a HAL's timer, a virtual clock in a test). Nothing here spawns, and the
//! breaker, the budget and the random state sit in a `critical_section::Mutex`, held only while a
//! decision is made (never across an `.await`), so one `Reliable` can be shared by tasks of one
//! executor or of several priorities (put it in a `static` through `static_cell`, or pass `&`).
//!
//! ```
//! use reliable_core::breaker::{BreakerConfig, BreakerPolicy, CircuitBreaker, CountWindow};
//! use reliable_core::budget::{TokenBucket, TokenBucketConfig, TokenBucketPolicy};
//! use reliable_core::outcome::ErrorClass;
//! use reliable_core::retry::{RetryConfig, RetryPolicy};
//! use reliable_embassy::{EmbassyClock, Error, Reliable};
//!
//! #[derive(Debug)]
//! enum SensorError { Busy, Nack }
//!
//! async fn read_sensor() -> Result<u16, SensorError> {
//!     Ok(21)
//! }
//!
//! async fn sample(
//!     rel: &Reliable<CircuitBreaker<BreakerPolicy, CountWindow<20>>, TokenBucket, EmbassyClock>,
//! ) -> Option<u16> {
//!     let classify = |e: &SensorError| match e {
//!         SensorError::Busy => ErrorClass::Transient,
//!         SensorError::Nack => ErrorClass::Fatal,
//!     };
//!     match rel.call(classify, read_sensor).await {
//!         Ok(value) => Some(value),
//!         // Open: nothing was sent; come back after `retry_after`.
//!         Err(e @ Error::Open { .. }) => {
//!             let _come_back_in = e.retry_after();
//!             None
//!         }
//!         Err(_) => None,
//!     }
//! }
//!
//! # fn main() -> Result<(), reliable_core::ConfigError> {
//! let breaker = CircuitBreaker::with_storage(BreakerPolicy::new(BreakerConfig::reliablekit())?)?;
//! let retry = RetryPolicy::new(RetryConfig::reliablekit())?;
//! let budget = TokenBucket::new(TokenBucketPolicy::new(TokenBucketConfig::brooker_2022())?);
//! let rel = Reliable::new(breaker, retry, budget, EmbassyClock, 0x5EED);
//! # let _ = sample(&rel);
//! # Ok(())
//! # }
//! ```
#![no_std]
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod clock;
mod reliable;

pub use clock::Clock;
#[cfg(feature = "embassy")]
pub use clock::EmbassyClock;
pub use reliable::{Error, Reliable};

//! # reliable-embassy: reliable-core around an async call, for embedded code
//!
//! What the `reliable` crate gives tokio users, without `std` and without allocating: a
//! [`Reliable`] runs an async call through reliable-core's call engine
//! ([`reliable_core::engine`]), which decides every step of it: the circuit breaker, the
//! retries and their backoff (the waits are timers), each attempt's timeout (it **drops** the
//! attempt's future), the retry budget, and any other layer of a policy (an adaptive throttle,
//! a ledger of extra attempts, hedging, a concurrency or rate limit). On refusal it says when to
//! come back ([`Error::retry_after`]). The same policy decides the same way in the simulator, on
//! a server and here: the conformance suite holds this face to the same traces as the others.
//!
//! Time comes from a [`Clock`]: [`EmbassyClock`] (feature `embassy`, on by default) reads
//! embassy-time and sleeps on its timers; without embassy, implement [`Clock`] for your own timer
//! (an RTIC monotonic, a HAL's timer, a virtual clock in a test). Nothing here spawns: the
//! copies of a call run inside the call's own future. The state calls share ([`State`]: the
//! breaker, the budget, the random state, [`Extras`] for the other layers) sits in
//! `critical_section::Mutex`es, each held only while the engine decides (never across an
//! `.await`), so one `Reliable` can be shared by tasks of one executor or of several
//! priorities (put it in a `static` through `static_cell`, or pass `&`).
//!
//! ```
//! use reliable_core::breaker::{BreakerConfig, BreakerPolicy, CircuitBreaker, CountWindow};
//! use reliable_core::budget::{TokenBucket, TokenBucketConfig, TokenBucketPolicy};
//! use reliable_core::engine::Plan;
//! use reliable_core::outcome::ErrorClass;
//! use reliable_core::retry::{RetryConfig, RetryPolicy};
//! use reliable_embassy::{EmbassyClock, Error, Reliable, State};
//!
//! #[derive(Debug)]
//! enum SensorError { Busy, Nack }
//!
//! async fn read_sensor() -> Result<u16, SensorError> {
//!     Ok(21)
//! }
//!
//! type Breaker = CircuitBreaker<BreakerPolicy, CountWindow<20>>;
//!
//! async fn sample(rel: &Reliable<State<Breaker, TokenBucket>, EmbassyClock>) -> Option<u16> {
//!     let classify = |e: &SensorError| match e {
//!         SensorError::Busy => ErrorClass::Transient,
//!         SensorError::Nack => ErrorClass::Fatal,
//!     };
//!     match rel.call(classify, read_sensor).await {
//!         Ok(value) => Some(value),
//!         // Open: nothing more was sent; come back after `retry_after`.
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
//! let plan = Plan::new(RetryPolicy::new(RetryConfig::reliablekit())?);
//! let budget = TokenBucket::new(TokenBucketPolicy::new(TokenBucketConfig::brooker_2022())?);
//! let rel = Reliable::new(State::new(breaker, budget, 0x5EED), plan, EmbassyClock);
//! # let _ = sample(&rel);
//! # Ok(())
//! # }
//! ```
#![no_std]
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod clock;
mod reliable;
mod state;

pub use clock::Clock;
#[cfg(feature = "embassy")]
pub use clock::EmbassyClock;
pub use reliable::{Error, Reliable};
pub use state::{Extra, Extras, MaybeBreaker, NoBreaker, Part, State};

//! [`CancelToken`]: how blocking work learns that its attempt's time is up.
//!
//! A blocking thread cannot be stopped from outside; what can be done is to tell the work and
//! let it stop itself. The token carries the attempt's deadline: pass
//! [`remaining`](CancelToken::remaining) to your client's own timeout (a blocking HTTP client's
//! `timeout`, a socket's `set_read_timeout`), so the socket really closes on time, and check
//! [`is_cancelled`](CancelToken::is_cancelled) between steps of long work.
//!
//! ```
//! use reliable::Reliable;
//! use std::time::Duration;
//!
//! let rel = Reliable::builder("batch").timeout(Duration::from_secs(2)).build()?;
//! let done = rel.call_blocking_cancellable(|token| {
//!     let mut steps = 0;
//!     while steps < 3 && !token.is_cancelled() {
//!         steps += 1; // one bounded step of work
//!     }
//!     assert!(token.remaining().unwrap() <= Duration::from_secs(2));
//!     Ok::<_, std::io::Error>(steps)
//! });
//! assert_eq!(done.unwrap(), 3);
//! # Ok::<(), reliable::ConfigError>(())
//! ```

use crate::clock::Clock;
use reliable_core::Instant;
use std::time::Duration;

/// The deadline of one blocking attempt, as the work sees it.
#[derive(Clone, Copy, Debug)]
pub struct CancelToken<'a> {
    clock: &'a dyn Clock,
    deadline: Option<Instant>,
}

impl<'a> CancelToken<'a> {
    pub(crate) fn new(clock: &'a dyn Clock, deadline: Option<Instant>) -> Self {
        CancelToken { clock, deadline }
    }

    /// Whether the attempt's time is up: the work should stop, its answer will count as a timeout.
    pub fn is_cancelled(&self) -> bool {
        self.deadline.is_some_and(|d| self.clock.now() >= d)
    }

    /// Time left for this attempt (`None`: no limit); zero once it is up.
    pub fn remaining(&self) -> Option<Duration> {
        self.deadline
            .map(|d| d.saturating_duration_since(self.clock.now()).into())
    }
}

//! [`CancelToken`]: how blocking work learns that its attempt's time is up.
//!
//! A blocking thread cannot be stopped from outside; what can be done is to tell the work and
//! let it stop itself. The token carries the attempt's deadline: pass
//! [`remaining`](CancelToken::remaining) to your client's own timeout (a blocking HTTP client's
//! `timeout`, a socket's `set_read_timeout`), so the socket really closes on time, and check
//! [`is_cancelled`](CancelToken::is_cancelled) between steps of long work. With
//! [`call_blocking_detached`](crate::Reliable::call_blocking_detached) the caller also stops
//! waiting at the deadline, and the token is cancelled then.
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
//! # Ok::<(), reliable::BuildError>(())
//! ```

use crate::clock::Clock;
use reliable_core::Instant;
use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// The deadline of one blocking attempt, as the work sees it.
#[derive(Debug)]
pub struct CancelToken<'a> {
    source: Source<'a>,
    deadline: Option<Instant>,
    /// The work was told its time is up ([`is_cancelled`](Self::is_cancelled) said so): it was
    /// interrupted, and its answer counts as a timeout.
    told: Cell<bool>,
}

impl Clone for CancelToken<'_> {
    fn clone(&self) -> Self {
        CancelToken {
            source: self.source.clone(),
            deadline: self.deadline,
            told: Cell::new(self.told.get()),
        }
    }
}

/// Where the time comes from. An attempt on the caller's thread borrows the instance's clock, so
/// its token owns nothing and costs nothing to make or drop; detached work owns its share.
#[derive(Clone, Debug)]
enum Source<'a> {
    Borrowed(&'a dyn Clock),
    Detached(Arc<Detached>),
}

#[derive(Debug)]
struct Detached {
    clock: Arc<dyn Clock>,
    /// Set when the caller stopped waiting.
    abandoned: AtomicBool,
}

impl<'a> CancelToken<'a> {
    #[inline]
    pub(crate) fn new(clock: &'a dyn Clock, deadline: Option<Instant>) -> Self {
        CancelToken {
            source: Source::Borrowed(clock),
            deadline,
            told: Cell::new(false),
        }
    }

    fn now(&self) -> Instant {
        match &self.source {
            Source::Borrowed(c) => c.now(),
            Source::Detached(d) => d.clock.now(),
        }
    }

    /// Whether the attempt's time is up (or the caller stopped waiting): the work should stop;
    /// its answer will count as a timeout.
    pub fn is_cancelled(&self) -> bool {
        let abandoned = match &self.source {
            Source::Borrowed(_) => false,
            Source::Detached(d) => d.abandoned.load(Ordering::Acquire),
        };
        let up = abandoned || self.deadline.is_some_and(|d| self.now() >= d);
        if up {
            self.told.set(true);
        }
        up
    }

    /// Whether the work was told its time is up: then it was interrupted, and whatever it
    /// answers is a timeout.
    #[inline]
    pub(crate) fn was_told(&self) -> bool {
        self.told.get()
    }

    /// Time left for this attempt (`None`: no limit); zero once it is up.
    pub fn remaining(&self) -> Option<Duration> {
        self.deadline
            .map(|d| d.saturating_duration_since(self.now()).into())
    }
}

impl CancelToken<'static> {
    /// A token for work on a thread of its own, which the caller may stop waiting for
    /// ([`abandon`](Self::abandon)).
    pub(crate) fn detached(clock: Arc<dyn Clock>, deadline: Option<Instant>) -> Self {
        CancelToken {
            source: Source::Detached(Arc::new(Detached {
                clock,
                abandoned: AtomicBool::new(false),
            })),
            deadline,
            told: Cell::new(false),
        }
    }

    /// The caller stopped waiting: this token and its clones are cancelled from now on.
    pub(crate) fn abandon(&self) {
        if let Source::Detached(d) = &self.source {
            d.abandoned.store(true, Ordering::Release);
        }
    }
}

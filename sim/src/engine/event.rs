//! The events of a run and what each carries.
//!
//! An event is 32 bytes: its time, its sequence number and a 16-byte payload. Payloads refer to
//! requests and attempts by slab index plus generation (see [`Handle`]), never by
//! pointer, so a reply for an attempt that already timed out is recognised and dropped.

use super::slab::Handle;

/// One scheduled event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    /// When it fires, in nanoseconds of virtual time.
    pub time: u64,
    /// Scheduling order: ties on `time` run in this order.
    pub seq: u64,
    /// What happens.
    pub kind: EventKind,
}

impl Event {
    /// The ordering key.
    #[inline]
    pub fn key(&self) -> (u64, u64) {
        (self.time, self.seq)
    }
}

/// What an event does when it fires.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// The open-loop source emits its next arrival.
    Arrival,
    /// A closed-loop or job-set client starts its next logical request.
    ClientStart {
        /// The client.
        client: u32,
    },
    /// An attempt's request reaches its downstream (a register: its read).
    AtDownstream {
        /// The downstream index.
        ds: u16,
        /// The attempt.
        attempt: Handle,
    },
    /// A server worker finished a job.
    ServiceDone {
        /// The downstream index.
        ds: u16,
        /// The attempt the job served.
        attempt: Handle,
        /// Service time in microseconds (for busy and wasted-work accounting).
        work_us: u32,
    },
    /// A reply reaches the client.
    Reply {
        /// The downstream that answered (a partition of it holds the reply).
        ds: u16,
        /// The attempt.
        attempt: Handle,
        /// What the downstream answered.
        reply: Reply,
        /// Extra: for [`Reply::Throttled`], the index of the throttle hint in the world's table;
        /// for [`Reply::Status`], the index of the status.
        hint: u16,
    },
    /// A register read's reply reaches the client, which now sends its conditional write.
    RegisterRead {
        /// The downstream index.
        ds: u16,
        /// The attempt.
        attempt: Handle,
        /// The version the read saw (wrapping).
        version: u32,
    },
    /// A register write reaches the register.
    RegisterWrite {
        /// The downstream index.
        ds: u16,
        /// The attempt.
        attempt: Handle,
        /// The version the write is conditional on.
        version: u32,
    },
    /// An attempt's timer ran out.
    Timeout {
        /// The attempt.
        attempt: Handle,
    },
    /// A retry layer's backoff is over: invoke its inner layer again.
    Wake {
        /// The logical request.
        request: Handle,
        /// The stack node that waits.
        node: u16,
    },
    /// A fleet breaker's store answered: the call goes on, or is refused.
    StoreAnswer {
        /// The logical request.
        request: Handle,
        /// The `Breaker` node that waits.
        node: u16,
    },
    /// A fault starts or ends (servers re-check their capacity).
    FaultEdge {
        /// The fault index.
        fault: u16,
    },
    /// A metrics bucket ends: sample the gauges.
    Sample,
}

/// What a downstream answered to one attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reply {
    /// Success.
    Ok,
    /// A transient error after serving (an injected error).
    Error,
    /// Refused without serving (full queue, fail-fast outage).
    Unavailable,
    /// Throttled, with a Retry-After hint.
    Throttled,
    /// A permanent error: retrying cannot help.
    Fatal,
    /// A write lost an optimistic-concurrency race.
    Conflict,
    /// An LLM provider's 429 for a per-key limit; the event's `hint` is `retry-after` in seconds.
    RateLimited,
    /// An LLM provider's 529: overloaded.
    Overloaded,
    /// An LLM provider's 429 with a money-limit body.
    MoneyLimit,
    /// A scripted status; the event's `hint` is its index in the scenario's table of them.
    Status,
    /// A scripted reset connection: no answer.
    Reset,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_stay_small() {
        assert!(std::mem::size_of::<EventKind>() <= 16);
        assert_eq!(std::mem::size_of::<Event>(), 32);
    }
}

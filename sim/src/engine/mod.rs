//! The discrete-event engine: virtual time, the event queue and random streams.
//!
//! Time is the core's integer [`Instant`](reliable_core::Instant) (nanoseconds). Events are ordered
//! by `(time, sequence)`, where the sequence number is assigned when an event is scheduled, so two
//! events at the same instant run in the order they were scheduled: no tie is ever broken by a hash,
//! an address or a thread. Events are never removed from the queue: a cancelled timer is recognised
//! when it fires, because the object it refers to carries a newer generation (lazy cancellation).

pub mod event;
pub mod heap;
pub mod queue;
pub mod rng;
pub mod slab;

pub use event::{Event, EventKind};
pub use queue::{EventQueue, Lane};
pub use rng::{Stream, StreamId};
pub use slab::{Handle, Slab};

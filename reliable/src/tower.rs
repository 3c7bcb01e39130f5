//! Tower layers over the same machinery (feature `tower`).
//!
//! A layer holds a [`Reliable`](crate::Reliable) and drives each request through
//! [`Reliable::start`](crate::Reliable::start) and [`Run`](crate::attempt::Run) (or simply
//! [`Reliable::call_with`](crate::Reliable::call_with) around a clone of the inner service), so a
//! service stack and a hand-written call share one breaker, one budget and one set of counts.
//! The layers themselves live in this module.

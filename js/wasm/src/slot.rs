//! A call slot: an engine call, the plan it runs and the world it draws from, kept together in
//! the world's table across exports.
//!
//! The call is the engine's borrow-free [`CallState`]: it owns no reference, so the slot holds
//! the plan by value beside it and hands both to every step. Nothing here is `unsafe`.

use core::cell::RefCell;

use reliable_core::Instant;
use reliable_core::engine::{Action, CallState, Input, Plan};

use crate::{COPIES, World};

/// A call in flight, decided by the core's engine: its state, its plan and its world.
#[derive(Debug)]
pub struct EngineCall {
    plan: Plan,
    world: &'static World,
    state: CallState<COPIES>,
}

impl EngineCall {
    /// Takes an input at `now`.
    pub fn handle(&mut self, now: Instant, input: Input) {
        self.state.handle(&self.plan, self.world, now, input);
    }

    /// The next action, if any.
    pub fn poll(&mut self) -> Option<Action> {
        self.state.poll()
    }

    /// Actions queued, not polled yet.
    pub fn queued(&self) -> usize {
        self.state.queued()
    }

    /// When to wake the call, if it waits for the time.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.state.poll_timeout(self.world)
    }

    /// Whether the call is over.
    pub fn is_done(&self) -> bool {
        self.state.is_done()
    }
}

/// One slot of the call table.
#[derive(Debug, Default)]
pub struct CallCell {
    call: RefCell<Option<EngineCall>>,
}

impl CallCell {
    /// An empty slot.
    pub const fn new() -> Self {
        CallCell {
            call: RefCell::new(None),
        }
    }

    /// Starts a call running `plan` at `now` in this slot (a call still here is dropped first).
    /// False if the slot is in use by an export (never: exports are not re-entered).
    pub fn start(&self, plan: Plan, world: &'static World, now: Instant) -> bool {
        let Ok(mut call) = self.call.try_borrow_mut() else {
            return false;
        };
        let state = CallState::start(&plan, world, now);
        *call = Some(EngineCall { plan, world, state });
        true
    }

    /// Runs `f` on the call in this slot; `None` if there is none (or it is borrowed already).
    pub fn with<R>(&self, f: impl FnOnce(&mut EngineCall) -> R) -> Option<R> {
        let mut call = self.call.try_borrow_mut().ok()?;
        call.as_mut().map(f)
    }

    /// Drops the call in this slot.
    pub fn clear(&self) {
        if let Ok(mut call) = self.call.try_borrow_mut() {
            *call = None;
        }
    }
}

//! A call slot: an engine call and the plan it runs, pinned side by side in the world's table.
//!
//! The engine's [`Call`] borrows its [`Plan`]; a call kept across exports in a table needs the
//! plan to outlive it at a fixed place. The slot is inside the world, which lives in a `static`
//! (or, in tests, is leaked), so it never moves; the plan is written only while no call of the
//! slot is alive, and the only reference to it is the call's own, which never leaves the slot.
#![allow(unsafe_code)]

use core::cell::{RefCell, UnsafeCell};
use core::mem::MaybeUninit;

use reliable_core::Instant;
use reliable_core::engine::{Call, Plan};

use crate::{EngineCall, World};

/// One slot of the call table.
pub struct CallCell {
    plan: UnsafeCell<MaybeUninit<Plan>>,
    call: RefCell<Option<EngineCall>>,
}

impl core::fmt::Debug for CallCell {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("CallCell")
    }
}

impl Default for CallCell {
    fn default() -> Self {
        Self::new()
    }
}

impl CallCell {
    /// An empty slot.
    pub const fn new() -> Self {
        CallCell {
            plan: UnsafeCell::new(MaybeUninit::uninit()),
            call: RefCell::new(None),
        }
    }

    /// Starts a call running `plan` at `now` in this slot (a call still here is dropped first).
    /// False if the slot is in use by an export (never: exports are not re-entered).
    pub fn start(&'static self, plan: Plan, world: &'static World, now: Instant) -> bool {
        let Ok(mut call) = self.call.try_borrow_mut() else {
            return false;
        };
        // Drops the slot's previous call: the only reference to the plan written before.
        *call = None;
        // SAFETY: no reference to the plan is alive (the previous call held the only one and is
        // gone; the borrow of `call` held here keeps another from being made meanwhile), so
        // writing it is exclusive. The reference handed to the new call points into `self`,
        // which is `'static`, and is stored only in `self.call`, which `clear` and `start`
        // empty before the plan is ever written again.
        let plan: &'static Plan = unsafe {
            let slot = &mut *self.plan.get();
            slot.write(plan);
            &*slot.as_ptr()
        };
        *call = Some(Call::start(plan, world, now));
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

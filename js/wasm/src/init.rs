//! Builds the world in place: `World::new()` would build it on the stack first, and the tables
//! (megabytes) are past the 1 MiB stack of a wasm32 module: the stack would run below address 0
//! and every export would trap.
#![allow(unsafe_code)]

use core::cell::{Cell, RefCell};

use crate::{CallSlot, Events, Slots, World};

/// Writes an empty world at `w`.
///
/// # Safety
/// `w` points to memory for a `World`, which this writes whole (nothing is read).
pub(crate) unsafe fn world(w: *mut World) {
    // SAFETY: every field of `*w` is written once through raw pointers, nothing is read.
    unsafe {
        array(&raw mut (*w).breakers, || RefCell::new(None));
        (&raw mut (*w).breaker_slots).write(Slots::new());
        array(&raw mut (*w).policies, || RefCell::new(None));
        (&raw mut (*w).policy_slots).write(Slots::new());
        array(&raw mut (*w).calls, CallSlot::new);
        (&raw mut (*w).call_slots).write(Slots::new());
        (&raw mut (*w).current).write(Cell::new(u32::MAX));
        (&raw mut (*w).last_call).write(Cell::new(u32::MAX));
        (&raw mut (*w).builder).write(RefCell::new(crate::policy::Builder::default()));
        (&raw mut (*w).read_error).write(Cell::new(None));
        (&raw mut (*w).samples).write(Cell::new((0, 0)));
        (&raw mut (*w).used).write(Cell::new(0));
        (&raw mut (*w).events).write(Events::default());
        (&raw mut (*w).record).write(Cell::new([0.0; crate::RECORD]));
        (&raw mut (*w).gave_up).write(Cell::new(""));
        (&raw mut (*w).chaos).write(crate::chaos::Table::new());
    }
}

/// # Safety
/// `a` points to memory for `N` values of `T`, which this writes whole.
unsafe fn array<T, const N: usize>(a: *mut [T; N], make: impl Fn() -> T) {
    let first = a.cast::<T>();
    for i in 0..N {
        // SAFETY: `i < N`, inside the array.
        unsafe { first.add(i).write(make()) };
    }
}

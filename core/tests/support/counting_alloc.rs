//! A global allocator that counts the allocations of the current thread, for the zero-allocation
//! tests. Counts are per thread, so tests running in parallel (and the harness's own threads)
//! cannot disturb each other's figures.
//!
//! A test file includes it with `#[path = "support/counting_alloc.rs"] mod counting_alloc;` and
//! measures with [`counted`]. Each test file should keep a negative control (an allocation that
//! must be seen), so a zero means something.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: every call is forwarded unchanged to the system allocator; only a thread-local counter is
// added, with `try_with` because the slot may be gone while the thread is being torn down.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Runs `f` and returns its result with the number of allocations it made on this thread.
pub fn counted<R>(f: impl FnOnce() -> R) -> (R, u64) {
    let before = ALLOCATIONS.with(Cell::get);
    let r = f();
    (r, ALLOCATIONS.with(Cell::get) - before)
}

//! The panic handler of the measured programs, which proves there is no panic path.

use core::panic::PanicInfo;

unsafe extern "C" {
    /// Defined nowhere. The panic handler calls it, so if the optimiser leaves any path to a
    /// panic, the link fails with "undefined symbol: panic_path_survived_optimisation".
    fn panic_path_survived_optimisation() -> !;
}

#[panic_handler]
fn panic(_: &PanicInfo<'_>) -> ! {
    // SAFETY: never called in a binary that links (the symbol does not exist).
    unsafe { panic_path_survived_optimisation() }
}

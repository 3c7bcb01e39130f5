//! The decision trace on a Cortex-M4F: QEMU's `mps2-an386` machine runs it, it prints the trace
//! through semihosting and exits with status 0. CI compares what it prints with the host's
//! `cargo run -p decision-trace`, byte for byte. It has the same start-up and the same panic
//! handler as the measured programs, so it links only if no panic path is left in the core's
//! code that the script reaches.
#![no_std]
#![no_main]

#[path = "../rt.rs"]
mod rt;
#[path = "../semihosting.rs"]
mod semihosting;

/// A panic ends the run with exit status 1 after saying so (the trace comparison fails too).
#[panic_handler]
fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
    let mut console = semihosting::Console::new();
    decision_trace::Out::put(&mut console, b"\npanic\n");
    semihosting::exit(false)
}

fn run() -> ! {
    let mut console = semihosting::Console::new();
    decision_trace::run(&mut console);
    console.flush();
    semihosting::exit(true)
}

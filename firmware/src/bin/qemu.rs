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
    stack::paint();
    let mut console = semihosting::Console::new();
    decision_trace::run(&mut console);
    // The target's own report, after the trace: `# target` lines are not part of the comparison.
    let mut report = decision_trace::Trace::new(&mut console);
    report
        .s("# target")
        .kv("stack_bytes", stack::used() as u64)
        .end();
    console.flush();
    semihosting::exit(true)
}

/// The stack's high-water mark: the free RAM is filled with a pattern before the run, and what
/// the run overwrote is what it used.
mod stack {
    use core::ptr::{read_volatile, write_volatile};

    unsafe extern "C" {
        static mut __ebss: u32;
        static __stack_top: u32;
    }

    const PAINT: u32 = 0xDEAD_BEEF;
    /// Left unpainted below the painter's own stack pointer (its frame and its callees').
    const MARGIN: usize = 256;

    /// Paints from the end of .bss up to `MARGIN` bytes below the current stack pointer.
    #[inline(never)]
    pub fn paint() {
        let sp: usize;
        // SAFETY: reads the stack pointer into a register; no memory is touched.
        unsafe { core::arch::asm!("mov {}, sp", out(reg) sp, options(nomem, nostack)) };
        let mut p = &raw mut __ebss;
        // SAFETY: the words between the end of .bss and the live stack belong to no one yet.
        unsafe {
            while (p as usize) + MARGIN < sp {
                write_volatile(p, PAINT);
                p = p.add(1);
            }
        }
    }

    /// Bytes of stack used since [`paint`]: from the top down to the lowest word not still
    /// painted.
    pub fn used() -> usize {
        let mut p = &raw const __ebss;
        let top = &raw const __stack_top as usize;
        // SAFETY: reads words between the end of .bss and the stack's top, all in RAM.
        unsafe {
            while (p as usize) < top && read_volatile(p) == PAINT {
                p = p.add(1);
            }
        }
        top - p as usize
    }
}

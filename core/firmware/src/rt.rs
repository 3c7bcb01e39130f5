//! The start-up both programs share: the reset vector, RAM set-up, the FPU, the registers the
//! programs read and write, and the panic handler that proves there is no panic path.

use core::panic::PanicInfo;
use core::ptr::{read_volatile, write_volatile};

unsafe extern "C" {
    /// Defined nowhere. The panic handler calls it, so if the optimiser leaves any path to a
    /// panic, the link fails with "undefined symbol: panic_path_survived_optimisation".
    fn panic_path_survived_optimisation() -> !;
    static mut __sbss: u32;
    static mut __ebss: u32;
    static mut __sdata: u32;
    static mut __edata: u32;
    static __sidata: u32;
}

#[panic_handler]
fn panic(_: &PanicInfo<'_>) -> ! {
    // SAFETY: never called in a binary that links (the symbol does not exist).
    unsafe { panic_path_survived_optimisation() }
}

#[used]
#[unsafe(link_section = ".vector_table.reset")]
static RESET_VECTOR: unsafe extern "C" fn() -> ! = reset;

/// The cycle counter (DWT_CYCCNT), the clock both programs read.
const DWT_CYCCNT: *const u32 = 0xE000_1004 as *const u32;
/// An input register (GPIOA_IDR of an STM32F4): pin 0 says whether the downstream answered.
const GPIOA_IDR: *const u32 = 0x4002_0010 as *const u32;
/// An output register (GPIOA_ODR): where the programs report.
const GPIOA_ODR: *mut u32 = 0x4002_0014 as *mut u32;
/// Coprocessor access control: full access to CP10 and CP11 (the FPU).
const CPACR: *mut u32 = 0xE000_ED88 as *mut u32;

#[unsafe(no_mangle)]
unsafe extern "C" fn reset() -> ! {
    // SAFETY: the linker script defines these symbols around .bss and .data; nothing has used RAM
    // yet, and the addresses are word-aligned.
    unsafe {
        let mut p = &raw mut __sbss;
        while p < &raw mut __ebss {
            write_volatile(p, 0);
            p = p.add(1);
        }
        let (mut d, mut s) = (&raw mut __sdata, &raw const __sidata);
        while d < &raw mut __edata {
            write_volatile(d, read_volatile(s));
            d = d.add(1);
            s = s.add(1);
        }
        write_volatile(CPACR, read_volatile(CPACR) | (0xF << 20));
    }
    crate::run()
}

/// The cycle counter: 32 bits, wrapping.
pub fn cycles() -> u32 {
    // SAFETY: a memory-mapped register, always readable.
    unsafe { read_volatile(DWT_CYCCNT) }
}

/// Whether the downstream answered the call just made.
pub fn answered() -> bool {
    // SAFETY: a memory-mapped register, always readable.
    unsafe { read_volatile(GPIOA_IDR) & 1 == 1 }
}

/// Reports a value on the output pins.
pub fn report(value: u32) {
    // SAFETY: a memory-mapped register, always writable.
    unsafe { write_volatile(GPIOA_ODR, value) }
}

/// A 64-bit clock in ticks from the wrapping cycle counter, called often enough to see each wrap.
#[derive(Default)]
pub struct Clock {
    last: u32,
    high: u64,
}

impl Clock {
    pub fn ticks(&mut self) -> u64 {
        let now = cycles();
        if now < self.last {
            self.high += 1 << 32;
        }
        self.last = now;
        self.high | u64::from(now)
    }
}

//! The start-up every program shares: the reset vector, RAM set-up and the FPU.

use core::ptr::{read_volatile, write_volatile};

unsafe extern "C" {
    static mut __sbss: u32;
    static mut __ebss: u32;
    static mut __sdata: u32;
    static mut __edata: u32;
    static __sidata: u32;
}

#[used]
#[unsafe(link_section = ".vector_table.reset")]
static RESET_VECTOR: unsafe extern "C" fn() -> ! = reset;

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

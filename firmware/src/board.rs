//! The board the measured programs run on (an STM32F4-class part): the cycle counter as the clock,
//! an input pin for the downstream's answer, the output pins for reports.

use core::ptr::{read_volatile, write_volatile};

/// The cycle counter (DWT_CYCCNT), the clock both programs read.
const DWT_CYCCNT: *const u32 = 0xE000_1004 as *const u32;
/// An input register (GPIOA_IDR of an STM32F4): pin 0 says whether the downstream answered.
const GPIOA_IDR: *const u32 = 0x4002_0010 as *const u32;
/// An output register (GPIOA_ODR): where the programs report.
const GPIOA_ODR: *mut u32 = 0x4002_0014 as *mut u32;

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

//! Output and exit through Arm semihosting: the `bkpt 0xAB` trap that a debugger, or QEMU with
//! `-semihosting-config enable=on,target=native`, answers. On a board without a debugger attached
//! the trap is a fault, so only the emulated program uses it.

/// SYS_WRITE0: writes the NUL-terminated string at the address in r1 to the host's console.
const SYS_WRITE0: u32 = 0x04;
/// SYS_EXIT: stops the program; r1 holds the reason, which QEMU turns into its exit status.
const SYS_EXIT: u32 = 0x18;
/// Reason "the application exited": QEMU exits with status 0.
const ADP_STOPPED_APPLICATION_EXIT: u32 = 0x2_0026;
/// Reason "run-time error": QEMU exits with status 1.
const ADP_STOPPED_RUN_TIME_ERROR: u32 = 0x2_0023;

/// Makes semihosting call `op` with the parameter `arg` (a value or an address, as `op` says).
fn call(op: u32, arg: usize) {
    // SAFETY: the semihosting trap reads at most the memory `arg` points to for the two calls made
    // here (a NUL-terminated buffer this module owns, or nothing), and returns in r0.
    unsafe {
        core::arch::asm!("bkpt #0xab", inout("r0") op => _, in("r1") arg, options(nostack));
    }
}

/// A console that writes whole lines: bytes are kept until a newline (or a full buffer), then
/// written with one trap.
pub struct Console {
    line: [u8; 256],
    len: usize,
}

impl Console {
    pub const fn new() -> Self {
        Console {
            line: [0; 256],
            len: 0,
        }
    }

    /// Writes what is kept.
    pub fn flush(&mut self) {
        if let Some(end) = self.line.get_mut(self.len) {
            *end = 0;
            call(SYS_WRITE0, self.line.as_ptr() as usize);
        }
        self.len = 0;
    }

    fn push(&mut self, byte: u8) {
        // The last byte of the buffer is kept for the NUL.
        if self.len + 1 >= self.line.len() {
            self.flush();
        }
        if let Some(slot) = self.line.get_mut(self.len) {
            *slot = byte;
            self.len += 1;
        }
        if byte == b'\n' {
            self.flush();
        }
    }
}

impl decision_trace::Out for Console {
    fn put(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.push(byte);
        }
    }
}

/// Stops the emulator: exit status 0 if `ok`, 1 otherwise.
pub fn exit(ok: bool) -> ! {
    let reason = if ok {
        ADP_STOPPED_APPLICATION_EXIT
    } else {
        ADP_STOPPED_RUN_TIME_ERROR
    };
    call(SYS_EXIT, reason as usize);
    // Not reached under QEMU; without a host to stop it, stay here.
    loop {
        core::hint::spin_loop();
    }
}

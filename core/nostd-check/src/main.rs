//! Drives the core with no std and no allocator; exits 0 if every answer is as expected.
#![no_std]
#![no_main]

use core::panic::PanicInfo;

use reliable_core::breaker::{BreakerConfig, BreakerPolicy, CircuitBreaker, CountWindow, NoWindow, Outcome, State};
use reliable_core::registry::Registry;
use reliable_core::{Duration, Instant};

#[panic_handler]
fn panic(_: &PanicInfo<'_>) -> ! {
    // No unwinding and no std: leave with a distinct status through libc.
    unsafe extern "C" {
        fn _exit(code: i32) -> !;
    }
    // SAFETY: `_exit` never returns and takes a plain integer.
    unsafe { _exit(101) }
}

fn check(ok: bool, code: i32) -> Result<(), i32> {
    if ok { Ok(()) } else { Err(code) }
}

fn breaker_timeline() -> Result<(), i32> {
    let policy = BreakerPolicy::new(BreakerConfig::layered_exercise()).map_err(|_| 10)?;
    let mut b = CircuitBreaker::<NoWindow, 1>::new(&policy).map_err(|_| 11)?;
    let t = Instant::from_secs;
    for now in [15, 20] {
        let p = b.try_acquire(t(now)).map_err(|_| 12)?;
        b.record(p, Outcome::Failure, t(now));
    }
    let r = b.try_acquire(t(25)).err().and_then(|r| r.retry_after());
    check(r == Some(Duration::from_secs(15)), 13)?;
    let trial = b.try_acquire(t(40)).map_err(|_| 14)?;
    let closed = b.record(trial, Outcome::Success, t(40));
    check(closed.map(|c| c.to) == Some(State::Closed), 15)
}

fn windowed_registry() -> Result<(), i32> {
    let policy = BreakerPolicy::new(BreakerConfig::reliablekit()).map_err(|_| 20)?;
    let mut reg: Registry<CircuitBreaker<'_, CountWindow<1>, 1>, 4, 16> = Registry::new();
    reg.insert("primary", CircuitBreaker::new(&policy).map_err(|_| 21)?).map_err(|_| 22)?;
    let b = reg.get_mut("primary").ok_or(23)?;
    let mut now = Instant::ZERO;
    for i in 0..40u64 {
        now += Duration::from_millis(10);
        if let Ok(p) = b.try_acquire(now) {
            b.record(p, if i % 2 == 0 { Outcome::Failure } else { Outcome::Success }, now);
        }
    }
    check(b.state(now) == State::Open, 24)
}

#[unsafe(no_mangle)]
extern "C" fn main(_argc: i32, _argv: *const *const u8) -> i32 {
    match breaker_timeline().and_then(|()| windowed_registry()) {
        Ok(()) => 0,
        Err(code) => code,
    }
}

//! The client loop of `firmware`, written with reliable-embassy: the call is an async attempt
//! (100 µs on the bus, then the downstream's answer from the input pin) that `Reliable::call`
//! drives through the core's call engine: the breaker, retries with backoff on embassy-time
//! timers, a 2 ms timeout per attempt, retries paid for from the token bucket. embassy-time's driver here reads the cycle counter and wakes at once
//! (the loop polls), and a noop waker stands in for an executor: what is measured is the wrapper,
//! embassy-time and the core, not a scheduler.
//!
//! Unlike `firmware`, it keeps panic paths the optimiser cannot remove (see `panic` below), so
//! its panic handler reports and stops instead of proving their absence.
#![no_std]
#![no_main]

// Shared with the other programs; this one uses part of each.
#[allow(dead_code)]
#[path = "../board.rs"]
mod board;
#[allow(dead_code)]
#[path = "../policies.rs"]
mod policies;
#[path = "../rt.rs"]
mod rt;

use core::cell::Cell;
use core::future::Future;
use core::pin::pin;
use core::task::{Context, Poll, Waker};

use cortex_m as _; // the critical-section implementation: one core, interrupts off
use critical_section::Mutex;
use embassy_time::Timer;
use reliable_core::Duration;
use reliable_core::breaker::{BreakerPolicy, CircuitBreaker, CountWindow};
use reliable_core::budget::TokenBucket;
use reliable_core::engine::Plan;
use reliable_core::outcome::ErrorClass;
use reliable_core::retry::{RetryConfig, RetryPolicy};
use reliable_embassy::{EmbassyClock, Reliable, State};

/// The call's plan: `firmware`'s retry policy with a per-attempt timeout.
static PLAN: Plan = Plan::new(policies::valid(RetryPolicy::new(RetryConfig {
    attempt_timeout: Some(Duration::from_millis(2)),
    ..policies::RETRY_CONFIG
})));

/// The policies stay in flash: the wrapper borrows them.
type Client = Reliable<
    State<CircuitBreaker<&'static BreakerPolicy, CountWindow<64>>, TokenBucket>,
    EmbassyClock,
    &'static Plan,
>;

/// The wrapper's size, as the size of this symbol (`nm -S`): the RAM its state takes.
#[used]
#[unsafe(no_mangle)]
static RAM_PER_RELIABLE: [u8; size_of::<Client>()] = [0; size_of::<Client>()];

/// The cycle counter, extended to 64 bits, as embassy-time's clock.
struct CycleCounter {
    latest: Mutex<Cell<u64>>,
}

impl embassy_time_driver::Driver for CycleCounter {
    fn now(&self) -> u64 {
        critical_section::with(|cs| {
            let latest = self.latest.borrow(cs);
            let mut now = (latest.get() & !0xFFFF_FFFF) | u64::from(board::cycles());
            if now < latest.get() {
                now += 1 << 32;
            }
            latest.set(now);
            now
        })
    }

    fn schedule_wake(&self, _at: u64, waker: &Waker) {
        waker.wake_by_ref();
    }
}

embassy_time_driver::time_driver_impl!(static DRIVER: CycleCounter = CycleCounter {
    latest: Mutex::new(Cell::new(0)),
});

/// Reports 0xDEAD and stops. In the binary's code, never in its run: what the compiler cannot
/// rule out is the state machines of async functions (`async fn resumed after completion`) and
/// embassy-time's `Timer::after_micros` (an overflow check on `now + duration`). The wrapper and
/// the engine have none of their own: their shared state is reached through `try_borrow_mut`.
#[panic_handler]
fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
    board::report(0xDEAD);
    loop {
        core::hint::spin_loop();
    }
}

/// Polls `fut` until it is done.
fn block_on<F: Future>(fut: F) -> F::Output {
    let mut fut = pin!(fut);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return v;
        }
    }
}

/// One call: 100 µs on the bus, then the downstream's answer from the input pin.
fn call(client: &Client) -> impl Future<Output = Result<(), reliable_embassy::Error<()>>> + '_ {
    client.call(
        |_: &()| ErrorClass::Transient,
        || async {
            Timer::after_micros(100).await;
            if board::answered() { Ok(()) } else { Err(()) }
        },
    )
}

/// The size of what `make` returns.
const fn returned_size<A, F>(_: fn(A) -> F) -> usize {
    size_of::<F>()
}

/// The call's future, as the size of this symbol: the RAM a task awaiting it needs for it.
#[used]
#[unsafe(no_mangle)]
static RAM_PER_CALL: [u8; returned_size(call)] = [0; returned_size(call)];

fn run() -> ! {
    let Ok(breaker) = CircuitBreaker::with_storage(&policies::BREAKER_POLICY) else {
        board::report(0xDEAD);
        loop {
            core::hint::spin_loop();
        }
    };
    let budget = TokenBucket::new(policies::BUDGET_POLICY);
    let state = State::new(breaker, budget, u64::from(board::cycles()));
    let client: Client = Reliable::new(state, &PLAN, EmbassyClock);
    loop {
        let answer = block_on(call(&client));
        board::report(match answer {
            Ok(()) => 1,
            Err(e) => match e.retry_after() {
                Some(wait) => 0x8000_0000 | wait.as_millis() as u32,
                None => 2,
            },
        });
    }
}

//! The firmware program without reliable-core: the same start-up, clock, pin reads and reports,
//! with the decisions replaced by the plainest stand-ins. Its `.text` is subtracted from the
//! firmware's to give what the core costs.
#![no_std]
#![no_main]

#[path = "../board.rs"]
mod board;
#[path = "../no_panic.rs"]
mod no_panic;
#[path = "../rt.rs"]
mod rt;

fn run() -> ! {
    let mut clock = board::Clock::default();
    loop {
        let start = clock.ticks();
        if board::answered() {
            board::report(1);
        } else {
            // Wait a fixed time, then report.
            while clock.ticks() < start + 10_000 {}
            board::report(2);
        }
    }
}

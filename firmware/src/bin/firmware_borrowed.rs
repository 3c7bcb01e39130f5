//! The firmware program with a breaker that borrows its policy (`&BreakerPolicy`): the general
//! code, for a policy known only at run time. `firmware` names its policy by type instead.
#![no_std]
#![no_main]

#[path = "../board.rs"]
mod board;
#[path = "../client.rs"]
mod client;
#[path = "../no_panic.rs"]
mod no_panic;
#[path = "../policies.rs"]
mod policies;
#[path = "../rt.rs"]
mod rt;

use client::{BREAKER_POLICY, Breaker};
use reliable_core::breaker::BreakerPolicy;

/// The breaker's size, as the size of this symbol (`nm -S`): the RAM one breaker takes here.
#[used]
#[unsafe(no_mangle)]
static RAM_PER_BREAKER: [u8; size_of::<Breaker<&BreakerPolicy>>()] =
    [0; size_of::<Breaker<&BreakerPolicy>>()];

fn run() -> ! {
    // Only a config error ends the loop: report it and stop.
    let _ = client::client(&BREAKER_POLICY);
    board::report(0xDEAD);
    loop {}
}

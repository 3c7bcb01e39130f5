//! A client on a Cortex-M4F calling a flaky downstream through reliable-core (the loop is in
//! `client.rs`). The breaker names its policy by a zero-sized type that borrows the one policy in
//! flash: the breaker stores no pointer, and the compiler sees the policy's values, so code for
//! rules this policy leaves off (slow start, time windows, …) is left out. This is the way to
//! use the core when the policy is known at compile time; `firmware_borrowed` is the same
//! program with a `&BreakerPolicy`, the general code for a policy known only at run time.
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

use core::borrow::Borrow;

use client::{BREAKER_POLICY, Breaker};
use reliable_core::breaker::BreakerPolicy;

/// The breaker's policy: [`BREAKER_POLICY`], in flash.
#[derive(Clone, Copy, Debug)]
struct FlashPolicy;

impl Borrow<BreakerPolicy> for FlashPolicy {
    fn borrow(&self) -> &BreakerPolicy {
        &BREAKER_POLICY
    }
}

/// The breaker's size, as the size of this symbol (`nm -S`): the RAM one breaker takes here.
#[used]
#[unsafe(no_mangle)]
static RAM_PER_BREAKER: [u8; size_of::<Breaker<FlashPolicy>>()] =
    [0; size_of::<Breaker<FlashPolicy>>()];

fn run() -> ! {
    // Only a config error ends the loop: report it and stop.
    let _ = client::client(FlashPolicy);
    board::report(0xDEAD);
    loop {}
}

//! reliable-core's hot paths next to the peer crates a user would otherwise pick, in one run.
//!
//! `cargo bench -p reliable-benches` runs everything; `cargo bench -p reliable-benches -- --test`
//! runs each benchmark once (CI's smoke test); `cargo run -p reliable-benches --example table`
//! turns the last run into the README's table. See `benches/README.md` for what each benchmark
//! measures and how the work is made the same for each crate.
//!
//! Every input that could be constant-folded goes through `black_box`, and so does every output.
//! reliable-core never reads a clock: its benchmarks pass `now` in (advancing each iteration, as a
//! real clock would), so the clock read is *excluded*; the peers read the clock themselves where
//! they need it. The `baselines` group measures `Instant::now()` so a reader can add it.

use criterion::{criterion_group, criterion_main};

mod backoff;
mod baselines;
mod breaker;
mod budget;
mod hedge_limit;
mod shared;
mod throttle;

criterion_group!(
    benches,
    breaker::closed_success,
    breaker::closed_every_fifth_fails,
    breaker::open_rejection,
    breaker::half_open_probe,
    shared::two_threads,
    backoff::next_delay,
    budget::record_and_check,
    throttle::decide_and_record,
    hedge_limit::hedge_decision,
    hedge_limit::ledger_draw,
    hedge_limit::limiter_acquire_release,
    baselines::baselines,
);
criterion_main!(benches);

//! The `sim` command: compare retry policies under a storm. See `sim --help`.
#![forbid(unsafe_code)]

fn main() {
    std::process::exit(sim::cli_main());
}

//! The `sim` command: compare retry policies under a storm. See `sim --help`.
#![forbid(unsafe_code)]

mod cli;

fn main() {
    std::process::exit(cli::main());
}

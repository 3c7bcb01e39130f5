//! The `sim` command (the simulator arrives with its own issue).

fn main() {
    eprintln!("sim: the simulator is not built yet");
    std::process::exit(2);
}

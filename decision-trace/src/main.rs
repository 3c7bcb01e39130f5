//! Prints the decision trace on the host, for comparison with the emulated Cortex-M's.
use std::io::Write;

struct Stdout(
    std::io::BufWriter<std::io::StdoutLock<'static>>,
    std::io::Result<()>,
);

impl decision_trace::Out for Stdout {
    fn put(&mut self, bytes: &[u8]) {
        if self.1.is_ok() {
            self.1 = self.0.write_all(bytes);
        }
    }
}

fn main() -> std::io::Result<()> {
    let mut out = Stdout(std::io::BufWriter::new(std::io::stdout().lock()), Ok(()));
    decision_trace::run(&mut out);
    out.1?;
    out.0.flush()
}
